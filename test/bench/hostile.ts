// `npm run bench -- hostile`: issue 22's hostile run. Every hostile input of hostile-inputs.ts at
// once, for --minutes, on --clusters Clusters, while a benign tenant (its own namespace, its own
// ClusterStack, some of the Clusters) changes one Cluster's pod CIDR every --change-seconds.
//
// Against the hack/testenv of STACKFLUX_TESTENV_DIR when it runs (its components are never stopped
// or restarted: Flux must run, it applies the benign changes), else one of its own. One
// `stackflux run` child process compiled like the container image (fleet.ts's buildApp, the
// image's node flags and malloc settings), --shard=<run key> so that it reconciles only this run's
// objects in a shared environment (every ClusterStack and Cluster of the run carries the key), with
// leader election, the push webhook, --default-service-account where the build has it (each tenant
// namespace gets a ServiceAccount with rights in its namespace only) and a fleet repository whose
// pre-receive hook refuses one Cluster's content. Cluster API's status of each Cluster is written by the bench (no CAPI
// controllers), as the fleet bench does.
//
// Sampled every second: stackflux's RSS (VmRSS; VmHWM at the end), /healthz latency (its
// --health-addr), the leader election Lease's renewTime, whether the process still runs. Per benign
// change: the time until the new CIDR is in the Cluster's fleet branch and until its cni
// Kustomization's lastAppliedRevision is that commit (Flux applied it: the fleet bench's "one
// Cluster changed" read from Flux's side, which other tests sharing the workload cluster cannot
// overwrite). At the end, per hostile input, what stackflux reported on the targeted object.
//
// Targets (exit code 1 when one is missed): /healthz always under 1 s, no Lease renew gap longer
// than the lease duration, every benign change applied within the batch window + 10 s, the process
// never exited. Printed as a table and written to bench-results/hostile-<date>.json.

import { type ChildProcess, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { parseDuration } from '../../controller/controllers/duration.ts';
import { FLUX_SHARD_NAMESPACE_LABEL } from '../../controller/releases/flux.ts';
import type { KubeObject } from '../../controller/runtime/client.ts';
import { SHARD_LABEL } from '../../controller/runtime/manager.ts';
import { type ShardedFlux, shardFlux } from '../../hack/lib/fluxshard.ts';
import { createRepo, down, isStopped } from '../../hack/lib/testenv.ts';
import {
  CAPI,
  cutRelease,
  ferrolClusterStack,
  freePort,
  initRepo,
  push,
  ROOT,
  releaseControllerHolds,
} from '../support/e2e.ts';
import { clusterName, createClusters } from '../support/fanout.ts';
import {
  buildApp,
  environment,
  FleetReader,
  imageMallocEnv,
  imageNodeFlags,
  memoryMb,
  StackfluxProcess,
  supportsQpsFlags,
  table,
  Watch,
} from './fleet.ts';
import {
  chartRepositoryUrls,
  clusterRoleBinding,
  costlyHealthCheck,
  crossNamespaceClass,
  dotdotTree,
  fleetRefuses,
  type Harness,
  type HostileInput,
  heapExhaustion,
  hugeHelmValues,
  hugeTagListing,
  manifestsToHelm,
  metadataRealm,
  type Reported,
  redirectForCredentials,
  refusingHook,
  slowRenders,
  slowSource,
  unrelatedSecret,
  webhookFlood,
} from './hostile-inputs.ts';

const log = (m: string): void => {
  process.stderr.write(`bench hostile ${new Date().toISOString().slice(11, 19)}: ${m}\n`);
};
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const now = (): number => performance.now();
const secs = (ms: number): number => Math.round(ms / 10) / 100;
const BENIGN_TAG = 'docker-ferrol-1-30-v1';
const LEASE_ID = 'stackflux-hostile';
const KC = 'kustomize-controller';

/** The hostile inputs of issue 22, in its order (the benign tenant's class is input 7's target). */
export const HOSTILE_INPUTS = (): HostileInput[] => [
  dotdotTree(),
  manifestsToHelm(),
  clusterRoleBinding(),
  hugeHelmValues(),
  costlyHealthCheck(),
  fleetRefuses(),
  crossNamespaceClass(BENIGN_TAG),
  heapExhaustion(),
  webhookFlood(),
  slowRenders(),
  redirectForCredentials(),
  chartRepositoryUrls(),
  unrelatedSecret(),
  metadataRealm(),
  hugeTagListing(),
  slowSource(),
];
/** Clusters the inputs other than the slow tenant take (rollout 2, six others 1 each). */
const FIXED_HOSTILE_CLUSTERS = 9;

const usage = `Usage: npm run bench -- hostile [flags]
  --minutes M             length of the hostile run, from stackflux's start (default 10)
  --clusters N            Clusters in all (default 50): a fifth benign, ${FIXED_HOSTILE_CLUSTERS} for single inputs, the rest the slow tenant's
  --batch-window D        stackflux --fleet-batch-window (default 2s); target: benign change applied within it + 10 s
  --change-seconds S      a benign change every S seconds (default 30)
  --change-timeout S      a benign change not applied after S seconds counts as missed (default 120)
  --huge-mb M             size the huge Helm values scalar renders to when uncapped (default 300)
  --flood-connections C   stalled webhook requests per wave (default 150)
  --flood-seconds S       length of one flood wave (default 60)
  --flood-every S         a wave starts every S seconds (default 120)
  --slow-list K           the slow template iterates K^6 times (default 14: 7.5 million)
  --inputs LIST           only these hostile inputs, comma separated (default all: ${HOSTILE_INPUTS()
    .map((i) => i.name)
    .join(',')})
  --benign-flux-shard     give the benign tenant its own Flux shard: its Namespace labelled stackflux.io/flux-shard,
                          stackflux run with --flux-shards=1, and the environment's Flux sharded (hack/lib/fluxshard.ts: its
                          own controllers restarted to leave that shard alone, a second set for it; restored at the end).
                          Restarts the environment's Flux controllers: only on an environment no one else uses
  --max-rss-mb M          also a target: stackflux's peak RSS, and its RSS with its render processes, at most M MB (default 0: reported only)
  --source DIR            the checkout to measure, compiled like the container image (default this one)
  --stackflux FILE        run this bin/stackflux.js as it is instead
  --out FILE              JSON results (default bench-results/hostile-<date>.json)
`;

interface Options {
  minutes: number;
  clusters: number;
  batchWindow: string;
  changeSeconds: number;
  changeTimeoutSeconds: number;
  hugeMb: number;
  flood: { connections: number; seconds: number; everySeconds: number };
  slowList: number;
  maxRssMb: number;
  /** The benign tenant on its own Flux shard (see usage). */
  benignFluxShard: boolean;
  /** Names of the hostile inputs to send (empty: all). */
  inputs: string[];
  source: string;
  stackflux: string;
  out: string;
}

function options(argv: string[]): Options | undefined {
  const { values } = parseArgs({
    args: argv,
    options: {
      minutes: { type: 'string', default: '10' },
      clusters: { type: 'string', default: '50' },
      'batch-window': { type: 'string', default: '2s' },
      'change-seconds': { type: 'string', default: '30' },
      'change-timeout': { type: 'string', default: '120' },
      'huge-mb': { type: 'string', default: '300' },
      'flood-connections': { type: 'string', default: '150' },
      'flood-seconds': { type: 'string', default: '60' },
      'flood-every': { type: 'string', default: '120' },
      'slow-list': { type: 'string', default: '14' },
      'max-rss-mb': { type: 'string', default: '0' },
      'benign-flux-shard': { type: 'boolean', default: false },
      inputs: { type: 'string', default: '' },
      source: { type: 'string', default: ROOT },
      stackflux: { type: 'string', default: '' },
      out: { type: 'string', default: '' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) return undefined;
  const num = (k: keyof typeof values): number => {
    const n = Number(values[k]);
    if (!Number.isFinite(n) || n < 0) throw new Error(`--${k}: not a number: ${String(values[k])}`);
    return n;
  };
  const names = values.inputs.split(',').flatMap((n) => (n.trim() === '' ? [] : [n.trim()]));
  const known = HOSTILE_INPUTS().map((i) => i.name);
  const unknown = names.filter((n) => !known.includes(n));
  if (unknown.length > 0)
    throw new Error(`--inputs: unknown ${unknown.join(', ')} (known: ${known.join(', ')})`);
  if (parseDuration(values['batch-window']) === undefined)
    throw new Error(`--batch-window "${values['batch-window']}" is not a duration like 2s`);
  const date = new Date().toISOString().replaceAll(':', '').slice(0, 15);
  return {
    minutes: num('minutes'),
    clusters: Math.max(1, Math.round(num('clusters'))),
    batchWindow: values['batch-window'],
    changeSeconds: num('change-seconds'),
    changeTimeoutSeconds: num('change-timeout'),
    hugeMb: num('huge-mb'),
    flood: {
      connections: num('flood-connections'),
      seconds: num('flood-seconds'),
      everySeconds: num('flood-every'),
    },
    slowList: Math.max(2, Math.round(num('slow-list'))),
    maxRssMb: num('max-rss-mb'),
    benignFluxShard: values['benign-flux-shard'],
    inputs: names,
    source: values.source,
    stackflux: values.stackflux,
    out: values.out || join(ROOT, 'bench-results', `hostile-${date}.json`),
  };
}

/** `stackflux run --help` of the measured build (which flags it has). */
function runFlags(bin: string): string {
  return execFileSync(process.execPath, [bin, 'run', '--help'], { cwd: ROOT, encoding: 'utf8' });
}

/** The ServiceAccount Flux applies a tenant's releases with: rights in its own namespace only. */
const APPLIER = 'hostile-bench-applier';
function applier(ns: string): KubeObject[] {
  const meta = { name: APPLIER, namespace: ns };
  return [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: meta },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: meta,
      // Cluster API objects of cluster-class/, and the HelmRelease and chart source of a Helm addon.
      rules: [
        {
          apiGroups: ['cluster.x-k8s.io', 'helm.toolkit.fluxcd.io', 'source.toolkit.fluxcd.io'],
          resources: ['*'],
          verbs: ['*'],
        },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: meta,
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: APPLIER },
      subjects: [{ kind: 'ServiceAccount', name: APPLIER, namespace: ns }],
    },
  ];
}

/**
 * VmRSS of a process's children together, in MB (stackflux's render processes: a render that runs
 * out of memory costs that process, so the bound that matters is the sum).
 */
function childrenRssMb(pid: number): number {
  let kb = 0;
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    for (const child of readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').split(' ')) {
      if (child.trim() === '') continue;
      try {
        const status = readFileSync(`/proc/${child.trim()}/status`, 'utf8');
        kb += Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1] ?? 0);
      } catch {}
    }
  }
  return Math.round(kb / 1024);
}

// --- samples ----------------------------------------------------------------------------------
interface Sample {
  /** Seconds since stackflux started. */
  t: number;
  rssMb?: number;
  /** VmHWM so far (the last sample's is the peak of a process that exited). */
  peakMb?: number;
  /** VmRSS of stackflux's render processes (its child processes) together. */
  renderRssMb?: number;
  /** /healthz latency in ms (a failed request's too: a timeout is HEALTHZ_TIMEOUT_MS). */
  healthzMs?: number;
  /** Why /healthz failed (not 200, timed out, refused). */
  healthzError?: string;
  renewTime?: string;
  holder?: string;
  alive: boolean;
  /** stackflux had answered /readyz (before that, a refused /healthz is not counted). */
  ready: boolean;
}

const HEALTHZ_TIMEOUT_MS = 5_000;
/** The benign changes start at the latest this long after stackflux was spawned. */
const BENIGN_WAIT_MS = 60_000;
/** Repeated inputs start at the latest this long after stackflux was spawned. */
const TICKS_AFTER_MS = 20_000;

/** One /healthz request: its latency, or why it failed (a timeout counts as HEALTHZ_TIMEOUT_MS). */
async function probeHealthz(url: string): Promise<{ ms: number; error?: string }> {
  const t0 = now();
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(HEALTHZ_TIMEOUT_MS) });
    await res.text();
    const ms = Math.round(now() - t0);
    return res.ok ? { ms } : { ms, error: `HTTP ${res.status}` };
  } catch (err) {
    return { ms: Math.round(now() - t0), error: err instanceof Error ? err.name : String(err) };
  }
}

/** Largest gap in seconds between consecutive distinct renewTimes (and from the last one to `end`). */
export function renewGaps(renewTimes: Array<string | undefined>, startMs: number, endMs: number): number[] {
  const times = [...new Set(renewTimes.filter((t): t is string => t !== undefined))]
    .map((t) => Date.parse(t))
    .filter((t) => Number.isFinite(t))
    .sort((a, b) => a - b);
  if (times.length === 0) return [(endMs - startMs) / 1000];
  const gaps: number[] = [];
  for (let i = 1; i < times.length; i++) gaps.push(((times[i] as number) - (times[i - 1] as number)) / 1000);
  gaps.push((endMs - (times.at(-1) as number)) / 1000);
  return gaps;
}

export function percentile(values: number[], p: number): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

// --- the benign tenant ------------------------------------------------------------------------
interface Change {
  /** Seconds since stackflux started. */
  at: number;
  cluster: string;
  cidr: string;
  /** Seconds until the Cluster's ClusterAddon reported a new fleet commit (stackflux's side). */
  fleetCommitSeconds?: number;
  /** Seconds until source-controller's artifact of the Cluster's GitRepository was the new commit. */
  fetchedSeconds?: number;
  /** Seconds until kustomize-controller started on it (its Reconciling message names the new revision). */
  startedSeconds?: number;
  /** Seconds until the cni Kustomization's lastAppliedRevision was a commit holding the new CIDR. */
  appliedSeconds?: number;
}

/**
 * Changes one benign Cluster's pod CIDR and waits (up to timeoutMs) until Flux applied it. The
 * fleet is read (git, synchronous) only when lastAppliedRevision moves, so the bench's own git
 * does not hold up its /healthz probes.
 */
async function benignChange(
  h: Harness,
  watch: Watch,
  fleet: FleetReader,
  cluster: string,
  cidr: string,
  at: number,
  timeoutMs: number,
): Promise<Change> {
  const ns = h.ns.benign;
  const change: Change = { at, cluster, cidr };
  const kustomization = () => watch.kustomizations.getByName(`${cluster}.cni`, ns);
  const fleetCommit = () =>
    watch.addons.list().find((a) => (a.spec as { cluster?: string } | undefined)?.cluster === cluster)?.status
      ?.fleetCommit;
  const commitBefore = fleetCommit();
  let seen = kustomization()?.status?.lastAppliedRevision;
  const artifactOf = (k: ReturnType<typeof kustomization>): string | undefined => {
    const repo = k === undefined ? undefined : watch.location(k)?.gitRepository;
    const a = repo === undefined ? undefined : watch.gitRepositories.getByName(repo, ns)?.status?.artifact;
    const revision = (a as { revision?: unknown } | undefined)?.revision;
    return typeof revision === 'string' ? revision : undefined;
  };
  const artifactBefore = artifactOf(kustomization());
  let fetched: string | undefined;
  const t0 = now();
  await h.client.mergePatch(CAPI, 'Cluster', cluster, ns, {
    spec: { clusterNetwork: { pods: { cidrBlocks: [cidr] } } },
  });
  while (now() - t0 < timeoutMs) {
    if (change.fleetCommitSeconds === undefined && fleetCommit() !== commitBefore)
      change.fleetCommitSeconds = secs(now() - t0);
    const k = kustomization();
    // Where Flux's share of the time goes: the fetch (source-controller) or the queue and apply
    // (kustomize-controller), read from the status both write as they go: the GitRepository's
    // artifact moving to a new revision, then the Kustomization's Reconciling message naming it.
    const artifact = artifactOf(k);
    if (change.fetchedSeconds === undefined && artifact !== undefined && artifact !== artifactBefore) {
      change.fetchedSeconds = secs(now() - t0);
      fetched = artifact;
    }
    if (change.startedSeconds === undefined && fetched !== undefined) {
      const conditions = (k?.status?.conditions ?? []) as Array<{ type: string; message?: string }>;
      const reconciling = conditions.find((c) => c.type === 'Reconciling');
      if (reconciling?.message?.includes(fetched) === true || k?.status?.lastAttemptedRevision === fetched)
        change.startedSeconds = secs(now() - t0);
    }
    const applied = k?.status?.lastAppliedRevision;
    const l = k === undefined ? undefined : watch.location(k);
    if (typeof applied === 'string' && applied !== seen && l !== undefined) {
      seen = applied;
      fleet.fetch(l.branch);
      const tip = fleet.tip(l.branch);
      if (
        tip !== undefined &&
        applied.endsWith(tip) &&
        fleet.show(`${l.branch}:${l.path}/config.yaml`)?.includes(cidr) === true
      ) {
        change.appliedSeconds = secs(now() - t0);
        return change;
      }
    }
    await sleep(250);
  }
  return change;
}

// --- the run ----------------------------------------------------------------------------------
interface Figures {
  healthz: { maxMs?: number; p99Ms?: number; failures: number; samples: number };
  lease: {
    name: string;
    namespace: string;
    durationSeconds?: number;
    maxRenewGapSeconds?: number;
    renewals: number;
  };
  benign: {
    changes: number;
    applied: number;
    maxSeconds?: number;
    p50Seconds?: number;
    targetSeconds: number;
    /** The slowest change's stages (or the first one not applied). */
    slowest?: Change;
  };
  rss: {
    firstMb?: number;
    lastMb?: number;
    maxSampledMb?: number;
    peakMb?: number;
    /** Render processes together, largest sample. */
    maxRenderSampledMb?: number;
    /** stackflux and its render processes together, largest sample. */
    maxTotalSampledMb?: number;
  };
  processExits: number;
  exit?: { code: number | null; signal: string | null; atSeconds: number };
}

interface Target {
  name: string;
  value: string;
  target: string;
  met: boolean;
}

function targets(f: Figures, o: Options, windowMs: number): Target[] {
  const list: Target[] = [
    {
      name: '/healthz latency (max)',
      value: f.healthz.maxMs === undefined ? 'no sample' : `${f.healthz.maxMs} ms`,
      target: '< 1000 ms',
      met: f.healthz.maxMs !== undefined && f.healthz.maxMs < 1000 && f.healthz.failures === 0,
    },
    {
      name: 'Lease renew gap (max)',
      value: f.lease.maxRenewGapSeconds === undefined ? 'never renewed' : `${f.lease.maxRenewGapSeconds} s`,
      target: `≤ ${f.lease.durationSeconds ?? 15} s (lease duration)`,
      met:
        f.lease.maxRenewGapSeconds !== undefined &&
        f.lease.maxRenewGapSeconds <= (f.lease.durationSeconds ?? 15),
    },
    {
      name: 'benign change in Flux (max)',
      value:
        f.benign.changes === 0
          ? 'no change made'
          : `${f.benign.maxSeconds ?? '–'} s, ${f.benign.applied}/${f.benign.changes} applied`,
      target: `≤ ${secs(windowMs + 10_000)} s (batch window + 10 s)`,
      met:
        f.benign.changes > 0 &&
        f.benign.applied === f.benign.changes &&
        (f.benign.maxSeconds ?? Number.POSITIVE_INFINITY) <= f.benign.targetSeconds,
    },
    { name: 'process exits', value: String(f.processExits), target: '0', met: f.processExits === 0 },
  ];
  if (o.maxRssMb > 0) {
    const own = f.rss.peakMb ?? f.rss.maxSampledMb;
    list.push({
      name: 'peak RSS (stackflux; with its render processes)',
      value: `${own ?? '–'} MB; ${f.rss.maxTotalSampledMb ?? '–'} MB`,
      target: `≤ ${o.maxRssMb} MB each`,
      met: Math.max(own ?? Number.POSITIVE_INFINITY, f.rss.maxTotalSampledMb ?? 0) <= o.maxRssMb,
    });
  }
  return list;
}

function report(f: Figures, ts: Target[], inputs: Array<{ name: string; input: string } & Reported>): string {
  const lines = ['stackflux hostile run (issue 22)', ''];
  lines.push(
    table([
      ['figure', 'value', 'target', 'met'],
      ...ts.map((t) => [t.name, t.value, t.target, t.met ? 'yes' : 'MISSED']),
    ]),
    '',
  );
  lines.push(
    `/healthz: max ${f.healthz.maxMs ?? '–'} ms, p99 ${f.healthz.p99Ms ?? '–'} ms, ${f.healthz.failures} failed of ${f.healthz.samples}`,
    `Lease ${f.lease.namespace}/${f.lease.name}: ${f.lease.renewals} renewals seen, max gap ${f.lease.maxRenewGapSeconds ?? '–'} s`,
    `benign changes: ${f.benign.applied}/${f.benign.changes} applied, max ${f.benign.maxSeconds ?? '–'} s, p50 ${f.benign.p50Seconds ?? '–'} s (target ${f.benign.targetSeconds} s)`,
    ...(f.benign.slowest !== undefined
      ? [
          `slowest benign change (${f.benign.slowest.cluster}): fleet commit ${f.benign.slowest.fleetCommitSeconds ?? '–'} s, source-controller fetched ${f.benign.slowest.fetchedSeconds ?? '–'} s, kustomize-controller started ${f.benign.slowest.startedSeconds ?? '–'} s, applied ${f.benign.slowest.appliedSeconds ?? 'NOT'} s`,
        ]
      : []),
    `RSS: first ${f.rss.firstMb ?? '–'} MB, last ${f.rss.lastMb ?? '–'} MB, max sampled ${f.rss.maxSampledMb ?? '–'} MB, peak (VmHWM) ${f.rss.peakMb ?? '–'} MB; render processes max ${f.rss.maxRenderSampledMb ?? '–'} MB, with stackflux max ${f.rss.maxTotalSampledMb ?? '–'} MB`,
    `process exits: ${f.processExits}${f.exit ? ` (code ${f.exit.code}, signal ${f.exit.signal}, after ${f.exit.atSeconds} s)` : ''}`,
    '',
    'what stackflux reported per hostile input',
    table([
      ['#', 'input', 'object', 'reason', 'message'],
      ...inputs.map((r, i) => [String(i + 1), r.name, r.object, r.reason, (r.message ?? '').slice(0, 100)]),
    ]),
  );
  return lines.join('\n');
}

export async function runHostileBench(argv: string[]): Promise<number> {
  const o = options(argv);
  if (o === undefined) {
    process.stdout.write(usage);
    return 0;
  }
  const windowMs = parseDuration(o.batchWindow) as number;
  const appDir = o.stackflux === '' ? mkdtempSync(join(tmpdir(), 'stackflux-hostile-app-')) : undefined;
  if (appDir !== undefined) o.stackflux = buildApp(o.source, appDir);
  const env = await environment();
  const { client, e } = env;
  const pid = process.pid;
  const shard = `hostile${pid}`;
  const h: Harness = {
    client,
    e,
    pid,
    ns: { benign: `hostile-${pid}-benign`, hostile: `hostile-${pid}-tenant`, other: `hostile-${pid}-other` },
    shardLabels: { [SHARD_LABEL]: shard },
    releaseUrl: '',
    releaseDir: '',
    workloadKubeconfig: env.workloadKubeconfig,
    work: mkdtempSync(join(tmpdir(), 'stackflux-hostile-')),
    webhookPort: await freePort(),
    hugeBytes: Math.round(o.hugeMb * 1024 * 1024),
    flood: o.flood,
    slowList: o.slowList,
    slowClusters: 0,
    tags: [],
    nextIndex: {},
    log,
  };
  const benignClusters = Math.max(1, Math.round(o.clusters / 5));
  h.slowClusters = Math.max(1, o.clusters - benignClusters - FIXED_HOSTILE_CLUSTERS);
  const totalClusters = benignClusters + FIXED_HOSTILE_CLUSTERS + h.slowClusters;
  const inputs = HOSTILE_INPUTS().filter((i) => o.inputs.length === 0 || o.inputs.includes(i.name));
  const samples: Sample[] = [];
  const changes: Change[] = [];
  const benchErrors: Record<string, string[]> = {};
  /** What went wrong on the bench's side for one input (a few per input). */
  const noteError = (name: string, err: unknown): void => {
    const list = benchErrors[name] ?? [];
    benchErrors[name] = list;
    if (list.length < 5) list.push(err instanceof Error ? err.message : String(err));
  };
  const results: Record<string, unknown> = {
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, node: process.version },
    stackflux: o.stackflux,
    options: { ...o, clustersCreated: totalClusters, benignClusters, slowClusters: h.slowClusters },
  };
  const save = (): void => {
    mkdirSync(join(o.out, '..'), { recursive: true });
    writeFileSync(o.out, `${JSON.stringify(results, null, 2)}\n`);
  };
  let proc: StackfluxProcess | undefined;
  let fluxShards: ShardedFlux | undefined;
  let watch: Watch | undefined;
  let exit: Figures['exit'];
  let code = 1;
  try {
    if (isStopped(e.stateDir, KC))
      log(`${KC} is stopped in this environment (another run stopped it): benign changes cannot be applied`);
    log(
      `setting up: ${benignClusters} benign Clusters, ${inputs.length} hostile inputs (${inputs.some((i) => i.name === 'slow') ? h.slowClusters : 0} slow-tenant Clusters)`,
    );
    const benignFluxShard = `benign${pid}`;
    for (const ns of Object.values(h.ns)) {
      await client.create({
        apiVersion: 'v1',
        kind: 'Namespace',
        metadata: {
          name: ns,
          ...(o.benignFluxShard && ns === h.ns.benign
            ? { labels: { [FLUX_SHARD_NAMESPACE_LABEL]: benignFluxShard } }
            : {}),
        },
      });
      for (const o of applier(ns)) await client.create(o);
    }
    h.releaseUrl = await createRepo(e, `${h.ns.benign}-release`);
    const fleetRepo = `${h.ns.benign}-fleet`;
    const fleetUrl = await createRepo(e, fleetRepo);
    const hook = join(e.stateDir, 'git', `${fleetRepo}.git`, 'hooks', 'pre-receive');
    if (existsSync(join(hook, '..', '..'))) {
      mkdirSync(join(hook, '..'), { recursive: true });
      writeFileSync(hook, refusingHook());
      chmodSync(hook, 0o755);
    } else log(`fleet repository folder not found at ${join(hook, '..', '..')}: no pre-receive hook`);

    h.releaseDir = join(h.work, 'release');
    initRepo(h.releaseDir);
    h.tags.push(
      cutRelease(h.releaseDir, 'ferrol', { example: 'docker-ferrol-1-30', k8s: '1-30', version: 'v1' }),
    );
    for (const input of inputs) {
      try {
        await input.prepare?.(h);
        input.release?.(h);
      } catch (err) {
        log(
          `${input.name}: its release could not be cut: ${err instanceof Error ? err.message : String(err)}`,
        );
        noteError(input.name, err);
      }
    }
    try {
      push(h.releaseDir, h.releaseUrl, ...h.tags);
    } catch (err) {
      // One crafted tag the Git server refuses must not stop the others.
      log(
        `pushing every tag at once failed (${err instanceof Error ? err.message.split('\n')[0] : String(err)}); one by one`,
      );
      for (const t of h.tags) {
        try {
          push(h.releaseDir, h.releaseUrl, t);
        } catch (e2) {
          log(`tag ${t} refused: ${e2 instanceof Error ? e2.message.split('\n')[0] : String(e2)}`);
          noteError(t.split('-')[1] ?? t, e2); // docker-<input name>-1-30-vN
        }
      }
    }

    const benign = ferrolClusterStack(h.ns.benign, 'ferrol', {
      autoSubscribe: false,
      versions: ['v1'],
      interval: '5m',
      source: { git: { url: h.releaseUrl }, path: 'ferrol' },
    });
    benign.metadata.labels = { ...h.shardLabels };
    await client.create(benign);
    await createClusters(client, h.ns.benign, benignClusters, BENIGN_TAG, env.workloadKubeconfig, {
      labels: h.shardLabels,
    });
    const benignNames = Array.from({ length: benignClusters }, (_, i) => clusterName(i));
    for (const input of inputs) {
      try {
        await input.setup(h);
      } catch (err) {
        log(`${input.name}: setup failed: ${err instanceof Error ? err.message : String(err)}`);
        noteError(input.name, err);
      }
    }
    watch = new Watch(client, h.ns.benign, { fluxStatus: 'whole' });
    await watch.start();
    const fleet = new FleetReader(fleetUrl, join(h.work, 'fleet-reader.git'));

    const args = [
      `--kubeconfig=${e.kubeconfig}`,
      `--shard=${shard}`,
      `--cache-dir=${join(h.work, 'cache')}`,
      '--poll-interval=1m',
      '--concurrency=4',
      '--log-level=info',
      `--fleet-url=${fleetUrl}`,
      `--fleet-batch-window=${o.batchWindow}`,
      '--leader-elect',
      `--leader-election-namespace=${h.ns.benign}`,
      `--leader-election-id=${LEASE_ID}`,
      `--webhook-addr=127.0.0.1:${h.webhookPort}`,
      `--webhook-secret=${randomBytes(16).toString('hex')}`,
    ];
    if (supportsQpsFlags(o.stackflux)) args.push('--kube-api-qps=50', '--kube-api-burst=300');
    if (o.benignFluxShard) {
      args.push('--flux-shards=1');
      log(
        `sharding Flux: the benign tenant on shard ${benignFluxShard} (restarting this environment's Flux controllers)`,
      );
      fluxShards = await shardFlux(e.stateDir, [benignFluxShard]);
    }
    // Locked down as a platform admin would run it, where this stackflux has the flag: Flux applies
    // each tenant's releases with the tenant's ServiceAccount (APPLIER, namespaced rights only).
    if (runFlags(o.stackflux).includes('--default-service-account'))
      args.push(`--default-service-account=${APPLIER}`);
    const dockerfile = join(o.source, 'Dockerfile');
    const image = existsSync(dockerfile) ? readFileSync(dockerfile, 'utf8') : '';
    const logFile = join(h.work, 'stackflux.log');
    proc = new StackfluxProcess(o.stackflux, args, logFile, imageNodeFlags(image), imageMallocEnv(image));
    results.stackfluxArgs = args.filter((a) => !a.startsWith('--webhook-secret'));
    log(`starting stackflux (--shard=${shard}); run of ${o.minutes} min…`);
    // Sampled from the spawn on: stackflux may exit before it is ready (the inputs are all there
    // at its start), which is a result, not a failure of the bench.
    let ready = false;
    let runEnded = false;
    let startError: unknown;
    void proc.start().then(
      () => {
        ready = true;
        log('stackflux ready');
      },
      (err: unknown) => {
        startError = err;
      },
    );
    while (proc.child === undefined && startError === undefined) await sleep(50);
    const child = proc.child as ChildProcess | undefined;
    if (child === undefined) throw startError;
    const spid = proc.pid;
    const t0 = proc.startedAt;
    const since = (): number => secs(now() - t0);
    const exited = (c: number | null, signal: NodeJS.Signals | null): void => {
      // After the run, the bench stops it: that is no exit of the run's.
      if (exit !== undefined || runEnded) return;
      exit = { code: c, signal, atSeconds: since() };
      h.exitedAt = Date.now();
      log(`stackflux exited (code ${c}, signal ${signal}) after ${exit.atSeconds} s; see ${logFile}`);
    };
    child.once('exit', exited);
    if (child.exitCode !== null || child.signalCode !== null) exited(child.exitCode, child.signalCode);
    const leaseName = `${LEASE_ID}-${shard}`;
    let leaseDuration: number | undefined;
    const end = t0 + o.minutes * 60_000;
    const running = (): boolean => exit === undefined && now() < end;

    const sampler = (async () => {
      while (running()) {
        const next = now() + 1000;
        const s: Sample = { t: since(), alive: child.exitCode === null, ready };
        try {
          const m = memoryMb(spid);
          s.rssMb = m.rss;
          s.peakMb = m.peak;
          s.renderRssMb = childrenRssMb(spid);
        } catch {}
        const [hz, lease] = await Promise.all([
          probeHealthz(proc?.healthUrl ?? ''),
          client
            .get<
              KubeObject & {
                spec?: { renewTime?: string; holderIdentity?: string; leaseDurationSeconds?: number };
              }
            >('coordination.k8s.io/v1', 'Lease', leaseName, h.ns.benign)
            .catch(() => undefined),
        ]);
        s.healthzMs = hz.ms;
        if (hz.error !== undefined) s.healthzError = hz.error;
        if (lease?.spec?.renewTime !== undefined) s.renewTime = lease.spec.renewTime;
        if (lease?.spec?.holderIdentity !== undefined) s.holder = lease.spec.holderIdentity;
        leaseDuration = lease?.spec?.leaseDurationSeconds ?? leaseDuration;
        samples.push(s);
        await sleep(Math.max(0, next - now()));
      }
    })();

    const ticks = (async () => {
      // What the inputs repeat (the flood, value changes, a release move) starts once stackflux is
      // ready, or after TICKS_AFTER_MS if it never gets there (alive, listening, not ready).
      while (running() && !ready && now() - t0 < TICKS_AFTER_MS) await sleep(200);
      while (running()) {
        await Promise.all(
          inputs.map(async (input) => {
            try {
              await input.tick?.(h, since());
            } catch (err) {
              noteError(input.name, err);
            }
          }),
        );
        await sleep(2_000);
      }
    })();

    const benignLoop = (async () => {
      const converged = (): boolean =>
        benignNames.every((c) => {
          const k = watch?.kustomizations.getByName(`${c}.cni`, h.ns.benign);
          return typeof k?.status?.lastAppliedRevision === 'string';
        });
      // The benign tenant's Clusters first converge once (their first render and apply); changes
      // start anyway after BENIGN_WAIT_MS (each then counts as missed unless it lands).
      while (running() && !converged() && now() - t0 < BENIGN_WAIT_MS) await sleep(1_000);
      if (converged()) results.benignConvergedSeconds = since();
      log(`benign Clusters ${converged() ? `applied after ${since()} s` : `not applied after ${since()} s`}`);
      for (let k = 0; running(); k++) {
        const slot = now() + o.changeSeconds * 1000;
        // A change the end of the run would cut short of its target is not made (it could not miss).
        if (end - now() < windowMs + 15_000) break;
        const cluster = benignNames[k % benignNames.length] as string;
        const cidr = `10.250.${k % 250}.0/24`;
        const timeout = Math.min(o.changeTimeoutSeconds * 1000, Math.max(0, end - now()));
        const c = await benignChange(h, watch as Watch, fleet, cluster, cidr, since(), timeout).catch(
          (err: unknown) => {
            log(`benign change failed: ${err instanceof Error ? err.message : String(err)}`);
            return undefined;
          },
        );
        if (c !== undefined) {
          changes.push(c);
          log(
            `benign change ${k + 1} (${cluster} → ${cidr}): fleet commit ${c.fleetCommitSeconds ?? '–'} s, fetched ${c.fetchedSeconds ?? '–'} s, kustomize started ${c.startedSeconds ?? '–'} s, applied ${c.appliedSeconds ?? 'NOT'} s`,
          );
        }
        while (running() && now() < slot) await sleep(500);
      }
    })();

    while (running()) await sleep(1_000);
    // Not `starting`: a process that never gets ready settles it only when it is stopped.
    await Promise.all([sampler, ticks, benignLoop]);
    runEnded = true;
    const endMs = Date.now();

    let peakMb = samples.findLast((s) => s.peakMb !== undefined)?.peakMb;
    try {
      if (exit === undefined) peakMb = memoryMb(spid).peak;
    } catch {}
    log('collecting what stackflux reported per hostile input…');
    const reported: Array<{ name: string; input: string } & Reported> = [];
    for (const input of inputs) {
      const r = await Promise.race([
        input.report(h).catch(
          (err: unknown): Reported => ({
            object: '?',
            reason: `(report failed: ${err instanceof Error ? err.message : String(err)})`,
          }),
        ),
        sleep(15_000).then((): Reported => ({ object: '?', reason: '(report timed out)' })),
      ]);
      reported.push({
        name: input.name,
        input: input.input,
        ...r,
        ...(benchErrors[input.name] ? { benchErrors: benchErrors[input.name] } : {}),
      });
    }

    // Before /readyz answered, a refused connection only means /healthz does not listen yet; an
    // answer or a timeout (listening, not answering) counts.
    const counted = samples.filter(
      (s) => s.ready || s.healthzError === undefined || s.healthzError === 'TimeoutError',
    );
    const healthz = counted.flatMap((s) => (s.healthzMs !== undefined ? [s.healthzMs] : []));
    const failures = counted.filter((s) => s.healthzError !== undefined);
    const startWall = endMs - (now() - t0);
    const gaps = renewGaps(
      samples.map((s) => s.renewTime),
      startWall,
      exit === undefined ? endMs : startWall + exit.atSeconds * 1000,
    );
    const applied = changes.flatMap((c) => (c.appliedSeconds !== undefined ? [c.appliedSeconds] : []));
    const rss = samples.flatMap((s) => (s.rssMb !== undefined ? [s.rssMb] : []));
    const figures: Figures = {
      healthz: {
        ...(healthz.length > 0 ? { maxMs: Math.max(...healthz) } : {}),
        ...(healthz.length > 0 ? { p99Ms: percentile(healthz, 99) } : {}),
        failures: failures.length,
        samples: counted.length,
      },
      lease: {
        name: leaseName,
        namespace: h.ns.benign,
        ...(leaseDuration !== undefined ? { durationSeconds: leaseDuration } : {}),
        ...(samples.some((s) => s.renewTime !== undefined)
          ? { maxRenewGapSeconds: Math.round(Math.max(...gaps) * 10) / 10 }
          : {}),
        renewals: new Set(samples.map((s) => s.renewTime).filter((t) => t !== undefined)).size,
      },
      benign: {
        changes: changes.length,
        applied: applied.length,
        ...(applied.length > 0
          ? { maxSeconds: Math.max(...applied), p50Seconds: percentile(applied, 50) }
          : {}),
        targetSeconds: secs(windowMs + 10_000),
        ...(changes.length > 0
          ? {
              slowest: changes.reduce((a, b) =>
                (b.appliedSeconds ?? Number.POSITIVE_INFINITY) >
                (a.appliedSeconds ?? Number.POSITIVE_INFINITY)
                  ? b
                  : a,
              ),
            }
          : {}),
      },
      rss: {
        ...(rss.length > 0 ? { firstMb: rss[0], lastMb: rss.at(-1), maxSampledMb: Math.max(...rss) } : {}),
        ...(peakMb !== undefined ? { peakMb } : {}),
        ...(rss.length > 0
          ? {
              maxRenderSampledMb: Math.max(...samples.map((s) => s.renderRssMb ?? 0)),
              maxTotalSampledMb: Math.max(...samples.map((s) => (s.rssMb ?? 0) + (s.renderRssMb ?? 0))),
            }
          : {}),
      },
      processExits: exit === undefined ? 0 : 1,
      ...(exit !== undefined ? { exit } : {}),
    };
    const ts = targets(figures, o, windowMs);
    Object.assign(results, {
      figures,
      targets: ts,
      hostileInputs: reported,
      benignChanges: changes,
      healthzFailures: failures.slice(0, 50),
      samples,
      stackfluxLog: logFile,
    });
    save();
    process.stdout.write(`${report(figures, ts, reported)}\n\nJSON: ${o.out}\n`);
    code = ts.every((t) => t.met) ? 0 : 1;
    return code;
  } catch (err) {
    results.error = err instanceof Error ? (err.stack ?? err.message) : String(err);
    if (exit !== undefined) results.exit = exit;
    save();
    log(`failed: ${String(results.error)}`);
    return 1;
  } finally {
    const aliveAtEnd =
      proc?.child !== undefined && proc.child.exitCode === null && proc.child.signalCode === null;
    await proc?.stop();
    if (aliveAtEnd) {
      // StackfluxProcess.stop sends SIGTERM, then SIGKILL after 35 s.
      results.stoppedBy =
        proc?.child?.signalCode === 'SIGKILL' ? 'SIGKILL: SIGTERM ignored for 35 s' : 'SIGTERM';
      log(`stackflux stopped by ${String(results.stoppedBy)}`);
      save();
    }
    await watch?.stop();
    for (const ns of Object.values(h.ns)) {
      await releaseControllerHolds(client, ns, 16);
      await client.delete('v1', 'Namespace', ns).catch(() => undefined);
    }
    // After the namespaces: Flux no longer re-applies what an input removes outside them.
    for (const input of inputs) await input.stop?.(h).catch(() => undefined);
    await fluxShards
      ?.restore()
      .catch((err: unknown) => log(`restoring Flux's controllers failed: ${String(err)}`));
    client.close();
    if (env.owned) await down(e.stateDir, log);
    if (appDir !== undefined) rmSync(appDir, { recursive: true, force: true });
    // The stackflux log stays for a look when a target was missed.
    if (code === 0) rmSync(h.work, { recursive: true, force: true });
    else log(`kept ${h.work} (stackflux.log)`);
  }
}
