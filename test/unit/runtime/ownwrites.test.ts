import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { OwnWrites } from '../../../controller/runtime/ownwrites.ts';

describe('OwnWrites: a status write the informer does not show yet', () => {
  it('the cache is stale while it shows what the write replaced, then the record ends', () => {
    const w = new OwnWrites();
    assert.equal(w.stale('ns/r', 'a'), false, 'nothing written: never stale');
    w.record('ns/r', 'a', 'b');
    assert.equal(w.stale('ns/r', 'a'), true, 'still the replaced impact');
    assert.equal(w.stale('ns/other', 'a'), false, 'per key');
    assert.equal(w.stale('ns/r', 'b'), false, 'the write is seen');
    assert.equal(w.stale('ns/r', 'a'), false, 'the record ended with the write seen');
  });

  it('a first write replaces nothing; another writer ends the record; forget drops it', () => {
    const w = new OwnWrites();
    w.record('k', undefined, 'x');
    assert.equal(w.stale('k', undefined), true, 'the cache has no impact yet');
    assert.equal(w.stale('k', 'y'), false, 'someone else wrote: not ours to wait for');
    w.record('k', 'y', 'z');
    w.forget('k');
    assert.equal(w.stale('k', 'y'), false);
    w.record('k', 'z', 'z');
    assert.equal(w.stale('k', 'z'), false, 'a write of the same value leaves nothing to wait for');
  });
});
