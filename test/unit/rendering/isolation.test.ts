// Issue 22 row 8: a render can never take the controller down. Each heap bomb of
// test/support/render-hostile.ts is rendered in a process of its own (standing in for the
// controller) several times: that process must live, report the memory limit, and render a good
// template afterwards. With renders in worker threads it aborted (SIGABRT, exit 134) every time.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { RenderPool } from '../../../controller/rendering/index.ts';
import { addonInput, configMap } from './fixtures.ts';

const SCRIPT = fileURLToPath(new URL('../../support/render-hostile.ts', import.meta.url));
const RUNS = 3;

function runBomb(kind: string) {
  const run = spawnSync(process.execPath, [SCRIPT, kind], { encoding: 'utf8', timeout: 300_000 });
  return { status: run.status, signal: run.signal, stdout: run.stdout, stderr: run.stderr.slice(-2000) };
}

describe('a render that exhausts its heap does not take its parent down', () => {
  for (const kind of ['helm-values-scalar', 'file-scalar']) {
    it(`${kind}: ${RUNS} runs, the parent lives and renders a good template after each`, () => {
      for (let i = 1; i <= RUNS; i++) {
        const run = runBomb(kind);
        assert.equal(run.signal, null, `run ${i}: the parent was killed by ${run.signal}\n${run.stderr}`);
        assert.equal(run.status, 0, `run ${i}: the parent exited with ${run.status}\n${run.stderr}`);
        const out = JSON.parse(run.stdout) as { hostile: { reason: string; message: string }; good: boolean };
        assert.equal(out.hostile.reason, 'LimitExceeded');
        assert.match(
          out.hostile.message,
          /^cluster-addon\/a\/[\w.]+\.hbs: rendering needs more than the memory limit of 128 MiB \(--render-max-memory\)$/,
        );
        assert.equal(out.good, true, `run ${i}: the good template did not render after the bomb`);
      }
    });
  }
});

describe('render processes', () => {
  it("do not get the controller's environment (its credentials)", async () => {
    process.env.STACKFLUX_TEST_SECRET = 'hunter2';
    const pool = new RenderPool({ workers: 1 });
    try {
      const r = await pool.render(
        addonInput({ 'good.yaml.hbs': configMap('  name: {{Cluster.metadata.name}}') }),
      );
      assert.equal(r.ok, true);
      const [pid] = pool.pids;
      assert.ok(pid !== undefined, 'a render process runs');
      const environ = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
      assert.equal(
        environ.find((e) => e.startsWith('STACKFLUX_TEST_SECRET=')),
        undefined,
        'the render process sees the variable',
      );
    } finally {
      delete process.env.STACKFLUX_TEST_SECRET;
      await pool.close();
    }
  });
});
