import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { KubeClient } from '../../../controller/runtime/client.ts';
import { LeaderElector, type Lease } from '../../../controller/runtime/leaderelection.ts';
import { Manager } from '../../../controller/runtime/manager.ts';
import { eventually } from '../../support/env.ts';
import { deleteNamespace, freshNamespace, runtimeClient } from './helpers.ts';

// Short, client-go-proportioned timings so the test runs in seconds; renewDeadline < leaseDuration
// leaves a one-second margin between the old leader stopping and anyone else being allowed to start.
const timings = { leaseDurationMs: 3000, renewDeadlineMs: 2000, retryPeriodMs: 400 };

async function lease(client: KubeClient, ns: string, name: string): Promise<Lease | undefined> {
  return client.get<Lease>('coordination.k8s.io/v1', 'Lease', name, ns);
}

describe('LeaderElector against the real API server', () => {
  let client: KubeClient;
  let ns: string;

  before(async () => {
    client = runtimeClient();
    ns = await freshNamespace(client, 'leader');
  });

  after(async () => {
    await deleteNamespace(client, ns);
    client.close();
  });

  it('exactly one of two electors leads; when its renewals stop the other takes over, after the old one stopped', async () => {
    const events: string[] = [];
    const make = (id: string) =>
      new LeaderElector({
        client,
        namespace: ns,
        name: 'one-lease',
        identity: id,
        ...timings,
        onStartedLeading: () => events.push(`${id} started`),
        onStoppedLeading: () => events.push(`${id} stopped`),
      });
    const a = make('a');
    const b = make('b');
    void a.run();
    void b.run();
    await eventually('a leader', async () => (a.isLeader() || b.isLeader() ? true : undefined));
    // Watch several renew periods: never two leaders, always the same one.
    const first = a.isLeader() ? a : b;
    const other = first === a ? b : a;
    const firstId = first === a ? 'a' : 'b';
    const otherId = first === a ? 'b' : 'a';
    for (let i = 0; i < 20; i++) {
      assert.ok(!(a.isLeader() && b.isLeader()), 'two leaders at once');
      assert.ok(first.isLeader(), 'leadership moved without a fault');
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal((await lease(client, ns, 'one-lease'))?.spec?.holderIdentity, firstId);
    assert.deepEqual(events, [`${firstId} started`]);

    first.pauseRenewals();
    await eventually('takeover', async () => (other.isLeader() ? true : undefined), { intervalMs: 50 });
    assert.equal(first.isLeader(), false);
    assert.deepEqual(events, [`${firstId} started`, `${firstId} stopped`, `${otherId} started`]);
    const l = await lease(client, ns, 'one-lease');
    assert.equal(l?.spec?.holderIdentity, otherId);
    assert.equal(l?.spec?.leaseTransitions, 1);

    // Graceful stop releases the lease.
    await other.stop();
    assert.deepEqual(events.at(-1), `${otherId} stopped`);
    assert.equal((await lease(client, ns, 'one-lease'))?.spec?.holderIdentity, '');
    await first.stop();
  });

  it('a released lease is taken at once by a new candidate, without waiting out the lease', async () => {
    const longLease = { leaseDurationMs: 120_000, renewDeadlineMs: 80_000, retryPeriodMs: 400 };
    const a = new LeaderElector({ client, namespace: ns, name: 'released', identity: 'a', ...longLease });
    void a.run();
    await eventually('a leads', async () => (a.isLeader() ? true : undefined));
    await a.stop();
    const b = new LeaderElector({ client, namespace: ns, name: 'released', identity: 'b', ...longLease });
    void b.run();
    // Had a not released the lease, b would have to observe it unchanged for 120 s first; the 30 s
    // budget here is far below that, so b leading proves the release, not a race.
    await eventually('b leads', async () => (b.isLeader() ? true : undefined), {
      intervalMs: 50,
      timeoutMs: 30_000,
    });
    const l = await lease(client, ns, 'released');
    assert.equal(l?.spec?.holderIdentity, 'b');
    assert.equal(l?.spec?.leaseDurationSeconds, 120);
    await b.stop();
  });

  it('two managers on one Lease: exactly one reconciles; the old one stops reconciling before the new one starts', async () => {
    const log: string[] = [];
    await client.create({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'trigger', namespace: ns },
      data: {},
    });
    const make = (id: string) => {
      const m = new Manager({
        client,
        leaderElection: { namespace: ns, name: 'managers', identity: id, ...timings },
        shutdownTimeoutMs: 5000,
      });
      const c = m.addController({
        name: `cm-${id}`,
        reconcile: async (key) => {
          log.push(`${id} start ${key}`);
          await new Promise((r) => setTimeout(r, 10));
          log.push(`${id} end ${key}`);
          return { requeueAfter: 100 };
        },
      });
      m.watch(c, m.informer('v1', 'ConfigMap', { namespace: ns }));
      return m;
    };
    const m1 = make('m1');
    const m2 = make('m2');
    await m1.start();
    await m2.start();
    await eventually('someone reconciles', async () => (log.length >= 4 ? true : undefined), {
      intervalMs: 50,
    });
    const leaderId = log[0]?.split(' ')[0];
    const leader = leaderId === 'm1' ? m1 : m2;
    const follower = leader === m1 ? m2 : m1;
    const followerId = leaderId === 'm1' ? 'm2' : 'm1';
    await new Promise((r) => setTimeout(r, 1500));
    assert.ok(
      log.every((l) => l.startsWith(`${leaderId} `)),
      'only the leader reconciles',
    );
    leader.elector?.pauseRenewals();
    assert.equal(await leader.done, 'leadership-lost');
    await eventually(
      'follower reconciles',
      async () => (log.some((l) => l.startsWith(followerId ?? '')) ? true : undefined),
      {
        intervalMs: 50,
      },
    );
    const lastOld = log.findLastIndex((l) => l.startsWith(`${leaderId} `));
    const firstNew = log.findIndex((l) => l.startsWith(`${followerId} `));
    assert.ok(
      lastOld < firstNew,
      `old leader's last reconcile (${lastOld}) before the new one's first (${firstNew})`,
    );
    assert.ok(log[lastOld]?.includes(' end '), 'the old leader finished its in-flight reconcile');
    assert.equal(follower.isLeader(), true);
    assert.equal(await follower.metrics.value('leader_election_master_status', { name: 'managers' }), 1);
    assert.equal(await leader.metrics.value('leader_election_master_status', { name: 'managers' }), 0);
    await follower.stop();
    await leader.stop();
  });
});
