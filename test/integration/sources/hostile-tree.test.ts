// Issue 22 row 1: a release tree whose entries are named `..`, `.git` or `.GIT` (git's fsck only
// warns about them, a fetch does not fsck; `git add` refuses them, so they are built with
// `git mktree`) is InvalidRelease naming the path, and nothing is written outside the cache. The
// attack it stops: `../../../.gitconfig` landed in the cache folder, the image's HOME, and its
// `url.<ext::command>.insteadOf` made every later git call of the controller run the command.
// Against the test environment's Git server (smart HTTP), as a release author would push.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fetchReleaseTree, listTags } from '../../../controller/sources/git.ts';
import { createRepo, type Endpoints } from '../../../hack/lib/testenv.ts';
import { assertInvalid, type CraftedEntry, CraftedRepo } from '../../support/crafted-tree.ts';
import { required } from '../../support/e2e.ts';
import { uniqueName } from '../../support/env.ts';

const work = mkdtempSync(join(tmpdir(), 'stackflux-hostile-tree-'));
/** The file the planted command creates: it must never exist. */
const marker = join(work, 'command-ran');
/** A git config that makes every http(s) git call run a command (the attack's payload). */
const PAYLOAD = `[protocol "ext"]\n\tallow = always\n[url "ext::sh -c touch% ${marker}% #"]\n\tinsteadOf = http://\n\tinsteadOf = https://\n`;
let url = '';
const commits = new Map<string, string>();

let repo: CraftedRepo;

/** A release at s/ with a valid stack and `extra` entries in s/, committed and tagged `tag`. */
function release(tag: string, extra: (r: CraftedRepo) => CraftedEntry[]): void {
  const r = repo;
  const s = r.dir('s', [
    r.file('stack.yaml', `version: ${tag}\n`),
    r.dir('cluster-addon', [r.dir('cni', [r.file('config.yaml', 'kind: ConfigMap\n')])]),
    ...extra(r),
  ]);
  commits.set(tag, r.commit([s], tag, tag));
}

function fetch(tag: string, cacheDir: string) {
  return fetchReleaseTree(url, tag, commits.get(tag) ?? '', 's', cacheDir);
}

/** Every file and folder below root whose name is `.gitconfig` (the payload), anywhere. */
function planted(root: string): string[] {
  return readdirSync(root, { recursive: true, encoding: 'utf8' }).filter((p) => p.endsWith('.gitconfig'));
}

describe('hostile release tree paths (issue 22)', () => {
  const home = process.env.HOME;
  const xdgConfig = process.env.XDG_CONFIG_HOME;
  before(async () => {
    url = await createRepo({ gitServerUrl: required('GIT_SERVER_URL') } as Endpoints, uniqueName('hostile'));
    repo = new CraftedRepo(join(work, 'repo'));
    // s/../../../.gitconfig: from <cache>/trees/<entry>.tmp-*/tree, the cache folder itself.
    release('dotdot', (r) => [r.dir('..', [r.dir('..', [r.dir('..', [r.file('.gitconfig', PAYLOAD)])])])]);
    release('dotgit', (r) => [r.dir('.git', [r.file('config', PAYLOAD)])]);
    release('dotgit-upper', (r) => [r.dir('hooks', [r.dir('.GIT', [r.file('config', PAYLOAD)])])]);
    repo.pushTags(url);
  });
  after(() => {
    process.env.HOME = home;
    rmSync(work, { recursive: true, force: true });
  });

  it('an entry named ".." is InvalidRelease naming the path; nothing is written outside the cache; git runs no planted command', async () => {
    const cache = join(work, 'cache-dotdot');
    mkdirSync(cache, { recursive: true });
    // As in the image before the fix: the cache folder is HOME.
    process.env.HOME = cache;
    try {
      await assertInvalid(
        fetch('dotdot', cache),
        /path "s\/\.\.\/\.\.\/\.\.\/\.gitconfig" has a "\.\." component/,
      );
      assert.deepEqual(planted(work), [], 'no .gitconfig anywhere');
      // The finding is cached: the same answer again, and still nothing written.
      await assertInvalid(fetch('dotdot', cache), /"\.\." component/);
      assert.deepEqual(planted(work), []);
      await listTags(url);
      assert.equal(existsSync(marker), false, 'the planted command did not run');
    } finally {
      process.env.HOME = home;
    }
  });

  it('git reads no config from HOME, whatever is planted there: no command runs on a listing', async () => {
    const fakeHome = join(work, 'planted-home');
    mkdirSync(join(fakeHome, '.config', 'git'), { recursive: true });
    writeFileSync(join(fakeHome, '.gitconfig'), PAYLOAD);
    writeFileSync(join(fakeHome, '.config', 'git', 'config'), PAYLOAD);
    process.env.HOME = fakeHome;
    process.env.XDG_CONFIG_HOME = join(fakeHome, '.config');
    try {
      const tags = await listTags(url);
      // The listing ran ("dotdot" is no release tag: counted, not kept, issue 31 F2).
      assert.ok(((tags as { notKept?: number }).notKept ?? 0) >= 1);
      assert.equal(existsSync(marker), false, 'the planted command did not run');
    } finally {
      process.env.HOME = home;
      if (xdgConfig === undefined) delete process.env.XDG_CONFIG_HOME;
      else process.env.XDG_CONFIG_HOME = xdgConfig;
    }
  });

  it('a ".git" component is InvalidRelease naming the path', async () => {
    const cache = join(work, 'cache-dotgit');
    await assertInvalid(fetch('dotgit', cache), /path "s\/\.git\/config" has a "\.git" component/);
    assert.deepEqual(
      readdirSync(cache, { recursive: true, encoding: 'utf8' }).filter((p) => /\.git\b/i.test(p)),
      [],
    );
  });

  it('a ".GIT" component (any case) is InvalidRelease naming the path', async () => {
    await assertInvalid(
      fetch('dotgit-upper', join(work, 'cache-dotgit-upper')),
      /path "s\/hooks\/\.GIT\/config" has a "\.GIT" component/,
    );
  });
});
