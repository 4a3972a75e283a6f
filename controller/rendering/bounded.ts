// Bounded rendering (issue 11, defect 3): addon renders run in a small pool of worker threads, each
// with a time budget and a heap cap. A render that overruns is stopped by terminating its worker
// (a fresh one takes its place), so a hostile template costs one worker for at most the budget and
// never blocks the event loop that renews the Lease and answers /healthz; other renders go on in
// the other workers. The result is a RenderFailure with reason LimitExceeded naming the file being
// rendered, the limit and its flag.
//
// Workers start on demand and stop when idle: each is a V8 isolate of about 45 MB once it has
// loaded the renderer, while a render takes about a millisecond. So one worker serves a fan-out;
// a second (up to `workers`) starts only when every running worker has spent `spareAfterMs` (1 s)
// on one render (a slow or stuck template), and a worker without work for `idleMs` is stopped (a
// converged fleet holds none).
//
// Reconcilers stay pure and synchronous: withBoundedRenders runs one (or the offline renderer)
// with a renderer that answers from renders already done in the pool and notes the ones it lacks;
// those are rendered in the pool and the run is repeated until every render it asks for is known.
// The live controller (controllers/clusteraddon.ts) and `stackflux render` both use it.
import { MessageChannel, type MessagePort, receiveMessageOnPort, Worker } from 'node:worker_threads';
import { DEFAULT_RENDER_LIMITS, formatMs, type RenderLimits } from './limits.ts';
import { ADDON_ROOT } from './render.ts';
import type { AddonRenderer, RenderAddonInput, RenderFailure, RenderResult } from './types.ts';
import type { RenderReply, RenderRequest } from './worker.ts';

export interface RenderPoolOptions extends Partial<RenderLimits> {
  /** Worker threads at most (default 2): a stuck render holds one, the others keep rendering. */
  workers?: number;
  /**
   * A further worker starts when every running one has been on one render this long (default 1 s):
   * long enough that a busy event loop reading a reply late (a GC, a large fleet write being planned)
   * does not look like a stuck render, short next to the render time budget.
   */
  spareAfterMs?: number;
  /** A worker without a render for this long is stopped (default 30 s). */
  idleMs?: number;
}

const SPARE_AFTER_MS = 1_000;
const IDLE_MS = 30_000;

const WORKER_URL = new URL(`./worker.${import.meta.url.endsWith('.ts') ? 'ts' : 'js'}`, import.meta.url);

interface Job {
  id: number;
  input: RenderAddonInput;
  resolve: (r: RenderResult) => void;
  /** The template being rendered, as the worker last said. */
  file?: string;
}

interface Slot {
  worker: Worker | undefined;
  /** Where the worker's replies arrive (read at once, before deciding that the worker is held). */
  replies: MessagePort | undefined;
  onReply: ((reply: RenderReply) => void) | undefined;
  /** The worker has loaded (a render's time budget starts when it is sent to a ready worker). */
  ready: boolean;
  job: Job | undefined;
  timer: ReturnType<typeof setTimeout> | undefined;
  /** When the current render was sent to the worker (undefined: none, or the worker is loading). */
  sentAt: number | undefined;
  idleTimer: ReturnType<typeof setTimeout> | undefined;
}

function limitFailure(message: string): RenderFailure {
  return { ok: false, reason: 'LimitExceeded', message };
}

/** The input with only the addon's own files: all a render reads, and cheap to post to a worker. */
export function slimInput(input: RenderAddonInput): RenderAddonInput {
  const prefix = `${ADDON_ROOT}/${input.addon}/`;
  const tree = new Map([...input.tree].filter(([path]) => path.startsWith(prefix)));
  const clusterValues = input.clusterValues?.[input.addon];
  const centralValues = input.centralValues?.[input.addon];
  return {
    tree,
    stack: input.stack,
    addon: input.addon,
    cluster: input.cluster,
    ...(input.controlPlane !== undefined ? { controlPlane: input.controlPlane } : {}),
    ...(input.infraCluster !== undefined ? { infraCluster: input.infraCluster } : {}),
    ...(clusterValues !== undefined ? { clusterValues: { [input.addon]: clusterValues } } : {}),
    ...(centralValues !== undefined ? { centralValues: { [input.addon]: centralValues } } : {}),
  };
}

/** Identity of a render: equal keys render equally (renderAddon is pure). */
export function renderKey(slim: RenderAddonInput): string {
  return JSON.stringify([
    slim.addon,
    slim.stack,
    [...slim.tree],
    slim.cluster,
    slim.controlPlane ?? null,
    slim.infraCluster ?? null,
    slim.clusterValues ?? null,
    slim.centralValues ?? null,
  ]);
}

export class RenderPool {
  readonly limits: Readonly<RenderLimits>;
  private readonly slots: Slot[];
  private readonly queue: Job[] = [];
  private nextId = 1;
  private closed = false;
  /** Renders stopped for their time budget / their memory, since start. */
  readonly stopped = { timeout: 0, memory: 0 };
  /** Workers started and stopped for being idle, since start. */
  readonly workerStats = { started: 0, idleStopped: 0 };
  private readonly spareAfterMs: number;
  private readonly idleMs: number;
  private redispatch: ReturnType<typeof setTimeout> | undefined;

  constructor(opts: RenderPoolOptions = {}) {
    this.limits = {
      maxOutputBytes: opts.maxOutputBytes ?? DEFAULT_RENDER_LIMITS.maxOutputBytes,
      timeoutMs: opts.timeoutMs ?? DEFAULT_RENDER_LIMITS.timeoutMs,
      maxMemoryMb: opts.maxMemoryMb ?? DEFAULT_RENDER_LIMITS.maxMemoryMb,
    };
    const size = Math.max(1, opts.workers ?? 2);
    this.spareAfterMs = opts.spareAfterMs ?? SPARE_AFTER_MS;
    this.idleMs = opts.idleMs ?? IDLE_MS;
    this.slots = Array.from({ length: size }, () => ({
      worker: undefined,
      replies: undefined,
      onReply: undefined,
      job: undefined,
      ready: false,
      timer: undefined,
      sentAt: undefined,
      idleTimer: undefined,
    }));
  }

  /** Workers running now. */
  get running(): number {
    return this.slots.filter((s) => s.worker !== undefined).length;
  }

  /** Renders one addon in a worker; never rejects (a breached limit is a LimitExceeded failure). */
  render(input: RenderAddonInput): Promise<RenderResult> {
    if (this.closed) return Promise.resolve(limitFailure('the render pool is shut down'));
    return new Promise((resolve) => {
      this.queue.push({ id: this.nextId++, input: slimInput(input), resolve });
      this.dispatch();
    });
  }

  /** Terminates every worker; queued renders end as failures. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.redispatch !== undefined) clearTimeout(this.redispatch);
    for (const job of this.queue.splice(0)) job.resolve(limitFailure('the render pool is shut down'));
    await Promise.all(
      this.slots.map(async (slot) => {
        if (slot.idleTimer !== undefined) clearTimeout(slot.idleTimer);
        this.finish(slot, limitFailure('the render pool is shut down'));
        const w = slot.worker;
        slot.worker = undefined;
        slot.replies?.close();
        slot.replies = undefined;
        await w?.terminate();
      }),
    );
  }

  private dispatch(): void {
    if (this.closed) return;
    // Running workers first.
    for (const slot of this.slots) {
      if (this.queue.length === 0) return;
      if (slot.job === undefined && slot.worker !== undefined) this.start(slot, this.queue.shift() as Job);
    }
    // Then a new worker: the first, or a spare once every running one is held by a slow render.
    for (const slot of this.slots) {
      if (this.queue.length === 0) return;
      if (slot.worker !== undefined || slot.job !== undefined) continue;
      // Replies that came while this thread was busy count: a render that finished is not slow.
      if (this.readWaitingReplies()) {
        this.dispatch();
        return;
      }
      const held = this.heldForMs();
      if (held === undefined || held >= this.spareAfterMs) {
        this.start(slot, this.queue.shift() as Job);
        continue;
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
   * How long the least-held running worker has been on its render (0 while one is loading);
   * undefined when no worker runs.
   */
  private heldForMs(): number | undefined {
    const now = performance.now();
    let least: number | undefined;
    for (const s of this.slots) {
      if (s.worker === undefined) continue;
      const held = s.sentAt === undefined ? 0 : now - s.sentAt;
      least = least === undefined ? held : Math.min(least, held);
    }
    return least;
  }

  /**
   * Handles the replies already waiting in the workers' ports, in order; whether there were any.
   * When this thread was busy (a burst of watch events, a collection) for longer than a spare's
   * threshold, a render's reply waits there while the render looks held.
   */
  private readWaitingReplies(): boolean {
    let any = false;
    for (const slot of this.slots) {
      const port = slot.replies;
      for (
        let m = port && receiveMessageOnPort(port);
        m !== undefined;
        m = port && receiveMessageOnPort(port)
      ) {
        any = true;
        slot.onReply?.(m.message as RenderReply);
      }
    }
    return any;
  }

  private spawn(slot: Slot): Worker {
    this.workerStats.started += 1;
    const { port1: replies, port2: replyPort } = new MessageChannel();
    const worker = new Worker(WORKER_URL, {
      resourceLimits: { maxOldGenerationSizeMb: this.limits.maxMemoryMb },
      workerData: { replyPort },
      transferList: [replyPort],
    });
    slot.replies?.close();
    slot.replies = replies;
    const onReply = (reply: RenderReply): void => {
      if (slot.worker !== worker) return;
      if (reply.type === 'ready') {
        slot.ready = true;
        if (slot.job !== undefined) this.begin(slot, slot.job);
        return;
      }
      const job = slot.job;
      if (slot.worker !== worker || job === undefined || reply.id !== job.id) return;
      if (reply.type === 'template') job.file = reply.file;
      else this.finish(slot, reply.result);
    };
    replies.on('message', onReply);
    replies.unref();
    slot.onReply = onReply;
    worker.on('error', (err: Error & { code?: string }) => {
      if (slot.worker !== worker) return;
      slot.worker = undefined;
      const file = slot.job?.file;
      if (err.code === 'ERR_WORKER_OUT_OF_MEMORY') {
        this.stopped.memory += 1;
        this.finish(
          slot,
          limitFailure(
            `${file ?? `${ADDON_ROOT}/${slot.job?.input.addon ?? ''}/`}: rendering needs more than the memory limit of ${this.limits.maxMemoryMb} MiB (--render-max-memory)`,
          ),
        );
      } else {
        this.finish(slot, {
          ok: false,
          reason: 'TemplateError',
          message: `${file ?? `addon ${slot.job?.input.addon ?? ''}`}: the render failed: ${err.message}`,
        });
      }
    });
    worker.on('exit', () => {
      if (slot.worker !== worker) return;
      slot.worker = undefined;
      this.finish(slot, limitFailure('the render worker exited unexpectedly'));
    });
    worker.unref();
    return worker;
  }

  private start(slot: Slot, job: Job): void {
    if (slot.idleTimer !== undefined) clearTimeout(slot.idleTimer);
    slot.idleTimer = undefined;
    if (slot.worker === undefined) {
      slot.ready = false;
      slot.worker = this.spawn(slot);
    }
    slot.job = job;
    slot.worker.ref();
    if (slot.ready) this.begin(slot, job);
  }

  /** Sends the job to the (loaded) worker and starts its time budget. */
  private begin(slot: Slot, job: Job): void {
    const worker = slot.worker;
    if (worker === undefined) return;
    slot.sentAt = performance.now();
    slot.timer = setTimeout(() => {
      if (slot.job !== job) return;
      this.stopped.timeout += 1;
      // Terminating is the only way to stop synchronous template code; a new worker replaces it.
      slot.worker = undefined;
      void worker.terminate();
      const where = job.file ?? `${ADDON_ROOT}/${job.input.addon}/`;
      this.finish(
        slot,
        limitFailure(
          `${where}: rendering took longer than the time budget of ${formatMs(this.limits.timeoutMs)} (--render-timeout) and was stopped`,
        ),
      );
    }, this.limits.timeoutMs);
    const request: RenderRequest = {
      id: job.id,
      input: job.input,
      maxOutputBytes: this.limits.maxOutputBytes,
    };
    worker.postMessage(request);
  }

  private finish(slot: Slot, result: RenderResult): void {
    const job = slot.job;
    if (slot.timer !== undefined) clearTimeout(slot.timer);
    slot.timer = undefined;
    slot.sentAt = undefined;
    slot.job = undefined;
    slot.worker?.unref();
    if (job !== undefined) job.resolve(result);
    if (this.closed) return;
    this.dispatch();
    if (slot.job === undefined && slot.worker !== undefined) this.stopWhenIdle(slot);
  }

  /** Stops the slot's worker if it gets no render within idleMs. */
  private stopWhenIdle(slot: Slot): void {
    if (slot.idleTimer !== undefined) clearTimeout(slot.idleTimer);
    const worker = slot.worker;
    slot.idleTimer = setTimeout(() => {
      slot.idleTimer = undefined;
      if (slot.job !== undefined || slot.worker !== worker || worker === undefined) return;
      slot.worker = undefined;
      slot.ready = false;
      this.workerStats.idleStopped += 1;
      void worker.terminate();
    }, this.idleMs);
    slot.idleTimer.unref();
  }
}

const PENDING: RenderFailure = { ok: false, reason: 'TemplateError', message: 'render pending' };
const MAX_ROUNDS = 16;

/**
 * Runs `run` (a pure reconcile or the offline renderer) with every addon render done in `pool`:
 * each round answers the renders already done and collects the others, which are then rendered in
 * the pool (in parallel); the round whose renders were all known is the result. An error thrown by
 * a round that lacked renders is not the result (the placeholder may have caused it). Calls that
 * pass the same `done` map (e.g. the passes of one reconcile) render each input once.
 */
export async function withBoundedRenders<T>(
  pool: RenderPool,
  run: (render: AddonRenderer) => T,
  done: Map<string, RenderResult> = new Map(),
): Promise<T> {
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const missing = new Map<string, RenderAddonInput>();
    const render: AddonRenderer = (input) => {
      const slim = slimInput(input);
      const key = renderKey(slim);
      const known = done.get(key);
      if (known !== undefined) return known;
      missing.set(key, slim);
      return PENDING;
    };
    let result: T | undefined;
    let error: unknown;
    let failed = false;
    try {
      result = run(render);
    } catch (err) {
      failed = true;
      error = err;
    }
    if (missing.size === 0) {
      if (failed) throw error;
      return result as T;
    }
    const rendered = await Promise.all(
      [...missing].map(async ([key, slim]) => [key, await pool.render(slim)] as const),
    );
    for (const [key, r] of rendered) done.set(key, r);
  }
  throw new Error(`addon renders did not settle after ${MAX_ROUNDS} rounds`);
}
