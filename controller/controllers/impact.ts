// The impact of a new rollout target: when a release becomes the target of a Progressive
// ClusterStack (status.latestRelease, Ready), the preview of moving the stack's Clusters to it is
// made once (per release commit) and its counts written to the release's status.impact with their
// own field manager; the rollout holds on them when spec.rollout.requireApproval asks
// (reconcilers/rollout.ts approvalGate). The preview is the one `stackflux preview -n NS` makes:
// the same live snapshot (objects of the namespace, release trees, the fleet branches' files read
// from the fleet repository), the same previewRelease, renders in a bounded render pool that lives
// only while the preview runs.
import type { ClusterAddon } from '../api/clusteraddon.ts';
import type { ClusterStack } from '../api/clusterstack.ts';
import {
  type ClusterStackRelease,
  IMPACT_FIELD_MANAGER,
  type ReleaseImpact,
} from '../api/clusterstackrelease.ts';
import { API_VERSION } from '../api/meta.ts';
import { heldImpacts, impactWanted, recomputedImpact } from '../preview/impact.ts';
import type { KubeObject } from '../runtime/client.ts';
import { realClock } from '../runtime/clock.ts';
import type { Controller, ReconcileContext } from '../runtime/controller.ts';
import { errorFields } from '../runtime/logging.ts';
import type { Manager } from '../runtime/manager.ts';
import { OwnWrites } from '../runtime/ownwrites.ts';
import { impactPreview, TreesPending } from './impact/preview.ts';
import type { ImpactControllerOptions } from './impact/types.ts';

export type { ImpactControllerOptions } from './impact/types.ts';

/** Look again at an impact whose trees are being read, in case the wake-up is lost. */
const TREES_PENDING_RECHECK_MS = 60_000;

/** Look again at a release whose impact write the informer has not shown yet, in case its event is lost. */
const STALE_RECHECK_MS = 2_000;

type Obj = KubeObject;
const HELD_INDEX = 'held-release';

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

  const compute = impactPreview(client, opts);

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
        await compute(cs, release, new Date(started), {
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
