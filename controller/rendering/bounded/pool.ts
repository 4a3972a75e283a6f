// The render pool: queues renders and Go engine calls fairly across namespaces (./fairness.ts),
// refuses templates cooling down (./cooldown.ts) and hands the rest to its slots (./slots.ts).
//
// Processes start on demand and stop when idle: one serves a fan-out; a second (up to `workers`)
// starts only when every running one has spent `spareAfterMs` (1 s) on one render (a slow or stuck
// template), and one without work for `idleMs` is stopped (a converged fleet holds none).
//
// Round-robin alone still lets a tenant's slow renders (each within the time budget) hold every
// process, so a quick render of another tenant waits for one of them to end: one further process is
// reserved for namespaces that have no render running, and a tenant can never hold it while another
// waits.
import { type GoEngineCall, type GoEngineResult, locateGoEngine } from '../goengine/index.ts';
import { DEFAULT_RENDER_LIMITS, type RenderLimits } from '../limits.ts';
import { type AddonRenderInput, isCsctlAddonInput, type RenderFailure, type RenderResult } from '../types.ts';
import { CoolDowns } from './cooldown.ts';
import { limitFailure } from './failures.ts';
import { FairQueues } from './fairness.ts';
import { slimInput, templateKeys } from './renderkey.ts';
import { RenderSlot } from './slots.ts';
import type {
  Job,
  RenderPoolOptions,
  RenderRequestOptions,
  SlotHost,
  StoppedRenders,
  WorkerStats,
} from './types.ts';

const SPARE_AFTER_MS = 1_000;
const IDLE_MS = 30_000;

export class RenderPool {
  readonly limits: Readonly<RenderLimits>;
  private readonly slots: RenderSlot[];
  private readonly queues = new FairQueues<Job>();
  private enginePath = '';
  private nextId = 1;
  private closed = false;
  /** Renders stopped for their time budget / their memory, since start. */
  readonly stopped: StoppedRenders = { timeout: 0, memory: 0 };
  /** Render processes started and stopped for being idle, since start; renders refused cooling down. */
  readonly workerStats: WorkerStats = { started: 0, idleStopped: 0, coolingDown: 0 };
  private readonly spareAfterMs: number;
  private readonly coolDowns: CoolDowns;
  private redispatch: ReturnType<typeof setTimeout> | undefined;
  /** A spare is started only after the event loop has read the replies waiting for it. */
  private repliesRead = false;
  private recheck: ReturnType<typeof setImmediate> | undefined;

  constructor(opts: RenderPoolOptions = {}) {
    this.limits = {
      maxOutputBytes: opts.maxOutputBytes ?? DEFAULT_RENDER_LIMITS.maxOutputBytes,
      timeoutMs: opts.timeoutMs ?? DEFAULT_RENDER_LIMITS.timeoutMs,
      maxMemoryMb: opts.maxMemoryMb ?? DEFAULT_RENDER_LIMITS.maxMemoryMb,
    };
    const size = Math.max(1, opts.workers ?? 2);
    this.spareAfterMs = opts.spareAfterMs ?? SPARE_AFTER_MS;
    this.coolDowns = new CoolDowns(opts);
    const host: SlotHost = {
      limits: this.limits,
      idleMs: opts.idleMs ?? IDLE_MS,
      stopped: this.stopped,
      workerStats: this.workerStats,
      enginePath: () => this.enginePath,
      closed: () => this.closed,
      dispatch: () => this.dispatch(),
    };
    this.slots = Array.from({ length: size + 1 }, (_, i) => new RenderSlot(i === size, host));
  }

  /** Render processes running now. */
  get running(): number {
    return this.slots.filter((s) => s.child !== undefined).length;
  }

  /** The pids of the render processes running now. */
  get pids(): number[] {
    return this.slots.flatMap((s) => (s.child?.pid !== undefined ? [s.child.pid] : []));
  }

  /** Renders one addon in a process; never rejects (a breached limit is a LimitExceeded failure). */
  render(input: AddonRenderInput, options: RenderRequestOptions = {}): Promise<RenderResult> {
    if (this.closed) return Promise.resolve(limitFailure('the render pool is shut down'));
    if (isCsctlAddonInput(input)) {
      // A csctl addon renders with the Go engine in the render process.
      const located = locateGoEngine();
      if ('error' in located)
        return Promise.resolve({ ok: false, reason: 'TemplateError', message: located.error });
      this.enginePath = located.path;
    }
    const slim = slimInput(input);
    const namespace = options.namespace ?? '';
    const key = templateKeys(namespace, slim);
    const cooling = this.coolDowns.failure(key, slim);
    if (cooling !== undefined) {
      this.workerStats.coolingDown += 1;
      return Promise.resolve(cooling);
    }
    return new Promise<RenderResult>((resolve) => {
      this.enqueue({
        id: this.nextId++,
        input: slim,
        namespace,
        resolve: (result) => {
          // An addon job is answered with a RenderResult only.
          this.coolDowns.noteResult(key, result as RenderResult, this.closed);
          resolve(result as RenderResult);
        },
      });
    });
  }

  /**
   * Runs one Go engine call (goTemplate, helmTemplate, parseGoYaml) in a render process, under the
   * same time budget and output cap as an addon render; the engine's memory is capped at
   * maxMemoryMb plus GO_ENGINE_BASE_MB (Go's runtime and Helm's tables). Never rejects.
   */
  goEngine(call: GoEngineCall, options: RenderRequestOptions = {}): Promise<GoEngineResult | RenderFailure> {
    if (this.closed) return Promise.resolve(limitFailure('the render pool is shut down'));
    const located = locateGoEngine();
    if ('error' in located)
      return Promise.resolve({ ok: false, error: located.error, engine: 'unavailable' });
    this.enginePath = located.path;
    const namespace = options.namespace ?? '';
    return new Promise((resolve) => {
      // A Go engine job is answered with a GoEngineResult or a limit's RenderFailure only.
      this.enqueue({
        id: this.nextId++,
        goEngine: call,
        namespace,
        resolve: (result) => resolve(result as GoEngineResult | RenderFailure),
      });
    });
  }

  /** Terminates every process; queued renders end as failures. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.redispatch !== undefined) clearTimeout(this.redispatch);
    if (this.recheck !== undefined) clearImmediate(this.recheck);
    for (const job of this.queues.drain()) job.resolve(limitFailure('the render pool is shut down'));
    await Promise.all(this.slots.map((slot) => slot.close(limitFailure('the render pool is shut down'))));
  }

  private enqueue(job: Job): void {
    this.queues.push(job);
    this.dispatch();
  }

  private dispatch(): void {
    if (this.closed) return;
    this.dispatchShared();
    this.dispatchReserved();
  }

  /** The reserved process takes a render of a namespace that has none running, if one waits. */
  private dispatchReserved(): void {
    const slot = this.slots.find((s) => s.reserved);
    if (slot === undefined || slot.job !== undefined || !this.queues.queued) return;
    const rendering = new Set(this.slots.flatMap((s) => (s.job !== undefined ? [s.job.namespace] : [])));
    const job = this.queues.take((namespace) => !rendering.has(namespace));
    if (job !== undefined) slot.start(job);
  }

  private dispatchShared(): void {
    const shared = this.slots.filter((s) => !s.reserved);
    // Running processes first.
    for (const slot of shared) {
      if (!this.queues.queued) return;
      if (slot.job === undefined && slot.child !== undefined) slot.start(this.queues.take() as Job);
    }
    // Then a new process: the first, or a spare once every running one is held by a slow render.
    for (const slot of shared) {
      if (!this.queues.queued) return;
      if (slot.child !== undefined || slot.job !== undefined) continue;
      const held = this.heldForMs();
      if (held === undefined) {
        slot.start(this.queues.take() as Job);
        continue;
      }
      if (held >= this.spareAfterMs) {
        if (this.repliesRead) {
          slot.start(this.queues.take() as Job);
          continue;
        }
        this.afterWaitingReplies();
        return;
      }
      if (this.redispatch === undefined) {
        this.redispatch = setTimeout(() => {
          this.redispatch = undefined;
          this.dispatch();
        }, this.spareAfterMs - held);
        this.redispatch.unref();
      }
      return;
    }
  }

  /**
   * Dispatches again once the event loop has read the replies already waiting in the processes'
   * channels. When this thread was busy (a burst of watch events, a collection) for longer than a
   * spare's threshold, a render's reply waits there while the render looks held. Two turns: a reply
   * that arrived during this turn is polled in the next one, before its check phase.
   */
  private afterWaitingReplies(): void {
    if (this.recheck !== undefined) return;
    this.recheck = setImmediate(() => {
      this.recheck = setImmediate(() => {
        this.recheck = undefined;
        this.repliesRead = true;
        try {
          this.dispatch();
        } finally {
          this.repliesRead = false;
        }
      });
    });
  }

  /**
   * How long the least-held running process has been on its render (0 while one is loading);
   * undefined when none runs.
   */
  private heldForMs(): number | undefined {
    const now = performance.now();
    let least: number | undefined;
    for (const s of this.slots) {
      if (s.child === undefined || s.reserved) continue;
      const held = s.sentAt === undefined ? 0 : now - s.sentAt;
      least = least === undefined ? held : Math.min(least, held);
    }
    return least;
  }
}
