// 429 Too Many Requests with Retry-After (what API priority and fairness answers an overloaded
// client): the runtime client waits the time the server names, sends the same request again, and
// every write lands. A fault-injecting proxy (test/support/api-fault-proxy.ts) in front of the real
// kube-apiserver refuses a fixed set of requests; its request log says when the client came back.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { KubeClient } from '../../../controller/runtime/client.ts';
import { FaultProxy, type ProxyEntry } from '../../support/api-fault-proxy.ts';
import { kubeConfigFrom, testEnv } from '../../support/env.ts';
import { type ConfigMap, deleteNamespace, freshNamespace, inParallel, runtimeClient } from './helpers.ts';

const N = 60;
const index = (name: string): number => Number(/^cm-(\d+)$/.exec(name)?.[1] ?? -1);

describe('runtime client and 429 Retry-After', () => {
  let direct: KubeClient;
  let proxy: FaultProxy;
  let viaProxy: KubeClient;
  let ns: string;

  before(async () => {
    direct = runtimeClient();
    ns = await freshNamespace(direct, 'retry-after');
    // Fixed refusals: the first create of every 3rd ConfigMap (Retry-After 1 s), the second one
    // too for every 6th (Retry-After 2 s: refused twice in a row), the first apply of every 4th.
    proxy = await FaultProxy.start(testEnv().kubeconfig, ({ method, path, name, attempt }) => {
      const i = index(name);
      if (i < 0 || !path.includes(`/namespaces/${ns}/`)) return undefined;
      if (method === 'POST' && i % 3 === 0 && attempt === 0) return 1;
      if (method === 'POST' && i % 6 === 0 && attempt === 1) return 2;
      if (method === 'PATCH' && i % 4 === 0 && attempt === 0) return 1;
      return undefined;
    });
    viaProxy = new KubeClient(kubeConfigFrom(proxy.kubeconfig), { qps: 500, burst: 500 });
  });

  after(async () => {
    viaProxy.close();
    await proxy.close();
    await deleteNamespace(direct, ns).catch(() => undefined);
    direct.close();
  });

  it('waits at least Retry-After before sending a refused request again, and every write lands', async () => {
    const names = Array.from({ length: N }, (_, i) => `cm-${i}`);
    await inParallel(names, 16, async (name) => {
      await viaProxy.create({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name, namespace: ns },
        data: { v: '0' },
      });
      await viaProxy.apply(
        { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: ns }, data: { v: '1' } },
        { fieldManager: 'retry-after-test', force: true },
      );
    });

    // The end state, read past the proxy: every ConfigMap exists with the applied data.
    const list = await direct.listAll<ConfigMap>('v1', 'ConfigMap', { namespace: ns });
    const got = new Map(list.items.map((c) => [c.metadata.name ?? '', c.data?.v]));
    for (const name of names) assert.equal(got.get(name), '1', `${name} created and applied`);

    // The refusals happened as planned: creates of cm-0,3,..,57 (20), again for cm-0,6,..,54 (10),
    // applies of cm-0,4,..,56 (15).
    const refused = proxy.refused();
    assert.equal(refused.filter((e) => e.method === 'POST').length, 30);
    assert.equal(refused.filter((e) => e.method === 'PATCH').length, 15);

    // Each refused request came back exactly once more per refusal, never before Retry-After
    // (times from the proxy's log: receive of the refused request → receive of the next one; the
    // client only starts waiting after the whole answer arrived, so this gap can only be longer).
    const next = (e: ProxyEntry): ProxyEntry | undefined =>
      proxy.log.find(
        (o) => o.method === e.method && o.path === e.path && o.name === e.name && o.attempt === e.attempt + 1,
      );
    for (const e of refused) {
      const again = next(e);
      assert.ok(again, `${e.method} ${e.name} was sent again after the 429`);
      const waited = again.at - e.at;
      // 5 ms: the resolution of two timestamps, not a performance bound.
      assert.ok(
        waited >= (e.retryAfter ?? 0) * 1000 - 5,
        `${e.method} ${e.name} came back after ${Math.round(waited)} ms, before Retry-After ${e.retryAfter} s`,
      );
    }
    // Nothing but the refused ones was repeated: one create and one apply per ConfigMap succeeded.
    const ok = proxy.log.filter((e) => index(e.name) >= 0 && e.status >= 200 && e.status < 300);
    assert.equal(ok.filter((e) => e.method === 'POST').length, N);
    assert.equal(ok.filter((e) => e.method === 'PATCH').length, N);
  });
});
