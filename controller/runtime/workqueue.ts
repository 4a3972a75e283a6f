// A work queue with client-go semantics (k8s.io/client-go/util/workqueue):
//  - items are string keys ("namespace/name"), de-duplicated while waiting;
//  - a key added while it is being processed is marked dirty and handed out again only after
//    done(key): the same key is never processed twice at once;
//  - delayed adds (addAfter), per-key exponential backoff combined with an overall token bucket
//    (addRateLimited / forget / numRequeues);
//  - an optional debounce window: a burst of adds of one key within the window becomes one run;
//  - shutDown() stops handing out work; shutDownWithDrain() also waits for in-flight keys;
//  - fair across namespaces: ready keys wait per namespace (the part before "/") and are handed
//    out round-robin, so one tenant's many keys do not hold another's behind them (within one
//    namespace, and with one namespace, it is FIFO as in client-go).
// Time comes from an injected Clock so tests are deterministic.
import { type Clock, realClock, type TimerHandle } from './clock.ts';

export interface RateLimiter {
  /** Delay in ms before the key may be processed again; records a failure for the key. */
  when(key: string): number;
  /** Clears the failure history of the key. */
  forget(key: string): void;
  /** Failures recorded for the key since the last forget. */
  numRequeues(key: string): number;
}

/** Per-key exponential backoff: base * 2^failures, capped at max (client-go: 5 ms → 1000 s). */
export class ItemExponentialFailureRateLimiter implements RateLimiter {
  private readonly failures = new Map<string, number>();
  private readonly baseMs: number;
  private readonly maxMs: number;

  constructor(baseMs = 5, maxMs = 1_000_000) {
    this.baseMs = baseMs;
    this.maxMs = maxMs;
  }

  when(key: string): number {
    const n = this.failures.get(key) ?? 0;
    this.failures.set(key, n + 1);
    // 2^n overflows to Infinity for large n; Math.min caps it.
    return Math.min(this.maxMs, this.baseMs * 2 ** n);
  }

  forget(key: string): void {
    this.failures.delete(key);
  }

  numRequeues(key: string): number {
    return this.failures.get(key) ?? 0;
  }
}

/** Overall token bucket (golang.org/x/time/rate reservation semantics): qps refill, burst capacity. */
export class BucketRateLimiter implements RateLimiter {
  private tokens: number;
  private last: number;
  private readonly qps: number;
  private readonly burst: number;
  private readonly clock: Clock;

  constructor(qps = 10, burst = 100, clock: Clock = realClock) {
    this.qps = qps;
    this.burst = burst;
    this.clock = clock;
    this.tokens = burst;
    this.last = clock.now();
  }

  when(_key: string): number {
    const now = this.clock.now();
    const elapsed = Math.max(0, now - this.last);
    this.last = now;
    this.tokens = Math.min(this.burst, this.tokens + (elapsed * this.qps) / 1000);
    this.tokens -= 1;
    if (this.tokens >= 0) return 0;
    return (-this.tokens * 1000) / this.qps;
  }

  forget(_key: string): void {}

  numRequeues(_key: string): number {
    return 0;
  }
}

/** The largest delay of several limiters (client-go's MaxOfRateLimiter). */
export class MaxOfRateLimiter implements RateLimiter {
  private readonly limiters: RateLimiter[];

  constructor(...limiters: RateLimiter[]) {
    this.limiters = limiters;
  }

  when(key: string): number {
    let max = 0;
    for (const l of this.limiters) max = Math.max(max, l.when(key));
    return max;
  }

  forget(key: string): void {
    for (const l of this.limiters) l.forget(key);
  }

  numRequeues(key: string): number {
    let max = 0;
    for (const l of this.limiters) max = Math.max(max, l.numRequeues(key));
    return max;
  }
}

export interface ControllerRateLimiterOptions {
  baseDelayMs?: number;
  maxDelayMs?: number;
  qps?: number;
  burst?: number;
}

/** controller-runtime's default: per-key 5 ms → 1000 s, overall 10 qps / burst 100. */
export function defaultControllerRateLimiter(
  clock: Clock = realClock,
  o: ControllerRateLimiterOptions = {},
): RateLimiter {
  return new MaxOfRateLimiter(
    new ItemExponentialFailureRateLimiter(o.baseDelayMs ?? 5, o.maxDelayMs ?? 1_000_000),
    new BucketRateLimiter(o.qps ?? 10, o.burst ?? 100, clock),
  );
}

/** Hooks the queue calls; metrics.ts implements them with Prometheus (workqueue_* names). */
export interface QueueMetrics {
  add(): void;
  depth(n: number): void;
  retry(): void;
  /** Seconds a key waited in the queue before being handed out. */
  queueLatency(seconds: number): void;
  /** Seconds between handing a key out and done(key). */
  workDuration(seconds: number): void;
}

export interface WorkQueueOptions {
  name?: string;
  clock?: Clock;
  rateLimiter?: RateLimiter;
  /** When > 0, add(key) waits this long before the key becomes ready; adds in between coalesce. */
  debounceMs?: number;
  metrics?: QueueMetrics;
}

export class WorkQueue {
  readonly name: string;
  private readonly clock: Clock;
  private readonly rateLimiter: RateLimiter;
  private readonly debounceMs: number;
  private readonly metrics: QueueMetrics | undefined;

  // Ready keys per namespace, each a FIFO; the Map's order is the round-robin order (a namespace
  // served goes to the back).
  private readonly ready = new Map<string, Fifo>();
  private readyCount = 0;
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly enqueuedAt = new Map<string, number>();
  private readonly startedAt = new Map<string, number>();
  private readonly waiting = new Map<string, { at: number; handle: TimerHandle }>();
  private getters: Array<(key: string | undefined) => void> = [];
  private drainWaiters: Array<() => void> = [];
  private stopping = false;

  constructor(opts: WorkQueueOptions = {}) {
    this.name = opts.name ?? 'queue';
    this.clock = opts.clock ?? realClock;
    this.rateLimiter = opts.rateLimiter ?? defaultControllerRateLimiter(this.clock);
    this.debounceMs = opts.debounceMs ?? 0;
    this.metrics = opts.metrics;
  }

  /** Marks key as needing processing. With a debounce window the key becomes ready after it. */
  add(key: string): void {
    if (this.stopping) return;
    if (this.debounceMs > 0) {
      if (this.dirty.has(key)) return;
      this.addAfter(key, this.debounceMs);
      return;
    }
    this.addNow(key);
  }

  /** Adds key after ms; of several pending delayed adds of one key, the earliest wins. */
  addAfter(key: string, ms: number): void {
    if (this.stopping) return;
    if (ms <= 0) {
      this.addNow(key);
      return;
    }
    const at = this.clock.now() + ms;
    const existing = this.waiting.get(key);
    if (existing && existing.at <= at) return;
    if (existing) this.clock.clearTimeout(existing.handle);
    const handle = this.clock.setTimeout(() => {
      const w = this.waiting.get(key);
      if (w && w.handle === handle) this.waiting.delete(key);
      this.addNow(key);
    }, ms);
    this.waiting.set(key, { at, handle });
  }

  /** Adds key after the rate limiter's delay (per-key backoff combined with the overall bucket). */
  addRateLimited(key: string): void {
    if (this.stopping) return;
    this.metrics?.retry();
    this.addAfter(key, this.rateLimiter.when(key));
  }

  /** Clears key's backoff history (call after a successful reconcile). */
  forget(key: string): void {
    this.rateLimiter.forget(key);
  }

  numRequeues(key: string): number {
    return this.rateLimiter.numRequeues(key);
  }

  /** Waits for the next ready key; undefined once the queue is shutting down. */
  get(): Promise<string | undefined> {
    const key = this.tryGet();
    if (key !== undefined || this.stopping) return Promise.resolve(key);
    return new Promise((resolve) => this.getters.push(resolve));
  }

  /** The next ready key without waiting, or undefined. */
  tryGet(): string | undefined {
    if (this.stopping || this.readyCount === 0) return undefined;
    const next = this.ready.entries().next();
    if (next.done) return undefined;
    const [namespace, fifo] = next.value;
    const key = fifo.shift();
    this.readyCount -= 1;
    this.ready.delete(namespace);
    if (fifo.length > 0) this.ready.set(namespace, fifo);
    this.start(key);
    return key;
  }

  /** Ends processing of key; if it was added meanwhile it becomes ready again. */
  done(key: string): void {
    if (!this.processing.delete(key)) return;
    const started = this.startedAt.get(key);
    this.startedAt.delete(key);
    if (started !== undefined) this.metrics?.workDuration((this.clock.now() - started) / 1000);
    if (this.dirty.has(key) && !this.stopping) this.push(key);
    if (this.processing.size === 0) {
      const waiters = this.drainWaiters;
      this.drainWaiters = [];
      for (const w of waiters) w();
    }
  }

  /** Ready keys (not counting in-flight or delayed ones). */
  len(): number {
    return this.readyCount;
  }

  /** Keys being processed right now. */
  inFlight(): number {
    return this.processing.size;
  }

  /** Keys scheduled by addAfter/addRateLimited/debounce that are not ready yet. */
  delayed(): number {
    return this.waiting.size;
  }

  isProcessing(key: string): boolean {
    return this.processing.has(key);
  }

  get shuttingDown(): boolean {
    return this.stopping;
  }

  /** Stops intake and hand-out at once; waiting get() calls resolve with undefined. */
  shutDown(): void {
    if (this.stopping) return;
    this.stopping = true;
    for (const w of this.waiting.values()) this.clock.clearTimeout(w.handle);
    this.waiting.clear();
    const getters = this.getters;
    this.getters = [];
    for (const g of getters) g(undefined);
  }

  /** shutDown(), then resolves once every in-flight key is done. */
  shutDownWithDrain(): Promise<void> {
    this.shutDown();
    if (this.processing.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  private addNow(key: string): void {
    if (this.stopping || this.dirty.has(key)) return;
    this.dirty.add(key);
    this.metrics?.add();
    if (this.processing.has(key)) return;
    this.push(key);
  }

  private push(key: string): void {
    this.enqueuedAt.set(key, this.clock.now());
    const getter = this.getters.shift();
    if (getter) {
      this.start(key);
      getter(key);
      return;
    }
    const namespace = key.slice(0, Math.max(0, key.indexOf('/')));
    const fifo = this.ready.get(namespace);
    if (fifo !== undefined) fifo.push(key);
    else this.ready.set(namespace, new Fifo(key));
    this.readyCount += 1;
    this.metrics?.depth(this.len());
  }

  private start(key: string): void {
    this.dirty.delete(key);
    this.processing.add(key);
    const now = this.clock.now();
    const queued = this.enqueuedAt.get(key);
    this.enqueuedAt.delete(key);
    if (queued !== undefined) this.metrics?.queueLatency((now - queued) / 1000);
    this.startedAt.set(key, now);
    this.metrics?.depth(this.len());
  }
}

/** A FIFO of keys: an array with a moving head, compacted now and then. */
class Fifo {
  private items: string[];
  private head = 0;

  constructor(first: string) {
    this.items = [first];
  }

  get length(): number {
    return this.items.length - this.head;
  }

  push(key: string): void {
    this.items.push(key);
  }

  /** The oldest key; only called when length > 0. */
  shift(): string {
    const key = this.items[this.head] as string;
    this.head += 1;
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return key;
  }
}
