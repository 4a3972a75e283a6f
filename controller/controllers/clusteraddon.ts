// The live ClusterAddon controller: one key per Cluster API Cluster ("namespace/name"). It reads
// the caches (Cluster, ClusterAddon, ClusterStackRelease, ClusterStack, addon Kustomizations and
// HelmReleases, the objects the Cluster's refs point at), the release tree at the release's commit and the state of
// the Cluster's fleet branch (tip + per-addon tree ids, from FleetWriter.branch() on the first
// reconcile of the key), calls the pure reconcileClusterAddon with `now`, and applies what it
// returns: the ClusterAddon (owned by the Cluster), its finalizers, merge patches, the Cluster's
// GitRepository and addon Kustomizations (owned by the ClusterAddon), deletes and status.
// Branch changes are not written per key: they are collected for a batch window (from the
// first change waiting; later changes do not extend it) and written by ONE FleetWriter.write (one atomic push of every
// changed branch). After the write the per-Cluster state is taken from its result, the written
// keys are requeued (they now see their addons on the branch and create their Kustomizations),
// and ONLY the GitRepositories of the Clusters whose branch moved are annotated with
// reconcile.fluxcd.io/requestedAt so Flux fetches them at once.
//
// Memory: per Cluster a few git ids, never file contents of the fleet. Crash safety: nothing is
// remembered between processes: branch state is read from Git (refresh() once at start), a batch
// lost in a crash is derived again from the Clusters, and the writer's trees are deterministic
// (an unpushed commit is redone with the same tree, not duplicated).
import { existsSync, rmSync } from 'node:fs';
import type { ClusterAddon } from '../api/clusteraddon.ts';
import { type ClusterRef, clusterRef } from '../api/clusterrefs.ts';
import type { ClusterStack } from '../api/clusterstack.ts';
import type { ClusterStackRelease } from '../api/clusterstackrelease.ts';
import {
  FLUX_HELM_API_VERSION,
  FLUX_KUSTOMIZE_API_VERSION,
  FLUX_SOURCE_API_VERSION,
  type GitRepository,
  type HelmRelease,
  type Kustomization,
} from '../api/flux.ts';
import { API_VERSION, LABEL_ADDON, LABEL_CLUSTER, RECONCILE_REQUEST_ANNOTATION } from '../api/meta.ts';
import type { ReleaseTree } from '../api/release.ts';
import type { BranchState, FleetWriter } from '../gitops/branches.ts';
import { branchTreeIds } from '../gitops/objects.ts';
import { addonReleaseTag } from '../reconcilers/addonrelease.ts';
import {
  type BranchUpdate,
  type ClusterAddonInput,
  type ClusterAddonResult,
  clusterAddonReconcileInputs,
  clusterStackAddonInputs,
  DEFAULT_BRANCH_PREFIX,
  FINALIZER_FLEET_CLEANUP,
  type FleetSettings,
  fleetBranchName,
  Reason,
  reconcileClusterAddon,
  releaseAddonInputs,
} from '../reconcilers/clusteraddon.ts';
import { clusterUse } from '../reconcilers/clusterstack.ts';
import { reconcileRequested } from '../reconcilers/reconcilerequest.ts';
import { clusterStackOfTag } from '../reconcilers/sharing.ts';
import {
  clusterGitRepositoryName,
  FLUX_SHARD_NAMESPACE_LABEL,
  type FluxTemplates,
  MANAGED_BY_LABELS,
} from '../releases/flux.ts';
import type { TenancyPolicy } from '../releases/tenancy.ts';
import {
  type PlainObject,
  RenderCache,
  RenderPool,
  type RenderPoolOptions,
  type RenderResult,
  withBoundedRenders,
} from '../rendering/index.ts';
import { isNotFound, type KubeClient, type KubeObject } from '../runtime/client.ts';
import { type Clock, realClock } from '../runtime/clock.ts';
import { formatTime, markNotReady } from '../runtime/conditions.ts';
import type { Controller, ReconcileContext, ReconcileResult } from '../runtime/controller.ts';
import type { Informer } from '../runtime/informer.ts';
import { errorFields } from '../runtime/logging.ts';
import type { Manager } from '../runtime/manager.ts';
import { releaseTreeKey, withReleaseChartDependencies } from '../sources/chartrepo.ts';
import { type GitCredentials, SourceError } from '../sources/git.ts';
import { type ReleaseTreeFetcher, releaseTreeFetcher } from '../sources/releasetree.ts';
import { isSubset, readyCondition, sameJson, secretCredentials, sourceSecretCredentials } from './common.ts';
import { FleetBatch } from './fleetbatch.ts';
import { namespaceInformer, namespaceLabelsChanged, namespaceLabelsOf } from './namespaces.ts';
import { requestFluxSourcesFetch } from './reconcilerequest.ts';
import { servedClusterApiVersion } from './releasepipeline.ts';

const CLUSTER_INDEX = 'clusteraddon/cluster';
const CLASS_INDEX = 'clusteraddon/class';
const NS_INDEX = 'clusteraddon/namespace';
const REF_INDEX = 'clusteraddon/ref';
/** Clusters naming a ClusterClass of another namespace: by their own namespace, and by the class's. */
const FOREIGN_BY_NS_INDEX = 'clusteraddon/foreign-by-namespace';
const FOREIGN_BY_CLASS_NS_INDEX = 'clusteraddon/foreign-by-class-namespace';
const NS_BY_STACK_INDEX = 'clusteraddon/clusterstack-namespace';
/** Concurrent requestedAt patches after a write. */
const FETCH_REQUEST_CONCURRENCY = 8;
/** Backoff of a Cluster waiting for the objects its refs point at: 2 s doubling to 5 min. */
export const REF_BACKOFF = { initialMs: 2_000, maxMs: 300_000 } as const;

/** The requeue delay of the `attempt`-th reconcile in a row that found a ref missing (0-based). */
export function refBackoffMs(attempt: number): number {
  return Math.min(REF_BACKOFF.maxMs, REF_BACKOFF.initialMs * 2 ** Math.min(attempt, 20));
}

/**
 * Test fault point (acceptance: "kill the controller between commit and push"): while `markerFile`
 * exists, the process removes it and exits right after the local fleet commit, before the push.
 * Enabled only through STACKFLUX_TEST_CRASH_AFTER_FLEET_COMMIT in `stackflux run`.
 */
export function crashAfterCommitHook(markerFile: string): () => void {
  return () => {
    if (!existsSync(markerFile)) return;
    rmSync(markerFile, { force: true });
    process.stderr.write('fault point: exiting between fleet commit and push\n');
    process.exit(3);
  };
}

export interface ClusterAddonControllerOptions {
  /** Watch only this namespace (default: all). */
  namespace?: string;
  fleet: {
    url: string;
    /** Prefix of the Clusters' branches, `<prefix><namespace>/<cluster>` (default "stackflux/"). */
    branchPrefix?: string;
    /**
     * Secret with the fleet repo credentials (username/password or token) the controller pushes
     * with. Each Cluster's GitRepository references a Secret of the same name in the Cluster's
     * namespace (Flux reads with it); create it there when the repo needs auth.
     */
    secret?: { namespace: string; name: string };
    /** Flux interval of each Cluster's GitRepository (a push requests a fetch at once). */
    interval?: string;
    /** Flux interval of the addon Kustomizations (default: the ClusterStack's interval). */
    addonInterval?: string;
    /**
     * Flux shards (≥ 2: each Cluster's Flux objects get sharding.fluxcd.io/key=shard<k>; ≥ 1: a
     * Namespace labelled stackflux.io/flux-shard=<key> puts its Clusters' Flux objects on <key>).
     */
    fluxShards?: number;
  };
  /** Builds the fleet writer once the fleet credentials are read. */
  writer: (credentials: GitCredentials | undefined) => FleetWriter;
  cacheDir: string;
  /** Reads release trees (the release pipeline's, so every source reads alike; default: no OCI client). */
  fetchTree?: ReleaseTreeFetcher;
  /** --github-api-url: where releases read from GitHub release assets are downloaded. */
  githubApiUrl?: string;
  templates: FluxTemplates;
  /** --default-service-account and --allowed-chart-hosts (default: neither). */
  tenancy?: TenancyPolicy;
  concurrency?: number;
  /**
   * Limits of addon renders (time budget, output and memory caps, render processes); renders run in
   * a pool of processes so a hostile template cannot block or abort this one. Defaults:
   * rendering/limits.ts.
   */
  render?: RenderPoolOptions;
  /** Window of fleet writes (default 2 s), from the first change waiting; not extended. */
  batchWindowMs?: number;
  /** Key of the Go engine's per-render seeds, shared with the impact controller (rendering/determinism.ts). */
  renderSeedKey?: string;
  clock?: Clock;
}

export interface ClusterAddonControllerHandle {
  controller: Controller;
  /** Writes the pending batch now (tests, shutdown). */
  flush(): Promise<void>;
}

type Obj = KubeObject;

/** JSON without undefined members (what the API server would store). */
function plain<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}

/** Whether applying desired would change existing (labels, annotations, owners, spec). */
function needsApply(existing: Obj | undefined, desired: Obj): boolean {
  if (existing === undefined) return true;
  const { metadata, status: _status, ...rest } = plain(desired);
  const { ownerReferences, labels, annotations } = metadata;
  return !isSubset(plain({ ...rest, metadata: { ownerReferences, labels, annotations } }), existing);
}

/** Events.k8s.io limits an Event's note to 1 KiB. */
const NOTE_MAX = 1024;

/**
 * The note of one push's Event for one ClusterStack: how many Clusters' branches moved, why (the
 * three most frequent reasons), and the first Clusters by name. At most 1 KiB.
 */
export function pushNote(changes: readonly { update: BranchUpdate }[]): string {
  const reasons = new Map<string, number>();
  for (const { update } of changes) {
    reasons.set(update.change.reason, (reasons.get(update.change.reason) ?? 0) + 1);
  }
  const why = [...reasons]
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
    .map(([reason, n]) => `${n} × ${reason}`);
  const shownWhy = why.slice(0, 3).join('; ') + (why.length > 3 ? `; ${why.length - 3} other reason(s)` : '');
  const names = changes.map((c) => `${c.update.change.namespace}/${c.update.change.cluster}`).sort();
  const shown = names.slice(0, 10).join(', ') + (names.length > 10 ? ` and ${names.length - 10} more` : '');
  const note = `${changes.length} Cluster fleet branch(es) moved in one push (${shownWhy}): ${shown}; each branch's git log says what changed`;
  return note.length <= NOTE_MAX ? note : `${note.slice(0, NOTE_MAX - 1)}…`;
}

function sameSet(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x) => b.includes(x));
}

/** The fleet back-off after `failures` failed fetches or writes in a row. */
const FLEET_MAX_BACKOFF_MS = 5 * 60_000;
export function fleetBackoffMs(windowMs: number, failures: number): number {
  if (failures <= 0) return 0;
  return Math.min(FLEET_MAX_BACKOFF_MS, Math.max(windowMs, 1_000) * 2 ** Math.min(failures - 1, 16));
}

/** The fleet failure of a branch the fleet host refused (shown in its ClusterAddon's Ready). */
export function refusedBranchFailure(
  hostReason: string,
  backoffMs: number,
): { reason: string; message: string } {
  return {
    reason: 'FleetPushRejected',
    message: `the fleet host refused the branch (${hostReason}); it stays at its previous commit, next try in ${Math.ceil(backoffMs / 1000)}s or at once when the Cluster's rendered content changes`,
  };
}

export async function setupClusterAddonController(
  manager: Manager,
  opts: ClusterAddonControllerOptions,
): Promise<ClusterAddonControllerHandle> {
  const clock = opts.clock ?? realClock;
  const client: KubeClient = manager.client;
  const log = manager.log.child({ controller: 'clusteraddon' });
  const scope = opts.namespace ? { namespace: opts.namespace } : {};
  const managedBy = Object.entries(MANAGED_BY_LABELS)
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
  const windowMs = opts.batchWindowMs ?? 2_000;
  const branchPrefix = opts.fleet.branchPrefix ?? DEFAULT_BRANCH_PREFIX;
  const fluxShards = opts.fleet.fluxShards !== undefined && opts.fleet.fluxShards >= 1;
  const fleetSettings: FleetSettings = {
    url: opts.fleet.url,
    branchPrefix,
    ...(opts.fleet.secret !== undefined ? { secretRef: opts.fleet.secret.name } : {}),
    ...(opts.fleet.interval !== undefined ? { interval: opts.fleet.interval } : {}),
    ...(opts.fleet.addonInterval !== undefined ? { addonInterval: opts.fleet.addonInterval } : {}),
    ...(fluxShards ? { fluxShards: opts.fleet.fluxShards } : {}),
  };

  // ---- caches (shared with the release pipeline where the selectors are the same; sharded by --shard)
  const clusterApiVersion = (await servedClusterApiVersion(manager)) ?? 'cluster.x-k8s.io/v1beta2';
  const clusters = manager.shardedInformer<Obj>(clusterApiVersion, 'Cluster', scope);
  const clusterAddons = manager.shardedInformer<ClusterAddon & Obj>(API_VERSION, 'ClusterAddon', scope);
  const releases = manager.shardedInformer<ClusterStackRelease & Obj>(
    API_VERSION,
    'ClusterStackRelease',
    scope,
  );
  const clusterStacks = manager.shardedInformer<ClusterStack & Obj>(API_VERSION, 'ClusterStack', scope);
  // The Flux objects of a Cluster carry its stackflux shard label, or with --flux-shards the Flux
  // shard label (sharding.fluxcd.io/key=shard<k>, for Flux's own shards): then they are selected
  // as every per-Cluster Flux object of stackflux, whatever its key.
  const fluxInformer = <T extends Obj>(apiVersion: string, kind: string): Informer<T> =>
    fluxShards
      ? manager.informer<T>(apiVersion, kind, { ...scope, labelSelector: `${managedBy},${LABEL_CLUSTER}` })
      : manager.shardedInformer<T>(apiVersion, kind, { ...scope, labelSelector: managedBy });
  const withOwnShard = <T extends Obj>(o: T): T => (fluxShards ? o : manager.withShardLabel(o));
  const kustomizations = fluxInformer<Kustomization & Obj>(FLUX_KUSTOMIZE_API_VERSION, 'Kustomization');
  const gitRepositories = fluxInformer<GitRepository & Obj>(FLUX_SOURCE_API_VERSION, 'GitRepository');
  const nsOf = (o: Obj): string => o.metadata.namespace ?? '';
  clusters.addIndexer(NS_INDEX, (c) => [nsOf(c)]);
  // By the class, and while a rollout prepares the Cluster also by the release its addons come from.
  clusters.addIndexer(CLASS_INDEX, (c) => {
    const use = clusterUse(c);
    if (use === undefined) return [];
    const ns = use.classNamespace ?? nsOf(c);
    const addonClass = addonReleaseTag(c)?.clusterClassName;
    return [...new Set([use.className, ...(addonClass !== undefined ? [addonClass] : [])])].map(
      (name) => `${ns}/${name}`,
    );
  });
  const foreignClassNs = (c: Obj): string | undefined => {
    const ns = clusterUse(c)?.classNamespace;
    return ns !== undefined && ns !== nsOf(c) ? ns : undefined;
  };
  clusters.addIndexer(FOREIGN_BY_NS_INDEX, (c) => (foreignClassNs(c) !== undefined ? [nsOf(c)] : []));
  clusters.addIndexer(FOREIGN_BY_CLASS_NS_INDEX, (c) => {
    const ns = foreignClassNs(c);
    return ns !== undefined ? [ns] : [];
  });
  clusterStacks.addIndexer(NS_BY_STACK_INDEX, (cs) => [nsOf(cs)]);
  // Labels of the namespaces of such Clusters: a ClusterStack serves them only when it opts in.
  const namespaces = namespaceInformer(manager);
  clusters.addIndexer(REF_INDEX, (c) =>
    (['controlPlaneRef', 'infrastructureRef'] as const).flatMap((f) => {
      const r = clusterRef(c, f);
      return r?.ok ? [`${r.ref.namespace}/${r.ref.kind}/${r.ref.name}`] : [];
    }),
  );
  const clusterKeyOf = (o: Obj): string[] => {
    const cluster = o.metadata.labels?.[LABEL_CLUSTER];
    return cluster !== undefined && o.metadata.labels?.[LABEL_ADDON] !== undefined
      ? [`${nsOf(o)}/${cluster}`]
      : [];
  };
  kustomizations.addIndexer(CLUSTER_INDEX, clusterKeyOf);
  // HelmReleases of Helm-chart addons: written by kustomize-controller from the fleet branch, so
  // they carry stackflux's labels but no shard label. Watched only where helm-controller's CRD is
  // served (without it a Helm addon's Kustomization reports that the kind is unknown).
  const helmServed = await client.resource(FLUX_HELM_API_VERSION, 'HelmRelease').then(
    () => true,
    () => false,
  );
  const helmReleases = helmServed
    ? manager.informer<HelmRelease & Obj>(FLUX_HELM_API_VERSION, 'HelmRelease', {
        ...scope,
        labelSelector: `${managedBy},${LABEL_CLUSTER}`,
      })
    : undefined;
  helmReleases?.addIndexer(CLUSTER_INDEX, clusterKeyOf);

  // ---- addon renders: in child processes, bounded in time, memory and output, fair per namespace
  const renderPool = new RenderPool(opts.render);
  // csctl renders (Helm's engine) kept across reconciles of the same inputs.
  const renderCache = new RenderCache();

  // ---- the fleet writer and the state of each Cluster's branch (ids only, no file contents)
  let writer: Promise<FleetWriter> | undefined;
  const fleetWriter = (): Promise<FleetWriter> => {
    writer ??= (async () => {
      const secret = opts.fleet.secret;
      const creds =
        secret !== undefined ? await secretCredentials(client, secret.namespace, secret.name) : undefined;
      return opts.writer(creds);
    })().catch((err: unknown) => {
      writer = undefined;
      throw err;
    });
    return writer;
  };
  // ---- back-off of the fleet repository as a whole: after a failed fetch or write, no network
  // attempt before fleetBlockedUntil (the batch window doubled per failure in a row, at most
  // FLEET_MAX_BACKOFF_MS); reconciles in between see the last error without asking the remote.
  let fleetFailuresInRow = 0;
  let fleetBlockedUntil = 0;
  let lastFleetError: unknown;
  const fleetFailed = (err: unknown): void => {
    fleetFailuresInRow += 1;
    lastFleetError = err;
    fleetBlockedUntil = clock.now() + fleetBackoffMs(windowMs, fleetFailuresInRow);
  };
  const fleetSucceeded = (): void => {
    fleetFailuresInRow = 0;
    fleetBlockedUntil = 0;
    lastFleetError = undefined;
  };
  let refreshed: Promise<void> | undefined;
  /** One fetch of every branch under the prefix: at start and after a failed write. */
  const refreshOnce = (): Promise<void> => {
    if (refreshed === undefined && lastFleetError !== undefined && clock.now() < fleetBlockedUntil)
      return Promise.reject(lastFleetError);
    refreshed ??= (async () => {
      const started = clock.now();
      await (await fleetWriter()).refresh();
      log.info({ ms: Math.round(clock.now() - started) }, 'fleet branches fetched');
    })().catch((err: unknown) => {
      refreshed = undefined;
      fleetFailed(err);
      throw err;
    });
    return refreshed;
  };
  /** key → its branch as last read or written (null: known absent). */
  const branches = new Map<string, BranchState | null>();
  const branchOf = async (key: string, namespace: string, name: string): Promise<BranchState | undefined> => {
    const known = branches.get(key);
    if (known !== undefined) return known ?? undefined;
    await refreshOnce();
    const state = await (await fleetWriter()).branch(fleetBranchName(branchPrefix, namespace, name));
    branches.set(key, state ?? null);
    return state;
  };

  // ---- release trees (on disk by commit; parsed copies kept in memory, bounded)
  const trees = new Map<string, ReleaseTree>();
  const fetchTree =
    opts.fetchTree ??
    releaseTreeFetcher(opts.githubApiUrl !== undefined ? { githubApiUrl: opts.githubApiUrl } : {});
  const treeOf = async (release: ClusterStackRelease): Promise<ReleaseTree | undefined> => {
    const commit = release.status?.commit;
    if (commit === undefined) return undefined;
    const src = release.spec.source;
    const key = `${src.url}\n${commit}\n${src.path ?? ''}`;
    const cached = trees.get(key);
    if (cached !== undefined) return cached;
    const creds =
      src.secretRef !== undefined
        ? await sourceSecretCredentials(client, release.metadata.namespace ?? '', src.secretRef.name)
        : undefined;
    const fetched = await fetchTree(src, release.spec.tag, commit, opts.cacheDir, creds);
    // Chart dependencies the release controller fetched when it validated the release (on disk).
    const tree = await withReleaseChartDependencies(fetched, release.spec.tag, {
      cacheDir: opts.cacheDir,
      treeKey: releaseTreeKey(src.url, commit, src.path ?? ''),
      ...(opts.tenancy !== undefined ? { tenancy: opts.tenancy } : {}),
      cacheOnly: true,
    });
    if (trees.size >= 64) {
      const first = trees.keys().next().value;
      if (first !== undefined) trees.delete(first);
    }
    trees.set(key, tree);
    return tree;
  };

  // ---- objects the Cluster's refs point at (any kind: informers created on first use)
  let controller: Controller | undefined;
  const groupVersions = new Map<string, Promise<string | undefined>>();
  const refInformers = new Map<string, Informer<Obj>>();
  const apiVersionOf = async (ref: ClusterRef): Promise<string | undefined> => {
    if (ref.apiVersion !== undefined) return ref.apiVersion;
    const group = ref.group;
    let p = groupVersions.get(group);
    if (p === undefined) {
      p = client
        .request<{ preferredVersion?: { groupVersion?: string } }>('GET', `/apis/${group}`)
        .then((g) => g.preferredVersion?.groupVersion)
        .catch(() => undefined);
      groupVersions.set(group, p);
      void p.then((v) => {
        if (v === undefined) groupVersions.delete(group);
      });
    }
    return p;
  };
  /**
   * The object a ref points at. `pending`: not (yet) known, retried with backoff; `problem`: why it
   * cannot be read (kind not served, the RBAC does not allow listing it), for the condition. Ref
   * informers are optional: a kind that cannot be listed never makes /readyz fail.
   */
  const refObject = async (
    cluster: Obj,
    field: 'controlPlaneRef' | 'infrastructureRef',
  ): Promise<{ object: PlainObject | undefined; pending: boolean; problem?: string }> => {
    const followed = clusterRef(cluster, field);
    if (followed === undefined) return { object: undefined, pending: false };
    // A ref the shared rule refuses is never read: the ClusterAddon says why (RefsNotReadable).
    if (!followed.ok) return { object: undefined, pending: false, problem: followed.problem };
    const ref = followed.ref;
    const apiVersion = await apiVersionOf(ref);
    if (apiVersion === undefined) {
      return {
        object: undefined,
        pending: true,
        problem: `${field} ${ref.kind} ${ref.name}: API group ${ref.group} is not served`,
      };
    }
    const key = `${apiVersion}/${ref.kind}`;
    let inf = refInformers.get(key);
    if (inf === undefined) {
      try {
        await client.resource(apiVersion, ref.kind);
      } catch {
        return {
          object: undefined,
          pending: true,
          problem: `${field} ${ref.kind} ${ref.name}: kind ${ref.kind} is not served in ${apiVersion}`,
        };
      }
      inf = manager.informer<Obj>(apiVersion, ref.kind, { ...scope, optional: true });
      refInformers.set(key, inf);
      manager.watch(controller as Controller, inf, (o) =>
        clusters
          .byIndex(REF_INDEX, `${nsOf(o)}/${ref.kind}/${o.metadata.name ?? ''}`)
          .map((c) => `${nsOf(c)}/${c.metadata.name ?? ''}`),
      );
    }
    if (!inf.hasSynced()) {
      const failure = inf.lastFailure();
      return {
        object: undefined,
        pending: true,
        ...(failure !== undefined
          ? {
              problem: `${field} ${ref.kind} ${ref.name}: cannot list ${ref.kind} (${apiVersion}): ${failure} (grant stackflux list/watch on the kind, e.g. a ClusterRole labelled stackflux.io/aggregate-to-controller: "true")`,
            }
          : {}),
      };
    }
    const object = inf.getByName(ref.name, ref.namespace);
    return { object: object as PlainObject | undefined, pending: object === undefined };
  };
  /** Reconciles in a row that waited for refs, per key: the backoff of the next try. */
  const refWaits = new Map<string, number>();

  // ---- fleet failures (shown in the ClusterAddon's Ready condition until a write succeeds)
  /** key → why the last fetch or write of its branch failed. */
  const fleetFailures = new Map<string, { reason: string; message: string }>();
  const fleetFailureOf = (err: unknown): { reason: string; message: string } => ({
    reason:
      err instanceof Error && typeof (err as { reason?: unknown }).reason === 'string'
        ? String((err as { reason?: unknown }).reason)
        : 'FleetUnreachable',
    message: err instanceof Error ? err.message : String(err),
  });
  /**
   * Reading the fleet failed before anything could be reconciled: the ClusterAddon (if it
   * exists) says why in Ready=False, everything else in its status is kept.
   */
  const reportFleetReadFailure = async (
    existing: (ClusterAddon & Obj) | undefined,
    err: unknown,
    signal: AbortSignal | undefined,
  ): Promise<void> => {
    if (existing === undefined || existing.metadata.deletionTimestamp !== undefined) return;
    const f = fleetFailureOf(err);
    const status = existing.status ?? {};
    const conditions = markNotReady(
      status.conditions,
      {
        reason: f.reason,
        message: `fleet repository unavailable, retrying with back-off: ${f.message}`,
        ...(existing.metadata.generation !== undefined
          ? { observedGeneration: existing.metadata.generation }
          : {}),
      },
      new Date(clock.now()),
    );
    if (sameJson(conditions, status.conditions ?? [])) return;
    await client
      .applyStatus(
        {
          apiVersion: API_VERSION,
          kind: 'ClusterAddon',
          metadata: { name: existing.metadata.name, namespace: existing.metadata.namespace },
          status: { ...status, conditions },
        },
        { force: true, ...(signal !== undefined ? { signal } : {}) },
      )
      .catch((e: unknown) => {
        if (!isNotFound(e)) log.warn(errorFields(e), 'reporting a fleet failure in the status failed');
      });
  };

  // ---- the batch of branch writes (written only while this replica leads)
  /** A branch change waiting for its batch, and the ClusterStack its push is reported on. */
  interface PendingChange {
    update: BranchUpdate;
    regarding?: ClusterStack & Obj;
  }
  /** Keys whose last fleet write failed: their status says the branch change is pending. */
  const failedWrites = new Set<string>();
  /**
   * Keys whose branch the fleet host refused (issue 22 row 6): the refused content (its tree id)
   * is not pushed again before `until` (back-off per branch); other content goes at once.
   */
  const branchRefusals = new Map<string, { failures: number; until: number; content: string }>();
  const contentOf = (update: BranchUpdate): string =>
    update.files === null ? 'delete' : branchTreeIds(update.files).tree;
  /** How long this key's change must still wait (0: push it now). */
  const refusalHoldMs = (key: string, update: BranchUpdate): number => {
    const refusal = branchRefusals.get(key);
    if (refusal === undefined || clock.now() >= refusal.until) return 0;
    return contentOf(update) === refusal.content ? refusal.until - clock.now() : 0;
  };
  /** The host refused these keys' branches: each backs off on its own, the batch's others landed. */
  const recordRefusals = (
    batch: ReadonlyMap<string, PendingChange>,
    refused: ReadonlyMap<string, string>,
  ): void => {
    for (const [key, { update }] of batch) {
      const reason = refused.get(update.branch);
      if (reason === undefined) continue;
      const failures = (branchRefusals.get(key)?.failures ?? 0) + 1;
      const backoffMs = fleetBackoffMs(windowMs, failures);
      branchRefusals.set(key, { failures, until: clock.now() + backoffMs, content: contentOf(update) });
      fleetFailures.set(key, refusedBranchFailure(reason, backoffMs));
      failedWrites.add(key);
      log.warn(
        { branch: update.branch, failures, reason },
        'the fleet host refused a branch; the others landed',
      );
    }
  };

  /** Takes each written Cluster's branch state from the write's result. */
  const recordWrite = (
    batch: ReadonlyMap<string, PendingChange>,
    after: ReadonlyMap<string, BranchState | null>,
  ) => {
    for (const [key, { update }] of batch) {
      const state = after.get(update.branch);
      if (state === undefined) branches.delete(key);
      else branches.set(key, state);
    }
  };

  /**
   * Events of one push: ONE per ClusterStack whose Clusters' branches moved (a push is one action
   * of the fleet; Events per Cluster would be one more API write per Cluster in every fan-out and
   * rollout, while each Cluster's record is its branch's git log and status.fleetCommit). A
   * Cluster without a ClusterStack (being deleted) gets its Event on its ClusterAddon.
   */
  const reportPush = (
    moved: readonly PendingChange[],
    tips: ReadonlyMap<string, BranchState | null>,
  ): void => {
    const byStack = new Map<string, { regarding: ClusterStack & Obj; changes: PendingChange[] }>();
    for (const change of moved) {
      const { regarding, update } = change;
      if (regarding === undefined) {
        const ca = clusterAddons.get(`${update.change.namespace}/${update.change.cluster}`);
        const tip = tips.get(update.branch);
        if (ca === undefined) continue;
        void manager.events.event(
          ca,
          'Normal',
          'FleetCommitPushed',
          'Commit',
          tip === null || tip === undefined
            ? `fleet branch ${update.branch} deleted`
            : `fleet commit ${tip.commit} pushed to ${update.branch} (${update.change.reason})`,
        );
        continue;
      }
      const stackKey = `${nsOf(regarding)}/${regarding.metadata.name ?? ''}`;
      const entry = byStack.get(stackKey) ?? { regarding, changes: [] };
      entry.changes.push(change);
      byStack.set(stackKey, entry);
    }
    for (const { regarding, changes } of byStack.values()) {
      void manager.events.event(regarding, 'Normal', 'FleetCommitPushed', 'Commit', pushNote(changes));
    }
  };

  const writeBatch = async (batch: ReadonlyMap<string, PendingChange>): Promise<void> => {
    const keys = [...batch.keys()];
    const started = clock.now();
    try {
      const res = await (await fleetWriter()).write(
        [...batch.values()].map(({ update: { branch, files, message } }) => ({ branch, files, message })),
      );
      recordWrite(batch, res.branches);
      const refused = res.refused ?? new Map<string, string>();
      const deferred = new Set(res.deferred ?? []);
      const branchOfKey = (k: string) => batch.get(k)?.update.branch ?? '';
      for (const k of keys) {
        if (refused.has(branchOfKey(k)) || deferred.has(branchOfKey(k))) continue;
        fleetFailures.delete(k);
        failedWrites.delete(k);
        branchRefusals.delete(k);
      }
      recordRefusals(batch, refused);
      const deferredKeys = keys.filter((k) => deferred.has(branchOfKey(k)));
      if (deferredKeys.length > 0) {
        // More refusals than one write narrows: the fleet backs off as a whole, then narrows on.
        const err = new SourceError(
          'FleetPushRejected',
          `not pushed: the fleet host refused the batch and narrowing it stopped at its push budget (${res.deferredReason ?? 'refused'})`,
        );
        for (const k of deferredKeys) {
          fleetFailures.set(k, fleetFailureOf(err));
          failedWrites.add(k);
        }
        fleetFailed(err);
      } else fleetSucceeded();
      const moved = new Set(res.changed);
      const movedKeys = keys.filter((k) => moved.has(batch.get(k)?.update.branch ?? ''));
      log.info(
        {
          clusters: keys.length,
          moved: movedKeys.length,
          pushed: res.pushed,
          attempts: res.attempts,
          refused: refused.size,
          deferred: deferredKeys.length,
          ms: Math.round(clock.now() - started),
        },
        res.pushed ? 'fleet branches pushed' : 'fleet branches already up to date',
      );
      reportPush(
        movedKeys.flatMap((k) => batch.get(k) ?? []),
        res.branches,
      );
      for (const k of keys) controller?.enqueue(k);
      await requestFluxFetch(movedKeys);
    } catch (err) {
      log.error({ ...errorFields(err), clusters: keys.length }, 'fleet write failed; retrying with backoff');
      for (const k of keys) fleetFailures.set(k, fleetFailureOf(err));
      fleetFailed(err);
      // Forget what was read: the next reconciles fetch the branches again.
      for (const k of keys) {
        branches.delete(k);
        failedWrites.add(k);
      }
      refreshed = undefined;
      for (const k of keys) controller?.queue.addRateLimited(k);
    }
  };
  const pending = new FleetBatch<PendingChange>({
    windowMs,
    clock,
    leading: () => manager.isLeader(),
    write: writeBatch,
    // A failing fleet repository is not written again before its back-off ends.
    notBefore: () => fleetBlockedUntil,
    dropped: (keys) =>
      log.warn({ clusters: keys.length }, 'not the leader: fleet writes dropped, not pushed'),
  });
  const flush = (): Promise<void> => pending.flush();

  /**
   * Asks Flux to fetch the GitRepositories of these Clusters now (their branch moved). A Cluster
   * whose GitRepository does not exist yet gets it on its requeued reconcile (Flux fetches a new
   * GitRepository at once).
   */
  const requestFluxFetch = async (keys: readonly string[]): Promise<void> => {
    const at = formatTime(new Date(clock.now()));
    const queue = keys.flatMap((k) => {
      const [namespace = '', name = ''] = k.split('/');
      const repo = clusterGitRepositoryName(name);
      return gitRepositories.get(`${namespace}/${repo}`) !== undefined ? [{ namespace, repo }] : [];
    });
    const worker = async (): Promise<void> => {
      for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
        try {
          await client.mergePatch(FLUX_SOURCE_API_VERSION, 'GitRepository', next.repo, next.namespace, {
            metadata: { annotations: { [RECONCILE_REQUEST_ANNOTATION]: at } },
          });
        } catch (err) {
          if (!isNotFound(err)) log.warn(errorFields(err), 'requesting a fleet fetch from Flux failed');
        }
      }
    };
    await Promise.all(Array.from({ length: FETCH_REQUEST_CONCURRENCY }, worker));
  };

  // ---- reconcile, as named phases

  /** Everything the pure reconcile reads for one key (from the caches, the release tree and Git). */
  const gatherInputs = async (
    key: string,
    namespace: string,
    name: string,
    ctx: ReconcileContext,
  ): Promise<
    { input: ClusterAddonInput; deleting: boolean; fetchError: unknown; refsPending: boolean } | undefined
  > => {
    const cluster = clusters.get(key);
    const existing = clusterAddons.get(key);
    // A requested reconcile (reconcile.fluxcd.io/requestedAt) reads the branch again before re-rendering.
    if (existing !== undefined && reconcileRequested(existing)) branches.delete(key);
    let branch: BranchState | undefined;
    try {
      branch = await branchOf(key, namespace, name);
    } catch (err) {
      await reportFleetReadFailure(existing, err, ctx.signal);
      throw err;
    }
    if (cluster === undefined && existing === undefined && branch === undefined) return undefined;

    const use = cluster !== undefined ? clusterUse(cluster) : undefined;
    const tag = cluster !== undefined ? addonReleaseTag(cluster) : undefined;
    const releaseNs = use?.classNamespace ?? namespace;
    const release = tag !== undefined ? releases.get(`${releaseNs}/${tag.tag}`) : undefined;
    const clusterStack =
      release !== undefined
        ? clusterStacks.get(`${releaseNs}/${release.spec.clusterStack}`)
        : releaseNs !== namespace && tag !== undefined
          ? clusterStackOfTag(clusterStacks.byIndex(NS_BY_STACK_INDEX, releaseNs), tag)
          : undefined;
    const namespaceLabels = releaseNs !== namespace ? namespaceLabelsOf(namespaces, [namespace]) : undefined;
    const namespaceFluxShard = fluxShards
      ? namespaces.get(namespace)?.metadata.labels?.[FLUX_SHARD_NAMESPACE_LABEL]
      : undefined;
    let tree: ReleaseTree | undefined;
    let fetchError: unknown;
    const deleting = cluster === undefined || cluster.metadata.deletionTimestamp !== undefined;
    if (release !== undefined && !deleting) {
      try {
        tree = await treeOf(release);
      } catch (err) {
        fetchError = err;
        ctx.log.warn(errorFields(err), 'fetching the release tree failed');
      }
    }
    // Refs are resolved only for Clusters of a stackflux ClusterClass: another Cluster's refs (to
    // kinds stackflux may not even be allowed to list) are none of its business.
    let refsPending = false;
    const refProblems: string[] = [];
    let controlPlane: PlainObject | undefined;
    let infraCluster: PlainObject | undefined;
    if (cluster !== undefined && !deleting && tag !== undefined) {
      const cp = await refObject(cluster, 'controlPlaneRef');
      const infra = await refObject(cluster, 'infrastructureRef');
      controlPlane = cp.object;
      infraCluster = infra.object;
      refsPending = cp.pending || infra.pending;
      for (const r of [cp, infra]) if (r.problem !== undefined) refProblems.push(r.problem);
    }
    const input: ClusterAddonInput = {
      cluster,
      namespace,
      name,
      ...(controlPlane !== undefined ? { controlPlane } : {}),
      ...(infraCluster !== undefined ? { infraCluster } : {}),
      ...(refProblems.length > 0 ? { refProblems } : {}),
      ...(existing !== undefined ? { clusterAddon: existing } : {}),
      ...(release !== undefined ? { release } : {}),
      ...(tree !== undefined ? { tree } : {}),
      ...(release?.status?.commit !== undefined ? { treeCommit: release.status.commit } : {}),
      ...(clusterStack !== undefined ? { clusterStack } : {}),
      ...(namespaceLabels !== undefined ? { namespaceLabels } : {}),
      ...(namespaceFluxShard !== undefined ? { namespaceFluxShard } : {}),
      kustomizations: kustomizations.byIndex(CLUSTER_INDEX, key),
      ...(helmReleases !== undefined ? { helmReleases: helmReleases.byIndex(CLUSTER_INDEX, key) } : {}),
      branch,
      fleetSettings,
      ...(fleetFailures.has(key) ? { fleetFailure: fleetFailures.get(key) } : {}),
      ...(opts.tenancy !== undefined ? { tenancy: opts.tenancy } : {}),
      templates: opts.templates,
      now: new Date(clock.now()),
      holdUnapproved: true,
      ...(opts.renderSeedKey !== undefined ? { renderSeedKey: opts.renderSeedKey } : {}),
    };
    return { input, deleting, fetchError, refsPending };
  };

  /**
   * The ClusterAddon (owned by the Cluster) with our finalizer in the same apply: the finalizer is
   * there before any fleet file, without a write of its own. Returns it as the API server holds it.
   */
  const applyClusterAddon = async (
    result: ClusterAddonResult,
    existing: (ClusterAddon & Obj) | undefined,
    ctx: ReconcileContext,
  ): Promise<(ClusterAddon & Obj) | undefined> => {
    if (result.clusterAddon === undefined) return existing;
    const desired = manager.withShardLabel(result.clusterAddon as ClusterAddon & Obj);
    const ours = result.finalizers.filter((f) => f === FINALIZER_FLEET_CLEANUP);
    const missing = ours.some((f) => !(existing?.metadata.finalizers ?? []).includes(f));
    if (!missing && !needsApply(existing, desired)) return existing;
    return client.apply(
      { ...desired, metadata: { ...desired.metadata, ...(ours.length > 0 ? { finalizers: ours } : {}) } },
      { force: true, signal: ctx.signal },
    );
  };

  /** The finalizers as the result wants them (a merge patch of the list, leased on the resourceVersion). */
  const setFinalizers = async (
    current: ClusterAddon & Obj,
    finalizers: string[],
    ctx: ReconcileContext,
  ): Promise<(ClusterAddon & Obj) | undefined> => {
    try {
      return await client.mergePatch<ClusterAddon & Obj>(
        API_VERSION,
        'ClusterAddon',
        current.metadata.name ?? '',
        current.metadata.namespace ?? '',
        { metadata: { finalizers, resourceVersion: current.metadata.resourceVersion } },
        { signal: ctx.signal },
      );
    } catch (err) {
      if (!isNotFound(err)) throw err;
      return undefined;
    }
  };

  /** Deletion patches (deletionPolicy Orphan) before anything goes away. */
  const applyPatches = async (result: ClusterAddonResult, ctx: ReconcileContext): Promise<void> => {
    for (const p of result.patches) {
      try {
        await client.mergePatch(p.apiVersion, p.kind, p.name, p.namespace, p.patch, { signal: ctx.signal });
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    }
  };

  /** The Flux objects of one Cluster as last read or written in this reconcile. */
  interface FluxState {
    gitRepository: (GitRepository & Obj) | undefined;
    kustomizations: Map<string, Kustomization & Obj>;
  }

  /**
   * The Cluster's GitRepository and addon Kustomizations (only those that differ from `known`)
   * and the deletes. Returns the objects as known afterwards (the API server's answers) and
   * whether this wrote a new Kustomization.
   */
  const applyFluxObjects = async (
    namespace: string,
    name: string,
    result: ClusterAddonResult,
    known: FluxState,
    ctx: ReconcileContext,
  ): Promise<{ state: FluxState; created: boolean }> => {
    let gitRepository = known.gitRepository;
    if (result.gitRepository !== undefined) {
      const desired = withOwnShard(result.gitRepository as GitRepository & Obj);
      if (needsApply(gitRepository, desired)) {
        gitRepository = await client.apply(desired, { force: true, signal: ctx.signal });
      }
    }
    const staleRepo = result.deleteGitRepository;
    const stale = staleRepo !== undefined ? gitRepositories.get(`${namespace}/${staleRepo}`) : undefined;
    if (staleRepo !== undefined && stale?.metadata.labels?.[LABEL_CLUSTER] === name) {
      await client.delete(FLUX_SOURCE_API_VERSION, 'GitRepository', staleRepo, namespace, {
        signal: ctx.signal,
      });
    }
    const ks = new Map(known.kustomizations);
    let created = false;
    for (const k of result.kustomizations ?? []) {
      const desired = withOwnShard(k as Kustomization & Obj);
      const kname = desired.metadata.name ?? '';
      const have = ks.get(kname);
      if (needsApply(have, desired)) {
        ks.set(kname, await client.apply(desired, { force: true, signal: ctx.signal }));
        created ||= have === undefined;
      }
    }
    for (const kname of result.deleteKustomizations) {
      await client.delete(FLUX_KUSTOMIZE_API_VERSION, 'Kustomization', kname, namespace, {
        signal: ctx.signal,
      });
      ks.delete(kname);
    }
    return { state: { gitRepository, kustomizations: ks }, created };
  };

  /** The status subresource, only when it differs from what the ClusterAddon holds. */
  const writeStatus = async (
    current: ClusterAddon & Obj,
    result: ClusterAddonResult,
    ctx: ReconcileContext,
  ): Promise<void> => {
    if (sameJson(result.status, current.status ?? {})) return;
    try {
      await client.applyStatus(
        {
          apiVersion: API_VERSION,
          kind: 'ClusterAddon',
          metadata: { name: current.metadata.name, namespace: current.metadata.namespace },
          status: result.status,
        },
        { force: true, signal: ctx.signal },
      );
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  };

  const reconcile = async (key: string, ctx: ReconcileContext): Promise<ReconcileResult | undefined> => {
    const namespace = ctx.namespace ?? '';
    const name = ctx.name;
    const gathered = await gatherInputs(key, namespace, name, ctx);
    if (gathered === undefined) {
      pending.delete(key);
      branches.delete(key);
      failedWrites.delete(key);
      branchRefusals.delete(key);
      refWaits.delete(key);
      return undefined;
    }
    const { deleting, fetchError, refsPending } = gathered;
    let input = gathered.input;
    // Addon renders run in the worker pool; the passes below render each input once.
    const renders = new Map<string, RenderResult>();
    const decide = (i: ClusterAddonInput) =>
      withBoundedRenders(
        renderPool,
        (render) => reconcileClusterAddon({ ...i, render }),
        renders,
        { namespace },
        renderCache,
      );
    let result = await decide(input);
    if (result === undefined) return undefined;

    // 1–3. The ClusterAddon (with its finalizer), deletion patches, the Flux objects. When a pass
    // wrote what the reconcile reads (the ClusterAddon it was waiting for, new Kustomizations), the
    // reconcile runs again on the written objects, so the status written below is the state the
    // next event would show anyway: one status write instead of one per intermediate state.
    let current = input.clusterAddon as (ClusterAddon & Obj) | undefined;
    let flux: FluxState = {
      gitRepository: gitRepositories.get(`${namespace}/${clusterGitRepositoryName(name)}`),
      kustomizations: new Map(input.kustomizations.map((k) => [k.metadata.name, k as Kustomization & Obj])),
    };
    for (let pass = 1; ; pass++) {
      const before = current;
      if (!deleting) current = await applyClusterAddon(result, current, ctx);
      await applyPatches(result, ctx);
      const applied = await applyFluxObjects(namespace, name, result, flux, ctx);
      flux = applied.state;
      if (pass >= 3 || current === undefined || (before === current && !applied.created)) break;
      input = { ...input, clusterAddon: current, kustomizations: [...flux.kustomizations.values()] };
      const again = await decide(input);
      if (again === undefined) break;
      result = again;
    }
    const have = current?.metadata.finalizers ?? [];

    // A requested reconcile is passed on to the Flux sources of its Kustomizations (Flux fetches now).
    if (current !== undefined) {
      await requestFluxSourcesFetch(client, current, input.kustomizations, ctx.log, ctx.signal);
    }

    // 4. Status. While a branch change waits for its batch, the status is not written: the key is
    // reconciled again right after the push and writes the state after it (a fan-out would
    // otherwise write "pending" and then the real state for every Cluster). After a failed write
    // the pending state is written, so it is visible.
    const waitsForPush = result.branch !== undefined && !failedWrites.has(key);
    if (current !== undefined && !waitsForPush) await writeStatus(current, result, ctx);

    const ready = readyCondition(result.status);
    if (
      current !== undefined &&
      ready?.status === 'False' &&
      (ready.reason === Reason.RenderFailed ||
        ready.reason === Reason.ValuesInvalid ||
        ready.reason === Reason.RenderCoolingDown)
    ) {
      void manager.events.event(
        current,
        'Warning',
        ready.reason,
        'Render',
        ready.message ?? 'rendering failed',
      );
    }

    // 5. A branch change joins the batch (a newer result of the same key replaces an older one),
    // unless the fleet host refused this very content and its back-off has not ended.
    const holdMs = result.branch !== undefined ? refusalHoldMs(key, result.branch) : 0;
    if (result.branch !== undefined && holdMs > 0) {
      pending.delete(key);
    } else if (result.branch !== undefined) {
      const stack = input.clusterStack as (ClusterStack & Obj) | undefined;
      pending.set(key, { update: result.branch, ...(stack !== undefined ? { regarding: stack } : {}) });
    } else {
      pending.delete(key);
      failedWrites.delete(key);
    }

    // 6. The finalizer comes off last, once the Cluster's branch is known to be gone.
    if (current !== undefined && !sameSet(have, result.finalizers)) {
      await setFinalizers(current, result.finalizers, ctx);
    }

    if (fetchError !== undefined) throw fetchError;
    // A missing ref waits with exponential backoff; its informer's event requeues at once anyway.
    if (refsPending) {
      const attempt = refWaits.get(key) ?? 0;
      refWaits.set(key, attempt + 1);
      return { requeueAfter: refBackoffMs(attempt) };
    }
    refWaits.delete(key);
    return holdMs > 0 ? { requeueAfter: holdMs } : undefined;
  };

  controller = manager.addController({
    name: 'clusteraddon',
    kind: 'Cluster',
    maxConcurrentReconciles: opts.concurrency ?? 4,
    reconcile,
  });
  const c = controller;
  const keyOf = (o: Obj): string => `${nsOf(o)}/${o.metadata.name ?? ''}`;
  manager.watch(c, clusters);
  // Not on its own status writes: the status is this reconcile's output (see clusterAddonReconcileInputs).
  manager.watch(
    c,
    clusterAddons,
    undefined,
    (o, n) => !sameJson(clusterAddonReconcileInputs(o), clusterAddonReconcileInputs(n)),
  );
  manager.watch(c, kustomizations, clusterKeyOf);
  if (helmReleases !== undefined) manager.watch(c, helmReleases, clusterKeyOf);
  // A release or ClusterStack maps to every Cluster that uses it: only a change of what the addon
  // reconcile reads of it requeues them (at 10,000 Clusters, a status write would otherwise mean
  // 10,000 reconciles).
  manager.watch(
    c,
    releases,
    (r) => clusters.byIndex(CLASS_INDEX, `${nsOf(r)}/${r.spec.clusterClass}`).map(keyOf),
    (o, n) => !sameJson(releaseAddonInputs(o), releaseAddonInputs(n)),
  );
  manager.watch(
    c,
    clusterStacks,
    (cs) =>
      [...clusters.byIndex(NS_INDEX, nsOf(cs)), ...clusters.byIndex(FOREIGN_BY_CLASS_NS_INDEX, nsOf(cs))].map(
        keyOf,
      ),
    (o, n) => !sameJson(clusterStackAddonInputs(o), clusterStackAddonInputs(n)),
  );
  // A Namespace's labels decide whether its Clusters of another namespace's ClusterClass are served.
  manager.watch(
    c,
    namespaces,
    (n) => clusters.byIndex(FOREIGN_BY_NS_INDEX, n.metadata.name ?? '').map(keyOf),
    namespaceLabelsChanged,
  );
  // With Flux shards, a Namespace's stackflux.io/flux-shard label moves its Clusters' Flux objects.
  if (fluxShards) {
    manager.watch(
      c,
      namespaces,
      (n) => clusters.byIndex(NS_INDEX, n.metadata.name ?? '').map(keyOf),
      (o, n) =>
        o.metadata.labels?.[FLUX_SHARD_NAMESPACE_LABEL] !== n.metadata.labels?.[FLUX_SHARD_NAMESPACE_LABEL],
    );
  }
  void manager.done.then(() => {
    pending.stop();
    void renderPool.close();
  });

  return { controller: c, flush };
}
