// What holds a reconcile's output back: the status waits for the push, render failures become
// Warning Events, finalizers are set only when the wanted set differs.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  finalizersChange,
  renderWarning,
  statusWaitsForPush,
} from '../../../../controller/controllers/clusteraddon/gates.ts';

const status = (s: string, reason?: string, message?: string) => ({
  conditions: [{ type: 'Ready', status: s, ...(reason ? { reason } : {}), ...(message ? { message } : {}) }],
});

describe('the reconcile gates', () => {
  it('the status waits for a branch change to be pushed, unless its last write failed', () => {
    const branch = { branch: {} as never };
    assert.equal(statusWaitsForPush(branch, false), true);
    assert.equal(statusWaitsForPush(branch, true), false);
    assert.equal(statusWaitsForPush({}, false), false);
  });

  it('a render failure, invalid values or a cooling-down template is a Warning; other reasons are not', () => {
    assert.deepEqual(renderWarning(status('False', 'RenderFailed', 'cni: bad')), {
      reason: 'RenderFailed',
      note: 'cni: bad',
    });
    assert.deepEqual(renderWarning(status('False', 'ValuesInvalid')), {
      reason: 'ValuesInvalid',
      note: 'rendering failed',
    });
    assert.equal(renderWarning(status('False', 'RenderCoolingDown'))?.reason, 'RenderCoolingDown');
    assert.equal(renderWarning(status('False', 'FleetUnreachable')), undefined);
    assert.equal(renderWarning(status('True', 'RenderFailed')), undefined);
    assert.equal(renderWarning({}), undefined);
  });

  it('finalizers change only when the sets differ', () => {
    assert.equal(finalizersChange(['a', 'b'], ['b', 'a']), false);
    assert.equal(finalizersChange(['a'], []), true);
    assert.equal(finalizersChange([], ['a']), true);
  });
});
