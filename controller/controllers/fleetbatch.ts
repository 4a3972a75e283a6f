// The batch of fleet branch writes of the ClusterAddon controller: changes are collected for a
// window (debounce, bounded by 5 windows) and written by ONE call, one at a time. Writing is tied
// to leadership (issue 11 defect 7): a replica that does not lead never writes, and one that lost
// its Lease drops what it had collected instead of pushing it — the new leader derives the same
// changes again from the Clusters. (A push already under way when the Lease is lost finishes; its
// trees are deterministic, so the new leader's write of the same content changes nothing.)
import { type Clock, realClock, type TimerHandle } from '../runtime/clock.ts';

export interface FleetBatchOptions<T> {
  windowMs: number;
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
    const batch = new Map(this.pending);
    this.pending.clear();
    if (!this.opts.leading()) {
      this.opts.dropped?.([...batch.keys()]);
      return;
    }
    await this.opts.write(batch);
  }

  private schedule(): void {
    if (this.stopped) return;
    const now = this.clock.now();
    this.firstPendingAt ??= now;
    const deadline = this.firstPendingAt + this.opts.windowMs * 5;
    const delay = Math.max(
      0,
      Math.min(this.opts.windowMs, deadline - now),
      (this.opts.notBefore?.() ?? 0) - now,
    );
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.timer = this.clock.setTimeout(() => {
      this.timer = undefined;
      void this.flush();
    }, delay);
  }
}
