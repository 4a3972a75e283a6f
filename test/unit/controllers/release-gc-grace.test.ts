import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RELEASE_GC_GRACE_MS, UnusedSince } from '../../../controller/controllers/clusterstack.ts';

describe('release garbage collection waits for a grace after the first "unused"', () => {
  it('a release found unused is deleted only once it has stayed unused for the grace', () => {
    const u = new UnusedSince();
    assert.deepEqual(u.due('ns/stack', ['v1'], 1_000), { names: [], nextMs: RELEASE_GC_GRACE_MS });
    assert.deepEqual(u.due('ns/stack', ['v1'], 1_000 + RELEASE_GC_GRACE_MS - 1), { names: [], nextMs: 1 });
    assert.deepEqual(u.due('ns/stack', ['v1'], 1_000 + RELEASE_GC_GRACE_MS), { names: ['v1'] });
  });

  it('a release in use again in between starts its grace anew (the view caught up with a Cluster)', () => {
    const u = new UnusedSince();
    u.due('ns/stack', ['v1'], 0);
    assert.deepEqual(u.due('ns/stack', [], 5_000), { names: [] });
    assert.deepEqual(u.due('ns/stack', ['v1'], RELEASE_GC_GRACE_MS + 1), {
      names: [],
      nextMs: RELEASE_GC_GRACE_MS,
    });
  });

  it('stacks are apart; the next requeue is the soonest due release; a deleted stack is forgotten', () => {
    const u = new UnusedSince();
    u.due('ns/a', ['v1'], 0);
    u.due('ns/b', ['v1'], 4_000);
    assert.deepEqual(u.due('ns/a', ['v1', 'v2'], 6_000), { names: [], nextMs: RELEASE_GC_GRACE_MS - 6_000 });
    assert.deepEqual(u.due('ns/b', ['v1'], RELEASE_GC_GRACE_MS), { names: [], nextMs: 4_000 });
    u.forget('ns/a');
    assert.deepEqual(u.due('ns/a', ['v1'], RELEASE_GC_GRACE_MS), { names: [], nextMs: RELEASE_GC_GRACE_MS });
  });
});
