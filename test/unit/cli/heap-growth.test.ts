// `stackflux run` tunes V8's heap unless node was started with its own setting of a flag.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { heapFlags } from '../../../controller/cli/run.ts';

describe('heapFlags', () => {
  it('sets both old-generation flags when node was given neither', () => {
    assert.deepEqual(heapFlags(['--max-semi-space-size=8']), [
      '--heap-growing-percent=10',
      '--optimize-for-size',
    ]);
    assert.deepEqual(heapFlags([]), ['--heap-growing-percent=10', '--optimize-for-size']);
  });

  it('leaves a --heap-growing-percent given to node alone, in either spelling', () => {
    assert.deepEqual(heapFlags(['--max-semi-space-size=8', '--heap-growing-percent=20']), [
      '--optimize-for-size',
    ]);
    assert.deepEqual(heapFlags(['--heap_growing_percent=80']), ['--optimize-for-size']);
  });

  it('leaves --optimize-for-size alone when node was given it or its --no- form', () => {
    assert.deepEqual(heapFlags(['--optimize-for-size']), ['--heap-growing-percent=10']);
    assert.deepEqual(heapFlags(['--no-optimize-for-size']), ['--heap-growing-percent=10']);
    assert.deepEqual(heapFlags(['--optimize_for_size', '--heap-growing-percent=5']), []);
  });

  it('does not read a longer flag with the same prefix as the flag', () => {
    assert.deepEqual(heapFlags(['--optimize-for-size-extra']), [
      '--heap-growing-percent=10',
      '--optimize-for-size',
    ]);
  });
});
