// Bounded rendering (issue 11, defect 3; issue 22): addon renders run in a small pool of child
// processes, each with a time budget and a heap cap. A render that overruns is stopped by killing
// its process (a fresh one takes its place), so a hostile template costs one process for at most
// the budget and never blocks the event loop that renews the Lease and answers /healthz; other
// renders go on in the other processes. The result is a RenderFailure with reason LimitExceeded
// naming the file being rendered, the limit and its flag.
//
// Processes, not worker threads: a worker thread that runs out of heap can still abort the whole
// process (V8's heap-limit handling of a large allocation, e.g. flattening a huge rendered string,
// is fatal to every isolate), and a render must never take the controller down. A child process
// that runs out of heap dies alone. It costs a little more to start (once per idle period) and
// about the same per render.
//
// Processes start on demand and stop when idle: one serves a fan-out; a second (up to `workers`)
// starts only when every running one has spent `spareAfterMs` (1 s) on one render (a slow or stuck
// template), and one without work for `idleMs` is stopped (a converged fleet holds none).
//
// Fairness (issue 22): queued renders wait per namespace (the ClusterAddon's) and are taken
// round-robin across namespaces, so one tenant's slow renders do not hold up another's. Round-robin
// alone still lets a tenant's slow renders (each within the time budget) hold every process, so a
// quick render of another tenant waits for one of them to end: one further process is reserved for
// namespaces that have no render running, and a tenant can never hold it while another waits. A template
// that hits a limit `coolDownAfter` times in a row (per namespace, addon, the addon's files and the
// values it renders with) is not rendered again for `coolDownMs`: its renders fail at once with
// reason CoolingDown. So is the template with any values once `coolDownAfter` different values in a
// row hit a limit (a template slow whatever its values would otherwise be rendered to the limit
// K times per Cluster, and a tenant's many Clusters would keep the render processes and the CPU
// busy); one Cluster's hostile values alone cannot cool its neighbours down.
//
// Reconcilers stay pure and synchronous: withBoundedRenders runs one (or the offline renderer)
// with a renderer that answers from renders already done in the pool and notes the ones it lacks;
// those are rendered in the pool and the run is repeated until every render it asks for is known.
// The live controller (controllers/clusteraddon.ts) and `stackflux render` both use it.
import { type ChildProcess, fork } from 'node:child_process';
import { createHash } from 'node:crypto';
import { getPriority, setPriority } from 'node:os';
import { fileURLToPath } from 'node:url';
import { type GoEngineCall, type GoEngineResult, locateGoEngine } from './goengine/index.ts';
import { DEFAULT_RENDER_LIMITS, formatMs, type RenderLimits } from './limits.ts';
import { ADDON_ROOT } from './render.ts';
import {
  type AddonRenderer,
  type AddonRenderInput,
  isCsctlAddonInput,
  type RenderFailure,
  type RenderResult,
} from './types.ts';
import type { GoEngineRequest, RenderReply, RenderRequest } from './worker.ts';

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

const SPARE_AFTER_MS = 1_000;
const IDLE_MS = 30_000;
export const DEFAULT_COOL_DOWN_AFTER = 3;
export const DEFAULT_COOL_DOWN_MS = 5 * 60_000;
/** Namespaces whose last turn is remembered (one forgotten counts as never served). */
const SERVED_REMEMBERED = 4096;
/** Templates whose limit hits in a row are remembered. */
const STREAKS_REMEMBERED = 1024;
/** The tail of a render process's stderr kept to tell why it died (V8 prints a fatal OOM there). */
const STDERR_TAIL = 4096;
/**
 * How much lower the scheduling priority (nice value) of render processes is: below the controller's own thread, whose
 * Lease renewal, /healthz, fleet writes and git pushes must not queue for the CPU behind renders.
 */
export const RENDER_NICENESS = 10;
const OUT_OF_MEMORY = /heap out of memory|Allocation failed|invalid size error|out of memory/i;

const WORKER_PATH = fileURLToPath(
  new URL(`./worker.${import.meta.url.endsWith('.ts') ? 'ts' : 'js'}`, import.meta.url),
);

interface Job {
  id: number;
  /** An addon render, or else a Go engine call. */
  input?: AddonRenderInput;
  goEngine?: GoEngineCall;
  namespace: string;
  resolve: (r: RenderResult | GoEngineResult) => void;
  /** The template being rendered, as the process last said. */
  file?: string;
}

interface Slot {
  /** The reserved slot: renders only for namespaces with no render running in another slot. */
  reserved: boolean;
  child: ChildProcess | undefined;
  /** The process has loaded (a render's time budget starts when it is sent to a ready one). */
  ready: boolean;
  /** The process has loaded the Go engine (its first engine request gets ENGINE_LOAD_MS more). */
  engineLoaded: boolean;
  job: Job | undefined;
  timer: ReturnType<typeof setTimeout> | undefined;
  /** When the current render was sent to the process (undefined: none, or it is loading). */
  sentAt: number | undefined;
  idleTimer: ReturnType<typeof setTimeout> | undefined;
}

/** Limit hits in a row of one template, and until when it is not rendered. */
interface Streak {
  hits: number;
  last: string;
  until: number | undefined;
  /** Of a template's streak (any values): the values that hit a limit in a row. */
  values?: Set<string>;
}

/** Keys of a render's streaks: its template (namespace, addon, files) and that with its values. */
interface TemplateKeys {
  template: string;
  withValues: string;
}

/** Time a render process may take to load the Go engine, before a render's own budget starts. */
const ENGINE_LOAD_MS = 60_000;
/** Memory of the Go engine beyond the render limit: its runtime, Helm's and Kubernetes' tables. */
export const GO_ENGINE_BASE_MB = 256;

/** Where a job was when it hit a limit, for the message (the file the process last named wins). */
function jobPlace(job: Job | undefined): string {
  if (job?.goEngine !== undefined) return `the Go engine (${job.goEngine.op})`;
  return job?.input !== undefined ? addonPlace(job.input) : `${ADDON_ROOT}/`;
}

/** The folder of an addon in its release, for messages. */
function addonPlace(input: AddonRenderInput): string {
  return isCsctlAddonInput(input) ? input.chartPath : `${ADDON_ROOT}/${input.addon}/`;
}

function limitFailure(message: string): RenderFailure {
  return { ok: false, reason: 'LimitExceeded', message };
}

/**
 * A release tree is read-only once fetched (chart dependencies make a new tree), yet every render
 * of it took the addon's files out of it and hashed them again (6,000 times in a preview of 1,000
 * Clusters): per tree object, each addon's files are kept, so its renders share one Map and one
 * digest. A tree whose size changed anyway is filtered anew rather than trusted.
 */
const ownFiles = new WeakMap<ReadonlyMap<string, unknown>, { size: number; byKey: Map<string, unknown> }>();

function filesOf<T>(
  tree: ReadonlyMap<string, T>,
  key: string,
  wanted: (path: string) => boolean,
): Map<string, T> {
  let memo = ownFiles.get(tree);
  if (memo === undefined || memo.size !== tree.size) {
    memo = { size: tree.size, byKey: new Map() };
    ownFiles.set(tree, memo);
  }
  let files = memo.byKey.get(key) as Map<string, T> | undefined;
  if (files === undefined) {
    files = new Map([...tree].filter(([path]) => wanted(path)));
    memo.byKey.set(key, files);
  }
  return files;
}

/** The input with only the addon's own files: all a render reads, and cheap to post to a worker. */
export function slimInput(input: AddonRenderInput): AddonRenderInput {
  if (isCsctlAddonInput(input)) {
    const wanted = (path: string) => path.startsWith(input.chartPath) || path === input.valuesTemplate;
    const key = `${input.chartPath}\0${input.valuesTemplate ?? ''}`;
    return {
      ...input,
      tree: filesOf(input.tree, key, wanted),
      binary: filesOf(input.binary, key, wanted),
    };
  }
  const prefix = `${ADDON_ROOT}/${input.addon}/`;
  const tree = filesOf(input.tree, prefix, (path) => path.startsWith(prefix));
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

/** Digests of objects only read (a slim input's files, a release's stack.yaml), each computed once. */
const digests = new WeakMap<object, string>();

function digestOnce(o: unknown, compute: () => string): string {
  if (typeof o !== 'object' || o === null) return compute();
  let d = digests.get(o);
  if (d === undefined) {
    d = compute();
    digests.set(o, d);
  }
  return d;
}

/** A digest of a slim input's files, text and binary. */
function filesKey(slim: AddonRenderInput): string {
  const text = digestOnce(slim.tree, () => filesDigest(slim.tree, new Map()));
  if (!isCsctlAddonInput(slim)) return text;
  return `${text}:${digestOnce(slim.binary, () => filesDigest(new Map(), slim.binary))}`;
}

/** Identity of a render: equal keys render equally (renderAddon is pure). */
export function renderKey(slim: AddonRenderInput): string {
  if (isCsctlAddonInput(slim)) {
    return JSON.stringify([
      slim.format,
      slim.addon,
      slim.chartPath,
      slim.valuesTemplate ?? null,
      slim.kubernetesVersion,
      filesKey(slim),
      slim.cluster,
      slim.controlPlane ?? null,
      slim.infraCluster ?? null,
      slim.fixed ?? null,
    ]);
  }
  return JSON.stringify([
    slim.addon,
    digestOnce(slim.stack, () => createHash('sha256').update(JSON.stringify(slim.stack)).digest('hex')),
    filesKey(slim),
    slim.cluster,
    slim.controlPlane ?? null,
    slim.infraCluster ?? null,
    slim.clusterValues ?? null,
    slim.centralValues ?? null,
  ]);
}

/**
 * Identity of a template for its cool-down: the tenant, the addon, the addon's files and the values
 * it renders with. Not the Cluster object, which changes with every status update; with the values,
 * one Cluster's hostile per-cluster values cool down that Cluster's renders, not its neighbours'.
 */
function templateKeys(namespace: string, slim: AddonRenderInput): TemplateKeys {
  // A csctl addon's values come from the Cluster itself: its name stands for them (the object
  // changes with every status update).
  const values = createHash('sha256')
    .update(
      JSON.stringify(
        isCsctlAddonInput(slim)
          ? clusterIdOf(slim.cluster)
          : [slim.clusterValues ?? null, slim.centralValues ?? null],
      ),
    )
    .digest('hex');
  const template = `${namespace}/${slim.addon}/${filesKey(slim)}`;
  return { template, withValues: `${template}/${values}` };
}

/** A Cluster's namespace and name. */
function clusterIdOf(cluster: Record<string, unknown>): unknown[] {
  const meta = (cluster.metadata ?? {}) as { namespace?: unknown; name?: unknown };
  return [meta.namespace ?? null, meta.name ?? null];
}

/** A digest of files by path and content, text and binary. */
function filesDigest(text: ReadonlyMap<string, string>, binary: ReadonlyMap<string, Uint8Array>): string {
  // Every part behind its length: no two sets of files hash as one stream (content may hold NUL).
  const files = createHash('sha256');
  const part = (bytes: Uint8Array) => {
    files.update(`${bytes.byteLength}:`);
    files.update(bytes);
  };
  for (const [path, content] of text) {
    part(Buffer.from(path));
    part(Buffer.from(content));
  }
  files.update('binary:');
  for (const [path, content] of binary) {
    part(Buffer.from(path));
    part(content);
  }
  return files.digest('hex');
}

export class RenderPool {
  readonly limits: Readonly<RenderLimits>;
  private readonly slots: Slot[];
  /** Queued renders per namespace, in order of arrival of the namespace. */
  private readonly queues = new Map<string, Job[]>();
  /** The turn each namespace was last served at (the most recent last). */
  private readonly served = new Map<string, number>();
  private turn = 0;
  private enginePath = '';
  private nextId = 1;
  private closed = false;
  /** Renders stopped for their time budget / their memory, since start. */
  readonly stopped = { timeout: 0, memory: 0 };
  /** Render processes started and stopped for being idle, since start; renders refused cooling down. */
  readonly workerStats = { started: 0, idleStopped: 0, coolingDown: 0 };
  private readonly spareAfterMs: number;
  private readonly idleMs: number;
  private readonly coolDownAfter: number;
  private readonly coolDownMs: number;
  private readonly streaks = new Map<string, Streak>();
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
    this.idleMs = opts.idleMs ?? IDLE_MS;
    this.coolDownAfter = Math.max(1, opts.coolDownAfter ?? DEFAULT_COOL_DOWN_AFTER);
    this.coolDownMs = opts.coolDownMs ?? DEFAULT_COOL_DOWN_MS;
    this.slots = Array.from({ length: size + 1 }, (_, i) => ({
      reserved: i === size,
      engineLoaded: false,
      child: undefined,
      job: undefined,
      ready: false,
      timer: undefined,
      sentAt: undefined,
      idleTimer: undefined,
    }));
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
    const cooling = this.coolingDown(key.withValues, slim) ?? this.coolingDown(key.template, slim);
    if (cooling !== undefined) return Promise.resolve(cooling);
    return new Promise<RenderResult>((resolve) => {
      const job: Job = {
        id: this.nextId++,
        input: slim,
        namespace,
        resolve: (result) => {
          // An addon job is answered with a RenderResult only.
          this.noteResult(key, result as RenderResult);
          resolve(result as RenderResult);
        },
      };
      const queue = this.queues.get(namespace);
      if (queue !== undefined) queue.push(job);
      else this.queues.set(namespace, [job]);
      this.dispatch();
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
      const job: Job = {
        id: this.nextId++,
        goEngine: call,
        namespace,
        resolve: (result) => resolve(result as GoEngineResult | RenderFailure),
      };
      const queue = this.queues.get(namespace);
      if (queue !== undefined) queue.push(job);
      else this.queues.set(namespace, [job]);
      this.dispatch();
    });
  }

  /** The failure of a render of a template that is cooling down, or undefined. */
  private coolingDown(key: string, slim: AddonRenderInput): RenderFailure | undefined {
    const streak = this.streaks.get(key);
    if (streak?.until === undefined || Date.now() >= streak.until) return undefined;
    this.workerStats.coolingDown += 1;
    return {
      ok: false,
      reason: 'CoolingDown',
      message: `${addonPlace(slim)}: not rendered until ${new Date(streak.until).toISOString()}: its renders hit a limit ${streak.hits} times in a row${streak.values !== undefined ? ' with different values' : ''}, last: ${streak.last}`,
    };
  }

  /**
   * Counts limit hits in a row per template and values, and the different values in a row per
   * template; a render within the limits ends both streaks.
   */
  private noteResult(key: TemplateKeys, result: RenderResult): void {
    if (result.ok || result.reason !== 'LimitExceeded' || this.closed) {
      if (result.ok || result.reason !== 'CoolingDown') {
        this.streaks.delete(key.withValues);
        this.streaks.delete(key.template);
      }
      return;
    }
    this.countHit(key.withValues, result.message);
    this.countHit(key.template, result.message, key.withValues);
  }

  /** One limit hit on a streak; with `values`, the streak counts different values, not hits. */
  private countHit(key: string, message: string, values?: string): void {
    const streak = this.streaks.get(key) ?? { hits: 0, last: '', until: undefined };
    if (values !== undefined) {
      streak.values = streak.values ?? new Set();
      streak.values.add(values);
      streak.hits = streak.values.size;
    } else streak.hits += 1;
    streak.last = message;
    // A template's streak needs two different values at least: one Cluster's values alone never
    // cool its neighbours down.
    const after = values !== undefined ? Math.max(2, this.coolDownAfter) : this.coolDownAfter;
    if (streak.hits >= after) streak.until = Date.now() + this.coolDownMs;
    // Re-inserted: the map stays in order of last hit, and is bounded by dropping the oldest.
    this.streaks.delete(key);
    this.streaks.set(key, streak);
    if (this.streaks.size > STREAKS_REMEMBERED) {
      const oldest = this.streaks.keys().next();
      if (!oldest.done) this.streaks.delete(oldest.value);
    }
  }

  /** Terminates every process; queued renders end as failures. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.redispatch !== undefined) clearTimeout(this.redispatch);
    if (this.recheck !== undefined) clearImmediate(this.recheck);
    for (const queue of this.queues.values()) {
      for (const job of queue) job.resolve(limitFailure('the render pool is shut down'));
    }
    this.queues.clear();
    await Promise.all(
      this.slots.map(async (slot) => {
        if (slot.idleTimer !== undefined) clearTimeout(slot.idleTimer);
        this.finish(slot, limitFailure('the render pool is shut down'));
        const child = slot.child;
        slot.child = undefined;
        if (child !== undefined) await stop(child);
      }),
    );
  }

  /**
   * The next queued render: from the namespace served longest ago (one never served first, then
   * in order of arrival), so each namespace with renders waiting gets a turn in round-robin.
   */
  private take(eligible: (namespace: string) => boolean = () => true): Job | undefined {
    let pick: string | undefined;
    let pickServed = Number.POSITIVE_INFINITY;
    for (const namespace of this.queues.keys()) {
      if (!eligible(namespace)) continue;
      const served = this.served.get(namespace) ?? -1;
      if (served < pickServed) {
        pick = namespace;
        pickServed = served;
      }
    }
    if (pick === undefined) return undefined;
    const queue = this.queues.get(pick) as Job[];
    const job = queue.shift();
    if (queue.length === 0) this.queues.delete(pick);
    this.served.delete(pick);
    this.served.set(pick, this.turn++);
    if (this.served.size > SERVED_REMEMBERED) {
      const oldest = this.served.keys().next();
      if (!oldest.done) this.served.delete(oldest.value);
    }
    return job;
  }

  private get queued(): boolean {
    return this.queues.size > 0;
  }

  private dispatch(): void {
    if (this.closed) return;
    this.dispatchShared();
    this.dispatchReserved();
  }

  /** The reserved process takes a render of a namespace that has none running, if one waits. */
  private dispatchReserved(): void {
    const slot = this.slots.find((s) => s.reserved);
    if (slot === undefined || slot.job !== undefined || !this.queued) return;
    const rendering = new Set(this.slots.flatMap((s) => (s.job !== undefined ? [s.job.namespace] : [])));
    const job = this.take((namespace) => !rendering.has(namespace));
    if (job !== undefined) this.start(slot, job);
  }

  private dispatchShared(): void {
    const shared = this.slots.filter((s) => !s.reserved);
    // Running processes first.
    for (const slot of shared) {
      if (!this.queued) return;
      if (slot.job === undefined && slot.child !== undefined) this.start(slot, this.take() as Job);
    }
    // Then a new process: the first, or a spare once every running one is held by a slow render.
    for (const slot of shared) {
      if (!this.queued) return;
      if (slot.child !== undefined || slot.job !== undefined) continue;
      const held = this.heldForMs();
      if (held === undefined) {
        this.start(slot, this.take() as Job);
        continue;
      }
      if (held >= this.spareAfterMs) {
        if (this.repliesRead) {
          this.start(slot, this.take() as Job);
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

  private spawn(slot: Slot): ChildProcess {
    this.workerStats.started += 1;
    const child = fork(WORKER_PATH, [], {
      // The heap cap, and the image's small young generation (Dockerfile); not the controller's own
      // node flags (inspector, test runner). An OOM there kills that process only.
      execArgv: [`--max-old-space-size=${this.limits.maxMemoryMb}`, '--max-semi-space-size=4'],
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
    child.on('message', (reply: RenderReply) => {
      if (slot.child !== child) return;
      if (reply.type === 'ready') {
        slot.ready = true;
        if (slot.job !== undefined) this.begin(slot, slot.job);
        return;
      }
      const job = slot.job;
      if (job === undefined || reply.id !== job.id) return;
      if (reply.type === 'template') job.file = reply.file;
      else if (reply.type === 'engineLoaded') {
        slot.engineLoaded = true;
        slot.sentAt = performance.now();
        this.armBudget(slot, job, this.limits.timeoutMs);
      } else this.finish(slot, reply.result);
    });
    child.on('error', (err: Error) => {
      if (slot.child !== child) return;
      slot.child = undefined;
      child.kill('SIGKILL');
      this.finish(slot, limitFailure(`the render process failed: ${err.message}`));
    });
    // 'close', not 'exit': it comes after the last message and the last of stderr are read.
    child.on('close', (code, signal) => {
      if (slot.child !== child) return;
      slot.child = undefined;
      const job = slot.job;
      const where = job?.file ?? jobPlace(job);
      if (OUT_OF_MEMORY.test(stderr)) {
        this.stopped.memory += 1;
        this.finish(
          slot,
          limitFailure(
            `${where}: rendering needs more than the memory limit of ${this.limits.maxMemoryMb} MiB (--render-max-memory)`,
          ),
        );
      } else {
        this.finish(
          slot,
          limitFailure(
            `${where}: the render process exited unexpectedly (${signal ?? `exit code ${code ?? '?'}`})`,
          ),
        );
      }
    });
    setRef(child, false);
    return child;
  }

  private start(slot: Slot, job: Job): void {
    if (slot.idleTimer !== undefined) clearTimeout(slot.idleTimer);
    slot.idleTimer = undefined;
    if (slot.child === undefined) {
      slot.ready = false;
      slot.engineLoaded = false;
      slot.child = this.spawn(slot);
    }
    slot.job = job;
    setRef(slot.child, true);
    if (slot.ready) this.begin(slot, job);
  }

  /** Sends the job to the (loaded) process and starts its time budget. */
  private begin(slot: Slot, job: Job): void {
    const child = slot.child;
    if (child === undefined) return;
    const needsEngine =
      job.goEngine !== undefined || (job.input !== undefined && isCsctlAddonInput(job.input));
    // A process loading the Go engine is loading, not held by a slow render: a spare started now
    // would load the engine too (seconds of CPU and a few hundred MB each) while the first is
    // about to render quickly. Its render counts as sent once the engine is loaded.
    slot.sentAt = needsEngine && !slot.engineLoaded ? undefined : performance.now();
    // The engine's load is timed on its own (the process says when it is done, then the render's
    // budget starts afresh): a template cannot spend it, it ends before any template runs.
    this.armBudget(
      slot,
      job,
      this.limits.timeoutMs + (needsEngine && !slot.engineLoaded ? ENGINE_LOAD_MS : 0),
    );
    this.send(child, job);
  }

  /** (Re)starts the time budget of the job running in the slot: `ms` from now. */
  private armBudget(slot: Slot, job: Job, ms: number): void {
    const child = slot.child;
    if (child === undefined) return;
    if (slot.timer !== undefined) clearTimeout(slot.timer);
    slot.timer = setTimeout(() => {
      if (slot.job !== job) return;
      this.stopped.timeout += 1;
      // Killing is the only way to stop synchronous template code; a new process replaces it.
      slot.child = undefined;
      child.kill('SIGKILL');
      const where = job.file ?? jobPlace(job);
      this.finish(
        slot,
        limitFailure(
          `${where}: rendering took longer than the time budget of ${formatMs(this.limits.timeoutMs)} (--render-timeout) and was stopped`,
        ),
      );
    }, ms);
  }

  private send(child: ChildProcess, job: Job): void {
    if (job.goEngine !== undefined) {
      const request: GoEngineRequest = {
        id: job.id,
        goEngine: job.goEngine,
        maxOutputBytes: this.limits.maxOutputBytes,
        enginePath: this.enginePath,
        engineMemoryMb: this.limits.maxMemoryMb + GO_ENGINE_BASE_MB,
      };
      child.send(request);
      return;
    }
    const input = job.input as AddonRenderInput;
    const request: RenderRequest = {
      id: job.id,
      input,
      maxOutputBytes: this.limits.maxOutputBytes,
      ...(isCsctlAddonInput(input)
        ? { engine: { path: this.enginePath, memoryMb: this.limits.maxMemoryMb + GO_ENGINE_BASE_MB } }
        : {}),
    };
    child.send(request);
  }

  private finish(slot: Slot, result: RenderResult | GoEngineResult): void {
    const job = slot.job;
    if (slot.timer !== undefined) clearTimeout(slot.timer);
    slot.timer = undefined;
    slot.sentAt = undefined;
    slot.job = undefined;
    if (slot.child !== undefined) setRef(slot.child, false);
    if (job !== undefined) job.resolve(result);
    if (this.closed) return;
    this.dispatch();
    if (slot.job === undefined && slot.child !== undefined) this.stopWhenIdle(slot);
  }

  /** Stops the slot's process if it gets no render within idleMs. */
  private stopWhenIdle(slot: Slot): void {
    if (slot.idleTimer !== undefined) clearTimeout(slot.idleTimer);
    const child = slot.child;
    slot.idleTimer = setTimeout(() => {
      slot.idleTimer = undefined;
      if (slot.job !== undefined || slot.child !== child || child === undefined) return;
      slot.child = undefined;
      slot.ready = false;
      this.workerStats.idleStopped += 1;
      void stop(child);
    }, this.idleMs);
    slot.idleTimer.unref();
  }
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
function setRef(child: ChildProcess, ref: boolean): void {
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
async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.ref(); // held until it is gone
  child.kill('SIGKILL');
  await gone;
}

/**
 * Bytes of csctl render output a RenderCache keeps (default): its files' text as held in memory
 * (UTF-16); their parsed objects take about as much again.
 */
export const RENDER_CACHE_BYTES = 32 * 2 ** 20;

/**
 * Successful csctl addon renders kept across reconciles, by render identity (renderKey), least
 * recently used dropped first, bounded by the size of their output. A csctl render is Helm's engine
 * in a render process (milliseconds of CPU each, against well under one for a native addon), and a
 * Cluster is reconciled several times while nothing it renders from changes: in a fan-out again
 * once its fleet batch is pushed, and on the watch events of its own writes. Renders are pure, so
 * an equal key renders equally; failures are not kept (a limit hit depends on the moment). Native
 * renders are not kept: they cost less than keeping them would.
 */
export class RenderCache {
  /** Renders answered from the cache, since start. */
  hits = 0;
  private bytes = 0;
  private readonly entries = new Map<string, { result: RenderResult; bytes: number }>();
  private readonly maxBytes: number;

  constructor(maxBytes = RENDER_CACHE_BYTES) {
    this.maxBytes = maxBytes;
  }

  get size(): number {
    return this.entries.size;
  }

  /** The kept result of the render with this key (renderKey of its slim input), or undefined. */
  get(key: string): RenderResult | undefined {
    const id = cacheId(key);
    const entry = this.entries.get(id);
    if (entry === undefined) return undefined;
    this.entries.delete(id);
    this.entries.set(id, entry);
    this.hits += 1;
    return entry.result;
  }

  /** Keeps a successful csctl render's result; others, and one larger than the whole cache, are not kept. */
  set(key: string, slim: AddonRenderInput, result: RenderResult): void {
    if (!result.ok || !isCsctlAddonInput(slim)) return;
    let bytes = 0;
    for (const [path, text] of result.files) bytes += 2 * (path.length + text.length);
    if (bytes > this.maxBytes) return;
    const id = cacheId(key);
    const previous = this.entries.get(id);
    if (previous !== undefined) {
      this.entries.delete(id);
      this.bytes -= previous.bytes;
    }
    this.entries.set(id, { result, bytes });
    this.bytes += bytes;
    for (const [oldest, entry] of this.entries) {
      if (this.bytes <= this.maxBytes) break;
      this.entries.delete(oldest);
      this.bytes -= entry.bytes;
    }
  }
}

/** A render key as a short id: the key holds the addon's files and the Cluster. */
function cacheId(key: string): string {
  return createHash('sha256').update(key).digest('base64');
}

const PENDING: RenderFailure = { ok: false, reason: 'TemplateError', message: 'render pending' };
const MAX_ROUNDS = 16;

/**
 * Runs `run` (a pure reconcile or the offline renderer) with every addon render done in `pool`:
 * each round answers the renders already done and collects the others, which are then rendered in
 * the pool (in parallel); the round whose renders were all known is the result. An error thrown by
 * a round that lacked renders is not the result (the placeholder may have caused it). Calls that
 * pass the same `done` map (e.g. the passes of one reconcile) render each input once. `request`
 * names who asks (the namespace the renders queue in); renders kept in `cache` (across reconciles)
 * are not rendered again.
 */
export async function withBoundedRenders<T>(
  pool: RenderPool,
  run: (render: AddonRenderer) => T,
  done: Map<string, RenderResult> = new Map(),
  request: RenderRequestOptions = {},
  cache?: RenderCache,
): Promise<T> {
  return untilSettled(
    () => {
      const missing = new Map<string, AddonRenderInput>();
      const render: AddonRenderer = (input) => {
        const slim = slimInput(input);
        const key = renderKey(slim);
        const known = done.get(key) ?? cache?.get(key);
        if (known !== undefined) {
          done.set(key, known);
          return known;
        }
        missing.set(key, slim);
        return PENDING;
      };
      return { missing, run: () => run(render) };
    },
    async (missing) => {
      const rendered = await Promise.all(
        [...missing].map(async ([key, slim]) => [key, slim, await pool.render(slim, request)] as const),
      );
      for (const [key, slim, r] of rendered) {
        done.set(key, r);
        cache?.set(key, slim, r);
      }
    },
    'addon renders',
  );
}

/**
 * Runs a round (a pure, synchronous run that records what it lacked in `missing`) until one lacks
 * nothing, answering what each asked for in between. An error thrown by a round that lacked
 * answers is not the result (a placeholder may have caused it).
 */
async function untilSettled<T, C>(
  round: () => { missing: ReadonlyMap<string, C>; run: () => T },
  answer: (missing: ReadonlyMap<string, C>) => Promise<void>,
  what: string,
): Promise<T> {
  for (let i = 0; i < MAX_ROUNDS; i++) {
    const { missing, run } = round();
    let result: T | undefined;
    let error: unknown;
    let failed = false;
    try {
      result = run();
    } catch (err) {
      failed = true;
      error = err;
    }
    if (missing.size === 0) {
      if (failed) throw error;
      return result as T;
    }
    await answer(missing);
  }
  throw new Error(`${what} did not settle after ${MAX_ROUNDS} rounds`);
}

const ENGINE_PENDING: RenderFailure = {
  ok: false,
  reason: 'TemplateError',
  message: 'Go engine call pending',
};

/** A stable key of one Go engine call (binary chart files by content). */
function goEngineCallKey(call: GoEngineCall): string {
  return createHash('sha256')
    .update(
      JSON.stringify(call, (_, v: unknown) => {
        if (v instanceof Uint8Array) return `b64:${Buffer.from(v).toString('base64')}`;
        if (v instanceof Map) return [...v].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
        return v;
      }),
    )
    .digest('hex');
}

/** A Go engine that answers the calls in `done` and collects the others in `missing`. */
export function goEngineMemo(done: ReadonlyMap<string, GoEngineResult | RenderFailure>): {
  engine: (call: GoEngineCall) => GoEngineResult | RenderFailure;
  missing: Map<string, GoEngineCall>;
} {
  const missing = new Map<string, GoEngineCall>();
  const engine = (call: GoEngineCall): GoEngineResult | RenderFailure => {
    const key = goEngineCallKey(call);
    const known = done.get(key);
    if (known !== undefined) return known;
    missing.set(key, call);
    return ENGINE_PENDING;
  };
  return { engine, missing };
}

/** Runs the `missing` calls in `pool` (in parallel) and records their answers in `done`. */
export async function answerGoEngineCalls(
  pool: RenderPool,
  missing: ReadonlyMap<string, GoEngineCall>,
  done: Map<string, GoEngineResult | RenderFailure>,
  request: RenderRequestOptions = {},
): Promise<void> {
  const answered = await Promise.all(
    [...missing].map(async ([key, call]) => [key, await pool.goEngine(call, request)] as const),
  );
  for (const [key, r] of answered) done.set(key, r);
}

/**
 * withBoundedRenders for Go engine calls: runs `run` (pure and synchronous) with every Go engine
 * call answered by `pool` (time budget, output and memory caps), re-running it until every call it
 * makes is known. The live controller and the offline renderer render a csctl cluster-class
 * through these, so both run the same code under the same limits.
 */
export async function withBoundedGoEngine<T>(
  pool: RenderPool,
  run: (engine: (call: GoEngineCall) => GoEngineResult | RenderFailure) => T,
  request: RenderRequestOptions = {},
  done: Map<string, GoEngineResult | RenderFailure> = new Map(),
): Promise<T> {
  return untilSettled(
    () => {
      const { engine, missing } = goEngineMemo(done);
      return { missing, run: () => run(engine) };
    },
    (missing) => answerGoEngineCalls(pool, missing, done, request),
    'Go engine calls',
  );
}

/** Passes before every Go engine call a run makes is answered. */
const MAX_ENGINE_PASSES = 16;

/**
 * Runs `run` (pure and synchronous) with every addon render and every Go engine call answered by
 * `pool`: unknown Go engine calls are answered between passes until a pass knows them all.
 * `settled()` says, inside a pass, whether every Go engine call of it so far was known.
 */
export async function withPooledRendering<T>(
  pool: RenderPool,
  run: (
    render: AddonRenderer,
    engine: (call: GoEngineCall) => GoEngineResult | RenderFailure,
    settled: () => boolean,
  ) => T,
  request: RenderRequestOptions = {},
): Promise<T> {
  const engineDone = new Map<string, GoEngineResult | RenderFailure>();
  for (let pass = 0; ; pass++) {
    const { engine, missing } = goEngineMemo(engineDone);
    const output = await withBoundedRenders(
      pool,
      (render) => run(render, engine, () => missing.size === 0),
      new Map(),
      request,
    );
    if (missing.size === 0) return output;
    if (pass >= MAX_ENGINE_PASSES) throw new Error('Go engine calls did not settle');
    await answerGoEngineCalls(pool, missing, engineDone, request);
  }
}
