// The function-length check of npm run lint (hack/check-function-length.ts, issue 34): what counts
// as a function, how it is named and measured, on a small synthetic source; the check's output on
// a long function; and controller/controllers/ as it is today.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { functionLengths, longFunctions } from '../../../hack/lib/functionlength.ts';

const REPO = join(import.meta.dirname, '..', '..', '..');
const CHECK = join(REPO, 'hack', 'check-function-length.ts');

const SOURCE = `// a comment before
/** JSDoc is not counted. */
export function declared(a: number): number {
  return a;
}

const arrow = (x: number) => x + 1;

const expr = function (): void {
  // one
  // two
};

class Thing {
  constructor() {}
  method(): number {
    const inner = () => {
      return 1;
    };
    return inner();
  }
  get size(): number {
    return 0;
  }
}

export const obj = { prop: async () => {
  return [1].map((n) => n);
} };

declare function bodiless(): void;
`;

describe('functionLengths', () => {
  it('finds declarations, methods, accessors, arrows and expressions, named by what holds them', () => {
    const got = functionLengths('x.ts', SOURCE).map((f) => `${f.line} ${f.name} ${f.lines}`);
    assert.deepEqual(got, [
      '3 declared 3',
      '7 arrow 1',
      '9 expr 4',
      '15 Thing.constructor 1',
      '16 Thing.method 6',
      '17 inner 3',
      '22 Thing.size 3',
      '27 prop 3',
      '28 <anonymous> 1',
    ]);
  });

  it('counts from the first token to the last, inclusive, without leading comments', () => {
    const [f] = functionLengths('y.ts', `\n\n// c\nfunction f() {\n\n\n}\n`);
    assert.deepEqual(f, { line: 4, name: 'f', lines: 4 });
  });
});

describe('longFunctions', () => {
  it('keeps the functions over the limit, longest first', () => {
    const lengths = [
      { line: 1, name: 'a', lines: 150 },
      { line: 9, name: 'b', lines: 151 },
      { line: 3, name: 'c', lines: 300 },
    ];
    assert.deepEqual(
      longFunctions(lengths, 150).map((f) => f.name),
      ['c', 'b'],
    );
    assert.deepEqual(longFunctions([], 150), []);
  });
});

describe('hack/check-function-length.ts', () => {
  it('fails on a function over the limit, naming file:line, name and length', () => {
    const dir = mkdtempSync(join(tmpdir(), 'fnlen-'));
    try {
      const body = Array.from({ length: 5 }, (_, i) => `  const x${i} = ${i};`).join('\n');
      writeFileSync(join(dir, 'long.ts'), `// header\nexport function long() {\n${body}\n}\n`);
      const run = spawnSync(process.execPath, [CHECK, '--max', '6', dir], { encoding: 'utf8' });
      assert.equal(run.status, 1);
      assert.match(run.stderr, /long\.ts:2 long \(7 lines\)/);
      const ok = spawnSync(process.execPath, [CHECK, '--max', '7', dir], { encoding: 'utf8' });
      assert.equal(ok.status, 0, ok.stderr);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('passes on controller/controllers/ as it is today (npm run lint)', () => {
    const run = spawnSync(process.execPath, [CHECK], { cwd: REPO, encoding: 'utf8' });
    assert.equal(run.status, 0, run.stderr);
  });
});
