// The hook's rate limit (issue 31 F7): a bucket per caller and one overall, refilled by the clock.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_KEYS, TokenBuckets } from '../../../controller/runtime/tokenbucket.ts';

describe('TokenBuckets', () => {
  it('a caller gets its burst, then one token per 1/rate seconds; others keep theirs', () => {
    let now = 0;
    const b = new TokenBuckets(
      { overall: { ratePerSecond: 100, burst: 100 }, perKey: { ratePerSecond: 2, burst: 3 } },
      () => now,
    );
    assert.deepEqual(
      [1, 2, 3, 4].map(() => b.take('10.0.0.1')),
      ['ok', 'ok', 'ok', 'key'],
    );
    assert.equal(b.take('10.0.0.2'), 'ok');
    now += 499;
    assert.equal(b.take('10.0.0.1'), 'key');
    now += 1;
    assert.equal(b.take('10.0.0.1'), 'ok');
  });

  it('all callers together stop at the overall bucket, and a refused call takes nothing', () => {
    let now = 0;
    const b = new TokenBuckets(
      { overall: { ratePerSecond: 1, burst: 2 }, perKey: { ratePerSecond: 1, burst: 1 } },
      () => now,
    );
    assert.deepEqual(
      ['a', 'b', 'c'].map((k) => b.take(k)),
      ['ok', 'ok', 'overall'],
    );
    now += 1000;
    assert.equal(b.take('c'), 'ok', "c's own token was not spent by the refused call");
  });

  it('remembers at most MAX_KEYS callers (many addresses cannot grow the map)', () => {
    const b = new TokenBuckets({
      overall: { ratePerSecond: 1e9, burst: 1e9 },
      perKey: { ratePerSecond: 1, burst: 1 },
    });
    for (let i = 0; i < MAX_KEYS + 10; i++) b.take(`k${i}`);
    assert.equal((b as unknown as { byKey: Map<string, unknown> }).byKey.size, MAX_KEYS);
  });
});
