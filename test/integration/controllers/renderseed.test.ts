// Issue 32 against the real API server: the installation's render seed key in a Secret
// (controllers/renderseed.ts). Replicas that start at the same moment race to create it and must
// all end with one key; a Secret that holds no key is refused naming it, and left as it is.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  loadRenderSeedKey,
  type RenderSeedSecret,
  RenderSeedSecretError,
  renderSeedKeyOfSecret,
} from '../../../controller/controllers/renderseed.ts';
import { KubeClient } from '../../../controller/runtime/client.ts';
import { kubeConfigFrom, testEnv, uniqueName } from '../../support/env.ts';

describe('the render seed Secret on the API server', { timeout: 120_000 }, () => {
  const env = testEnv();
  const ns = uniqueName('seed');
  // One client per replica: their requests race on separate connections, as two Pods' would.
  const replicas = Array.from(
    { length: 3 },
    () => new KubeClient(kubeConfigFrom(env.kubeconfig), { qps: 100, burst: 100 }),
  );
  const admin = replicas[0] as KubeClient;
  const secret = (name: string) => admin.get<RenderSeedSecret>('v1', 'Secret', name, ns);

  before(async () => {
    await admin.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
  });
  after(async () => {
    await admin.delete('v1', 'Namespace', ns).catch(() => undefined);
    for (const c of replicas) c.close();
  });

  it('replicas starting together end with one key, the one the Secret holds; exactly one created it', async () => {
    for (let round = 0; round < 5; round++) {
      const ref = { namespace: ns, name: `seed-${round}` };
      const loaded = await Promise.all(replicas.map((c) => loadRenderSeedKey(c, ref)));
      const keys = new Set(loaded.map((l) => l.key));
      assert.equal(keys.size, 1, `round ${round}: replicas use different keys: ${JSON.stringify(loaded)}`);
      const stored = await secret(ref.name);
      assert.ok(stored, `round ${round}: the Secret exists`);
      assert.deepEqual(renderSeedKeyOfSecret(stored), { key: loaded[0]?.key });
      assert.equal(stored.immutable, true);
      assert.equal(
        loaded.filter((l) => l.origin === 'created').length,
        1,
        `round ${round}: one replica created it: ${loaded.map((l) => l.origin).join(', ')}`,
      );
    }
  });

  it('a later start reads the key it finds and creates nothing', async () => {
    const ref = { namespace: ns, name: 'seed-0' };
    const before = await secret(ref.name);
    const again = await loadRenderSeedKey(replicas[1] as KubeClient, ref);
    assert.equal(again.origin, 'read');
    assert.deepEqual(renderSeedKeyOfSecret(before as RenderSeedSecret), { key: again.key });
    assert.equal((await secret(ref.name))?.metadata.resourceVersion, before?.metadata.resourceVersion);
  });

  it('a Secret without a usable key is refused with a message naming it, and not replaced', async () => {
    const name = 'seed-malformed';
    await admin.create({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name, namespace: ns },
      stringData: { key: 'not-a-key' },
    });
    const before = await secret(name);
    await assert.rejects(
      loadRenderSeedKey(replicas[1] as KubeClient, { namespace: ns, name }),
      (err: unknown) => {
        assert.ok(err instanceof RenderSeedSecretError, String(err));
        assert.match(
          err.message,
          new RegExp(
            `^render seed Secret ${ns}/${name} holds no usable key: its data.key is not 64 hex digits \\(32 bytes\\) but 9 character\\(s\\)\\. Restore the key .* or delete the Secret`,
          ),
        );
        assert.doesNotMatch(err.message, /not-a-key/, 'the value is never shown');
        return true;
      },
    );
    const afterRefusal = await secret(name);
    assert.equal(afterRefusal?.metadata.resourceVersion, before?.metadata.resourceVersion, 'left as it was');
  });
});
