// Issue 22 row 10: renders are queued per namespace and taken round-robin, so one tenant's slow
// renders do not hold up another's; a template that keeps hitting limits cools down.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type RenderResult, withBoundedRenders } from '../../../controller/rendering/index.ts';
import { configMap, addonInput as input, sampleCluster, withPool } from './fixtures.ts';

/** Three nested #each over `n` items, writing nothing: slow in proportion to n³, in constant memory. */
const SLOW = configMap(
  '  x: "{{#each Values.items}}{{#each @root.Values.items}}{{#each @root.Values.items}}{{/each}}{{/each}}{{/each}}"',
  'slow',
);
const GOOD = configMap('  name: {{Cluster.metadata.name}}', 'good');
const items = (n: number) => ({ items: Array.from({ length: n }, (_, i) => i) });
/** Four nested #each: over 1,000 items 10^12 iterations, beyond any time budget here (10^8, over 100
 * items, finished within a 4 s budget on a fast CI machine). */
const STUCK = configMap(
  '  x: "{{#each Values.items}}{{#each @root.Values.items}}{{#each @root.Values.items}}{{#each @root.Values.items}}{{/each}}{{/each}}{{/each}}{{/each}}"',
  'stuck',
);

describe('RenderPool: fair across namespaces', () => {
  it("a render of another namespace completes before one tenant's queued slow renders drain", async () => {
    // One process and no spare: the queue's order alone decides.
    await withPool({ workers: 1, spareAfterMs: 600_000 }, async (pool) => {
      const done: string[] = [];
      const track = (label: string, p: Promise<RenderResult>) =>
        p.then((r) => {
          done.push(label);
          return r;
        });
      const slow = [1, 2, 3, 4].map((i) =>
        track(
          `slow-${i}`,
          pool.render(input({ 'slow.yaml.hbs': SLOW }, items(150 + i)), { namespace: 'tenant-slow' }),
        ),
      );
      const quick = track(
        'quick',
        pool.render(input({ 'good.yaml.hbs': GOOD }), { namespace: 'tenant-quick' }),
      );
      const results = await Promise.all([...slow, quick]);
      assert.ok(
        results.every((r) => r.ok),
        JSON.stringify(results.filter((r) => !r.ok)),
      );
      // The first slow render was running; the quick one is served next (by the shared process or
      // the reserved one), not after the others.
      assert.deepEqual(
        done.filter((l) => l !== 'quick'),
        ['slow-1', 'slow-2', 'slow-3', 'slow-4'],
      );
      assert.ok(done.indexOf('quick') < done.indexOf('slow-2'), done.join());
    });
  });

  it('withBoundedRenders queues its renders in the namespace it is given', async () => {
    await withPool({ workers: 1, spareAfterMs: 600_000 }, async (pool) => {
      const done: string[] = [];
      const slow = [1, 2, 3].map((i) =>
        withBoundedRenders(
          pool,
          (render) => render(input({ 'slow.yaml.hbs': SLOW }, items(150 + i))),
          new Map(),
          {
            namespace: 'tenant-slow',
          },
        ).then(() => done.push(`slow-${i}`)),
      );
      const quick = withBoundedRenders(
        pool,
        (render) => render(input({ 'good.yaml.hbs': GOOD })),
        new Map(),
        {
          namespace: 'tenant-quick',
        },
      ).then(() => done.push('quick'));
      await Promise.all([...slow, quick]);
      assert.deepEqual(
        done.filter((l) => l !== 'quick'),
        ['slow-1', 'slow-2', 'slow-3'],
      );
      assert.ok(done.indexOf('quick') < done.indexOf('slow-2'), done.join());
    });
  });

  it('a namespace with no render running is served by the reserved process while another tenant holds every shared one', async () => {
    // One shared process, held by a render that runs until its time budget stops it: without the
    // reserved process the quick render of another tenant would wait for that.
    await withPool({ workers: 1, spareAfterMs: 600_000, timeoutMs: 4_000 }, async (pool) => {
      const done: string[] = [];
      const stuck = pool
        .render(input({ 'stuck.yaml.hbs': STUCK }, items(1000)), { namespace: 'tenant-slow' })
        .then((r) => {
          done.push('stuck');
          return r;
        });
      // The slow tenant's second render waits: its namespace already renders, so not reserved.
      const queued = pool.render(input({ 'good.yaml.hbs': GOOD }), { namespace: 'tenant-slow' }).then((r) => {
        done.push('slow-tenant-quick');
        return r;
      });
      const quick = await pool.render(input({ 'good.yaml.hbs': GOOD }), { namespace: 'tenant-quick' });
      done.push('quick');
      assert.equal(quick.ok, true, JSON.stringify(quick));
      assert.deepEqual(done, ['quick'], 'the other tenant waited for the stuck render');
      assert.equal(pool.running, 2, 'the shared process and the reserved one');
      const [stuckResult, queuedResult] = await Promise.all([stuck, queued]);
      assert.equal(stuckResult.ok ? 'ok' : stuckResult.reason, 'LimitExceeded');
      assert.equal(queuedResult.ok, true);
      assert.deepEqual(done, ['quick', 'stuck', 'slow-tenant-quick']);
    });
  });
});

/** A render's result as its failure reason, or 'ok'. */
async function reasonOf(p: Promise<RenderResult>): Promise<string> {
  const r = await p;
  return r.ok ? 'ok' : r.reason;
}

describe('RenderPool: a template that keeps hitting limits cools down', () => {
  it('after K limit hits in a row it is not rendered for the back-off, naming the limit; other values, namespaces and templates still render', async () => {
    await withPool({ workers: 1, timeoutMs: 300, coolDownAfter: 2, coolDownMs: 600_000 }, async (pool) => {
      const stuck = input({ 'stuck.yaml.hbs': STUCK }, items(1000));
      const opts = { namespace: 'tenant-a' };
      for (let i = 0; i < 2; i++) {
        const r = await pool.render(stuck, opts);
        assert.equal(r.ok ? 'ok' : r.reason, 'LimitExceeded');
      }
      assert.equal(pool.stopped.timeout, 2);
      const cooling = await pool.render(stuck, opts);
      if (cooling.ok) assert.fail('rendered while cooling down');
      assert.equal(cooling.reason, 'CoolingDown');
      assert.match(
        cooling.message,
        /^cluster-addon\/a\/: not rendered until \d{4}-\d\d-\d\dT[\d:.]+Z: its renders hit a limit 2 times in a row, last: cluster-addon\/a\/stuck\.yaml\.hbs: rendering took longer than the time budget of 300ms \(--render-timeout\) and was stopped$/,
      );
      assert.equal(pool.stopped.timeout, 2, 'the cooling template was not rendered');
      assert.equal(pool.workerStats.coolingDown, 1);
      // Another Cluster of the namespace rendering it with the same values: cooling too.
      const beta = await pool.render({ ...stuck, cluster: sampleCluster({ name: 'beta' }) }, opts);
      assert.equal(beta.ok ? 'ok' : beta.reason, 'CoolingDown');
      // With other values (another Cluster's per-cluster values) it renders.
      const other = await pool.render(input({ 'stuck.yaml.hbs': STUCK }, items(3)), opts);
      assert.equal(other.ok, true, JSON.stringify(other));
      // Another namespace's render of the same template and values is that tenant's: rendered.
      const elsewhere = await pool.render(stuck, { namespace: 'tenant-b' });
      assert.equal(elsewhere.ok ? 'ok' : elsewhere.reason, 'LimitExceeded');
      assert.equal(pool.stopped.timeout, 3);
      // Another template of the namespace renders.
      assert.equal((await pool.render(input({ 'good.yaml.hbs': GOOD }), opts)).ok, true);
    });
  });

  it('K different values in a row hitting a limit cool the template down for any values; one good render ends that streak', async () => {
    await withPool({ workers: 1, timeoutMs: 300, coolDownAfter: 2, coolDownMs: 600_000 }, async (pool) => {
      const opts = { namespace: 'tenant-a' };
      // Slow whatever its values: each Cluster's per-cluster values differ (here `n`).
      const stuckWith = (n: number) => input({ 'stuck.yaml.hbs': STUCK }, { ...items(1000), n });
      assert.equal(await reasonOf(pool.render(stuckWith(1), opts)), 'LimitExceeded');
      // A good render of the template (other values) between two hits ends the template's streak.
      assert.equal((await pool.render(input({ 'stuck.yaml.hbs': STUCK }, items(2)), opts)).ok, true);
      assert.equal(await reasonOf(pool.render(stuckWith(2), opts)), 'LimitExceeded');
      assert.equal(await reasonOf(pool.render(stuckWith(3), opts)), 'LimitExceeded');
      assert.equal(pool.stopped.timeout, 3);
      // Two different values in a row: the template cools down, also for values never rendered.
      const fresh = await pool.render(stuckWith(4), opts);
      if (fresh.ok) assert.fail('rendered while the template cools down');
      assert.equal(fresh.reason, 'CoolingDown');
      assert.match(
        fresh.message,
        /hit a limit 2 times in a row with different values, last: .*--render-timeout/,
      );
      assert.equal(pool.stopped.timeout, 3, 'the cooling template was not rendered');
      // Another namespace's render of the same template is that tenant's: rendered.
      assert.equal(await reasonOf(pool.render(stuckWith(4), { namespace: 'tenant-b' })), 'LimitExceeded');
    });
  });

  it('a render within the limits ends the streak: only hits in a row count', async () => {
    await withPool({ workers: 1, timeoutMs: 300, coolDownAfter: 2, coolDownMs: 600_000 }, async (pool) => {
      const opts = { namespace: 'tenant-a' };
      // The loop runs over a field of the Cluster: the template and values stay the same.
      const each = '{{#each @root.Cluster.spec.loop}}';
      const loop = configMap(`  x: "${each.repeat(4)}{{/each}}{{/each}}{{/each}}{{/each}}"`, 'loop');
      const stuck = (n: number) => {
        const cluster = sampleCluster();
        return {
          ...input({ 'loop.yaml.hbs': loop }),
          cluster: { ...cluster, spec: { ...cluster.spec, loop: items(n).items } },
        };
      };
      assert.equal((await pool.render(stuck(100), opts)).ok, false);
      assert.equal((await pool.render(stuck(2), opts)).ok, true);
      const again = await pool.render(stuck(100), opts);
      assert.equal(
        again.ok ? 'ok' : again.reason,
        'LimitExceeded',
        'one hit after a good render does not cool down',
      );
      // The second hit in a row does.
      assert.equal((await pool.render(stuck(100), opts)).ok, false);
      const cooling = await pool.render(stuck(2), opts);
      assert.equal(cooling.ok ? 'ok' : cooling.reason, 'CoolingDown');
      assert.equal(pool.stopped.timeout, 3);
    });
  });
});
