// Reading every fleet branch's files by tree depth (controller/offline/live.ts branchBlobs) must
// list what `git ls-tree -r` lists per branch, in its order: checked against git itself in a
// temporary repository (local git, no network), sha1 and sha256.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, describe, it } from 'node:test';
import { branchBlobs, parseTreeObject } from '../../../controller/offline/live.ts';
import { parseCatFileBatch } from '../../../controller/sources/git.ts';

const root = mkdtempSync(join(tmpdir(), 'stackflux-fleetread-'));
after(() => rmSync(root, { recursive: true, force: true }));

const ENV = {
  ...process.env,
  GIT_AUTHOR_NAME: 't',
  GIT_AUTHOR_EMAIL: 't@e.st',
  GIT_COMMITTER_NAME: 't',
  GIT_COMMITTER_EMAIL: 't@e.st',
};

/** A repository whose branches hold `files` each (plus a submodule entry on the first). */
function repository(format: 'sha1' | 'sha256', branches: Record<string, Record<string, string>>): string {
  const dir = join(root, format);
  const git = (...args: string[]) =>
    execFileSync('git', ['-C', dir, ...args], { encoding: 'utf8', env: ENV });
  mkdirSync(dir);
  git('init', '-q', `--object-format=${format}`);
  let first = true;
  for (const [branch, files] of Object.entries(branches)) {
    git('checkout', '-q', '--orphan', branch);
    git('rm', '-rqf', '--ignore-unmatch', '.');
    for (const [path, content] of Object.entries(files)) {
      const file = join(dir, path);
      mkdirSync(dirname(file), { recursive: true });
      if (content.startsWith('->')) symlinkSync(content.slice(2), file);
      else writeFileSync(file, content);
      if (path.endsWith('.sh')) chmodSync(file, 0o755);
    }
    git('add', '-A');
    if (first) {
      // A gitlink (submodule): ls-tree -r lists it as a commit, not a blob.
      const commit = git('commit-tree', git('write-tree').trim(), '-m', 'x').trim();
      git('update-index', '--add', '--cacheinfo', `160000,${commit},vendor/sub`);
      first = false;
    }
    git('commit', '-qm', branch);
  }
  return dir;
}

/** What the live snapshot read before: `git ls-tree -r` per branch, blobs only. */
function lsTreeBlobs(dir: string, branches: string[]): { path: string; id: string }[] {
  return branches.flatMap((branch) =>
    execFileSync('git', ['-C', dir, 'ls-tree', '-r', '-z', `refs/heads/${branch}`], { encoding: 'utf8' })
      .split('\0')
      .flatMap((line) => {
        const tab = line.indexOf('\t');
        const [, type, id] = line.slice(0, tab).split(' ');
        return tab >= 0 && type === 'blob' && id !== undefined
          ? [{ path: `${branch}/${line.slice(tab + 1)}`, id }]
          : [];
      }),
  );
}

const shared = { 'cni/kustomization.yaml': 'resources: [cm.yaml]\n', 'cni/cm.yaml': 'a: 1\n' };
const BRANCHES = {
  'clusters/ns/a': {
    ...shared,
    'metrics/deep/er/x.yaml': 'x\n',
    'run.sh': '#!/bin/sh\n',
    link: '->cni/cm.yaml',
  },
  'clusters/ns/b': { ...shared, 'café ✓/ü.yaml': 'u: 1\n', 'cni-x/a.yaml': 'b\n', 'cni.yaml': 'c\n' },
  'clusters/other/c': { 'z.yaml': '', 'a/b/c/d/e.yaml': 'deep\n' },
};

describe('fleet branches read by tree depth', () => {
  for (const format of ['sha1', 'sha256'] as const) {
    it(`lists what git ls-tree -r lists, in its order (${format})`, async () => {
      const dir = repository(format, BRANCHES);
      const branches = Object.keys(BRANCHES).sort();
      let calls = 0;
      const catFile = async (names: string[]): Promise<Buffer[]> => {
        calls += 1;
        const out = execFileSync('git', ['-C', dir, 'cat-file', '--batch'], {
          input: `${names.join('\n')}\n`,
        });
        return parseCatFileBatch(out, names.length);
      };
      const read = await branchBlobs(branches, catFile, format === 'sha1' ? 20 : 32);
      assert.deepEqual(read, lsTreeBlobs(dir, branches));
      assert.ok(read.some((e) => e.path === 'clusters/ns/b/café ✓/ü.yaml'));
      // One read per tree depth (a/b/c/d/e.yaml: five levels of trees), not one per branch.
      assert.equal(calls, 5);
    });
  }

  it('rejects a truncated tree object instead of reading past it', () => {
    const entry = Buffer.concat([Buffer.from('100644 a.yaml\0'), Buffer.alloc(20, 1)]);
    assert.deepEqual(parseTreeObject(entry, 20), [{ mode: '100644', name: 'a.yaml', id: '01'.repeat(20) }]);
    assert.throws(
      () => parseTreeObject(entry.subarray(0, entry.length - 1), 20),
      /malformed git tree object/,
    );
  });
});
