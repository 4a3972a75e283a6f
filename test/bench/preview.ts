// `npm run bench -- preview`: issue 25's acceptance figure. N Clusters of stacks/docker-ferrol-1-30
// on v1 are fanned out by stackflux against the real hack/testenv exactly as the fleet bench does
// (fleet.ts: Flux stopped, the controller a child process, its render processes' CPU sampled), then
// the controller stops and `stackflux preview clusterstack ferrol --release v2` runs as a user runs
// it: one CLI process (the compiled app, plain node, a cold release cache) reading the live objects
// and every fleet branch, rendering every Cluster in its own render processes. v2 changes a value
// every Cluster renders (fleet.ts's releaseStack), so every Cluster's preview is a change.
//
// Per Cluster, beside each other: the fan-out's render (its render processes' CPU seconds, and its
// wall time) and the preview's whole cost (wall time; CPU of the preview process, its render
// processes and its git, from wait4 via /usr/bin/time). Target (issue 25): the preview's CPU per
// Cluster is not more than the render CPU per Cluster the controller spends in the fan-out anyway.
// Peak RSS of the preview process and of its largest render process, sampled from /proc (VmHWM).
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { locateGoEngine } from '../../controller/rendering/goengine/index.ts';
import { down } from '../../hack/lib/testenv.ts';
import {
  buildApp,
  cpuSeconds,
  environment,
  fanout,
  memoryMb,
  options,
  RenderCpuSampler,
  type Scenario,
  setupFleet,
  table,
  teardown,
} from './fleet.ts';

const log = (m: string): void => {
  process.stderr.write(`bench preview ${new Date().toISOString().slice(11, 19)}: ${m}\n`);
};
const round = (x: number, digits = 2): number => Math.round(x * 10 ** digits) / 10 ** digits;

const usage = `Usage: npm run bench -- preview [flags]
  --clusters LIST       fleet sizes, comma separated (default 1000)
  --concurrency C       the controller's --concurrency in the fan-out (default 4)
  --qps Q --burst B     the controller's client rate limit in the fan-out (default 50 / 300)
  --source DIR          the checkout to measure, compiled like the container image (default this one)
  --stackflux FILE      run this bin/stackflux.js as it is
  --out FILE            JSON results (default bench-results/preview-<date>.json)
  --timeout-minutes M   give up on one wait after M minutes (default 30)
  --profile DIR         also write a V8 CPU profile of the preview process into DIR (its CPU then
                        includes the profiler's)
`;

/** What one preview run cost, as measured from outside the process. */
export interface PreviewCost {
  seconds: number;
  /** user + system CPU of the preview process and every child it waited for (render processes, git). */
  cpuSeconds: number;
  /** The preview process's own CPU (its last sample before it exited). */
  mainCpuSeconds?: number;
  renderCpuSeconds?: number;
  peakRssMb: number;
  renderPeakRssMb?: number;
  renderProcesses: number;
}

/** The fan-out's render and the preview, per Cluster, with issue 25's target. */
export interface PreviewComparison {
  clusters: number;
  fanoutRenderCpuMsPerCluster: number;
  fanoutWallMsPerCluster: number;
  previewCpuMsPerCluster: number;
  previewWallMsPerCluster: number;
  /** preview CPU / fan-out render CPU, per Cluster. */
  cpuRatio: number;
  /** preview wall time / fan-out wall time, per Cluster. */
  wallRatio: number;
  /** The preview costs no more CPU per Cluster than the fan-out's render. */
  met: boolean;
}

export function comparePreview(
  clusters: number,
  fan: { seconds: number; renderCpuSeconds: number },
  preview: { seconds: number; cpuSeconds: number },
): PreviewComparison {
  const perCluster = (s: number) => round((s * 1000) / clusters, 1);
  return {
    clusters,
    fanoutRenderCpuMsPerCluster: perCluster(fan.renderCpuSeconds),
    fanoutWallMsPerCluster: perCluster(fan.seconds),
    previewCpuMsPerCluster: perCluster(preview.cpuSeconds),
    previewWallMsPerCluster: perCluster(preview.seconds),
    cpuRatio: round(preview.cpuSeconds / fan.renderCpuSeconds),
    wallRatio: round(preview.seconds / fan.seconds),
    met: preview.cpuSeconds <= fan.renderCpuSeconds,
  };
}

/** `/usr/bin/time -f` output: wall seconds, user and system CPU seconds. */
export function parseTimeOutput(text: string): { seconds: number; cpuSeconds: number } {
  const m = /^STACKFLUX_BENCH_TIME (\S+) (\S+) (\S+)$/m.exec(text);
  if (m === null) throw new Error(`no /usr/bin/time figures in: ${text.slice(-500)}`);
  return { seconds: Number(m[1]), cpuSeconds: round(Number(m[2]) + Number(m[3])) };
}

/** The preview CLI's children: the first one of `timePid`, then its render processes. */
function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
}

/** Runs the preview CLI under /usr/bin/time; its JSON report and what it cost. */
async function runPreview(
  bin: string,
  args: string[],
  work: string,
  nodeFlags: string[],
): Promise<{ cost: PreviewCost; report: unknown; exitCode: number | null; stderr: string }> {
  const [outFile, errFile, timeFile] = ['preview.json', 'preview.err', 'preview.time'].map((f) =>
    join(work, f),
  );
  const engine = locateGoEngine();
  const child = spawn(
    '/usr/bin/time',
    [
      '-f',
      'STACKFLUX_BENCH_TIME %e %U %S',
      '-o',
      timeFile as string,
      process.execPath,
      ...nodeFlags,
      bin,
      ...args,
    ],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...('path' in engine ? { STACKFLUX_GO_ENGINE: engine.path } : {}) },
    },
  );
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child.stdout.on('data', (b: Buffer) => out.push(b));
  child.stderr.on('data', (b: Buffer) => err.push(b));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  let previewPid: number | undefined;
  let sampler: RenderCpuSampler | undefined;
  let peakRssMb = 0;
  let mainCpuSeconds: number | undefined;
  const renderPeaks = new Map<number, number>();
  const sample = (): void => {
    if (previewPid === undefined) {
      previewPid = childrenOf(child.pid ?? -1)[0];
      if (previewPid !== undefined) sampler = new RenderCpuSampler(previewPid);
    }
    if (previewPid === undefined) return;
    try {
      peakRssMb = Math.max(peakRssMb, memoryMb(previewPid).peak);
      mainCpuSeconds = cpuSeconds(previewPid).self;
    } catch {
      return; // exited
    }
    for (const pid of childrenOf(previewPid)) {
      try {
        if (!readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('worker.')) continue;
        renderPeaks.set(pid, Math.max(renderPeaks.get(pid) ?? 0, memoryMb(pid).peak));
      } catch {
        // gone meanwhile
      }
    }
  };
  const timer = setInterval(sample, 100);
  const exitCode = await exited;
  clearInterval(timer);
  const renderCpu = sampler?.total();
  writeFileSync(outFile as string, Buffer.concat(out));
  writeFileSync(errFile as string, Buffer.concat(err));
  const time = parseTimeOutput(readFileSync(timeFile as string, 'utf8'));
  let report: unknown;
  try {
    report = JSON.parse(Buffer.concat(out).toString('utf8'));
  } catch {
    report = undefined;
  }
  return {
    cost: {
      ...time,
      ...(mainCpuSeconds !== undefined ? { mainCpuSeconds: round(mainCpuSeconds, 1) } : {}),
      ...(renderCpu !== undefined ? { renderCpuSeconds: round(renderCpu, 1) } : {}),
      peakRssMb,
      ...(renderPeaks.size > 0 ? { renderPeakRssMb: Math.max(...renderPeaks.values()) } : {}),
      renderProcesses: renderPeaks.size,
    },
    report,
    exitCode,
    stderr: Buffer.concat(err).toString('utf8'),
  };
}

interface PreviewReport {
  clusters: Array<{ outcome: string }>;
  groups: unknown[];
  failed: number;
}

/** Whether the preview previewed what it should: every Cluster, each changed, none failing. */
function previewProblem(report: unknown, n: number): string | undefined {
  const r = report as PreviewReport | undefined;
  if (r === undefined || !Array.isArray(r.clusters)) return 'the preview printed no JSON report';
  if (r.clusters.length !== n) return `the preview covered ${r.clusters.length} of ${n} Clusters`;
  const changed = r.clusters.filter((c) => c.outcome === 'changed').length;
  if (changed !== n) return `${changed} of ${n} Clusters changed (v2 changes every Cluster)`;
  return undefined;
}

export async function runPreviewBench(argv: string[]): Promise<number> {
  if (argv.includes('--help')) {
    process.stdout.write(usage);
    return 0;
  }
  const at = argv.indexOf('--profile');
  const profileDir = at >= 0 ? argv[at + 1] : undefined;
  const fleetArgs = at >= 0 ? [...argv.slice(0, at), ...argv.slice(at + 2)] : argv;
  const o = options([...fleetArgs, '--scenarios', 'fanout', '--no-baseline'], {
    clusters: '1000',
    outPrefix: 'preview',
  });
  if (o === undefined) return 2;
  const appDir = o.stackflux === '' ? mkdtempSync(join(tmpdir(), 'stackflux-bench-app-')) : undefined;
  if (appDir !== undefined) o.stackflux = buildApp(o.source, appDir);
  const env = await environment();
  const runs: Array<Record<string, unknown>> = [];
  const results: Record<string, unknown> = {
    date: new Date().toISOString(),
    machine: { cpus: cpus().length, node: process.version },
    stackflux: o.stackflux,
    options: { clusters: o.clusters, concurrency: o.concurrency, qps: o.qps, burst: o.burst },
    runs,
  };
  const save = (): void => {
    mkdirSync(join(o.out, '..'), { recursive: true });
    writeFileSync(o.out, `${JSON.stringify(results, null, 2)}\n`);
  };
  let failed = false;
  try {
    for (const n of o.clusters) {
      const f = await setupFleet(env, o, n, 'preview', 'native');
      const run: Record<string, unknown> = { n };
      runs.push(run);
      try {
        log(`N=${n}: fan-out of v1…`);
        const fan: Scenario = await fanout(env, o, f);
        run.fanout = fan;
        save();
        if (fan.timedOut !== undefined || fan.renderCpuSeconds === undefined) {
          failed = true;
          log(`N=${n}: no complete fan-out (or no render processes seen); no preview`);
          continue;
        }
        // The preview runs alone, as a person runs it while the controller keeps the fleet.
        await f.proc.stop();
        log(`N=${n}: fan-out ${fan.seconds} s; stackflux preview --release v2…`);
        const { cost, report, exitCode, stderr } = await runPreview(
          o.stackflux,
          [
            'preview',
            'clusterstack',
            'ferrol',
            '-n',
            f.ns,
            '--release',
            'docker-ferrol-1-30-v2',
            `--fleet-url=${f.fleetUrl}`,
            `--kubeconfig=${env.e.kubeconfig}`,
            `--cache-dir=${join(f.work, 'preview-cache')}`,
            '-o',
            'json',
          ],
          f.work,
          profileDir !== undefined ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [],
        );
        const r = report as PreviewReport | undefined;
        run.preview = { ...cost, exitCode, groups: r?.groups?.length, failedClusters: r?.failed };
        const problem =
          exitCode !== 0 ? `exit code ${exitCode}: ${stderr.slice(-400)}` : previewProblem(report, n);
        if (problem !== undefined) {
          failed = true;
          run.problem = problem;
          log(`N=${n}: preview wrong: ${problem}`);
        }
        run.comparison = comparePreview(
          n,
          { seconds: fan.seconds, renderCpuSeconds: fan.renderCpuSeconds as number },
          cost,
        );
        save();
      } finally {
        await teardown(env, f);
      }
    }
    process.stdout.write(`${previewReportText(runs)}\n\nJSON: ${o.out}\n`);
    return failed ? 1 : 0;
  } catch (err) {
    save();
    log(`failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    return 1;
  } finally {
    env.client.close();
    // A test environment this run started is its own to stop (the fleet bench does the same).
    if (env.owned) await down(env.e.stateDir, log);
    if (appDir !== undefined) rmSync(appDir, { recursive: true, force: true });
  }
}

export function previewReportText(runs: Array<Record<string, unknown>>): string {
  const lines = [
    'stackflux preview benchmark: `stackflux preview --release v2` against the fan-out of v1 in the same run',
    '',
  ];
  const rows: Array<Array<string | number | undefined>> = [
    [
      'N',
      'fan-out render CPU ms/Cluster',
      'fan-out wall ms/Cluster',
      'preview CPU ms/Cluster',
      'preview wall ms/Cluster',
      'CPU ratio',
      'wall ratio',
      'preview peak RSS MB',
      'render process peak MB',
    ],
  ];
  for (const r of runs) {
    const c = r.comparison as PreviewComparison | undefined;
    const p = r.preview as PreviewCost | undefined;
    rows.push([
      r.n as number,
      c?.fanoutRenderCpuMsPerCluster,
      c?.fanoutWallMsPerCluster,
      c?.previewCpuMsPerCluster,
      c?.previewWallMsPerCluster,
      c ? `${c.cpuRatio.toFixed(2)}x` : undefined,
      c ? `${c.wallRatio.toFixed(2)}x` : undefined,
      p?.peakRssMb,
      p?.renderPeakRssMb,
    ]);
  }
  lines.push(table(rows), '');
  for (const r of runs) {
    const p = r.preview as (PreviewCost & { groups?: number }) | undefined;
    const c = r.comparison as PreviewComparison | undefined;
    if (p !== undefined)
      lines.push(
        `N=${r.n}: preview ${p.seconds} s, CPU ${p.cpuSeconds} s (preview process ${p.mainCpuSeconds ?? '–'} s, ` +
          `${p.renderProcesses} render processes ${p.renderCpuSeconds ?? '–'} s, rest git), ${p.groups ?? '–'} group(s)`,
      );
    if (r.problem !== undefined) lines.push(`N=${r.n}: PREVIEW WRONG: ${String(r.problem)}`);
    if (c !== undefined)
      lines.push(
        `N=${r.n}: preview costs no more CPU per Cluster than the fan-out's render: ${c.met ? 'met' : 'missed'}`,
      );
  }
  return lines.join('\n');
}
