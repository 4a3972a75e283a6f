// The fleet writer's pure parts: which branch names it manages, how a push of many refs is
// leased and split, and which push failures mean "the remote moved".
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  branchNameProblem,
  chunkPushes,
  fleetReason,
  isPushRejection,
  pushRefArgs,
  type RefUpdate,
} from '../../../controller/gitops/writer.ts';

describe('branchNameProblem', () => {
  it('accepts Cluster branches under the prefix', () => {
    assert.equal(branchNameProblem('stackflux/default/c1', 'stackflux/'), undefined);
    assert.equal(branchNameProblem('fleet-ns/cluster.a-b', 'fleet-'), undefined);
  });

  it('refuses names outside the prefix or the prefix alone', () => {
    assert.match(branchNameProblem('main', 'stackflux/') ?? '', /not under the fleet prefix/);
    assert.match(branchNameProblem('stackflux/', 'stackflux/') ?? '', /not under the fleet prefix/);
  });

  it('refuses what git check-ref-format refuses', () => {
    for (const bad of [
      'p/a b',
      'p/a..b',
      'p/a~1',
      'p/a^',
      'p/a:b',
      'p/a?',
      'p/a*',
      'p/a[b',
      'p/a\\b',
      'p/a@{1}',
      'p//a',
      'p/a/',
      'p/a.',
      'p/.hidden',
      'p/x.lock',
      'p/x.lock/y',
      'p/a\nb',
    ]) {
      assert.match(branchNameProblem(bad, 'p/') ?? '', /not a valid git branch name/, bad);
    }
  });
});

describe('push arguments', () => {
  const a = 'a'.repeat(40);
  const b = 'b'.repeat(40);

  it('leases every ref on its expected old tip; creation leases on "absent"; delete pushes nothing', () => {
    assert.deepEqual(pushRefArgs({ branch: 'p/x', old: a, commit: b }), [
      `--force-with-lease=refs/heads/p/x:${a}`,
      `${b}:refs/heads/p/x`,
    ]);
    assert.deepEqual(pushRefArgs({ branch: 'p/x', commit: b }), [
      '--force-with-lease=refs/heads/p/x:',
      `${b}:refs/heads/p/x`,
    ]);
    assert.deepEqual(pushRefArgs({ branch: 'p/x', old: a }), [
      `--force-with-lease=refs/heads/p/x:${a}`,
      ':refs/heads/p/x',
    ]);
  });

  it('keeps a batch in one push unless its arguments exceed the bound; order and refs preserved', () => {
    const updates: RefUpdate[] = Array.from({ length: 10 }, (_, i) => ({
      branch: `p/c${i}`,
      old: a,
      commit: b,
    }));
    assert.deepEqual(chunkPushes(updates, 1_000_000), [updates]);
    const one = pushRefArgs(updates[0] as RefUpdate).reduce((n, s) => n + s.length + 1, 0);
    const chunks = chunkPushes(updates, one * 3);
    assert.deepEqual(
      chunks.map((c) => c.length),
      [3, 3, 3, 1],
    );
    assert.deepEqual(chunks.flat(), updates);
    // A single ref larger than the bound still gets its own push.
    assert.deepEqual(chunkPushes(updates.slice(0, 2), 1), [[updates[0]], [updates[1]]]);
    assert.deepEqual(chunkPushes([], 100), []);
  });
});

describe('isPushRejection', () => {
  it('recognizes a refused lease, an atomic abort and a non-fast-forward', () => {
    assert.ok(isPushRejection('!\tabc:refs/heads/p/x\t[rejected] (stale info)'));
    assert.ok(isPushRejection('!\t(delete):refs/heads/p/y\t[rejected] (atomic push failed)'));
    assert.ok(isPushRejection(' ! [rejected]        main -> main (non-fast-forward)'));
    assert.ok(isPushRejection('!\tabc:refs/heads/p/x\t[remote rejected] (cannot lock ref)'));
  });

  it('does not take an unreachable or refusing server for a moved remote', () => {
    assert.ok(!isPushRejection("fatal: unable to access 'http://h/r.git/': Failed to connect"));
    assert.ok(!isPushRejection("fatal: Authentication failed for 'http://h/r.git/'"));
  });
});

describe('fleetReason', () => {
  it('names a stall, refused credentials, or keeps the failure it was given', () => {
    const curlStall =
      "fatal: unable to access 'http://h/fleet.git/': Operation too slow. Less than 1 bytes/sec transferred the last 5 seconds";
    assert.equal(fleetReason('FleetUnreachable', curlStall), 'FleetTimeout');
    assert.equal(
      fleetReason('FleetUnreachable', 'no complete answer within 25s (timed out)'),
      'FleetTimeout',
    );
    assert.equal(fleetReason('FleetUnreachable', 'git fetch killed by SIGKILL (timeout)'), 'FleetTimeout');
    assert.equal(
      fleetReason('FleetUnreachable', "fatal: Authentication failed for 'http://h/fleet.git/'"),
      'FleetAuthenticationFailed',
    );
    assert.equal(
      fleetReason('PushRefused', 'pushing: authentication failed; HTTP 401'),
      'FleetAuthenticationFailed',
    );
    assert.equal(
      fleetReason(
        'PushRefused',
        'pushing: refused (credentials without write access, or a server policy); HTTP 403',
      ),
      'PushRefused',
    );
    assert.equal(fleetReason('FleetUnreachable', 'connect ECONNREFUSED 127.0.0.1:9'), 'FleetUnreachable');
  });

  it('reads the reason from the error, not from a port or repository name in it', () => {
    assert.equal(fleetReason('FleetUnreachable', 'connect ECONNREFUSED 127.0.0.1:401'), 'FleetUnreachable');
    assert.equal(
      fleetReason(
        'FleetUnreachable',
        "fatal: unable to access 'http://git.example/timeout.git/': Could not resolve host: git.example",
      ),
      'FleetUnreachable',
    );
  });
});
