// The fleet batch's window and its cap on keys per write, on a FakeClock (no I/O). Leadership
// is covered against real Leases in test/integration/controllers/fleetbatch.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FleetBatch } from '../../../controller/controllers/fleetbatch.ts';
import { FakeClock } from '../../../controller/runtime/clock.ts';

/** Lets the promise chain of a write run (the batch chains writes with then()). */
const settle = async (): Promise<void> => {
  for (let i = 0; i < 10; i++) await Promise.resolve();
};

function recorder(opts: { maxSize?: number; notBefore?: () => number } = {}) {
  const clock = new FakeClock();
  const writes: string[][] = [];
  const batch = new FleetBatch<number>({
    windowMs: 2_000,
    clock,
    leading: () => true,
    write: async (b) => {
      writes.push([...b.keys()]);
    },
    ...opts,
  });
  return { clock, writes, batch };
}

const keys = (from: number, to: number): string[] =>
  Array.from({ length: to - from }, (_, i) => `ns/c${from + i}`);

describe('FleetBatch', () => {
  it('collects the changes of one window into one write', async () => {
    const { clock, writes, batch } = recorder();
    for (const k of keys(0, 5)) batch.set(k, 1);
    clock.advance(1_999);
    await settle();
    assert.deepEqual(writes, []);
    clock.advance(1);
    await settle();
    assert.deepEqual(writes, [keys(0, 5)]);
  });

  it('changes arriving all the time do not hold the first one beyond its window', async () => {
    // A tenant whose Clusters change every 500 ms must not delay another tenant's change past the
    // window (issue 22: the window was a debounce extended up to 5 windows by each new change).
    const { clock, writes, batch } = recorder();
    batch.set('benign/c0', 1);
    for (let t = 1; t <= 3; t++) {
      clock.advance(500);
      batch.set(`churn/c${t}`, 1);
    }
    clock.advance(499);
    await settle();
    assert.deepEqual(writes, [], 'written before the window ended');
    clock.advance(1);
    await settle();
    assert.deepEqual(writes, [['benign/c0', 'churn/c1', 'churn/c2', 'churn/c3']]);
    // The next window starts with the next change, not with the last write.
    clock.advance(1_000);
    batch.set('churn/c4', 1);
    clock.advance(1_999);
    await settle();
    assert.equal(writes.length, 1);
    clock.advance(1);
    await settle();
    assert.deepEqual(writes[1], ['churn/c4']);
  });

  it('a batch that reaches its cap is written at once, in writes of at most the cap, oldest first', async () => {
    const { clock, writes, batch } = recorder({ maxSize: 3 });
    for (const k of keys(0, 3)) batch.set(k, 1);
    clock.advance(0);
    await settle();
    assert.deepEqual(writes, [keys(0, 3)], 'the full batch waited for its window');

    // A backlog of 7 (set while nothing is due): one window, then writes of 3, 3 and 1 back to back.
    const more = recorder({ maxSize: 3 });
    for (const k of keys(0, 2)) more.batch.set(k, 1);
    more.batch.set('ns/c0', 2); // a newer change of a key keeps its place
    for (const k of keys(2, 7)) more.batch.set(k, 1);
    more.clock.advance(0);
    for (let i = 0; i < 3; i++) {
      await settle();
      more.clock.advance(0);
    }
    await settle();
    assert.deepEqual(more.writes, [keys(0, 3), keys(3, 6), keys(6, 7)]);
  });

  it('the rest of a backlog waits for a failing repository’s back-off', async () => {
    let blockedUntil = 0;
    const { clock, writes, batch } = recorder({ maxSize: 2, notBefore: () => blockedUntil });
    for (const k of keys(0, 4)) batch.set(k, 1);
    blockedUntil = clock.now() + 10_000; // the first write fails and backs off (set by the writer)
    clock.advance(0);
    await settle();
    assert.deepEqual(writes, [keys(0, 2)]);
    clock.advance(9_999);
    await settle();
    assert.deepEqual(writes, [keys(0, 2)], 'the backlog was written during the back-off');
    clock.advance(1);
    await settle();
    assert.deepEqual(writes, [keys(0, 2), keys(2, 4)]);
  });
});
