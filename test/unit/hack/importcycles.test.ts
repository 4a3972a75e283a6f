// The import-cycle check of npm run lint (hack/check-import-cycles.ts, issue 34): the cycle finder
// on small graphs, what counts as an import, and controller/ as it is today.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import {
  cyclicComponents,
  findCycles,
  formatCycle,
  readImportGraph,
  resolveRelativeSpecifier,
  staticImportSpecifiers,
} from '../../../hack/lib/importcycles.ts';

const REPO = join(import.meta.dirname, '..', '..', '..');

const graph = (edges: Record<string, string[]>) => new Map(Object.entries(edges));

describe('cyclicComponents (Tarjan)', () => {
  it('finds none in a graph without a cycle, diamonds included', () => {
    assert.deepEqual(cyclicComponents(graph({ a: ['b', 'c'], b: ['d'], c: ['d'], d: [] })), []);
    assert.deepEqual(cyclicComponents(new Map()), []);
  });

  it('finds each strongly connected component with a cycle, and a file that imports itself', () => {
    const g = graph({
      a: ['b'],
      b: ['c'],
      c: ['a', 'd'], // a → b → c → a
      d: ['e'],
      e: ['d'], // d ⇄ e, reached from the first component but not part of it
      f: ['f'],
      g: ['a'],
    });
    assert.deepEqual(cyclicComponents(g), [['a', 'b', 'c'], ['d', 'e'], ['f']]);
  });

  it('does not depend on the order the files are listed in', () => {
    const g = graph({ z: ['y'], y: ['x'], x: ['z', 'w'], w: [] });
    const reversed = new Map([...g].reverse());
    assert.deepEqual(cyclicComponents(g), [['x', 'y', 'z']]);
    assert.deepEqual(cyclicComponents(reversed), [['x', 'y', 'z']]);
  });

  it('handles a long chain without recursion', () => {
    const n = 20_000; // deeper than a recursive Tarjan gets with node's default stack
    const edges: Record<string, string[]> = {};
    for (let i = 0; i < n; i++)
      edges[`m${String(i).padStart(6, '0')}`] = [`m${String(i + 1).padStart(6, '0')}`];
    edges[`m${String(n).padStart(6, '0')}`] = ['m000000'];
    const [component, ...rest] = cyclicComponents(graph(edges));
    assert.equal(component?.length, n + 1);
    assert.deepEqual(rest, []);
  });
});

describe('findCycles', () => {
  it('gives each cycle once as a path of files, from its least file back to it', () => {
    const g = graph({ 'b.ts': ['a.ts'], 'a.ts': ['b.ts'], 'c.ts': ['c.ts'], 'd.ts': ['a.ts'] });
    assert.deepEqual(findCycles(g), [
      ['a.ts', 'b.ts', 'a.ts'],
      ['c.ts', 'c.ts'],
    ]);
  });

  it('gives the shortest cycle through every file of a component (the two circles of the releases registry)', () => {
    // format imports both formats, each format imports format back: one component, two cycles.
    const g = graph({
      'format.ts': ['csctl/index.ts', 'description.ts', 'native.ts'],
      'native.ts': ['description.ts', 'format.ts', 'stack.ts'],
      'csctl/index.ts': ['description.ts', 'format.ts', 'stack.ts'],
      'description.ts': [],
      'stack.ts': ['tags.ts'],
      'tags.ts': [],
    });
    assert.deepEqual(cyclicComponents(g), [['csctl/index.ts', 'format.ts', 'native.ts']]);
    assert.deepEqual(findCycles(g), [
      ['csctl/index.ts', 'format.ts', 'csctl/index.ts'],
      ['format.ts', 'native.ts', 'format.ts'],
    ]);
  });

  it('follows a longer cycle in its direction', () => {
    const g = graph({ a: ['b'], b: ['c'], c: ['d'], d: ['a'] });
    assert.deepEqual(findCycles(g), [['a', 'b', 'c', 'd', 'a']]);
  });

  it('formats a cycle as repository paths', () => {
    assert.equal(
      formatCycle(['/r/controller/a.ts', '/r/controller/x/b.ts', '/r/controller/a.ts'], '/r'),
      'controller/a.ts -> controller/x/b.ts -> controller/a.ts',
    );
  });
});

describe('what counts as an import', () => {
  it('reads static imports and re-exports, type-only ones included, and not dynamic import() or comments', () => {
    const text = `
      // import { no } from './comment.ts';
      import { a } from './a.ts';
      import type { B } from '../b.ts';
      import { type C, c } from './c.ts';
      import './side-effect.ts';
      import * as d from 'node:fs';
      import {
        e,
        f,
      } from './ef.ts';
      export { g } from './g.ts';
      export type { H } from './h.ts';
      export * from './i.ts';
      export const x = 'import { no } from "./string.ts"';
      const later = await import('./dynamic.ts');
    `;
    assert.deepEqual(staticImportSpecifiers('x.ts', text), [
      './a.ts',
      '../b.ts',
      './c.ts',
      './side-effect.ts',
      'node:fs',
      './ef.ts',
      './g.ts',
      './h.ts',
      './i.ts',
    ]);
  });

  it('resolves relative specifiers to files and leaves packages and builtins out', () => {
    const files = new Set(['/r/a/b.ts', '/r/c.ts', '/r/d/index.ts']);
    const exists = (p: string) => files.has(p);
    assert.equal(resolveRelativeSpecifier('/r/a/x.ts', './b.ts', exists), '/r/a/b.ts');
    assert.equal(resolveRelativeSpecifier('/r/a/x.ts', '../c.ts', exists), '/r/c.ts');
    assert.equal(resolveRelativeSpecifier('/r/a/x.ts', '../c.js', exists), '/r/c.ts');
    assert.equal(resolveRelativeSpecifier('/r/a/x.ts', '../d', exists), '/r/d/index.ts');
    assert.equal(resolveRelativeSpecifier('/r/a/x.ts', 'yaml', exists), undefined);
    assert.equal(resolveRelativeSpecifier('/r/a/x.ts', 'node:fs', exists), undefined);
    assert.equal(resolveRelativeSpecifier('/r/a/x.ts', './missing.ts', exists), undefined);
  });
});

describe('controller/ today', () => {
  it('has no import cycle', () => {
    const controller = readImportGraph(join(REPO, 'controller'));
    assert.ok(controller.size > 100, `read ${controller.size} files`);
    assert.deepEqual(
      findCycles(controller).map((c) => formatCycle(c, REPO)),
      [],
    );
  });

  it('passes the lint check (node hack/check-import-cycles.ts exits 0)', () => {
    const run = spawnSync(process.execPath, [join(REPO, 'hack', 'check-import-cycles.ts')], {
      cwd: REPO,
      encoding: 'utf8',
    });
    assert.equal(run.status, 0, run.stderr);
  });
});
