import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  marksNoEnvironment,
  NO_ENVIRONMENT_MARK,
  planLanes,
  reportCounts,
  summarize,
} from '../../../hack/lib/testlanes.ts';

describe('npm test lanes', () => {
  it('puts each file in its lane by name and folder, keeping their order', () => {
    const lanes = planLanes([
      'test/e2e/a.test.ts',
      'test/e2e/b.workload.test.ts',
      'test/e2e/c.disruptive.test.ts',
      'test/integration/d.test.ts',
      'test/unit/e.test.ts',
      'test/unit/f/g.test.ts',
      'test/e2e/h.workload.test.ts',
    ]);
    assert.deepEqual(lanes, {
      shared: ['test/e2e/a.test.ts', 'test/integration/d.test.ts'],
      workload: ['test/e2e/b.workload.test.ts', 'test/e2e/h.workload.test.ts'],
      disruptive: ['test/e2e/c.disruptive.test.ts'],
      unit: ['test/unit/e.test.ts', 'test/unit/f/g.test.ts'],
    });
  });

  it('a file marked as using no environment joins the unit tests; the mark is a line of its own', () => {
    const marked = new Set(['test/integration/goengine/a.test.ts']);
    const lanes = planLanes(
      ['test/integration/goengine/a.test.ts', 'test/integration/b.test.ts', 'test/unit/c.test.ts'],
      (f) => marked.has(f),
    );
    assert.deepEqual(lanes.unit, ['test/integration/goengine/a.test.ts', 'test/unit/c.test.ts']);
    assert.deepEqual(lanes.shared, ['test/integration/b.test.ts']);
    assert.equal(marksNoEnvironment(`// header\n${NO_ENVIRONMENT_MARK}\nimport x;\n`), true);
    assert.equal(marksNoEnvironment(`const s = '${NO_ENVIRONMENT_MARK}';\n`), false);
  });

  it('reads the last ℹ counts of a spec report', () => {
    const report = '✔ a (1ms)\nℹ tests 1\nℹ pass 1\n▶ more\nℹ tests 12\nℹ pass 10\nℹ fail 2\nℹ skipped 0\n';
    assert.deepEqual(reportCounts(report), {
      tests: 12,
      pass: 10,
      fail: 2,
      cancelled: 0,
      skipped: 0,
      todo: 0,
    });
    assert.deepEqual(reportCounts('no summary'), {
      tests: 0,
      pass: 0,
      fail: 0,
      cancelled: 0,
      skipped: 0,
      todo: 0,
    });
  });

  it('sums the files, fails on any non-zero exit (also without a summary) and names the longest', () => {
    const ok = { file: 'x', code: 0, seconds: 30, report: 'ℹ tests 3\nℹ pass 3\n' };
    const bad = { file: 'y', code: 1, seconds: 90, report: 'ℹ tests 2\nℹ pass 1\nℹ fail 1\n' };
    const crashed = { file: 'z', code: 7, seconds: 1, report: 'Error: cannot find module' };
    const s = summarize([ok, bad, crashed], 2);
    assert.equal(s.failed, true);
    assert.match(
      s.lines[0] ?? '',
      /^3 files, tests 5, pass 4, fail 1, cancelled 0, skipped 0, todo 0; 2\.0 min/,
    );
    assert.deepEqual(s.lines.slice(1, 3), ['failed: y (exit 1)', 'failed: z (exit 7)']);
    assert.equal(s.lines[3], 'longest files: y 90s, x 30s');
    assert.equal(summarize([ok]).failed, false);
  });
});
