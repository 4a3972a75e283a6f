// Phase "delete" of the ClusterAddon reconcile: when the Cluster or its ClusterAddon goes, what
// runs in the workload cluster stays (Orphan, suspended HelmReleases) and the fleet branch goes.
import { markReconciling } from '../../runtime/conditions.ts';
import { branchCommitMessage } from './branchchange.ts';
import { base, compareStrings, isRecord, keepStatus, markOf } from './context.ts';
import {
  type ClusterAddonResult,
  type ClusterChange,
  type Context,
  type MergePatch,
  Reason,
} from './types.ts';

export function isDeleting(ctx: Context): boolean {
  const cluster = ctx.input.cluster;
  if (!isRecord(cluster)) return true;
  const meta = isRecord(cluster.metadata) ? cluster.metadata : {};
  return typeof meta.deletionTimestamp === 'string' || ctx.existing?.metadata.deletionTimestamp !== undefined;
}

/**
 * Phase "delete": Orphan the Kustomizations, delete the branch, drop the finalizer once the branch
 * is known to be gone.
 */
export function reconcileDeletion(ctx: Context): ClusterAddonResult | undefined {
  const { existing, namespace, name, branchName, previous } = ctx;
  const branch = ctx.input.branch;
  if (existing === undefined && branch === undefined) return undefined;
  // Kustomizations into the workload cluster: Orphan. Those of Helm addons (no kubeConfig: they
  // apply the HelmRelease to the management cluster) keep pruning it, once it is suspended.
  const patches: MergePatch[] = ctx.ownKustomizations
    .filter((k) => k.spec.deletionPolicy !== 'Orphan' && k.spec.kubeConfig !== undefined)
    .map((k) => ({
      apiVersion: k.apiVersion,
      kind: 'Kustomization',
      namespace: k.metadata.namespace ?? namespace,
      name: k.metadata.name,
      patch: { spec: { deletionPolicy: 'Orphan' } },
    }));
  for (const hr of ctx.ownHelmReleases) {
    if (hr.spec.suspend === true) continue;
    patches.push({
      apiVersion: hr.apiVersion,
      kind: 'HelmRelease',
      namespace: hr.metadata.namespace ?? namespace,
      name: hr.metadata.name,
      patch: { spec: { suspend: true } },
    });
  }
  const cleaned = branch === undefined;
  const conditions = markReconciling(
    previous?.conditions,
    cleaned
      ? markOf(ctx, Reason.Deleted, `fleet branch ${branchName} removed`)
      : markOf(ctx, Reason.Deleting, `removing the fleet branch ${branchName}; waiting for the push`),
    ctx.input.now,
  );
  const result = base(
    { ...keepStatus(ctx, conditions), fleetBranch: branchName, addons: [] },
    cleaned ? ctx.otherFinalizers : existing !== undefined ? ctx.withFinalizer : [],
  );
  result.patches = patches;
  if (branch !== undefined) {
    const change: ClusterChange = {
      namespace,
      cluster: name,
      ...(previous?.release !== undefined ? { release: previous.release } : {}),
      reason: 'cluster deleted',
      rendered: [],
      removed: [...branch.addons.keys()].sort(compareStrings),
    };
    result.branch = { branch: branchName, files: null, message: branchCommitMessage(change), change };
  }
  return result;
}
