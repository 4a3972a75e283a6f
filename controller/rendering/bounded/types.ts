// Types the parts of the bounded render pool share (this folder) and the pool's options. The lowest
// layer of the pool: it imports no part.
import type { GoEngineCall, GoEngineResult } from '../goengine/index.ts';
import type { RenderLimits } from '../limits.ts';
import type { AddonRenderInput, RenderResult } from '../types.ts';

export interface RenderPoolOptions extends Partial<RenderLimits> {
  /**
   * Render processes at most (default 2): a stuck render holds one, the others keep rendering.
   * One more is reserved for namespaces with no render running (fairness across tenants).
   */
  workers?: number;
  /**
   * A further process starts when every running one has been on one render this long (default
   * 1 s): long enough that a busy event loop reading a reply late (a GC, a large fleet write being
   * planned) does not look like a stuck render, short next to the render time budget.
   */
  spareAfterMs?: number;
  /** A process without a render for this long is stopped (default 30 s). */
  idleMs?: number;
  /** A template that hits a limit this many times in a row cools down (default 3). */
  coolDownAfter?: number;
  /** How long a template that keeps hitting limits is not rendered (default 5 min). */
  coolDownMs?: number;
}

/** Who asked for a render: queues are fair across namespaces. */
export interface RenderRequestOptions {
  /** The namespace of the object the render is for (the ClusterAddon's); default "". */
  namespace?: string;
}

export interface Job {
  id: number;
  /** An addon render, or else a Go engine call. */
  input?: AddonRenderInput;
  goEngine?: GoEngineCall;
  namespace: string;
  resolve: (r: RenderResult | GoEngineResult) => void;
  /** The template being rendered, as the process last said. */
  file?: string;
}

/** Keys of a render's streaks: its template (namespace, addon, files) and that with its values. */
export interface TemplateKeys {
  template: string;
  withValues: string;
}

/** Renders stopped for their time budget / their memory, since start. */
export interface StoppedRenders {
  timeout: number;
  memory: number;
}

/** Render processes started and stopped for being idle, since start; renders refused cooling down. */
export interface WorkerStats {
  started: number;
  idleStopped: number;
  coolingDown: number;
}

/** What a slot's process needs from the pool it belongs to. */
export interface SlotHost {
  readonly limits: Readonly<RenderLimits>;
  /** A process without a render for this long is stopped. */
  readonly idleMs: number;
  readonly stopped: StoppedRenders;
  readonly workerStats: WorkerStats;
  /** goengine.wasm, as the pool last located it. */
  enginePath(): string;
  closed(): boolean;
  /** Hands queued renders to free slots (a slot calls it when its render ends). */
  dispatch(): void;
}
