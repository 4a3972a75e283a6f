// `stackflux run` against the real API server with a setting that is refused only once the release
// pipeline has started (its informers and pollers running): the process must still end, with the
// error and exit 2, rather than print the error and keep running with nothing to do.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { testEnv, uniqueName } from '../../support/env.ts';

const ROOT = join(import.meta.dirname, '..', '..', '..');

describe('stackflux run: a setting refused after the start began', () => {
  it('ends the process with exit 2 and names the flag', async () => {
    const cache = mkdtempSync(join(tmpdir(), 'sf-run-start-'));
    try {
      const child = spawn(
        process.execPath,
        [
          join(ROOT, 'bin', 'stackflux.js'),
          'run',
          `--kubeconfig=${testEnv().kubeconfig}`,
          `--namespace=${uniqueName('run-start')}`,
          '--fleet-url=http://127.0.0.1:1/fleet.git',
          '--fleet-batch-window=soon',
          '--metrics-addr=127.0.0.1:0',
          '--health-addr=127.0.0.1:0',
          `--cache-dir=${cache}`,
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let stderr = '';
      child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
      child.stdout.resume();
      const ended = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
      const timeout = new Promise<'running'>((resolve) =>
        setTimeout(() => resolve('running'), 60_000).unref(),
      );
      const result = await Promise.race([ended, timeout]);
      if (result === 'running') child.kill('SIGKILL');
      assert.equal(
        result,
        2,
        `stackflux run still ${result === 'running' ? 'running after 60 s' : `exited ${result}`}: ${stderr.slice(-2000)}`,
      );
      assert.match(stderr, /--fleet-batch-window/);
    } finally {
      rmSync(cache, { recursive: true, force: true });
    }
  });
});
