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
import { DEFAULT_BRANCH_PREFIX } from '../reconcilers/clusteraddon.ts';
import { realClock } from '../runtime/clock.ts';
import type { Controller } from '../runtime/controller.ts';
import type { Manager } from '../runtime/manager.ts';
import type { GitCredentials } from '../sources/git.ts';
import { AddonStatusWriter } from './clusteraddon/addonstatus.ts';
import { AddonCaches, watchAddonInputs } from './clusteraddon/caches.ts';
import { FleetBranches } from './clusteraddon/fleetbranches.ts';
import { FleetPublisher } from './clusteraddon/fleetpublisher.ts';
import { FluxObjectApplier } from './clusteraddon/fluxapplier.ts';
import { requestFleetFetch } from './clusteraddon/fluxfetch.ts';
import { AddonInputGatherer } from './clusteraddon/inputs.ts';
import { type ClusterAddonControllerOptions, fleetSettingsOf, fluxShardsOn } from './clusteraddon/options.ts';
import { ClusterAddonReconciler } from './clusteraddon/reconciler.ts';
import { RefObjectReader, RefWaits } from './clusteraddon/refobjects.ts';
import { ReleaseTreeStore } from './clusteraddon/releasetrees.ts';
import { RenderScheduler } from './clusteraddon/renderscheduler.ts';
import type { Obj } from './clusteraddon/types.ts';
import { secretCredentials } from './common.ts';

export { fleetBackoffMs } from './clusteraddon/fleetbranches.ts';
export { refusedBranchFailure } from './clusteraddon/fleetpublisher.ts';
export type { ClusterAddonControllerOptions } from './clusteraddon/options.ts';
export { pushNote } from './clusteraddon/pushevents.ts';
export { REF_BACKOFF, refBackoffMs } from './clusteraddon/refobjects.ts';

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

export interface ClusterAddonControllerHandle {
  controller: Controller;
  /** Writes the pending batch now (tests, shutdown). */
  flush(): Promise<void>;
}

/**
 * The controller as a composition of its collaborators (controllers/clusteraddon/): the caches and
 * their indexes, the release trees, the objects of the Clusters' refs, the fleet's branches and
 * the publisher of their changes, the renders, the applier of the Flux objects and the status.
 * Each collaborator gets only what it uses; those that requeue keys reach the controller through
 * callbacks, as it is created last (its reconcile is the reconciler's).
 */
export async function setupClusterAddonController(
  manager: Manager,
  opts: ClusterAddonControllerOptions,
): Promise<ClusterAddonControllerHandle> {
  const clock = opts.clock ?? realClock;
  const client = manager.client;
  const log = manager.log.child({ controller: 'clusteraddon' });
  const scope = opts.namespace ? { namespace: opts.namespace } : {};
  const windowMs = opts.batchWindowMs ?? 2_000;
  const fluxShards = fluxShardsOn(opts.fleet);
  let controller: Controller | undefined;

  const caches = await AddonCaches.create(manager, scope, fluxShards);
  const renders = new RenderScheduler(opts.render !== undefined ? { render: opts.render } : {});
  const secret = opts.fleet.secret;
  const branches = new FleetBranches({
    credentials: async (): Promise<GitCredentials | undefined> =>
      secret !== undefined ? await secretCredentials(client, secret.namespace, secret.name) : undefined,
    writer: opts.writer,
    branchPrefix: opts.fleet.branchPrefix ?? DEFAULT_BRANCH_PREFIX,
    windowMs,
    clock,
    log,
  });
  const trees = new ReleaseTreeStore({
    client,
    cacheDir: opts.cacheDir,
    ...(opts.fetchTree !== undefined ? { fetchTree: opts.fetchTree } : {}),
    ...(opts.githubApiUrl !== undefined ? { githubApiUrl: opts.githubApiUrl } : {}),
    ...(opts.tenancy !== undefined ? { tenancy: opts.tenancy } : {}),
  });
  const refs = new RefObjectReader({
    client,
    informer: (apiVersion, kind) => manager.informer<Obj>(apiVersion, kind, { ...scope, optional: true }),
    watch: (inf, kind) =>
      manager.watch(controller as Controller, inf, (o) => caches.clustersReferring(o, kind)),
  });
  const status = new AddonStatusWriter({ client, clock, log });
  const gitRepository = (key: string) => caches.gitRepositories.get(key);
  const publisher = new FleetPublisher({
    branches,
    windowMs,
    clock,
    log,
    leading: () => manager.isLeader(),
    events: manager.events,
    clusterAddonOf: (key) => caches.clusterAddons.get(key),
    requeue: (key) => controller?.enqueue(key),
    retry: (key) => controller?.queue.addRateLimited(key),
    fetchMoved: (keys) => requestFleetFetch({ client, gitRepository, clock, log }, keys),
  });
  const inputs = new AddonInputGatherer({
    caches,
    branches,
    trees,
    refs,
    fleetFailureOf: (key) => publisher.failureOf(key),
    fleetReadFailed: (existing, err, signal) => status.fleetReadFailed(existing, err, signal),
    fleetSettings: fleetSettingsOf(opts.fleet),
    fluxShards,
    templates: opts.templates,
    ...(opts.tenancy !== undefined ? { tenancy: opts.tenancy } : {}),
    ...(opts.renderSeedKey !== undefined ? { renderSeedKey: opts.renderSeedKey } : {}),
    clock,
  });
  const applier = new FluxObjectApplier({
    client,
    withShardLabel: (o) => manager.withShardLabel(o),
    withOwnShard: (o) => (fluxShards ? o : manager.withShardLabel(o)),
    gitRepository,
  });
  const reconciler = new ClusterAddonReconciler({
    inputs,
    decider: (namespace) => renders.decider(namespace),
    applier,
    status,
    publisher,
    refWaits: new RefWaits(),
    events: manager.events,
    client,
  });

  controller = manager.addController({
    name: 'clusteraddon',
    kind: 'Cluster',
    maxConcurrentReconciles: opts.concurrency ?? 4,
    reconcile: (key, ctx) => reconciler.reconcile(key, ctx),
  });
  watchAddonInputs(manager, controller, caches, fluxShards);
  void manager.done.then(() => {
    publisher.stop();
    void renders.close();
  });

  return { controller, flush: () => publisher.flush() };
}
