// Issue 10, item 3: on a converged fleet a resync writes nothing. `stackflux run` converges a
// ClusterStack, its release and two Clusters' addons (Flux applies them into the workload
// cluster), then a NEW process starts: it reconciles every key from a cold cache, as after a
// restart or a full resync, and must send no POST, PUT, PATCH or DELETE — counted by its own
// rest_client_requests_total. The first process's writes show the counter counts.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ClusterAddon } from '../../controller/api/clusteraddon.ts';
import { API_VERSION } from '../../controller/api/meta.ts';
import { KubeClient, type KubeObject, loadKubeConfig } from '../../controller/runtime/client.ts';
import { createRepo, type Endpoints, workloadKubeconfigSecret } from '../../hack/lib/testenv.ts';
import {
  CAPI,
  ControllerProcess,
  cond,
  createTestNamespace,
  cutRelease,
  e2eEnv,
  ferrolStackAt,
  initRepo,
  push,
  releaseControllerHolds,
  required,
  sleep,
} from '../support/e2e.ts';
import { eventually, uniqueName } from '../support/env.ts';

const env = { ...e2eEnv(), workloadKubeconfig: required('WORKLOAD_KUBECONFIG') };
const client = new KubeClient(loadKubeConfig({ kubeconfig: env.kubeconfig }), { qps: 200, burst: 200 });
const ns = uniqueName('converged');
const work = mkdtempSync(join(tmpdir(), 'stackflux-converged-'));
const TAG = 'docker-ferrol-1-30-v1';
const CLUSTERS = ['c1', 'c2'];
const WRITE_METHODS = ['POST', 'PUT', 'PATCH', 'DELETE'];

async function writes(c: ControllerProcess): Promise<number> {
  let n = 0;
  for (const method of WRITE_METHODS) n += await c.metric('rest_client_requests_total', { method });
  return n;
}

/** Every controller reconciled at least `keys` keys and nothing is queued or running. */
async function idleAfter(c: ControllerProcess, keys: Record<string, number>): Promise<void> {
  await eventually(
    `every key reconciled by a fresh controller (${JSON.stringify(keys)})`,
    async () => {
      for (const [controller, n] of Object.entries(keys)) {
        if ((await c.metric('controller_runtime_reconcile_total', { controller })) < n) return undefined;
        if ((await c.metric('controller_runtime_active_workers', { controller })) !== 0) return undefined;
        if ((await c.metric('workqueue_depth', { name: controller })) !== 0) return undefined;
      }
      return true;
    },
    { timeoutMs: 120_000 },
  );
}

describe('a converged fleet: a resync writes nothing', { timeout: 15 * 60_000 }, () => {
  let controller: ControllerProcess | undefined;
  let fleetUrl = '';

  const start = async (): Promise<ControllerProcess> =>
    ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: ns,
      cacheDir: join(work, 'cache'),
      concurrency: 2,
      extraArgs: [`--fleet-url=${fleetUrl}`, '--fleet-batch-window=1s'],
    });

  before(async () => {
    await createTestNamespace(client, ns);
    const repoUrl = await createRepo(env as Endpoints, `${ns}-release`);
    fleetUrl = await createRepo(env as Endpoints, `${ns}-fleet`);
    const repoDir = join(work, 'release');
    initRepo(repoDir);
    cutRelease(repoDir, 'stack', { example: 'docker-ferrol-1-30', k8s: '1-30', version: 'v1' });
    push(repoDir, repoUrl, TAG);
    controller = await start();
    await client.create(ferrolStackAt(ns, repoUrl, { path: 'stack', versions: ['v1'], interval: '10m' }));
    const kubeconfig = readFileSync(env.workloadKubeconfig, 'utf8');
    for (const [i, name] of CLUSTERS.entries()) {
      await client.create(workloadKubeconfigSecret(ns, name, kubeconfig) as KubeObject);
      await client.create({
        apiVersion: CAPI,
        kind: 'Cluster',
        metadata: { name, namespace: ns },
        spec: {
          clusterNetwork: { pods: { cidrBlocks: [`10.${240 + i}.0.0/16`] } },
          controlPlaneEndpoint: { host: `${name}.example.internal`, port: 6443 },
          topology: { classRef: { name: TAG }, version: 'v1.30.4' },
        },
      });
    }
  });

  after(async () => {
    await controller?.stop();
    await releaseControllerHolds(client, ns);
    await client.delete('v1', 'Namespace', ns).catch(() => undefined);
    client.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('a fresh controller reconciles every converged key without one write', async () => {
    const first = controller;
    assert.ok(first);
    await first.step(async () => {
      for (const name of CLUSTERS) {
        await eventually(
          `ClusterAddon ${name} Ready`,
          async () => {
            const ca = await client.get<ClusterAddon & KubeObject>(API_VERSION, 'ClusterAddon', name, ns);
            return cond(ca, 'Ready')?.status === 'True' ? ca : undefined;
          },
          { timeoutMs: 600_000 },
        );
      }
      // Flux's last status updates of this round reach the controller and are answered.
      await sleep(10_000);
      assert.ok((await writes(first)) > 0, 'converging wrote objects and was counted');
      await first.stop();
    });

    const fresh = await start();
    controller = fresh;
    await fresh.step(async () => {
      await idleAfter(fresh, { clusterstack: 1, clusterstackrelease: 1, clusteraddon: CLUSTERS.length });
      await sleep(5_000); // a batch window and any requeue after it
      const writes = await fresh.samples('stackflux_api_requests_total', (l) =>
        WRITE_METHODS.includes(l.method ?? ''),
      );
      // The one write a fresh process may make: the ClusterStack records the time of its new
      // listing of the source (status.source.lastListedTime), once per listing.
      const listingRecord = 'PATCH clusterstacks/status';
      const other = writes.filter(
        (w) => `${w.labels.method} ${w.labels.resource}` !== listingRecord && w.value > 0,
      );
      const describe = writes.map((w) => `${w.labels.method} ${w.labels.resource}=${w.value}`).join(', ');
      assert.deepEqual(other, [], `writes on a converged fleet: ${describe}\n${fresh.logTail(40)}`);
      const record =
        writes.find((w) => `${w.labels.method} ${w.labels.resource}` === listingRecord)?.value ?? 0;
      assert.ok(record <= 1, `the ClusterStack status was written ${record} times: ${describe}`);
      assert.ok((await fresh.metric('rest_client_requests_total', { method: 'GET' })) > 0, 'it did read');
    });
  });
});
