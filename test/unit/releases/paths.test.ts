// Issue 22 row 1: the one path check of every outside path (release trees, fleet files, Helm
// chart folders) and the write that must stay below its root.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { pathProblem, resolveUnder } from '../../../controller/releases/paths.ts';

describe('pathProblem', () => {
  it('accepts plain relative paths, dots inside names included', () => {
    for (const ok of [
      'stack.yaml',
      'cluster-addon/cni/a.yaml',
      'a/.hidden/x',
      'a/..b/c',
      'x.git/y',
      '.gitignore',
    ])
      assert.equal(pathProblem(ok), undefined, ok);
  });

  it('names every forbidden form and quotes the path', () => {
    const cases: Array<[string, RegExp]> = [
      ['', /empty/],
      ['..', /"\.\." component/],
      ['../../../.gitconfig', /"\.\." component/],
      ['a/../b', /"\.\." component/],
      ['.', /"\." component/],
      ['a/./b', /"\." component/],
      ['.git/config', /"\.git" component/],
      ['a/.GIT/hooks/x', /"\.GIT" component/],
      ['a/.Git', /"\.Git" component/],
      ['a\\b', /backslash/],
      ['..\\..\\x', /backslash/],
      ['/abs', /absolute/],
      ['/etc/passwd', /absolute/],
      ['a\0b', /NUL/],
      ['a//b', /empty component/],
      ['a/', /empty component/],
    ];
    for (const [path, want] of cases) {
      const problem = pathProblem(path);
      assert.match(problem ?? '(accepted)', want, JSON.stringify(path));
      if (path !== '') assert.ok(problem?.includes(JSON.stringify(path)), `${problem} quotes the path`);
    }
  });
});

describe('resolveUnder', () => {
  const root = mkdtempSync(join(tmpdir(), 'stackflux-paths-'));
  after(() => rmSync(root, { recursive: true, force: true }));

  it('resolves a plain path below the root', () => {
    assert.equal(resolveUnder(root, 'a/b.yaml'), join(root, 'a', 'b.yaml'));
  });

  it('refuses any path that would leave the root or is not plain', () => {
    for (const bad of ['../x', '../../../.gitconfig', 'a/../../x', '/etc/x', '.git/config', 'a\\..\\x', ''])
      assert.throws(() => resolveUnder(root, bad), /refusing to write/, bad);
  });
});
