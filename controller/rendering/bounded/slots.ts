// A slot of the render pool: one render process at a time and the render it runs, under a time
// budget (an overrun kills the process; a fresh one takes its place on the slot's next render) and
// a heap cap. Either ends the render as a LimitExceeded failure naming the file being rendered, the
// limit and its flag. A process starts with the slot's first render and stops once the slot has
// been idle for idleMs.
import type { ChildProcess } from 'node:child_process';
import type { GoEngineResult } from '../goengine/index.ts';
import { formatMs } from '../limits.ts';
import { type AddonRenderInput, isCsctlAddonInput, type RenderResult } from '../types.ts';
import type { GoEngineRequest, RenderReply, RenderRequest } from '../worker.ts';
import { jobPlace, limitFailure } from './failures.ts';
import { forkRenderProcess, setRef, stopRenderProcess } from './process.ts';
import type { Job, SlotHost } from './types.ts';

/** Time a render process may take to load the Go engine, before a render's own budget starts. */
const ENGINE_LOAD_MS = 60_000;
/** Memory of the Go engine beyond the render limit: its runtime, Helm's and Kubernetes' tables. */
export const GO_ENGINE_BASE_MB = 256;

export class RenderSlot {
  /** The reserved slot: renders only for namespaces with no render running in another slot. */
  readonly reserved: boolean;
  private readonly host: SlotHost;
  child: ChildProcess | undefined = undefined;
  /** The process has loaded (a render's time budget starts when it is sent to a ready one). */
  ready = false;
  /** The process has loaded the Go engine (its first engine request gets ENGINE_LOAD_MS more). */
  engineLoaded = false;
  job: Job | undefined = undefined;
  /** When the current render was sent to the process (undefined: none, or it is loading). */
  sentAt: number | undefined = undefined;
  private timer: ReturnType<typeof setTimeout> | undefined = undefined;
  private idleTimer: ReturnType<typeof setTimeout> | undefined = undefined;

  constructor(reserved: boolean, host: SlotHost) {
    this.reserved = reserved;
    this.host = host;
  }

  /** Runs the job in this slot's process, starting one if it has none. */
  start(job: Job): void {
    if (this.idleTimer !== undefined) clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    if (this.child === undefined) {
      this.ready = false;
      this.engineLoaded = false;
      this.child = this.spawn();
    }
    this.job = job;
    setRef(this.child, true);
    if (this.ready) this.begin(job);
  }

  /** Ends the slot's render with `result`, then hands the pool's next render to free slots. */
  finish(result: RenderResult | GoEngineResult): void {
    const job = this.job;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.sentAt = undefined;
    this.job = undefined;
    if (this.child !== undefined) setRef(this.child, false);
    if (job !== undefined) job.resolve(result);
    if (this.host.closed()) return;
    this.host.dispatch();
    if (this.job === undefined && this.child !== undefined) this.stopWhenIdle();
  }

  /** Ends the slot's render with `result` and its process (the pool is shutting down). */
  async close(result: RenderResult): Promise<void> {
    if (this.idleTimer !== undefined) clearTimeout(this.idleTimer);
    this.finish(result);
    const child = this.child;
    this.child = undefined;
    if (child !== undefined) await stopRenderProcess(child);
  }

  private spawn(): ChildProcess {
    this.host.workerStats.started += 1;
    const { child, outOfMemory } = forkRenderProcess(this.host.limits.maxMemoryMb);
    child.on('message', (reply: RenderReply) => {
      if (this.child !== child) return;
      if (reply.type === 'ready') {
        this.ready = true;
        if (this.job !== undefined) this.begin(this.job);
        return;
      }
      const job = this.job;
      if (job === undefined || reply.id !== job.id) return;
      if (reply.type === 'template') job.file = reply.file;
      else if (reply.type === 'engineLoaded') {
        this.engineLoaded = true;
        this.sentAt = performance.now();
        this.armBudget(job, this.host.limits.timeoutMs);
      } else this.finish(reply.result);
    });
    child.on('error', (err: Error) => {
      if (this.child !== child) return;
      this.child = undefined;
      child.kill('SIGKILL');
      this.finish(limitFailure(`the render process failed: ${err.message}`));
    });
    // 'close', not 'exit': it comes after the last message and the last of stderr are read.
    child.on('close', (code, signal) => {
      if (this.child !== child) return;
      this.child = undefined;
      const job = this.job;
      const where = job?.file ?? jobPlace(job);
      if (outOfMemory()) {
        this.host.stopped.memory += 1;
        this.finish(
          limitFailure(
            `${where}: rendering needs more than the memory limit of ${this.host.limits.maxMemoryMb} MiB (--render-max-memory)`,
          ),
        );
      } else {
        this.finish(
          limitFailure(
            `${where}: the render process exited unexpectedly (${signal ?? `exit code ${code ?? '?'}`})`,
          ),
        );
      }
    });
    setRef(child, false);
    return child;
  }

  /** Sends the job to the (loaded) process and starts its time budget. */
  private begin(job: Job): void {
    const child = this.child;
    if (child === undefined) return;
    const needsEngine =
      job.goEngine !== undefined || (job.input !== undefined && isCsctlAddonInput(job.input));
    // A process loading the Go engine is loading, not held by a slow render: a spare started now
    // would load the engine too (seconds of CPU and a few hundred MB each) while the first is
    // about to render quickly. Its render counts as sent once the engine is loaded.
    this.sentAt = needsEngine && !this.engineLoaded ? undefined : performance.now();
    // The engine's load is timed on its own (the process says when it is done, then the render's
    // budget starts afresh): a template cannot spend it, it ends before any template runs.
    this.armBudget(
      job,
      this.host.limits.timeoutMs + (needsEngine && !this.engineLoaded ? ENGINE_LOAD_MS : 0),
    );
    this.send(child, job);
  }

  /** (Re)starts the time budget of the job running in the slot: `ms` from now. */
  private armBudget(job: Job, ms: number): void {
    const child = this.child;
    if (child === undefined) return;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      if (this.job !== job) return;
      this.host.stopped.timeout += 1;
      // Killing is the only way to stop synchronous template code; a new process replaces it.
      this.child = undefined;
      child.kill('SIGKILL');
      const where = job.file ?? jobPlace(job);
      this.finish(
        limitFailure(
          `${where}: rendering took longer than the time budget of ${formatMs(this.host.limits.timeoutMs)} (--render-timeout) and was stopped`,
        ),
      );
    }, ms);
  }

  private send(child: ChildProcess, job: Job): void {
    const { limits } = this.host;
    if (job.goEngine !== undefined) {
      const request: GoEngineRequest = {
        id: job.id,
        goEngine: job.goEngine,
        maxOutputBytes: limits.maxOutputBytes,
        enginePath: this.host.enginePath(),
        engineMemoryMb: limits.maxMemoryMb + GO_ENGINE_BASE_MB,
      };
      child.send(request);
      return;
    }
    const input = job.input as AddonRenderInput;
    const request: RenderRequest = {
      id: job.id,
      input,
      maxOutputBytes: limits.maxOutputBytes,
      ...(isCsctlAddonInput(input)
        ? { engine: { path: this.host.enginePath(), memoryMb: limits.maxMemoryMb + GO_ENGINE_BASE_MB } }
        : {}),
    };
    child.send(request);
  }

  /** Stops the slot's process if it gets no render within idleMs. */
  private stopWhenIdle(): void {
    if (this.idleTimer !== undefined) clearTimeout(this.idleTimer);
    const child = this.child;
    this.idleTimer = setTimeout(() => {
      this.idleTimer = undefined;
      if (this.job !== undefined || this.child !== child || child === undefined) return;
      this.child = undefined;
      this.ready = false;
      this.host.workerStats.idleStopped += 1;
      void stopRenderProcess(child);
    }, this.host.idleMs);
    this.idleTimer.unref();
  }
}
