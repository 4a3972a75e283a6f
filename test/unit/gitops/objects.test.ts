// The in-process object ids must equal git's own: checked against `git hash-object` and a real
// commit's trees in a temporary repository (local git, no network).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, describe, it } from 'node:test';
import { blobId, branchTreeIds, treeId } from '../../../controller/gitops/objects.ts';

const dir = mkdtempSync(join(tmpdir(), 'stackflux-objects-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const git = (...args: string[]) => execFileSync('git', ['-C', dir, ...args], { encoding: 'utf8' }).trim();

/** Commits `files` into a fresh repository and returns git's ids for the root and each top folder. */
function gitTrees(files: Map<string, string>): { tree: string; addons: Map<string, string> } {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir);
  git('init', '-q');
  for (const [path, content] of files) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), content);
  }
  git('add', '-A');
  const tree = git('write-tree');
  const addons = new Map<string, string>();
  for (const line of git('ls-tree', tree).split('\n').filter(Boolean)) {
    const [meta, name] = line.split('\t');
    const [mode, , id] = (meta ?? '').split(' ');
    if (mode === '040000' && name !== undefined && id !== undefined) addons.set(name, id);
  }
  return { tree, addons };
}

describe('git object ids', () => {
  it('blob ids equal git hash-object, including non-ASCII content', () => {
    for (const content of ['', 'a: 1\n', 'name: café ✓\n']) {
      const expected = execFileSync('git', ['hash-object', '--stdin'], {
        input: content,
        encoding: 'utf8',
      }).trim();
      assert.equal(blobId(content), expected);
    }
  });

  it('tree ids equal git write-tree, with git ordering of folders against files', () => {
    const files = new Map([
      ['cni/config.yaml', 'kind: ConfigMap\n'],
      ['cni/sub/a.yaml', 'a\n'],
      ['cni-extra/x.yaml', 'x\n'],
      ['cni.yaml/z.yaml', 'z\n'],
      ['metrics-server/deploy.yaml', 'm\n'],
    ]);
    const expected = gitTrees(files);
    const actual = branchTreeIds(files);
    assert.equal(actual.tree, expected.tree);
    assert.deepEqual([...actual.addons].sort(), [...expected.addons].sort());
    assert.equal(treeId(files), expected.tree);
  });

  it('the id does not depend on the order the files are given in', () => {
    const a = new Map([
      ['b/1.yaml', '1'],
      ['a/2.yaml', '2'],
    ]);
    const b = new Map([...a].reverse());
    assert.equal(treeId(a), treeId(b));
    assert.notEqual(treeId(a), treeId(new Map([...a, ['a/2.yaml', '3']])));
  });

  it("the empty tree has git's well-known id", () => {
    assert.equal(treeId(new Map()), '4b825dc642cb6eb9a060e54bf8d69288fbee4904');
  });

  it('rejects paths that escape or are not normal', () => {
    for (const bad of ['../x', '/abs', 'a//b', 'a/./b', '']) {
      assert.throws(() => treeId(new Map([[bad, 'x']])), /invalid fleet file path/);
    }
  });

  it('rejects a .git component in any case, a backslash and NUL: a fsck-ing Git host would refuse the whole push (issue 22)', () => {
    for (const bad of ['cni/.git/config', 'cni/.GIT/x.yaml', '.Git/hooks', 'cni/a\\b.yaml', 'cni/a\0b']) {
      assert.throws(() => branchTreeIds(new Map([[bad, 'x']])), /invalid fleet file path/, bad);
    }
  });
});
