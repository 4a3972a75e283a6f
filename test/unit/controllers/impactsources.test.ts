// Issue 31 F5: the impact snapshot lists nothing and waits on no network read of its own. Its
// listings are the source pollers' last ones (with the commits they resolved); its trees come from
// the release controller's background reads, so a slow tree makes the impact wait (pending, woken
// when the read settles) instead of holding the impact worker. Pure: fake pollers, a FakeClock.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ClusterStack } from '../../../controller/api/clusterstack.ts';
import type { ReleaseTree } from '../../../controller/api/release.ts';
import { impactSourceReader } from '../../../controller/controllers/impactsources.ts';
import { BackgroundFetcher } from '../../../controller/controllers/treefetcher.ts';
import type { SourceListing } from '../../../controller/reconcilers/clusterstack.ts';
import { FakeClock } from '../../../controller/runtime/clock.ts';
import { SourceError } from '../../../controller/sources/contract.ts';
import type { SourceRef } from '../../../controller/sources/poller.ts';

const URL = 'https://git.example.com/stacks.git';
const cs = {
  apiVersion: 'stackflux.io/v1alpha1',
  kind: 'ClusterStack',
  metadata: { name: 'ferrol', namespace: 'team' },
  spec: { provider: 'docker', name: 'ferrol', kubernetesVersion: '1.30', source: { git: { url: URL } } },
} as unknown as ClusterStack;

function pollers(listing: SourceListing | undefined, commits: Record<string, string> = {}) {
  const asked: string[] = [];
  return {
    asked,
    listing: (key: string) => {
      asked.push(key);
      return listing;
    },
    commitOf: (ref: SourceRef, tag: string) => (ref.url === URL ? commits[tag] : undefined),
  };
}

const flush = async (): Promise<void> => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

function trees(clock: FakeClock) {
  return new BackgroundFetcher<ReleaseTree>({
    deadline: { ms: 60_000, flag: 'source-read-timeout' },
    maxConcurrent: 2,
    clock,
  });
}

describe('impactSourceReader', () => {
  it("lists from the pollers' last listing, with the commits they resolved: no listing of its own", async () => {
    const p = pollers(
      { ok: true, tags: ['t1', 't2'], times: { t2: 7 }, listedAt: '2026-01-01T00:00:00Z' },
      { t1: 'c1', t2: 'c2' },
    );
    const reader = impactSourceReader(
      {
        pollers: p,
        trees: trees(new FakeClock()),
        fetchTree: () => Promise.reject(new Error('no tree read here')),
        cacheDir: '/nowhere',
      },
      'team',
      { id: 'team/r', wake: () => undefined },
    );
    assert.deepEqual(await reader.listTags(cs, URL, undefined), [
      { tag: 't1', commit: 'c1' },
      { tag: 't2', commit: 'c2', time: 7 },
    ]);
    assert.deepEqual(p.asked, ['team/ferrol']);
  });

  it('a source not listed yet, or whose listing failed, is that failure (no listing is tried)', async () => {
    const deps = {
      trees: trees(new FakeClock()),
      fetchTree: () => Promise.reject(new Error('unused')),
      cacheDir: '/nowhere',
    };
    const waiter = { id: 'team/r', wake: () => undefined };
    await assert.rejects(
      impactSourceReader({ ...deps, pollers: pollers(undefined) }, 'team', waiter).listTags(
        cs,
        URL,
        undefined,
      ),
      (err: unknown) => err instanceof SourceError && err.reason === 'NotListedYet',
    );
    await assert.rejects(
      impactSourceReader(
        { ...deps, pollers: pollers({ ok: false, reason: 'SourceTimeout', message: 'too slow' }) },
        'team',
        waiter,
      ).listTags(cs, URL, undefined),
      (err: unknown) => err instanceof SourceError && err.reason === 'SourceTimeout',
    );
  });

  it('a tree still being read makes the snapshot pending and wakes the impact; then every tree it needs is there', async () => {
    const clock = new FakeClock();
    const fetcher = trees(clock);
    let finish: (t: ReleaseTree) => void = () => undefined;
    let reads = 0;
    let woken = 0;
    const deps = {
      pollers: pollers(undefined),
      trees: fetcher,
      fetchTree: () => {
        reads += 1;
        return new Promise<ReleaseTree>((resolve) => {
          finish = resolve;
        });
      },
      cacheDir: '/release-cache',
    };
    const first = impactSourceReader(deps, 'team', { id: 'team/r', wake: () => woken++ });
    await assert.rejects(first.fetchTree({ url: URL }, 't1', 'c1', '/impact-cache', undefined));
    assert.equal(first.pending(), true, 'the impact waits for the tree instead of being computed without it');
    const tree: ReleaseTree = new Map();
    finish(tree);
    await flush();
    assert.equal(woken, 1, 'woken when the read settled');
    const again = impactSourceReader(deps, 'team', { id: 'team/r', wake: () => woken++ });
    assert.equal(await again.fetchTree({ url: URL }, 't1', 'c1', '/impact-cache', undefined), tree);
    // Kept for the whole preview (a tree may be asked for by several Clusters' releases).
    assert.equal(await again.fetchTree({ url: URL }, 't1', 'c1', '/impact-cache', undefined), tree);
    assert.equal(again.pending(), false);
    assert.equal(reads, 1, 'one read');
  });
});
