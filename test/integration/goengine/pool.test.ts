// Go engine calls in the render processes (controller/rendering/bounded.ts): a call is answered
// by the long-lived instance of a render process, and a template that never ends is stopped by
// the pool's time budget like any render.
// npm test: uses no test environment
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { RenderPool } from '../../../controller/rendering/bounded.ts';
import { goEngineBuild } from '../../support/goengine.ts';

describe('Go engine calls in the render pool', () => {
  let pool: RenderPool;
  const saved = process.env.STACKFLUX_GO_ENGINE;
  before(() => {
    process.env.STACKFLUX_GO_ENGINE = join(goEngineBuild(), 'goengine.wasm');
    pool = new RenderPool({ workers: 1, timeoutMs: 5_000 });
  });
  after(async () => {
    await pool.close();
    if (saved === undefined) delete process.env.STACKFLUX_GO_ENGINE;
    else process.env.STACKFLUX_GO_ENGINE = saved;
  });

  it('renders a Go template and a chart in a render process', async () => {
    const tpl = await pool.goEngine({
      op: 'goTemplate',
      text: '{{ .Cluster.metadata.name | upper }}',
      data: { Cluster: { metadata: { name: 'c1' } } },
    });
    assert.deepEqual(tpl, { ok: true, output: 'C1' });
    const chart = await pool.goEngine({
      op: 'helmTemplate',
      request: {
        files: {
          'Chart.yaml': 'apiVersion: v2\nname: c\nversion: 1.0.0\n',
          'templates/cm.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n',
        },
        releaseName: 'r',
        namespace: 'ns',
      },
    });
    assert.ok(chart.ok && 'stdout' in chart);
    assert.equal(
      chart.stdout,
      '---\n# Source: c/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: r\n',
    );
  });

  it('stops a template that never ends at the time budget, and the next call is served', async () => {
    const endless =
      '{{ range until 100000 }}{{ range until 100000 }}{{ range until 100000 }}{{ end }}{{ end }}{{ end }}';
    const res = await pool.goEngine({ op: 'goTemplate', text: endless, data: {} });
    assert.equal(res.ok, false);
    assert.equal(!res.ok && 'reason' in res && res.reason, 'LimitExceeded');
    assert.match(!res.ok && 'message' in res ? res.message : '', /the Go engine \(goTemplate\).*time budget/);
    assert.equal(pool.stopped.timeout, 1);
    assert.deepEqual(await pool.goEngine({ op: 'goTemplate', text: 'ok', data: null }), {
      ok: true,
      output: 'ok',
    });
  });
});

describe('loading the Go engine is not charged to a render', () => {
  it('a fresh render process loads the engine outside the time budget, then the budget holds', async () => {
    const saved = process.env.STACKFLUX_GO_ENGINE;
    process.env.STACKFLUX_GO_ENGINE = join(goEngineBuild(), 'goengine.wasm');
    // Compiling the module takes far longer than this budget; a quick template does not.
    const pool = new RenderPool({ workers: 1, timeoutMs: 300 });
    try {
      const first = await pool.goEngine({ op: 'goTemplate', text: '{{ "loaded" }}', data: null });
      assert.deepEqual(first, { ok: true, output: 'loaded' });
      assert.equal(pool.stopped.timeout, 0);
      const endless = '{{ range until 100000 }}{{ range until 100000 }}{{ end }}{{ end }}';
      const stuck = await pool.goEngine({ op: 'goTemplate', text: endless, data: null });
      assert.equal(!stuck.ok && 'reason' in stuck && stuck.reason, 'LimitExceeded');
      assert.equal(pool.stopped.timeout, 1);
    } finally {
      await pool.close();
      if (saved === undefined) delete process.env.STACKFLUX_GO_ENGINE;
      else process.env.STACKFLUX_GO_ENGINE = saved;
    }
  });

  it('a burst of engine calls on a cold pool runs in one process: loading the engine is not a render holding it', async () => {
    const saved = process.env.STACKFLUX_GO_ENGINE;
    process.env.STACKFLUX_GO_ENGINE = join(goEngineBuild(), 'goengine.wasm');
    // Loading the engine takes far longer than 300 ms (see above); each call of the burst does not.
    // Were the load a render held that long, a second process would start and load the engine too.
    const pool = new RenderPool({ workers: 2, spareAfterMs: 300 });
    try {
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          pool.goEngine({ op: 'goTemplate', text: `{{ ${i} }}`, data: null }),
        ),
      );
      assert.deepEqual(
        results,
        Array.from({ length: 20 }, (_, i) => ({ ok: true, output: String(i) })),
      );
      assert.equal(pool.workerStats.started, 1);
    } finally {
      await pool.close();
      if (saved === undefined) delete process.env.STACKFLUX_GO_ENGINE;
      else process.env.STACKFLUX_GO_ENGINE = saved;
    }
  });
});
