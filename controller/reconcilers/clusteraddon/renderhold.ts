// A render held back from the Cluster's fleet branch until its impact is approved
// (reconcilers/approvedrender.ts): the result of a reconcile that stops there.
import { markNotReady, setCondition } from '../../runtime/conditions.ts';
import { RENDER_APPROVED_CONDITION, type RenderHold, renderHold } from '../approvedrender.ts';
import { base, keepStatus, markOf } from './context.ts';
import type { ClusterAddonResult, Context, Target } from './types.ts';

/** Why this render must not roll out yet (reconcilers/approvedrender.ts), or undefined. */
export function holdOf(ctx: Context, target: Target, digest: string): RenderHold | undefined {
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
export function heldRender(
  ctx: Context,
  target: Target,
  hold: RenderHold,
  digest: string,
): ClusterAddonResult {
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
