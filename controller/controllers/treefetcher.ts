// Reads of release sources off the controllers' shared workers. A reconcile that needs a release
// tree (or a listing) asks for it and returns at once: the read runs here in the background, one
// per key (source and commit) however many reconciles ask, under a total deadline
// (sources/deadline.ts), and whoever asked is woken when it settles. Reads in flight are bounded
// globally and per namespace, and queued reads are started round-robin over namespaces, so one
// tenant's slow tags never hold every read slot, nor the workers that serve everyone else.
// A failed read is not started again before its back-off (doubling per failure in a row) passes.
import { type Clock, realClock } from '../runtime/clock.ts';
import { type Deadline, withDeadline } from '../sources/deadline.ts';

export interface FetchJob<T> {
  /** What is read (e.g. source URL, path and commit): one read per key at a time. */
  key: string;
  /** The tenant whose queue the read waits in. */
  namespace: string;
  /** The read in words, for the deadline's error: "reading tag v1 of https://…". */
  what: string;
  read: (signal: AbortSignal) => Promise<T>;
}

/** Who asked: woken (once) when the read settles; the same id asking twice is woken once. */
export interface FetchWaiter {
  id: string;
  wake: () => void;
}

export type FetchState<T> =
  | { state: 'ready'; value: T }
  | { state: 'queued' }
  | { state: 'running' }
  | { state: 'failed'; error: unknown; retryAt: number };

export interface BackgroundFetcherOptions {
  /** Total time one read may take; then it fails with a DeadlineError (SourceTimeout). */
  deadline: Deadline;
  /** Reads in flight at once, over every namespace. */
  maxConcurrent: number;
  /** Reads in flight at once for one namespace (default: half of maxConcurrent, at least 1). */
  perNamespace?: number;
  clock?: Clock;
  /** Wait after a failure before the key is read again, doubled per failure in a row (default 5 s). */
  backoffMs?: number;
  /** Longest such wait (default 10 min). */
  maxBackoffMs?: number;
  /** Settled results kept for their askers (oldest dropped first; default 64). */
  maxSettled?: number;
  /** How long a value asked for with `keep` stays (default 2 min); a value not asked for that way goes when taken. */
  keepMs?: number;
}

interface Entry<T> {
  job: FetchJob<T>;
  status: 'queued' | 'running' | 'ready' | 'failed';
  waiters: Map<string, () => void>;
  value?: T;
  /** A kept value is handed out until then (clock ms). */
  keptUntil?: number;
  error?: unknown;
  retryAt?: number;
  failures: number;
}

/** The back-off after `failures` failed reads in a row. */
export function fetchBackoff(failures: number, baseMs: number, maxMs: number): number {
  return Math.min(maxMs, baseMs * 2 ** Math.max(0, Math.min(failures - 1, 30)));
}

export class BackgroundFetcher<T> {
  private readonly clock: Clock;
  private readonly deadline: Deadline;
  private readonly maxConcurrent: number;
  private readonly perNamespace: number;
  private readonly backoffMs: number;
  private readonly maxBackoffMs: number;
  private readonly maxSettled: number;
  private readonly keepMs: number;
  private readonly entries = new Map<string, Entry<T>>();
  /** namespace → its queued reads; the Map's order is the round-robin order. */
  private readonly queues = new Map<string, Entry<T>[]>();
  private readonly runningIn = new Map<string, number>();
  private running = 0;
  private readonly stopping = new AbortController();

  constructor(opts: BackgroundFetcherOptions) {
    this.clock = opts.clock ?? realClock;
    this.deadline = opts.deadline;
    this.maxConcurrent = Math.max(1, Math.floor(opts.maxConcurrent));
    this.perNamespace = Math.max(1, Math.floor(opts.perNamespace ?? this.maxConcurrent / 2));
    this.backoffMs = opts.backoffMs ?? 5_000;
    this.maxBackoffMs = opts.maxBackoffMs ?? 10 * 60_000;
    this.maxSettled = opts.maxSettled ?? 64;
    this.keepMs = opts.keepMs ?? 2 * 60_000;
  }

  /**
   * The state of the read `job.key`: a settled value is handed over once (and forgotten: the
   * release cache on disk serves it again), or with `keep` for keepMs to every asker (a preview
   * needs several trees at once); a failure is returned until its back-off passes, then the read
   * is queued again; otherwise the read is queued (if it is not already) and `waiter` is woken
   * when it settles.
   */
  request(job: FetchJob<T>, waiter?: FetchWaiter, o: { keep?: boolean } = {}): FetchState<T> {
    let e = this.entries.get(job.key);
    if (e?.status === 'ready' && e.keptUntil !== undefined && this.clock.now() >= e.keptUntil) {
      this.entries.delete(job.key);
      e = undefined;
    }
    if (e?.status === 'ready') {
      if (o.keep === true) e.keptUntil ??= this.clock.now() + this.keepMs;
      else this.entries.delete(job.key);
      return { state: 'ready', value: e.value as T };
    }
    if (e?.status === 'failed') {
      const retryAt = e.retryAt ?? 0;
      if (this.clock.now() < retryAt) return { state: 'failed', error: e.error, retryAt };
      e.job = job;
      this.enqueue(e);
    }
    if (e === undefined) {
      e = { job, status: 'queued', waiters: new Map(), failures: 0 };
      this.entries.set(job.key, e);
      this.enqueue(e);
    }
    if (waiter !== undefined) e.waiters.set(waiter.id, waiter.wake);
    this.pump();
    return e.status === 'running' ? { state: 'running' } : { state: 'queued' };
  }

  /** Reads in flight and queued (tests, metrics). */
  stats(): { running: number; queued: number; runningIn: Record<string, number> } {
    let queued = 0;
    for (const q of this.queues.values()) queued += q.length;
    return { running: this.running, queued, runningIn: Object.fromEntries(this.runningIn) };
  }

  /** Aborts every read in flight and starts no more (the controller is stopping). */
  stop(): void {
    this.stopping.abort(new Error('the controller is stopping'));
    this.queues.clear();
  }

  private enqueue(e: Entry<T>): void {
    e.status = 'queued';
    const q = this.queues.get(e.job.namespace);
    if (q === undefined) this.queues.set(e.job.namespace, [e]);
    else q.push(e);
  }

  /** Starts queued reads while slots are free, taking namespaces in turn. */
  private pump(): void {
    while (this.running < this.maxConcurrent && !this.stopping.signal.aborted) {
      const next = this.nextQueued();
      if (next === undefined) return;
      this.start(next);
    }
  }

  /** The first read of the first namespace (in round-robin order) below its share; that namespace goes last. */
  private nextQueued(): Entry<T> | undefined {
    for (const [ns, q] of this.queues) {
      if ((this.runningIn.get(ns) ?? 0) >= this.perNamespace) continue;
      const e = q.shift();
      this.queues.delete(ns);
      if (q.length > 0) this.queues.set(ns, q);
      if (e !== undefined) return e;
    }
    return undefined;
  }

  private start(e: Entry<T>): void {
    const ns = e.job.namespace;
    e.status = 'running';
    this.running += 1;
    this.runningIn.set(ns, (this.runningIn.get(ns) ?? 0) + 1);
    withDeadline(this.deadline, e.job.what, e.job.read, {
      clock: this.clock,
      signal: this.stopping.signal,
    })
      .then(
        (value) => {
          e.status = 'ready';
          e.value = value;
          e.failures = 0;
        },
        (error: unknown) => {
          e.status = 'failed';
          e.error = error;
          e.failures += 1;
          e.retryAt = this.clock.now() + fetchBackoff(e.failures, this.backoffMs, this.maxBackoffMs);
        },
      )
      .finally(() => {
        this.running -= 1;
        const left = (this.runningIn.get(ns) ?? 1) - 1;
        if (left > 0) this.runningIn.set(ns, left);
        else this.runningIn.delete(ns);
        const waiters = [...e.waiters.values()];
        e.waiters.clear();
        this.trim();
        this.pump();
        for (const wake of waiters) wake();
      });
  }

  /** Drops the oldest settled results beyond maxSettled (their askers read again: from the disk cache). */
  private trim(): void {
    let settled = 0;
    for (const e of this.entries.values()) if (e.status === 'ready' || e.status === 'failed') settled += 1;
    for (const [key, e] of this.entries) {
      if (settled <= this.maxSettled) return;
      if (e.status !== 'ready' && e.status !== 'failed') continue;
      this.entries.delete(key);
      settled -= 1;
    }
  }
}
