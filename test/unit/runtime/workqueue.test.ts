import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '../../../controller/runtime/clock.ts';
import {
  BucketRateLimiter,
  defaultControllerRateLimiter,
  ItemExponentialFailureRateLimiter,
  WorkQueue,
} from '../../../controller/runtime/workqueue.ts';

function drainReady(q: WorkQueue): string[] {
  const out: string[] = [];
  for (let k = q.tryGet(); k !== undefined; k = q.tryGet()) out.push(k);
  return out;
}

describe('WorkQueue', () => {
  it('de-duplicates keys that are waiting', () => {
    const q = new WorkQueue({ clock: new FakeClock() });
    q.add('a');
    q.add('b');
    q.add('a');
    assert.equal(q.len(), 2);
    assert.deepEqual(drainReady(q), ['a', 'b']);
  });

  it('never hands out a key that is being processed; re-adds it after done', () => {
    const q = new WorkQueue({ clock: new FakeClock() });
    q.add('a');
    assert.equal(q.tryGet(), 'a');
    q.add('a');
    q.add('a');
    assert.equal(q.tryGet(), undefined, 'a is in flight and must not be handed out again');
    assert.equal(q.len(), 0);
    q.done('a');
    assert.equal(q.tryGet(), 'a', 'a was added while processing, so it runs again after done');
    q.done('a');
    assert.equal(q.tryGet(), undefined);
  });

  it('coalesces 100 adds of one key into at most two runs', async () => {
    const q = new WorkQueue({ clock: new FakeClock() });
    let runs = 0;
    let concurrent = 0;
    let maxConcurrent = 0;
    const worker = async (): Promise<void> => {
      for (;;) {
        const key = await q.get();
        if (key === undefined) return;
        runs += 1;
        concurrent += 1;
        maxConcurrent = Math.max(maxConcurrent, concurrent);
        await new Promise((r) => setImmediate(r));
        concurrent -= 1;
        q.done(key);
      }
    };
    const workers = [worker(), worker(), worker(), worker()];
    for (let i = 0; i < 100; i++) {
      q.add('same');
      if (i === 0) await new Promise((r) => setImmediate(r)); // first run starts mid-burst
    }
    while (q.len() > 0 || q.inFlight() > 0) await new Promise((r) => setImmediate(r));
    q.shutDown();
    await Promise.all(workers);
    assert.ok(runs >= 1 && runs <= 2, `runs = ${runs}`);
    assert.equal(maxConcurrent, 1);
  });

  it('get() waits for an add and resolves undefined on shutdown', async () => {
    const q = new WorkQueue({ clock: new FakeClock() });
    const p = q.get();
    q.add('x');
    assert.equal(await p, 'x');
    const p2 = q.get();
    q.shutDown();
    assert.equal(await p2, undefined);
    q.add('y');
    assert.equal(q.len(), 0, 'no intake after shutdown');
  });

  it('shutDownWithDrain waits for in-flight keys and drops ready ones', async () => {
    const q = new WorkQueue({ clock: new FakeClock() });
    q.add('a');
    q.add('b');
    assert.equal(q.tryGet(), 'a');
    const order: string[] = [];
    const drained = q.shutDownWithDrain().then(() => order.push('drained'));
    assert.equal(await q.get(), undefined, 'no new work is handed out after shutdown');
    await new Promise((r) => setImmediate(r));
    order.push('done a');
    q.done('a');
    await drained;
    assert.deepEqual(order, ['done a', 'drained']);
  });

  it('addAfter releases keys in order of due time, earliest add wins', () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ clock });
    q.addAfter('c', 300);
    q.addAfter('a', 100);
    q.addAfter('b', 200);
    q.addAfter('c', 50); // earlier than the pending 300 → replaces it
    q.addAfter('a', 1000); // later than pending 100 → ignored
    assert.equal(q.len(), 0);
    assert.equal(q.delayed(), 3);
    const seen: string[] = [];
    clock.advance(49);
    seen.push(...drainReady(q));
    assert.equal(seen.length, 0);
    clock.advance(1);
    seen.push(...drainReady(q));
    clock.advance(50);
    seen.push(...drainReady(q));
    clock.advance(100);
    seen.push(...drainReady(q));
    assert.deepEqual(seen, ['c', 'a', 'b']);
    clock.advance(10_000);
    assert.deepEqual(drainReady(q), [], 'replaced timers do not fire');
  });

  it('debounce window turns a burst of adds into one ready key', () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ clock, debounceMs: 100 });
    for (let i = 0; i < 50; i++) {
      q.add('k');
      clock.advance(1);
    }
    assert.equal(q.len(), 0, 'not ready inside the window');
    clock.advance(50);
    assert.deepEqual(drainReady(q), ['k']);
    clock.advance(1000);
    assert.deepEqual(drainReady(q), []);
  });

  it('addRateLimited backs off per key, exponentially, and forget resets it', () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ clock, rateLimiter: new ItemExponentialFailureRateLimiter(5, 1_000_000) });
    const readyAfter = (key: string): number => {
      q.addRateLimited(key);
      let waited = 0;
      while (q.len() === 0) {
        clock.advance(1);
        waited += 1;
      }
      assert.equal(q.tryGet(), key);
      q.done(key);
      return waited;
    };
    const delays = [readyAfter('a'), readyAfter('a'), readyAfter('a'), readyAfter('a')];
    assert.deepEqual(delays, [5, 10, 20, 40]);
    assert.equal(q.numRequeues('a'), 4);
    assert.equal(readyAfter('b'), 5, 'backoff is per key');
    q.forget('a');
    assert.equal(q.numRequeues('a'), 0);
    assert.equal(readyAfter('a'), 5, 'forget resets the backoff');
  });

  it('a key added directly is not delayed by its own pending backoff', () => {
    const clock = new FakeClock();
    const q = new WorkQueue({ clock, rateLimiter: new ItemExponentialFailureRateLimiter(1000, 10_000) });
    q.addRateLimited('a');
    q.add('a');
    assert.equal(q.tryGet(), 'a');
  });
});

describe('WorkQueue: fair across namespaces (issue 22)', () => {
  it("hands keys out round-robin across namespaces: one tenant's queued keys do not hold another's behind them", () => {
    const q = new WorkQueue({ clock: new FakeClock() });
    for (let i = 0; i < 30; i++) q.add(`slow/c${i}`);
    q.add('benign/c0');
    q.add('benign/c1');
    q.add('other/c0');
    const order = Array.from({ length: 8 }, () => q.tryGet());
    assert.deepEqual(order, [
      'slow/c0',
      'benign/c0',
      'other/c0',
      'slow/c1',
      'benign/c1',
      'slow/c2',
      'slow/c3',
      'slow/c4',
    ]);
    assert.equal(q.len(), 25);
  });

  it('within one namespace it is FIFO, and a key re-added while processing waits for done()', () => {
    const q = new WorkQueue({ clock: new FakeClock() });
    for (const k of ['a/1', 'a/2', 'a/3']) q.add(k);
    assert.equal(q.tryGet(), 'a/1');
    q.add('a/1');
    assert.deepEqual([q.tryGet(), q.tryGet(), q.tryGet()], ['a/2', 'a/3', undefined]);
    q.done('a/1');
    assert.equal(q.tryGet(), 'a/1');
  });
});

describe('rate limiters', () => {
  it('exponential backoff caps at the maximum (5 ms → 1000 s)', () => {
    const rl = new ItemExponentialFailureRateLimiter();
    const delays: number[] = [];
    for (let i = 0; i < 40; i++) delays.push(rl.when('k'));
    assert.equal(delays[0], 5);
    assert.equal(delays[1], 10);
    assert.equal(delays.at(-1), 1_000_000);
    for (let i = 1; i < delays.length; i++) assert.ok((delays[i] ?? 0) >= (delays[i - 1] ?? 0));
  });

  it('token bucket allows the burst, then spaces by qps, and refills with time', () => {
    const clock = new FakeClock();
    const rl = new BucketRateLimiter(10, 3, clock);
    assert.deepEqual([rl.when('a'), rl.when('b'), rl.when('c')], [0, 0, 0]);
    assert.equal(rl.when('d'), 100);
    assert.equal(rl.when('e'), 200);
    clock.advance(10_000);
    assert.equal(rl.when('f'), 0);
  });

  it('the default limiter is the max of per-key backoff and the bucket', () => {
    const clock = new FakeClock();
    const rl = defaultControllerRateLimiter(clock, { qps: 10, burst: 2 });
    assert.equal(rl.when('a'), 5);
    assert.equal(rl.when('b'), 5);
    assert.equal(rl.when('c'), 100, 'bucket exhausted → the bucket delay dominates');
    rl.forget('a');
    assert.equal(rl.numRequeues('a'), 0);
  });
});
