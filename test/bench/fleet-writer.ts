// Timing harness for the per-Cluster fleet writer (not a test): seeds N Cluster branches (3 addons
// of small YAML each) through GitFleetWriter in batches, then times a one-Cluster change against
// that fleet (median of several). `npm run bench -- fleet` calls benchWriter; run alone:
//   GIT_SERVER_URL=http://127.0.0.1:PORT node test/bench/fleet-writer.ts 100 10000
// (a hack/testenv Git server; each N gets a new repository).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BranchChange } from '../../controller/gitops/branches.ts';
import { GitFleetWriter } from '../../controller/gitops/writer.ts';
import type { GitCredentials } from '../../controller/sources/git.ts';

export interface BenchWriterOptions {
  /** An empty repository on a Git server. */
  url: string;
  /** Clusters (branches) to seed before timing. */
  branches: number;
  /** Branches per seeding write (one push each); default 1,000. */
  batch?: number;
  /** Timed one-Cluster changes; the median is reported. Default 5. */
  samples?: number;
  credentials?: GitCredentials;
  /** Where the writer's bare cache lives; default a temporary folder removed afterwards. */
  cacheDir?: string;
  log?: (message: string) => void;
}

export interface BenchWriterResult {
  branches: number;
  /** Wall time to seed every branch, and the pushes it took. */
  seedMs: number;
  seedPushes: number;
  /** Median wall time of a write that changes one Cluster's branch. */
  msOneChange: number;
  oneChangeSamplesMs: number[];
  /**
   * Medians of the one-change write's phases: reading tips, building the commit, pushing; and
   * of the part of the push spent waiting on the Git server (`remote`).
   */
  oneChangePhasesMs: { plan: number; build: number; push: number; remote: number };
  /** Median wall time of a write of one Cluster whose files did not change (no push). */
  msNoChange: number;
  /** A new writer instance's first refresh (fetch of every branch into an existing cache). */
  msRefresh: number;
  /** Resident set size of this process after the run, MB. */
  rssMb: number;
}

const ADDONS = ['cni', 'csi', 'metrics-server'] as const;

/** One Cluster's rendered files: a kustomization and a manifest or two per addon. */
export function clusterFiles(namespace: string, cluster: string, rev: number): Map<string, string> {
  const files = new Map<string, string>();
  for (const addon of ADDONS) {
    files.set(
      `${addon}/kustomization.yaml`,
      `apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ${addon}.yaml\n`,
    );
    files.set(
      `${addon}/${addon}.yaml`,
      [
        'apiVersion: v1',
        'kind: ConfigMap',
        'metadata:',
        `  name: ${addon}-config`,
        '  namespace: kube-system',
        '  labels:',
        '    app.kubernetes.io/managed-by: stackflux',
        `    stackflux.io/cluster: ${namespace}.${cluster}`,
        'data:',
        `  clusterName: ${cluster}`,
        `  podCIDR: 10.${(rev >> 8) & 255}.${rev & 255}.0/16`,
        '  replicas: "2"',
        '',
      ].join('\n'),
    );
  }
  return files;
}

function branchChange(i: number, rev: number, message: string): BranchChange {
  const namespace = `ns-${i % 10}`;
  const cluster = `cluster-${String(i).padStart(5, '0')}`;
  return {
    branch: `stackflux/${namespace}/${cluster}`,
    files: clusterFiles(namespace, cluster, rev),
    message,
  };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

async function timed<T>(fn: () => Promise<T>): Promise<[number, T]> {
  const start = performance.now();
  const value = await fn();
  return [performance.now() - start, value];
}

export async function benchWriter(opts: BenchWriterOptions): Promise<BenchWriterResult> {
  const log = opts.log ?? (() => undefined);
  const batch = opts.batch ?? 1_000;
  const samples = opts.samples ?? 5;
  const cacheDir = opts.cacheDir ?? mkdtempSync(join(tmpdir(), 'stackflux-bench-writer-'));
  const config = {
    url: opts.url,
    branchPrefix: 'stackflux/',
    cacheDir,
    credentials: opts.credentials,
    author: { name: 'stackflux-bench', email: 'bench@example.invalid' },
  };
  const writer = new GitFleetWriter(config);
  try {
    // Seed: batches of `batch` Clusters, one push each.
    let seedPushes = 0;
    const [seedMs] = await timed(async () => {
      await writer.refresh();
      for (let from = 0; from < opts.branches; from += batch) {
        const to = Math.min(opts.branches, from + batch);
        const changes = Array.from({ length: to - from }, (_, k) => branchChange(from + k, 1, 'seed'));
        seedPushes += (await writer.write(changes)).pushes;
        log(`seeded ${to}/${opts.branches}`);
      }
    });

    // One Cluster changed (a different one each time, spread over the fleet).
    const oneChangeSamplesMs: number[] = [];
    const phases: Array<{ plan: number; build: number; push: number; remote: number }> = [];
    for (let s = 0; s < samples; s++) {
      const i = Math.floor(((s + 0.5) * opts.branches) / samples);
      const [ms, res] = await timed(() => writer.write([branchChange(i, 2 + s, `values change ${s}`)]));
      if (res.changed.length !== 1) throw new Error(`one-change write moved ${res.changed.length} branches`);
      oneChangeSamplesMs.push(ms);
      phases.push(res.ms);
    }
    const noChange: number[] = [];
    for (let s = 0; s < samples; s++) {
      const [ms, res] = await timed(() => writer.write([branchChange(s, 1, 'unchanged')]));
      if (res.pushed) throw new Error('an unchanged write pushed');
      noChange.push(ms);
    }
    await writer.close();
    const fresh = new GitFleetWriter(config);
    const [msRefresh] = await timed(() => fresh.refresh());
    await fresh.close();
    return {
      branches: opts.branches,
      seedMs: Math.round(seedMs),
      seedPushes,
      msOneChange: Math.round(median(oneChangeSamplesMs) * 10) / 10,
      oneChangeSamplesMs: oneChangeSamplesMs.map((v) => Math.round(v * 10) / 10),
      oneChangePhasesMs: {
        plan: median(phases.map((p) => p.plan)),
        build: median(phases.map((p) => p.build)),
        push: median(phases.map((p) => p.push)),
        remote: median(phases.map((p) => p.remote)),
      },
      msNoChange: Math.round(median(noChange) * 10) / 10,
      msRefresh: Math.round(msRefresh),
      rssMb: Math.round(process.memoryUsage().rss / 1e6),
    };
  } finally {
    await writer.close();
    if (opts.cacheDir === undefined) rmSync(cacheDir, { recursive: true, force: true });
  }
}

// Run alone: one new repository per N on $GIT_SERVER_URL.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const server = process.env.GIT_SERVER_URL;
  if (!server) throw new Error('GIT_SERVER_URL is not set: source the env.sh of a running hack/testenv');
  const sizes = process.argv.slice(2).map(Number);
  for (const n of sizes.length > 0 ? sizes : [100, 10_000]) {
    const name = `bench-writer-${n}-${Date.now()}`;
    const res = await fetch(`${server}/-/repos/${name}`, { method: 'POST' });
    if (!res.ok) throw new Error(`creating ${name}: HTTP ${res.status}`);
    const result = await benchWriter({
      url: `${server}/${name}.git`,
      branches: n,
      log: (m) => process.stderr.write(`bench-writer ${n}: ${m}\n`),
    });
    process.stdout.write(`${JSON.stringify(result)}\n`);
  }
}
