// metav1.Condition semantics (k8s.io/apimachinery/pkg/api/meta.SetStatusCondition) and the
// Ready/Reconciling/Stalled conventions of Flux (fluxcd/pkg/runtime/conditions), as pure
// functions: they take the current list and the time, and return a new list.

export type ConditionStatus = 'True' | 'False' | 'Unknown';

export interface Condition {
  type: string;
  status: ConditionStatus;
  reason: string;
  message: string;
  observedGeneration?: number;
  /** RFC 3339, second precision (metav1.Time). */
  lastTransitionTime: string;
}

export type ConditionInput = Omit<Condition, 'lastTransitionTime'>;

export const ReadyCondition = 'Ready';
export const ReconcilingCondition = 'Reconciling';
export const StalledCondition = 'Stalled';

export const SucceededReason = 'Succeeded';
export const ProgressingReason = 'Progressing';

const typePattern =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const reasonPattern = /^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/;
const maxMessage = 32768;

/** metav1.Time's wire format: RFC 3339 in UTC with whole seconds. */
export function formatTime(now: Date): string {
  return now.toISOString().replace(/\.\d+Z$/, 'Z');
}

function validate(c: ConditionInput): void {
  if (c.type.length > 316 || !typePattern.test(c.type))
    throw new Error(`invalid condition type ${JSON.stringify(c.type)}`);
  if (c.reason.length > 1024 || !reasonPattern.test(c.reason)) {
    throw new Error(`invalid condition reason ${JSON.stringify(c.reason)} (CamelCase, e.g. "ApplyFailed")`);
  }
  if (c.status !== 'True' && c.status !== 'False' && c.status !== 'Unknown') {
    throw new Error(`invalid condition status ${JSON.stringify(c.status)}`);
  }
}

/**
 * Sets (adds or updates) the condition of input.type. lastTransitionTime becomes `now` only when the
 * condition is new or its status changes; reason, message and observedGeneration are always updated.
 * The input array is not modified; the order of existing conditions is kept.
 */
export function setCondition(
  conditions: readonly Condition[] | undefined,
  input: ConditionInput,
  now: Date,
): Condition[] {
  validate(input);
  const message = input.message.length > maxMessage ? input.message.slice(0, maxMessage) : input.message;
  const list = [...(conditions ?? [])];
  const i = list.findIndex((c) => c.type === input.type);
  const existing = i >= 0 ? list[i] : undefined;
  const next: Condition = {
    type: input.type,
    status: input.status,
    reason: input.reason,
    message,
    ...(input.observedGeneration !== undefined ? { observedGeneration: input.observedGeneration } : {}),
    lastTransitionTime:
      existing && existing.status === input.status ? existing.lastTransitionTime : formatTime(now),
  };
  if (i >= 0) list[i] = next;
  else list.push(next);
  return list;
}

export function removeCondition(conditions: readonly Condition[] | undefined, type: string): Condition[] {
  return (conditions ?? []).filter((c) => c.type !== type);
}

export function findCondition(
  conditions: readonly Condition[] | undefined,
  type: string,
): Condition | undefined {
  return (conditions ?? []).find((c) => c.type === type);
}

export function isStatusTrue(conditions: readonly Condition[] | undefined, type: string): boolean {
  return findCondition(conditions, type)?.status === 'True';
}

/** Equal ignoring order; used to skip no-op status writes (fixed point). */
export function conditionsEqual(
  a: readonly Condition[] | undefined,
  b: readonly Condition[] | undefined,
): boolean {
  const x = a ?? [];
  const y = b ?? [];
  if (x.length !== y.length) return false;
  return x.every((c) => {
    const d = findCondition(y, c.type);
    return (
      d !== undefined &&
      d.status === c.status &&
      d.reason === c.reason &&
      d.message === c.message &&
      d.observedGeneration === c.observedGeneration &&
      d.lastTransitionTime === c.lastTransitionTime
    );
  });
}

export interface Mark {
  reason: string;
  message: string;
  observedGeneration?: number;
}

/** Work in progress: Reconciling=True, Ready=Unknown, Stalled removed. */
export function markReconciling(
  conditions: readonly Condition[] | undefined,
  m: Mark,
  now: Date,
): Condition[] {
  let out = removeCondition(conditions, StalledCondition);
  out = setCondition(out, { type: ReconcilingCondition, status: 'True', ...m }, now);
  return setCondition(out, { type: ReadyCondition, status: 'Unknown', ...m }, now);
}

/** Done: Ready=True, Reconciling and Stalled removed. */
export function markReady(
  conditions: readonly Condition[] | undefined,
  m: Partial<Mark> & { message: string },
  now: Date,
): Condition[] {
  let out = removeCondition(conditions, ReconcilingCondition);
  out = removeCondition(out, StalledCondition);
  const ready: ConditionInput = {
    type: ReadyCondition,
    status: 'True',
    reason: m.reason ?? SucceededReason,
    message: m.message,
    ...(m.observedGeneration !== undefined ? { observedGeneration: m.observedGeneration } : {}),
  };
  return setCondition(out, ready, now);
}

/** Failed and will be retried: Ready=False, Stalled removed (Reconciling kept as is). */
export function markNotReady(conditions: readonly Condition[] | undefined, m: Mark, now: Date): Condition[] {
  const out = removeCondition(conditions, StalledCondition);
  return setCondition(out, { type: ReadyCondition, status: 'False', ...m }, now);
}

/** Cannot make progress without a change from the user: Stalled=True, Ready=False, Reconciling removed. */
export function markStalled(conditions: readonly Condition[] | undefined, m: Mark, now: Date): Condition[] {
  let out = removeCondition(conditions, ReconcilingCondition);
  out = setCondition(out, { type: StalledCondition, status: 'True', ...m }, now);
  return setCondition(out, { type: ReadyCondition, status: 'False', ...m }, now);
}
