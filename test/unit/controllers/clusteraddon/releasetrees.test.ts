// The release trees the addons render from: fetched once per source, commit, path and tag, kept in
// memory up to MAX_TREES (oldest out first), none before the release has a commit.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ClusterStackRelease } from '../../../../controller/api/clusterstackrelease.ts';
import type { ReleaseTree } from '../../../../controller/api/release.ts';
import { MAX_TREES, ReleaseTreeStore } from '../../../../controller/controllers/clusteraddon/releasetrees.ts';
import type { KubeClient } from '../../../../controller/runtime/client.ts';

function release(
  commit: string | undefined,
  o: { path?: string; secret?: string; tag?: string } = {},
): ClusterStackRelease {
  return {
    apiVersion: 'stackflux.io/v1alpha1',
    kind: 'ClusterStackRelease',
    metadata: { name: 'r', namespace: 'team' },
    spec: {
      // Not a release tag: no chart dependencies are looked up.
      tag: o.tag ?? 'not-a-tag',
      source: {
        url: 'https://git.example.com/stacks.git',
        ...(o.path !== undefined ? { path: o.path } : {}),
        ...(o.secret !== undefined ? { secretRef: { name: o.secret } } : {}),
      },
    },
    ...(commit !== undefined ? { status: { commit } } : {}),
  } as unknown as ClusterStackRelease;
}

function store(client: Partial<KubeClient> = {}) {
  const fetches: string[] = [];
  const s = new ReleaseTreeStore({
    client: client as KubeClient,
    cacheDir: '/nonexistent',
    fetchTree: async (_src, _tag, commit) => {
      fetches.push(commit);
      return new Map([['commit', commit]]) as ReleaseTree;
    },
  });
  return { s, fetches };
}

describe('ReleaseTreeStore', () => {
  it('has no tree before the release has a commit', async () => {
    const { s, fetches } = store();
    assert.equal(await s.treeOf(release(undefined)), undefined);
    assert.deepEqual(fetches, []);
  });

  it('fetches a tree once per commit and path', async () => {
    const { s, fetches } = store();
    const a = await s.treeOf(release('c1'));
    assert.equal(a?.get('commit'), 'c1');
    assert.equal(await s.treeOf(release('c1')), a);
    await s.treeOf(release('c1', { path: 'sub' }));
    assert.deepEqual(fetches, ['c1', 'c1']);
  });

  it('fetches a commit again for another tag: the tree is read as released at its tag', async () => {
    // csctl's placeholders take the tag's version (issue 32), so two tags of one commit differ.
    const { s, fetches } = store();
    const a = await s.treeOf(release('c1', { tag: 'not-a-tag-a' }));
    const b = await s.treeOf(release('c1', { tag: 'not-a-tag-b' }));
    assert.notEqual(a, b);
    assert.deepEqual(fetches, ['c1', 'c1']);
  });

  it(`keeps at most ${MAX_TREES} trees, dropping the oldest`, async () => {
    const { s, fetches } = store();
    for (let i = 0; i <= MAX_TREES; i++) await s.treeOf(release(`c${i}`));
    await s.treeOf(release(`c${MAX_TREES}`));
    await s.treeOf(release('c0'));
    assert.equal(fetches.length, MAX_TREES + 2, 'the newest is kept, the oldest fetched again');
  });

  it("reads the source's Secret only when it is labelled for sources", async () => {
    const reads: string[] = [];
    const { s } = store({
      get: (async (_v: string, _k: string, name: string) => {
        reads.push(name);
        return {
          metadata: { name, namespace: 'team' },
          data: { token: Buffer.from('t').toString('base64') },
        };
      }) as never,
    });
    await assert.rejects(
      s.treeOf(release('c1', { secret: 'creds' })),
      /not labelled stackflux.io\/source-credentials/,
    );
    assert.deepEqual(reads, ['creds']);
  });
});
