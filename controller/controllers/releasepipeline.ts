// Wires the release pipeline into a Manager: informers (with the indexes the controllers read),
// the shared source pollers, the ClusterStack and ClusterStackRelease controllers, and the watches
// that map events of related objects to their keys.
import type { ClusterStack } from '../api/clusterstack.ts';
import type { ClusterStackRelease } from '../api/clusterstackrelease.ts';
import {
  FLUX_KUSTOMIZE_API_VERSION,
  FLUX_SOURCE_API_VERSION,
  type GitRepository,
  type Kustomization,
} from '../api/flux.ts';
import { API_VERSION } from '../api/meta.ts';
import { clusterUse } from '../reconcilers/clusterstack.ts';
import { providerObjectKind } from '../reconcilers/provider.ts';
import { type FluxTemplates, MANAGED_BY_LABELS } from '../releases/flux.ts';
import type { KubeObject } from '../runtime/client.ts';
import { type Clock, realClock } from '../runtime/clock.ts';
import type { Controller } from '../runtime/controller.ts';
import type { Informer } from '../runtime/informer.ts';
import { errorFields } from '../runtime/logging.ts';
import type { Manager } from '../runtime/manager.ts';
import { fetchReleaseTree, listTags } from '../sources/git.ts';
import { GitHubReleases, type GitHubTagLister } from '../sources/github.ts';
import { SourcePollers, type TagLister } from '../sources/poller.ts';
import { clusterStackReconciler, NAMESPACE_INDEX } from './clusterstack.ts';
import { CLASS_INDEX, clusterStackReleaseReconciler } from './clusterstackrelease.ts';
import { ownerKey, secretCredentials } from './common.ts';
import { ProviderKinds } from './provider.ts';

export const CLUSTER_API_VERSIONS = ['cluster.x-k8s.io/v1beta2', 'cluster.x-k8s.io/v1beta1'];

export interface ReleasePipelineOptions {
  /** Watch only this namespace (default: all). */
  namespace?: string;
  cacheDir: string;
  templates: FluxTemplates;
  defaultPollIntervalMs: number;
  concurrency: number;
  clock?: Clock;
  /** Injected for tests; default: git ls-remote. */
  lister?: TagLister;
  /** Injected for tests; default: the GitHub Releases API (ETag-cached, rate-limit aware). */
  githubLister?: GitHubTagLister;
}

export interface ReleasePipeline {
  pollers: SourcePollers;
  clusterStackController: Controller;
  releaseController: Controller;
  clusterApiVersion: string | undefined;
}

/** The Cluster API version the server serves (v1beta2 preferred), or undefined without Cluster API. */
export async function servedClusterApiVersion(manager: Manager): Promise<string | undefined> {
  for (const v of CLUSTER_API_VERSIONS) {
    try {
      await manager.client.resource(v, 'Cluster');
      return v;
    } catch {}
  }
  return undefined;
}

function namespaceIndex(obj: KubeObject): string[] {
  return obj.metadata.namespace ? [obj.metadata.namespace] : [];
}

export async function setupReleasePipeline(
  manager: Manager,
  opts: ReleasePipelineOptions,
): Promise<ReleasePipeline> {
  const clock = opts.clock ?? realClock;
  const log = manager.log;
  const scope = opts.namespace ? { namespace: opts.namespace } : {};
  const managedBy = Object.entries(MANAGED_BY_LABELS)
    .map(([k, v]) => `${k}=${v}`)
    .join(',');

  // Sharded kinds (--shard): stackflux's own, the Flux objects it manages, CAPI Clusters.
  const clusterStacks = manager.shardedInformer<ClusterStack & KubeObject>(
    API_VERSION,
    'ClusterStack',
    scope,
  );
  const releases = manager.shardedInformer<ClusterStackRelease & KubeObject>(
    API_VERSION,
    'ClusterStackRelease',
    scope,
  );
  const gitRepositories = manager.shardedInformer<GitRepository & KubeObject>(
    FLUX_SOURCE_API_VERSION,
    'GitRepository',
    {
      ...scope,
      labelSelector: managedBy,
    },
  );
  const kustomizations = manager.shardedInformer<Kustomization & KubeObject>(
    FLUX_KUSTOMIZE_API_VERSION,
    'Kustomization',
    {
      ...scope,
      labelSelector: managedBy,
    },
  );
  const clusterApiVersion = await servedClusterApiVersion(manager);
  let clusters: Informer<KubeObject> | undefined;
  if (clusterApiVersion !== undefined) {
    clusters = manager.shardedInformer<KubeObject>(clusterApiVersion, 'Cluster', scope);
    clusters.addIndexer(NAMESPACE_INDEX, namespaceIndex);
    clusters.addIndexer(CLASS_INDEX, (c) => {
      const use = clusterUse(c);
      return use === undefined
        ? []
        : [`${use.classNamespace ?? c.metadata.namespace ?? ''}/${use.className}`];
    });
  } else {
    log.warn('the API server serves no Cluster API Cluster kind: no release is considered in use');
  }
  clusterStacks.addIndexer(NAMESPACE_INDEX, namespaceIndex);
  releases.addIndexer(NAMESPACE_INDEX, namespaceIndex);

  const credentials = (namespace: string, name: string) => secretCredentials(manager.client, namespace, name);
  const lister = opts.lister ?? listTags;
  // The controller is created below; the pollers only notify once it exists.
  let csController: Controller | undefined;
  let relController: Controller | undefined;
  const pollers = new SourcePollers({
    lister,
    githubLister: opts.githubLister ?? new GitHubReleases({ clock }).lister(),
    credentials,
    clock,
    logger: log,
    onChange: (keys) => {
      // A changed listing may move a tag to another commit: the releases re-check theirs too.
      for (const k of keys) {
        csController?.enqueue(k);
        const [ns, name] = k.split('/');
        if (ns === undefined || name === undefined) continue;
        for (const r of releases.byIndex(NAMESPACE_INDEX, ns)) {
          if (ownerKey(r, 'ClusterStack') === k) relController?.enqueue(`${ns}/${r.metadata.name}`);
        }
      }
    },
  });

  // Provider kinds (providerRef): caches created on first use; see ./provider.ts.
  const providers = new ProviderKinds({
    manager,
    clock,
    ...(opts.namespace ? { namespace: opts.namespace } : {}),
  });

  const clusterStackController = manager.addController({
    name: 'clusterstack',
    kind: 'ClusterStack',
    maxConcurrentReconciles: opts.concurrency,
    reconcile: clusterStackReconciler({
      client: manager.client,
      clock,
      pollers,
      clusterStacks,
      releases,
      clusters,
      defaultIntervalMs: opts.defaultPollIntervalMs,
      recorder: manager.events,
      withShardLabel: (o) => manager.withShardLabel(o),
      providers,
    }),
  });
  csController = clusterStackController;

  const releaseController = manager.addController({
    name: 'clusterstackrelease',
    kind: 'ClusterStackRelease',
    maxConcurrentReconciles: opts.concurrency,
    reconcile: clusterStackReleaseReconciler({
      client: manager.client,
      clock,
      pollers,
      releases,
      gitRepositories,
      kustomizations,
      clusters,
      templates: opts.templates,
      cacheDir: opts.cacheDir,
      credentials,
      fetchTree: fetchReleaseTree,
      listTags: lister,
      recorder: manager.events,
      withShardLabel: (o) => manager.withShardLabel(o),
      providers,
    }),
  });
  watchProviderKinds(providers, clusterStacks, releases, clusterStackController, releaseController);

  // ClusterStack controller: its own objects, its releases (by owner), Clusters of the namespace.
  manager.watch(clusterStackController, clusterStacks);
  manager.watch(clusterStackController, releases, (r) => {
    const owner = ownerKey(r, 'ClusterStack');
    if (owner !== undefined) return [owner];
    return r.metadata.namespace ? [`${r.metadata.namespace}/${r.spec.clusterStack}`] : [];
  });
  const clusterStacksOf = (c: KubeObject): string[] =>
    c.metadata.namespace
      ? clusterStacks
          .byIndex(NAMESPACE_INDEX, c.metadata.namespace)
          .map((cs) => `${c.metadata.namespace}/${cs.metadata.name}`)
      : [];

  relController = releaseController;

  // Release controller: its own objects, the Flux objects it owns, Clusters by class.
  manager.watch(releaseController, releases);
  const byOwner = (o: KubeObject): string[] => {
    const k = ownerKey(o, 'ClusterStackRelease');
    return k === undefined ? [] : [k];
  };
  manager.watch(releaseController, gitRepositories, byOwner);
  manager.watch(releaseController, kustomizations, byOwner);
  if (clusters !== undefined) {
    const releasesOf = (c: KubeObject): string[] => {
      const use = clusterUse(c);
      if (use === undefined) return [];
      const ns = use.classNamespace ?? c.metadata.namespace ?? '';
      return releases
        .byIndex(NAMESPACE_INDEX, ns)
        .filter((r) => r.spec.clusterClass === use.className)
        .map((r) => `${ns}/${r.metadata.name}`);
    };
    // Both the old and the new object on updates: a Cluster moving from v3 to v4 frees v3.
    const onCluster = (objs: KubeObject[]): void => {
      const cs = new Set(objs.flatMap(clusterStacksOf));
      const rel = new Set(objs.flatMap(releasesOf));
      for (const k of cs) clusterStackController.enqueue(k);
      for (const k of rel) releaseController.enqueue(k);
    };
    clusters.addEventHandler({
      onAdd: (c) => onCluster([c]),
      onUpdate: (o, n) => onCluster([o, n]),
      onDelete: (c) => onCluster([c]),
    });
  }
  void manager.done
    .then(() => pollers.stop())
    .catch((err: unknown) => log.error(errorFields(err), 'stopping pollers'));

  return { pollers, clusterStackController, releaseController, clusterApiVersion };
}

/**
 * Provider objects → their release (owner); templates → the ClusterStacks and releases of the
 * namespace that name them (cost: the ClusterStacks/releases of one namespace).
 */
function watchProviderKinds(
  providers: ProviderKinds,
  clusterStacks: Informer<ClusterStack & KubeObject>,
  releases: Informer<ClusterStackRelease & KubeObject>,
  clusterStackController: Controller,
  releaseController: Controller,
): void {
  providers.subscribe((o) => {
    const ns = o.metadata.namespace;
    if (ns === undefined) return;
    const owner = ownerKey(o, 'ClusterStackRelease');
    if (owner !== undefined) {
      releaseController.enqueue(owner);
      return;
    }
    const names = (ref: { kind?: string; name?: string; apiVersion?: string } | undefined): boolean =>
      ref !== undefined &&
      ref.kind === o.kind &&
      ref.name === o.metadata.name &&
      ref.apiVersion === o.apiVersion;
    for (const cs of clusterStacks.byIndex(NAMESPACE_INDEX, ns))
      if (names(cs.spec.providerRef)) clusterStackController.enqueue(`${ns}/${cs.metadata.name}`);
    for (const r of releases.byIndex(NAMESPACE_INDEX, ns))
      if (names(r.spec.providerRef)) releaseController.enqueue(`${ns}/${r.metadata.name}`);
  });
  // A cache that just synced turns "looking up" into found/not found for everyone naming the kind.
  providers.subscribeSynced((apiVersion, kind) => {
    const key = (o: KubeObject) => `${o.metadata.namespace}/${o.metadata.name}`;
    const uses = (ref: { apiVersion?: string; kind?: string } | undefined): boolean =>
      ref?.apiVersion === apiVersion && (ref.kind === kind || providerObjectKind(ref.kind ?? '') === kind);
    for (const cs of clusterStacks.list())
      if (uses(cs.spec.providerRef)) clusterStackController.enqueue(key(cs));
    for (const r of releases.list()) if (uses(r.spec.providerRef)) releaseController.enqueue(key(r));
  });
}
