import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { needsApply } from '../../../controller/controllers/common.ts';
import { leanObject } from '../../../controller/runtime/informer.ts';
import { internStrings, StringTable } from '../../../controller/runtime/intern.ts';
import { converged, desiredKustomization } from './flux-fixtures.ts';

describe('StringTable and internStrings (one copy of repeated strings in the caches)', () => {
  it('returns an equal string and holds it once however often it is seen', () => {
    const t = new StringTable();
    for (let i = 0; i < 100; i++)
      assert.equal(t.intern(['True', 'Ready'][i % 2] as string), i % 2 ? 'Ready' : 'True');
    assert.equal(t.size(), 2);
  });

  it('stays bounded: two generations at most, strings longer than maxLength and empty ones not held', () => {
    const t = new StringTable({ generationSize: 10, maxLength: 8 });
    for (let i = 0; i < 1000; i++) assert.equal(t.intern(`s-${i}`), `s-${i}`);
    assert.ok(t.size() <= 20, `size ${t.size()}`);
    const before = t.size();
    assert.equal(t.intern('a-long-message'), 'a-long-message');
    assert.equal(t.intern(''), '');
    assert.equal(t.size(), before);
  });

  it('keeps a string that recurs, drops one not seen for two generations', () => {
    const t = new StringTable({ generationSize: 2 });
    t.intern('keep');
    t.intern('once');
    for (let i = 0; i < 10; i++) {
      t.intern(`x-${i}`);
      t.intern('keep'); // seen again every rotation: moved to the current generation
    }
    assert.equal(t.has('keep'), true);
    assert.equal(t.has('once'), false);
    assert.equal(t.has('x-0'), false);
  });

  it('changes no value: the interned object deep-equals a copy, uid and resourceVersion untouched', () => {
    const obj = converged(desiredKustomization());
    const copy = structuredClone(obj);
    const t = new StringTable();
    assert.equal(internStrings(obj, t), obj, 'in place');
    assert.deepEqual(obj, copy);
    assert.equal(t.has('stackflux.io/v1alpha1'), true);
    assert.equal(t.has('ReconciliationSucceeded'), true);
    assert.equal(t.has('b1f3c0de-0000-4000-8000-000000000001'), false, 'uid: unique, not held');
    assert.equal(t.has('4242'), false, 'resourceVersion: unique, not held');
  });

  it('skips frozen parts (a transform may return shared constants)', () => {
    const frozen = Object.freeze({ a: 'x' });
    const obj = { spec: frozen, list: Object.freeze(['y']), b: 'z' };
    assert.doesNotThrow(() => internStrings(obj, new StringTable()));
    assert.deepEqual(obj, { spec: { a: 'x' }, list: ['y'], b: 'z' });
  });

  it('the desired-vs-cached comparison is unchanged: converged stays equal, a changed spec differs', () => {
    const cached = internStrings(leanObject(converged(desiredKustomization())), new StringTable());
    const want = desiredKustomization();
    assert.equal(needsApply(cached, want), false);
    assert.equal(needsApply(cached, { ...want, spec: { ...(want.spec as object), path: './cni-v2' } }), true);
  });
});
