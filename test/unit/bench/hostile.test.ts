// The hostile bench's own arithmetic and its refusing fleet hook (test/bench/hostile*.ts).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { percentile, renewGaps } from '../../bench/hostile.ts';
import { REFUSED_MARKER, refusingHook } from '../../bench/hostile-inputs.ts';
import { git, initRepo } from '../../support/e2e.ts';

describe('hostile bench', () => {
  it('renewGaps: seconds between distinct renewTimes, and from the last one to the end', () => {
    const t = (s: number): string => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString();
    const start = Date.UTC(2026, 0, 1, 0, 0, 0);
    const gaps = renewGaps([t(2), t(2), undefined, t(4), t(20), t(20)], start, start + 21_000);
    assert.deepEqual(gaps, [2, 16, 1]);
  });

  it('renewGaps: a Lease never renewed is one gap as long as the run', () => {
    assert.deepEqual(renewGaps([undefined, undefined], 0, 30_000), [30]);
  });

  it('percentile: nearest rank', () => {
    const xs = Array.from({ length: 100 }, (_, i) => i + 1);
    assert.equal(percentile(xs, 99), 99);
    assert.equal(percentile(xs, 50), 50);
    assert.equal(percentile([7], 99), 7);
    assert.equal(percentile([], 50), undefined);
  });

  it('the fleet pre-receive hook refuses a push holding the marker file and accepts others', () => {
    const dir = mkdtempSync(join(tmpdir(), 'hostile-hook-'));
    try {
      const bare = join(dir, 'fleet.git');
      execFileSync('git', ['init', '-q', '--bare', bare]);
      writeFileSync(join(bare, 'hooks', 'pre-receive'), refusingHook());
      chmodSync(join(bare, 'hooks', 'pre-receive'), 0o755);
      const work = join(dir, 'work');
      initRepo(work);
      writeFileSync(join(work, 'ok.yaml'), 'a: 1\n');
      git(work, 'add', '-A');
      git(work, 'commit', '-q', '-m', 'ok');
      git(work, 'push', '-q', bare, 'main:refs/heads/ok');
      writeFileSync(join(work, `${REFUSED_MARKER}.yaml`), 'b: 2\n');
      git(work, 'add', '-A');
      git(work, 'commit', '-q', '-m', 'marker');
      assert.throws(
        () => git(work, 'push', '-q', bare, 'main:refs/heads/refused'),
        /pre-receive hook declined/,
      );
      assert.equal(
        execFileSync('git', ['for-each-ref', '--format=%(refname)'], { cwd: bare, encoding: 'utf8' }).trim(),
        'refs/heads/ok',
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
