// Resource limits of addon rendering (issue 11 defect 3): the per-helper guard and the output cap
// of the pure renderer, and the worker pool's time budget and memory cap, which stop a hostile
// template without blocking this thread while other renders go on.
import assert from 'node:assert/strict';
import { getPriority } from 'node:os';
import { after, describe, it } from 'node:test';
import {
  RENDER_NICENESS,
  RenderPool,
  type RenderResult,
  renderAddon,
  withBoundedRenders,
} from '../../../controller/rendering/index.ts';
import { configMap, addonInput as input, withPool } from './fixtures.ts';

function failed(result: RenderResult) {
  if (result.ok) assert.fail('expected a failure');
  return result;
}

/**
 * Five nested #each over a 100-item list that write nothing: 10^10 iterations, the review's
 * event-loop blocker, in constant memory. (Writing one character per iteration builds a string of
 * hundreds of MiB, so on a fast machine the memory cap stopped it before the time budget did.)
 */
const NESTED_EACH = configMap(
  '  x: "{{#each Values.items}}{{#each @root.Values.items}}{{#each @root.Values.items}}{{#each @root.Values.items}}{{#each @root.Values.items}}{{/each}}{{/each}}{{/each}}{{/each}}{{/each}}"',
);
const HUNDRED = { items: Array.from({ length: 100 }, (_, i) => i) };
const GOOD = configMap('  name: {{Cluster.metadata.name}}', 'good');

describe('render limits in the pure renderer', () => {
  it('rejects {{indent 500000000 "x"}} at once, naming the limit and the file', () => {
    const result = failed(renderAddon(input({ 'big.yaml.hbs': configMap('  x: {{indent 500000000 "x"}}') })));
    assert.equal(result.reason, 'TemplateError');
    assert.match(
      result.message,
      /^cluster-addon\/a\/big\.yaml\.hbs:\d+:\d+: indent width 500000000 exceeds the limit of 256/,
    );
  });

  it('rejects an indent whose result would exceed the helper output limit', () => {
    const huge = `${'line\n'.repeat(1024 * 1024)}`;
    const result = failed(
      renderAddon(input({ 'big.yaml.hbs': configMap('  x: {{indent 200 Values.text}}') }, { text: huge })),
    );
    assert.match(result.message, /indent would produce more than the limit of 4 MiB/);
  });

  it('caps the output of an addon, naming the file that crossed the limit and the flag', () => {
    // The merged values count too (issue 22): they are small here, the file writes them 6 times.
    const files = {
      'a.yaml': configMap(`  x: "${'a'.repeat(600)}"`, 'one'),
      'b.yaml.hbs': configMap(`  x: "{{#each Values.six}}{{@root.Values.text}}{{/each}}"`, 'two'),
    };
    const six = [1, 2, 3, 4, 5, 6];
    const result = failed(
      renderAddon(input(files, { text: 'b'.repeat(100), six }), { maxOutputBytes: 1024 }),
    );
    assert.equal(result.reason, 'LimitExceeded');
    assert.equal(
      result.message,
      "cluster-addon/a/b.yaml.hbs (rendered): the addon's output exceeds the limit of 1 KiB (--render-max-output)",
    );
    assert.equal(renderAddon(input(files, { text: 'b', six }), { maxOutputBytes: 1024 }).ok, true);
  });
});

describe('RenderPool: time budget and memory cap in render processes', () => {
  // A spare worker after 200 ms (default 1 s), well inside the 4 s budget of the hostile render:
  // with both cores busy a worker takes about 1 s to load, so at 1.5 s the good render finished
  // only 0.1-0.3 s before the hostile one was stopped, and sometimes after.
  const pool = new RenderPool({ workers: 2, timeoutMs: 4_000, spareAfterMs: 200 });
  after(() => pool.close());

  it('stops a render over its time budget while this thread and the other worker keep working', async () => {
    let ticks = 0;
    const ticker = setInterval(() => {
      ticks += 1;
    }, 20);
    const hostile = pool.render(input({ 'loop.yaml.hbs': NESTED_EACH }, HUNDRED));
    let hostileDone = false;
    void hostile.then(() => {
      hostileDone = true;
    });
    // While the hostile render holds one worker, a spare worker renders a normal addon.
    const good = await pool.render(input({ 'good.yaml.hbs': GOOD }));
    assert.equal(hostileDone, false, 'the good render waited for the hostile one to be stopped');
    assert.equal(pool.workerStats.started, 2);
    const ticksWhileHostile = ticks;
    const result = failed(await hostile);
    clearInterval(ticker);
    assert.equal(good.ok, true, JSON.stringify(good));
    assert.ok(ticksWhileHostile > 0 || ticks > 0, 'the event loop ran while the hostile template rendered');
    assert.equal(result.reason, 'LimitExceeded');
    assert.equal(
      result.message,
      'cluster-addon/a/loop.yaml.hbs: rendering took longer than the time budget of 4s (--render-timeout) and was stopped',
    );
    assert.equal(pool.stopped.timeout, 1);
    // The terminated worker is replaced: the pool still renders.
    const again = await pool.render(input({ 'good.yaml.hbs': GOOD }));
    assert.equal(again.ok, true);
    // The spare serves it: a worker replaces the stopped one only when one is needed again.
    assert.equal(pool.workerStats.started, 2);
    assert.equal(pool.running, 1);
  });

  it('stops a render that needs more memory than its cap', async () => {
    await withPool({ workers: 1, timeoutMs: 120_000, maxMemoryMb: 32 }, async (small) => {
      const items = { items: Array.from({ length: 2000 }, (_, i) => `${'v'.repeat(64)}${i}`) };
      const template = configMap(
        '  x: "{{#each Values.items}}{{#each @root.Values.items}}{{toJson @root.Values.items}}{{/each}}{{/each}}"',
      );
      const result = failed(await small.render(input({ 'mem.yaml.hbs': template }, items)));
      assert.equal(result.reason, 'LimitExceeded');
      assert.equal(
        result.message,
        'cluster-addon/a/mem.yaml.hbs: rendering needs more than the memory limit of 32 MiB (--render-max-memory)',
      );
      assert.equal(small.stopped.memory, 1);
    });
  });

  it('a burst of quick renders runs in one worker: a second starts only for a render that holds the first', async () => {
    await withPool({ workers: 2, spareAfterMs: 2_000 }, async (lean) => {
      const results = await Promise.all(
        Array.from({ length: 20 }, () => lean.render(input({ 'good.yaml.hbs': GOOD }))),
      );
      assert.ok(results.every((r) => r.ok));
      assert.equal(lean.workerStats.started, 1);
    });
  });

  it('no spare for a render whose reply waited while this thread was busy past the threshold', async () => {
    await withPool({ workers: 2, spareAfterMs: 200 }, async (lagging) => {
      assert.equal((await lagging.render(input({ 'good.yaml.hbs': GOOD }))).ok, true); // loaded
      const first = lagging.render(input({ 'good.yaml.hbs': GOOD }));
      // This thread is busy for 600 ms (a burst of watch events, a collection): the worker
      // renders meanwhile, and its reply waits in the port.
      const until = performance.now() + 600;
      while (performance.now() < until) {}
      const second = lagging.render(input({ 'good.yaml.hbs': GOOD }));
      assert.equal(lagging.workerStats.started, 1, 'the finished render was taken for a held worker');
      assert.ok((await first).ok && (await second).ok);
      assert.equal(lagging.workerStats.started, 1);
    });
  });

  it('render processes run at a lower priority than the controller', async () => {
    await withPool({ workers: 1 }, async (pool) => {
      assert.equal((await pool.render(input({ 'good.yaml.hbs': GOOD }))).ok, true);
      const [pid] = pool.pids;
      assert.ok(pid !== undefined);
      assert.equal(getPriority(pid), Math.min(19, getPriority() + RENDER_NICENESS));
    });
  });

  it('stops a worker that has had no render for its idle time, and starts one again for the next render', async () => {
    await withPool({ workers: 1, idleMs: 100 }, async (idle) => {
      assert.equal((await idle.render(input({ 'good.yaml.hbs': GOOD }))).ok, true);
      assert.equal(idle.running, 1);
      await new Promise((r) => setTimeout(r, 400));
      assert.equal(idle.running, 0);
      assert.equal(idle.workerStats.idleStopped, 1);
      assert.equal((await idle.render(input({ 'good.yaml.hbs': GOOD }))).ok, true);
      assert.equal(idle.workerStats.started, 2);
    });
  });

  it('withBoundedRenders answers a pure caller with the pool results', async () => {
    let rounds = 0;
    const out = await withBoundedRenders(pool, (render) => {
      rounds += 1;
      const first = render(input({ 'good.yaml.hbs': GOOD }));
      const second = render(input({ 'loop.yaml.hbs': configMap('  x: {{indent 9999 "x"}}') }));
      return [first, second];
    });
    assert.equal(rounds, 2);
    assert.equal(out[0]?.ok, true);
    assert.equal(out[1]?.ok, false);
    assert.match(out[1]?.ok === false ? out[1].message : '', /indent width 9999 exceeds the limit/);
  });
});
