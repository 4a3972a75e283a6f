// Issue 22 row 5 end to end: a tenant's Progressive ClusterStack whose health check would take the
// controller's one thread for seconds (six nested .all over 20 items: 64 million steps) is refused
// with a condition naming the limit, and the controller stays responsive: /healthz answers and a
// benign ClusterStack in another namespace still gets its release Ready.
// `stackflux run` (rollout controller: it runs with --fleet-url) over all namespaces, limited to
// this file's objects by its own --shard key, against the real test environment.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ClusterStack } from '../../controller/api/clusterstack.ts';
import { API_VERSION } from '../../controller/api/meta.ts';
import type { KubeObject } from '../../controller/runtime/client.ts';
import { SHARD_LABEL } from '../../controller/runtime/manager.ts';
import { createRepo, type Endpoints } from '../../hack/lib/testenv.ts';
import { nestedAll } from '../support/cel.ts';
import {
  ControllerProcess,
  cond,
  controllerSteps,
  createTestNamespace,
  deleteTestNamespace,
  e2eSuite,
  initRepo,
  pinnedFerrolStack,
  releaseFerrol130,
  releaseReaders,
  waitFor,
} from '../support/e2e.ts';

const { env, client, ns, work, repoDir } = e2eSuite('celcost');
const benignNs = `${ns}-benign`;
const shard = ns;
const TAG = 'docker-ferrol-1-30-v1';
let controller: ControllerProcess | undefined;
const step = controllerSteps(() => controller);

describe('a costly rollout health check is refused; the controller stays responsive (celhook)', {
  timeout: 10 * 60_000,
}, () => {
  before(async () => {
    await createTestNamespace(client, ns);
    await createTestNamespace(client, benignNs);
    const repoUrl = await createRepo(env as Endpoints, `${ns}-release`);
    const fleetUrl = await createRepo(env as Endpoints, `${ns}-fleet`);
    initRepo(repoDir);
    releaseFerrol130(repoDir, repoUrl, 'v1');
    controller = await ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: '', // every namespace; --shard keeps it to this file's objects
      cacheDir: join(work, 'cache'),
      extraArgs: [`--shard=${shard}`, `--fleet-url=${fleetUrl}`, '--fleet-batch-window=1s'],
    });
    const costly = pinnedFerrolStack(ns, repoUrl, ['v1'], { [SHARD_LABEL]: shard });
    costly.spec.rollout = { strategy: 'Progressive', healthCheck: { expression: nestedAll(6) } };
    await client.create(costly);
    await client.create(pinnedFerrolStack(benignNs, repoUrl, ['v1'], { [SHARD_LABEL]: shard }));
  });

  after(async () => {
    // While the controller runs, so it removes its finalizers.
    for (const n of [ns, benignNs]) await deleteTestNamespace(client, n);
    await controller?.stop();
    client.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('the costly ClusterStack says HealthCheckTooCostly; /healthz answers; the benign release becomes Ready', () =>
    step(async () => {
      const c = controller;
      assert.ok(c);
      const stalled = await waitFor('the Rollout condition names the cost limit', async () => {
        const cs = await client.get<ClusterStack & KubeObject>(API_VERSION, 'ClusterStack', 'ferrol', ns);
        const rollout = cond(cs, 'Rollout');
        return cs !== undefined && rollout?.reason === 'HealthCheckTooCostly' ? { cs, rollout } : undefined;
      });
      assert.equal(stalled.rollout.status, 'False');
      assert.match(stalled.rollout.message ?? '', /healthCheck\.expression .*more than the limit of 1000000/);
      assert.equal(stalled.cs.status?.rollout?.phase, 'Stalled');

      // The signal: the process answers its health endpoint (the guard only stops a hang).
      const healthz = await fetch(c.readyzUrl.replace(/\/readyz$/, '/healthz'), {
        signal: AbortSignal.timeout(30_000),
      });
      assert.equal(healthz.status, 200);

      const benign = releaseReaders(client, benignNs);
      const ready = await waitFor(`${TAG} Ready in ${benignNs}`, () => benign.releaseReady(TAG));
      assert.equal(ready.metadata.namespace, benignNs);
      assert.ok(c.running, 'the controller did not crash');
    }));
});
