// The caches the ClusterAddon controller reads (shared with the release pipeline where the
// selectors are the same; sharded by --shard): Clusters, ClusterAddons, ClusterStackReleases,
// ClusterStacks, the per-Cluster Flux objects (GitRepositories, addon Kustomizations, HelmReleases
// of Helm addons) and Namespaces, with the seven indexes that map a changed object to the Clusters
// whose reconcile reads it, and the watches that requeue those Clusters.
import type { ClusterAddon } from '../../api/clusteraddon.ts';
import { clusterRef } from '../../api/clusterrefs.ts';
import type { ClusterStack } from '../../api/clusterstack.ts';
import type { ClusterStackRelease } from '../../api/clusterstackrelease.ts';
import {
  FLUX_HELM_API_VERSION,
  FLUX_KUSTOMIZE_API_VERSION,
  FLUX_SOURCE_API_VERSION,
  type GitRepository,
  type HelmRelease,
  type Kustomization,
} from '../../api/flux.ts';
import { API_VERSION, LABEL_ADDON, LABEL_CLUSTER } from '../../api/meta.ts';
import { addonReleaseTag } from '../../reconcilers/addonrelease.ts';
import {
  clusterAddonReconcileInputs,
  clusterStackAddonInputs,
  releaseAddonInputs,
} from '../../reconcilers/clusteraddon.ts';
import { clusterUse } from '../../reconcilers/clusterstack.ts';
import { FLUX_SHARD_NAMESPACE_LABEL, MANAGED_BY_LABELS } from '../../releases/flux.ts';
import type { Controller } from '../../runtime/controller.ts';
import type { Informer } from '../../runtime/informer.ts';
import type { Manager } from '../../runtime/manager.ts';
import { servedClusterApiVersion } from '../clusterview.ts';
import { sameJson } from '../common.ts';
import { namespaceInformer, namespaceLabelsChanged } from '../namespaces.ts';
import { keyOf, nsOf, type Obj } from './types.ts';

export const CLUSTER_INDEX = 'clusteraddon/cluster';
export const CLASS_INDEX = 'clusteraddon/class';
export const NS_INDEX = 'clusteraddon/namespace';
export const REF_INDEX = 'clusteraddon/ref';
/** Clusters naming a ClusterClass of another namespace: by their own namespace, and by the class's. */
export const FOREIGN_BY_NS_INDEX = 'clusteraddon/foreign-by-namespace';
export const FOREIGN_BY_CLASS_NS_INDEX = 'clusteraddon/foreign-by-class-namespace';
export const NS_BY_STACK_INDEX = 'clusteraddon/clusterstack-namespace';

/** CLASS_INDEX: by the class, and while a rollout prepares the Cluster also by the release its addons come from. */
export function clusterClassKeys(c: Obj): string[] {
  const use = clusterUse(c);
  if (use === undefined) return [];
  const ns = use.classNamespace ?? nsOf(c);
  const addonClass = addonReleaseTag(c)?.clusterClassName;
  return [...new Set([use.className, ...(addonClass !== undefined ? [addonClass] : [])])].map(
    (name) => `${ns}/${name}`,
  );
}

/** The namespace of the Cluster's ClusterClass when it is another namespace than the Cluster's. */
export function foreignClassNamespace(c: Obj): string | undefined {
  const ns = clusterUse(c)?.classNamespace;
  return ns !== undefined && ns !== nsOf(c) ? ns : undefined;
}

/** REF_INDEX: "<namespace>/<kind>/<name>" of the objects the Cluster's refs may be followed to. */
export function clusterRefKeys(c: Obj): string[] {
  return (['controlPlaneRef', 'infrastructureRef'] as const).flatMap((f) => {
    const r = clusterRef(c, f);
    return r?.ok ? [`${r.ref.namespace}/${r.ref.kind}/${r.ref.name}`] : [];
  });
}

/** CLUSTER_INDEX of addon Flux objects: the key of the Cluster they belong to. */
export function addonClusterKeys(o: Obj): string[] {
  const cluster = o.metadata.labels?.[LABEL_CLUSTER];
  return cluster !== undefined && o.metadata.labels?.[LABEL_ADDON] !== undefined
    ? [`${nsOf(o)}/${cluster}`]
    : [];
}

export interface AddonInformers {
  clusters: Informer<Obj>;
  clusterAddons: Informer<ClusterAddon & Obj>;
  releases: Informer<ClusterStackRelease & Obj>;
  clusterStacks: Informer<ClusterStack & Obj>;
  kustomizations: Informer<Kustomization & Obj>;
  gitRepositories: Informer<GitRepository & Obj>;
  /** Labels of the namespaces of Clusters of another namespace's ClusterClass (metadata only). */
  namespaces: Informer<Obj>;
  /** Only where helm-controller's CRD is served. */
  helmReleases?: Informer<HelmRelease & Obj>;
}

export class AddonCaches {
  readonly clusters: Informer<Obj>;
  readonly clusterAddons: Informer<ClusterAddon & Obj>;
  readonly releases: Informer<ClusterStackRelease & Obj>;
  readonly clusterStacks: Informer<ClusterStack & Obj>;
  readonly kustomizations: Informer<Kustomization & Obj>;
  readonly gitRepositories: Informer<GitRepository & Obj>;
  readonly namespaces: Informer<Obj>;
  readonly helmReleases: Informer<HelmRelease & Obj> | undefined;

  /** The informers of the manager, created in the order the controller has always created them. */
  static async create(
    manager: Manager,
    scope: { namespace?: string },
    fluxShards: boolean,
  ): Promise<AddonCaches> {
    const managedBy = Object.entries(MANAGED_BY_LABELS)
      .map(([k, v]) => `${k}=${v}`)
      .join(',');
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
    const kustomizations = fluxInformer<Kustomization & Obj>(FLUX_KUSTOMIZE_API_VERSION, 'Kustomization');
    const gitRepositories = fluxInformer<GitRepository & Obj>(FLUX_SOURCE_API_VERSION, 'GitRepository');
    const namespaces = namespaceInformer(manager);
    // HelmReleases of Helm-chart addons: written by kustomize-controller from the fleet branch, so
    // they carry stackflux's labels but no shard label. Watched only where helm-controller's CRD is
    // served (without it a Helm addon's Kustomization reports that the kind is unknown).
    const helmServed = await manager.client.resource(FLUX_HELM_API_VERSION, 'HelmRelease').then(
      () => true,
      () => false,
    );
    const helmReleases = helmServed
      ? manager.informer<HelmRelease & Obj>(FLUX_HELM_API_VERSION, 'HelmRelease', {
          ...scope,
          labelSelector: `${managedBy},${LABEL_CLUSTER}`,
        })
      : undefined;
    return new AddonCaches({
      clusters,
      clusterAddons,
      releases,
      clusterStacks,
      kustomizations,
      gitRepositories,
      namespaces,
      ...(helmReleases !== undefined ? { helmReleases } : {}),
    });
  }

  /** Takes the informers and adds the indexes the reconcile and the watches read. */
  constructor(informers: AddonInformers) {
    this.clusters = informers.clusters;
    this.clusterAddons = informers.clusterAddons;
    this.releases = informers.releases;
    this.clusterStacks = informers.clusterStacks;
    this.kustomizations = informers.kustomizations;
    this.gitRepositories = informers.gitRepositories;
    this.namespaces = informers.namespaces;
    this.helmReleases = informers.helmReleases;
    this.clusters.addIndexer(NS_INDEX, (c) => [nsOf(c)]);
    this.clusters.addIndexer(CLASS_INDEX, clusterClassKeys);
    this.clusters.addIndexer(FOREIGN_BY_NS_INDEX, (c) =>
      foreignClassNamespace(c) !== undefined ? [nsOf(c)] : [],
    );
    this.clusters.addIndexer(FOREIGN_BY_CLASS_NS_INDEX, (c) => {
      const ns = foreignClassNamespace(c);
      return ns !== undefined ? [ns] : [];
    });
    this.clusterStacks.addIndexer(NS_BY_STACK_INDEX, (cs) => [nsOf(cs)]);
    this.clusters.addIndexer(REF_INDEX, clusterRefKeys);
    this.kustomizations.addIndexer(CLUSTER_INDEX, addonClusterKeys);
    this.helmReleases?.addIndexer(CLUSTER_INDEX, addonClusterKeys);
  }

  /** The addon Kustomizations of the Cluster `key`. */
  kustomizationsOf(key: string): (Kustomization & Obj)[] {
    return this.kustomizations.byIndex(CLUSTER_INDEX, key);
  }

  /** The HelmReleases of the Cluster's Helm addons (undefined where Helm is not served). */
  helmReleasesOf(key: string): (HelmRelease & Obj)[] | undefined {
    return this.helmReleases?.byIndex(CLUSTER_INDEX, key);
  }

  /** The ClusterStacks of a namespace. */
  clusterStacksIn(namespace: string): (ClusterStack & Obj)[] {
    return this.clusterStacks.byIndex(NS_BY_STACK_INDEX, namespace);
  }

  /** The keys of the Clusters whose refs point at `o` (an object of `kind`). */
  clustersReferring(o: Obj, kind: string): string[] {
    return this.clusters.byIndex(REF_INDEX, `${nsOf(o)}/${kind}/${o.metadata.name ?? ''}`).map(keyOf);
  }

  /** The keys of the Clusters whose addons come from this release (by its ClusterClass). */
  clustersOfRelease(r: ClusterStackRelease & Obj): string[] {
    return this.clusters.byIndex(CLASS_INDEX, `${nsOf(r)}/${r.spec.clusterClass}`).map(keyOf);
  }

  /** The keys of the Clusters a ClusterStack may serve: of its namespace, and naming a class there. */
  clustersOfClusterStack(cs: ClusterStack & Obj): string[] {
    return [
      ...this.clusters.byIndex(NS_INDEX, nsOf(cs)),
      ...this.clusters.byIndex(FOREIGN_BY_CLASS_NS_INDEX, nsOf(cs)),
    ].map(keyOf);
  }

  /** The keys of the Clusters in a namespace that name a ClusterClass of another namespace. */
  foreignClustersIn(namespace: string): string[] {
    return this.clusters.byIndex(FOREIGN_BY_NS_INDEX, namespace).map(keyOf);
  }

  /** The keys of the Clusters in a namespace. */
  clustersIn(namespace: string): string[] {
    return this.clusters.byIndex(NS_INDEX, namespace).map(keyOf);
  }
}

/** Requeues the Clusters whose reconcile reads what changed in the caches. */
export function watchAddonInputs(
  manager: Pick<Manager, 'watch'>,
  c: Controller,
  caches: AddonCaches,
  fluxShards: boolean,
): void {
  manager.watch(c, caches.clusters);
  // Not on its own status writes: the status is this reconcile's output (see clusterAddonReconcileInputs).
  manager.watch(
    c,
    caches.clusterAddons,
    undefined,
    (o, n) => !sameJson(clusterAddonReconcileInputs(o), clusterAddonReconcileInputs(n)),
  );
  manager.watch(c, caches.kustomizations, addonClusterKeys);
  if (caches.helmReleases !== undefined) manager.watch(c, caches.helmReleases, addonClusterKeys);
  // A release or ClusterStack maps to every Cluster that uses it: only a change of what the addon
  // reconcile reads of it requeues them (at 10,000 Clusters, a status write would otherwise mean
  // 10,000 reconciles).
  manager.watch(
    c,
    caches.releases,
    (r) => caches.clustersOfRelease(r),
    (o, n) => !sameJson(releaseAddonInputs(o), releaseAddonInputs(n)),
  );
  manager.watch(
    c,
    caches.clusterStacks,
    (cs) => caches.clustersOfClusterStack(cs),
    (o, n) => !sameJson(clusterStackAddonInputs(o), clusterStackAddonInputs(n)),
  );
  // A Namespace's labels decide whether its Clusters of another namespace's ClusterClass are served.
  manager.watch(
    c,
    caches.namespaces,
    (n) => caches.foreignClustersIn(n.metadata.name ?? ''),
    namespaceLabelsChanged,
  );
  // With Flux shards, a Namespace's stackflux.io/flux-shard label moves its Clusters' Flux objects.
  if (fluxShards) {
    manager.watch(
      c,
      caches.namespaces,
      (n) => caches.clustersIn(n.metadata.name ?? ''),
      (o, n) =>
        o.metadata.labels?.[FLUX_SHARD_NAMESPACE_LABEL] !== n.metadata.labels?.[FLUX_SHARD_NAMESPACE_LABEL],
    );
  }
}
