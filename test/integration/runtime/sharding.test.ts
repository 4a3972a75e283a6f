import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { KubeClient, KubeObject } from '../../../controller/runtime/client.ts';
import type { Lease } from '../../../controller/runtime/leaderelection.ts';
import { Manager, SHARD_LABEL, shardSelector } from '../../../controller/runtime/manager.ts';
import { eventually } from '../../support/env.ts';
import { deleteNamespace, freshNamespace, runtimeClient } from './helpers.ts';

const timings = { leaseDurationMs: 3000, renewDeadlineMs: 2000, retryPeriodMs: 400 };

describe('Sharding (--shard) against the real API server', () => {
  let client: KubeClient;
  let ns: string;

  before(async () => {
    client = runtimeClient();
    ns = await freshNamespace(client, 'shard');
  });

  after(async () => {
    await deleteNamespace(client, ns);
    client.close();
  });

  it('selectors follow Flux: KEY → sharding.fluxcd.io/key=KEY, none → objects without a key', () => {
    assert.equal(shardSelector('a'), 'sharding.fluxcd.io/key=a');
    assert.equal(shardSelector(undefined), '!sharding.fluxcd.io/key');
  });

  it('managers with different shard keys each reconcile only their labelled objects, each on its own Lease', async () => {
    const seen = new Map<string, Set<string>>();
    const make = (shard: string | undefined) => {
      const id = shard ?? 'none';
      const keys = new Set<string>();
      seen.set(id, keys);
      const m = new Manager({
        client,
        ...(shard !== undefined ? { shard } : {}),
        leaderElection: { namespace: ns, name: 'stackflux', identity: `m-${id}`, ...timings },
        shutdownTimeoutMs: 5000,
      });
      const c = m.addController({
        name: `shard-${id}`,
        reconcile: (key) => {
          keys.add(key);
          return undefined;
        },
      });
      m.watch(c, m.shardedInformer('v1', 'ConfigMap', { namespace: ns, labelSelector: 'shard-test=y' }));
      return m;
    };
    const cm = (name: string, shard?: string): KubeObject => ({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name,
        namespace: ns,
        labels: { 'shard-test': 'y', ...(shard !== undefined ? { [SHARD_LABEL]: shard } : {}) },
      },
      data: {},
    });
    for (const o of [cm('a1', 'a'), cm('a2', 'a'), cm('b1', 'b'), cm('plain1'), cm('c1', 'c')]) {
      await client.create(o);
    }
    const ma = make('a');
    const mb = make('b');
    const mnone = make(undefined);
    await Promise.all([ma.start(), mb.start(), mnone.start()]);
    try {
      const want = {
        a: [`${ns}/a1`, `${ns}/a2`],
        b: [`${ns}/b1`],
        none: [`${ns}/plain1`],
      };
      await eventually('every shard reconciled its objects', async () =>
        Object.entries(want).every(([id, keys]) => keys.every((k) => seen.get(id)?.has(k)))
          ? true
          : undefined,
      );
      // Objects created later land in their shard only; a relabelled object moves to its new shard.
      await client.create(cm('b2', 'b'));
      await client.mergePatch('v1', 'ConfigMap', 'plain1', ns, {
        metadata: { labels: { [SHARD_LABEL]: 'a' } },
      });
      want.a.push(`${ns}/plain1`);
      want.b.push(`${ns}/b2`);
      await eventually('new and moved objects reconciled by their shard', async () =>
        seen.get('a')?.has(`${ns}/plain1`) && seen.get('b')?.has(`${ns}/b2`) ? true : undefined,
      );
      // No shard ever saw another shard's object (the selector is applied by the API server);
      // c1 belongs to a shard that is not running and nobody touched it.
      assert.deepEqual([...(seen.get('a') ?? [])].sort(), want.a.sort());
      assert.deepEqual([...(seen.get('b') ?? [])].sort(), want.b.sort());
      assert.deepEqual([...(seen.get('none') ?? [])].sort(), want.none.sort());

      // One Lease per shard: <id>-<KEY>, and the plain id without a shard.
      for (const [name, holder] of [
        ['stackflux-a', 'm-a'],
        ['stackflux-b', 'm-b'],
        ['stackflux', 'm-none'],
      ] as const) {
        const l = await client.get<Lease>('coordination.k8s.io/v1', 'Lease', name, ns);
        assert.equal(l?.spec?.holderIdentity, holder, `Lease ${name}`);
      }
      assert.equal(ma.isLeader() && mb.isLeader() && mnone.isLeader(), true);
    } finally {
      await Promise.all([ma.stop(), mb.stop(), mnone.stop()]);
    }
  });

  it('withShardLabel puts the manager shard on created objects, and leaves them alone unsharded', () => {
    const o: KubeObject = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'x', labels: { k: 'v' } },
    };
    const sharded = new Manager({ client, shard: 'a' });
    assert.deepEqual(sharded.withShardLabel(o).metadata.labels, { k: 'v', [SHARD_LABEL]: 'a' });
    const plain = new Manager({ client });
    assert.equal(plain.withShardLabel(o), o);
  });
});
