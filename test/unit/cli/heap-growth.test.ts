// `stackflux run` bounds V8's old-generation growth unless node was started with its own factor.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { boundHeapGrowth } from '../../../controller/cli/run.ts';

describe('boundHeapGrowth', () => {
  it('leaves a --heap-growing-percent given to node alone', () => {
    assert.equal(boundHeapGrowth(['--max-semi-space-size=8', '--heap-growing-percent=20']), false);
    assert.equal(boundHeapGrowth(['--heap_growing_percent=80']), false);
  });

  it('sets it when node was started without one', () => {
    assert.equal(boundHeapGrowth(['--max-semi-space-size=8']), true);
  });
});
