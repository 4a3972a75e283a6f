// Everything the pure ClusterAddon reconcile reads for one Cluster: from the caches (the Cluster,
// its ClusterAddon, the release its addons come from and its ClusterStack, the Namespace's labels,
// the addon Kustomizations and HelmReleases), the release tree at the release's commit, the objects
// the Cluster's refs point at, and the state of its fleet branch (read from Git on the first
// reconcile of the key, or when a reconcile is requested).
import type { ClusterAddon } from '../../api/clusteraddon.ts';
import type { ClusterStackRelease } from '../../api/clusterstackrelease.ts';
import type { ReleaseTree } from '../../api/release.ts';
import type { BranchState } from '../../gitops/branches.ts';
import { addonReleaseTag } from '../../reconcilers/addonrelease.ts';
import type { ClusterAddonInput, FleetSettings } from '../../reconcilers/clusteraddon.ts';
import { clusterUse } from '../../reconcilers/clusterstack.ts';
import { reconcileRequested } from '../../reconcilers/reconcilerequest.ts';
import { clusterStackOfTag } from '../../reconcilers/sharing.ts';
import { FLUX_SHARD_NAMESPACE_LABEL, type FluxTemplates } from '../../releases/flux.ts';
import type { TenancyPolicy } from '../../releases/tenancy.ts';
import type { PlainObject } from '../../rendering/index.ts';
import type { Clock } from '../../runtime/clock.ts';
import type { ReconcileContext } from '../../runtime/controller.ts';
import { errorFields } from '../../runtime/logging.ts';
import { namespaceLabelsOf } from '../namespaces.ts';
import type { AddonCaches } from './caches.ts';
import type { FleetFailure, Obj } from './types.ts';

/** What gathering found for one key. */
export interface Gathered {
  input: ClusterAddonInput;
  /** The Cluster is gone or being deleted. */
  deleting: boolean;
  /** Why the release tree could not be fetched (the reconcile goes on without it, then fails). */
  fetchError: unknown;
  /** A ref's object is not known yet: the key is retried with back-off. */
  refsPending: boolean;
}

export interface AddonInputGathererOptions {
  caches: Pick<
    AddonCaches,
    | 'clusters'
    | 'clusterAddons'
    | 'releases'
    | 'clusterStacks'
    | 'namespaces'
    | 'kustomizationsOf'
    | 'helmReleasesOf'
    | 'clusterStacksIn'
  >;
  branches: {
    branchOf(key: string, namespace: string, name: string): Promise<BranchState | undefined>;
    forget(key: string): void;
  };
  trees: { treeOf(release: ClusterStackRelease): Promise<ReleaseTree | undefined> };
  refs: {
    read(
      cluster: Obj,
      field: 'controlPlaneRef' | 'infrastructureRef',
    ): Promise<{ object: PlainObject | undefined; pending: boolean; problem?: string }>;
  };
  /** The key's last fleet failure, if any. */
  fleetFailureOf: (key: string) => FleetFailure | undefined;
  /** Reading the branch failed: the ClusterAddon says so before the error is thrown. */
  fleetReadFailed: (
    existing: (ClusterAddon & Obj) | undefined,
    err: unknown,
    signal: AbortSignal | undefined,
  ) => Promise<void>;
  fleetSettings: FleetSettings;
  fluxShards: boolean;
  templates: FluxTemplates;
  tenancy?: TenancyPolicy;
  renderSeedKey?: string;
  clock: Clock;
}

export class AddonInputGatherer {
  private readonly opts: AddonInputGathererOptions;

  constructor(opts: AddonInputGathererOptions) {
    this.opts = opts;
  }

  /** Everything the pure reconcile reads for one key; undefined when nothing of the Cluster is left. */
  async gather(
    key: string,
    namespace: string,
    name: string,
    ctx: Pick<ReconcileContext, 'log' | 'signal'>,
  ): Promise<Gathered | undefined> {
    const { caches, branches, fleetSettings, clock } = this.opts;
    const cluster = caches.clusters.get(key);
    const existing = caches.clusterAddons.get(key);
    // A requested reconcile (reconcile.fluxcd.io/requestedAt) reads the branch again before re-rendering.
    if (existing !== undefined && reconcileRequested(existing)) branches.forget(key);
    let branch: BranchState | undefined;
    try {
      branch = await branches.branchOf(key, namespace, name);
    } catch (err) {
      await this.opts.fleetReadFailed(existing, err, ctx.signal);
      throw err;
    }
    if (cluster === undefined && existing === undefined && branch === undefined) return undefined;

    const use = cluster !== undefined ? clusterUse(cluster) : undefined;
    const tag = cluster !== undefined ? addonReleaseTag(cluster) : undefined;
    const releaseNs = use?.classNamespace ?? namespace;
    const release = tag !== undefined ? caches.releases.get(`${releaseNs}/${tag.tag}`) : undefined;
    const clusterStack =
      release !== undefined
        ? caches.clusterStacks.get(`${releaseNs}/${release.spec.clusterStack}`)
        : releaseNs !== namespace && tag !== undefined
          ? clusterStackOfTag(caches.clusterStacksIn(releaseNs), tag)
          : undefined;
    const namespaceLabels =
      releaseNs !== namespace ? namespaceLabelsOf(caches.namespaces, [namespace]) : undefined;
    const namespaceFluxShard = this.opts.fluxShards
      ? caches.namespaces.get(namespace)?.metadata.labels?.[FLUX_SHARD_NAMESPACE_LABEL]
      : undefined;
    let tree: ReleaseTree | undefined;
    let fetchError: unknown;
    const deleting = cluster === undefined || cluster.metadata.deletionTimestamp !== undefined;
    if (release !== undefined && !deleting) {
      try {
        tree = await this.opts.trees.treeOf(release);
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
      const cp = await this.opts.refs.read(cluster, 'controlPlaneRef');
      const infra = await this.opts.refs.read(cluster, 'infrastructureRef');
      controlPlane = cp.object;
      infraCluster = infra.object;
      refsPending = cp.pending || infra.pending;
      for (const r of [cp, infra]) if (r.problem !== undefined) refProblems.push(r.problem);
    }
    const helmReleases = caches.helmReleasesOf(key);
    const fleetFailure = this.opts.fleetFailureOf(key);
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
      kustomizations: caches.kustomizationsOf(key),
      ...(helmReleases !== undefined ? { helmReleases } : {}),
      branch,
      fleetSettings,
      ...(fleetFailure !== undefined ? { fleetFailure } : {}),
      ...(this.opts.tenancy !== undefined ? { tenancy: this.opts.tenancy } : {}),
      templates: this.opts.templates,
      now: new Date(clock.now()),
      holdUnapproved: true,
      ...(this.opts.renderSeedKey !== undefined ? { renderSeedKey: this.opts.renderSeedKey } : {}),
    };
    return { input, deleting, fetchError, refsPending };
  }
}
