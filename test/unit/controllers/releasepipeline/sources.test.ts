// A changed listing requeues the ClusterStack and the releases it owns, once the controllers exist.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { enqueueChangedStacks } from '../../../../controller/controllers/releasepipeline/sources.ts';
import type { LateControllers } from '../../../../controller/controllers/releasepipeline/types.ts';
import { indexed, recordingController, rel } from './fakes.ts';

describe('enqueueChangedStacks', () => {
  it('requeues the ClusterStacks and the releases they own', () => {
    const releases = indexed([
      rel('a', 'r1', {}, 's1'),
      rel('a', 'r2', {}, 's2'),
      rel('a', 'r3', {}),
      rel('b', 'r4', {}, 's1'),
    ]);
    const cs = recordingController();
    const r = recordingController();
    const late: LateControllers = {};
    const onChange = enqueueChangedStacks(releases.informer, late);
    onChange(['a/s1']);
    assert.deepEqual([cs.keys, r.keys], [[], []], 'nothing before the controllers exist');
    late.clusterStack = cs.controller;
    late.release = r.controller;
    onChange(['a/s1', 'not-a-key']);
    assert.deepEqual(cs.keys, ['a/s1', 'not-a-key']);
    assert.deepEqual(r.keys, ['a/r1']);
  });
});
