// One long-lived instance of goengine.wasm per process (instantiating costs most of a second;
// a call costs milliseconds). Synchronous: a call runs to its end on the calling thread, so in a
// render process (../worker.ts) the pool's time budget stops a template that never ends by
// killing that process, as for any render.
//
// The instance gets WASI preview1 with args (Go's klog reads os.Args[0] at start), an empty
// environment, no preopened directories (templates cannot read files), stdout sent nowhere and
// stderr to a private temp file (read only to tell why an instance stopped). Requests and responses are JSON in the module's memory (protocol:
// hack/goengine/wasm.go).
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { WASI as WasiClass } from 'node:wasi';
import { type FixedRender, fixedWasiImports, SeedStream, timeNanos } from '../determinism.ts';
import { locateGoEngine } from './locate.ts';
import { withMemoryMaximum } from './memory.ts';

/** Memory the engine may use at most, unless configured (a chart render needs ~100-200 MiB). */
export const DEFAULT_ENGINE_MEMORY_MB = 1024;

export interface EngineConfig {
  /** goengine.wasm to load (default: locateGoEngine()). */
  path?: string;
  /** The engine's linear memory cap in MiB. */
  maxMemoryMb?: number;
}

// The project's TypeScript libs (no DOM) do not declare the WebAssembly global; what is used of it.
interface WasmMemory {
  readonly buffer: ArrayBuffer;
}
type WasmModule = object;
const Wasm = (
  globalThis as unknown as {
    WebAssembly: {
      Module: new (bytes: Uint8Array) => WasmModule;
      Instance: new (module: WasmModule, imports: object) => { exports: object };
    };
  }
).WebAssembly;

interface EngineExports {
  memory: WasmMemory;
  alloc(size: number): number;
  free(ptr: number): void;
  call(ptr: number, size: number, maxOutput: number): bigint;
}

export type EngineFailureKind = 'unavailable' | 'memory' | 'crashed' | 'output';
export interface EngineFailure {
  ok: false;
  error: string;
  /** Why the engine gave no answer (absent: the template/chart itself failed). */
  engine?: EngineFailureKind;
}

let config: EngineConfig = {};
let compiled: { module: WasmModule; maxMemoryMb: number } | undefined;
let instance: EngineExports | undefined;
let stderrFile: string | undefined;
let stderrFd: number | undefined;
/** The fixed clock and random stream of the call running now (undefined: the real ones). */
let fixedCall: { stream: SeedStream; timeNs: bigint } | undefined;
process.once('exit', () => {
  if (stderrFile !== undefined) rmSync(join(stderrFile, '..'), { recursive: true, force: true });
});

/** ": <line>" of the first line of a fatal error message, or "". */
function firstLine(text: string): string {
  const line = text.split('\n', 1)[0]?.trim() ?? '';
  return line === '' ? '' : `: ${line.slice(0, 200)}`;
}

/** The start of what the stopped instance wrote to stderr (Go's fatal error line comes first). */
function stderrHead(): string {
  try {
    return stderrFile === undefined ? '' : readFileSync(stderrFile, 'utf8').slice(0, 4096);
  } catch {
    return '';
  }
}

/** Sets where the engine is and its memory cap; drops a loaded instance so the next call uses them. */
export function configureGoEngine(next: EngineConfig): void {
  config = { ...next };
  compiled = undefined;
  instance = undefined;
}

/**
 * node:wasi, loaded on first use rather than imported: loading it makes Node print "WASI is an
 * experimental feature" to stderr, which every CLI command importing the renderers printed, and
 * every render process into the controller's log. Only that one warning is held back.
 */
function loadWasi(): typeof WasiClass {
  const emitWarning = process.emitWarning;
  process.emitWarning = ((warning: string | Error, ...rest: unknown[]) => {
    const text = typeof warning === 'string' ? warning : warning.message;
    if (text.startsWith('WASI is an experimental feature')) return;
    (emitWarning as (...a: unknown[]) => void).call(process, warning, ...rest);
  }) as typeof process.emitWarning;
  try {
    return (createRequire(import.meta.url)('node:wasi') as { WASI: typeof WasiClass }).WASI;
  } finally {
    process.emitWarning = emitWarning;
  }
}

/** Loads the module and starts an instance, once per process (again after a crash). */
function engine(): EngineExports | EngineFailure {
  if (instance !== undefined) return instance;
  try {
    const maxMemoryMb = config.maxMemoryMb ?? DEFAULT_ENGINE_MEMORY_MB;
    if (compiled === undefined) {
      let path = config.path;
      if (path === undefined) {
        const located = locateGoEngine();
        if ('error' in located) return { ok: false, error: located.error, engine: 'unavailable' };
        path = located.path;
      }
      const bytes = withMemoryMaximum(readFileSync(path), maxMemoryMb * 2 ** 20);
      compiled = { module: new Wasm.Module(bytes), maxMemoryMb };
    }
    const devNull = openSync('/dev/null', 'w');
    stderrFile ??= join(mkdtempSync(join(tmpdir(), 'stackflux-goengine-')), 'stderr');
    // Open while the instance lives (WASI writes to this descriptor); the previous one is closed.
    if (stderrFd !== undefined) closeSync(stderrFd);
    const stderr = openSync(stderrFile, 'w', 0o600);
    stderrFd = stderr;
    const WASI = loadWasi();
    const wasi = new WASI({
      version: 'preview1',
      args: ['goengine'],
      env: {},
      preopens: {},
      stdout: devNull,
      stderr,
      returnOnExit: true,
    });
    // random_get and the wall clock answer from the render's fixed seed and time during a call
    // that carries them (../determinism.ts).
    const imports = wasi.getImportObject() as Record<string, Record<string, (...a: never[]) => number>>;
    let memory: WasmMemory | undefined;
    const memoryOf = () => memory as WasmMemory;
    const fixedImports = Object.fromEntries(
      Object.entries(imports).map(([name, fns]) => [name, fixedWasiImports(fns, memoryOf, () => fixedCall)]),
    );
    const started = new Wasm.Instance(compiled.module, fixedImports);
    memory = (started.exports as unknown as EngineExports).memory;
    wasi.initialize(started as Parameters<WasiClass['initialize']>[0]);
    closeSync(devNull);
    instance = started.exports as unknown as EngineExports;
    return instance;
  } catch (err) {
    return {
      ok: false,
      error: `cannot start the Go engine: ${(err as Error).message}`,
      engine: 'unavailable',
    };
  }
}

/**
 * Loads the module and starts its instance now (a no-op when it runs): a render process does this
 * before a render's time budget starts, since compiling the module takes seconds on a loaded
 * machine and is no template's doing. Undefined when the engine runs, else why it cannot.
 */
export function loadGoEngine(): EngineFailure | undefined {
  const started = engine();
  return 'ok' in started ? (started as EngineFailure) : undefined;
}

/**
 * Runs one request; the response is parsed JSON. A response over maxOutputBytes is refused by the
 * engine before it is copied out. Never throws: an engine that runs out of its memory or stops
 * is dropped (the next call starts a fresh one) and the call fails.
 */
export function callEngine(
  request: object,
  maxOutputBytes: number,
  fixed?: FixedRender,
): Record<string, unknown> | EngineFailure {
  const e = engine();
  if ('ok' in e) return e;
  const body = Buffer.from(JSON.stringify(request));
  // A fresh stream per call: the same call with the same seed reads the same bytes.
  fixedCall =
    fixed !== undefined ? { stream: new SeedStream(fixed.seed), timeNs: timeNanos(fixed.time) } : undefined;
  try {
    const ptr = e.alloc(body.length);
    new Uint8Array(e.memory.buffer, ptr, body.length).set(body);
    const packed = BigInt.asUintN(
      64,
      e.call(ptr, body.length, Math.max(0, Math.min(maxOutputBytes, 0xffff_ffff))),
    );
    const resPtr = Number(packed >> 32n);
    const resLen = Number(packed & 0xffff_ffffn);
    if (resPtr === 0) throw new Error('the engine lost the request');
    const text = Buffer.from(e.memory.buffer, resPtr, resLen).toString('utf8');
    e.free(resPtr);
    return JSON.parse(text) as Record<string, unknown>;
  } catch (err) {
    // A Go fatal error (out of memory, a runtime panic outside template code) ends the instance.
    instance = undefined;
    const maxMb = compiled?.maxMemoryMb ?? DEFAULT_ENGINE_MEMORY_MB;
    if (/out of memory/.test(stderrHead()))
      return {
        ok: false,
        error: `rendering needs more than the engine's memory limit of ${maxMb} MiB`,
        engine: 'memory',
      };
    return {
      ok: false,
      error: `the Go engine stopped: ${(err as Error).message}${firstLine(stderrHead())}`,
      engine: 'crashed',
    };
  } finally {
    fixedCall = undefined;
  }
}
