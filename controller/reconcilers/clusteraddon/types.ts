// The ClusterAddon reconcile's types and constants: its input and result (re-exported by
// ../clusteraddon.ts) and what its phases hand each other. The lowest layer of the reconcile: it
// imports no phase.
import type { ClusterAddon, ClusterAddonStatus } from '../../api/clusteraddon.ts';
import type { ClusterStack } from '../../api/clusterstack.ts';
import type { ClusterStackRelease } from '../../api/clusterstackrelease.ts';
import type { GitRepository, HelmRelease, Kustomization } from '../../api/flux.ts';
import type { ReleaseTree, StackManifest } from '../../api/release.ts';
import type { BranchChange, BranchState } from '../../gitops/branches.ts';
import type { FluxTemplates } from '../../releases/flux.ts';
import type { AddonStage, StackDescription } from '../../releases/format.ts';
import type { TenancyPolicy } from '../../releases/tenancy.ts';
import type { AddonOrderEntry, AddonRenderer, HelmAddon, PlainObject } from '../../rendering/index.ts';
import { CLUSTER_CLASS_NOT_SHARED, type NamespaceLabels } from '../sharing.ts';
import type { HealthCheckExpr, PreConditionChecks } from '../waitcondition.ts';

/** Finalizer on the ClusterAddon: its fleet branch must be removed before it goes. */
export const FINALIZER_FLEET_CLEANUP = 'stackflux.io/fleet-cleanup';

/** Default prefix of the Clusters' fleet branches. */
export const DEFAULT_BRANCH_PREFIX = 'stackflux/';

export const Reason = {
  Succeeded: 'Succeeded',
  Creating: 'Creating',
  ReleaseNotFound: 'ReleaseNotFound',
  ReleaseNotFetched: 'ReleaseNotFetched',
  ClusterStackNotFound: 'ClusterStackNotFound',
  InvalidRelease: 'InvalidRelease',
  WaitingForRefs: 'WaitingForRefs',
  RefsNotReadable: 'RefsNotReadable',
  RenderFailed: 'RenderFailed',
  /** An addon's renders kept hitting a render limit: not rendered again for a while. */
  RenderCoolingDown: 'RenderCoolingDown',
  ValuesInvalid: 'ValuesInvalid',
  FleetSyncPending: 'FleetSyncPending',
  Progressing: 'Progressing',
  AddonNotReady: 'AddonNotReady',
  /** An addon's Kustomization waits for its gate: the csctl waitForPreCondition does not hold yet. */
  WaitingForPreCondition: 'WaitingForPreCondition',
  /** PostConditionsChecked: every csctl waitForPostCondition is a Flux health check. */
  PostConditionsMapped: 'PostConditionsMapped',
  /** PostConditionsChecked=False: a waitForPostCondition that no Flux health check can hold. */
  PostConditionNotMapped: 'PostConditionNotMapped',
  /** PreConditionsChecked: every csctl waitForPreCondition is a Flux gate the addon depends on. */
  PreConditionsMapped: 'PreConditionsMapped',
  /** PreConditionsChecked=False: a waitForPreCondition that no Flux health check can hold. */
  PreConditionNotMapped: 'PreConditionNotMapped',
  NotAStackfluxClass: 'NotAStackfluxClass',
  ClusterClassNotShared: CLUSTER_CLASS_NOT_SHARED,
  NamespaceNotKnown: 'NamespaceNotKnown',
  Deleting: 'Deleting',
  Deleted: 'Deleted',
} as const;

/** Where the rendered addons go and how Flux reads them (controller flags). */
export interface FleetSettings {
  url: string;
  /** Prefix of every Cluster's branch: `<prefix><namespace>/<cluster>` (default "stackflux/"). */
  branchPrefix: string;
  /** Secret (in each namespace) Flux uses to read the fleet repo. */
  secretRef?: string;
  /** Flux interval of each Cluster's GitRepository (a push requests a fetch at once anyway). */
  interval?: string;
  /** Flux (drift) interval of the addon Kustomizations; wins over the ClusterStack's interval. */
  addonInterval?: string;
  /**
   * Number of Flux shards: ≥ 2 labels each Cluster's Flux objects sharding.fluxcd.io/key=shard<k>;
   * ≥ 1 honours the namespace label stackflux.io/flux-shard (namespaceFluxShard).
   */
  fluxShards?: number;
}

export interface ClusterAddonInput {
  /** The CAPI Cluster as served (v1beta2 or v1beta1); undefined once it is gone. */
  cluster: unknown;
  /** Namespace/name of the reconciled key (used when the Cluster is gone). */
  namespace: string;
  name: string;
  controlPlane?: PlainObject;
  infraCluster?: PlainObject;
  /** Why a ref's object cannot be read (kind not served, listing it forbidden), for the condition. */
  refProblems?: readonly string[];
  clusterAddon?: ClusterAddon;
  /** The ClusterStackRelease named after the tag of the Cluster's ClusterClass. */
  release?: ClusterStackRelease;
  /** Its release tree at the tag; undefined while not fetched. */
  tree?: ReleaseTree;
  /** The commit the tree was read at (for messages). */
  treeCommit?: string;
  /** The ClusterStack owning the release. */
  clusterStack?: ClusterStack;
  /**
   * Labels of the Cluster's Namespace when its ClusterClass is in another namespace (the
   * ClusterStack's clusterNamespaceSelector decides); undefined: not known yet.
   */
  namespaceLabels?: NamespaceLabels;
  /** The stackflux.io/flux-shard label of the Cluster's Namespace (with --flux-shards ≥ 1). */
  namespaceFluxShard?: string;
  /** Kustomizations labelled stackflux.io/cluster=<cluster> in the namespace, as they are. */
  kustomizations: readonly Kustomization[];
  /** HelmReleases labelled stackflux.io/cluster=<cluster> in the namespace, as they are (Helm addons). */
  helmReleases?: readonly HelmRelease[];
  /** This Cluster's fleet branch as last read or written; undefined: it does not exist. */
  branch: BranchState | undefined;
  fleetSettings: FleetSettings;
  /**
   * The last write of this Cluster's branch failed (the fleet repository unreachable, stalled or
   * refusing the push); retried with back-off. Shown instead of FleetSyncPending while the
   * change is still to be written.
   */
  fleetFailure?: { reason: string; message: string };
  /** --default-service-account (Helm addons' Kustomizations) and --allowed-chart-hosts. */
  tenancy?: TenancyPolicy;
  templates: FluxTemplates;
  now: Date;
  /**
   * The live controller: a move to the rollout target whose render differs from the one its
   * approved impact recorded is held (reconcilers/approvedrender.ts). Not the preview, which makes
   * the impact.
   */
  holdUnapproved?: boolean;
  /**
   * Key of the per-render seed of the Go engine's randomness (rendering/determinism.ts); the live
   * controller and the impact controller share one, so a preview renders what the live render will.
   */
  renderSeedKey?: string;
  /**
   * Renders one addon; default renderAddon in-line. The controller and `stackflux render` pass
   * the bounded renderer (rendering/bounded.ts: child processes with a time and memory budget).
   */
  render?: AddonRenderer;
}

/** A JSON merge patch for one object (applied with content type application/merge-patch+json). */
export interface MergePatch {
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
  patch: Record<string, unknown>;
}

/** Why one Cluster's branch changes (the commit message says it; see branchCommitMessage). */
export interface ClusterChange {
  namespace: string;
  cluster: string;
  release?: string;
  /** Why, e.g. "first render", "release a → b", "addon x disabled", "cluster deleted". */
  reason: string;
  /** Addons whose folder is written (new or changed). */
  rendered: string[];
  /** Addons whose folder is removed. */
  removed: string[];
}

/** A change of one Cluster's branch, for the fleet writer, with the record of why. */
export interface BranchUpdate extends BranchChange {
  change: ClusterChange;
}

export interface ClusterAddonResult {
  /** Desired ClusterAddon (metadata + spec); undefined: do not apply (deleting). */
  clusterAddon?: ClusterAddon;
  /** The ClusterAddon's finalizers as they should be (if it exists). */
  finalizers: string[];
  status: ClusterAddonStatus;
  /** The branch change to write; undefined: the branch is as it should be (or must stay). */
  branch?: BranchUpdate;
  /** Desired GitRepository of the Cluster's branch; undefined: leave as is. */
  gitRepository?: GitRepository;
  /** The Cluster's GitRepository to delete if it exists (the Cluster has no branch). */
  deleteGitRepository?: string;
  /** Desired addon Kustomizations; undefined: leave all as they are. */
  kustomizations?: Kustomization[];
  /** Names of addon Kustomizations to delete (Flux prunes their objects), sorted. */
  deleteKustomizations: string[];
  /** Merge patches to existing Kustomizations (deletion: deletionPolicy Orphan). */
  patches: MergePatch[];
  /** renderDigest of the branch files this reconcile rendered (absent: nothing rendered). */
  renderDigest?: string;
}

// ---- What the phases hand each other (not exported by ../clusteraddon.ts).

/** What every phase needs: the input plus derived names and the helpers for status. */
export interface Context {
  input: ClusterAddonInput;
  namespace: string;
  name: string;
  existing: ClusterAddon | undefined;
  previous: ClusterAddonStatus | undefined;
  /** The Cluster's fleet branch. */
  branchName: string;
  /** Finalizers without / with ours. */
  otherFinalizers: string[];
  withFinalizer: string[];
  /** This Cluster's addon Kustomizations as they are, sorted by name. */
  ownKustomizations: Kustomization[];
  /** This Cluster's addon HelmReleases as they are, sorted by name. */
  ownHelmReleases: HelmRelease[];
}

/** The Cluster, its release and its stack once every input is there. */
export interface Target {
  cluster: Record<string, unknown>;
  clusterAddon: ClusterAddon;
  /** The ClusterAddon as it exists (with a uid and our finalizer). */
  owner: ClusterAddon;
  releaseName: string;
  release: ClusterStackRelease;
  tree: ReleaseTree;
  clusterStack: ClusterStack;
  /** The release's addons in apply order, whatever its format. */
  addons: PlannedAddon[];
  /** The native release's stack.yaml; undefined for a csctl release. */
  stack?: StackManifest;
  description: StackDescription;
}

/** One addon of the release as this reconcile applies it. */
export interface PlannedAddon extends AddonOrderEntry {
  /** csctl stages: the stage the addon is in (see csctlAddonPlan). */
  stage?: AddonStage;
}

/** The enabled addons in apply order, their effective dependencies and the disabled ones. */
export interface Selection {
  order: PlannedAddon[];
  dependencies: Map<string, string[]>;
  disabled: Set<string>;
  clusterValues: Record<string, unknown> | undefined;
}

/** A phase either yields a value or ends the reconcile with a result. */
export type Step<T> = { ok: true; value: T } | { ok: false; result: ClusterAddonResult | undefined };

/** Rendered addons: the branch's files and which addons are Helm charts. */
export interface Rendered {
  files: Map<string, string>;
  helm: Map<string, HelmAddon>;
  /** csctl waitForPostCondition as Flux health check expressions, by addon. */
  healthChecks: Map<string, HealthCheckExpr[]>;
  postConditions: ConditionSummary;
  /** csctl waitForPreCondition as the health checks of a gate Kustomization, by addon. */
  gates: Map<string, PreConditionChecks>;
  preConditions: ConditionSummary;
}

/** How many wait conditions (pre or post) the rendered addons have, and those no Flux health check holds. */
export interface ConditionSummary {
  count: number;
  unmapped: string[];
}
