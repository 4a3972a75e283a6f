// The impact of a new rollout target: when a release becomes the target of a Progressive
// ClusterStack (status.latestRelease, Ready), the preview of moving the stack's Clusters to it is
// made once (per release commit) and its counts written to the release's status.impact with their
// own field manager; the rollout holds on them when spec.rollout.requireApproval asks
// (reconcilers/rollout.ts approvalGate). The preview is the one `stackflux preview -n NS` makes:
// the same live snapshot (objects of the namespace, release trees, the fleet branches' files read
// from the fleet repository), the same previewRelease, renders in a bounded render pool that lives
// only while the preview runs.
import { join } from 'node:path';
import type { ClusterAddon } from '../api/clusteraddon.ts';
import type { ClusterStack } from '../api/clusterstack.ts';
import {
  type ClusterStackRelease,
  IMPACT_FIELD_MANAGER,
  type ReleaseImpact,
} from '../api/clusterstackrelease.ts';
import { API_VERSION } from '../api/meta.ts';
import { liveSnapshot } from '../offline/live.ts';
import { PreviewError, previewRelease } from '../preview/core.ts';
import {
  heldImpacts,
  impactError,
  impactSummary,
  impactWanted,
  recomputedImpact,
} from '../preview/impact.ts';
import { previewInputOf } from '../preview/snapshot.ts';
import type { FleetSettings } from '../reconcilers/clusteraddon.ts';
import type { FluxTemplates } from '../releases/flux.ts';
import type { TenancyPolicy } from '../releases/tenancy.ts';
import { RenderPool, type RenderPoolOptions, withPooledRendering } from '../rendering/index.ts';
import type { KubeObject } from '../runtime/client.ts';
import { type Clock, realClock } from '../runtime/clock.ts';
import type { Controller, ReconcileContext } from '../runtime/controller.ts';
import { errorFields } from '../runtime/logging.ts';
import type { Manager } from '../runtime/manager.ts';
import { OwnWrites } from '../runtime/ownwrites.ts';
import { secretCredentials } from './common.ts';
import { type ImpactSources, impactSourceReader } from './impactsources.ts';

export interface ImpactControllerOptions {
  namespace?: string;
  cacheDir: string;
  /** The ClusterAddon controller's fleet: the branches to compare with, rendered as it renders. */
  fleet: FleetSettings;
  /** Secret with the fleet repository's credentials (as the ClusterAddon controller reads it). */
  fleetSecret?: { namespace: string; name: string };
  templates: FluxTemplates;
  tenancy?: TenancyPolicy;
  render?: RenderPoolOptions;
  /** The ClusterAddon controller's render seed key: the impact renders what the live render will. */
  renderSeedKey?: string;
  clock?: Clock;
  /**
   * The pollers' listings and the release controller's background tree reads (absent: the
   * snapshot lists and fetches on its own, as `stackflux diff` does).
   */
  sources?: ImpactSources;
}

/** Look again at an impact whose trees are being read, in case the wake-up is lost. */
const TREES_PENDING_RECHECK_MS = 60_000;

/** Look again at a release whose impact write the informer has not shown yet, in case its event is lost. */
const STALE_RECHECK_MS = 2_000;

/** Some release tree the preview needs is still being read in the background. */
class TreesPending extends Error {}

type Obj = KubeObject;
const HELD_INDEX = 'held-release';

/** The preview of `release` as `stackflux preview clusterstack CS -n NS --release R` makes it. */
async function computeImpact(
  client: Manager['client'],
  opts: ImpactControllerOptions,
  cs: ClusterStack,
  release: ClusterStackRelease,
  now: Date,
  waiter: { id: string; wake: () => void },
): Promise<ReleaseImpact> {
  const namespace = release.metadata.namespace ?? 'default';
  const reader = opts.sources !== undefined ? impactSourceReader(opts.sources, namespace, waiter) : undefined;
  const commit = release.status?.commit ?? '';
  const credentials =
    opts.fleetSecret !== undefined
      ? await secretCredentials(client, opts.fleetSecret.namespace, opts.fleetSecret.name)
      : undefined;
  const snapshot = await liveSnapshot(client, {
    namespace,
    // A cache of its own: the release pipeline's git caches are not shared across code paths.
    cacheDir: join(opts.cacheDir, 'impact'),
    ...(opts.tenancy !== undefined ? { tenancy: opts.tenancy } : {}),
    extraTags: [release.metadata.name],
    ...(reader !== undefined ? { reader } : {}),
    fleet: {
      url: opts.fleet.url,
      branchPrefix: opts.fleet.branchPrefix,
      ...(credentials !== undefined ? { credentials } : {}),
    },
  });
  // A preview without a tree it needs would be wrong, not merely late: wait for the read.
  if (reader?.pending() === true) throw new TreesPending();
  snapshot.settings.fleet = { ...snapshot.settings.fleet, ...opts.fleet };
  try {
    const input = previewInputOf(
      snapshot,
      { namespace, clusterStack: cs.metadata.name, release: release.metadata.name },
      { now, templates: opts.templates, ...(opts.tenancy !== undefined ? { tenancy: opts.tenancy } : {}) },
    );
    const pool = new RenderPool(opts.render);
    try {
      const result = await withPooledRendering(pool, (render, goEngine) =>
        previewRelease({
          ...input,
          render,
          goEngine,
          ...(opts.renderSeedKey !== undefined ? { renderSeedKey: opts.renderSeedKey } : {}),
        }),
      );
      return impactSummary(result, commit, now);
    } finally {
      await pool.close();
    }
  } catch (err) {
    // A preview that cannot be made of these objects is an answer (the rollout asks a person);
    // anything else (the API server, the fleet host) is retried with backoff.
    if (err instanceof PreviewError) return impactError(commit, now, err.message);
    throw err;
  }
}

export async function setupImpactController(
  manager: Manager,
  opts: ImpactControllerOptions,
): Promise<Controller> {
  const clock = opts.clock ?? realClock;
  const client = manager.client;
  const scope = opts.namespace ? { namespace: opts.namespace } : {};
  const clusterStacks = manager.shardedInformer<ClusterStack & Obj>(API_VERSION, 'ClusterStack', scope);
  const releases = manager.shardedInformer<ClusterStackRelease & Obj>(
    API_VERSION,
    'ClusterStackRelease',
    scope,
  );
  // A Cluster held because its live render differs from the impact's asks for a new impact.
  const clusterAddons = manager.shardedInformer<ClusterAddon & Obj>(API_VERSION, 'ClusterAddon', scope);
  clusterAddons.addIndexer(HELD_INDEX, (a) => {
    const held = a.status?.heldRender;
    return held !== undefined ? [`${a.metadata.namespace ?? ''}/${held.release}`] : [];
  });

  // The impact each release was last given here and the one it replaced: until the informer shows
  // the write, the release it holds is stale, and a reconcile on it (a held Cluster's event) would
  // compute the impact once more and replace one a person may be approving.
  const written = new OwnWrites();

  let controller: Controller | undefined;
  const reconcile = async (
    key: string,
    ctx: ReconcileContext,
  ): Promise<{ requeueAfter: number } | undefined> => {
    const release = releases.get(key);
    if (release === undefined) {
      written.forget(key);
      return undefined;
    }
    // Still the impact before this controller's write: the write's event requeues the key.
    if (written.stale(key, release.status?.impact?.digest)) return { requeueAfter: STALE_RECHECK_MS };
    const cs = clusterStacks.get(`${release.metadata.namespace ?? ''}/${release.spec.clusterStack}`);
    const held = heldImpacts(clusterAddons.byIndex(HELD_INDEX, key), release.metadata.name);
    if (cs === undefined || !impactWanted(cs, release, held)) return undefined;
    const started = clock.now();
    let impact: ReleaseImpact;
    try {
      impact = recomputedImpact(
        await computeImpact(client, opts, cs, release, new Date(started), {
          id: key,
          wake: () => controller?.enqueue(key),
        }),
        release.status?.impact,
      );
    } catch (err) {
      if (err instanceof TreesPending) return { requeueAfter: TREES_PENDING_RECHECK_MS };
      ctx.log.warn(errorFields(err), 'computing the impact of the release failed; retrying');
      throw err;
    }
    const { renders, ...counts } = impact;
    ctx.log.info(
      {
        release: release.metadata.name,
        ...counts,
        renders: Object.keys(renders ?? {}).length,
        ms: clock.now() - started,
      },
      'impact of the new rollout target',
    );
    await client.applyStatus(
      {
        apiVersion: API_VERSION,
        kind: 'ClusterStackRelease',
        metadata: { name: release.metadata.name, namespace: release.metadata.namespace },
        status: { impact },
      },
      { fieldManager: IMPACT_FIELD_MANAGER, force: true, signal: ctx.signal },
    );
    if (impact.digest !== undefined) written.record(key, release.status?.impact?.digest, impact.digest);
    return undefined;
  };

  // One preview at a time: each lists a namespace, reads the fleet and renders every Cluster.
  controller = manager.addController({
    name: 'impact',
    kind: 'ClusterStackRelease',
    maxConcurrentReconciles: 1,
    reconcile,
  });
  manager.watch(controller, releases);
  manager.watch(controller, clusterAddons, (a) =>
    a.status?.heldRender !== undefined
      ? [`${a.metadata.namespace ?? ''}/${a.status.heldRender.release}`]
      : [],
  );
  manager.watch(controller, clusterStacks, (cs) =>
    cs.status?.latestRelease !== undefined
      ? [`${cs.metadata.namespace ?? ''}/${cs.status.latestRelease}`]
      : [],
  );
  return controller;
}
