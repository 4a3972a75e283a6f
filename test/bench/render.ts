// `npm run bench -- render [--clusters N] [--rounds R]`: the render pool at fan-out, no API server.
// Renders every addon of stacks/docker-ferrol-1-31 for N Clusters at once through a RenderPool, as a
// release move does, R times, and reports per Cluster the pool's time next to the same renders
// in-line on this thread (the baseline, measured in the same run), the first render's latency
// (the pool starting), and the peak RSS of this process and of the render processes.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { parseArgs } from 'node:util';
import { parse } from 'yaml';
import type { ReleaseTree, StackManifest } from '../../controller/api/release.ts';
import { type RenderAddonInput, RenderPool, renderAddon } from '../../controller/rendering/index.ts';
import { sampleCluster } from '../unit/rendering/fixtures.ts';

const STACK = new URL('../../stacks/docker-ferrol-1-31/', import.meta.url).pathname;

function readTree(root: string): ReleaseTree {
  const out: [string, string][] = [];
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir).sort()) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else out.push([relative(root, path).split(sep).join('/'), readFileSync(path, 'utf8')]);
    }
  };
  walk(root);
  return new Map(out);
}

/** Resident KiB of a process (VmRSS), 0 when it is gone. */
function rssKiB(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

export async function runRenderBench(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: { clusters: { type: 'string', default: '500' }, rounds: { type: 'string', default: '3' } },
  });
  const clusters = Number(values.clusters);
  const rounds = Number(values.rounds);
  const tree = readTree(STACK);
  const stack = parse(tree.get('stack.yaml') ?? '') as StackManifest;
  const inputs = (round: number): RenderAddonInput[][] =>
    Array.from({ length: clusters }, (_, i) =>
      stack.addons.map((a) => ({
        tree,
        stack,
        addon: a.name,
        cluster: sampleCluster({ name: `c${round}-${i}` }),
      })),
    );

  // Baseline: the same renders in-line.
  let t = performance.now();
  for (const cluster of inputs(0)) for (const input of cluster) renderAddon(input);
  const inlineMs = (performance.now() - t) / clusters;

  const pool = new RenderPool();
  const peak = { self: 0, children: 0, total: 0 };
  const sample = (): void => {
    const self = Math.round(process.memoryUsage.rss() / 1024);
    const pids = (pool as { pids?: number[] }).pids ?? [];
    const children = pids.reduce((sum, pid) => sum + rssKiB(pid), 0);
    peak.self = Math.max(peak.self, self);
    peak.children = Math.max(peak.children, children);
    peak.total = Math.max(peak.total, self + children);
  };
  const sampler = setInterval(sample, 20);
  t = performance.now();
  const first = await pool.render(inputs(0)[0]?.[0] as RenderAddonInput);
  const firstMs = performance.now() - t;
  if (!first.ok) throw new Error(first.message);
  const perCluster: number[] = [];
  for (let round = 1; round <= rounds; round++) {
    const batch = inputs(round);
    t = performance.now();
    const results = await Promise.all(
      batch.map((cluster) => Promise.all(cluster.map((i) => pool.render(i)))),
    );
    perCluster.push((performance.now() - t) / clusters);
    const bad = results.flat().find((r) => !r.ok);
    if (bad !== undefined && !bad.ok) throw new Error(bad.message);
  }
  sample();
  clearInterval(sampler);
  await pool.close();
  const best = Math.min(...perCluster);
  const mb = (kib: number) => `${(kib / 1024).toFixed(0)} MB`;
  process.stdout.write(
    [
      `render fan-out: ${clusters} Clusters x ${stack.addons.length} addons, ${rounds} rounds`,
      `  in-line (baseline)   ${inlineMs.toFixed(2)} ms/Cluster`,
      `  pool                 ${best.toFixed(2)} ms/Cluster (best round; ${perCluster.map((x) => x.toFixed(2)).join(', ')}) = ${(best / inlineMs).toFixed(2)}x in-line`,
      `  first render         ${firstMs.toFixed(0)} ms (the pool starting); ${pool.workerStats.started} started`,
      `  peak RSS             this process ${mb(peak.self)}, render processes ${mb(peak.children)}, together ${mb(peak.total)}`,
      '',
    ].join('\n'),
  );
  return 0;
}
