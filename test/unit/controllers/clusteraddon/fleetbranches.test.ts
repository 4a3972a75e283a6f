// The fleet's branch state and its back-off as a whole: one fetch of every branch, branch ids
// remembered per Cluster (absent ones too), and no network attempt while backing off.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  FLEET_MAX_BACKOFF_MS,
  FleetBranches,
  fleetBackoffMs,
  fleetFailureOf,
} from '../../../../controller/controllers/clusteraddon/fleetbranches.ts';
import type { BranchState, FleetWriter } from '../../../../controller/gitops/branches.ts';
import { FakeClock } from '../../../../controller/runtime/clock.ts';
import { silentLogger } from '../../../../controller/runtime/logging.ts';
import { SourceError } from '../../../../controller/sources/git.ts';

const TIP: BranchState = { commit: 'c1', tree: 't1', addons: new Map() };

function setup(o: { failRefresh?: () => boolean; credentials?: () => Promise<undefined> } = {}) {
  const clock = new FakeClock();
  const calls: string[] = [];
  let builds = 0;
  const writer: FleetWriter = {
    refresh: async () => {
      calls.push('refresh');
      if (o.failRefresh?.()) throw new SourceError('FleetUnreachable', 'connection refused');
    },
    branch: async (name) => {
      calls.push(`branch ${name}`);
      return name.endsWith('/a') ? TIP : undefined;
    },
    write: async () => {
      throw new Error('unused');
    },
  };
  const b = new FleetBranches({
    credentials: o.credentials ?? (async () => undefined),
    writer: () => {
      builds += 1;
      return writer;
    },
    branchPrefix: 'stackflux/',
    windowMs: 2_000,
    clock,
    log: silentLogger(),
  });
  return { b, clock, calls, builds: () => builds };
}

describe('FleetBranches', () => {
  it('fetches every branch once, then reads each Cluster branch once (absent ones too)', async () => {
    const { b, calls, builds } = setup();
    assert.deepEqual(await b.branchOf('team/a', 'team', 'a'), TIP);
    assert.equal(await b.branchOf('team/b', 'team', 'b'), undefined);
    assert.deepEqual(await b.branchOf('team/a', 'team', 'a'), TIP);
    assert.equal(await b.branchOf('team/b', 'team', 'b'), undefined);
    assert.deepEqual(calls, ['refresh', 'branch stackflux/team/a', 'branch stackflux/team/b']);
    assert.equal(builds(), 1);
    b.forget('team/a');
    await b.branchOf('team/a', 'team', 'a');
    assert.equal(calls.length, 4, 'a forgotten branch is read again, without another fetch');
    b.record('team/b', TIP);
    assert.deepEqual(
      await b.branchOf('team/b', 'team', 'b'),
      TIP,
      'a written branch is taken from the write',
    );
  });

  it('after a failed fetch no attempt is made before the back-off ends; then it is fetched again', async () => {
    let failing = true;
    const { b, clock, calls } = setup({ failRefresh: () => failing });
    await assert.rejects(b.branchOf('team/a', 'team', 'a'), /connection refused/);
    assert.equal(b.blockedUntil, clock.now() + 2_000);
    await assert.rejects(b.branchOf('team/a', 'team', 'a'), /connection refused/);
    assert.deepEqual(calls, ['refresh'], 'the remote is not asked while backing off');
    clock.advance(2_000);
    failing = false;
    assert.deepEqual(await b.branchOf('team/a', 'team', 'a'), TIP);
    b.succeeded();
    assert.equal(b.blockedUntil, 0);
  });

  it('refetch: the next read fetches every branch again', async () => {
    const { b, calls } = setup();
    await b.refreshOnce();
    await b.refreshOnce();
    b.refetch();
    await b.refreshOnce();
    assert.deepEqual(calls, ['refresh', 'refresh']);
  });

  it('a writer that cannot be built (credentials) is built again on the next call', async () => {
    let fail = true;
    const { b, builds } = setup({
      credentials: async () => {
        if (fail) throw new Error('no Secret');
        return undefined;
      },
    });
    await assert.rejects(b.writer(), /no Secret/);
    fail = false;
    await b.writer();
    await b.writer();
    assert.equal(builds(), 1);
  });
});

describe('the fleet back-off', () => {
  it('doubles the window (at least 1 s) per failure in a row, up to 5 min', () => {
    assert.equal(fleetBackoffMs(2_000, 0), 0);
    assert.deepEqual(
      [1, 2, 3].map((n) => fleetBackoffMs(2_000, n)),
      [2_000, 4_000, 8_000],
    );
    assert.equal(fleetBackoffMs(100, 1), 1_000);
    assert.equal(fleetBackoffMs(2_000, 40), FLEET_MAX_BACKOFF_MS);
  });

  it("a failure's reason is the error's, else FleetUnreachable", () => {
    assert.deepEqual(fleetFailureOf(new SourceError('AuthFailed', 'denied')), {
      reason: 'AuthFailed',
      message: 'denied',
    });
    assert.deepEqual(fleetFailureOf('boom'), { reason: 'FleetUnreachable', message: 'boom' });
  });
});
