// FleetRepo against the real smart-HTTP Git server of hack/testenv: first sync into an empty
// repository creates the branch, no change → no commit, a push rejected because the remote moved
// is retried on top of it, a crash between commit and push converges on the next sync, and
// folders are replaced / removed whole.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { type FleetConfig, FleetRepo } from '../../../controller/gitops/fleet.ts';
import { createRepo, type Endpoints } from '../../../hack/lib/testenv.ts';
import { uniqueName } from '../../support/env.ts';

function required(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: source the env.sh of a running hack/testenv`);
  return v;
}
const gitServerUrl = required('GIT_SERVER_URL');
const work = mkdtempSync(join(tmpdir(), 'stackflux-fleet-'));

function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', args, {
    cwd,
    encoding: 'utf8',
    env: {
      ...process.env,
      GIT_AUTHOR_NAME: 'someone',
      GIT_AUTHOR_EMAIL: 's@e.st',
      GIT_COMMITTER_NAME: 'someone',
      GIT_COMMITTER_EMAIL: 's@e.st',
    },
  }).trim();
}

/** A fresh clone of the remote branch (for assertions from the outside). */
function clone(url: string, branch = 'main'): string {
  const dir = mkdtempSync(join(work, 'clone-'));
  git(dir, 'clone', '-q', '--branch', branch, url, '.');
  return dir;
}

function commitCount(url: string): number {
  return Number(git(clone(url), 'rev-list', '--count', 'HEAD'));
}

function files(entries: Record<string, string>): Map<string, string> {
  return new Map(Object.entries(entries));
}

async function newRepo(): Promise<string> {
  return createRepo({ gitServerUrl } as Endpoints, uniqueName('fleet'));
}

function config(url: string, cache: string, extra: Partial<FleetConfig> = {}): FleetConfig {
  return {
    url,
    branch: 'main',
    pathPrefix: 'clusters',
    cacheDir: join(work, cache),
    author: { name: 'stackflux', email: 'stackflux@example.invalid' },
    ...extra,
  };
}

describe('FleetRepo against the real git server', () => {
  before(() => undefined);
  after(() => rmSync(work, { recursive: true, force: true }));

  it('first sync into an empty repository creates the branch; no change → no commit', async () => {
    const url = await newRepo();
    const fleet = new FleetRepo(config(url, 'c1'));
    const empty = await fleet.snapshot();
    assert.equal(empty.commit, undefined);
    assert.equal(empty.folders.size, 0);

    const first = await fleet.sync(
      new Map([
        ['ns/a/cni', files({ 'config.yaml': 'a: 1\n' })],
        ['ns/a/csi', files({ 'x.yaml': 'x: 1\n', 'sub/y.yaml': 'y: 1\n' })],
      ]),
      'stackflux: render 1 cluster\n\n- ns/a\n',
    );
    assert.equal(first.committed, true);
    assert.match(first.commit, /^[0-9a-f]{40}$/);
    const dir = clone(url);
    assert.equal(git(dir, 'rev-parse', 'HEAD'), first.commit);
    assert.equal(git(dir, 'show', 'HEAD:clusters/ns/a/cni/config.yaml'), 'a: 1');
    assert.equal(git(dir, 'show', 'HEAD:clusters/ns/a/csi/sub/y.yaml'), 'y: 1');
    assert.equal(
      git(dir, 'log', '-1', '--format=%an <%ae>|%s'),
      'stackflux <stackflux@example.invalid>|stackflux: render 1 cluster',
    );

    const again = await fleet.sync(new Map([['ns/a/cni', files({ 'config.yaml': 'a: 1\n' })]]), 'noop');
    assert.equal(again.committed, false);
    assert.equal(again.commit, first.commit);
    assert.equal(commitCount(url), 1);

    // Snapshot: every <ns>/<cluster>/<addon> folder with its files.
    const snap = await fleet.snapshot();
    assert.equal(snap.commit, first.commit);
    assert.deepEqual([...snap.folders.keys()].sort(), ['ns/a/cni', 'ns/a/csi']);
    assert.equal(snap.folders.get('ns/a/csi')?.get('sub/y.yaml'), 'y: 1\n');
    assert.deepEqual(await fleet.read('ns/a/cni'), files({ 'config.yaml': 'a: 1\n' }));

    // A folder is replaced whole (a file left out disappears), null removes it.
    const replaced = await fleet.sync(
      new Map<string, Map<string, string> | null>([
        ['ns/a/csi', files({ 'x.yaml': 'x: 2\n' })],
        ['ns/a/cni', null],
      ]),
      'replace',
    );
    assert.equal(replaced.committed, true);
    const after = await fleet.snapshot();
    assert.deepEqual([...after.folders.keys()], ['ns/a/csi']);
    assert.deepEqual(after.folders.get('ns/a/csi'), files({ 'x.yaml': 'x: 2\n' }));
    assert.equal(commitCount(url), 2);
  });

  it('a push rejected because the remote moved is retried on top of it: both changes land', async () => {
    const url = await newRepo();
    const fleet = new FleetRepo(config(url, 'c2'));
    await fleet.sync(new Map([['ns/a/cni', files({ 'f.yaml': 'a\n' })]]), 'first');
    // Someone else pushes between our fetch and our push: the hook runs after our local commit.
    const other = clone(url);
    let moved = false;
    const racing = new FleetRepo(config(url, 'c2'), {
      afterCommit: () => {
        if (moved) return;
        moved = true;
        execFileSync('mkdir', ['-p', join(other, 'clusters/ns/b/cni')]);
        execFileSync('sh', ['-c', `printf 'b\\n' > ${join(other, 'clusters/ns/b/cni/f.yaml')}`]);
        git(other, 'add', '-A');
        git(other, 'commit', '-q', '-m', 'concurrent');
        git(other, 'push', '-q', 'origin', 'main');
      },
    });
    const res = await racing.sync(new Map([['ns/c/cni', files({ 'f.yaml': 'c\n' })]]), 'ours');
    assert.equal(res.committed, true);
    assert.equal(res.attempts, 2, 'the first push is rejected, the second lands');
    const dir = clone(url);
    assert.equal(git(dir, 'rev-parse', 'HEAD'), res.commit);
    assert.equal(git(dir, 'show', 'HEAD:clusters/ns/b/cni/f.yaml'), 'b');
    assert.equal(git(dir, 'show', 'HEAD:clusters/ns/c/cni/f.yaml'), 'c');
    assert.equal(git(dir, 'show', 'HEAD:clusters/ns/a/cni/f.yaml'), 'a');
    assert.equal(git(dir, 'log', '--format=%s', '-3'), 'ours\nconcurrent\nfirst');
  });

  it('a crash between commit and push: a new instance syncs the same folders → one commit, nothing lost or duplicated', async () => {
    const url = await newRepo();
    const base = new FleetRepo(config(url, 'c3'));
    await base.sync(new Map([['ns/keep/cni', files({ 'f.yaml': 'keep\n' })]]), 'base');
    const folders = new Map([
      ['ns/a/cni', files({ 'f.yaml': 'a\n' })],
      ['ns/b/cni', files({ 'f.yaml': 'b\n' })],
    ]);
    const crashing = new FleetRepo(config(url, 'c3'), {
      afterCommit: () => {
        throw new Error('killed between commit and push');
      },
    });
    await assert.rejects(crashing.sync(folders, 'batch'), /killed between commit and push/);
    assert.equal(commitCount(url), 1, 'nothing was pushed');

    // "Restart": a new instance over the same working clone (the unpushed commit is still there).
    const restarted = new FleetRepo(config(url, 'c3'));
    const res = await restarted.sync(folders, 'batch');
    assert.equal(res.committed, true);
    assert.equal(commitCount(url), 2, 'exactly one commit for the batch');
    const dir = clone(url);
    assert.equal(git(dir, 'log', '--format=%s', '-2'), 'batch\nbase');
    assert.equal(git(dir, 'show', 'HEAD:clusters/ns/a/cni/f.yaml'), 'a');
    assert.equal(git(dir, 'show', 'HEAD:clusters/ns/b/cni/f.yaml'), 'b');
    assert.equal(git(dir, 'show', 'HEAD:clusters/ns/keep/cni/f.yaml'), 'keep');
    // And once more: nothing to do.
    const again = await restarted.sync(folders, 'batch');
    assert.equal(again.committed, false);
    assert.equal(commitCount(url), 2);
  });

  it('a crash before the very first push into an empty repository also converges', async () => {
    const url = await newRepo();
    const folders = new Map([['ns/a/cni', files({ 'f.yaml': 'a\n' })]]);
    const crashing = new FleetRepo(config(url, 'c4'), {
      afterCommit: () => {
        throw new Error('crash');
      },
    });
    await assert.rejects(crashing.sync(folders, 'first'), /crash/);
    const res = await new FleetRepo(config(url, 'c4')).sync(folders, 'first');
    assert.equal(res.committed, true);
    assert.equal(commitCount(url), 1);
  });

  it('syncs of one instance are serialized and reads never see a half-applied sync', async () => {
    const url = await newRepo();
    const fleet = new FleetRepo(config(url, 'c5'));
    const n = 5;
    const results = await Promise.all([
      ...Array.from({ length: n }, (_, i) =>
        fleet.sync(new Map([[`ns/c${i}/cni`, files({ 'f.yaml': `${i}\n` })]]), `c${i}`),
      ),
      fleet.read('ns/c0/cni'),
    ]);
    assert.equal(results.length, n + 1);
    assert.equal(commitCount(url), n);
    const snap = await fleet.snapshot();
    assert.equal(snap.folders.size, n);
  });

  it('refuses folders that escape the prefix', async () => {
    const url = await newRepo();
    const fleet = new FleetRepo(config(url, 'c6'));
    await assert.rejects(fleet.sync(new Map([['../x', files({ a: 'b' })]]), 'bad'), /invalid fleet folder/);
  });
});
