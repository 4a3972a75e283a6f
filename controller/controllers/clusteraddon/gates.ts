// What holds a reconcile's output back, as pure decisions: the status waits for the branch's push,
// a render failure is told as a Warning Event, and the finalizers change only when the result wants
// another set (the fleet-cleanup finalizer comes off last, once the branch is known to be gone).
// The back-offs (refs, refused branches) are RefWaits' and FleetPublisher's.
import { type ClusterAddonResult, Reason } from '../../reconcilers/clusteraddon.ts';
import { readyCondition } from '../common.ts';

/**
 * While a branch change waits for its batch, the status is not written: the key is reconciled
 * again right after the push and writes the state after it (a fan-out would otherwise write
 * "pending" and then the real state for every Cluster). After a failed write the pending state is
 * written, so it is visible.
 */
export function statusWaitsForPush(
  result: Pick<ClusterAddonResult, 'branch'>,
  writeFailed: boolean,
): boolean {
  return result.branch !== undefined && !writeFailed;
}

const RENDER_FAILURES: ReadonlySet<string> = new Set([
  Reason.RenderFailed,
  Reason.ValuesInvalid,
  Reason.RenderCoolingDown,
]);

/** The Warning Event a status asks for: Ready=False because rendering failed (reason and note). */
export function renderWarning(status: unknown): { reason: string; note: string } | undefined {
  const ready = readyCondition(status);
  if (ready?.status !== 'False' || ready.reason === undefined || !RENDER_FAILURES.has(ready.reason)) {
    return undefined;
  }
  return { reason: ready.reason, note: ready.message ?? 'rendering failed' };
}

/** Whether the ClusterAddon's finalizers (`have`) differ from what the result wants, as sets. */
export function finalizersChange(have: readonly string[], want: readonly string[]): boolean {
  return !(have.length === want.length && have.every((x) => want.includes(x)));
}
