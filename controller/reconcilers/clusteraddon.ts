// The ClusterAddon reconcile (pure): a Cluster API Cluster (+ the objects its refs point at) + its
// ClusterAddon + the ClusterStackRelease/ClusterStack whose ClusterClass it uses + the release tree +
// the addon Kustomizations as they are + this cluster's folders in the fleet repo + now →
// fleet folder changes, desired Flux objects, the desired ClusterAddon and its status.
//
// Decisions:
// - Per-cluster values come from the Cluster's `spec.topology.variables` entry named
//   `stackfluxAddonValues` (a mapping keyed by addon name): they live in the one manifest users
//   already write per cluster and survive a re-created ClusterAddon (which is generated and owned
//   by the Cluster). The stack's ClusterClass declares the variable (type object,
//   x-kubernetes-preserve-unknown-fields) so Cluster API accepts it. The ClusterAddon (generated)
//   carries no values of its own: one source per setting.
// - Disable per cluster: annotation `stackflux.io/disabled-addons: "a,b"` on the Cluster; for every
//   cluster: ClusterStack spec.addons[{name, enabled: false}]. A disabled addon's dependents
//   depend on what it depended on (transitively), so no Kustomization waits for a missing one.
// - `folders` holds CHANGES only (relative to the fleet path prefix, as FleetRepo.sync takes them):
//   a folder whose content differs from the fleet, or `null` for a folder of this cluster that is
//   in the fleet but no longer wanted. Nothing to change → empty map → no commit.
// - Render failure of ANY addon (or invalid release/values): Ready=False (Stalled, as only a user
//   change helps), no folder and no Kustomization changes: what runs stays.
// - The Kustomization of an addon is created only once its folder exists in the fleet commit, so
//   Flux never points at a missing path (it would retry only after its interval).
// - The fleet GitRepository is shared by every cluster of the namespace: it carries no owner
//   reference (a single owner would delete it under the other clusters; several owners would fight
//   under one server-side-apply field manager). Its artifact is limited to <prefix>/<namespace>.
// - Deletion (Cluster has deletionTimestamp, is gone, or the ClusterAddon is being deleted): merge
//   patches set every addon Kustomization's deletionPolicy to Orphan (Flux must not try to prune in
//   a workload cluster that is going away; a re-created ClusterAddon re-adopts the objects), the
//   cluster's folders become null, and the finalizer stackflux.io/fleet-cleanup is dropped only
//   once the fleet commit without the folders is known. Garbage collection removes the
//   Kustomizations after the ClusterAddon.
// - Ready only when every enabled addon's Kustomization is Ready at `<branch>@sha1:<fleet commit>`
//   (Flux's revision format for a branch) and no folder change is pending.
import type { ClusterAddon, ClusterAddonStatus } from '../api/clusteraddon.ts';
import type { ClusterStack } from '../api/clusterstack.ts';
import type { ClusterStackRelease } from '../api/clusterstackrelease.ts';
import type { GitRepository, Kustomization } from '../api/flux.ts';
import {
  API_VERSION,
  type Condition,
  ConditionType,
  LABEL_ADDON,
  LABEL_CLUSTER,
  LABEL_CLUSTER_STACK,
  LABEL_RELEASE,
  type OwnerReference,
} from '../api/meta.ts';
import type { ReleaseTree, StackManifest } from '../api/release.ts';
import {
  addonKustomization,
  addonKustomizationName,
  type FluxTemplates,
  fleetGitRepository,
  MANAGED_BY_LABELS,
  ownerReferenceTo,
} from '../releases/flux.ts';
import { readRelease } from '../releases/stack.ts';
import { parseReleaseTag, tagForClusterClassName } from '../releases/tags.ts';
import { addonOrder, type PlainObject, type RenderFailure, renderAddon } from '../rendering/index.ts';
import {
  findCondition,
  markNotReady,
  markReady,
  markReconciling,
  markStalled,
  removeCondition,
} from '../runtime/conditions.ts';
import { clusterUse } from './clusterstack.ts';
import { ProviderReason, releaseProviderBlock } from './provider.ts';
import { acknowledgeReconcileRequest } from './reconcilerequest.ts';

/** Finalizer on the ClusterAddon: its fleet folders must be removed before it goes. */
export const FINALIZER_FLEET_CLEANUP = 'stackflux.io/fleet-cleanup';
/** Cluster annotation: comma-separated addon names disabled for this cluster. */
export const ANNOTATION_DISABLED_ADDONS = 'stackflux.io/disabled-addons';
/** Cluster topology variable holding per-cluster addon values, keyed by addon name. */
export const VALUES_VARIABLE = 'stackfluxAddonValues';

export const Reason = {
  Succeeded: 'Succeeded',
  Creating: 'Creating',
  ReleaseNotFound: 'ReleaseNotFound',
  ReleaseNotFetched: 'ReleaseNotFetched',
  ClusterStackNotFound: 'ClusterStackNotFound',
  InvalidRelease: 'InvalidRelease',
  WaitingForRefs: 'WaitingForRefs',
  RenderFailed: 'RenderFailed',
  ValuesInvalid: 'ValuesInvalid',
  FleetSyncPending: 'FleetSyncPending',
  Progressing: 'Progressing',
  AddonNotReady: 'AddonNotReady',
  NotAStackfluxClass: 'NotAStackfluxClass',
  Deleting: 'Deleting',
  Deleted: 'Deleted',
} as const;

/** Where the rendered addons go and how Flux reads them (controller flags). */
export interface FleetSettings {
  url: string;
  branch: string;
  /** Folder inside the repository holding <namespace>/<cluster>/<addon>/ ("" = the root). */
  pathPrefix: string;
  /** Secret (in each namespace) Flux uses to read the fleet repo. */
  secretRef?: string;
  /** Name of the fleet GitRepository in each namespace. */
  gitRepositoryName: string;
  interval?: string;
}

/** The fleet repo as of the last sync, restricted to this cluster. */
export interface FleetState {
  /** Tip of the fleet branch after the last sync; undefined: not synced/read yet. */
  commit?: string;
  /** This cluster's folders (`<namespace>/<cluster>/<addon>`, relative to the prefix) at `commit`. */
  folders: ReadonlyMap<string, ReadonlyMap<string, string>>;
}

export interface ClusterAddonInput {
  /** The CAPI Cluster as served (v1beta2 or v1beta1); undefined once it is gone. */
  cluster: unknown;
  /** Namespace/name of the reconciled key (used when the Cluster is gone). */
  namespace: string;
  name: string;
  controlPlane?: PlainObject;
  infraCluster?: PlainObject;
  clusterAddon?: ClusterAddon;
  /** The ClusterStackRelease named after the tag of the Cluster's ClusterClass. */
  release?: ClusterStackRelease;
  /** Its release tree at the tag; undefined while not fetched. */
  tree?: ReleaseTree;
  /** The commit the tree was read at (for messages). */
  treeCommit?: string;
  /** The ClusterStack owning the release. */
  clusterStack?: ClusterStack;
  /** Kustomizations labelled stackflux.io/cluster=<cluster> in the namespace, as they are. */
  kustomizations: readonly Kustomization[];
  fleet: FleetState;
  fleetSettings: FleetSettings;
  templates: FluxTemplates;
  now: Date;
}

/** A JSON merge patch for one object (applied with content type application/merge-patch+json). */
export interface MergePatch {
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
  patch: Record<string, unknown>;
}

/** What a batch commit says about one cluster (see commitMessage). */
export interface ClusterChange {
  namespace: string;
  cluster: string;
  release?: string;
  /** Why, e.g. "first render", "release a → b", "cluster deleted". */
  reason: string;
  /** Addons whose folder is written. */
  rendered: string[];
  /** Addons whose folder is removed. */
  removed: string[];
}

export interface ClusterAddonResult {
  /** Desired ClusterAddon (metadata + spec); undefined: do not apply (deleting). */
  clusterAddon?: ClusterAddon;
  /** The ClusterAddon's finalizers as they should be (if it exists). */
  finalizers: string[];
  status: ClusterAddonStatus;
  /** Fleet folder changes only; empty = nothing to commit for this cluster. */
  folders: Map<string, Map<string, string> | null>;
  /** Set when `folders` is not empty. */
  change?: ClusterChange;
  /** Desired fleet GitRepository of the namespace; undefined: leave as is. */
  gitRepository?: GitRepository;
  /** Desired addon Kustomizations; undefined: leave all as they are. */
  kustomizations?: Kustomization[];
  /** Names of addon Kustomizations to delete (Flux prunes their objects), sorted. */
  deleteKustomizations: string[];
  /** Merge patches to existing Kustomizations (deletion: deletionPolicy Orphan). */
  patches: MergePatch[];
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function sameFiles(a: ReadonlyMap<string, string>, b: ReadonlyMap<string, string> | undefined): boolean {
  if (b === undefined || a.size !== b.size) return false;
  for (const [k, v] of a) if (b.get(k) !== v) return false;
  return true;
}

/** `<namespace>/<cluster>/<addon>`, relative to the fleet prefix. */
export function fleetFolder(namespace: string, cluster: string, addon: string): string {
  return `${namespace}/${cluster}/${addon}`;
}

function joinPath(...parts: string[]): string {
  return parts
    .flatMap((p) => p.split('/'))
    .filter((s) => s !== '' && s !== '.')
    .join('/');
}

/** Flux's revision of a branch artifact. */
export function branchRevision(branch: string, commit: string): string {
  return `${branch}@sha1:${commit}`;
}

/** Addons disabled on the Cluster by annotation, sorted, de-duplicated. */
export function disabledByAnnotation(cluster: unknown): string[] {
  if (!isRecord(cluster) || !isRecord(cluster.metadata)) return [];
  const annotations = cluster.metadata.annotations;
  if (!isRecord(annotations)) return [];
  const raw = annotations[ANNOTATION_DISABLED_ADDONS];
  if (typeof raw !== 'string') return [];
  return [
    ...new Set(
      raw
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s !== ''),
    ),
  ].sort(compareStrings);
}

/**
 * Per-cluster values: the `stackfluxAddonValues` topology variable (a mapping keyed by addon name).
 * Undefined when unset; a string when it is not a mapping (the message for the condition).
 */
export function clusterValuesOf(cluster: unknown): Record<string, unknown> | undefined | string {
  if (!isRecord(cluster) || !isRecord(cluster.spec) || !isRecord(cluster.spec.topology)) return undefined;
  const variables = cluster.spec.topology.variables;
  if (!Array.isArray(variables)) return undefined;
  const entry = variables.find((v: unknown) => isRecord(v) && v.name === VALUES_VARIABLE) as unknown;
  if (!isRecord(entry) || entry.value === undefined || entry.value === null) return undefined;
  if (!isRecord(entry.value)) {
    return `Cluster spec.topology.variables[${VALUES_VARIABLE}].value must be a mapping keyed by addon name`;
  }
  for (const [addon, v] of Object.entries(entry.value)) {
    if (v !== null && v !== undefined && !isRecord(v)) {
      return `Cluster spec.topology.variables[${VALUES_VARIABLE}].value.${addon} must be a mapping`;
    }
  }
  return entry.value;
}

/**
 * Dependencies among the enabled addons: an addon's dependency that is disabled is replaced by
 * that addon's own (effective) dependencies, so the graph skips it. Sorted, de-duplicated.
 */
export function enabledDependencies(
  stack: StackManifest,
  enabled: ReadonlySet<string>,
): Map<string, string[]> {
  const direct = new Map(addonOrder(stack).map((e) => [e.name, e.dependsOn]));
  const memo = new Map<string, string[]>();
  // stack.yaml only allows dependencies on earlier addons, so this terminates; `seen` guards anyway.
  const effective = (name: string, seen: Set<string>): string[] => {
    const cached = memo.get(name);
    if (cached !== undefined) return cached;
    const out = new Set<string>();
    for (const dep of direct.get(name) ?? []) {
      if (seen.has(dep)) continue;
      if (enabled.has(dep)) out.add(dep);
      else for (const d of effective(dep, new Set([...seen, dep]))) out.add(d);
    }
    const list = [...out].sort(compareStrings);
    memo.set(name, list);
    return list;
  };
  const result = new Map<string, string[]>();
  for (const addon of stack.addons) {
    if (enabled.has(addon.name)) result.set(addon.name, effective(addon.name, new Set([addon.name])));
  }
  return result;
}

/** Kustomization Ready condition for its current generation (undefined if stale or missing). */
function kustomizationReady(k: Kustomization | undefined): Condition | undefined {
  if (k === undefined) return undefined;
  const gen = k.metadata.generation;
  const observed = k.status?.observedGeneration;
  if (gen !== undefined && observed !== undefined && observed < gen) return undefined;
  return findCondition(k.status?.conditions, ConditionType.Ready);
}

function clusterOwnerReference(cluster: Record<string, unknown>, name: string): OwnerReference {
  const meta = isRecord(cluster.metadata) ? cluster.metadata : {};
  return {
    apiVersion: typeof cluster.apiVersion === 'string' ? cluster.apiVersion : 'cluster.x-k8s.io/v1beta2',
    kind: 'Cluster',
    name,
    uid: typeof meta.uid === 'string' ? meta.uid : '',
    controller: true,
    blockOwnerDeletion: true,
  };
}

function hasRef(
  cluster: Record<string, unknown>,
  field: 'controlPlaneRef' | 'infrastructureRef',
): string | undefined {
  const spec = cluster.spec;
  if (!isRecord(spec)) return undefined;
  const ref = spec[field];
  if (!isRecord(ref) || typeof ref.name !== 'string' || ref.name === '') return undefined;
  return `${typeof ref.kind === 'string' ? ref.kind : 'object'} ${ref.name}`;
}

function renderFailureReason(failure: RenderFailure): string {
  return failure.reason === 'InvalidValues' || failure.reason === 'ValuesSchemaFailed'
    ? Reason.ValuesInvalid
    : Reason.RenderFailed;
}

// ---- issue 12 (conventions): Flux's reconcile request on a ClusterAddon. BEGIN
/** reconcileClusterAddonOnce, with a reconcile.fluxcd.io/requestedAt request acknowledged in the status. */
export function reconcileClusterAddon(input: ClusterAddonInput): ClusterAddonResult | undefined {
  const result = reconcileClusterAddonOnce(input);
  return result === undefined ? undefined : acknowledgeReconcileRequest(result, input.clusterAddon);
}
// ---- issue 12 (conventions). END

function reconcileClusterAddonOnce(input: ClusterAddonInput): ClusterAddonResult | undefined {
  const { now, fleet, fleetSettings } = input;
  const namespace = input.namespace;
  const name = input.name;
  const existing = input.clusterAddon;
  const cluster = isRecord(input.cluster) ? input.cluster : undefined;
  const clusterMeta = cluster !== undefined && isRecord(cluster.metadata) ? cluster.metadata : undefined;
  const generation = existing?.metadata.generation;
  const mark = (reason: string, message: string) => ({
    reason,
    message,
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
  });
  const existingFinalizers = existing?.metadata.finalizers ?? [];
  const otherFinalizers = existingFinalizers.filter((f) => f !== FINALIZER_FLEET_CLEANUP);
  const withFinalizer = [...otherFinalizers, FINALIZER_FLEET_CLEANUP].sort(compareStrings);
  const previous = existing?.status;
  const kustomizationsByName = new Map(input.kustomizations.map((k) => [k.metadata.name, k]));
  const ownKustomizations = input.kustomizations
    .filter(
      (k) => k.metadata.labels?.[LABEL_CLUSTER] === name && k.metadata.labels?.[LABEL_ADDON] !== undefined,
    )
    .sort((a, b) => compareStrings(a.metadata.name, b.metadata.name));
  const prefix = `${namespace}/${name}/`;
  const fleetFolders = new Map(
    [...fleet.folders]
      .filter(([folder]) => folder.startsWith(prefix))
      .sort(([a], [b]) => compareStrings(a, b)),
  );
  const addonOfFolder = (folder: string): string => folder.slice(prefix.length);

  const base = (status: ClusterAddonStatus, finalizers: string[]): ClusterAddonResult => ({
    finalizers,
    status,
    folders: new Map(),
    deleteKustomizations: [],
    patches: [],
  });
  /** The previous status with new conditions: nothing else changes. */
  const keepStatus = (conditions: Condition[]): ClusterAddonStatus => ({
    ...(previous ?? {}),
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
    conditions,
  });

  // ---- Deletion: the Cluster is gone or going, or the ClusterAddon is being deleted.
  const deleting =
    cluster === undefined ||
    typeof clusterMeta?.deletionTimestamp === 'string' ||
    existing?.metadata.deletionTimestamp !== undefined;
  if (deleting) {
    if (existing === undefined && fleetFolders.size === 0) return undefined;
    const folders = new Map<string, Map<string, string> | null>();
    for (const folder of fleetFolders.keys()) folders.set(folder, null);
    const patches: MergePatch[] = ownKustomizations
      .filter((k) => k.spec.deletionPolicy !== 'Orphan')
      .map((k) => ({
        apiVersion: k.apiVersion,
        kind: 'Kustomization',
        namespace: k.metadata.namespace ?? namespace,
        name: k.metadata.name,
        patch: { spec: { deletionPolicy: 'Orphan' } },
      }));
    const cleaned = fleet.commit !== undefined && folders.size === 0;
    const conditions = cleaned
      ? markReconciling(
          previous?.conditions,
          mark(Reason.Deleted, `fleet folders of ${namespace}/${name} removed at ${fleet.commit}`),
          now,
        )
      : markReconciling(
          previous?.conditions,
          mark(
            Reason.Deleting,
            folders.size > 0
              ? `removing the fleet folders ${[...folders.keys()].join(', ')}; waiting for the fleet commit`
              : 'waiting for the fleet repository to be read',
          ),
          now,
        );
    const result = base(
      { ...keepStatus(conditions), fleetPath: `${namespace}/${name}`, addons: [] },
      cleaned ? otherFinalizers : existing !== undefined ? withFinalizer : [],
    );
    result.folders = folders;
    result.patches = patches;
    if (folders.size > 0) {
      result.change = {
        namespace,
        cluster: name,
        ...(previous?.release !== undefined ? { release: previous.release } : {}),
        reason: 'cluster deleted',
        rendered: [],
        removed: [...folders.keys()].map(addonOfFolder),
      };
    }
    return result;
  }

  // ---- Is this Cluster ours?
  const use = clusterUse(cluster);
  const tag = use === undefined ? undefined : tagForClusterClassName(use.className);
  if (tag === undefined) {
    if (existing === undefined) return undefined;
    // It was ours and moved to a ClusterClass that is no release: keep what runs, say so.
    return base(
      keepStatus(
        markStalled(
          previous?.conditions,
          mark(
            Reason.NotAStackfluxClass,
            `Cluster uses ClusterClass ${use?.className ?? '(none)'}, which is not a cluster stack release; addons are left as they are`,
          ),
          now,
        ),
      ),
      withFinalizer,
    );
  }
  const releaseName = tag.tag;
  const clusterStackName = input.release?.spec.clusterStack ?? input.clusterStack?.metadata.name;
  const clusterAddon: ClusterAddon = {
    apiVersion: API_VERSION,
    kind: 'ClusterAddon',
    metadata: {
      name,
      namespace,
      labels: Object.fromEntries(
        Object.entries({
          ...MANAGED_BY_LABELS,
          [LABEL_CLUSTER]: name,
          [LABEL_RELEASE]: releaseName,
          ...(clusterStackName !== undefined ? { [LABEL_CLUSTER_STACK]: clusterStackName } : {}),
        }).sort(([a], [b]) => compareStrings(a, b)),
      ),
      ownerReferences: [clusterOwnerReference(cluster, name)],
    },
    spec: {
      cluster: name,
      release: releaseName,
      ...(clusterStackName !== undefined ? { clusterStack: clusterStackName } : {}),
    },
  };
  const waiting = (reason: string, message: string): ClusterAddonResult => ({
    ...base(keepStatus(markReconciling(previous?.conditions, mark(reason, message), now)), withFinalizer),
    clusterAddon,
  });

  // The ClusterAddon must exist (uid for owner references, finalizer before fleet files).
  if (
    existing === undefined ||
    existing.metadata.uid === undefined ||
    !existingFinalizers.includes(FINALIZER_FLEET_CLEANUP)
  ) {
    return waiting(Reason.Creating, `creating ClusterAddon ${namespace}/${name} for release ${releaseName}`);
  }
  const { release, tree, clusterStack } = input;
  if (release === undefined) {
    return waiting(Reason.ReleaseNotFound, `waiting for ClusterStackRelease ${releaseName}`);
  }
  // A release whose provider object is not ready is not usable (issue 15): what runs stays.
  const providerBlock = releaseProviderBlock(release);
  if (providerBlock !== undefined) return waiting(ProviderReason.WaitingForProvider, providerBlock);
  if (tree === undefined) {
    return waiting(Reason.ReleaseNotFetched, `waiting for the files of release ${releaseName} to be fetched`);
  }
  if (clusterStack === undefined) {
    return waiting(
      Reason.ClusterStackNotFound,
      `waiting for ClusterStack ${release.spec.clusterStack} (its central values are enforced)`,
    );
  }
  const failed = (reason: string, message: string): ClusterAddonResult => ({
    ...base(keepStatus(markStalled(previous?.conditions, mark(reason, message), now)), withFinalizer),
    clusterAddon,
  });
  const parsedTag = parseReleaseTag(release.spec.tag);
  if (!parsedTag.ok) return failed(Reason.InvalidRelease, `release ${release.spec.tag}: ${parsedTag.reason}`);
  const read = readRelease(tree, parsedTag.value);
  if (!read.ok) {
    return failed(
      Reason.InvalidRelease,
      `release ${releaseName}${input.treeCommit ? ` at ${input.treeCommit}` : ''} is invalid: ${read.errors.join('; ')}`,
    );
  }
  const stack = read.value;

  // Objects the templates read must be in the cache before rendering (else a false "missing field").
  const cpRef = hasRef(cluster, 'controlPlaneRef');
  const infraRef = hasRef(cluster, 'infrastructureRef');
  const missingRefs = [
    ...(cpRef !== undefined && input.controlPlane === undefined ? [`ControlPlane (${cpRef})`] : []),
    ...(infraRef !== undefined && input.infraCluster === undefined ? [`InfraCluster (${infraRef})`] : []),
  ];
  if (missingRefs.length > 0)
    return waiting(Reason.WaitingForRefs, `waiting for ${missingRefs.join(' and ')}`);

  // ---- Which addons, with which values.
  const clusterValues = clusterValuesOf(cluster);
  if (typeof clusterValues === 'string') return failed(Reason.ValuesInvalid, clusterValues);
  const centralValues = clusterStack.spec.values;
  const disabledCentral = new Set(
    (clusterStack.spec.addons ?? []).filter((a) => a.enabled === false).map((a) => a.name),
  );
  const disabledCluster = new Set(disabledByAnnotation(cluster));
  const enabled = new Set(
    stack.addons.map((a) => a.name).filter((a) => !disabledCentral.has(a) && !disabledCluster.has(a)),
  );
  const order = addonOrder(stack).filter((e) => enabled.has(e.name));
  const dependencies = enabledDependencies(stack, enabled);

  // ---- Render every enabled addon; any failure → no changes at all.
  const rendered = new Map<string, Map<string, string>>();
  const failures: { addon: string; failure: RenderFailure }[] = [];
  for (const { name: addon } of order) {
    const result = renderAddon({
      tree,
      stack,
      addon,
      cluster,
      ...(input.controlPlane !== undefined ? { controlPlane: input.controlPlane } : {}),
      ...(input.infraCluster !== undefined ? { infraCluster: input.infraCluster } : {}),
      ...(clusterValues !== undefined ? { clusterValues } : {}),
      ...(centralValues !== undefined ? { centralValues } : {}),
    });
    if (result.ok) rendered.set(fleetFolder(namespace, name, addon), result.files);
    else failures.push({ addon, failure: result });
  }
  if (failures.length > 0) {
    const first = failures[0];
    const reason = first === undefined ? Reason.RenderFailed : renderFailureReason(first.failure);
    const message = `release ${releaseName}: ${failures
      .map((f) => `addon ${f.addon}: ${f.failure.message}`)
      .join('; ')}; nothing was changed, the addons keep running as they are`;
    const out = failed(reason, message);
    // Per-addon detail, the rest of the status as it was.
    const failedBy = new Map(failures.map((f) => [f.addon, f.failure]));
    const addons = (previous?.addons ?? []).map((a) => {
      const f = failedBy.get(a.name);
      return f === undefined ? a : { ...a, reason: renderFailureReason(f), message: f.message };
    });
    for (const [addon, f] of failedBy) {
      if (!addons.some((a) => a.name === addon)) {
        addons.push({ name: addon, ready: false, reason: renderFailureReason(f), message: f.message });
      }
    }
    out.status = { ...out.status, addons: addons.sort((a, b) => compareStrings(a.name, b.name)) };
    return out;
  }

  // ---- Fleet folder changes.
  const folders = new Map<string, Map<string, string> | null>();
  for (const [folder, files] of rendered) {
    if (!sameFiles(files, fleetFolders.get(folder))) folders.set(folder, files);
  }
  for (const folder of fleetFolders.keys()) if (!rendered.has(folder)) folders.set(folder, null);
  const sortedFolders = new Map([...folders].sort(([a], [b]) => compareStrings(a, b)));

  // ---- Flux objects.
  const sourceName = fleetSettings.gitRepositoryName;
  const gitRepository = fleetGitRepository(input.templates, {
    name: sourceName,
    namespace,
    url: fleetSettings.url,
    branch: fleetSettings.branch,
    ...(fleetSettings.secretRef !== undefined ? { secretRef: fleetSettings.secretRef } : {}),
    ...(fleetSettings.interval !== undefined ? { interval: fleetSettings.interval } : {}),
    path: joinPath(fleetSettings.pathPrefix, namespace),
  });
  const owner = [ownerReferenceTo(existing)];
  const kustomizations: Kustomization[] = [];
  for (const entry of order) {
    const folder = fleetFolder(namespace, name, entry.name);
    const kname = addonKustomizationName(name, entry.name);
    // Created once its folder is in the fleet commit; kept (updated) once it exists.
    if (!fleetFolders.has(folder) && !kustomizationsByName.has(kname)) continue;
    kustomizations.push(
      addonKustomization(input.templates, {
        cluster: name,
        namespace,
        addon: entry.name,
        release: releaseName,
        path: joinPath(fleetSettings.pathPrefix, folder),
        sourceName,
        dependsOn: dependencies.get(entry.name) ?? [],
        ...(entry.targetNamespace !== undefined ? { targetNamespace: entry.targetNamespace } : {}),
        ...(release.spec.interval !== undefined ? { interval: release.spec.interval } : {}),
        ...(release.spec.timeout !== undefined ? { timeout: release.spec.timeout } : {}),
        ownerReferences: owner,
      }),
    );
  }
  const wanted = new Set(order.map((e) => addonKustomizationName(name, e.name)));
  const deleteKustomizations = ownKustomizations.map((k) => k.metadata.name).filter((n) => !wanted.has(n));

  // ---- Status.
  const expected =
    fleet.commit !== undefined ? branchRevision(fleetSettings.branch, fleet.commit) : undefined;
  const pending = sortedFolders.size > 0;
  const addons: NonNullable<ClusterAddonStatus['addons']> = [];
  const waitingFor: string[] = [];
  const notReady: string[] = [];
  for (const entry of order) {
    const kname = addonKustomizationName(name, entry.name);
    const k = kustomizationsByName.get(kname);
    const ready = kustomizationReady(k);
    const applied = k?.status?.lastAppliedRevision;
    const upToDate = !pending && expected !== undefined && applied === expected;
    // Flux re-verifies the same revision every interval (Ready=Unknown meanwhile): an addon that
    // was Ready at this revision stays Ready instead of flapping.
    const before = previous?.addons?.find((a) => a.name === entry.name);
    const reverifying =
      ready?.status === 'Unknown' && before?.ready === true && before.lastAppliedRevision === applied;
    const isReady = upToDate && (ready?.status === 'True' || reverifying);
    const runningRelease = isReady ? releaseName : (k?.metadata.labels?.[LABEL_RELEASE] ?? releaseName);
    let message: string;
    let reason: string;
    if (k === undefined) {
      reason = Reason.Progressing;
      message = pending ? 'waiting for the fleet commit' : `waiting for Kustomization ${kname}`;
      waitingFor.push(`${entry.name} (not created yet)`);
    } else if (ready?.status === 'False') {
      reason = ready.reason;
      message = ready.message;
      if (ready.reason === 'DependencyNotReady' || ready.reason === 'Progressing') {
        waitingFor.push(`${entry.name} (${ready.reason})`);
      } else {
        notReady.push(`${entry.name} (${ready.reason}: ${ready.message})`);
      }
    } else if (ready?.status !== 'True' && !reverifying) {
      reason = Reason.Progressing;
      message = ready?.message ?? `waiting for Kustomization ${kname} to reconcile`;
      waitingFor.push(`${entry.name} (reconciling)`);
    } else if (!upToDate) {
      reason = Reason.Progressing;
      message = `applied ${applied ?? 'nothing yet'}, waiting for ${pending ? 'the fleet commit' : (expected ?? 'the fleet commit')}`;
      waitingFor.push(`${entry.name} (applied ${applied ?? 'nothing'})`);
    } else {
      reason = Reason.Succeeded;
      message = `applied ${applied}`;
    }
    addons.push({
      name: entry.name,
      ready: isReady,
      reason,
      message,
      release: runningRelease,
      kustomization: kname,
      ...(applied !== undefined ? { lastAppliedRevision: applied } : {}),
    });
  }
  addons.sort((a, b) => compareStrings(a.name, b.name));

  let conditions: Condition[];
  if (pending) {
    conditions = markReconciling(
      previous?.conditions,
      mark(
        Reason.FleetSyncPending,
        `release ${releaseName}: waiting for the fleet commit of ${[...sortedFolders.keys()].join(', ')}`,
      ),
      now,
    );
  } else if (fleet.commit === undefined) {
    conditions = markReconciling(
      previous?.conditions,
      mark(Reason.FleetSyncPending, 'waiting for the fleet repository'),
      now,
    );
  } else if (notReady.length > 0) {
    conditions = markNotReady(
      previous?.conditions,
      mark(Reason.AddonNotReady, `release ${releaseName}: not ready: ${notReady.join(', ')}`),
      now,
    );
    conditions = removeCondition(conditions, ConditionType.Reconciling);
  } else if (waitingFor.length > 0) {
    conditions = markReconciling(
      previous?.conditions,
      mark(
        Reason.Progressing,
        `release ${releaseName}: waiting for ${waitingFor.join(', ')} to apply ${expected}`,
      ),
      now,
    );
  } else {
    conditions = markReady(
      previous?.conditions,
      mark(
        Reason.Succeeded,
        order.length === 0
          ? `release ${releaseName}: no addons enabled`
          : `release ${releaseName}: ${order.length} addon(s) applied at ${expected}`,
      ),
      now,
    );
  }

  const status: ClusterAddonStatus = {
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
    release: releaseName,
    ...(!pending && fleet.commit !== undefined
      ? { fleetCommit: fleet.commit }
      : previous?.fleetCommit !== undefined
        ? { fleetCommit: previous.fleetCommit }
        : {}),
    fleetPath: `${namespace}/${name}`,
    addons,
    conditions,
  };

  const result: ClusterAddonResult = {
    clusterAddon,
    finalizers: withFinalizer,
    status,
    folders: sortedFolders,
    gitRepository,
    kustomizations,
    deleteKustomizations,
    patches: [],
  };
  if (pending) {
    const previousRelease = previous?.release;
    result.change = {
      namespace,
      cluster: name,
      release: releaseName,
      reason:
        fleetFolders.size === 0
          ? 'first render'
          : previousRelease !== undefined && previousRelease !== releaseName
            ? `release ${previousRelease} → ${releaseName}`
            : 'rendered files changed',
      rendered: [...sortedFolders].filter(([, v]) => v !== null).map(([k]) => addonOfFolder(k)),
      removed: [...sortedFolders].filter(([, v]) => v === null).map(([k]) => addonOfFolder(k)),
    };
  }
  return result;
}

/**
 * The fleet commit message of a batch: a summary line, then one line per cluster (sorted):
 * "- <ns>/<cluster>: release <r> (<why>); rendered a, b; removed c".
 */
export function commitMessage(changes: readonly ClusterChange[]): string {
  const sorted = [...changes].sort(
    (a, b) => compareStrings(a.namespace, b.namespace) || compareStrings(a.cluster, b.cluster),
  );
  const removedOnly = sorted.every((c) => c.rendered.length === 0);
  const n = sorted.length;
  const head = `stackflux: ${removedOnly ? 'remove' : 'render'} ${n} cluster${n === 1 ? '' : 's'}`;
  const lines = sorted.map((c) => {
    const parts = [
      `${c.namespace}/${c.cluster}${c.release !== undefined ? `: release ${c.release}` : ''} (${c.reason})`,
    ];
    if (c.rendered.length > 0) parts.push(`rendered ${[...c.rendered].sort(compareStrings).join(', ')}`);
    if (c.removed.length > 0) parts.push(`removed ${[...c.removed].sort(compareStrings).join(', ')}`);
    return `- ${parts.join('; ')}`;
  });
  return `${head}\n\n${lines.join('\n')}\n`;
}
