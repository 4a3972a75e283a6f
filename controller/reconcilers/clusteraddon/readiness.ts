// Phase "health" of the ClusterAddon reconcile: each addon's readiness from its Kustomization (and
// HelmRelease, or pre-condition gate) against the branch tip, and the Ready / Reconciling
// conditions that sum them up.
import type { ClusterAddonStatus } from '../../api/clusteraddon.ts';
import { type Condition, ConditionType } from '../../api/meta.ts';
import {
  addonHelmReleaseName,
  addonKustomizationName,
  clusterGitRepositoryName,
  preconditionKustomizationName,
} from '../../releases/flux.ts';
import type { AddonOrderEntry, HelmAddon } from '../../rendering/index.ts';
import {
  findCondition,
  markNotReady,
  markReady,
  markReconciling,
  removeCondition,
} from '../../runtime/conditions.ts';
import type { PreConditionChecks } from '../waitcondition.ts';
import { branchRevision, compareStrings, markOf } from './context.ts';
import {
  type BranchUpdate,
  type Context,
  type PlannedAddon,
  Reason,
  type Selection,
  type Target,
} from './types.ts';

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
export function addonStatus(
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
