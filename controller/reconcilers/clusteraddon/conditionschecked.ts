// The PostConditionsChecked and PreConditionsChecked conditions of a ClusterAddon: whether Flux
// holds every csctl wait condition of the rendered addons, and which ones it does not.
import { type Condition, ConditionType } from '../../api/meta.ts';
import { removeCondition, setCondition } from '../../runtime/conditions.ts';
import { markOf } from './context.ts';
import { type ConditionSummary, type Context, Reason } from './types.ts';

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
export function waitConditionsCondition(
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
