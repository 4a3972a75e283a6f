// Issue 11 defect 1 (and the concurrent-fetch part of defect 7): a release tree is read from Git
// objects, never from a checkout. Symbolic links, submodules and a stack path that is not a plain
// folder make the release invalid (naming the path), a tree over the size limits too, and
// concurrent fetches of the same commit share one fetch. Against the test environment's Git server.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fetchReleaseTree, listTags, SourceError } from '../../../controller/sources/git.ts';
import { createRepo, type Endpoints } from '../../../hack/lib/testenv.ts';
import { assertInvalid } from '../../support/crafted-tree.ts';
import { git, initRepo, required } from '../../support/e2e.ts';
import { uniqueName } from '../../support/env.ts';

const work = mkdtempSync(join(tmpdir(), 'stackflux-release-tree-'));
const repoDir = join(work, 'repo');
/** A file the controller can read that no release may ever copy out (stands for a mounted Secret). */
const secretFile = join(work, 'mounted-secret');
const SECRET = 'do-not-leak-7f3a9c';
let url = '';
const commits = new Map<string, string>();

/** A stack folder s/ (edited by `edit`, the index by `index`), committed and tagged. */
function release(tag: string, edit: (stackDir: string) => void, index?: () => void): void {
  rmSync(join(repoDir, 's'), { recursive: true, force: true });
  rmSync(join(repoDir, 'p'), { recursive: true, force: true });
  const s = join(repoDir, 's');
  mkdirSync(join(s, 'cluster-addon', 'cni'), { recursive: true });
  writeFileSync(join(s, 'stack.yaml'), `version: ${tag}\n`);
  writeFileSync(join(s, 'cluster-addon', 'cni', 'config.yaml'), 'kind: ConfigMap\n');
  edit(s);
  git(repoDir, 'add', '-A');
  index?.();
  git(repoDir, 'commit', '-q', '--allow-empty', '-m', tag);
  git(repoDir, 'tag', tag);
  commits.set(tag, git(repoDir, 'rev-parse', 'HEAD'));
}

function fetch(tag: string, cacheDir: string, path = 's', limits?: { maxFiles: number; maxBytes: number }) {
  const commit = commits.get(tag);
  if (commit === undefined) throw new Error(`no release ${tag}`);
  return fetchReleaseTree(url, tag, commit, path, cacheDir, undefined, limits);
}

/** Every file below dir (the cache), to show that no secret content was written anywhere. */
function allText(dir: string): string {
  let out = '';
  for (const e of readdirSync(dir, { recursive: true, encoding: 'utf8' })) {
    const full = join(dir, e);
    try {
      if (statSync(full).isFile()) out += readFileSync(full, 'utf8');
    } catch {}
  }
  return out;
}

describe('release trees are read from Git objects', () => {
  before(async () => {
    url = await createRepo({ gitServerUrl: required('GIT_SERVER_URL') } as Endpoints, uniqueName('tree'));
    writeFileSync(secretFile, SECRET);
    initRepo(repoDir);
    release('good', (s) => {
      writeFileSync(join(s, 'cluster-addon', 'cni', 'hook.sh'), '#!/bin/sh\n');
      execFileSync('chmod', ['+x', join(s, 'cluster-addon', 'cni', 'hook.sh')]);
    });
    release('file-link', (s) => symlinkSync(secretFile, join(s, 'cluster-addon', 'cni', 'leak.yaml')));
    release('dir-links', (s) => {
      symlinkSync('/etc', join(s, 'cluster-addon', 'etc'));
      symlinkSync('.', join(s, 'cluster-addon', 'loop'));
    });
    release(
      'submodule',
      () => undefined,
      () => {
        const head = commits.get('good') ?? '';
        git(repoDir, 'update-index', '--add', '--cacheinfo', `160000,${head},s/cluster-addon/sub`);
      },
    );
    release('path-link', () => symlinkSync('s', join(repoDir, 'p')));
    release('many-files', (s) => {
      for (let i = 0; i < 12; i++) writeFileSync(join(s, 'cluster-addon', 'cni', `f${i}.yaml`), `i: ${i}\n`);
    });
    git(repoDir, 'push', '-q', '--tags', url, 'HEAD:refs/heads/main');
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  it('reads regular and executable files of a good release', async () => {
    const tree = await fetch('good', join(work, 'c-good'));
    assert.deepEqual([...tree.keys()].sort(), [
      'cluster-addon/cni/config.yaml',
      'cluster-addon/cni/hook.sh',
      'stack.yaml',
    ]);
    assert.equal(tree.get('stack.yaml'), 'version: good\n');
    // A second read comes from the cache and is the same.
    assert.deepEqual(await fetch('good', join(work, 'c-good')), tree);
  });

  it('a symbolic link to a file the controller can read is InvalidRelease naming it; nothing is copied', async () => {
    const cache = join(work, 'c-file-link');
    await assertInvalid(fetch('file-link', cache), /s\/cluster-addon\/cni\/leak\.yaml is a symbolic link/);
    assert.doesNotMatch(allText(cache), new RegExp(SECRET));
    // The finding is cached: the same answer again, without a fetch.
    await assertInvalid(fetch('file-link', cache), /leak\.yaml is a symbolic link/);
  });

  it('symbolic links to folders and loops are InvalidRelease naming each', async () => {
    await assertInvalid(
      fetch('dir-links', join(work, 'c-dir-links')),
      /s\/cluster-addon\/etc is a symbolic link.*s\/cluster-addon\/loop is a symbolic link/,
    );
  });

  it('a submodule (gitlink) is InvalidRelease naming it', async () => {
    await assertInvalid(fetch('submodule', join(work, 'c-sub')), /s\/cluster-addon\/sub is a submodule/);
  });

  it('a stack path that is a symbolic link is InvalidRelease naming it', async () => {
    await assertInvalid(fetch('path-link', join(work, 'c-path'), 'p'), /^p is a symbolic link, not a folder/);
  });

  it('a tree over the file-count or size limit is InvalidRelease naming the limit', async () => {
    await assertInvalid(
      fetch('many-files', join(work, 'c-many'), 's', { maxFiles: 10, maxBytes: 1 << 20 }),
      /more than 10 files/,
    );
    await assertInvalid(
      fetch('many-files', join(work, 'c-big'), 's', { maxFiles: 100, maxBytes: 64 }),
      /more than the limit of 64 bytes/,
    );
    // Within the limits the same release is fine.
    const tree = await fetch('many-files', join(work, 'c-ok'), 's', { maxFiles: 100, maxBytes: 1 << 20 });
    assert.equal(tree.size, 14);
  });

  it('concurrent fetches of the same commit all get the whole tree', async () => {
    const cache = join(work, 'c-concurrent');
    const trees = await Promise.all(Array.from({ length: 6 }, () => fetch('good', cache)));
    for (const t of trees) assert.deepEqual([...t.keys()].sort(), [...(trees[0]?.keys() ?? [])].sort());
    assert.equal(trees[0]?.size, 3);
    // No temporary folders are left behind.
    assert.deepEqual(
      readdirSync(join(cache, 'trees')).filter((e) => e.includes('.tmp-')),
      [],
    );
  });

  // Issue 11 defect 4: a release pinned to its validated commit still reads that commit after
  // the tag moved (fetched by id), never the tag's new commit in its place.
  it('reads a pinned commit after its tag moved; an unknown commit is TagMoved', async () => {
    const pinned = commits.get('good') ?? '';
    git(repoDir, 'tag', '-f', 'good', commits.get('many-files') ?? '');
    git(repoDir, 'push', '-q', '-f', url, 'refs/tags/good');
    const tree = await fetchReleaseTree(url, 'good', pinned, 's', join(work, 'c-moved'));
    assert.equal(tree.get('stack.yaml'), 'version: good\n');
    assert.equal(tree.size, 3);
    await assert.rejects(
      fetchReleaseTree(url, 'good', 'f'.repeat(40), 's', join(work, 'c-moved-unknown')),
      (e: unknown) => e instanceof SourceError && e.reason === 'TagMoved',
    );
  });

  it('lists tags with the URL after "--" (an option-looking URL never reaches git)', async () => {
    const tags = await listTags(url);
    // "good" is no release tag: listed, counted, not kept (issue 31 F2).
    assert.ok(((tags as { notKept?: number }).notKept ?? 0) >= 1);
    await assert.rejects(
      listTags('-u@h:r'),
      (e: unknown) => e instanceof SourceError && e.reason === 'InvalidURL',
    );
    await assert.rejects(
      fetchReleaseTree('ssh://-oProxyCommand=x/r', 't', 'c', '', join(work, 'c-bad')),
      (e: unknown) => e instanceof SourceError && e.reason === 'InvalidURL',
    );
  });
});
