import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type Condition,
  conditionsEqual,
  findCondition,
  formatTime,
  isStatusTrue,
  markNotReady,
  markReady,
  markReconciling,
  markStalled,
  setCondition,
} from '../../../controller/runtime/conditions.ts';

const t0 = new Date('2025-01-01T00:00:00.123Z');
const t1 = new Date('2025-01-01T00:05:00Z');
const t2 = new Date('2025-01-01T00:10:00Z');

describe('setCondition', () => {
  it('adds a condition with lastTransitionTime = now (whole seconds) and leaves the input untouched', () => {
    const before: Condition[] = [];
    const after = setCondition(
      before,
      { type: 'Ready', status: 'False', reason: 'Failed', message: 'x', observedGeneration: 3 },
      t0,
    );
    assert.equal(before.length, 0);
    assert.deepEqual(after, [
      {
        type: 'Ready',
        status: 'False',
        reason: 'Failed',
        message: 'x',
        observedGeneration: 3,
        lastTransitionTime: '2025-01-01T00:00:00Z',
      },
    ]);
  });

  it('keeps lastTransitionTime when the status stays, updating reason, message, observedGeneration', () => {
    let c = setCondition(
      [],
      { type: 'Ready', status: 'False', reason: 'A', message: 'a', observedGeneration: 1 },
      t0,
    );
    c = setCondition(
      c,
      { type: 'Ready', status: 'False', reason: 'B', message: 'b', observedGeneration: 2 },
      t1,
    );
    const ready = findCondition(c, 'Ready');
    assert.equal(ready?.lastTransitionTime, formatTime(t0));
    assert.equal(ready?.reason, 'B');
    assert.equal(ready?.message, 'b');
    assert.equal(ready?.observedGeneration, 2);
  });

  it('changes lastTransitionTime when the status changes', () => {
    let c = setCondition([], { type: 'Ready', status: 'False', reason: 'A', message: '' }, t0);
    c = setCondition(c, { type: 'Ready', status: 'True', reason: 'A', message: '' }, t1);
    assert.equal(findCondition(c, 'Ready')?.lastTransitionTime, formatTime(t1));
    c = setCondition(c, { type: 'Ready', status: 'True', reason: 'A', message: '' }, t2);
    assert.equal(findCondition(c, 'Ready')?.lastTransitionTime, formatTime(t1));
  });

  it('keeps the order of other conditions', () => {
    let c = setCondition([], { type: 'A', status: 'True', reason: 'R', message: '' }, t0);
    c = setCondition(c, { type: 'B', status: 'True', reason: 'R', message: '' }, t0);
    c = setCondition(c, { type: 'A', status: 'False', reason: 'R', message: '' }, t1);
    assert.deepEqual(
      c.map((x) => x.type),
      ['A', 'B'],
    );
  });

  it('rejects reasons that the API server would reject', () => {
    assert.throws(() =>
      setCondition([], { type: 'Ready', status: 'True', reason: 'not valid', message: '' }, t0),
    );
    assert.throws(() => setCondition([], { type: 'Ready', status: 'True', reason: '', message: '' }, t0));
  });

  it('setting the same condition again is equal (no-op write detectable)', () => {
    const a = setCondition([], { type: 'Ready', status: 'True', reason: 'R', message: 'm' }, t0);
    const b = setCondition(a, { type: 'Ready', status: 'True', reason: 'R', message: 'm' }, t2);
    assert.ok(conditionsEqual(a, b));
    const c = setCondition(a, { type: 'Ready', status: 'True', reason: 'R', message: 'other' }, t2);
    assert.ok(!conditionsEqual(a, c));
  });
});

describe('Flux-style Ready/Reconciling/Stalled', () => {
  it('markReconciling: Reconciling=True, Ready=Unknown, Stalled removed', () => {
    let c = markStalled([], { reason: 'BadSpec', message: 'fix it' }, t0);
    c = markReconciling(c, { reason: 'Progressing', message: 'working', observedGeneration: 2 }, t1);
    assert.deepEqual(c.map((x) => [x.type, x.status]).sort(), [
      ['Ready', 'Unknown'],
      ['Reconciling', 'True'],
    ]);
  });

  it('markReady: Ready=True with reason Succeeded, Reconciling and Stalled removed', () => {
    let c = markReconciling([], { reason: 'Progressing', message: '' }, t0);
    c = markReady(c, { message: 'applied v3', observedGeneration: 4 }, t1);
    assert.equal(c.length, 1);
    assert.equal(c[0]?.type, 'Ready');
    assert.equal(c[0]?.status, 'True');
    assert.equal(c[0]?.reason, 'Succeeded');
    assert.equal(c[0]?.observedGeneration, 4);
    assert.ok(isStatusTrue(c, 'Ready'));
  });

  it('markStalled: Stalled=True, Ready=False with the same reason, Reconciling removed', () => {
    let c = markReconciling([], { reason: 'Progressing', message: '' }, t0);
    c = markStalled(c, { reason: 'InvalidTag', message: 'tag "x" does not match' }, t1);
    assert.equal(findCondition(c, 'Reconciling'), undefined);
    assert.equal(findCondition(c, 'Stalled')?.status, 'True');
    assert.equal(findCondition(c, 'Ready')?.status, 'False');
    assert.equal(findCondition(c, 'Ready')?.reason, 'InvalidTag');
  });

  it('markNotReady: Ready=False, transition time from the previous Ready=True', () => {
    let c = markReady([], { message: 'ok' }, t0);
    c = markNotReady(c, { reason: 'GitUnreachable', message: 'connection refused' }, t1);
    assert.equal(findCondition(c, 'Ready')?.status, 'False');
    assert.equal(findCondition(c, 'Ready')?.lastTransitionTime, formatTime(t1));
  });
});
