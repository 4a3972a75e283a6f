// A render process: ../worker.ts in a child process with a heap cap, a lower CPU priority and none
// of the controller's environment.
//
// Processes, not worker threads: a worker thread that runs out of heap can still abort the whole
// process (V8's heap-limit handling of a large allocation, e.g. flattening a huge rendered string,
// is fatal to every isolate), and a render must never take the controller down. A child process
// that runs out of heap dies alone. It costs a little more to start (once per idle period) and
// about the same per render.
import { type ChildProcess, fork } from 'node:child_process';
import { getPriority, setPriority } from 'node:os';
import { fileURLToPath } from 'node:url';

/** The tail of a render process's stderr kept to tell why it died (V8 prints a fatal OOM there). */
const STDERR_TAIL = 4096;
/**
 * How much lower the scheduling priority (nice value) of render processes is: below the controller's own thread, whose
 * Lease renewal, /healthz, fleet writes and git pushes must not queue for the CPU behind renders.
 */
export const RENDER_NICENESS = 10;
const OUT_OF_MEMORY = /heap out of memory|Allocation failed|invalid size error|out of memory/i;

const WORKER_PATH = fileURLToPath(
  new URL(`../worker.${import.meta.url.endsWith('.ts') ? 'ts' : 'js'}`, import.meta.url),
);

/** A render process as a slot holds it. */
export interface RenderProcess {
  child: ChildProcess;
  /** Whether the tail of its stderr says it ran out of heap. */
  outOfMemory(): boolean;
}

/** Starts a render process whose heap is capped at `maxMemoryMb`. */
export function forkRenderProcess(maxMemoryMb: number): RenderProcess {
  const child = fork(WORKER_PATH, [], {
    // The heap cap, and the image's small young generation (Dockerfile); not the controller's own
    // node flags (inspector, test runner). An OOM there kills that process only.
    execArgv: [`--max-old-space-size=${maxMemoryMb}`, '--max-semi-space-size=4'],
    // Not the controller's environment (credentials, NODE_OPTIONS): a render needs none of it.
    env: renderEnv(),
    serialization: 'advanced',
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
  if (child.pid !== undefined) {
    try {
      setPriority(child.pid, Math.min(19, getPriority() + RENDER_NICENESS));
    } catch {
      // Lowering a priority is always allowed; a platform without it renders at normal priority.
    }
  }
  let stderr = '';
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-STDERR_TAIL);
  });
  (child.stderr as { unref?: () => void } | null)?.unref?.();
  return { child, outOfMemory: () => OUT_OF_MEMORY.test(stderr) };
}

/** The environment variables a render process gets: malloc tuning and locale only. */
const RENDER_ENV = ['MALLOC_ARENA_MAX', 'MALLOC_MMAP_THRESHOLD_', 'TZ', 'LANG', 'LC_ALL'];

function renderEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of RENDER_ENV) {
    const value = process.env[name];
    if (value !== undefined) env[name] = value;
  }
  return env;
}

/** Whether a render process (and its channel) keeps this process's event loop alive. */
export function setRef(child: ChildProcess, ref: boolean): void {
  const channel = child.channel as { ref?: () => void; unref?: () => void } | null | undefined;
  if (ref) {
    child.ref();
    channel?.ref?.();
  } else {
    child.unref();
    channel?.unref?.();
  }
}

/** Kills a render process and waits until it is gone. */
export async function stopRenderProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.ref(); // held until it is gone
  child.kill('SIGKILL');
  await gone;
}
