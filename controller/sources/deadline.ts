// The total deadline of one read of a source (a listing, a release tree): a per-request timeout
// alone lets a source that answers slowly, or drips a byte at a time, hold a reader for hours.
// `withDeadline` gives the read an AbortSignal (git processes are killed with it, HTTP requests
// cancelled) and rejects with a DeadlineError once the deadline passes, whether or not the read
// has noticed yet, so whoever waits is free at the deadline.
import { type Clock, realClock } from '../runtime/clock.ts';
import { SourceError } from './contract.ts';

/** A deadline in words (`5m`, `90s`, `1500ms`) as the flag that sets it would spell it. */
export function formatDeadline(ms: number): string {
  if (ms % 60_000 === 0) return `${ms / 60_000}m`;
  if (ms % 1000 === 0) return `${ms / 1000}s`;
  return `${ms}ms`;
}

/** A read that did not finish within its total deadline (reason SourceTimeout). */
export class DeadlineError extends SourceError {
  /** e.g. "the 5m deadline of --source-read-timeout": stable text for a condition. */
  readonly deadline: string;
  constructor(what: string, ms: number, flag: string) {
    const deadline = `the ${formatDeadline(ms)} deadline of --${flag}`;
    super('SourceTimeout', `${what} did not finish within ${deadline}`);
    this.name = 'DeadlineError';
    this.deadline = deadline;
  }
}

export interface Deadline {
  /** Total time the read may take (ms). */
  ms: number;
  /** The flag that sets it (named in the error, without the leading dashes). */
  flag: string;
}

/**
 * Runs `read` with a signal that aborts when the deadline passes (or when `outer` aborts); the
 * returned promise rejects with a DeadlineError at the deadline even if `read` ignores its signal.
 */
export function withDeadline<T>(
  deadline: Deadline,
  what: string,
  read: (signal: AbortSignal) => Promise<T>,
  o: { clock?: Clock; signal?: AbortSignal } = {},
): Promise<T> {
  const clock = o.clock ?? realClock;
  const abort = new AbortController();
  const onOuter = (): void => abort.abort(o.signal?.reason);
  if (o.signal?.aborted) onOuter();
  else o.signal?.addEventListener('abort', onOuter, { once: true });
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const finish = (): boolean => {
      if (settled) return false;
      settled = true;
      clock.clearTimeout(timer);
      o.signal?.removeEventListener('abort', onOuter);
      return true;
    };
    const timer = clock.setTimeout(() => {
      const err = new DeadlineError(what, deadline.ms, deadline.flag);
      if (finish()) reject(err);
      abort.abort(err);
    }, deadline.ms);
    let running: Promise<T>;
    try {
      running = read(abort.signal);
    } catch (err) {
      running = Promise.reject(err);
    }
    running.then(
      (v) => {
        if (finish()) resolve(v);
      },
      (err: unknown) => {
        if (finish()) reject(err);
      },
    );
  });
}

/** `signal` combined with a per-request timeout (either ends the request). */
export function requestSignal(timeoutMs: number, signal: AbortSignal | undefined): AbortSignal {
  const timeout = AbortSignal.timeout(timeoutMs);
  return signal === undefined ? timeout : AbortSignal.any([timeout, signal]);
}
