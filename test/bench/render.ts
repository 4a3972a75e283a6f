// `npm run bench -- render [--clusters N] [--rounds R] [--stack native|csctl|both] [--out FILE]`:
// the render pool per Cluster, no API server. For the native stack stacks/docker-ferrol-1-30
// (handlebars in the render processes) and the cluster-stack-operator stack
// stacks/docker-csoferrol-1-30 (each addon's Go-template overwrite.yaml, then `helm template` of its
// umbrella chart, both through the Go engine in the render processes), each with a pool of its own
// and the live controller's code path (RenderPool.render of the inputs the ClusterAddon reconciler
// builds):
//   first render   a fresh pool's first render: the process starting (and loading the Go engine)
//   per Cluster    N Clusters one after another, each Cluster's addons at once: p50, p95, mean
//   fan-out        N Clusters at once, R rounds: ms per Cluster of the best round
//   in-line        the same renders on this thread, one after another (the baseline of the pool)
//   peak RSS       of the render processes, sampled every 20 ms
// and the ratio csctl/native of each. The JSON results go to bench-results/render-<date>.json.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { StackManifest } from '../../controller/api/release.ts';
import { csctlAddonPlan } from '../../controller/reconcilers/clusteraddon.ts';
import { readReleaseDescription } from '../../controller/releases/format.ts';
import { parseReleaseTag } from '../../controller/releases/tags.ts';
import { binaryFilesOf } from '../../controller/releases/tree.ts';
import { type AddonRenderInput, RenderPool, renderAnyAddon } from '../../controller/rendering/index.ts';
import type { PlainObject } from '../../controller/rendering/types.ts';
import { readStackDir } from '../../hack/lib/stack-dir.ts';
import { ROOT } from '../support/e2e.ts';
import { clusterObject } from '../support/fanout.ts';
import { percentile } from './hostile.ts';

const STACKS = {
  native: { dir: 'docker-ferrol-1-30', tag: 'docker-ferrol-1-30-v1' },
  csctl: { dir: 'docker-csoferrol-1-30', tag: 'docker-csoferrol-1-30-v1' },
} as const;
type StackKind = keyof typeof STACKS;

/** Resident KiB of a process (VmRSS), 0 when it is gone. */
function rssKiB(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

/**
 * The addon render inputs of Cluster `cluster` for a stack folder, as the ClusterAddon reconciler
 * builds them (controller/reconcilers/clusteraddon/render.ts): a native addon per stack.yaml entry, a
 * csctl addon per entry of csctlAddonPlan with its chart folder and values template.
 */
export function stackInputs(kind: StackKind): {
  addons: string[];
  inputs: (cluster: PlainObject) => AddonRenderInput[];
} {
  const stack = STACKS[kind];
  const tree = readStackDir(join(ROOT, 'stacks', stack.dir));
  const tag = parseReleaseTag(stack.tag);
  if (!tag.ok) throw new Error(`${stack.tag}: ${tag.reason}`);
  const read = readReleaseDescription(tree, tag.value);
  if (!read.ok) throw new Error(`${stack.dir}: ${read.errors.join('; ')}`);
  const description = read.value;
  if (description.format !== kind) throw new Error(`${stack.dir} is in the ${description.format} format`);
  if (kind === 'native') {
    const manifest = description.manifest as StackManifest;
    return {
      addons: manifest.addons.map((a) => a.name),
      inputs: (cluster) => manifest.addons.map((a) => ({ tree, stack: manifest, addon: a.name, cluster })),
    };
  }
  const binary = binaryFilesOf(tree);
  const planned = csctlAddonPlan(description).map((p) => {
    const described = description.addons.find((a) => a.name === p.name);
    if (described === undefined) throw new Error(`${p.name}: planned but not described`);
    return described;
  });
  return {
    addons: planned.map((a) => a.name),
    inputs: (cluster) =>
      planned.map((a) => ({
        format: 'csctl' as const,
        tree,
        binary,
        addon: a.name,
        chartPath: a.path,
        ...(a.valuesTemplate !== undefined ? { valuesTemplate: a.valuesTemplate } : {}),
        kubernetesVersion: description.kubernetesVersion,
        cluster,
      })),
  };
}

const round2 = (x: number): number => Math.round(x * 100) / 100;

export interface StackRenderFigures {
  stack: string;
  addons: string[];
  clusters: number;
  firstRenderMs: number;
  perCluster: { p50Ms: number; p95Ms: number; meanMs: number };
  fanOut: { bestMsPerCluster: number; roundsMsPerCluster: number[] };
  inlineMsPerCluster: number;
  peakRenderProcessesRssMb: number;
  renderProcessesStarted: number;
}

async function measure(kind: StackKind, clusters: number, rounds: number): Promise<StackRenderFigures> {
  const { addons, inputs } = stackInputs(kind);
  const tag = STACKS[kind].tag;
  // The Clusters the fleet bench creates (test/support/fanout.ts): each its own name and pod CIDR.
  const batch = (round: number): AddonRenderInput[][] =>
    Array.from({ length: clusters }, (_, i) =>
      inputs(clusterObject(`bench-${round}`, i, tag) as unknown as PlainObject),
    );
  const check = (results: Awaited<ReturnType<RenderPool['render']>>[]): void => {
    const bad = results.find((r) => !r.ok);
    if (bad !== undefined && !bad.ok) throw new Error(`${kind}: ${bad.reason}: ${bad.message}`);
  };

  const pool = new RenderPool();
  let peakKiB = 0;
  const sampler = setInterval(() => {
    peakKiB = Math.max(
      peakKiB,
      pool.pids.reduce((sum, pid) => sum + rssKiB(pid), 0),
    );
  }, 20);
  try {
    let t = performance.now();
    const first = (batch(0)[0] ?? [])[0] as AddonRenderInput;
    check([await pool.render(first)]);
    const firstRenderMs = performance.now() - t;

    const perCluster: number[] = [];
    for (const cluster of batch(1)) {
      t = performance.now();
      check(await Promise.all(cluster.map((input) => pool.render(input))));
      perCluster.push(performance.now() - t);
    }
    const fanOut: number[] = [];
    for (let round = 2; round < 2 + rounds; round++) {
      const all = batch(round);
      t = performance.now();
      check(await Promise.all(all.flat().map((input) => pool.render(input))));
      fanOut.push((performance.now() - t) / clusters);
    }

    // Baseline: the same renders in-line on this thread (the Go engine loaded here first).
    check([renderAnyAddon(first)]);
    const inline = batch(2 + rounds);
    t = performance.now();
    check(inline.flat().map((input) => renderAnyAddon(input)));
    const inlineMsPerCluster = (performance.now() - t) / clusters;

    return {
      stack: STACKS[kind].dir,
      addons,
      clusters,
      firstRenderMs: Math.round(firstRenderMs),
      perCluster: {
        p50Ms: round2(percentile(perCluster, 50) ?? Number.NaN),
        p95Ms: round2(percentile(perCluster, 95) ?? Number.NaN),
        meanMs: round2(perCluster.reduce((a, b) => a + b, 0) / perCluster.length),
      },
      fanOut: { bestMsPerCluster: round2(Math.min(...fanOut)), roundsMsPerCluster: fanOut.map(round2) },
      inlineMsPerCluster: round2(inlineMsPerCluster),
      peakRenderProcessesRssMb: Math.round(peakKiB / 1024),
      renderProcessesStarted: pool.workerStats.started,
    };
  } finally {
    clearInterval(sampler);
    await pool.close();
  }
}

/** csctl / native of one figure, as text. */
function ratio(csctl: number | undefined, native: number | undefined): string {
  return csctl === undefined || native === undefined || native === 0
    ? '–'
    : `${(csctl / native).toFixed(2)}x`;
}

export async function runRenderBench(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      clusters: { type: 'string', default: '200' },
      rounds: { type: 'string', default: '3' },
      stack: { type: 'string', default: 'both' },
      out: { type: 'string', default: '' },
    },
  });
  const clusters = Number(values.clusters);
  const rounds = Number(values.rounds);
  if (!Number.isInteger(clusters) || clusters < 1 || !Number.isInteger(rounds) || rounds < 1) {
    process.stderr.write('--clusters and --rounds must be positive integers\n');
    return 2;
  }
  const kinds: StackKind[] =
    values.stack === 'both' ? ['native', 'csctl'] : values.stack === 'native' ? ['native'] : ['csctl'];
  if (!['both', 'native', 'csctl'].includes(values.stack)) {
    process.stderr.write(`--stack ${values.stack}: one of native, csctl, both\n`);
    return 2;
  }
  const figures: Partial<Record<StackKind, StackRenderFigures>> = {};
  for (const kind of kinds) {
    process.stderr.write(`bench render: ${STACKS[kind].dir}, ${clusters} Clusters…\n`);
    figures[kind] = await measure(kind, clusters, rounds);
  }
  const { native, csctl } = figures;
  const rows: Array<[string, (f: StackRenderFigures) => number, string]> = [
    ['first render (pool start, engine load)', (f) => f.firstRenderMs, 'ms'],
    ['per Cluster p50', (f) => f.perCluster.p50Ms, 'ms'],
    ['per Cluster p95', (f) => f.perCluster.p95Ms, 'ms'],
    ['per Cluster mean', (f) => f.perCluster.meanMs, 'ms'],
    [`fan-out (${clusters} at once, best of ${rounds})`, (f) => f.fanOut.bestMsPerCluster, 'ms/Cluster'],
    ['in-line on one thread (baseline)', (f) => f.inlineMsPerCluster, 'ms/Cluster'],
    ['peak RSS of the render processes', (f) => f.peakRenderProcessesRssMb, 'MB'],
  ];
  const cell = (f: StackRenderFigures | undefined, get: (f: StackRenderFigures) => number, unit: string) =>
    f === undefined ? '–' : `${get(f)} ${unit}`;
  const lines = [
    `render per Cluster: ${clusters} Clusters; native ${native?.stack ?? '–'} (${native?.addons.length ?? 0} addons), csctl ${csctl?.stack ?? '–'} (${csctl?.addons.length ?? 0} addons)`,
    ...rows.map(
      ([label, get, unit]) =>
        `  ${label.padEnd(42)} native ${cell(native, get, unit).padEnd(16)} csctl ${cell(csctl, get, unit).padEnd(16)} csctl/native ${ratio(csctl && get(csctl), native && get(native))}`,
    ),
  ];
  for (const f of [native, csctl])
    if (f !== undefined)
      lines.push(
        `  ${f.stack}: pool ${ratio(f.fanOut.bestMsPerCluster, f.inlineMsPerCluster)} in-line at fan-out; ${f.renderProcessesStarted} render processes started`,
      );
  const date = new Date().toISOString().replaceAll(':', '').slice(0, 15);
  const out = values.out || join(ROOT, 'bench-results', `render-${date}.json`);
  mkdirSync(join(out, '..'), { recursive: true });
  const results = {
    date: new Date().toISOString(),
    options: { clusters, rounds, stack: values.stack },
    ...figures,
    ...(native !== undefined && csctl !== undefined
      ? {
          csctlOverNative: {
            perClusterP50: round2(csctl.perCluster.p50Ms / native.perCluster.p50Ms),
            perClusterP95: round2(csctl.perCluster.p95Ms / native.perCluster.p95Ms),
            perClusterMean: round2(csctl.perCluster.meanMs / native.perCluster.meanMs),
            fanOut: round2(csctl.fanOut.bestMsPerCluster / native.fanOut.bestMsPerCluster),
            firstRender: round2(csctl.firstRenderMs / native.firstRenderMs),
            peakRss: round2(csctl.peakRenderProcessesRssMb / native.peakRenderProcessesRssMb),
          },
        }
      : {}),
  };
  writeFileSync(out, `${JSON.stringify(results, null, 2)}\n`);
  process.stdout.write(`${lines.join('\n')}\n\nJSON: ${out}\n`);
  return 0;
}
