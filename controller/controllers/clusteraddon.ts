// The live ClusterAddon controller: one key per Cluster API Cluster ("namespace/name"). It reads
// the caches (Cluster, ClusterAddon, ClusterStackRelease, ClusterStack, addon Kustomizations, the
// objects the Cluster's refs point at), the release tree at the release's commit and the fleet
// repository as last read, calls the pure reconcileClusterAddon with `now`, and applies what it
// returns: the ClusterAddon (owned by the Cluster), its finalizers, merge patches, the fleet
// GitRepository of the namespace, the addon Kustomizations (owned by the ClusterAddon), deletes and
// status. Fleet folder changes are not written per key: they are collected for a batch window
// (debounce, bounded by a maximum wait) and written by ONE FleetRepo.sync with commitMessage(...).
// After a commit the affected keys are requeued (they now see the folders in the fleet commit and
// create their Kustomizations) and every fleet GitRepository is annotated with
// reconcile.fluxcd.io/requestedAt so Flux fetches the new commit at once.
//
// Crash safety: nothing is remembered between processes. The fleet state is read from Git at
// start, a batch lost in a crash is derived again from the Clusters, and FleetRepo resets its
// working clone to the remote before every sync (an unpushed commit is redone, not duplicated).
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
import { API_VERSION, LABEL_ADDON, LABEL_CLUSTER } from '../api/meta.ts';
import type { ReleaseTree } from '../api/release.ts';
import { type FleetConfig, type FleetHooks, FleetRepo, type FleetSnapshot } from '../gitops/fleet.ts';
import {
  type ClusterChange,
  commitMessage,
  type FleetSettings,
  Reason,
  reconcileClusterAddon,
} from '../reconcilers/clusteraddon.ts';
import { clusterUse } from '../reconcilers/clusterstack.ts';
import { reconcileRequested } from '../reconcilers/reconcilerequest.ts';
import { type FluxTemplates, MANAGED_BY_LABELS } from '../releases/flux.ts';
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

/** Name of the fleet GitRepository in every namespace with Clusters. */
export const FLEET_GIT_REPOSITORY = 'stackflux-fleet';
export const ANNOTATION_REQUESTED_AT = 'reconcile.fluxcd.io/requestedAt';

const CLUSTER_INDEX = 'clusteraddon/cluster';
const CLASS_INDEX = 'clusteraddon/class';
const NS_INDEX = 'clusteraddon/namespace';
const REF_INDEX = 'clusteraddon/ref';

/**
 * Test fault point (acceptance: "kill the controller between commit and push"): while `markerFile`
 * exists, the process removes it and exits right after the local fleet commit, before the push.
 * Enabled only through STACKFLUX_TEST_CRASH_AFTER_FLEET_COMMIT in `stackflux run`.
 */
export function crashAfterCommitHook(markerFile: string): FleetHooks {
  return {
    afterCommit: () => {
      if (!existsSync(markerFile)) return;
      rmSync(markerFile, { force: true });
      process.stderr.write('fault point: exiting between fleet commit and push\n');
      process.exit(3);
    },
  };
}

export interface ClusterAddonControllerOptions {
  /** Watch only this namespace (default: all). */
  namespace?: string;
  fleet: {
    url: string;
    branch: string;
    /** Folder inside the fleet repo holding <namespace>/<cluster>/<addon>/ ("" = root). */
    pathPrefix: string;
    /**
     * Secret with the fleet repo credentials (username/password or token) the controller pushes
     * with. The fleet GitRepository of each namespace references a Secret of the same name in
     * that namespace (Flux reads with it); create it there when the repo needs auth.
     */
    secret?: { namespace: string; name: string };
    /** Flux interval of the fleet GitRepository (default 1m; a push requests a fetch at once). */
    interval?: string;
  };
  cacheDir: string;
  templates: FluxTemplates;
  concurrency?: number;
  /** Debounce window of fleet writes (default 2 s); a batch waits at most 5 windows. */
  batchWindowMs?: number;
  clock?: Clock;
  author?: { name: string; email: string };
  /** Test fault points of the fleet writer. */
  hooks?: FleetHooks;
}

export interface ClusterAddonControllerHandle {
  controller: Controller;
  fleet: FleetRepo;
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
  const fleetSettings: FleetSettings = {
    url: opts.fleet.url,
    branch: opts.fleet.branch,
    pathPrefix: opts.fleet.pathPrefix,
    gitRepositoryName: FLEET_GIT_REPOSITORY,
    ...(opts.fleet.secret !== undefined ? { secretRef: opts.fleet.secret.name } : {}),
    ...(opts.fleet.interval !== undefined ? { interval: opts.fleet.interval } : {}),
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
  const kustomizations = manager.shardedInformer<Kustomization & Obj>(
    FLUX_KUSTOMIZE_API_VERSION,
    'Kustomization',
    { ...scope, labelSelector: managedBy },
  );
  const gitRepositories = manager.shardedInformer<GitRepository & Obj>(
    FLUX_SOURCE_API_VERSION,
    'GitRepository',
    { ...scope, labelSelector: managedBy },
  );
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

  // ---- the fleet repository
  let credentials: GitCredentials | undefined;
  let fleet: FleetRepo | undefined;
  const fleetConfig = (creds?: GitCredentials): FleetConfig => ({
    url: opts.fleet.url,
    branch: opts.fleet.branch,
    pathPrefix: opts.fleet.pathPrefix,
    cacheDir: opts.cacheDir,
    author: opts.author ?? { name: 'stackflux', email: 'stackflux@users.noreply.stackflux.io' },
    ...(creds !== undefined ? { credentials: creds } : {}),
  });
  // Constructed without credentials for validation (URL) at start; replaced once they are read.
  const initialFleet = new FleetRepo(fleetConfig(), opts.hooks);
  const fleetRepo = async (): Promise<FleetRepo> => {
    if (fleet !== undefined) return fleet;
    if (opts.fleet.secret !== undefined) {
      credentials = await secretCredentials(client, opts.fleet.secret.namespace, opts.fleet.secret.name);
      fleet = new FleetRepo(fleetConfig(credentials), opts.hooks);
    } else {
      fleet = initialFleet;
    }
    return fleet;
  };
  let state: FleetSnapshot | undefined;
  let loading: Promise<FleetSnapshot> | undefined;
  const fleetState = async (): Promise<FleetSnapshot> => {
    if (state !== undefined) return state;
    loading ??= (async () => {
      try {
        const snap = await (await fleetRepo()).snapshot();
        state ??= snap;
        log.info({ commit: snap.commit ?? '(no branch yet)', folders: snap.folders.size }, 'fleet read');
        return state;
      } finally {
        loading = undefined;
      }
    })();
    return loading;
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

  // ---- the batch of fleet writes
  const pending = new Map<
    string,
    { folders: Map<string, Map<string, string> | null>; change: ClusterChange }
  >();
  let timer: TimerHandle | undefined;
  let firstPendingAt: number | undefined;
  let chain: Promise<void> = Promise.resolve();
  let stopped = false;

  const flushNow = async (): Promise<void> => {
    if (timer !== undefined) clock.clearTimeout(timer);
    timer = undefined;
    firstPendingAt = undefined;
    if (pending.size === 0) return;
    const batch = new Map(pending);
    pending.clear();
    const folders = new Map<string, Map<string, string> | null>();
    for (const entry of batch.values()) for (const [f, files] of entry.folders) folders.set(f, files);
    const changes = [...batch.values()].map((e) => e.change);
    const keys = [...batch.keys()];
    const started = clock.now();
    try {
      const repo = await fleetRepo();
      const res = await repo.sync(folders, commitMessage(changes));
      const before = state?.commit;
      state = res.snapshot;
      log.info(
        {
          clusters: keys.length,
          folders: folders.size,
          committed: res.committed,
          commit: res.commit,
          attempts: res.attempts,
          ms: Math.round(clock.now() - started),
        },
        res.committed ? 'fleet commit pushed' : 'fleet already up to date',
      );
      if (res.committed) {
        for (const k of keys) {
          const ca = clusterAddons.get(k);
          if (ca === undefined) continue;
          void manager.events.event(
            ca,
            'Normal',
            'FleetCommitPushed',
            'Commit',
            `fleet commit ${res.commit} pushed to ${opts.fleet.branch} (${keys.length} cluster(s) in this commit)`,
          );
        }
      }
      if (res.committed || before !== res.snapshot.commit) {
        for (const k of keys) controller?.enqueue(k);
        await requestFluxFetch();
      }
    } catch (err) {
      log.error({ ...errorFields(err), clusters: keys.length }, 'fleet sync failed; retrying with backoff');
      // Forget the fleet as read: the next reconciles read it again.
      state = undefined;
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

  /** Asks Flux to fetch every fleet GitRepository now (they all track the branch tip). */
  const requestFluxFetch = async (): Promise<void> => {
    const at = formatTime(new Date(clock.now()));
    for (const repo of gitRepositories.list()) {
      if (repo.metadata.name !== FLEET_GIT_REPOSITORY) continue;
      try {
        await client.mergePatch(FLUX_SOURCE_API_VERSION, 'GitRepository', repo.metadata.name, nsOf(repo), {
          metadata: { annotations: { [ANNOTATION_REQUESTED_AT]: at } },
        });
      } catch (err) {
        if (!isNotFound(err)) log.warn(errorFields(err), 'requesting a fleet fetch from Flux failed');
      }
    }
  };

  // ---- reconcile
  const reconcile = async (key: string, ctx: ReconcileContext): Promise<ReconcileResult | undefined> => {
    const namespace = ctx.namespace ?? '';
    const name = ctx.name;
    const cluster = clusters.get(key);
    const existing = clusterAddons.get(key);
    // ---- issue 12 (conventions): a requested reconcile re-reads the fleet before re-rendering. BEGIN
    if (existing !== undefined && reconcileRequested(existing)) state = undefined;
    // ---- issue 12 (conventions). END
    const snap = await fleetState();
    const prefix = `${namespace}/${name}/`;
    const folders = new Map([...snap.folders].filter(([f]) => f.startsWith(prefix)));
    if (cluster === undefined && existing === undefined && folders.size === 0) {
      pending.delete(key);
      return undefined;
    }

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

    const result = reconcileClusterAddon({
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
      fleet: { ...(snap.commit !== undefined ? { commit: snap.commit } : {}), folders },
      fleetSettings,
      templates: opts.templates,
      now: new Date(clock.now()),
    });
    if (result === undefined) return undefined;

    // 1. The ClusterAddon itself (owned by the Cluster), then its finalizer before any fleet file.
    let current: (ClusterAddon & Obj) | undefined = existing;
    if (result.clusterAddon !== undefined && !deleting) {
      const desired = manager.withShardLabel(result.clusterAddon as ClusterAddon & Obj);
      if (needsApply(existing, desired)) {
        current = await client.apply(desired, { force: true, signal: ctx.signal });
      }
    }
    const setFinalizers = async (): Promise<void> => {
      if (current === undefined) return;
      try {
        current = await client.mergePatch<ClusterAddon & Obj>(
          API_VERSION,
          'ClusterAddon',
          name,
          namespace,
          { metadata: { finalizers: result.finalizers, resourceVersion: current.metadata.resourceVersion } },
          { signal: ctx.signal },
        );
      } catch (err) {
        if (!isNotFound(err)) throw err;
        current = undefined;
      }
    };
    const have = current?.metadata.finalizers ?? [];
    const adding = result.finalizers.some((f) => !have.includes(f));
    if (current !== undefined && adding) await setFinalizers();

    // 2. Deletion patches (deletionPolicy Orphan) before anything goes away.
    for (const p of result.patches) {
      try {
        await client.mergePatch(p.apiVersion, p.kind, p.name, p.namespace, p.patch, { signal: ctx.signal });
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    }

    // 3. Flux objects.
    if (result.gitRepository !== undefined) {
      const desired = manager.withShardLabel(result.gitRepository as GitRepository & Obj);
      if (needsApply(gitRepositories.get(`${namespace}/${desired.metadata.name}`), desired)) {
        await client.apply(desired, { force: true, signal: ctx.signal });
      }
    }
    const byName = new Map(kustomizations.byIndex(CLUSTER_INDEX, key).map((k) => [k.metadata.name, k]));
    for (const k of result.kustomizations ?? []) {
      const desired = manager.withShardLabel(k as Kustomization & Obj);
      if (needsApply(byName.get(desired.metadata.name ?? ''), desired)) {
        await client.apply(desired, { force: true, signal: ctx.signal });
      }
    }
    for (const kname of result.deleteKustomizations) {
      await client.delete(FLUX_KUSTOMIZE_API_VERSION, 'Kustomization', kname, namespace, {
        signal: ctx.signal,
      });
    }

    // ---- issue 12 (conventions): pass the request on to the Flux sources of its Kustomizations. BEGIN
    if (current !== undefined) {
      await requestFluxSourcesFetch(
        client,
        current,
        kustomizations.byIndex(CLUSTER_INDEX, key),
        ctx.log,
        ctx.signal,
      );
    }
    // ---- issue 12 (conventions). END

    // 4. Status.
    if (current !== undefined && !sameJson(result.status, current.status ?? {})) {
      try {
        await client.applyStatus(
          {
            apiVersion: API_VERSION,
            kind: 'ClusterAddon',
            metadata: { name, namespace },
            status: result.status,
          },
          { force: true, signal: ctx.signal },
        );
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    }

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

    // 5. Fleet folder changes join the batch (a newer result of the same key replaces an older one).
    if (result.folders.size > 0 && result.change !== undefined) {
      pending.set(key, { folders: result.folders, change: result.change });
      schedule();
    } else {
      pending.delete(key);
    }

    // 6. The finalizer comes off last, once the fleet no longer holds the cluster's folders.
    if (!adding && current !== undefined && !sameSet(have, result.finalizers)) await setFinalizers();

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

  return { controller: c, fleet: initialFleet, flush };
}
