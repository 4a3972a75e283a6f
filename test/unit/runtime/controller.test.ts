import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { FakeClock } from '../../../controller/runtime/clock.ts';
import { Controller, type ReconcileResult, TerminalError } from '../../../controller/runtime/controller.ts';
import { newLogger } from '../../../controller/runtime/logging.ts';
import { RuntimeMetrics } from '../../../controller/runtime/metrics.ts';
import { ItemExponentialFailureRateLimiter } from '../../../controller/runtime/workqueue.ts';

/** Lets pending promise callbacks and immediates run (no timers involved). */
async function settle(rounds = 20): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((r) => setImmediate(r));
}

function capture(): { stream: Writable; lines: () => Array<Record<string, unknown>> } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      chunks.push(chunk.toString());
      cb();
    },
  });
  return {
    stream,
    lines: () =>
      chunks
        .join('')
        .split('\n')
        .filter((l) => l.trim() !== '')
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

function setup(
  reconcile: (key: string) => Promise<ReconcileResult | undefined> | ReconcileResult | undefined,
  opts: { workers?: number } = {},
) {
  const clock = new FakeClock();
  const metrics = new RuntimeMetrics();
  const log = capture();
  const c = new Controller({
    name: 'test',
    kind: 'Thing',
    reconcile: (key) => reconcile(key),
    maxConcurrentReconciles: opts.workers ?? 1,
    clock,
    metrics,
    rateLimiter: new ItemExponentialFailureRateLimiter(5, 1_000_000),
    logger: newLogger({ destination: log.stream, level: 'debug' }),
  });
  return { clock, metrics, c, log };
}

describe('Controller', () => {
  it('never runs one key concurrently, even with many workers', async () => {
    let active = 0;
    let maxActive = 0;
    let runs = 0;
    const gates: Array<() => void> = [];
    const { c } = setup(
      async () => {
        runs += 1;
        active += 1;
        maxActive = Math.max(maxActive, active);
        await new Promise<void>((r) => gates.push(r));
        active -= 1;
        return undefined;
      },
      { workers: 8 },
    );
    c.start();
    c.enqueue('ns/a');
    await settle();
    for (let i = 0; i < 10; i++) c.enqueue('ns/a');
    await settle();
    assert.equal(runs, 1, 'second run waits for the first');
    gates.shift()?.();
    await settle();
    assert.equal(runs, 2, 'the adds during the first run collapse into one more run');
    gates.shift()?.();
    await settle();
    assert.equal(runs, 2);
    assert.equal(maxActive, 1);
    await c.stop();
  });

  it('runs different keys concurrently up to maxConcurrentReconciles', async () => {
    let active = 0;
    let maxActive = 0;
    const gates: Array<() => void> = [];
    const { c } = setup(
      async () => {
        active += 1;
        maxActive = Math.max(maxActive, active);
        await new Promise<void>((r) => gates.push(r));
        active -= 1;
        return undefined;
      },
      { workers: 3 },
    );
    c.start();
    for (let i = 0; i < 10; i++) c.enqueue(`ns/k${i}`);
    await settle();
    assert.equal(active, 3);
    while (gates.length > 0) {
      for (const g of gates.splice(0)) g();
      await settle();
    }
    assert.equal(maxActive, 3);
    await c.stop();
  });

  it('retries a reject, a sync throw and a non-Error throw with growing backoff, and counts errors', async () => {
    let calls = 0;
    const callTimes: number[] = [];
    const { c, clock, metrics, log } = setup(
      // Not async, so the second and third failures are synchronous throws out of the function itself.
      (key) => {
        callTimes.push(clock.now());
        calls += 1;
        assert.equal(key, 'ns/x');
        if (calls === 1) return Promise.reject(new Error('rejected'));
        if (calls === 2) throw 'a string';
        if (calls === 3) throw undefined;
        return undefined;
      },
    );
    c.start();
    c.enqueue('ns/x');
    await settle();
    assert.equal(calls, 1);
    // Retry 1 after 5 ms, 2 after 10 ms, 3 after 20 ms.
    for (const [wait, expectCalls] of [
      [4, 1],
      [1, 2],
      [9, 2],
      [1, 3],
      [19, 3],
      [1, 4],
    ] as const) {
      clock.advance(wait);
      await settle();
      assert.equal(calls, expectCalls, `after +${wait}ms`);
    }
    clock.advance(1_000_000);
    await settle();
    assert.equal(calls, 4, 'success ends retries');
    const start = callTimes[0] ?? 0;
    assert.deepEqual(
      callTimes.map((t) => t - start),
      [0, 5, 15, 35],
    );
    assert.equal(await metrics.value('controller_runtime_reconcile_errors_total', { controller: 'test' }), 3);
    assert.equal(
      await metrics.value('controller_runtime_reconcile_total', { controller: 'test', result: 'error' }),
      3,
    );
    assert.equal(
      await metrics.value('controller_runtime_reconcile_total', { controller: 'test', result: 'success' }),
      1,
    );
    assert.equal(await metrics.value('workqueue_retries_total', { name: 'test' }), 3);
    assert.equal(c.queue.numRequeues('ns/x'), 0, 'success forgets the backoff');
    const errors = log.lines().filter((l) => l.msg === 'reconcile failed; retrying');
    assert.equal(errors.length, 3);
    for (const line of errors) {
      assert.equal(line.kind, 'Thing');
      assert.equal(line.namespace, 'ns');
      assert.equal(line.name, 'x');
      assert.equal(typeof line.reconcileID, 'string');
    }
    await c.stop();
  });

  it('does not retry a TerminalError', async () => {
    let calls = 0;
    const { c, clock, metrics } = setup(async () => {
      calls += 1;
      throw new TerminalError('bad spec');
    });
    c.start();
    c.enqueue('ns/t');
    await settle();
    clock.advance(10_000_000);
    await settle();
    assert.equal(calls, 1);
    assert.equal(
      await metrics.value('controller_runtime_terminal_reconcile_errors_total', { controller: 'test' }),
      1,
    );
    c.enqueue('ns/t');
    await settle();
    assert.equal(calls, 2, 'a new add runs it again');
    await c.stop();
  });

  it('honours requeueAfter (forgetting backoff) and requeue (with backoff), by order', async () => {
    const order: string[] = [];
    let aCalls = 0;
    const { c, clock, metrics } = setup(async (key) => {
      order.push(key);
      if (key === 'ns/a') {
        aCalls += 1;
        if (aCalls === 1) return { requeueAfter: 1000 };
        return undefined;
      }
      if (key === 'ns/b' && order.filter((k) => k === 'ns/b').length === 1) return { requeue: true };
      return undefined;
    });
    c.start();
    c.enqueue('ns/a');
    c.enqueue('ns/b');
    await settle();
    assert.deepEqual(order, ['ns/a', 'ns/b']);
    clock.advance(5);
    await settle();
    assert.deepEqual(order, ['ns/a', 'ns/b', 'ns/b'], 'requeue: b comes back after the first backoff step');
    clock.advance(994);
    await settle();
    assert.equal(order.length, 3, 'a not before its requeueAfter');
    clock.advance(1);
    await settle();
    assert.deepEqual(order, ['ns/a', 'ns/b', 'ns/b', 'ns/a']);
    assert.equal(
      await metrics.value('controller_runtime_reconcile_total', {
        controller: 'test',
        result: 'requeue_after',
      }),
      1,
    );
    assert.equal(
      await metrics.value('controller_runtime_reconcile_total', { controller: 'test', result: 'requeue' }),
      1,
    );
    await c.stop();
  });

  it('stop() waits for in-flight reconciles, aborts their signal, and starts nothing new', async () => {
    const events: string[] = [];
    let release: () => void = () => {};
    let sawAbort = false;
    const clock = new FakeClock();
    const c = new Controller({
      name: 'stop',
      clock,
      reconcile: async (key, ctx) => {
        events.push(`start ${key}`);
        await new Promise<void>((r) => {
          release = r;
        });
        sawAbort = ctx.signal.aborted;
        events.push(`end ${key}`);
      },
    });
    c.start();
    c.enqueue('a');
    c.enqueue('b');
    await settle();
    const stopped = c.stop({ abort: true }).then(() => events.push('stopped'));
    await settle();
    release();
    await stopped;
    assert.deepEqual(events, ['start a', 'end a', 'stopped']);
    assert.equal(sawAbort, true);
  });
});
