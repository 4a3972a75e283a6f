// Phase "diff" of the ClusterAddon reconcile: the change of the Cluster's fleet branch, and the
// commit message that says why.
import { branchTreeIds } from '../../gitops/objects.ts';
import { addonOfFolder } from '../../releases/flux.ts';
import { compareStrings } from './context.ts';
import type { BranchUpdate, ClusterChange, Context, Selection, Target } from './types.ts';

/** The commit message of one Cluster's branch change: what and why, then the addons that moved. */
export function branchCommitMessage(c: ClusterChange): string {
  const head = `stackflux: ${c.namespace}/${c.cluster}${c.release !== undefined ? `: release ${c.release}` : ''} (${c.reason})`;
  const lines = [
    ...(c.rendered.length > 0 ? [`rendered: ${[...c.rendered].sort(compareStrings).join(', ')}`] : []),
    ...(c.removed.length > 0 ? [`removed: ${[...c.removed].sort(compareStrings).join(', ')}`] : []),
  ];
  return lines.length > 0 ? `${head}\n\n${lines.join('\n')}\n` : `${head}\n`;
}

/** Why the branch changes, from which addon folders moved (see ClusterChange.reason). */
function changeReason(
  ctx: Context,
  target: Target,
  selection: Selection,
  rendered: readonly string[],
  removed: readonly string[],
): string {
  const branch = ctx.input.branch;
  if (branch === undefined) return 'first render';
  const before = ctx.previous?.release;
  if (before !== undefined && before !== target.releaseName)
    return `release ${before} → ${target.releaseName}`;
  const list = (xs: string[]) => xs.sort(compareStrings).join(', ');
  const disabled = removed.filter((a) => selection.disabled.has(addonOfFolder(a)));
  const dropped = removed.filter((a) => !selection.disabled.has(addonOfFolder(a)));
  const added = rendered.filter((a) => !branch.addons.has(a));
  const changed = rendered.filter((a) => branch.addons.has(a));
  return (
    [
      ...(disabled.length > 0 ? [`disabled ${list(disabled)}`] : []),
      ...(added.length > 0 ? [`enabled ${list(added)}`] : []),
      ...(dropped.length > 0 ? [`no longer rendered: ${list(dropped)}`] : []),
      ...(changed.length > 0 ? [`Cluster or values changed: ${list(changed)}`] : []),
    ].join('; ') || 'rendered files changed'
  );
}

/**
 * Phase "diff": the branch change, or undefined when the desired tree is the branch's tree (an id
 * comparison: no fleet file is read).
 */
export function branchUpdate(
  ctx: Context,
  target: Target,
  selection: Selection,
  files: Map<string, string>,
): BranchUpdate | undefined {
  const desired = branchTreeIds(files);
  const branch = ctx.input.branch;
  // No addon enabled → no branch (git keeps no empty folder, Flux has nothing to apply).
  if (files.size === 0 && branch === undefined) return undefined;
  if (branch !== undefined && branch.tree === desired.tree) return undefined;
  const rendered = [...desired.addons].filter(([a, id]) => branch?.addons.get(a) !== id).map(([a]) => a);
  const removed = [...(branch?.addons.keys() ?? [])]
    .filter((a) => !desired.addons.has(a))
    .sort(compareStrings);
  const change: ClusterChange = {
    namespace: ctx.namespace,
    cluster: ctx.name,
    release: target.releaseName,
    reason: changeReason(ctx, target, selection, rendered, removed),
    rendered,
    removed,
  };
  return {
    branch: ctx.branchName,
    files: files.size > 0 ? files : null,
    message: branchCommitMessage(change),
    change,
  };
}
