// Kills the management kube-apiserver in the middle of 1,000 writes and starts it again: the
// informer must reconnect on its own and end as an exact mirror. "Disruptive" test files run
// after all others, one at a time (hack/run-tests.ts), because they break the shared cluster.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ApiError, type KubeClient } from '../../../controller/runtime/client.ts';
import { Informer } from '../../../controller/runtime/informer.ts';
import { restartComponent } from '../../../hack/lib/testenv.ts';
import { eventually, testEnv } from '../../support/env.ts';
import {
  type ConfigMap,
  deleteNamespace,
  diff,
  freshNamespace,
  inParallel,
  mirror,
  rng,
  runtimeClient,
  snapshot,
} from './helpers.ts';

/** Retries one write until the API server answers: during the restart every call fails. */
async function retrying(op: () => Promise<unknown>): Promise<void> {
  // A loaded machine can take well over 20 s to bring kube-apiserver back: retry for minutes.
  const deadline = Date.now() + 180_000;
  for (let attempt = 0; ; attempt++) {
    try {
      await op();
      return;
    } catch (err) {
      const status = err instanceof ApiError ? err.status : 0;
      // 404/409 after a retry mean an earlier attempt did land before the connection broke.
      if (attempt > 0 && (status === 404 || status === 409)) return;
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

describe('Informer through a kube-apiserver restart', () => {
  let client: KubeClient;
  let ns: string;

  before(async () => {
    client = runtimeClient();
    ns = await freshNamespace(client, 'informer-restart');
  });

  after(async () => {
    await deleteNamespace(client, ns).catch(() => undefined);
    client.close();
  });

  it('mirrors 1,000 creates/updates/deletes exactly although the API server is killed halfway', async (t) => {
    const inf = new Informer<ConfigMap>({ client, apiVersion: 'v1', kind: 'ConfigMap', namespace: ns });
    t.after(() => inf.stop());
    inf.start();
    await inf.waitForSync();
    const watchesBefore = inf.stats.watches;

    const random = rng(7);
    const live: string[] = [];
    let created = 0;
    let ran = 0;
    for (let wave = 0; wave < 10; wave++) {
      const ops: Array<() => Promise<void>> = [];
      for (let i = 0; i < 50; i++) {
        const name = `cm-${created++}`;
        live.push(name);
        ops.push(() =>
          retrying(() =>
            client.create({
              apiVersion: 'v1',
              kind: 'ConfigMap',
              metadata: { name, namespace: ns },
              data: { v: '0' },
            }),
          ),
        );
      }
      await inParallel(ops, 10, (op) => op());
      ran += ops.length;
      const touched = new Set<string>();
      const others: Array<() => Promise<void>> = [];
      for (let i = 0; i < 50; i++) {
        const candidates = live.filter((n) => !touched.has(n));
        const name = candidates[Math.floor(random() * candidates.length)];
        if (!name) continue;
        touched.add(name);
        if (i % 5 < 2) {
          live.splice(live.indexOf(name), 1);
          others.push(() => retrying(() => client.delete('v1', 'ConfigMap', name, ns)));
        } else {
          const v = String(Math.floor(random() * 1e9));
          others.push(() => retrying(() => client.mergePatch('v1', 'ConfigMap', name, ns, { data: { v } })));
        }
      }
      if (wave === 5) {
        // Crash the API server while this wave's writes are in flight.
        const writes = inParallel(others, 10, (op) => op());
        await restartComponent(testEnv().stateDir, 'kube-apiserver');
        await writes;
      } else {
        await inParallel(others, 10, (op) => op());
      }
      ran += others.length;
    }
    assert.equal(ran, 1000);

    await eventually('cache equals a fresh LIST', async () => {
      const want = await snapshot(client, ns);
      return diff(want, mirror(inf)) === undefined ? true : undefined;
    });
    const want = await snapshot(client, ns);
    assert.equal(diff(want, mirror(inf)), undefined, 'cache vs LIST');
    assert.equal(want.size, live.length, 'the LIST holds exactly the objects the test left');
    assert.ok(
      inf.stats.watches > watchesBefore,
      `the watch was re-established (stats ${JSON.stringify(inf.stats)})`,
    );
  });
});
