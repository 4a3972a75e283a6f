// Publishing branch changes: one write per batch, the state after it, requeues and Flux fetches
// for what moved, a refused branch backing off on its own, a failed write retried.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FleetPublisher } from '../../../../controller/controllers/clusteraddon/fleetpublisher.ts';
import type { BranchState, WriteResult } from '../../../../controller/gitops/branches.ts';
import type { BranchUpdate } from '../../../../controller/reconcilers/clusteraddon.ts';
import { FakeClock } from '../../../../controller/runtime/clock.ts';
import { silentLogger } from '../../../../controller/runtime/logging.ts';
import { recordingEvents } from './fakes.ts';

function update(cluster: string, content = 'v1'): BranchUpdate {
  return {
    branch: `stackflux/team/${cluster}`,
    files: new Map([['cni/a.yaml', content]]),
    message: 'm',
    change: { namespace: 'team', cluster, reason: 'first render', rendered: [], removed: [] },
  };
}

const tip = (commit: string): BranchState => ({ commit, tree: 't', addons: new Map() });
const stack = { metadata: { name: 'ferrol', namespace: 'team' } } as never;

function setup(write: (branches: string[]) => Promise<WriteResult>) {
  const clock = new FakeClock();
  const log: string[] = [];
  const recorded = new Map<string, BranchState | null | undefined>();
  const fleet = { failed: 0, succeeded: 0, refetched: 0, blockedUntil: 0 };
  const requeued: string[] = [];
  const retried: string[] = [];
  const fetched: string[][] = [];
  const { events, recorder } = recordingEvents();
  const p = new FleetPublisher({
    branches: {
      writer: async () => ({
        refresh: async () => {},
        branch: async () => undefined,
        write: async (changes) => write(changes.map((c) => c.branch)),
      }),
      record: (key, state) => recorded.set(key, state),
      forget: (key) => log.push(`forget ${key}`),
      failed: () => {
        fleet.failed += 1;
      },
      succeeded: () => {
        fleet.succeeded += 1;
      },
      refetch: () => {
        fleet.refetched += 1;
      },
      get blockedUntil() {
        return fleet.blockedUntil;
      },
    },
    windowMs: 2_000,
    clock,
    log: silentLogger(),
    leading: () => true,
    events: recorder,
    clusterAddonOf: () => undefined,
    requeue: (k) => requeued.push(k),
    retry: (k) => retried.push(k),
    fetchMoved: async (keys) => {
      fetched.push([...keys]);
    },
  });
  return { p, clock, recorded, fleet, requeued, retried, fetched, events, log };
}

const written = (branches: string[], o: Partial<WriteResult> = {}): WriteResult => ({
  pushed: true,
  attempts: 1,
  branches: new Map(branches.map((b) => [b, tip(`tip-${b}`)])),
  changed: branches,
  ...o,
});

describe('FleetPublisher', () => {
  it('writes a batch once, takes the branches from the result, requeues and has Flux fetch what moved', async () => {
    const { p, recorded, fleet, requeued, fetched, events } = setup(async (b) =>
      written(b, { changed: b.filter((x) => x.endsWith('/a')) }),
    );
    assert.equal(p.submit('team/a', update('a'), stack), 0);
    assert.equal(p.submit('team/b', update('b'), stack), 0);
    await p.flush();
    assert.deepEqual(recorded.get('team/a'), tip('tip-stackflux/team/a'));
    assert.equal(fleet.succeeded, 1);
    assert.deepEqual(requeued, ['team/a', 'team/b']);
    assert.deepEqual(fetched, [['team/a']]);
    assert.equal(events.length, 1, 'one Event per ClusterStack');
    assert.match(events[0]?.note ?? '', /^1 Cluster fleet branch\(es\) moved/);
  });

  it('a failed write is retried with back-off; its keys show the failure and a failed write', async () => {
    const { p, fleet, retried, log } = setup(async () => {
      throw new Error('push rejected: connection reset');
    });
    p.submit('team/a', update('a'), stack);
    await p.flush();
    assert.equal(fleet.failed, 1);
    assert.equal(fleet.refetched, 1);
    assert.deepEqual(retried, ['team/a']);
    assert.deepEqual(log, ['forget team/a']);
    assert.equal(p.writeFailed('team/a'), true);
    assert.deepEqual(p.failureOf('team/a'), {
      reason: 'FleetUnreachable',
      message: 'push rejected: connection reset',
    });
    p.submit('team/a', undefined, stack);
    assert.equal(p.writeFailed('team/a'), false, 'no change waiting: no failed write');
  });

  it('a refused branch holds the same content back for its back-off; other content goes at once', async () => {
    const { p, clock } = setup(async (b) => ({
      ...written(b.filter((x) => !x.endsWith('/a'))),
      refused: new Map(b.filter((x) => x.endsWith('/a')).map((x) => [x, 'pre-receive hook declined'])),
    }));
    p.submit('team/a', update('a'), stack);
    p.submit('team/b', update('b'), stack);
    await p.flush();
    assert.equal(p.failureOf('team/a')?.reason, 'FleetPushRejected');
    assert.match(p.failureOf('team/a')?.message ?? '', /pre-receive hook declined.*next try in 2s/);
    assert.equal(p.failureOf('team/b'), undefined);
    assert.equal(p.submit('team/a', update('a'), stack), 2_000, 'the same content waits');
    clock.advance(500);
    assert.equal(p.submit('team/a', update('a'), stack), 1_500);
    assert.equal(p.submit('team/a', update('a', 'v2'), stack), 0, 'new content goes at once');
  });

  it('branches left over when narrowing ran out of budget back the fleet off as a whole', async () => {
    const { p, fleet } = setup(async (b) => ({
      ...written([]),
      deferred: b,
      deferredReason: 'too many refusals',
    }));
    p.submit('team/a', update('a'), stack);
    await p.flush();
    assert.equal(fleet.failed, 1);
    assert.equal(fleet.succeeded, 0);
    assert.equal(p.writeFailed('team/a'), true);
    assert.match(p.failureOf('team/a')?.message ?? '', /push budget \(too many refusals\)/);
  });

  it('forget drops what is waiting for a key', async () => {
    const writes: string[][] = [];
    const { p, log } = setup(async (b) => {
      writes.push(b);
      return written(b);
    });
    p.submit('team/a', update('a'), stack);
    p.forget('team/a');
    await p.flush();
    assert.deepEqual(writes, []);
    assert.deepEqual(log, ['forget team/a']);
  });
});
