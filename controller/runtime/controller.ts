// The reconcile loop, modelled on controller-runtime: a work queue of keys, N workers, and a
// reconcile function (key) → {requeue?, requeueAfter?} | void, or a throw.
//  - success: the key's backoff is forgotten;
//  - requeueAfter > 0: forget the backoff and add the key again after that delay;
//  - requeue: add again with rate limiting (backoff);
//  - throw/reject (also a synchronous throw, also a non-Error value): log, count, retry with
//    backoff; a TerminalError is logged and counted but not retried.
// Nothing a reconcile does can stop a worker: every path is caught.
import { type Clock, realClock } from './clock.ts';
import { errorFields, type Logger, newReconcileID, objectLogger, silentLogger, splitKey } from './logging.ts';
import type { ControllerMetrics, ReconcileResult as ResultLabel, RuntimeMetrics } from './metrics.ts';
import { defaultControllerRateLimiter, type RateLimiter, WorkQueue } from './workqueue.ts';

/** An error that retrying will not fix (bad input): recorded, not retried until the key is added again. */
export class TerminalError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TerminalError';
  }
}

export function isTerminalError(err: unknown): boolean {
  if (err instanceof TerminalError) return true;
  // Also across module copies / wrapped causes.
  return err instanceof Error && (err.name === 'TerminalError' || isTerminalErrorCause(err.cause));
}

function isTerminalErrorCause(cause: unknown): boolean {
  return cause instanceof TerminalError;
}

export interface ReconcileResult {
  requeue?: boolean;
  requeueAfter?: number;
}

export interface ReconcileContext {
  key: string;
  namespace: string | undefined;
  name: string;
  reconcileID: string;
  /** Logger carrying kind, namespace, name and reconcileID. */
  log: Logger;
  /** Aborted when the controller stops (e.g. leadership lost): stop writing as soon as possible. */
  signal: AbortSignal;
}

export type Reconciler = (
  key: string,
  ctx: ReconcileContext,
) => Promise<ReconcileResult | undefined> | Promise<void> | ReconcileResult | undefined;

export interface ControllerOptions {
  /** Controller name: metrics label, queue name, log field. */
  name: string;
  /** Kind of the reconciled object, for log lines (defaults to name). */
  kind?: string;
  reconcile: Reconciler;
  maxConcurrentReconciles?: number;
  clock?: Clock;
  rateLimiter?: RateLimiter;
  debounceMs?: number;
  metrics?: RuntimeMetrics;
  logger?: Logger;
}

export class Controller {
  readonly name: string;
  readonly kind: string;
  readonly queue: WorkQueue;
  private readonly reconcileFn: Reconciler;
  private readonly workers: number;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly metrics: ControllerMetrics | undefined;
  private readonly abort = new AbortController();
  private running: Promise<void>[] | undefined;
  private stopped: Promise<void> | undefined;

  constructor(opts: ControllerOptions) {
    this.name = opts.name;
    this.kind = opts.kind ?? opts.name;
    this.reconcileFn = opts.reconcile;
    this.workers = Math.max(1, Math.floor(opts.maxConcurrentReconciles ?? 1));
    this.clock = opts.clock ?? realClock;
    this.log = (opts.logger ?? silentLogger()).child({ controller: this.name });
    this.metrics = opts.metrics?.controller(this.name, this.workers);
    this.queue = new WorkQueue({
      name: this.name,
      clock: this.clock,
      rateLimiter: opts.rateLimiter ?? defaultControllerRateLimiter(this.clock),
      debounceMs: opts.debounceMs ?? 0,
      ...(opts.metrics ? { metrics: opts.metrics.queue(this.name) } : {}),
    });
  }

  /** Queues a key ("namespace/name"). Keys queued before start() wait for the workers. */
  enqueue(key: string): void {
    this.queue.add(key);
  }

  enqueueAfter(key: string, ms: number): void {
    this.queue.addAfter(key, ms);
  }

  get started(): boolean {
    return this.running !== undefined;
  }

  /** Starts the workers (idempotent). */
  start(): void {
    if (this.running || this.stopped) return;
    this.running = Array.from({ length: this.workers }, () => this.worker());
    this.log.info({ workers: this.workers }, 'controller started');
  }

  /**
   * Stops intake and hand-out at once, aborts the signal given to running reconciles when
   * abort is set, and resolves once in-flight reconciles have finished.
   */
  stop(opts: { abort?: boolean } = {}): Promise<void> {
    if (opts.abort) this.abort.abort(new Error('controller stopping'));
    if (!this.stopped) {
      const drained = this.queue.shutDownWithDrain();
      const workers = this.running ?? [];
      this.stopped = Promise.all([drained, ...workers]).then(() => {
        this.log.info('controller stopped');
      });
    }
    return this.stopped;
  }

  private async worker(): Promise<void> {
    for (;;) {
      const key = await this.queue.get();
      if (key === undefined) return;
      try {
        await this.processOne(key);
      } catch (err) {
        // Only reachable if logging/metrics themselves fail; the worker must survive anyway.
        try {
          this.log.error({ key, ...errorFields(err) }, 'internal error while processing key');
        } catch {}
      } finally {
        this.queue.done(key);
      }
    }
  }

  private async processOne(key: string): Promise<void> {
    const started = this.clock.now();
    const reconcileID = newReconcileID();
    const { namespace, name } = splitKey(key);
    const log = objectLogger(this.log, { kind: this.kind, namespace, name }, reconcileID);
    const ctx: ReconcileContext = { key, namespace, name, reconcileID, log, signal: this.abort.signal };
    this.metrics?.activeWorkers(1);
    let outcome: ResultLabel = 'error';
    try {
      let result: ReconcileResult | undefined;
      try {
        result = (await this.reconcileFn(key, ctx)) ?? undefined;
      } catch (err) {
        const terminal = isTerminalError(err);
        this.metrics?.error(terminal);
        if (terminal) {
          log.error(errorFields(err), 'reconcile failed with a terminal error; not retrying');
          this.queue.forget(key);
        } else if (this.abort.signal.aborted) {
          log.info(errorFields(err), 'reconcile aborted: controller stopping');
        } else {
          log.error(
            { ...errorFields(err), retries: this.queue.numRequeues(key) },
            'reconcile failed; retrying',
          );
          this.queue.addRateLimited(key);
        }
        return;
      }
      const after =
        result && typeof result === 'object' && typeof result.requeueAfter === 'number'
          ? result.requeueAfter
          : 0;
      if (Number.isFinite(after) && after > 0) {
        outcome = 'requeue_after';
        this.queue.forget(key);
        this.queue.addAfter(key, after);
        log.debug({ requeueAfterMs: after }, 'reconciled; requeue after delay');
      } else if (result && typeof result === 'object' && result.requeue === true) {
        outcome = 'requeue';
        this.queue.addRateLimited(key);
        log.debug('reconciled; requeue with backoff');
      } else {
        outcome = 'success';
        this.queue.forget(key);
        log.debug('reconciled');
      }
    } finally {
      this.metrics?.activeWorkers(-1);
      this.metrics?.reconciled(outcome, (this.clock.now() - started) / 1000);
    }
  }
}
