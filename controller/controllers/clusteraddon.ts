// The live ClusterAddon controller: one key per Cluster API Cluster ("namespace/name"). It reads
// the caches (Cluster, ClusterAddon, ClusterStackRelease, ClusterStack, addon Kustomizations, the
// objects the Cluster's refs point at), the release tree at the release's commit and the state of
// the Cluster's fleet branch (tip + per-addon tree ids, from FleetWriter.branch() on the first
// reconcile of the key), calls the pure reconcileClusterAddon with `now`, and applies what it
// returns: the ClusterAddon (owned by the Cluster), its finalizers, merge patches, the Cluster's
// GitRepository and addon Kustomizations (owned by the ClusterAddon), deletes and status.
// Branch changes are not written per key: they are collected for a batch window (debounce,
// bounded by a maximum wait) and written by ONE FleetWriter.write (one atomic push of every
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
import type { ClusterStack } from '../api/clusterstack.ts';
import type { ClusterStackRelease } from '../api/clusterstackrelease.ts';
import {
  FLUX_KUSTOMIZE_API_VERSION,
  FLUX_SOURCE_API_VERSION,
  type GitRepository,
  type Kustomization,
} from '../api/flux.ts';
import { API_VERSION, LABEL_ADDON, LABEL_CLUSTER, RECONCILE_REQUEST_ANNOTATION } from '../api/meta.ts';
import type { ReleaseTree } from '../api/release.ts';
import type { BranchState, FleetWriter } from '../gitops/branches.ts';
import {
  type BranchUpdate,
  type ClusterAddonInput,
  type ClusterAddonResult,
  DEFAULT_BRANCH_PREFIX,
  FINALIZER_FLEET_CLEANUP,
  type FleetSettings,
  fleetBranchName,
  Reason,
  reconcileClusterAddon,
} from '../reconcilers/clusteraddon.ts';
import { clusterUse } from '../reconcilers/clusterstack.ts';
import { reconcileRequested } from '../reconcilers/reconcilerequest.ts';
import { clusterGitRepositoryName, type FluxTemplates, MANAGED_BY_LABELS } from '../releases/flux.ts';
import { tagForClusterClassName } from '../releases/tags.ts';
import type { PlainObject } from '../rendering/index.ts';
import { isNotFound, type KubeClient, type KubeObject } from '../runtime/client.ts';
import { type Clock, realClock, type TimerHandle } from '../runtime/clock.ts';
import { formatTime } from '../runtime/conditions.ts';
import type { Controller, ReconcileContext, ReconcileResult } from '../runtime/controller.ts';
import type { Informer } from '../runtime/informer.ts';
import { errorFields } from '../runtime/logging.ts';
import type { Manager } from '../runtime/manager.ts';
import { fetchReleaseTree, type GitCredentials } from '../sources/git.ts';
import { isSubset, readyCondition, sameJson, secretCredentials } from './common.ts';
import { requestFluxSourcesFetch } from './reconcilerequest.ts';
import { servedClusterApiVersion } from './releasepipeline.ts';

const CLUSTER_INDEX = 'clusteraddon/cluster';
const CLASS_INDEX = 'clusteraddon/class';
const NS_INDEX = 'clusteraddon/namespace';
const REF_INDEX = 'clusteraddon/ref';
/** Concurrent requestedAt patches after a write. */
const FETCH_REQUEST_CONCURRENCY = 8;

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
    /** Flux shards (≥ 2: each Cluster's Flux objects get sharding.fluxcd.io/key=shard<k>). */
    fluxShards?: number;
  };
  /** Builds the fleet writer once the fleet credentials are read. */
  writer: (credentials: GitCredentials | undefined) => FleetWriter;
  cacheDir: string;
  templates: FluxTemplates;
  concurrency?: number;
  /** Debounce window of fleet writes (default 2 s); a batch waits at most 5 windows. */
  batchWindowMs?: number;
  clock?: Clock;
}

export interface ClusterAddonControllerHandle {
  controller: Controller;
  /** Writes the pending batch now (tests, shutdown). */
  flush(): Promise<void>;
}

type Obj = KubeObject;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

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

interface Ref {
  apiVersion?: string;
  apiGroup?: string;
  kind: string;
  name: string;
  namespace?: string;
}

function refOf(cluster: Obj, field: 'controlPlaneRef' | 'infrastructureRef'): Ref | undefined {
  const spec = (cluster as { spec?: unknown }).spec;
  if (!isRecord(spec)) return undefined;
  const r = spec[field];
  if (!isRecord(r) || typeof r.kind !== 'string' || typeof r.name !== 'string' || r.name === '')
    return undefined;
  return {
    kind: r.kind,
    name: r.name,
    ...(typeof r.apiVersion === 'string' ? { apiVersion: r.apiVersion } : {}),
    ...(typeof r.apiGroup === 'string' ? { apiGroup: r.apiGroup } : {}),
    ...(typeof r.namespace === 'string' && r.namespace !== '' ? { namespace: r.namespace } : {}),
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
  const fluxShards = opts.fleet.fluxShards !== undefined && opts.fleet.fluxShards >= 2;
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
  clusters.addIndexer(CLASS_INDEX, (c) => {
    const use = clusterUse(c);
    return use === undefined ? [] : [`${use.classNamespace ?? nsOf(c)}/${use.className}`];
  });
  clusters.addIndexer(REF_INDEX, (c) =>
    (['controlPlaneRef', 'infrastructureRef'] as const).flatMap((f) => {
      const r = refOf(c, f);
      return r === undefined ? [] : [`${r.namespace ?? nsOf(c)}/${r.kind}/${r.name}`];
    }),
  );
  kustomizations.addIndexer(CLUSTER_INDEX, (k) => {
    const cluster = k.metadata.labels?.[LABEL_CLUSTER];
    return cluster !== undefined && k.metadata.labels?.[LABEL_ADDON] !== undefined
      ? [`${nsOf(k)}/${cluster}`]
      : [];
  });

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
  let refreshed: Promise<void> | undefined;
  /** One fetch of every branch under the prefix: at start and after a failed write. */
  const refreshOnce = (): Promise<void> => {
    refreshed ??= (async () => {
      const started = clock.now();
      await (await fleetWriter()).refresh();
      log.info({ ms: Math.round(clock.now() - started) }, 'fleet branches fetched');
    })().catch((err: unknown) => {
      refreshed = undefined;
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
  const treeOf = async (release: ClusterStackRelease): Promise<ReleaseTree | undefined> => {
    const commit = release.status?.commit;
    if (commit === undefined) return undefined;
    const src = release.spec.source;
    const key = `${src.url}\n${commit}\n${src.path ?? ''}`;
    const cached = trees.get(key);
    if (cached !== undefined) return cached;
    const creds =
      src.secretRef !== undefined
        ? await secretCredentials(client, release.metadata.namespace ?? '', src.secretRef.name)
        : undefined;
    const tree = await fetchReleaseTree(
      src.url,
      release.spec.tag,
      commit,
      src.path ?? '',
      opts.cacheDir,
      creds,
    );
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
  const apiVersionOf = async (ref: Ref): Promise<string | undefined> => {
    if (ref.apiVersion !== undefined) return ref.apiVersion;
    const group = ref.apiGroup;
    if (group === undefined || group === '') return 'v1';
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
  const refObject = async (cluster: Obj, field: 'controlPlaneRef' | 'infrastructureRef') => {
    const ref = refOf(cluster, field);
    if (ref === undefined) return { object: undefined, pending: false };
    const apiVersion = await apiVersionOf(ref);
    if (apiVersion === undefined) return { object: undefined, pending: true };
    const key = `${apiVersion}/${ref.kind}`;
    let inf = refInformers.get(key);
    if (inf === undefined) {
      try {
        await client.resource(apiVersion, ref.kind);
      } catch {
        return { object: undefined, pending: true };
      }
      inf = manager.informer<Obj>(apiVersion, ref.kind, scope);
      refInformers.set(key, inf);
      manager.watch(controller as Controller, inf, (o) =>
        clusters
          .byIndex(REF_INDEX, `${nsOf(o)}/${ref.kind}/${o.metadata.name ?? ''}`)
          .map((c) => `${nsOf(c)}/${c.metadata.name ?? ''}`),
      );
    }
    if (!inf.hasSynced()) return { object: undefined, pending: true };
    const object = inf.getByName(ref.name, ref.namespace ?? nsOf(cluster));
    return { object: object as PlainObject | undefined, pending: object === undefined };
  };

  // ---- the batch of branch writes
  /** A branch change waiting for its batch, and the ClusterStack its push is reported on. */
  interface PendingChange {
    update: BranchUpdate;
    regarding?: ClusterStack & Obj;
  }
  const pending = new Map<string, PendingChange>();
  /** Keys whose last fleet write failed: their status says the branch change is pending. */
  const failedWrites = new Set<string>();
  let timer: TimerHandle | undefined;
  let firstPendingAt: number | undefined;
  let chain: Promise<void> = Promise.resolve();
  let stopped = false;

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

  const flushNow = async (): Promise<void> => {
    if (timer !== undefined) clock.clearTimeout(timer);
    timer = undefined;
    firstPendingAt = undefined;
    if (pending.size === 0) return;
    const batch = new Map(pending);
    pending.clear();
    const keys = [...batch.keys()];
    const started = clock.now();
    try {
      const res = await (await fleetWriter()).write(
        [...batch.values()].map(({ update: { branch, files, message } }) => ({ branch, files, message })),
      );
      recordWrite(batch, res.branches);
      const moved = new Set(res.changed);
      const movedKeys = keys.filter((k) => moved.has(batch.get(k)?.update.branch ?? ''));
      for (const k of keys) failedWrites.delete(k);
      log.info(
        {
          clusters: keys.length,
          moved: movedKeys.length,
          pushed: res.pushed,
          attempts: res.attempts,
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
      // Forget what was read: the next reconciles fetch the branches again.
      for (const k of keys) {
        branches.delete(k);
        failedWrites.add(k);
      }
      refreshed = undefined;
      for (const k of keys) controller?.queue.addRateLimited(k);
    }
  };
  const flush = (): Promise<void> => {
    chain = chain.then(flushNow, flushNow);
    return chain;
  };
  const schedule = (): void => {
    if (stopped) return;
    const now = clock.now();
    firstPendingAt ??= now;
    const deadline = firstPendingAt + windowMs * 5;
    const delay = Math.max(0, Math.min(windowMs, deadline - now));
    if (timer !== undefined) clock.clearTimeout(timer);
    timer = clock.setTimeout(() => {
      timer = undefined;
      void flush();
    }, delay);
  };

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
    const branch = await branchOf(key, namespace, name);
    if (cluster === undefined && existing === undefined && branch === undefined) return undefined;

    const use = cluster !== undefined ? clusterUse(cluster) : undefined;
    const tag = use !== undefined ? tagForClusterClassName(use.className) : undefined;
    const releaseNs = use?.classNamespace ?? namespace;
    const release = tag !== undefined ? releases.get(`${releaseNs}/${tag.tag}`) : undefined;
    const clusterStack =
      release !== undefined ? clusterStacks.get(`${releaseNs}/${release.spec.clusterStack}`) : undefined;
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
    let refsPending = false;
    let controlPlane: PlainObject | undefined;
    let infraCluster: PlainObject | undefined;
    if (cluster !== undefined && !deleting) {
      const cp = await refObject(cluster, 'controlPlaneRef');
      const infra = await refObject(cluster, 'infrastructureRef');
      controlPlane = cp.object;
      infraCluster = infra.object;
      refsPending = cp.pending || infra.pending;
    }
    const input: ClusterAddonInput = {
      cluster,
      namespace,
      name,
      ...(controlPlane !== undefined ? { controlPlane } : {}),
      ...(infraCluster !== undefined ? { infraCluster } : {}),
      ...(existing !== undefined ? { clusterAddon: existing } : {}),
      ...(release !== undefined ? { release } : {}),
      ...(tree !== undefined ? { tree } : {}),
      ...(release?.status?.commit !== undefined ? { treeCommit: release.status.commit } : {}),
      ...(clusterStack !== undefined ? { clusterStack } : {}),
      kustomizations: kustomizations.byIndex(CLUSTER_INDEX, key),
      branch,
      fleetSettings,
      templates: opts.templates,
      now: new Date(clock.now()),
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
      return undefined;
    }
    const { deleting, fetchError, refsPending } = gathered;
    let input = gathered.input;
    let result = reconcileClusterAddon(input);
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
      const again = reconcileClusterAddon(input);
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
      (ready.reason === Reason.RenderFailed || ready.reason === Reason.ValuesInvalid)
    ) {
      void manager.events.event(
        current,
        'Warning',
        ready.reason,
        'Render',
        ready.message ?? 'rendering failed',
      );
    }

    // 5. A branch change joins the batch (a newer result of the same key replaces an older one).
    if (result.branch !== undefined) {
      const stack = input.clusterStack as (ClusterStack & Obj) | undefined;
      pending.set(key, { update: result.branch, ...(stack !== undefined ? { regarding: stack } : {}) });
      schedule();
    } else {
      pending.delete(key);
      failedWrites.delete(key);
    }

    // 6. The finalizer comes off last, once the Cluster's branch is known to be gone.
    if (current !== undefined && !sameSet(have, result.finalizers)) {
      await setFinalizers(current, result.finalizers, ctx);
    }

    if (fetchError !== undefined) throw fetchError;
    if (refsPending) return { requeueAfter: 2_000 };
    return undefined;
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
  manager.watch(c, clusterAddons);
  manager.watch(c, kustomizations, (k) => {
    const cluster = k.metadata.labels?.[LABEL_CLUSTER];
    return cluster !== undefined && k.metadata.labels?.[LABEL_ADDON] !== undefined
      ? [`${nsOf(k)}/${cluster}`]
      : [];
  });
  manager.watch(c, releases, (r) =>
    clusters.byIndex(CLASS_INDEX, `${nsOf(r)}/${r.spec.clusterClass}`).map(keyOf),
  );
  manager.watch(c, clusterStacks, (cs) => clusters.byIndex(NS_INDEX, nsOf(cs)).map(keyOf));
  void manager.done.then(() => {
    stopped = true;
    if (timer !== undefined) clock.clearTimeout(timer);
  });

  return { controller: c, flush };
}
