// A GitHub release carrying csctl assets, read through the GitHub API (a local server speaking it,
// test/support/githubfake.ts, with a second "storage" origin for the downloads) by the controllers'
// tree fetcher: the same release as the Git-tag folder it was packaged from; the token goes to the
// API only, never to the storage host; a replaced asset changes the identity and is reported
// (TagMoved), never read in place of the validated one; a broken archive is InvalidRelease naming
// the asset; a release without csctl assets keeps its Git commit.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import { releaseTreeFromCsctlAssets } from '../../../controller/releases/csctl/assets.ts';
import { readReleaseDescription } from '../../../controller/releases/format.ts';
import { githubCloneUrl } from '../../../controller/releases/githuburl.ts';
import { SourceError } from '../../../controller/sources/contract.ts';
import { GitHubReleases } from '../../../controller/sources/github.ts';
import { GitHubReleaseAssets, isGitHubAssetsIdentity } from '../../../controller/sources/githubassets.ts';
import { releaseTreeFetcher } from '../../../controller/sources/releasetree.ts';
import { readStackDir } from '../../../hack/lib/stack-dir.ts';
import { packageCsctlRelease } from '../../support/csctl-assets.ts';
import { fakeAssets, GitHubFake } from '../../support/githubfake.ts';
import { releaseTag } from '../../support/release-tag.ts';

const STACK = join(import.meta.dirname, '..', '..', '..', 'stacks', 'docker-csoferrol-1-30');
const TAG = 'docker-csoferrol-1-30-v1';
const TAG2 = 'docker-csoferrol-1-30-v2';
const PLAIN = 'docker-csoferrol-1-30-v3';
const TOKEN = 'ghp_assetsTestToken123';
const REPO = { owner: 'scs', repo: 'stacks' };

let fake: GitHubFake;
let cache: string;
const packaged = packageCsctlRelease(STACK, 'v1');

before(async () => {
  fake = await GitHubFake.start();
  fake.token = TOKEN;
  cache = mkdtempSync(join(tmpdir(), 'gh-assets-'));
  fake.releases = [
    {
      tag: TAG,
      commit: 'a'.repeat(40),
      assets: fakeAssets(new Map([...packaged, ['README.md', Buffer.from('x')]])),
    },
    { tag: TAG2, commit: 'b'.repeat(40), assets: fakeAssets(packageCsctlRelease(STACK, 'v2')) },
    { tag: PLAIN, commit: 'c'.repeat(40) },
  ];
});
after(async () => {
  await fake.stop();
  rmSync(cache, { recursive: true, force: true });
});

async function listed(): Promise<Map<string, string>> {
  const lister = new GitHubReleases({ baseUrl: fake.url }).lister();
  return new Map((await lister(REPO, TOKEN)).map((t) => [t.tag, t.commit]));
}

describe('GitHub release assets as a release source', () => {
  it('lists a release with csctl assets by their identity and one without by its Git commit', async () => {
    const tags = await listed();
    assert.ok(isGitHubAssetsIdentity(tags.get(TAG) ?? ''), tags.get(TAG));
    assert.notEqual(tags.get(TAG), tags.get(TAG2));
    assert.equal(tags.get(PLAIN), 'c'.repeat(40));
  });

  it('reads the release from its assets as the Git-tag folder reads; the token never reaches the storage host', async () => {
    const identity = (await listed()).get(TAG) ?? '';
    const fetchTree = releaseTreeFetcher({ githubApiUrl: fake.url });
    const apiBefore = fake.log.length;
    const storageBefore = fake.storageLog.length;
    const url = githubCloneUrl(REPO.owner, REPO.repo, fake.url);
    const tree = await fetchTree({ url, path: 'ignored/path' }, TAG, identity, cache, { password: TOKEN });

    assert.deepEqual(
      [...tree].sort(),
      [...releaseTreeFromCsctlAssets(packaged)].sort(),
      'exactly the packaged assets (README.md is not read)',
    );
    const fromAssets = readReleaseDescription(tree, releaseTag(TAG));
    const fromGit = readReleaseDescription(readStackDir(STACK), releaseTag(TAG));
    assert.ok(fromAssets.ok && fromGit.ok);
    assert.deepEqual(fromAssets.value.addons, fromGit.value.addons);
    assert.deepEqual(
      [fromAssets.value.provider, fromAssets.value.name, fromAssets.value.kubernetesVersion],
      [fromGit.value.provider, fromGit.value.name, fromGit.value.kubernetesVersion],
    );

    const api = fake.log.slice(apiBefore);
    const storage = fake.storageLog.slice(storageBefore);
    assert.equal(storage.length, packaged.size, 'one storage download per csctl asset');
    assert.ok(
      storage.every((r) => r.authorization === '' && r.status === 200),
      JSON.stringify(storage),
    );
    assert.ok(api.some((r) => r.path.includes('/releases/assets/') && r.status === 302));
    assert.ok(api.every((r) => r.authorization === `Bearer ${TOKEN}`));
    assert.ok(!api.some((r) => r.path.includes('README')));
  });

  it('a replaced asset is a moved release: a new identity, and the validated one is never read from the new bytes', async () => {
    const before = (await listed()).get(TAG2) ?? '';
    const name = [...packaged.keys()].find((n) => n.endsWith('.tgz') && n.includes('cluster-class')) ?? '';
    const v2Class = name.replace('-v1.tgz', '-v2.tgz');
    fake.replaceAsset(TAG2, v2Class, packageCsctlRelease(STACK, 'v2').get(v2Class) ?? new Uint8Array());
    const now = (await listed()).get(TAG2) ?? '';
    assert.ok(isGitHubAssetsIdentity(now));
    assert.notEqual(now, before, 'a re-uploaded asset changes the identity (the poller sees a moved tag)');

    const fresh = mkdtempSync(join(tmpdir(), 'gh-assets-moved-'));
    try {
      const fetchTree = releaseTreeFetcher({ githubApiUrl: fake.url });
      const url = githubCloneUrl(REPO.owner, REPO.repo, fake.url);
      await assert.rejects(fetchTree({ url }, TAG2, before, fresh, { password: TOKEN }), (err: unknown) => {
        assert.ok(err instanceof SourceError);
        assert.equal(err.reason, 'TagMoved');
        assert.match(err.message, /were replaced/);
        assert.ok(!err.message.includes(TOKEN));
        return true;
      });
      const tree = await fetchTree({ url }, TAG2, now, fresh, { password: TOKEN });
      assert.ok(tree.has('cluster-class/Chart.yaml'));
    } finally {
      rmSync(fresh, { recursive: true, force: true });
    }
  });

  it('a broken archive is InvalidRelease naming the asset; more bytes than listed are refused', async () => {
    const tag = 'docker-csoferrol-1-30-v4';
    const broken = new Map(packageCsctlRelease(STACK, 'v4'));
    const addon = [...broken.keys()].find((n) => n.includes('-cluster-addon-')) ?? '';
    broken.set(addon, gzipSync(Buffer.from('this is not a tar archive, only text, padded'.repeat(20))));
    fake.releases.push({ tag, commit: 'd'.repeat(40), assets: fakeAssets(broken) });
    const identity = (await listed()).get(tag) ?? '';
    const assets = new GitHubReleaseAssets({ baseUrl: fake.url });
    await assert.rejects(assets.fetchTree(REPO, tag, identity, TOKEN, cache), (err: unknown) => {
      assert.ok(err instanceof SourceError);
      assert.equal(err.reason, 'InvalidRelease');
      assert.match(err.message, new RegExp(`release asset ${addon}: `));
      return true;
    });

    fake.storageExtraBytes = 10;
    try {
      const ok = (await listed()).get(TAG) ?? '';
      const empty = mkdtempSync(join(tmpdir(), 'gh-assets-extra-'));
      await assert.rejects(assets.fetchTree(REPO, TAG, ok, TOKEN, empty), /more than the listed \d+ bytes/);
      rmSync(empty, { recursive: true, force: true });
    } finally {
      fake.storageExtraBytes = 0;
    }
  });

  it("GitHub's rate limit on a download is RateLimited, not a credentials problem", async () => {
    const identity = (await listed()).get(TAG) ?? '';
    const empty = mkdtempSync(join(tmpdir(), 'gh-assets-limit-'));
    // GitHub's answer when the limit is used up: 403 with x-ratelimit-remaining 0.
    const limited: typeof fetch = async (input, init) =>
      String(input).includes('/releases/assets/')
        ? new Response('{"message":"API rate limit exceeded"}', {
            status: 403,
            headers: { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '2000000000' },
          })
        : fetch(input, init);
    try {
      await assert.rejects(
        new GitHubReleaseAssets({ baseUrl: fake.url, fetch: limited }).fetchTree(
          REPO,
          TAG,
          identity,
          TOKEN,
          empty,
        ),
        (err: unknown) => err instanceof SourceError && err.reason === 'RateLimited',
      );
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });

  it('a wrong token is AuthenticationFailed, without the token in the message', async () => {
    const identity = (await listed()).get(TAG) ?? '';
    const empty = mkdtempSync(join(tmpdir(), 'gh-assets-auth-'));
    try {
      await assert.rejects(
        new GitHubReleaseAssets({ baseUrl: fake.url }).fetchTree(
          REPO,
          TAG,
          identity,
          'wrong-token-xyz',
          empty,
        ),
        (err: unknown) =>
          err instanceof SourceError &&
          err.reason === 'AuthenticationFailed' &&
          !err.message.includes('wrong-token-xyz'),
      );
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });
});
