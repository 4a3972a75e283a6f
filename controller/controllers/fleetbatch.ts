// The batch of fleet branch writes of the ClusterAddon controller: changes are collected for a
// window that starts with the first change waiting, and written by ONE call, one at a time. The
// window is not extended by later changes (no debounce): a tenant whose Clusters change all the
// time would otherwise hold every other tenant's change back for as long as the extension lasts. Writing is tied
// to leadership (issue 11 defect 7): a replica that does not lead never writes, and one that lost
// its Lease drops what it had collected instead of pushing it — the new leader derives the same
// changes again from the Clusters. (A push already under way when the Lease is lost finishes; its
// trees are deterministic, so the new leader's write of the same content changes nothing.)
import { type Clock, realClock, type TimerHandle } from '../runtime/clock.ts';

/** Default of FleetBatchOptions.maxSize. */
export const DEFAULT_MAX_BATCH = 1_000;

export interface FleetBatchOptions<T> {
  windowMs: number;
  /**
   * At most this many keys per write (default DEFAULT_MAX_BATCH): a batch that reaches it is
   * written without waiting for its window, and a larger backlog is written in several writes.
   * Bounds what one write holds in memory (rendered files, fast-import input, the pack), which
   * would otherwise follow the client rate limit times the window.
   */
  maxSize?: number;
  clock?: Clock;
  /** Whether this replica leads now (Manager.isLeader). Checked when a batch would be written. */
  leading: () => boolean;
  /** Writes one batch (key → change). Errors are the callback's to handle. */
  write: (batch: ReadonlyMap<string, T>) => Promise<void>;
  /** No write starts before this time (ms epoch), e.g. a failing repository's back-off. */
  notBefore?: () => number;
  /** Told which keys were dropped because this replica does not lead. */
  dropped?: (keys: string[]) => void;
}

export class FleetBatch<T> {
  private readonly opts: FleetBatchOptions<T>;
  private readonly clock: Clock;
  private readonly pending = new Map<string, T>();
  private timer: TimerHandle | undefined;
  private firstPendingAt: number | undefined;
  private chain: Promise<void> = Promise.resolve();
  private stopped = false;

  constructor(opts: FleetBatchOptions<T>) {
    this.opts = opts;
    this.clock = opts.clock ?? realClock;
  }

  get size(): number {
    return this.pending.size;
  }

  /** Adds (or replaces) the change of `key` and schedules the write. */
  set(key: string, change: T): void {
    if (this.stopped || !this.opts.leading()) return;
    this.pending.set(key, change);
    this.schedule();
  }

  private get maxSize(): number {
    return Math.max(1, this.opts.maxSize ?? DEFAULT_MAX_BATCH);
  }

  delete(key: string): void {
    this.pending.delete(key);
  }

  /** Writes the pending batch now (after any write under way). */
  flush(): Promise<void> {
    const run = () => this.flushNow();
    this.chain = this.chain.then(run, run);
    return this.chain;
  }

  /** No more writes are scheduled (shutdown). */
  stop(): void {
    this.stopped = true;
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.timer = undefined;
  }

  private async flushNow(): Promise<void> {
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.timer = undefined;
    this.firstPendingAt = undefined;
    if (this.pending.size === 0) return;
    // The oldest keys first (a Map keeps insertion order; a replaced change keeps its place).
    const batch = new Map<string, T>();
    for (const [key, change] of this.pending) {
      if (batch.size >= this.maxSize) break;
      batch.set(key, change);
    }
    for (const key of batch.keys()) this.pending.delete(key);
    if (!this.opts.leading()) {
      this.opts.dropped?.([...batch.keys(), ...this.pending.keys()]);
      this.pending.clear();
      return;
    }
    const backlog = this.pending.size > 0;
    try {
      await this.opts.write(batch);
    } finally {
      // The rest of a backlog larger than one write goes next, without another window (but not
      // before a failing repository's back-off ends).
      if (backlog) this.schedule(true);
    }
  }

  private schedule(immediately = false): void {
    if (this.stopped || this.pending.size === 0) return;
    const now = this.clock.now();
    this.firstPendingAt ??= now;
    const deadline = this.firstPendingAt + this.opts.windowMs;
    const skipWindow = immediately || this.pending.size >= this.maxSize;
    const delay = Math.max(
      0,
      skipWindow ? 0 : deadline - now,
      (this.opts.notBefore?.() ?? 0) - now,
    );
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.timer = this.clock.setTimeout(() => {
      this.timer = undefined;
      void this.flush();
    }, delay);
  }
}
