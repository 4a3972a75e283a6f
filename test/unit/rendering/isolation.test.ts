// Issue 22 row 8: a render can never take the controller down. Each heap bomb of
// test/support/render-hostile.ts is rendered in a process of its own (standing in for the
// controller) several times: that process must live, report the memory limit, and render a good
// template afterwards. With renders in worker threads it aborted (SIGABRT, exit 134) every time.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

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
