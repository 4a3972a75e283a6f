// RenderCache (controller/rendering/bounded.ts): csctl render results kept across reconciles,
// bounded by the size of their output; failures and native renders are not kept.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RenderCache } from '../../../controller/rendering/bounded.ts';
import type { CsctlAddonInput, RenderResult } from '../../../controller/rendering/index.ts';
import { addonInput } from './fixtures.ts';

const csctl: CsctlAddonInput = {
  format: 'csctl',
  tree: new Map(),
  binary: new Map(),
  addon: 'cni',
  chartPath: 'cluster-addon/cni/',
  kubernetesVersion: 'v1.30.4',
  cluster: { metadata: { name: 'c1' } },
};

/** A successful render of one file of `chars` characters (2 bytes each as kept: 2 * chars + 2 * path). */
function rendered(chars: number): RenderResult {
  return { ok: true, files: new Map([['a', 'x'.repeat(chars)]]), objects: [], values: {} };
}

describe('RenderCache', () => {
  it('answers a kept key, and counts the hit', () => {
    const cache = new RenderCache();
    const result = rendered(10);
    cache.set('k1', csctl, result);
    assert.equal(cache.get('k1'), result);
    assert.equal(cache.get('k2'), undefined);
    assert.equal(cache.hits, 1);
  });

  it('drops the least recently used results once their output is over its size', () => {
    // Each result: 2 * (1 + 99) = 200 bytes; three fit in 600.
    const cache = new RenderCache(600);
    for (const k of ['a', 'b', 'c']) cache.set(k, csctl, rendered(99));
    assert.ok(cache.get('a') !== undefined); // a is now the most recently used
    cache.set('d', csctl, rendered(99));
    assert.deepEqual(
      ['a', 'b', 'c', 'd'].map((k) => cache.get(k) !== undefined),
      [true, false, true, true],
    );
    assert.equal(cache.size, 3);
    cache.set('huge', csctl, rendered(1000));
    assert.equal(cache.get('huge'), undefined, 'a result larger than the whole cache is not kept');
    assert.equal(cache.size, 3);
  });

  it('keeps no failure and no native render', () => {
    const cache = new RenderCache();
    cache.set('f', csctl, { ok: false, reason: 'LimitExceeded', message: 'over the time budget' });
    cache.set('n', addonInput({ 'a.yaml': 'x: 1\n' }), rendered(10));
    assert.equal(cache.size, 0);
  });
});
