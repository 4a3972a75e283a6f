// `npm run bench`: a short benchmark (not a test) of the runtime's hot parts, printed as ratios to
// baselines measured in the same run so numbers compare across machines.
//  1. queue throughput: WorkQueue add/get/done vs a bare array+Set FIFO (the floor for any queue);
//  2. informer memory per 1,000 objects: what the informer cache retains (managedFields stripped,
//     indexes) vs the same objects as decoded from the API server.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { KubeObject } from '../../controller/runtime/client.ts';
import { objectKey, stripManagedFields } from '../../controller/runtime/informer.ts';
import { WorkQueue } from '../../controller/runtime/workqueue.ts';

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

// --- 2. informer memory per 1,000 objects --------------------------------------------------------
function apiObject(i: number): KubeObject {
  // The shape of a ConfigMap as the API server returns it, managedFields included.
  const json = JSON.stringify({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: `cm-${i}`,
      namespace: `ns-${i % 10}`,
      uid: `5f0c${String(i).padStart(8, '0')}-aaaa-bbbb-cccc-0123456789ab`,
      resourceVersion: String(100000 + i),
      creationTimestamp: '2025-01-01T00:00:00Z',
      labels: { 'app.kubernetes.io/managed-by': 'stackflux', 'stackflux.io/cluster': `c-${i}` },
      managedFields: [
        {
          manager: 'stackflux',
          operation: 'Apply',
          apiVersion: 'v1',
          time: '2025-01-01T00:00:00Z',
          fieldsType: 'FieldsV1',
          fieldsV1: {
            'f:data': { 'f:a': {}, 'f:b': {} },
            'f:metadata': {
              'f:labels': { 'f:app.kubernetes.io/managed-by': {}, 'f:stackflux.io/cluster': {} },
            },
          },
        },
      ],
    },
    data: { a: 'x'.repeat(200), b: `value-${i}` },
  });
  return JSON.parse(json) as KubeObject;
}

function heapFor(count: number, transform: (o: KubeObject) => KubeObject): number {
  gc();
  const before = process.memoryUsage().heapUsed;
  const store = new Map<string, KubeObject>();
  for (let i = 0; i < count; i++) {
    const o = transform(apiObject(i));
    store.set(objectKey(o), o);
  }
  gc();
  const after = process.memoryUsage().heapUsed;
  if (store.size !== count) throw new Error('store size');
  return after - before;
}

const COUNT = 10_000;
heapFor(1000, (o) => o);
const rawBytes = heapFor(COUNT, (o) => o);
const cachedBytes = heapFor(COUNT, (o) => stripManagedFields(o));
const per1000 = (b: number) => `${(((b / COUNT) * 1000) / 1024).toFixed(0)} KiB`;

console.log('stackflux runtime benchmark (ratios are to baselines measured in this run)');
console.log('');
console.log(`queue throughput      ${(opsPerSec / 1e6).toFixed(2)} M keys/s (add+get+done, ${N} keys)`);
console.log(`  baseline            array+Set FIFO: ${(((N / baseMs) * 1000) / 1e6).toFixed(2)} M keys/s`);
console.log(`  ratio               ${(queueMs / baseMs).toFixed(2)}x the baseline's time per key`);
console.log('');
console.log(`informer memory       ${per1000(cachedBytes)} per 1,000 ConfigMaps (managedFields stripped)`);
console.log(`  baseline            ${per1000(rawBytes)} per 1,000 as decoded from the API`);
console.log(`  ratio               ${(cachedBytes / rawBytes).toFixed(2)}x the baseline`);
