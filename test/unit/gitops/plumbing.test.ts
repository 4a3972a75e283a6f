// The fleet writer's plumbing against local git (no network): the fast-import stream builds
// exactly the trees objects.ts computes, paths git must quote survive, and the cat-file reader
// and parsers read what git wrote.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { branchTreeIds } from '../../../controller/gitops/objects.ts';
import {
  CatFile,
  commitTree,
  fastImport,
  fastImportStream,
  parseBatchHeader,
  quotePath,
  treeFolders,
} from '../../../controller/gitops/plumbing.ts';
import { gitEnv } from '../../../controller/sources/git.ts';

const work = mkdtempSync(join(tmpdir(), 'stackflux-plumbing-'));
after(() => rmSync(work, { recursive: true, force: true }));
const env = gitEnv();
const author = { name: 'stackflux', email: 'stackflux@example.invalid' };

function bare(): string {
  const dir = mkdtempSync(join(work, 'repo-'));
  execFileSync('git', ['init', '-q', '--bare', dir]);
  return dir;
}
const git = (dir: string, ...args: string[]) =>
  execFileSync('git', ['--git-dir', dir, ...args], { encoding: 'utf8' }).trim();

describe('quotePath', () => {
  it('leaves ordinary paths bare and C-quotes the ones fast-import would misread', () => {
    assert.equal(quotePath('cni/a b.yaml'), 'cni/a b.yaml');
    assert.equal(quotePath('cni/café.yaml'), 'cni/café.yaml');
    assert.equal(quotePath('"lead'), '"\\"lead"');
    assert.equal(quotePath('a\\b'), '"a\\\\b"');
    assert.equal(quotePath('a\nb\tc'), '"a\\nb\\011c"');
  });
});

describe('fast-import stream', () => {
  it('builds the trees objects.ts computes, with parents, messages and odd paths', async () => {
    const dir = bare();
    const first = new Map([
      ['cni/kustomization.yaml', 'resources: []\n'],
      ['csi/deep/x.yaml', 'x: "é"\n'],
      // (a backslash is quoted too, see quotePath, but no fleet path may hold one: releases/paths.ts)
      ['odd/"quoted" name\t.yaml', 'odd: 1\n'],
      ['odd/new\nline.yaml', ''],
    ]);
    const second = new Map([['cni/kustomization.yaml', 'resources: [a]\n']]);
    const [c1] = await fastImport(
      dir,
      env,
      [{ files: first, message: 'one' }],
      author,
      1_700_000_000,
      'refs/s',
    );
    const [c2, c3] = await fastImport(
      dir,
      env,
      [
        { parent: c1, files: second, message: 'two\n\nbody\n' },
        { files: new Map(), message: 'empty' },
      ],
      author,
      1_700_000_001,
      'refs/s',
    );
    assert.equal(git(dir, 'rev-parse', `${c1}^{tree}`), branchTreeIds(first).tree);
    assert.equal(git(dir, 'rev-parse', `${c2}^{tree}`), branchTreeIds(second).tree);
    assert.equal(git(dir, 'rev-parse', `${c3}^{tree}`), branchTreeIds(new Map()).tree);
    assert.equal(git(dir, 'rev-parse', `${c2}^`), c1);
    assert.equal(git(dir, 'log', '-1', '--format=%P', c3 as string), '', 'no parent given: a root commit');
    assert.equal(git(dir, 'log', '-1', '--format=%B', c2 as string), 'two\n\nbody');
    assert.equal(
      git(dir, 'log', '-1', '--format=%an <%ae> %at|%cn <%ce> %ct', c1 as string),
      'stackflux <stackflux@example.invalid> 1700000000|stackflux <stackflux@example.invalid> 1700000000',
    );
    assert.equal(git(dir, 'show', `${c1}:csi/deep/x.yaml`), 'x: "é"');
  });

  it('is one commit per spec, each on the scratch ref after a reset', () => {
    const text = fastImportStream(
      [
        { files: new Map([['a/f', 'x']]), message: 'm' },
        { parent: 'abc', files: new Map(), message: 'n\n' },
      ],
      author,
      5,
      'refs/s',
    ).toString('utf8');
    assert.equal(text.match(/^commit refs\/s$/gm)?.length, 2);
    assert.equal(text.match(/^reset refs\/s$/gm)?.length, 2);
    assert.match(text, /^from abc$/m);
    assert.match(text, /^get-mark :2$/m);
    assert.ok(text.startsWith('feature done\n') && text.endsWith('done\n'));
  });
});

describe('cat-file reader and parsers', () => {
  it('reads commits and trees by name, answers missing names with undefined, in order', async () => {
    const dir = bare();
    const files = new Map([
      ['cni/a.yaml', 'a\n'],
      ['csi/b.yaml', 'b\n'],
      ['top.yaml', 't\n'],
    ]);
    const [commit] = await fastImport(dir, env, [{ files, message: 'm' }], author, 1, 'refs/heads/x');
    const reader = new CatFile(dir, env);
    const [byRef, missing, byId] = await Promise.all([
      reader.get('refs/heads/x'),
      reader.get('refs/heads/nope'),
      reader.get(commit as string),
    ]);
    reader.close();
    assert.equal(byRef?.oid, commit);
    assert.equal(byRef?.type, 'commit');
    assert.equal(missing, undefined);
    assert.equal(byId?.oid, commit);
    const ids = branchTreeIds(files);
    assert.equal(commitTree(byRef?.content ?? Buffer.alloc(0)), ids.tree);
    const reader2 = new CatFile(dir, env);
    const tree = await reader2.get(ids.tree);
    reader2.close();
    assert.deepEqual(treeFolders(tree?.content ?? Buffer.alloc(0)), ids.addons, 'folders only, not top.yaml');
  });

  it('parses batch headers', () => {
    assert.deepEqual(parseBatchHeader(`${'a'.repeat(40)} commit 12`), {
      oid: 'a'.repeat(40),
      type: 'commit',
      size: 12,
    });
    assert.equal(parseBatchHeader('refs/heads/x missing'), undefined);
    assert.equal(parseBatchHeader('deadbeef ambiguous'), undefined);
  });

  it('refuses malformed objects', () => {
    assert.throws(() => commitTree(Buffer.from('parent x\n')), /without a tree line/);
    assert.throws(() => treeFolders(Buffer.from('40000 name\0short')), /malformed tree/);
  });
});
