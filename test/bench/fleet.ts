// `npm run bench -- fleet`: stackflux at fleet scale against the real hack/testenv (issue 10).
// `stackflux run` is a child process (its CPU from /proc/<pid>/stat, peak RSS from VmHWM); the
// bench watches the API with informers of its own and reads the fleet repository with git.
//
// Per N (--clusters 100,1000), in a namespace of its own, Flux STOPPED (stackflux
// timed alone), one ClusterStack with releases v1 and v2 of stacks/docker-ferrol-1-30:
//  fanout   N Cluster API v1beta2 Clusters (topology classRef = the v1 ClusterClass, the status a
//           Cluster API controller would write) + <name>-kubeconfig Secrets exist, then stackflux
//           starts: time until every ClusterAddon, every addon Kustomization and the GitRepository
//           each one reads exist and the fleet holds every Kustomization's path; fleet pushes,
//           CPU seconds, peak RSS, API requests. BASELINE in the same run: a bare writer that
//           server-side-applies the same final objects (another namespace) with the same
//           concurrency and client rate limit, plus one push of the same refs (git push --mirror).
//  steady   N converged: CPU seconds and API requests per minute (stackflux's own count from its
//           /metrics when it exports rest_client_requests_total, and the API server's
//           apiserver_request_total delta, which counts every client).
//  change   one Cluster's pod CIDR changed: time until the new CIDR is in the fleet, pushes, writes.
//  release  every Cluster moved to v2 (v2 changes a cni value, so every Cluster's files change):
//           time until every ClusterAddon reports v2 and the fleet holds v2's files; pushes, RSS.
// Order: the Flux scenario and the writer alone first, then each fleet size (a size whose fan-out
// runs out of --timeout-minutes records what it reached: peak RSS, requests, objects so far).
// --flux-clusters N (e.g. 200): fan-out of N, then kustomize-controller runs until every addon
// Kustomization is Ready; one Cluster's pod CIDR changes: how many Kustomizations re-applied (their
// lastAppliedRevision moved) and the time until the new CIDR is in the workload cluster.
// --writer-clusters 100,10000: the fleet writer alone (fleet-writer.ts's benchWriter), if present.
// --stack csctl|both: the fan-out (and steady state) of the cluster-stack-operator stack
// stacks/docker-csoferrol-1-30 too, cut as csctl tags (docker-csoferrol-1-30-v1, v2) with its
// Clusters of ClusterClass docker-csoferrol-1-30-v1: each addon's Go-template values and `helm
// template` of its chart in the render processes. With both, per N the native stack and then the
// csctl one, each in a namespace of its own, and the ratio csctl/native of the fan-out time with
// the target line "csctl fan-out within 1.2x of native" (issue 23).
//
// The layout is read from the objects, not assumed: a Kustomization's sourceRef names its
// GitRepository, whose spec.ref.branch and the Kustomization's spec.path locate its files. So the
// same harness measures one fleet branch per namespace and one branch per Cluster.
// Environment: the hack/testenv named by STACKFLUX_TESTENV_DIR when running, else one of its own.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { API_VERSION, LABEL_ADDON, LABEL_CLUSTER } from '../../controller/api/meta.ts';
import { locateGoEngine } from '../../controller/rendering/goengine/index.ts';
import { KubeClient, type KubeObject, loadKubeConfig } from '../../controller/runtime/client.ts';
import { Informer, stripManagedFields } from '../../controller/runtime/informer.ts';
import { installCrds } from '../../hack/lib/crds.ts';
import {
  createRepo,
  down,
  type Endpoints,
  isRunning,
  kubeRequest,
  readEndpoints,
  startComponent,
  stopComponent,
  TESTENV_SOURCE_NETWORKS,
  up,
} from '../../hack/lib/testenv.ts';
import {
  csoferrolClusterStack,
  csoferrolTag,
  cutCsctlRelease,
  servedClusterClass,
} from '../support/csctl.ts';
import {
  CAPI,
  cutRelease,
  ferrolStackAt,
  freePort,
  git,
  initRepo,
  push,
  ROOT,
  releaseControllerHolds,
} from '../support/e2e.ts';
import { clusterName, createClusters, pool } from '../support/fanout.ts';
import { stackInputs } from './render.ts';

const KUSTOMIZE = 'kustomize.toolkit.fluxcd.io/v1';
const SOURCE = 'source.toolkit.fluxcd.io/v1';
const KC = 'kustomize-controller';
// Flux stopped while stackflux is timed alone: source-controller would otherwise fetch every new
// GitRepository of the stackflux run (its branches exist) but not the baseline's (no fleet Secret
// in its namespace), and those fetches and status writes share the API server and the 2 cores.
const SC = 'source-controller';
const tag = (v: string): string => `docker-ferrol-1-30-${v}`;
/** The stacks a fleet can be made of: stackflux's own format, and the cluster-stack-operator's. */
type StackKind = 'native' | 'csctl';
/** csctl's fan-out may take this much longer than native's (issue 23). */
const CSCTL_FANOUT_TARGET = 1.2;
const log = (m: string): void => {
  process.stderr.write(`bench fleet ${new Date().toISOString().slice(11, 19)}: ${m}\n`);
};
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const now = (): number => performance.now();
const secs = (ms: number): number => Math.round(ms / 10) / 100;

const usage = `Usage: npm run bench -- fleet [flags]
  --clusters LIST         fleet sizes, comma separated (default 100)
  --scenarios LIST        of fanout,steady,change,release (default all; fanout always runs)
  --flux-clusters N       also the Flux scenario with N Clusters (default 0: skipped)
  --writer-clusters LIST  also the fleet writer alone at these sizes (needs test/bench/fleet-writer.ts)
  --qps Q --burst B       client rate limit of stackflux AND the baseline (default 50 / 300)
  --concurrency C         stackflux --concurrency and the baseline's writers (default 4)
  --steady-seconds S      length of the steady-state window (default 60)
  --source DIR            the checkout to measure, compiled like the container image (default this one)
  --stackflux FILE        run this bin/stackflux.js as it is instead (e.g. TypeScript from a checkout)
  --out FILE              JSON results (default bench-results/fleet-<date>.json)
  --timeout-minutes M     give up on one wait after M minutes (default 30)
  --stack native|csctl|both
                          the stack of the fleet (default native): csctl is stacks/docker-csoferrol-1-30
                          cut as csctl tags (fanout and steady only); both runs native then csctl per N
                          and reports csctl fan-out / native fan-out against the 1.2x target
  --no-baseline           skip the bare writer (e.g. a run for memory figures whose baseline is
                          another run's at the same rate limit)
`;

export interface Options {
  clusters: number[];
  scenarios: Set<string>;
  fluxClusters: number;
  writerClusters: number[];
  qps: number;
  burst: number;
  concurrency: number;
  steadySeconds: number;
  stackflux: string;
  source: string;
  out: string;
  timeoutMs: number;
  baseline: boolean;
  stacks: StackKind[];
}

function numbers(text: string): number[] {
  return text
    .split(',')
    .filter((s) => s.trim() !== '')
    .map((s) => {
      const n = Number(s.replaceAll('_', ''));
      if (!Number.isInteger(n) || n < 1) throw new Error(`not a positive integer: ${s}`);
      return n;
    });
}

/** The fleet bench's flags; another bench built on the fleet (preview.ts) gives its own defaults. */
export function options(
  argv: string[],
  defaults: { clusters: string; outPrefix: string } = { clusters: '100', outPrefix: 'fleet' },
): Options | undefined {
  const { values } = parseArgs({
    args: argv,
    options: {
      clusters: { type: 'string', default: defaults.clusters },
      scenarios: { type: 'string', default: 'fanout,steady,change,release' },
      'flux-clusters': { type: 'string', default: '0' },
      'writer-clusters': { type: 'string', default: '' },
      qps: { type: 'string', default: '50' },
      burst: { type: 'string', default: '300' },
      concurrency: { type: 'string', default: '4' },
      'steady-seconds': { type: 'string', default: '60' },
      'no-baseline': { type: 'boolean', default: false },
      source: { type: 'string', default: ROOT },
      stackflux: { type: 'string', default: '' },
      out: { type: 'string', default: '' },
      'timeout-minutes': { type: 'string', default: '30' },
      stack: { type: 'string', default: 'native' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) return undefined;
  const stacks: Record<string, StackKind[]> = {
    native: ['native'],
    csctl: ['csctl'],
    both: ['native', 'csctl'],
  };
  const stack = stacks[values.stack];
  if (stack === undefined) throw new Error(`--stack ${values.stack}: one of native, csctl, both`);
  const date = new Date().toISOString().replaceAll(':', '').slice(0, 15);
  return {
    clusters: numbers(values.clusters),
    scenarios: new Set(values.scenarios.split(',').map((s) => s.trim())),
    fluxClusters: Number(values['flux-clusters']),
    writerClusters: numbers(values['writer-clusters']),
    qps: Number(values.qps),
    burst: Number(values.burst),
    concurrency: Number(values.concurrency),
    steadySeconds: Number(values['steady-seconds']),
    stackflux: values.stackflux,
    source: values.source,
    out: values.out || join(ROOT, 'bench-results', `${defaults.outPrefix}-${date}.json`),
    timeoutMs: Number(values['timeout-minutes']) * 60_000,
    baseline: values['no-baseline'] !== true,
    stacks: stack,
  };
}

/**
 * Compiles the checkout `source` into `into` laid out like the container image (dist/, bin/,
 * package.json, flux-templates/, crds/, node_modules/): what ships runs JavaScript, not the
 * TypeScript that Node strips at load time (which costs memory of its own). Returns its bin.
 */
export function buildApp(source: string, into: string): string {
  log(`compiling ${source} into ${into}…`);
  const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  // A bare snapshot (git archive) compiles against this checkout's dependencies.
  if (!existsSync(join(source, 'node_modules')))
    symlinkSync(join(ROOT, 'node_modules'), join(source, 'node_modules'));
  execFileSync(
    process.execPath,
    [tsc, '-p', join(source, 'tsconfig.build.json'), '--outDir', join(into, 'dist')],
    {
      cwd: source,
      stdio: 'inherit',
    },
  );
  cpSync(join(source, 'bin'), join(into, 'bin'), { recursive: true });
  cpSync(join(source, 'package.json'), join(into, 'package.json'));
  for (const d of ['flux-templates', 'crds']) symlinkSync(join(source, d), join(into, d));
  const modules = existsSync(join(source, 'node_modules'))
    ? join(source, 'node_modules')
    : join(ROOT, 'node_modules');
  symlinkSync(modules, join(into, 'node_modules'));
  return join(into, 'bin', 'stackflux.js');
}

// --- the measured process ---------------------------------------------------------------------
const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;

/** CPU seconds of a process: its own, and of its reaped children (git). */
export function cpuSeconds(pid: number): { self: number; children: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const n = (i: number): number => Number(f[i]) / CLK_TCK;
  // Fields 14–17 of proc(5) (utime, stime, cutime, cstime); f[0] is field 3.
  return { self: n(11) + n(12), children: n(13) + n(14) };
}

/**
 * CPU seconds of the render processes of stackflux `pid` (its node children), sampled every second:
 * one stopped for being idle is gone from /proc by the end (its CPU then counts in the reaped
 * children's, with git's), so each process's last sample counts. `total` is undefined where the
 * kernel lists no children.
 */
export class RenderCpuSampler {
  private readonly seen = new Map<number, number>();
  private listed = false;
  private readonly timer: ReturnType<typeof setInterval>;
  private readonly pid: number;

  constructor(pid: number) {
    this.pid = pid;
    this.timer = setInterval(() => this.sample(), 1_000);
    this.sample();
  }

  sample(): void {
    let children: string;
    try {
      children = readFileSync(`/proc/${this.pid}/task/${this.pid}/children`, 'utf8');
    } catch {
      return;
    }
    this.listed = true;
    for (const child of children.trim().split(/\s+/).filter(Boolean).map(Number)) {
      try {
        if (!readFileSync(`/proc/${child}/cmdline`, 'utf8').includes('worker.')) continue;
        this.seen.set(child, cpuSeconds(child).self);
      } catch {
        // gone meanwhile
      }
    }
  }

  /** Stops sampling; the CPU seconds of every render process seen. */
  total(): number | undefined {
    clearInterval(this.timer);
    this.sample();
    return this.listed ? [...this.seen.values()].reduce((a, b) => a + b, 0) : undefined;
  }
}

/** Peak (VmHWM) and current (VmRSS) resident memory in MB. */
export function memoryMb(pid: number): { peak: number; rss: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (k: string): number => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? 0);
  return { peak: Math.round(kb('VmHWM') / 1024), rss: Math.round(kb('VmRSS') / 1024) };
}

/** Resets VmHWM (proc(5) clear_refs "5") so the next peak is one scenario's. */
function resetPeak(pid: number): void {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
  } catch {}
}

/**
 * The node flags the container image starts stackflux with (the Dockerfile's ENTRYPOINT, between
 * "node" and the script), so the bench measures the process as it ships.
 */
export function imageNodeFlags(dockerfile: string): string[] {
  const line = dockerfile.split('\n').find((l) => l.startsWith('ENTRYPOINT '));
  if (line === undefined) return [];
  const argv = JSON.parse(line.slice('ENTRYPOINT '.length)) as string[];
  const script = argv.findIndex((a) => a.endsWith('stackflux.js'));
  return argv.slice(1, script < 0 ? 1 : script).filter((a) => a.startsWith('--'));
}

/** One sample of a stackflux process's memory, MB (see StackfluxProcess.takeLargestSample). */
export interface MemorySample {
  rssMb: number;
  heapTotalMb: number;
  heapUsedMb: number;
  newSpaceMb: number;
  externalMb: number;
  otherMb: number;
}

/** The image's glibc malloc settings: every `ENV MALLOC_…=N` line of the Dockerfile. */
export function imageMallocEnv(dockerfile: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const m of dockerfile.matchAll(/^ENV (MALLOC_[A-Z_]+)=(\d+)\s*$/gm))
    env[m[1] as string] = m[2] as string;
  return env;
}

export class StackfluxProcess {
  child: ChildProcess | undefined;
  metricsUrl = '';
  /** /healthz of the running process (its --health-addr). */
  healthUrl = '';
  startedAt = 0;
  readyMs = 0;

  private readonly bin: string;
  private readonly args: string[];
  private readonly logFile: string;
  private readonly nodeFlags: string[];
  private sampler: ReturnType<typeof setInterval> | undefined;
  private largest: MemorySample | undefined;

  private readonly env: Record<string, string>;

  constructor(
    bin: string,
    args: string[],
    logFile: string,
    nodeFlags: string[] = [],
    env: Record<string, string> = {},
  ) {
    this.bin = bin;
    this.args = args;
    this.logFile = logFile;
    this.nodeFlags = nodeFlags;
    this.env = env;
  }

  get pid(): number {
    const pid = this.child?.pid;
    if (pid === undefined) throw new Error('stackflux is not running');
    return pid;
  }

  async start(): Promise<void> {
    const [metrics, health] = [await freePort(), await freePort()];
    this.metricsUrl = `http://127.0.0.1:${metrics}/metrics`;
    this.healthUrl = `http://127.0.0.1:${health}/healthz`;
    const fd = openSync(this.logFile, 'a');
    this.startedAt = now();
    const child = spawn(
      process.execPath,
      [
        ...this.nodeFlags,
        this.bin,
        'run',
        `--metrics-addr=127.0.0.1:${metrics}`,
        `--health-addr=127.0.0.1:${health}`,
        ...this.args,
      ],
      {
        cwd: ROOT,
        stdio: ['ignore', fd, fd],
        // The test environment's servers are on 127.0.0.1 (hack/lib/testenv.ts envVars).
        env: { STACKFLUX_ALLOW_SOURCE_NETWORKS: TESTENV_SOURCE_NETWORKS, ...process.env, ...this.env },
      },
    );
    this.child = child;
    for (;;) {
      // A process killed by a signal has no exit code, only a signal code.
      if (child.exitCode !== null || child.signalCode !== null)
        throw new Error(`stackflux exited (${child.exitCode ?? child.signalCode}); see ${this.logFile}`);
      const ok = await fetch(`http://127.0.0.1:${health}/readyz`)
        .then((r) => r.ok)
        .catch(() => false);
      if (ok) break;
      await sleep(100);
    }
    this.readyMs = now() - this.startedAt;
    this.sampler = setInterval(() => void this.sample(), 2_000);
  }

  /**
   * What the process was made of when its RSS was largest since the last call (sampled every 2 s):
   * RSS, the main thread's V8 heap (total, used, young generation), memory outside V8 that V8
   * knows of (external: Buffers), and the rest (render workers' heaps, native allocations).
   */
  takeLargestSample(): MemorySample | undefined {
    const s = this.largest;
    this.largest = undefined;
    return s;
  }

  private async sample(): Promise<void> {
    const child = this.child;
    if (child?.pid === undefined || child.exitCode !== null) return;
    let rssMb: number;
    try {
      rssMb = memoryMb(child.pid).rss;
    } catch {
      return;
    }
    if (this.largest !== undefined && rssMb <= this.largest.rssMb) return;
    const text = await fetch(this.metricsUrl, { signal: AbortSignal.timeout(1_500) })
      .then((r) => r.text())
      .catch(() => '');
    const mb = (re: RegExp): number => Math.round(Number(re.exec(text)?.[1] ?? Number.NaN) / 1048576);
    const heapTotalMb = mb(/^nodejs_heap_size_total_bytes (\S+)$/m);
    const externalMb = mb(/^nodejs_external_memory_bytes (\S+)$/m);
    this.largest = {
      rssMb,
      heapTotalMb,
      heapUsedMb: mb(/^nodejs_heap_size_used_bytes (\S+)$/m),
      newSpaceMb: mb(/^nodejs_heap_space_size_total_bytes\{space="new"\} (\S+)$/m),
      externalMb,
      otherMb: rssMb - heapTotalMb - externalMb,
    };
  }

  /** rest_client_requests_total by method (undefined when this stackflux does not export it). */
  async requests(): Promise<Record<string, number> | undefined> {
    const text = await fetch(this.metricsUrl).then((r) => r.text());
    const out: Record<string, number> = {};
    let found = false;
    for (const m of text.matchAll(/^rest_client_requests_total\{([^}]*)\} (\S+)$/gm)) {
      found = true;
      const method = /method="([^"]*)"/.exec(m[1] ?? '')?.[1] ?? '?';
      out[method] = (out[method] ?? 0) + Number(m[2]);
    }
    // Writes by resource ("PATCH clusteraddons/status"), when this stackflux exports them.
    for (const m of text.matchAll(/^stackflux_api_requests_total\{([^}]*)\} (\S+)$/gm)) {
      const method = /method="([^"]*)"/.exec(m[1] ?? '')?.[1] ?? '?';
      const resource = /resource="([^"]*)"/.exec(m[1] ?? '')?.[1] ?? '?';
      if (WRITES.includes(method)) out[`${method} ${resource}`] = Number(m[2]);
    }
    return found ? out : undefined;
  }

  /** Items waiting in every controller's work queue (workqueue_depth), undefined when not exported. */
  async queueDepth(): Promise<number | undefined> {
    const text = await fetch(this.metricsUrl)
      .then((r) => r.text())
      .catch(() => '');
    const depths = [...text.matchAll(/^workqueue_depth\{[^}]*\} (\S+)$/gm)].map((m) => Number(m[1]));
    return depths.length === 0 ? undefined : depths.reduce((a, b) => a + b, 0);
  }

  /** V8 heap in MB from /metrics (prom-client's nodejs_* gauges): used, and the young generation's size. */
  async heap(): Promise<{ heapUsedMb: number; newSpaceMb: number } | undefined> {
    const text = await fetch(this.metricsUrl)
      .then((r) => r.text())
      .catch(() => '');
    const mb = (re: RegExp): number | undefined => {
      const v = re.exec(text)?.[1];
      return v === undefined ? undefined : Math.round(Number(v) / 1048576);
    };
    const heapUsedMb = mb(/^nodejs_heap_size_used_bytes (\S+)$/m);
    const newSpaceMb = mb(/^nodejs_heap_space_size_total_bytes\{space="new"\} (\S+)$/m);
    return heapUsedMb === undefined || newSpaceMb === undefined ? undefined : { heapUsedMb, newSpaceMb };
  }

  async stop(): Promise<void> {
    if (this.sampler !== undefined) clearInterval(this.sampler);
    this.sampler = undefined;
    const child = this.child;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await Promise.race([exited, sleep(35_000)]);
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}

const WRITES = ['POST', 'PUT', 'PATCH', 'DELETE'];
function diffRequests(
  a: Record<string, number> | undefined,
  b: Record<string, number> | undefined,
): { total: number; writes: number; writesByResource: Record<string, number> } | undefined {
  if (a === undefined || b === undefined) return undefined;
  let total = 0;
  let writes = 0;
  const writesByResource: Record<string, number> = {};
  for (const [k, v] of Object.entries(b)) {
    const d = v - (a[k] ?? 0);
    if (k.includes(' ')) {
      if (d > 0) writesByResource[k] = d;
      continue;
    }
    if (k === 'WATCH') continue;
    total += d;
    if (WRITES.includes(k)) writes += d;
  }
  return { total, writes, writesByResource };
}

// --- the environment --------------------------------------------------------------------------
export interface Env {
  e: Endpoints;
  owned: boolean;
  client: KubeClient;
  workloadKubeconfig: string;
}

export async function environment(): Promise<Env> {
  let dir = process.env.STACKFLUX_TESTENV_DIR;
  let owned = false;
  if (dir === undefined || !isRunning(dir)) {
    dir = mkdtempSync(join(tmpdir(), 'stackflux-bench-fleet-'));
    log('no running STACKFLUX_TESTENV_DIR; starting hack/testenv for this run…');
    await up(dir, log);
    owned = true;
  }
  const e = readEndpoints(dir);
  if (e === undefined) throw new Error(`cannot read the test environment in ${dir}`);
  // The bench's own reads and setup writes must not be what limits anything.
  const client = new KubeClient(loadKubeConfig({ kubeconfig: e.kubeconfig }), { qps: 2000, burst: 2000 });
  await installCrds(client);
  return { e, owned, client, workloadKubeconfig: readFileSync(e.workloadKubeconfig, 'utf8') };
}

/** Sum of the API server's apiserver_request_total (every client), without WATCH. */
async function apiserverRequests(e: Endpoints): Promise<number> {
  const text = readFileSync(e.kubeconfig, 'utf8');
  const url = /server: (\S+)/.exec(text)?.[1] ?? '';
  const token = /token: (\S+)/.exec(text)?.[1] ?? '';
  const ca = readFileSync(join(e.stateDir, 'pki', 'ca.crt'), 'utf8');
  const res = await kubeRequest({ url, token, ca }, 'GET', '/metrics');
  let sum = 0;
  for (const m of res.body.matchAll(/^apiserver_request_total\{([^}]*)\} (\S+)$/gm)) {
    if (/verb="WATCH"/.test(m[1] ?? '')) continue;
    sum += Number(m[2]);
  }
  return sum;
}

/** Pushes (git-receive-pack requests) to repo seen by the Git servers so far. */
function pushesTo(e: Endpoints, repo: string): number {
  let n = 0;
  for (const name of ['gitserver', 'gitserver-auth']) {
    const file = join(e.stateDir, 'logs', `${name}.log`);
    if (!existsSync(file)) continue;
    const needle = `POST /${repo}.git/git-receive-pack`;
    for (const line of readFileSync(file, 'utf8').split('\n')) if (line.includes(needle)) n += 1;
  }
  return n;
}

export async function waitUntil(
  what: string,
  timeoutMs: number,
  check: () => Promise<boolean> | boolean,
  everyMs = 250,
) {
  const deadline = now() + timeoutMs;
  while (!(await check())) {
    if (now() > deadline) throw new Error(`timed out after ${secs(timeoutMs)} s waiting for ${what}`);
    await sleep(everyMs);
  }
}

// --- what the bench watches -------------------------------------------------------------------
export type Obj = KubeObject & { spec?: Record<string, unknown>; status?: Record<string, unknown> };

export class Watch {
  readonly addons: Informer<Obj>;
  readonly kustomizations: Informer<Obj>;
  readonly gitRepositories: Informer<Obj>;

  /**
   * `fluxStatus: 'whole'` keeps the Flux objects' whole status (artifact, every condition), which
   * the controller's lean default drops: the hostile bench reads when Flux fetched and started.
   */
  constructor(client: KubeClient, ns: string, opts: { fluxStatus?: 'lean' | 'whole' } = {}) {
    const whole = opts.fluxStatus === 'whole' ? { transform: stripManagedFields<Obj> } : {};
    this.addons = new Informer<Obj>({ client, apiVersion: API_VERSION, kind: 'ClusterAddon', namespace: ns });
    this.kustomizations = new Informer<Obj>({
      client,
      apiVersion: KUSTOMIZE,
      kind: 'Kustomization',
      namespace: ns,
      labelSelector: LABEL_ADDON,
      ...whole,
    });
    this.gitRepositories = new Informer<Obj>({
      client,
      apiVersion: SOURCE,
      kind: 'GitRepository',
      namespace: ns,
      ...whole,
    });
  }

  async start(): Promise<void> {
    for (const i of this.all()) i.start();
    await Promise.all(this.all().map((i) => i.waitForSync()));
  }

  stop(): Promise<unknown> {
    return Promise.all(this.all().map((i) => i.stop()));
  }

  private all(): Informer<Obj>[] {
    return [this.addons, this.kustomizations, this.gitRepositories];
  }

  /** Where each addon Kustomization's files are: `<branch>:<path>` (undefined while its source is missing). */
  location(k: Obj): { branch: string; path: string; gitRepository: string } | undefined {
    const spec = k.spec as { sourceRef?: { name?: string }; path?: string } | undefined;
    const repoName = spec?.sourceRef?.name;
    if (repoName === undefined) return undefined;
    const repo = this.gitRepositories.getByName(repoName, k.metadata.namespace);
    const branch = (repo?.spec as { ref?: { branch?: string } } | undefined)?.ref?.branch;
    if (branch === undefined) return undefined;
    return {
      branch,
      path: (spec?.path ?? '').replace(/^\.?\/+/, '').replace(/\/+$/, ''),
      gitRepository: repoName,
    };
  }

  /** Every Cluster has its ClusterAddon, `addons` addon Kustomizations and their GitRepositories. */
  objectsComplete(clusters: number, addons: number): boolean {
    if (this.addons.size() < clusters || this.kustomizations.size() < clusters * addons) return false;
    return this.kustomizations.list().every((k) => this.location(k) !== undefined);
  }
}

// --- the fleet repository as the bench reads it -----------------------------------------------
export class FleetReader {
  private readonly url: string;
  private readonly dir: string;

  constructor(url: string, dir: string) {
    this.url = url;
    this.dir = dir;
    mkdirSync(dir, { recursive: true });
    git(dir, 'init', '-q', '--bare');
  }

  /** Fetches every branch, or only `branch` (a whole fetch of 10,000 refs takes seconds). */
  fetch(branch?: string): void {
    const spec =
      branch === undefined ? '+refs/heads/*:refs/heads/*' : `+refs/heads/${branch}:refs/heads/${branch}`;
    try {
      git(this.dir, 'fetch', '-q', ...(branch === undefined ? ['--prune'] : []), this.url, spec);
    } catch {
      // no branch yet
    }
  }

  /** The object type of each `<branch>:<path>` ("missing" when absent), one git process for all. */
  types(specs: string[]): string[] {
    if (specs.length === 0) return [];
    const out = execFileSync('git', ['cat-file', '--batch-check=%(objecttype)'], {
      cwd: this.dir,
      input: `${specs.map((s) => `refs/heads/${s}`).join('\n')}\n`,
      encoding: 'utf8',
      maxBuffer: 256 * 1024 * 1024,
    });
    return out
      .trimEnd()
      .split('\n')
      .map((l) => (l.endsWith('missing') ? 'missing' : l.trim()));
  }

  /** The text of `<branch>:<path>`, or undefined. */
  show(spec: string): string | undefined {
    try {
      return execFileSync('git', ['show', `refs/heads/${spec}`], { cwd: this.dir, encoding: 'utf8' });
    } catch {
      return undefined;
    }
  }

  /** Contents of many `<branch>:<path>` blobs (undefined when missing), one git process for all. */
  contents(specs: string[]): Array<string | undefined> {
    if (specs.length === 0) return [];
    const out = execFileSync('git', ['cat-file', '--batch'], {
      cwd: this.dir,
      input: `${specs.map((s) => `refs/heads/${s}`).join('\n')}\n`,
      maxBuffer: 1024 * 1024 * 1024,
    });
    const result: Array<string | undefined> = [];
    let at = 0;
    for (let i = 0; i < specs.length; i++) {
      const nl = out.indexOf(10, at);
      const header = out.subarray(at, nl).toString('utf8');
      at = nl + 1;
      if (header.endsWith('missing')) {
        result.push(undefined);
        continue;
      }
      const size = Number(header.split(' ')[2]);
      result.push(out.subarray(at, at + size).toString('utf8'));
      at += size + 1;
    }
    return result;
  }

  /** The tip commit of a fetched branch, or undefined. */
  tip(branch: string): string | undefined {
    try {
      return git(this.dir, 'rev-parse', `refs/heads/${branch}`);
    } catch {
      return undefined;
    }
  }

  branches(): number {
    const out = git(this.dir, 'for-each-ref', '--format=%(refname)', 'refs/heads/');
    return out === '' ? 0 : out.split('\n').length;
  }
}

/** Whether the fleet holds every addon Kustomization's folder. */
function fleetComplete(watch: Watch, fleet: FleetReader): boolean {
  fleet.fetch();
  const specs = watch.kustomizations.list().flatMap((k) => {
    const l = watch.location(k);
    return l === undefined ? [] : [`${l.branch}:${l.path}`];
  });
  return specs.length > 0 && fleet.types(specs).every((t) => t === 'tree');
}

// --- one fleet size ---------------------------------------------------------------------------
export interface Scenario {
  seconds: number;
  cpuSeconds?: number;
  gitCpuSeconds?: number;
  peakRssMb?: number;
  pushes?: number;
  requests?: number;
  writes?: number;
  [k: string]: unknown;
}

export interface Fleet {
  ns: string;
  n: number;
  work: string;
  fleetRepo: string;
  fleetUrl: string;
  releaseUrl: string;
  proc: StackfluxProcess;
  watch: Watch;
  fleet: FleetReader;
  addons: number;
  layout: string;
  stack: StackKind;
}

export function supportsQpsFlags(bin: string): boolean {
  const help = execFileSync(process.execPath, [bin, 'run', '--help'], { cwd: ROOT, encoding: 'utf8' });
  return help.includes('--kube-api-qps');
}

/**
 * Releases v1 and v2 of the fleet's stack in repoDir, pushed to releaseUrl, and the ClusterStack of
 * them in ns; returns the tag of a version.
 */
async function releaseStack(
  env: Env,
  stack: StackKind,
  ns: string,
  repoDir: string,
  releaseUrl: string,
): Promise<(v: string) => string> {
  initRepo(repoDir);
  if (stack === 'csctl') {
    for (const v of ['v1', 'v2']) {
      cutCsctlRelease(repoDir, 'docker-csoferrol-1-30', v, (dir) => {
        servedClusterClass(dir);
        // v2 changes a value every Cluster renders, as the native v2 does.
        if (v !== 'v2') return;
        const f = join(dir, 'cluster-addon', 'cni', 'values.yaml');
        writeFileSync(f, readFileSync(f, 'utf8').replace('mtu: 1400', 'mtu: 1300'));
      });
    }
    push(repoDir, releaseUrl, csoferrolTag('v1'), csoferrolTag('v2'));
    await env.client.create(csoferrolClusterStack(ns, releaseUrl, ['v1', 'v2'], { interval: '10m' }));
    return csoferrolTag;
  }
  for (const v of ['v1', 'v2']) {
    cutRelease(repoDir, 'stack', {
      example: 'docker-ferrol-1-30',
      k8s: '1-30',
      version: v,
      // v2 changes a value every Cluster renders: moving to it changes every Cluster's files.
      edit: (dir) => {
        if (v !== 'v2') return;
        const f = join(dir, 'cluster-addon', 'cni', 'values.yaml');
        writeFileSync(f, readFileSync(f, 'utf8').replace('logLevel: info', 'logLevel: debug'));
      },
    });
  }
  push(repoDir, releaseUrl, tag('v1'), tag('v2'));
  await env.client.create(
    ferrolStackAt(ns, releaseUrl, { path: 'stack', versions: ['v1', 'v2'], interval: '10m' }),
  );
  return tag;
}

export async function setupFleet(
  env: Env,
  o: Options,
  n: number,
  label: string,
  stack: StackKind,
): Promise<Fleet> {
  const { client, e } = env;
  const ns = `bench-${label}-${n}-${process.pid}`;
  const work = mkdtempSync(join(tmpdir(), `stackflux-bench-${label}-`));
  log(`${ns}: setting up (${n} Clusters, ${stack} stack releases v1 and v2, kustomize-controller stopped)…`);
  await client.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
  const releaseUrl = await createRepo(e, `${ns}-release`);
  const fleetRepo = `${ns}-fleet`;
  const fleetUrl = await createRepo(e, fleetRepo);
  await stopComponent(e.stateDir, KC);
  await stopComponent(e.stateDir, SC);
  const tagOf = await releaseStack(env, stack, ns, join(work, 'release'), releaseUrl);

  const args = [
    `--kubeconfig=${e.kubeconfig}`,
    `--namespace=${ns}`,
    `--cache-dir=${join(work, 'cache')}`,
    '--poll-interval=10m',
    `--concurrency=${o.concurrency}`,
    '--log-level=info',
    `--fleet-url=${fleetUrl}`,
    '--fleet-batch-window=2s',
  ];
  if (supportsQpsFlags(o.stackflux)) args.push(`--kube-api-qps=${o.qps}`, `--kube-api-burst=${o.burst}`);
  const dockerfile = join(o.source, 'Dockerfile');
  const image = existsSync(dockerfile) ? readFileSync(dockerfile, 'utf8') : '';
  const nodeFlags = imageNodeFlags(image);
  const imageEnv = imageMallocEnv(image);
  const malloc = Object.entries(imageEnv).map(([k, v]) => `${k}=${v}`);
  if (nodeFlags.length > 0 || malloc.length > 0)
    log(`${ns}: as in the image: node ${nodeFlags.join(' ')}, ${malloc.join(' ') || 'no malloc settings'}`);
  // The Go engine (csctl renders) as the image names it: the compiled app has no hack/ to find it by.
  const engine = locateGoEngine();
  const procEnv = { ...imageEnv, ...('path' in engine ? { STACKFLUX_GO_ENGINE: engine.path } : {}) };
  const proc = new StackfluxProcess(o.stackflux, args, join(work, 'stackflux.log'), nodeFlags, procEnv);

  // Releases resolved once, before the timed part (the fan-out does not wait for Git tags).
  await proc.start();
  await waitUntil('releases v1 and v2 resolved', o.timeoutMs, async () => {
    const list = await client.list<Obj>(API_VERSION, 'ClusterStackRelease', { namespace: ns });
    return list.items.filter((r) => typeof r.status?.commit === 'string').length >= 2;
  });
  await proc.stop();

  log(`${ns}: creating ${n} Clusters (+ status as Cluster API would write it) and kubeconfig Secrets…`);
  const started = now();
  await createClusters(client, ns, n, tagOf('v1'), env.workloadKubeconfig);
  log(`${ns}: created in ${secs(now() - started)} s`);
  const watch = new Watch(client, ns);
  await watch.start();
  return {
    ns,
    n,
    work,
    fleetRepo,
    fleetUrl,
    releaseUrl,
    proc,
    watch,
    fleet: new FleetReader(fleetUrl, join(work, 'fleet-reader.git')),
    // The addons the controller plans per Cluster (csctl: one per chart of the stages).
    addons: stackInputs(stack).addons.length,
    layout: '',
    stack,
  };
}

function layoutOf(f: Fleet): string {
  const repos = new Set(f.watch.kustomizations.list().map((k) => f.watch.location(k)?.gitRepository));
  return repos.size >= f.n
    ? 'GitRepository + branch per Cluster'
    : `${repos.size} GitRepository(ies) for ${f.n} Clusters`;
}

export async function fanout(env: Env, o: Options, f: Fleet): Promise<Scenario> {
  const pushes0 = pushesTo(env.e, f.fleetRepo);
  const api0 = await apiserverRequests(env.e);
  await f.proc.start();
  const t0 = f.proc.startedAt;
  const pid = f.proc.pid;
  const renderCpuSampler = new RenderCpuSampler(pid);
  let objectsAt = 0;
  let timedOut: string | undefined;
  try {
    await waitUntil(
      `${f.n} ClusterAddons, ${f.n * f.addons} Kustomizations, their GitRepositories`,
      o.timeoutMs,
      () => {
        if (!f.watch.objectsComplete(f.n, f.addons)) return false;
        objectsAt = now();
        return true;
      },
    );
    await waitUntil(
      'the fleet holds every Cluster’s files',
      o.timeoutMs,
      () => fleetComplete(f.watch, f.fleet),
      500,
    );
  } catch (err) {
    // What was reached by then is still a measurement (peak RSS and requests so far).
    timedOut = err instanceof Error ? err.message : String(err);
    log(`N=${f.n}: fan-out incomplete: ${timedOut}`);
  }
  const doneAt = now();
  const cpu = cpuSeconds(pid);
  const renderCpu = renderCpuSampler.total();
  const requests = await f.proc.requests();
  const heap = await f.proc.heap();
  f.layout = layoutOf(f);
  return {
    seconds: secs(doneAt - t0),
    ...(timedOut !== undefined
      ? {
          timedOut,
          clusterAddons: f.watch.addons.size(),
          kustomizations: f.watch.kustomizations.size(),
        }
      : {}),
    objectsSeconds: secs(objectsAt - t0),
    readySeconds: secs(f.proc.readyMs),
    cpuSeconds: Math.round(cpu.self * 10) / 10,
    gitCpuSeconds: Math.round(cpu.children * 10) / 10,
    ...(renderCpu !== undefined ? { renderCpuSeconds: Math.round(renderCpu * 10) / 10 } : {}),
    peakRssMb: memoryMb(pid).peak,
    largestSample: f.proc.takeLargestSample(),
    ...(heap !== undefined ? heap : {}),
    pushes: pushesTo(env.e, f.fleetRepo) - pushes0,
    fleetBranches: f.fleet.branches(),
    ...(requests !== undefined
      ? {
          requests: diffRequests({}, requests)?.total,
          writes: diffRequests({}, requests)?.writes,
          writesByResource: diffRequests({}, requests)?.writesByResource,
        }
      : {}),
    apiserverRequests: (await apiserverRequests(env.e)) - api0,
    layout: f.layout,
  };
}

/** The final objects of the fan-out, as a bare writer would apply them into namespace ns. */
function finalObjects(f: Fleet, ns: string): { objects: KubeObject[]; statuses: KubeObject[] } {
  const strip = (o: Obj): KubeObject => {
    const { status: _s, ...rest } = o;
    const { labels, annotations, name } = o.metadata;
    return {
      ...rest,
      metadata: {
        name,
        namespace: ns,
        ...(labels ? { labels } : {}),
        ...(annotations ? { annotations } : {}),
      },
    };
  };
  const managed = f.watch.gitRepositories
    .list()
    .filter((g) => g.metadata.labels?.['app.kubernetes.io/managed-by'] === 'stackflux');
  const addons = f.watch.addons.list();
  return {
    objects: [...addons, ...managed, ...f.watch.kustomizations.list()].map(strip),
    statuses: addons.map((a) => ({
      apiVersion: a.apiVersion,
      kind: a.kind,
      metadata: { name: a.metadata.name, namespace: ns },
      status: a.status,
    })),
  };
}

async function baseline(env: Env, o: Options, f: Fleet, qps: number, burst: number): Promise<Scenario> {
  const ns = `${f.ns}-bare`;
  await env.client.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
  const { objects, statuses } = finalObjects(f, ns);
  const mirror = join(f.work, 'baseline-mirror.git');
  execFileSync('git', ['clone', '-q', '--mirror', f.fleetUrl, mirror]);
  const target = await createRepo(env.e, `${ns}-fleet`);
  const writer = new KubeClient(loadKubeConfig({ kubeconfig: env.e.kubeconfig }), { qps, burst });
  const t0 = now();
  try {
    await pool(objects, o.concurrency, async (obj) => {
      await writer.apply(obj, { force: true });
    });
    await pool(statuses, o.concurrency, async (obj) => {
      await writer.applyStatus(obj, { force: true });
    });
    const applied = now();
    // A large post buffer: the test Git server does not take chunked request bodies (1,000s of refs).
    execFileSync('git', ['-c', 'http.postBuffer=1073741824', 'push', '-q', '--mirror', target], {
      cwd: mirror,
    });
    const done = now();
    return {
      seconds: secs(done - t0),
      applySeconds: secs(applied - t0),
      pushSeconds: secs(done - applied),
      objects: objects.length,
      statusWrites: statuses.length,
      writes: writer.writeCount(),
    };
  } finally {
    writer.close();
    await env.client.delete('v1', 'Namespace', ns).catch(() => undefined);
  }
}

async function steady(env: Env, o: Options, f: Fleet): Promise<Scenario> {
  await sleep(15_000); // batch windows, requeues and Flux fetch requests of the fan-out settle
  // Converged means nothing queued: at 10,000 Clusters the fan-out leaves a tail of reconciles
  // (the watch events of its own last writes) that ran for minutes after the last object existed.
  const drainStart = now();
  await waitUntil(
    'every work queue empty',
    o.timeoutMs,
    async () => ((await f.proc.queueDepth()) ?? 0) === 0,
    1_000,
  );
  const drainSeconds = secs(now() - drainStart);
  const pid = f.proc.pid;
  const cpu0 = cpuSeconds(pid);
  const req0 = await f.proc.requests();
  const api0 = await apiserverRequests(env.e);
  const t0 = now();
  await sleep(o.steadySeconds * 1000);
  const minutes = (now() - t0) / 60_000;
  const cpu1 = cpuSeconds(pid);
  const d = diffRequests(req0, await f.proc.requests());
  const perMin = (x: number): number => Math.round((x / minutes) * 10) / 10;
  return {
    seconds: secs(now() - t0),
    cpuSecondsPerMinute: perMin(cpu1.self - cpu0.self + cpu1.children - cpu0.children),
    ...(d !== undefined ? { requestsPerMinute: perMin(d.total), writesPerMinute: perMin(d.writes) } : {}),
    apiserverRequestsPerMinute: perMin((await apiserverRequests(env.e)) - api0),
    rssMb: memoryMb(pid).rss,
    queuesDrainedAfterSeconds: drainSeconds,
  };
}

/** The cni file of Cluster i as `<branch>:<path>` in the fleet. */
function cniFile(f: Fleet, i: number): string {
  const k = f.watch.kustomizations.getByName(`${clusterName(i)}.cni`, f.ns);
  const l = k === undefined ? undefined : f.watch.location(k);
  if (l === undefined) throw new Error(`no cni Kustomization for ${clusterName(i)}`);
  return `${l.branch}:${l.path}/config.yaml`;
}

async function change(env: Env, o: Options, f: Fleet): Promise<Scenario> {
  const i = Math.floor(f.n / 2);
  const cidr = '172.16.0.0/16';
  const pid = f.proc.pid;
  const cpu0 = cpuSeconds(pid);
  const req0 = await f.proc.requests();
  const pushes0 = pushesTo(env.e, f.fleetRepo);
  const t0 = now();
  await env.client.mergePatch(CAPI, 'Cluster', clusterName(i), f.ns, {
    spec: { clusterNetwork: { pods: { cidrBlocks: [cidr] } } },
  });
  const file = cniFile(f, i);
  await waitUntil(
    `the new pod CIDR of ${clusterName(i)} in the fleet`,
    o.timeoutMs,
    () => {
      f.fleet.fetch(file.slice(0, file.indexOf(':')));
      return f.fleet.show(file)?.includes(cidr) === true;
    },
    100,
  );
  const t1 = now();
  await sleep(5_000); // what else the change causes (status writes, fetch requests)
  const cpu1 = cpuSeconds(pid);
  const d = diffRequests(req0, await f.proc.requests());
  return {
    seconds: secs(t1 - t0),
    cpuSeconds: Math.round((cpu1.self - cpu0.self + cpu1.children - cpu0.children) * 100) / 100,
    pushes: pushesTo(env.e, f.fleetRepo) - pushes0,
    ...(d !== undefined ? { requests: d.total, writes: d.writes, writesByResource: d.writesByResource } : {}),
  };
}

async function release(env: Env, o: Options, f: Fleet): Promise<Scenario> {
  const pid = f.proc.pid;
  resetPeak(pid);
  f.proc.takeLargestSample();
  const cpu0 = cpuSeconds(pid);
  const pushes0 = pushesTo(env.e, f.fleetRepo);
  const req0 = await f.proc.requests();
  const v2 = tag('v2');
  const t0 = now();
  await pool(
    Array.from({ length: f.n }, (_, i) => i),
    32,
    async (i) => {
      await env.client.mergePatch(CAPI, 'Cluster', clusterName(i), f.ns, {
        spec: { topology: { classRef: { name: v2 } } },
      });
    },
  );
  const patched = now();
  await waitUntil(
    `every ClusterAddon on ${v2}`,
    o.timeoutMs,
    () => f.watch.addons.list().filter((a) => a.status?.release === v2).length >= f.n,
  );
  const statusAt = now();
  await waitUntil(
    'v2’s files in the fleet for every Cluster',
    o.timeoutMs,
    () => {
      f.fleet.fetch();
      const texts = f.fleet.contents(Array.from({ length: f.n }, (_, i) => cniFile(f, i)));
      return texts.every((t) => t?.includes('LOG_LEVEL: "debug"') === true);
    },
    500,
  );
  const done = now();
  const cpu1 = cpuSeconds(pid);
  const d = diffRequests(req0, await f.proc.requests());
  return {
    seconds: secs(done - t0),
    patchSeconds: secs(patched - t0),
    statusSeconds: secs(statusAt - t0),
    cpuSeconds: Math.round((cpu1.self - cpu0.self) * 10) / 10,
    gitCpuSeconds: Math.round((cpu1.children - cpu0.children) * 10) / 10,
    peakRssMb: memoryMb(pid).peak,
    largestSample: f.proc.takeLargestSample(),
    pushes: pushesTo(env.e, f.fleetRepo) - pushes0,
    ...(d !== undefined ? { requests: d.total, writes: d.writes, writesByResource: d.writesByResource } : {}),
  };
}

export async function teardown(env: Env, f: Fleet): Promise<void> {
  await f.proc.stop();
  await f.watch.stop();
  const { client } = env;
  await releaseControllerHolds(client, f.ns, 32);
  await client.delete('v1', 'Namespace', f.ns).catch(() => undefined);
  // The next fleet size must not share the API server with this namespace's deletion.
  await waitUntil(
    `namespace ${f.ns} deleted`,
    600_000,
    async () => (await client.get('v1', 'Namespace', f.ns)) === undefined,
    2000,
  ).catch((err: unknown) => log(String(err)));
  rmSync(f.work, { recursive: true, force: true });
}

// --- Flux running: what one Cluster's change re-applies ----------------------------------------
async function fluxScenario(env: Env, o: Options, n: number): Promise<Scenario> {
  const f = await setupFleet(env, o, n, 'flux', 'native');
  const workload = new KubeClient(loadKubeConfig({ kubeconfig: env.e.workloadKubeconfig }), {
    qps: 200,
    burst: 200,
  });
  try {
    await fanout(env, o, f);
    log(`${f.ns}: fleet written; starting ${KC} until every addon Kustomization is Ready…`);
    const t0 = now();
    await startComponent(env.e.stateDir, SC);
    await startComponent(env.e.stateDir, KC);
    const applied = (k: Obj): string | undefined => k.status?.lastAppliedRevision as string | undefined;
    const ready = (k: Obj): boolean =>
      ((k.status?.conditions as Array<{ type: string; status: string }> | undefined) ?? []).some(
        (c) => c.type === 'Ready' && c.status === 'True',
      );
    await waitUntil(
      'every addon Kustomization Ready',
      o.timeoutMs,
      () => f.watch.kustomizations.list().every((k) => ready(k) && applied(k) !== undefined),
      1000,
    );
    const convergedSeconds = secs(now() - t0);
    await sleep(20_000);
    const before = new Map(f.watch.kustomizations.list().map((k) => [k.metadata.name, applied(k)]));
    const i = Math.floor(n / 2);
    const cidr = '172.31.0.0/16';
    const t1 = now();
    await env.client.mergePatch(CAPI, 'Cluster', clusterName(i), f.ns, {
      spec: { clusterNetwork: { pods: { cidrBlocks: [cidr] } } },
    });
    await waitUntil(
      'the new pod CIDR in the workload cluster',
      o.timeoutMs,
      async () => {
        const cm = await workload.get<KubeObject & { data?: Record<string, string> }>(
          'v1',
          'ConfigMap',
          'ferrol-cni-config',
          'kube-system',
        );
        return cm?.data?.podCIDR === cidr;
      },
      200,
    );
    const inWorkload = secs(now() - t1);
    // Settled: no lastAppliedRevision moved for 30 s (or 10 minutes passed).
    let last = '';
    let quietSince = now();
    const deadline = now() + 600_000;
    while (now() - quietSince < 30_000 && now() < deadline) {
      const snapshot = f.watch.kustomizations
        .list()
        .map((k) => `${k.metadata.name}=${applied(k)}`)
        .sort()
        .join(',');
      if (snapshot !== last) {
        last = snapshot;
        quietSince = now();
      }
      await sleep(1000);
    }
    const reapplied = f.watch.kustomizations.list().filter((k) => applied(k) !== before.get(k.metadata.name));
    const own = reapplied.filter((k) => k.metadata.labels?.[LABEL_CLUSTER] === clusterName(i)).length;
    return {
      seconds: inWorkload,
      clusters: n,
      kustomizations: f.watch.kustomizations.size(),
      initialConvergeSeconds: convergedSeconds,
      reapplied: reapplied.length,
      reappliedOfChangedCluster: own,
      reappliedOfOtherClusters: reapplied.length - own,
      settledSeconds: secs(quietSince - t1),
      layout: f.layout,
    };
  } finally {
    workload.close();
    // kustomize-controller keeps running: it removes its finalizers from the namespace's objects.
    await teardown(env, f);
  }
}

// --- the fleet writer alone (fleet-writer.ts, when the branch that adds it is merged) ------------
async function writerScenario(env: Env, o: Options): Promise<Record<string, unknown> | undefined> {
  const file = join(import.meta.dirname, 'fleet-writer.ts');
  if (o.writerClusters.length === 0) return undefined;
  if (!existsSync(file)) {
    log('--writer-clusters: test/bench/fleet-writer.ts is not in this checkout; skipped');
    return { skipped: 'test/bench/fleet-writer.ts missing' };
  }
  const mod = (await import(file)) as {
    benchWriter?: (o: {
      url: string;
      branches: number;
      serverGitDir?: string;
      log?: (m: string) => void;
    }) => Promise<unknown>;
  };
  if (typeof mod.benchWriter !== 'function') return { skipped: 'fleet-writer.ts exports no benchWriter' };
  const out: Record<string, unknown> = {};
  for (const n of o.writerClusters) {
    log(`fleet writer alone at ${n} Clusters…`);
    const name = `bench-writer-${n}-${process.pid}`;
    const url = await createRepo(env.e, name);
    // The server's folder of the repository: the writer bench also times a one-Cluster change
    // after packing its refs and writing a commit-graph, as a Git host's maintenance would.
    const serverGitDir = join(env.e.stateDir, 'git', `${name}.git`);
    out[String(n)] = await mod.benchWriter({
      url,
      branches: n,
      ...(existsSync(serverGitDir) ? { serverGitDir } : {}),
      log: (m) => log(`writer ${n}: ${m}`),
    });
  }
  return out;
}

// --- the report -------------------------------------------------------------------------------
interface WriterTiming {
  ms: number;
  phasesMs: { remote: number };
}

/**
 * The fleet writer alone: a one-Cluster change per fleet size, split into the writer's own time
 * (plan, build, pack, local refs) and the Git server's answer to the push (its receive-pack checks
 * connectivity against every ref: git's cost, which grows with the refs however they are written),
 * with the ratio of the largest size to the smallest.
 */
function writerReport(writer: Record<string, unknown>): string[] {
  const sizes = Object.keys(writer)
    .map(Number)
    .filter((n) => Number.isInteger(n))
    .sort((a, b) => a - b);
  const rows: Array<Array<string | number | undefined>> = [
    [
      'branches',
      'one change ms',
      'writer ms',
      'Git server ms',
      'server maintained: ms',
      'writer ms',
      'server ms',
    ],
  ];
  const own = (t: WriterTiming | undefined) =>
    t === undefined ? undefined : Math.round((t.ms - t.phasesMs.remote) * 10) / 10;
  for (const n of sizes) {
    const r = writer[String(n)] as { oneChange?: WriterTiming; oneChangeServerMaintained?: WriterTiming };
    const a = r.oneChange;
    const m = r.oneChangeServerMaintained;
    rows.push([n, a?.ms, own(a), a?.phasesMs.remote, m?.ms, own(m), m?.phasesMs.remote]);
  }
  const lines = ['fleet writer alone, one Cluster changed (median of 5)', table(rows)];
  const [lo, hi] = [sizes[0], sizes[sizes.length - 1]];
  if (lo !== undefined && hi !== undefined && hi !== lo) {
    const get = (n: number) =>
      writer[String(n)] as { oneChange?: WriterTiming; oneChangeServerMaintained?: WriterTiming };
    const ratio = (x: number | undefined, y: number | undefined) =>
      x === undefined || y === undefined || y === 0 ? '–' : `${(x / y).toFixed(2)}x`;
    const [a, b] = [get(lo), get(hi)];
    lines.push(
      `${hi} vs ${lo} branches: writer's own time ${ratio(own(b.oneChange), own(a.oneChange))}` +
        ` (server maintained: ${ratio(own(b.oneChangeServerMaintained), own(a.oneChangeServerMaintained))});` +
        ` whole write ${ratio(b.oneChange?.ms, a.oneChange?.ms)}` +
        ` (both servers maintained: ${ratio(b.oneChangeServerMaintained?.ms, a.oneChangeServerMaintained?.ms)})`,
    );
  }
  return lines;
}

export function table(rows: Array<Array<string | number | undefined>>): string {
  const text = rows.map((r) => r.map((c) => (c === undefined ? '–' : String(c))));
  const widths = (text[0] ?? []).map((_, i) => Math.max(...text.map((r) => (r[i] ?? '').length)));
  return text.map((r) => r.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ')).join('\n');
}

/** A run's N, with the stack when it is not the native one. */
function runLabel(r: Record<string, unknown>): string {
  return r.stack === 'csctl' ? `${r.n} csctl` : String(r.n);
}

/** csctl fan-out against native fan-out, per N that ran both (issue 23's target: within 1.2x). */
export interface CsctlComparison {
  n: number;
  nativeSeconds: number;
  csctlSeconds: number;
  ratio: number;
  met: boolean;
}

export function csctlComparisons(runs: Array<Record<string, unknown>>): CsctlComparison[] {
  const fanoutOf = (n: unknown, stack: StackKind) =>
    runs.find((r) => r.n === n && (r.stack ?? 'native') === stack)?.fanout as Scenario | undefined;
  return runs.flatMap((r) => {
    if (r.stack !== 'csctl') return [];
    const [native, csctl] = [fanoutOf(r.n, 'native'), fanoutOf(r.n, 'csctl')];
    if (
      native === undefined ||
      csctl === undefined ||
      native.timedOut !== undefined ||
      csctl.timedOut !== undefined
    )
      return [];
    const ratio = Math.round((csctl.seconds / native.seconds) * 100) / 100;
    return [
      {
        n: r.n as number,
        nativeSeconds: native.seconds,
        csctlSeconds: csctl.seconds,
        ratio,
        met: csctl.seconds <= CSCTL_FANOUT_TARGET * native.seconds,
      },
    ];
  });
}

function report(
  results: Record<string, unknown>,
  runs: Array<Record<string, Scenario | number | string>>,
): string {
  const lines = ['stackflux fleet benchmark (ratios are to the bare writer measured in this run)', ''];
  const rows: Array<Array<string | number | undefined>> = [
    [
      'N',
      'scenario',
      'seconds',
      'baseline s',
      'ratio',
      'CPU s',
      'git CPU s',
      'peak RSS MB',
      'pushes',
      'requests',
      'writes',
    ],
  ];
  for (const r of runs) {
    const n = runLabel(r);
    for (const name of ['fanout', 'change', 'release'] as const) {
      const s = r[name] as Scenario | undefined;
      if (s === undefined) continue;
      const b = name === 'fanout' ? (r.baseline as Scenario | undefined) : undefined;
      rows.push([
        n,
        name,
        s.seconds,
        b?.seconds,
        b ? `${(s.seconds / b.seconds).toFixed(2)}x` : undefined,
        s.cpuSeconds,
        s.gitCpuSeconds,
        s.peakRssMb,
        s.pushes,
        s.requests,
        s.writes,
      ]);
    }
  }
  lines.push(table(rows), '');
  const steadyRows: Array<Array<string | number | undefined>> = [
    [
      'N',
      'CPU s/min',
      'requests/min (stackflux)',
      'writes/min',
      'requests/min (API server, all clients)',
      'RSS MB',
    ],
  ];
  for (const r of runs) {
    const s = r.steady as Scenario | undefined;
    if (s === undefined) continue;
    steadyRows.push([
      runLabel(r),
      s.cpuSecondsPerMinute as number,
      s.requestsPerMinute as number,
      s.writesPerMinute as number,
      s.apiserverRequestsPerMinute as number,
      s.rssMb as number,
    ]);
  }
  if (steadyRows.length > 1)
    lines.push('steady state (N converged, kustomize-controller stopped)', table(steadyRows), '');
  for (const r of runs)
    lines.push(
      `N=${runLabel(r)}: fleet layout: ${r.layout}; stackflux ready (caches synced) after ${(r.fanout as Scenario).readySeconds} s` +
        ((r.fanout as Scenario).renderCpuSeconds !== undefined
          ? `; render processes' CPU in the fan-out ${(r.fanout as Scenario).renderCpuSeconds} s (of those stopped while idle, also in git CPU s)`
          : ''),
    );
  for (const r of runs) {
    for (const name of ['fanout', 'change', 'release'] as const) {
      const w = (r[name] as Scenario | undefined)?.writesByResource as Record<string, number> | undefined;
      if (w !== undefined && Object.keys(w).length > 0)
        lines.push(
          `N=${runLabel(r)} ${name} writes: ${Object.entries(w)
            .map(([k, v]) => `${k} ${v}`)
            .join(', ')}`,
        );
    }
  }
  for (const c of csctlComparisons(runs))
    lines.push(
      '',
      `N=${c.n}: csctl fan-out ${c.csctlSeconds} s / native fan-out ${c.nativeSeconds} s = ${c.ratio.toFixed(2)}x`,
      `csctl fan-out within ${CSCTL_FANOUT_TARGET}x of native: ${c.met ? 'met' : 'missed'}`,
    );
  const flux = results.flux as Scenario | undefined;
  if (flux !== undefined) {
    lines.push(
      '',
      `Flux running, ${flux.clusters} Clusters (${flux.kustomizations} addon Kustomizations): one Cluster's pod CIDR changed →`,
      `  ${flux.reapplied} Kustomizations re-applied (${flux.reappliedOfChangedCluster} of that Cluster, ${flux.reappliedOfOtherClusters} of others);`,
      `  change in the workload cluster after ${flux.seconds} s; settled after ${flux.settledSeconds} s (initial convergence ${flux.initialConvergeSeconds} s)`,
    );
  }
  if (results.writer !== undefined)
    lines.push('', ...writerReport(results.writer as Record<string, unknown>));
  return lines.join('\n');
}

/** A bench's results (date and machine first, then `fields`) and `save`, which writes them as JSON to `out`. */
export function benchResults(
  out: string,
  fields: Record<string, unknown>,
): { results: Record<string, unknown>; save: () => void } {
  const results: Record<string, unknown> = {
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, node: process.version },
    ...fields,
  };
  const save = (): void => {
    mkdirSync(join(out, '..'), { recursive: true });
    writeFileSync(out, `${JSON.stringify(results, null, 2)}\n`);
  };
  return { results, save };
}

export async function runFleetBench(argv: string[]): Promise<number> {
  const o = options(argv);
  if (o === undefined) {
    process.stdout.write(usage);
    return 0;
  }
  const appDir = o.stackflux === '' ? mkdtempSync(join(tmpdir(), 'stackflux-bench-app-')) : undefined;
  if (appDir !== undefined) o.stackflux = buildApp(o.source, appDir);
  const env = await environment();
  const qpsFlags = supportsQpsFlags(o.stackflux);
  // Without the flags stackflux runs at its built-in client limit (20 qps / burst 30 before
  // issue 10): the baseline then gets that limit too, so the ratio compares like with like.
  const [qps, burst] = qpsFlags ? [o.qps, o.burst] : [20, 30];
  const { results, save } = benchResults(o.out, {
    stackflux: o.stackflux,
    options: { ...o, scenarios: [...o.scenarios], clientLimit: { qps, burst, flags: qpsFlags } },
  });
  const runs: Array<Record<string, Scenario | number | string>> = [];
  results.runs = runs;
  try {
    // The short scenarios first: a large fleet size that runs out of time leaves their figures.
    if (o.fluxClusters > 0) {
      log(`Flux scenario with ${o.fluxClusters} Clusters…`);
      results.flux = await fluxScenario(env, o, o.fluxClusters);
      save();
    }
    results.writer = await writerScenario(env, o);
    save();
    for (const [n, stack] of o.clusters.flatMap((n) => o.stacks.map((s) => [n, s] as const))) {
      const f = await setupFleet(env, o, n, stack === 'native' ? 'fleet' : 'csctl', stack);
      const run: Record<string, Scenario | number | string> = { n, stack };
      runs.push(run);
      try {
        log(`N=${n}: fan-out…`);
        run.fanout = await fanout(env, o, f);
        run.layout = f.layout;
        save();
        if (run.fanout.timedOut !== undefined) continue;
        if (o.baseline) {
          log(`N=${n}: fan-out ${run.fanout.seconds} s; baseline…`);
          run.baseline = await baseline(env, o, f, qps, burst);
          save();
        }
        if (o.scenarios.has('steady')) {
          log(`N=${n}: steady state for ${o.steadySeconds} s…`);
          run.steady = await steady(env, o, f);
          save();
        }
        // The change and release scenarios read the native stack's files (config.yaml, LOG_LEVEL).
        if (stack === 'csctl') {
          if (o.scenarios.has('change') || o.scenarios.has('release'))
            log(`N=${n}: change and release are measured with the native stack only`);
          continue;
        }
        if (o.scenarios.has('change')) {
          log(`N=${n}: one Cluster changed…`);
          run.change = await change(env, o, f);
          save();
        }
        if (o.scenarios.has('release')) {
          log(`N=${n}: every Cluster to v2…`);
          run.release = await release(env, o, f);
          save();
        }
      } finally {
        await teardown(env, f);
      }
    }
    if (o.stacks.length > 1) {
      results.csctlOverNative = csctlComparisons(runs);
      save();
    }
    process.stdout.write(`${report(results, runs)}\n\nJSON: ${o.out}\n`);
    return 0;
  } catch (err) {
    save();
    log(`failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    return 1;
  } finally {
    for (const c of [SC, KC]) {
      await startComponent(env.e.stateDir, c).catch((err: unknown) => log(`restarting ${c}: ${String(err)}`));
    }
    env.client.close();
    if (env.owned) await down(env.e.stateDir, log);
    if (appDir !== undefined) rmSync(appDir, { recursive: true, force: true });
  }
}
