// `npm run bench` (or `npm run bench -- runtime`): a short benchmark (not a test) of the
// runtime's hot parts, printed as ratios to baselines measured in the same run so numbers
// compare across machines.
//  1. queue throughput: WorkQueue add/get/done vs a bare array+Set FIFO (the floor for any queue);
//  2. informer memory and sync time per 1,000 objects, against a real kube-apiserver: what the
//     informer cache retains (managedFields stripped) vs the same objects kept from a plain LIST,
//     and its list+watch sync vs that LIST. Uses $KUBECONFIG, else starts hack/testenv for the run.

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { KubeClient, loadKubeConfig } from '../../controller/runtime/client.ts';
import { Informer } from '../../controller/runtime/informer.ts';
import { WorkQueue } from '../../controller/runtime/workqueue.ts';
import { down, up } from '../../hack/lib/testenv.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

function timeIt(fn: () => void): number {
  const start = process.hrtime.bigint();
  fn();
  return Number(process.hrtime.bigint() - start) / 1e6;
}

function best(runs: number, fn: () => void): number {
  let min = Number.POSITIVE_INFINITY;
  for (let i = 0; i < runs; i++) min = Math.min(min, timeIt(fn));
  return min;
}

// --- 1. queue throughput -------------------------------------------------------------------------
const N = 200_000;
const keys = Array.from({ length: N }, (_, i) => `ns-${i % 100}/obj-${i}`);

function baselineQueue(): void {
  const items: string[] = [];
  const dirty = new Set<string>();
  for (const k of keys) {
    if (dirty.has(k)) continue;
    dirty.add(k);
    items.push(k);
  }
  let head = 0;
  while (head < items.length) {
    const k = items[head++] as string;
    dirty.delete(k);
  }
}

function workQueue(): void {
  const q = new WorkQueue({ name: 'bench' });
  for (const k of keys) q.add(k);
  for (let k = q.tryGet(); k !== undefined; k = q.tryGet()) q.done(k);
}

baselineQueue();
workQueue();
const baseMs = best(5, baselineQueue);
const queueMs = best(5, workQueue);
const opsPerSec = (N / queueMs) * 1000;

// --- 2. informer memory and sync time per 1,000 objects, real API server ------------------------
const COUNT = 1_000;
let stateDir: string | undefined;
let kubeconfig = process.env.KUBECONFIG;
if (!kubeconfig) {
  stateDir = mkdtempSync(join(tmpdir(), 'stackflux-bench-'));
  process.stderr.write('bench: no KUBECONFIG; starting hack/testenv for this run…\n');
  kubeconfig = (await up(stateDir, (m) => process.stderr.write(`bench: ${m}\n`))).kubeconfig;
}
// The client's own QPS limit (20/s) would measure the limiter, not the informer.
const client = new KubeClient(loadKubeConfig({ kubeconfig }), { qps: 1000, burst: 1000 });
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    if (stateDir) void down(stateDir, () => undefined).finally(() => process.exit(130));
    else process.exit(130);
  });
}
const ns = `bench-${process.pid}`;
try {
  await client.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < COUNT) {
      const i = next++;
      await client.apply(
        {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: `cm-${i}`, namespace: ns, labels: { 'stackflux.io/cluster': `c-${i}` } },
          data: { a: 'x'.repeat(200), b: `value-${i}` },
        },
        { force: true },
      );
    }
  };
  await Promise.all(Array.from({ length: 20 }, worker));

  // Baseline: the objects as a plain LIST returns them, kept in memory.
  gc();
  let before = process.memoryUsage().heapUsed;
  let t0 = process.hrtime.bigint();
  const listed = await client.listAll('v1', 'ConfigMap', { namespace: ns });
  const listMs = Number(process.hrtime.bigint() - t0) / 1e6;
  gc();
  const rawBytes = process.memoryUsage().heapUsed - before;
  if (listed.items.length !== COUNT) throw new Error(`listed ${listed.items.length}`);

  // The informer: list + watch, managedFields stripped, what every controller reads from.
  gc();
  before = process.memoryUsage().heapUsed;
  t0 = process.hrtime.bigint();
  const inf = new Informer({ client, apiVersion: 'v1', kind: 'ConfigMap', namespace: ns });
  inf.start();
  await inf.waitForSync();
  const syncMs = Number(process.hrtime.bigint() - t0) / 1e6;
  gc();
  const cachedBytes = process.memoryUsage().heapUsed - before;
  if (inf.list().length !== COUNT) throw new Error(`cached ${inf.list().length}`);
  await inf.stop();
  const per1000 = (b: number) => `${(((b / COUNT) * 1000) / 1024).toFixed(0)} KiB`;
  const msPer1000 = (ms: number) => `${((ms / COUNT) * 1000).toFixed(0)} ms`;

  console.log('stackflux runtime benchmark (ratios are to baselines measured in this run)');
  console.log('');
  console.log(`queue throughput      ${(opsPerSec / 1e6).toFixed(2)} M keys/s (add+get+done, ${N} keys)`);
  console.log(`  baseline            array+Set FIFO: ${(((N / baseMs) * 1000) / 1e6).toFixed(2)} M keys/s`);
  console.log(`  ratio               ${(queueMs / baseMs).toFixed(2)}x the baseline's time per key`);
  console.log('');
  console.log(
    `informer memory       ${per1000(cachedBytes)} per 1,000 ConfigMaps (real API server, ${COUNT} objects)`,
  );
  console.log(`  baseline            ${per1000(rawBytes)} per 1,000 kept from a plain LIST`);
  console.log(`  ratio               ${(cachedBytes / rawBytes).toFixed(2)}x the baseline`);
  console.log('');
  console.log(`informer sync         ${msPer1000(syncMs)} per 1,000 (list + watch established)`);
  console.log(`  baseline            ${msPer1000(listMs)} per 1,000 for the plain LIST`);
  console.log(`  ratio               ${(syncMs / listMs).toFixed(2)}x the baseline`);
} finally {
  await client.delete('v1', 'Namespace', ns).catch(() => undefined);
  client.close();
  if (stateDir) await down(stateDir, () => undefined);
}
