// Issue 22 row 1: a release tree whose entries are named `..`, `.git` or `.GIT` (git's fsck only
// warns about them, a fetch does not fsck; `git add` refuses them, so they are built with
// `git mktree`) is InvalidRelease naming the path, and nothing is written outside the cache. The
// attack it stops: `../../../.gitconfig` landed in the cache folder, the image's HOME, and its
// `url.<ext::command>.insteadOf` made every later git call of the controller run the command.
// Against the test environment's Git server (smart HTTP), as a release author would push.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fetchReleaseTree, listTags, SourceError } from '../../../controller/sources/git.ts';
import { createRepo, type Endpoints } from '../../../hack/lib/testenv.ts';
import { git, initRepo, required } from '../../support/e2e.ts';
import { uniqueName } from '../../support/env.ts';

const work = mkdtempSync(join(tmpdir(), 'stackflux-hostile-tree-'));
const repoDir = join(work, 'repo');
/** The file the planted command creates: it must never exist. */
const marker = join(work, 'command-ran');
/** A git config that makes every http(s) git call run a command (the attack's payload). */
const PAYLOAD = `[protocol "ext"]\n\tallow = always\n[url "ext::sh -c touch% ${marker}% #"]\n\tinsteadOf = http://\n\tinsteadOf = https://\n`;
let url = '';
const commits = new Map<string, string>();

type Entry = { mode: '100644' | '040000'; oid: string; name: string };

function writeObject(args: string[], input: string): string {
  return execFileSync('git', args, { cwd: repoDir, input, encoding: 'utf8' }).trim();
}
const blob = (text: string): string => writeObject(['hash-object', '-w', '--stdin'], text);
/** A tree object of exactly these entries (names git add would refuse included). */
function tree(entries: Entry[]): string {
  const lines = entries.map((e) => `${e.mode} ${e.mode === '040000' ? 'tree' : 'blob'} ${e.oid}\t${e.name}`);
  return writeObject(['mktree'], `${lines.join('\n')}\n`);
}
const file = (name: string, text: string): Entry => ({ mode: '100644', oid: blob(text), name });
const dir = (name: string, entries: Entry[]): Entry => ({ mode: '040000', oid: tree(entries), name });

/** A release at s/ with a valid stack and `extra` entries in s/, committed and tagged `tag`. */
function release(tag: string, stackEntries: Entry[]): void {
  const s = dir('s', [
    file('stack.yaml', `version: ${tag}\n`),
    dir('cluster-addon', [dir('cni', [file('config.yaml', 'kind: ConfigMap\n')])]),
    ...stackEntries,
  ]);
  const root = tree([s]);
  const commit = execFileSync('git', ['commit-tree', root, '-m', tag], {
    cwd: repoDir,
    encoding: 'utf8',
    env: {
      ...process.env,
      GIT_AUTHOR_NAME: 't',
      GIT_AUTHOR_EMAIL: 't@e.st',
      GIT_COMMITTER_NAME: 't',
      GIT_COMMITTER_EMAIL: 't@e.st',
    },
  }).trim();
  git(repoDir, 'tag', tag, commit);
  commits.set(tag, commit);
}

function fetch(tag: string, cacheDir: string) {
  return fetchReleaseTree(url, tag, commits.get(tag) ?? '', 's', cacheDir);
}

async function assertInvalid(p: Promise<unknown>, names: RegExp): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof SourceError, `expected a SourceError, got ${String(err)}`);
    assert.equal(err.reason, 'InvalidRelease', err.message);
    assert.match(err.message, names);
    return true;
  });
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
    initRepo(repoDir);
    const payload = file('.gitconfig', PAYLOAD);
    // s/../../../.gitconfig: from <cache>/trees/<entry>.tmp-*/tree, the cache folder itself.
    release('dotdot', [dir('..', [dir('..', [dir('..', [payload])])])]);
    release('dotgit', [dir('.git', [file('config', PAYLOAD)])]);
    release('dotgit-upper', [dir('hooks', [dir('.GIT', [file('config', PAYLOAD)])])]);
    git(repoDir, 'push', '-q', url, 'refs/tags/*:refs/tags/*');
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
      assert.ok(tags.some((t) => t.tag === 'dotdot'));
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
