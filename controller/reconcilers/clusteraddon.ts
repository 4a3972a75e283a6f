// The ClusterAddon reconcile (pure): a Cluster API Cluster (+ the objects its refs point at) + its
// ClusterAddon + the ClusterStackRelease/ClusterStack whose ClusterClass it uses + the release tree +
// the addon Kustomizations as they are + the state of this Cluster's fleet branch + now →
// the branch's desired content (only when it differs), desired Flux objects, the desired
// ClusterAddon and its status.
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

import type { ClusterAddonStatus } from '../api/clusteraddon.ts';
import { type Condition, ConditionType } from '../api/meta.ts';
import {
  addonHelmReleaseName,
  addonKustomizationName,
  clusterGitRepositoryName,
  preconditionKustomizationName,
} from '../releases/flux.ts';
import type { AddonOrderEntry, HelmAddon } from '../rendering/index.ts';
import {
  findCondition,
  markNotReady,
  markReady,
  markReconciling,
  removeCondition,
  setCondition,
} from '../runtime/conditions.ts';
import { RENDER_APPROVED_CONDITION, type RenderHold, renderDigest, renderHold } from './approvedrender.ts';
import { branchUpdate } from './clusteraddon/branchchange.ts';
import {
  base,
  branchRevision,
  compareStrings,
  contextOf,
  keepStatus,
  markOf,
} from './clusteraddon/context.ts';
import { isDeleting, reconcileDeletion } from './clusteraddon/deletion.ts';
import { fluxObjects } from './clusteraddon/fluxobjects.ts';
import { renderAddons } from './clusteraddon/render.ts';
import { selectAddons } from './clusteraddon/selection.ts';
import { resolveTarget } from './clusteraddon/target.ts';
import {
  type BranchUpdate,
  type ClusterAddonInput,
  type ClusterAddonResult,
  type ConditionSummary,
  type Context,
  type PlannedAddon,
  Reason,
  type Selection,
  type Target,
} from './clusteraddon/types.ts';
import { acknowledgeReconcileRequest } from './reconcilerequest.ts';
import type { PreConditionChecks } from './waitcondition.ts';

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

/** A Flux object's Ready condition for its current generation (undefined if stale or missing). */
function fluxReady(
  k:
    | {
        metadata: { generation?: number };
        status?: { observedGeneration?: number; conditions?: Condition[] };
      }
    | undefined,
): Condition | undefined {
  if (k === undefined) return undefined;
  const ready = findCondition(k.status?.conditions, ConditionType.Ready);
  const gen = k.metadata.generation;
  // Flux leaves status.observedGeneration at its last success (-1: none yet) while a failing
  // generation's Ready condition carries that generation: the condition says what it describes.
  const observed = ready?.observedGeneration ?? k.status?.observedGeneration;
  if (gen !== undefined && observed !== undefined && observed < gen) return undefined;
  return ready;
}

// ---- The reconcile, as a sequence of named phases -------------------------------------------

type AddonReadiness = {
  status: NonNullable<ClusterAddonStatus['addons']>[number];
  waiting?: string;
  notReady?: string;
};

/**
 * A Helm addon's readiness: its Kustomization's (Ready only once the HelmRelease is), with the
 * HelmRelease's last Helm release (revision, chart version, values digest) and, when Helm failed,
 * helm-controller's reason and message instead of the Kustomization's health-check wait.
 */
function withHelmRelease(ctx: Context, entry: AddonOrderEntry, r: AddonReadiness): AddonReadiness {
  const name = addonHelmReleaseName(ctx.name, entry.name);
  const hr = ctx.ownHelmReleases.find((h) => h.metadata.name === name);
  const last = hr?.status?.history?.[0];
  const status = {
    ...r.status,
    helmRelease: name,
    ...(last?.version !== undefined ? { helmRevision: last.version } : {}),
    ...(last?.chartVersion !== undefined ? { chartVersion: last.chartVersion } : {}),
    ...(last?.configDigest !== undefined ? { valuesDigest: last.configDigest } : {}),
  };
  const ready = fluxReady(hr);
  if (r.status.ready || ready?.status !== 'False' || r.waiting?.includes('DependencyNotReady') === true) {
    return { ...r, status };
  }
  return {
    status: { ...status, reason: ready.reason, message: ready.message },
    notReady: `${entry.name} (HelmRelease ${name} ${ready.reason}: ${ready.message})`,
  };
}

/** One addon's readiness from its Kustomization, against the revision of the branch tip. */
function addonReadiness(
  ctx: Context,
  target: Target,
  entry: PlannedAddon,
  expected: string | undefined,
  pending: boolean,
  helm: boolean,
): AddonReadiness {
  const kname = addonKustomizationName(ctx.name, entry.name, helm);
  const k = ctx.input.kustomizations.find((x) => x.metadata.name === kname);
  const ready = fluxReady(k);
  const applied = k?.status?.lastAppliedRevision;
  const upToDate = !pending && expected !== undefined && applied === expected;
  // Flux re-verifies the same revision every interval (Ready=Unknown meanwhile): an addon that
  // was Ready at this revision stays Ready instead of flapping.
  const before = ctx.previous?.addons?.find((a) => a.name === entry.name);
  const reverifying =
    ready?.status === 'Unknown' && before?.ready === true && before.lastAppliedRevision === applied;
  const isReady = upToDate && (ready?.status === 'True' || reverifying);
  // The release of the addon's files on the branch: while a change waits for its push, the one
  // it had (a new addon: the target release).
  const release = pending ? (before?.release ?? target.releaseName) : target.releaseName;
  const status = (reason: string, message: string) => ({
    name: entry.name,
    ready: isReady,
    reason,
    message,
    release,
    ...(entry.stage !== undefined ? { stage: entry.stage } : {}),
    kustomization: kname,
    ...(applied !== undefined ? { lastAppliedRevision: applied } : {}),
  });
  if (k === undefined) {
    return {
      status: status(
        Reason.Progressing,
        pending ? 'waiting for the fleet commit' : `waiting for Kustomization ${kname}`,
      ),
      waiting: `${entry.name} (not created yet)`,
    };
  }
  if (ready?.status === 'False') {
    const dependency = ready.reason === 'DependencyNotReady' || ready.reason === 'Progressing';
    return {
      status: status(ready.reason, ready.message),
      ...(dependency
        ? { waiting: `${entry.name} (${ready.reason})` }
        : { notReady: `${entry.name} (${ready.reason}: ${ready.message})` }),
    };
  }
  if (ready?.status !== 'True' && !reverifying) {
    return {
      status: status(Reason.Progressing, ready?.message ?? `waiting for Kustomization ${kname} to reconcile`),
      waiting: `${entry.name} (reconciling)`,
    };
  }
  if (!upToDate) {
    const want = pending ? 'the fleet commit' : (expected ?? 'the fleet commit');
    return {
      status: status(Reason.Progressing, `applied ${applied ?? 'nothing yet'}, waiting for ${want}`),
      waiting: `${entry.name} (applied ${applied ?? 'nothing'})`,
    };
  }
  return { status: status(Reason.Succeeded, `applied ${applied}`) };
}

/**
 * An addon held back by its pre-condition gate (its Kustomization waits on the dependency): the
 * gate's own word on the condition (Flux's health check message: the object NotFound, or not yet
 * Current under the expression) instead of Flux's "dependency is not ready".
 */
function withPreconditionGate(ctx: Context, entry: AddonOrderEntry, r: AddonReadiness): AddonReadiness {
  if (r.status.reason !== 'DependencyNotReady') return r;
  const gname = preconditionKustomizationName(ctx.name, entry.name);
  const gate = fluxReady(ctx.input.kustomizations.find((k) => k.metadata.name === gname));
  if (gate?.status === 'True') return r;
  const why = gate?.message ?? `Kustomization ${gname} has not checked it yet`;
  return {
    status: {
      ...r.status,
      reason: Reason.WaitingForPreCondition,
      message: `waiting for its waitForPreCondition (Kustomization ${gname}): ${why}`,
    },
    waiting: `${entry.name} (its waitForPreCondition)`,
  };
}

/** Phase "health": per-addon readiness and the summary conditions. */
function addonStatus(
  ctx: Context,
  target: Target,
  selection: Selection,
  update: BranchUpdate | undefined,
  helm: ReadonlyMap<string, HelmAddon>,
  gates: ReadonlyMap<string, PreConditionChecks>,
): ClusterAddonStatus {
  const { input, previous, branchName } = ctx;
  const { releaseName } = target;
  const { order } = selection;
  const branch = input.branch;
  const pending = update !== undefined;
  const expected = branch !== undefined ? branchRevision(branchName, branch.commit) : undefined;
  const readiness = order.map((entry) => {
    const r = addonReadiness(ctx, target, entry, expected, pending, helm.has(entry.name));
    if (helm.has(entry.name)) return withHelmRelease(ctx, entry, r);
    return gates.has(entry.name) ? withPreconditionGate(ctx, entry, r) : r;
  });
  const waitingFor = readiness.flatMap((r) => (r.waiting !== undefined ? [r.waiting] : []));
  const notReady = readiness.flatMap((r) => (r.notReady !== undefined ? [r.notReady] : []));
  const mark = (reason: string, message: string) => markOf(ctx, reason, message);
  let conditions: Condition[];
  if (update !== undefined && input.fleetFailure !== undefined) {
    conditions = markNotReady(
      previous?.conditions,
      mark(
        input.fleetFailure.reason,
        `release ${releaseName}: writing fleet branch ${branchName} failed, retrying with back-off: ${input.fleetFailure.message}`,
      ),
      input.now,
    );
  } else if (update !== undefined) {
    const moved = [...update.change.rendered, ...update.change.removed].sort(compareStrings);
    conditions = markReconciling(
      previous?.conditions,
      mark(
        Reason.FleetSyncPending,
        `release ${releaseName}: waiting for the commit to fleet branch ${branchName}${moved.length > 0 ? ` (${moved.join(', ')})` : ''}`,
      ),
      input.now,
    );
  } else if (notReady.length > 0) {
    conditions = removeCondition(
      markNotReady(
        previous?.conditions,
        mark(Reason.AddonNotReady, `release ${releaseName}: not ready: ${notReady.join(', ')}`),
        input.now,
      ),
      ConditionType.Reconciling,
    );
  } else if (waitingFor.length > 0) {
    conditions = markReconciling(
      previous?.conditions,
      mark(
        Reason.Progressing,
        `release ${releaseName}: waiting for ${waitingFor.join(', ')} to apply ${expected}`,
      ),
      input.now,
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
      input.now,
    );
  }
  const generation = ctx.existing?.metadata.generation;
  const fleetCommit = !pending ? branch?.commit : previous?.fleetCommit;
  return {
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
    // The release on the branch: the new one only once its commit is there.
    release: pending ? (previous?.release ?? releaseName) : releaseName,
    ...(fleetCommit !== undefined ? { fleetCommit } : {}),
    fleetBranch: branchName,
    gitRepository: clusterGitRepositoryName(ctx.name),
    addons: readiness.map((r) => r.status).sort((a, b) => compareStrings(a.name, b.name)),
    conditions,
  };
}

/** How each kind of csctl wait condition is reported: its condition type, reasons and wording. */
const WAIT_CONDITION_REPORTS = {
  post: {
    type: ConditionType.PostConditionsChecked,
    mapped: Reason.PostConditionsMapped,
    notMapped: Reason.PostConditionNotMapped,
    held: (n: number) =>
      `${n} waitForPostCondition(s) checked by Flux health checks of the addons' Kustomizations`,
    dropped: 'not checked (the addon does not wait for it)',
  },
  pre: {
    type: ConditionType.PreConditionsChecked,
    mapped: Reason.PreConditionsMapped,
    notMapped: Reason.PreConditionNotMapped,
    held: (n: number) =>
      `${n} waitForPreCondition(s) checked by Flux gate Kustomizations (<cluster>.<addon>.pre) the addons depend on`,
    dropped: 'not checked (the addon is applied without waiting for it)',
  },
} as const;

/**
 * PostConditionsChecked / PreConditionsChecked: whether every csctl waitForPostCondition is a Flux
 * health check of its addon's Kustomization (then Ready waits for it as CSO waits), every
 * waitForPreCondition one of the gate its addon's Kustomization depends on (then the addon is
 * applied only once it holds). False names each condition that is not and why: its addon is
 * applied and Ready without it. Absent when the release has none.
 */
function waitConditionsCondition(
  ctx: Context,
  conditions: Condition[],
  summary: ConditionSummary,
  which: keyof typeof WAIT_CONDITION_REPORTS,
): Condition[] {
  const report = WAIT_CONDITION_REPORTS[which];
  if (summary.count === 0) return removeCondition(conditions, report.type);
  const mapped = summary.unmapped.length === 0;
  return setCondition(
    conditions,
    {
      type: report.type,
      status: mapped ? 'True' : 'False',
      ...markOf(
        ctx,
        mapped ? report.mapped : report.notMapped,
        mapped ? report.held(summary.count) : `${report.dropped}: ${summary.unmapped.join('; ')}`,
      ),
    },
    ctx.input.now,
  );
}

/** Why this render must not roll out yet (reconcilers/approvedrender.ts), or undefined. */
function holdOf(ctx: Context, target: Target, digest: string): RenderHold | undefined {
  return renderHold({
    clusterStack: target.clusterStack,
    release: target.release,
    cluster: `${ctx.namespace}/${ctx.name}`,
    from: ctx.previous?.release,
    digest,
  });
}

/**
 * A render held back from the branch: nothing written, the Flux objects left as they are, Ready and
 * RenderApproved False with the reason; status.heldRender asks the impact controller for a new impact.
 */
function heldRender(ctx: Context, target: Target, hold: RenderHold, digest: string): ClusterAddonResult {
  const mark = markOf(ctx, hold.reason, hold.message);
  const conditions = setCondition(
    markNotReady(ctx.previous?.conditions, mark, ctx.input.now),
    { type: RENDER_APPROVED_CONDITION, status: 'False', ...mark },
    ctx.input.now,
  );
  const heldRender = {
    release: target.releaseName,
    digest,
    ...(hold.impact !== undefined ? { impact: hold.impact } : {}),
  };
  return {
    ...base({ ...keepStatus(ctx, conditions), heldRender }, ctx.withFinalizer),
    clusterAddon: target.clusterAddon,
    renderDigest: digest,
  };
}

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
