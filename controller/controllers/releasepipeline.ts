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
import type { FleetWriter } from '../gitops/branches.ts';
import { clusterUse } from '../reconcilers/clusterstack.ts';
import { RELEASE_BRANCH_FOLDER } from '../reconcilers/clusterstackrelease.ts';
import { providerObjectKind } from '../reconcilers/provider.ts';
import { type FluxTemplates, MANAGED_BY_LABELS } from '../releases/flux.ts';
import type { TenancyPolicy } from '../releases/tenancy.ts';
import { CLUSTER_CLASS_API_VERSIONS } from '../rendering/clusterclass.ts';
import { RenderPool, type RenderPoolOptions } from '../rendering/index.ts';
import type { KubeObject } from '../runtime/client.ts';
import { type Clock, realClock } from '../runtime/clock.ts';
import type { Controller } from '../runtime/controller.ts';
import { type Informer, objectKey } from '../runtime/informer.ts';
import { errorFields } from '../runtime/logging.ts';
import type { Manager } from '../runtime/manager.ts';
import type { GitCredentials } from '../sources/git.ts';
import { GitHubReleases, type GitHubTagLister } from '../sources/github.ts';
import { OciClient } from '../sources/oci.ts';
import { SourcePollers, type TagLister } from '../sources/poller.ts';
import {
  type ReleaseSources,
  type ReleaseTreeFetcher,
  releaseTreeFetcher,
  sourceTagLister,
} from '../sources/releasetree.ts';
import { clusterStackReconciler, NAMESPACE_INDEX } from './clusterstack.ts';
import { clusterStackReleaseReconciler } from './clusterstackrelease.ts';
import { ClusterUseView, servedClusterApiVersion } from './clusterview.ts';
import { ownerKey, sameJson, secretCredentials, sourceSecretCredentials } from './common.ts';
import { namespaceInformer, namespaceLabelsChanged } from './namespaces.ts';
import { ProviderKinds } from './provider.ts';
import { type ReleaseFleet, releaseClassRenderer } from './releaseclass.ts';
import {
  type ReleaseReads,
  type SourceReadLimits,
  sourceReads,
  withGitHubListingDeadline,
  withListingDeadline,
} from './sourcereads.ts';

/** How long the ClusterClass versions the API server serves are taken as known (the README says 30 s). */
const SERVED_VERSIONS_TTL_MS = 30_000;

export { CLUSTER_API_VERSIONS, servedClusterApiVersion } from './clusterview.ts';

export interface ReleasePipelineOptions {
  /** Watch only this namespace (default: all). */
  namespace?: string;
  cacheDir: string;
  templates: FluxTemplates;
  defaultPollIntervalMs: number;
  concurrency: number;
  clock?: Clock;
  /** Injected for tests; default: git ls-remote (OCI sources: ./releasetree.ts dispatches). */
  lister?: TagLister;
  /** How releases are read (default: an OciClient, csctl assets → tree, GitHub assets at githubApiUrl). */
  sources?: ReleaseSources;
  /** Root of the GitHub REST API (default https://api.github.com). */
  githubApiUrl?: string;
  /** Injected for tests; default: the GitHub Releases API (ETag-cached, rate-limit aware). */
  githubLister?: GitHubTagLister;
  /** --default-service-account and --allowed-chart-hosts (default: neither). */
  tenancy?: TenancyPolicy;
  /** Limits of the render processes a Helm-chart cluster-class (csctl) renders in. */
  render?: RenderPoolOptions;
  /** Total deadlines of source reads and the background reads' slots (default: ./sourcereads.ts). */
  sourceReads?: Partial<SourceReadLimits>;
  /**
   * The fleet repository (--fleet-url): a rendered cluster-class is written to a branch of it.
   * `writer` makes a writer for branches under `prefix` (credentials from the fleet Secret).
   */
  fleet?: Omit<ReleaseFleet, 'writer' | 'secretName'> & {
    secret?: { namespace: string; name: string };
    writer: (prefix: string, credentials: GitCredentials | undefined) => FleetWriter;
  };
}

export interface ReleasePipeline {
  pollers: SourcePollers;
  clusterStackController: Controller;
  releaseController: Controller;
  clusterApiVersion: string | undefined;
  /** Reads release trees of every kind of source (the ClusterAddon controller reads with it too). */
  fetchTree: ReleaseTreeFetcher;
  /** Which Clusters use which ClusterClass, over every namespace and shard (garbage collection). */
  clusterView: ClusterUseView;
  /** The background reads of release trees and listings (the impact controller reads with them too). */
  reads: ReleaseReads;
}

function namespaceIndex(obj: KubeObject): string[] {
  return obj.metadata.namespace ? [obj.metadata.namespace] : [];
}

export async function setupReleasePipeline(
  manager: Manager,
  opts: ReleasePipelineOptions,
): Promise<ReleasePipeline> {
  const clock = opts.clock ?? realClock;
  let servedVersions: { at: number; versions: Promise<string[]> } | undefined;
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
  // Clusters count as "in use" from every namespace and shard, and only a complete view lets a
  // release be deleted (clusterview.ts); Cluster API installed later is picked up without restart.
  const clusterView = new ClusterUseView({ manager, clock });
  // Namespace labels: a Cluster of another namespace counts only where its ClusterStack serves it.
  const namespaces = namespaceInformer(manager);
  const clusterApiVersion = await servedClusterApiVersion(manager);
  clusterStacks.addIndexer(NAMESPACE_INDEX, namespaceIndex);
  releases.addIndexer(NAMESPACE_INDEX, namespaceIndex);

  // A tenant's secretRef: only Secrets labelled for it (stackflux sends them to a URL the tenant picks).
  const credentials = (namespace: string, name: string) =>
    sourceSecretCredentials(manager.client, namespace, name);
  const sources: ReleaseSources = {
    oci: new OciClient({ clock }),
    ...(opts.githubApiUrl !== undefined ? { githubApiUrl: opts.githubApiUrl } : {}),
    ...opts.sources,
  };
  const readLimits = opts.sourceReads ?? {};
  const lister = sourceTagLister(sources, opts.lister);
  const fetchTree = releaseTreeFetcher(sources);
  // The controller is created below; the pollers only notify once it exists.
  let csController: Controller | undefined;
  let relController: Controller | undefined;
  const pollers = new SourcePollers({
    // A listing that never ends would stop its source from being listed again.
    lister: withListingDeadline(lister, readLimits, clock),
    githubLister: withGitHubListingDeadline(
      opts.githubLister ??
        new GitHubReleases({ clock, ...(opts.githubApiUrl ? { baseUrl: opts.githubApiUrl } : {}) }).lister(),
      readLimits,
      clock,
    ),
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
      ...(opts.githubApiUrl !== undefined ? { githubApiUrl: opts.githubApiUrl } : {}),
      clock,
      pollers,
      clusterStacks,
      releases,
      clusterView,
      defaultIntervalMs: opts.defaultPollIntervalMs,
      recorder: manager.events,
      withShardLabel: (o) => manager.withShardLabel(o),
      providers,
      namespaces,
    }),
  });
  csController = clusterStackController;

  // A Helm-chart cluster-class (csctl) is rendered in render processes and written to the fleet.
  const classPool = new RenderPool(opts.render);
  void manager.done.then(() => classPool.close());
  const fleet = opts.fleet;
  let classWriter: Promise<FleetWriter> | undefined;
  const classes = releaseClassRenderer({
    pool: classPool,
    ...(fleet !== undefined
      ? {
          fleet: {
            url: fleet.url,
            branchPrefix: fleet.branchPrefix,
            ...(fleet.secret !== undefined ? { secretName: fleet.secret.name } : {}),
            writer: () => {
              classWriter ??= (async () => {
                const creds =
                  fleet.secret !== undefined
                    ? await secretCredentials(manager.client, fleet.secret.namespace, fleet.secret.name)
                    : undefined;
                return fleet.writer(`${fleet.branchPrefix}${RELEASE_BRANCH_FOLDER}/`, creds);
              })().catch((err: unknown) => {
                classWriter = undefined;
                throw err;
              });
              return classWriter;
            },
          },
        }
      : {}),
    // Asked at most every SERVED_VERSIONS_TTL_MS, not on every reconcile of a csctl release: a
    // version the server does not serve costs a discovery request each time it is asked.
    servedClassVersions: () => {
      const now = clock.now();
      if (servedVersions === undefined || now - servedVersions.at >= SERVED_VERSIONS_TTL_MS) {
        const versions = (async () => {
          const served: string[] = [];
          for (const v of CLUSTER_CLASS_API_VERSIONS) {
            try {
              await manager.client.resource(v, 'ClusterClass');
              served.push(v);
            } catch {}
          }
          return served;
        })();
        servedVersions = { at: now, versions };
      }
      return servedVersions.versions;
    },
  });

  const reads = sourceReads(readLimits, clock, (k) => relController?.enqueue(k));
  void manager.done.then(() => {
    reads.trees.stop();
    reads.listings.stop();
  });
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
      clusterView,
      templates: opts.templates,
      ...(opts.tenancy !== undefined ? { tenancy: opts.tenancy } : {}),
      cacheDir: opts.cacheDir,
      credentials,
      fetchTree,
      listTags: lister,
      recorder: manager.events,
      withShardLabel: (o) => manager.withShardLabel(o),
      providers,
      sharing: { clusterStacks, namespaces },
      classes,
      reads,
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
  /** The namespace of the ClusterClass a Cluster names (where the releases that can serve it live). */
  const classNamespace = (c: KubeObject): string | undefined => {
    const use = clusterUse(c);
    return use === undefined ? undefined : (use.classNamespace ?? c.metadata.namespace);
  };
  const clusterStacksOf = (c: KubeObject): string[] => {
    const ns = classNamespace(c);
    return ns ? clusterStacks.byIndex(NAMESPACE_INDEX, ns).map((cs) => `${ns}/${cs.metadata.name}`) : [];
  };

  relController = releaseController;

  // Release controller: its own objects, the Flux objects it owns, Clusters by class.
  manager.watch(releaseController, releases);
  const byOwner = (o: KubeObject): string[] => {
    const k = ownerKey(o, 'ClusterStackRelease');
    return k === undefined ? [] : [k];
  };
  manager.watch(releaseController, gitRepositories, byOwner);
  manager.watch(releaseController, kustomizations, byOwner);
  const releasesOf = (c: KubeObject): string[] => {
    const use = clusterUse(c);
    const ns = classNamespace(c);
    if (use === undefined || ns === undefined) return [];
    return releases
      .byIndex(NAMESPACE_INDEX, ns)
      .filter((r) => r.spec.clusterClass === use.className)
      .map((r) => `${ns}/${r.metadata.name}`);
  };
  // Both the old and the new object on updates: a Cluster moving from v3 to v4 frees v3. Only
  // changes of the class a Cluster uses arrive here (status updates do not).
  clusterView.onChange((objs) => {
    const cs = new Set(objs.flatMap(clusterStacksOf));
    const rel = new Set(objs.flatMap(releasesOf));
    for (const k of cs) clusterStackController.enqueue(k);
    for (const k of rel) releaseController.enqueue(k);
  });
  // Sharing with other namespaces (spec.clusterNamespaceSelector): a changed selector or a
  // Namespace's changed labels re-decide what is in use, for the few ClusterStacks that share.
  const releasesOfStack = (cs: ClusterStack & KubeObject): string[] =>
    releases
      .byIndex(NAMESPACE_INDEX, cs.metadata.namespace ?? '')
      .filter((r) => r.spec.clusterStack === cs.metadata.name)
      .map(objectKey);
  manager.watch(
    releaseController,
    clusterStacks,
    releasesOfStack,
    (o, n) => !sameJson(o.spec.clusterNamespaceSelector, n.spec.clusterNamespaceSelector),
  );
  const sharingStacks = (): (ClusterStack & KubeObject)[] =>
    clusterStacks.list().filter((cs) => cs.spec.clusterNamespaceSelector !== undefined);
  manager.watch(
    clusterStackController,
    namespaces,
    () => sharingStacks().map(objectKey),
    namespaceLabelsChanged,
  );
  manager.watch(
    releaseController,
    namespaces,
    () => sharingStacks().flatMap(releasesOfStack),
    namespaceLabelsChanged,
  );
  // Once every Cluster is known, garbage collection that waited can run: everything is looked at.
  clusterView.onSynced(() => {
    for (const cs of clusterStacks.list()) clusterStackController.enqueue(objectKey(cs));
    for (const r of releases.list()) releaseController.enqueue(objectKey(r));
  });
  clusterView.start();
  void manager.done
    .then(() => {
      pollers.stop();
      return clusterView.stop();
    })
    .catch((err: unknown) => log.error(errorFields(err), 'stopping pollers'));

  return {
    pollers,
    clusterStackController,
    releaseController,
    clusterApiVersion,
    clusterView,
    fetchTree,
    reads,
  };
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
