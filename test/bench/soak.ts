// `npm run bench -- soak [--minutes 30]`: stackflux under churn for a long time, its memory sampled
// (issue 11's soak). Against the hack/testenv of STACKFLUX_TESTENV_DIR (else one of its own), in a
// namespace of its own, kustomize-controller stopped (stackflux is measured, not Flux), stackflux
// compiled like the container image (fleet.ts's buildApp). A seeded churn, one step a second:
// Clusters created (up to --clusters), deleted (down to half), their pod CIDR changed; every
// --release-minutes a release is cut and pushed (autoSubscribe picks it up, old unused releases
// are collected) and every Cluster moves to it. RSS (VmRSS) is sampled every --sample-seconds.
// Printed and written to bench-results/soak-<date>.json: the samples, what the churn did, and
// the RSS slope (least squares, MB per hour) over the whole run and over its second half (the
// first half is warm-up: informer caches, release trees and the V8 heap grow to their working
// size; in a 30-minute run RSS levelled off after ~10 min), which is the figure that shows a leak.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { API_VERSION } from '../../controller/api/meta.ts';
import type { KubeObject } from '../../controller/runtime/client.ts';
import {
  createRepo,
  down,
  isStopped,
  startComponent,
  stopComponent,
  workloadKubeconfigSecret,
} from '../../hack/lib/testenv.ts';
import { rng } from '../integration/runtime/helpers.ts';
import {
  CAPI,
  cutRelease,
  ferrolClusterStack,
  initRepo,
  push,
  ROOT,
  releaseControllerHolds,
} from '../support/e2e.ts';
import { clusterName, clusterObject, clusterStatus, pool } from '../support/fanout.ts';
import { buildApp, cpuSeconds, environment, memoryMb, StackfluxProcess } from './fleet.ts';

const KC = 'kustomize-controller';
const log = (m: string): void => {
  process.stderr.write(`bench soak ${new Date().toISOString().slice(11, 19)}: ${m}\n`);
};
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const tag = (v: number): string => `docker-ferrol-1-30-v${v}`;

const usage = `Usage: npm run bench -- soak [flags]
  --minutes M           length of the churn (default 30)
  --clusters N          most Clusters alive at once (default 50)
  --release-minutes R   a new release every R minutes, every Cluster moved to it (default 3)
  --sample-seconds S    RSS sampling period (default 10)
  --seed S              seed of the churn (default 1)
  --out FILE            JSON results (default bench-results/soak-<date>.json)
`;

/** Least-squares slope of y over x. */
export function slope(points: Array<{ x: number; y: number }>): number {
  const n = points.length;
  if (n < 2) return 0;
  const mx = points.reduce((s, p) => s + p.x, 0) / n;
  const my = points.reduce((s, p) => s + p.y, 0) / n;
  let num = 0;
  let den = 0;
  for (const p of points) {
    num += (p.x - mx) * (p.y - my);
    den += (p.x - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

interface Sample {
  seconds: number;
  rssMb: number;
  cpuSeconds: number;
  clusters: number;
}

export async function runSoakBench(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      minutes: { type: 'string', default: '30' },
      clusters: { type: 'string', default: '50' },
      'release-minutes': { type: 'string', default: '3' },
      'sample-seconds': { type: 'string', default: '10' },
      seed: { type: 'string', default: '1' },
      out: { type: 'string', default: '' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(usage);
    return 0;
  }
  const minutes = Number(values.minutes);
  const maxClusters = Number(values.clusters);
  const releaseMs = Number(values['release-minutes']) * 60_000;
  const sampleMs = Number(values['sample-seconds']) * 1000;
  const seed = Number(values.seed);
  const date = new Date().toISOString().replaceAll(':', '').slice(0, 15);
  const out = values.out || join(ROOT, 'bench-results', `soak-${date}.json`);

  const appDir = mkdtempSync(join(tmpdir(), 'stackflux-soak-app-'));
  const bin = buildApp(ROOT, appDir);
  const env = await environment();
  const { client, e } = env;
  const ns = `soak-${process.pid}`;
  const work = mkdtempSync(join(tmpdir(), 'stackflux-soak-'));
  const random = rng(seed);
  const ops = { created: 0, deleted: 0, changed: 0, releases: 1, moved: 0, errors: 0 };
  const samples: Sample[] = [];
  let proc: StackfluxProcess | undefined;
  // Started again at the end only if this run stopped it (another run may have it stopped).
  const kcWasStopped = isStopped(e.stateDir, KC);
  try {
    log(`${ns}: setting up (release v1, kustomize-controller stopped)…`);
    await stopComponent(e.stateDir, KC);
    await client.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
    const releaseUrl = await createRepo(e, `${ns}-release`);
    const fleetUrl = await createRepo(e, `${ns}-fleet`);
    const repoDir = join(work, 'release');
    initRepo(repoDir);
    let version = 1;
    cutRelease(repoDir, 'stack', { example: 'docker-ferrol-1-30', k8s: '1-30', version: 'v1' });
    push(repoDir, releaseUrl, tag(1));
    await client.create(
      ferrolClusterStack(ns, 'ferrol', {
        autoSubscribe: true,
        versions: [],
        interval: '20s',
        source: { git: { url: releaseUrl }, path: 'stack' },
      }),
    );
    proc = new StackfluxProcess(
      bin,
      [
        `--kubeconfig=${e.kubeconfig}`,
        `--namespace=${ns}`,
        `--cache-dir=${join(work, 'cache')}`,
        '--poll-interval=10m',
        '--concurrency=4',
        '--log-level=info',
        `--fleet-url=${fleetUrl}`,
        '--fleet-batch-window=2s',
      ],
      join(work, 'stackflux.log'),
    );
    await proc.start();
    const pid = proc.pid;

    const live = new Set<number>();
    let nextIndex = 0;
    const create = async (): Promise<void> => {
      const i = nextIndex++;
      await client.create(workloadKubeconfigSecret(ns, clusterName(i), env.workloadKubeconfig) as KubeObject);
      await client.create(clusterObject(ns, i, tag(version)));
      await client.applyStatus(clusterStatus(ns, i), { fieldManager: 'capi-controller', force: true });
      live.add(i);
      ops.created++;
    };
    const pick = (): number => [...live][Math.floor(random() * live.size)] as number;
    const remove = async (): Promise<void> => {
      const i = pick();
      live.delete(i);
      await client.delete(CAPI, 'Cluster', clusterName(i), ns);
      await client.delete('v1', 'Secret', `${clusterName(i)}-kubeconfig`, ns);
      ops.deleted++;
    };
    const change = async (): Promise<void> => {
      const i = pick();
      const cidr = `10.${128 + Math.floor(random() * 64)}.${Math.floor(random() * 256)}.0/24`;
      await client.mergePatch(CAPI, 'Cluster', clusterName(i), ns, {
        spec: { clusterNetwork: { pods: { cidrBlocks: [cidr] } } },
      });
      ops.changed++;
    };
    const release = async (): Promise<void> => {
      version++;
      cutRelease(repoDir, 'stack', { example: 'docker-ferrol-1-30', k8s: '1-30', version: `v${version}` });
      push(repoDir, releaseUrl, tag(version));
      ops.releases++;
      // Clusters move once stackflux made the release's ClusterStackRelease (it lists every 20 s).
      const deadline = Date.now() + 120_000;
      while (Date.now() < deadline) {
        const r = await client.get<KubeObject & { status?: { commit?: string } }>(
          API_VERSION,
          'ClusterStackRelease',
          tag(version),
          ns,
        );
        if (r?.status?.commit !== undefined) break;
        await sleep(2_000);
      }
      await pool([...live], 8, async (i) => {
        await client.mergePatch(CAPI, 'Cluster', clusterName(i), ns, {
          spec: { topology: { classRef: { name: tag(version) } } },
        });
        ops.moved++;
      });
    };

    log(
      `${ns}: churn for ${minutes} min, up to ${maxClusters} Clusters, a release every ${releaseMs / 60_000} min…`,
    );
    const t0 = Date.now();
    const end = t0 + minutes * 60_000;
    let nextSample = t0;
    let nextRelease = t0 + releaseMs;
    while (Date.now() < end) {
      if (proc.child?.exitCode !== null) throw new Error(`stackflux exited (${proc.child?.exitCode})`);
      const step = random();
      try {
        if (Date.now() >= nextRelease) {
          nextRelease += releaseMs;
          await release();
        } else if (live.size < maxClusters / 2 || (step < 0.3 && live.size < maxClusters)) await create();
        else if (step < 0.5 && live.size > maxClusters / 2) await remove();
        else if (step < 0.9 && live.size > 0) await change();
      } catch (err) {
        ops.errors++;
        log(`churn step failed: ${err instanceof Error ? err.message : String(err)}`);
      }
      if (Date.now() >= nextSample) {
        nextSample += sampleMs;
        const cpu = cpuSeconds(pid);
        samples.push({
          seconds: Math.round((Date.now() - t0) / 1000),
          rssMb: memoryMb(pid).rss,
          cpuSeconds: Math.round((cpu.self + cpu.children) * 10) / 10,
          clusters: live.size,
        });
      }
      await sleep(1_000);
    }
    const perHour = (from: number): number => {
      const pts = samples.filter((s) => s.seconds >= from).map((s) => ({ x: s.seconds / 3600, y: s.rssMb }));
      return Math.round(slope(pts) * 10) / 10;
    };
    const warmup = Math.round((minutes * 60) / 2);
    const rss = samples.map((s) => s.rssMb);
    const result = {
      date: new Date().toISOString(),
      machine: { cpus: cpus().length, node: process.version },
      options: {
        minutes,
        maxClusters,
        releaseMinutes: releaseMs / 60_000,
        sampleSeconds: sampleMs / 1000,
        seed,
      },
      ops,
      rssMb: { first: rss[0], last: rss.at(-1), min: Math.min(...rss), max: Math.max(...rss) },
      slopeMbPerHour: { all: perHour(0), afterWarmup: perHour(warmup), warmupSeconds: warmup },
      stillRunning: proc.child?.exitCode === null,
      samples,
    };
    mkdirSync(join(out, '..'), { recursive: true });
    writeFileSync(out, `${JSON.stringify(result, null, 2)}\n`);
    process.stdout.write(
      `soak ${minutes} min (seed ${seed}): ${JSON.stringify(ops)}\n` +
        `RSS MB first ${result.rssMb.first}, last ${result.rssMb.last}, min ${result.rssMb.min}, max ${result.rssMb.max}\n` +
        `RSS slope (least squares): ${result.slopeMbPerHour.all} MB/h overall, ${result.slopeMbPerHour.afterWarmup} MB/h after the first ${warmup} s\n` +
        `JSON: ${out}\n`,
    );
    return 0;
  } catch (err) {
    log(`failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    return 1;
  } finally {
    await proc?.stop();
    await releaseControllerHolds(client, ns, 32);
    await client.delete('v1', 'Namespace', ns).catch(() => undefined);
    if (!kcWasStopped)
      await startComponent(e.stateDir, KC).catch((err: unknown) => log(`restarting ${KC}: ${String(err)}`));
    client.close();
    if (env.owned) await down(e.stateDir, log);
    rmSync(appDir, { recursive: true, force: true });
    rmSync(work, { recursive: true, force: true });
  }
}
