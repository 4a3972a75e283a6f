// The ClusterAddon reconcile (pure): a Cluster API Cluster (+ the objects its refs point at) + its
// ClusterAddon + the ClusterStackRelease/ClusterStack whose ClusterClass it uses + the release tree +
// the addon Kustomizations as they are + the state of this Cluster's fleet branch + now →
// the branch's desired content (only when it differs), desired Flux objects, the desired
// ClusterAddon and its status.
//
// This module composes the phases, in the order they run; each is a file of clusteraddon/:
// deletion.ts, target.ts (resolve), selection.ts, render.ts, branchchange.ts (diff), renderhold.ts,
// readiness.ts (health), conditionschecked.ts, fluxobjects.ts (emit). Below them: types.ts and
// context.ts (what every phase starts from); reconcileinputs.ts is what the caches compare.
//
// Decisions:
// - The fleet holds one branch per Cluster, `<prefix><namespace>/<cluster>`, with `<addon>/<file>`
//   at its root; a GitRepository per Cluster (owned by the ClusterAddon, see
//   clusterGitRepositoryName) tracks it, so a commit moves only this Cluster's Flux revision.
// - Per-cluster values come from the Cluster's `spec.topology.variables` entry named
//   `stackfluxAddonValues` (a mapping keyed by addon name): they live in the one manifest users
//   already write per cluster and survive a re-created ClusterAddon (which is generated and owned
//   by the Cluster). The stack's ClusterClass declares the variable (type object,
//   x-kubernetes-preserve-unknown-fields) so Cluster API accepts it. The ClusterAddon (generated)
//   carries no values of its own: one source per setting.
// - Disable per cluster: annotation `stackflux.io/disabled-addons: "a,b"` on the Cluster; for every
//   cluster: ClusterStack spec.addons[{name, enabled: false}]. A disabled addon's dependents
//   depend on what it depended on (transitively), so no Kustomization waits for a missing one.
// - "Unchanged" is a comparison of git tree ids (branchTreeIds of the desired files against the
//   branch's tree): no fleet file is read. `branch` in the result is set only when the branch must
//   change: the whole desired content (or null to delete it) and a commit message saying why
//   (first render, release a → b, addon disabled/enabled, Cluster or values changed, deletion).
// - Render failure of ANY addon (or invalid release/values): Ready=False (Stalled, as only a user
//   change helps), no branch and no Kustomization changes: what runs stays.
// - The Kustomization of an addon is created only once its folder is on the branch, so Flux never
//   points at a missing path (it would retry only after its interval); the GitRepository only once
//   the branch exists. A Cluster with no addon enabled has no branch (and no GitRepository).
// - Deletion (Cluster has deletionTimestamp, is gone, or the ClusterAddon is being deleted): merge
//   patches set every addon Kustomization's deletionPolicy to Orphan (Flux must not try to prune in
//   a workload cluster that is going away; a re-created ClusterAddon re-adopts the objects), the
//   branch is deleted, and the finalizer stackflux.io/fleet-cleanup is dropped only once the branch
//   is known to be gone. Garbage collection removes the GitRepository and the Kustomizations after
//   the ClusterAddon.
// - Ready only when every enabled addon's Kustomization is Ready at `<branch>@sha1:<tip>`
//   (Flux's revision format for a branch) and no branch change is pending.
// - A Helm-chart addon (cluster-addon/<addon>/Chart.yaml, or stack.yaml chart/version/repository)
//   is, on the branch, `<addon>/helmrelease.yaml`: a HelmRelease with this Cluster's rendered values
//   inline (the audit trail of what the Cluster ran; a values change is a new HelmRelease generation,
//   i.e. exactly one Helm upgrade) plus `<addon>/helmrepository.yaml` or `ocirepository.yaml` for a
//   remote chart. Its Kustomization applies that folder to the MANAGEMENT cluster and waits for the
//   HelmRelease to be Ready, so the one dependsOn chain of Kustomizations orders Helm and manifest
//   addons alike (Flux's dependsOn names only objects of its own kind). helm-controller installs
//   through the Cluster's kubeconfig Secret; removing the addon deletes the Kustomization, Flux
//   prunes the HelmRelease and helm-controller uninstalls. On Cluster deletion the HelmReleases are
//   suspended first (helm-controller then drops them without uninstalling: the counterpart of the
//   Orphan policy of manifest addons) and their Kustomizations keep pruning them.
// - Rights: a Helm addon's Kustomization (it applies to the management cluster) impersonates
//   --default-service-account in the Cluster's namespace; a manifest addon's Kustomization and the
//   HelmRelease act through the Cluster's kubeconfig and name no ServiceAccount (Flux would
//   impersonate it inside the workload cluster). A remote chart from a host not in
//   --allowed-chart-hosts makes the ClusterAddon InvalidRelease, as any stack.yaml error does.

import { removeCondition } from '../runtime/conditions.ts';
import { RENDER_APPROVED_CONDITION, renderDigest } from './approvedrender.ts';
import { branchUpdate } from './clusteraddon/branchchange.ts';
import { waitConditionsCondition } from './clusteraddon/conditionschecked.ts';
import { contextOf } from './clusteraddon/context.ts';
import { isDeleting, reconcileDeletion } from './clusteraddon/deletion.ts';
import { fluxObjects } from './clusteraddon/fluxobjects.ts';
import { addonStatus } from './clusteraddon/readiness.ts';
import { renderAddons } from './clusteraddon/render.ts';
import { heldRender, holdOf } from './clusteraddon/renderhold.ts';
import { selectAddons } from './clusteraddon/selection.ts';
import { resolveTarget } from './clusteraddon/target.ts';
import type { ClusterAddonInput, ClusterAddonResult } from './clusteraddon/types.ts';
import { acknowledgeReconcileRequest } from './reconcilerequest.ts';

// The public names, where their importers have always found them.
export { branchCommitMessage } from './clusteraddon/branchchange.ts';
export { branchRevision, fleetBranchName } from './clusteraddon/context.ts';
export {
  clusterAddonReconcileInputs,
  clusterStackAddonInputs,
  releaseAddonInputs,
} from './clusteraddon/reconcileinputs.ts';
export { DEFAULT_HELM_NAMESPACE } from './clusteraddon/render.ts';
export {
  ANNOTATION_DISABLED_ADDONS,
  clusterValuesOf,
  disabledByAnnotation,
  enabledDependencies,
  VALUES_VARIABLE,
} from './clusteraddon/selection.ts';
export { csctlAddonPlan } from './clusteraddon/target.ts';
export {
  type BranchUpdate,
  type ClusterAddonInput,
  type ClusterAddonResult,
  type ClusterChange,
  DEFAULT_BRANCH_PREFIX,
  FINALIZER_FLEET_CLEANUP,
  type FleetSettings,
  type MergePatch,
  Reason,
} from './clusteraddon/types.ts';

// ---- The reconcile, as a sequence of named phases -------------------------------------------

/** One reconcile, with a reconcile.fluxcd.io/requestedAt request acknowledged in the status (Flux's convention). */
export function reconcileClusterAddon(input: ClusterAddonInput): ClusterAddonResult | undefined {
  const result = reconcilePhases(input);
  return result === undefined ? undefined : acknowledgeReconcileRequest(result, input.clusterAddon);
}

function reconcilePhases(input: ClusterAddonInput): ClusterAddonResult | undefined {
  const ctx = contextOf(input);
  if (isDeleting(ctx)) return reconcileDeletion(ctx);
  const target = resolveTarget(ctx);
  if (!target.ok) return target.result;
  const selection = selectAddons(ctx, target.value);
  if (!selection.ok) return selection.result;
  const rendered = renderAddons(ctx, target.value, selection.value);
  if (!rendered.ok) return rendered.result;
  const { files, helm, healthChecks, postConditions, gates, preConditions } = rendered.value;
  const update = branchUpdate(ctx, target.value, selection.value, files);
  const digest = renderDigest(files);
  const hold =
    update !== undefined && input.holdUnapproved === true ? holdOf(ctx, target.value, digest) : undefined;
  if (hold !== undefined) return heldRender(ctx, target.value, hold, digest);
  const status = addonStatus(ctx, target.value, selection.value, update, helm, gates);
  const conditions = waitConditionsCondition(
    ctx,
    waitConditionsCondition(
      ctx,
      removeCondition(status.conditions ?? [], RENDER_APPROVED_CONDITION),
      postConditions,
      'post',
    ),
    preConditions,
    'pre',
  );
  return {
    clusterAddon: target.value.clusterAddon,
    finalizers: ctx.withFinalizer,
    status: { ...status, conditions },
    renderDigest: digest,
    ...(update !== undefined ? { branch: update } : {}),
    ...fluxObjects(
      ctx,
      target.value,
      selection.value,
      helm,
      healthChecks,
      gates,
      update === undefined && (status.addons ?? []).every((a) => a.ready),
    ),
  };
}
