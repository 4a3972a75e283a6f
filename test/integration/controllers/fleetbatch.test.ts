// Issue 11 defect 7: the fleet batch flush is tied to leadership. Real LeaderElectors on a Lease of
// the real API server decide who leads; the batch writes only for the leader, and a leader that
// lost its Lease drops what it collected instead of pushing it.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { FleetBatch } from '../../../controller/controllers/fleetbatch.ts';
import type { KubeClient } from '../../../controller/runtime/client.ts';
import { LeaderElector } from '../../../controller/runtime/leaderelection.ts';
import { eventually } from '../../support/env.ts';
import { deleteNamespace, freshNamespace, runtimeClient } from '../runtime/helpers.ts';

const timings = { leaseDurationMs: 3000, renewDeadlineMs: 2000, retryPeriodMs: 400 };

describe('FleetBatch writes only while its replica leads', () => {
  let client: KubeClient;
  let ns: string;

  before(async () => {
    client = runtimeClient();
    ns = await freshNamespace(client, 'fleet-lead');
  });

  after(async () => {
    await deleteNamespace(client, ns);
    client.close();
  });

  /** A batch of replica `elector` recording what it writes and drops. */
  function batchOf(elector: LeaderElector, windowMs: number) {
    const written: string[][] = [];
    const dropped: string[][] = [];
    const batch = new FleetBatch<string>({
      windowMs,
      leading: () => elector.isLeader(),
      write: async (b) => {
        written.push([...b.keys()]);
      },
      dropped: (keys) => dropped.push(keys),
    });
    return { batch, written, dropped };
  }

  it('the leader writes; a replica that does not lead never writes', async () => {
    const elector = (id: string) =>
      new LeaderElector({ client, namespace: ns, name: 'two', identity: id, ...timings });
    const a = elector('a');
    void a.run();
    await eventually('a leads', async () => (a.isLeader() ? true : undefined));
    const b = elector('b');
    void b.run();
    try {
      const leader = batchOf(a, 50);
      const standby = batchOf(b, 50);
      leader.batch.set('ns/c1', 'change');
      standby.batch.set('ns/c1', 'change');
      await leader.batch.flush();
      await standby.batch.flush();
      assert.deepEqual(leader.written, [['ns/c1']]);
      assert.deepEqual(standby.written, [], 'the standby replica pushed');
      assert.equal(standby.batch.size, 0);
    } finally {
      await b.stop();
      await a.stop();
    }
  });

  it('a leader that loses its Lease drops its pending batch instead of writing it', async () => {
    const a = new LeaderElector({ client, namespace: ns, name: 'lost', identity: 'a', ...timings });
    const b = new LeaderElector({ client, namespace: ns, name: 'lost', identity: 'b', ...timings });
    void a.run();
    await eventually('a leads', async () => (a.isLeader() ? true : undefined));
    void b.run();
    try {
      // A long window: the batch is still pending when the Lease goes to b.
      const { batch, written, dropped } = batchOf(a, 60_000);
      batch.set('ns/c1', 'change');
      batch.set('ns/c2', 'change');
      a.pauseRenewals();
      await eventually('b took over', async () => (b.isLeader() ? true : undefined), { intervalMs: 50 });
      assert.equal(a.isLeader(), false);
      await batch.flush();
      assert.deepEqual(written, [], 'the replica that lost its Lease pushed');
      assert.deepEqual(dropped, [['ns/c1', 'ns/c2']]);
      batch.set('ns/c3', 'change');
      assert.equal(batch.size, 0, 'a replica that does not lead collects nothing');
      batch.stop();
    } finally {
      await b.stop();
      await a.stop();
    }
  });
});
