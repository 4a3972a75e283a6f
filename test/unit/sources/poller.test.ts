import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '../../../controller/runtime/clock.ts';
import type { GitCredentials, RemoteTag } from '../../../controller/sources/git.ts';
import { SourceError } from '../../../controller/sources/git.ts';
import { normalizeRepoUrl, pollDelay, SourcePollers } from '../../../controller/sources/poller.ts';

const URL_A = 'https://git.example.com/stacks/a.git';
const URL_B = 'https://git.example.com/stacks/b.git';
const MIN = 60_000;

function harness(initial: Record<string, RemoteTag[]> = {}) {
  const clock = new FakeClock(Date.parse('2026-01-01T00:00:00Z'));
  const tags = new Map(Object.entries(initial));
  const calls: Array<{ url: string; creds: GitCredentials | undefined }> = [];
  const failing = new Set<string>();
  const changes: string[][] = [];
  const pollers = new SourcePollers({
    clock,
    lister: async (url, creds) => {
      calls.push({ url, creds });
      if (failing.has(url))
        throw new SourceError('SourceUnreachable', `listing tags of ${url}: connection refused`);
      return tags.get(url) ?? [];
    },
    credentials: async (namespace, name) => ({ username: `${namespace}/${name}`, password: 'pw' }),
    onChange: (subs) => changes.push(subs),
  });
  return { clock, tags, calls, failing, changes, pollers };
}

const t = (tag: string, commit = 'a'.repeat(40)): RemoteTag => ({ tag, commit });

describe('SourcePollers', () => {
  it('shares one poller among every subscriber of a source: 100 ClusterStacks, one ls-remote per interval', async () => {
    const h = harness({ [URL_A]: [t('docker-ferrol-1-30-v1')] });
    for (let i = 0; i < 100; i++)
      h.pollers.subscribe(`ns/cs-${i}`, { url: URL_A, namespace: 'ns', intervalMs: 5 * MIN });
    await h.pollers.idle();
    assert.equal(h.pollers.size(), 1);
    assert.equal(h.calls.length, 1);
    // Every subscriber sees the listing synchronously, and all were notified once.
    const listing = h.pollers.listing('ns/cs-42');
    assert.equal(listing?.ok, true);
    assert.deepEqual(listing?.ok === true ? listing.tags : [], ['docker-ferrol-1-30-v1']);
    assert.equal(listing?.ok === true ? listing.listedAt : '', '2026-01-01T00:00:00.000Z');
    assert.equal(h.changes.length, 1);
    assert.equal(h.changes[0]?.length, 100);

    h.clock.advance(5 * MIN);
    await h.pollers.idle();
    assert.equal(h.calls.length, 2, 'one ls-remote per interval for all 100');
    assert.equal(h.changes.length, 1, 'an unchanged listing notifies nobody');
  });

  it('polls at the smallest subscriber interval', async () => {
    const h = harness();
    h.pollers.subscribe('ns/slow', { url: URL_A, namespace: 'ns', intervalMs: 10 * MIN });
    await h.pollers.idle();
    h.pollers.subscribe('ns/fast', { url: URL_A, namespace: 'ns', intervalMs: 1 * MIN });
    h.clock.advance(1 * MIN);
    await h.pollers.idle();
    assert.equal(h.calls.length, 2);
    h.clock.advance(1 * MIN);
    await h.pollers.idle();
    assert.equal(h.calls.length, 3);
    // The fast one leaves: back to the slow interval.
    h.pollers.unsubscribe('ns/fast');
    h.clock.advance(1 * MIN);
    await h.pollers.idle();
    h.clock.advance(1 * MIN);
    await h.pollers.idle();
    assert.ok(h.calls.length <= 4, `at most one more list, got ${h.calls.length}`);
  });

  it('keeps distinct sources apart: other URL, or same URL with another Secret', async () => {
    const h = harness();
    h.pollers.subscribe('ns1/a', { url: URL_A, namespace: 'ns1', intervalMs: MIN });
    h.pollers.subscribe('ns2/a', { url: URL_A, namespace: 'ns2', intervalMs: MIN }); // public: shared
    h.pollers.subscribe('ns1/b', { url: URL_B, namespace: 'ns1', intervalMs: MIN });
    h.pollers.subscribe('ns1/a-auth', { url: URL_A, namespace: 'ns1', secretName: 'creds', intervalMs: MIN });
    h.pollers.subscribe('ns2/a-auth', { url: URL_A, namespace: 'ns2', secretName: 'creds', intervalMs: MIN });
    await h.pollers.idle();
    assert.equal(h.pollers.size(), 4);
    assert.equal(h.calls.length, 4);
    const withCreds = h.calls.filter((c) => c.creds !== undefined).map((c) => c.creds?.username);
    assert.deepEqual(withCreds.sort(), ['ns1/creds', 'ns2/creds']);
  });

  it('notifies on a change of tags or of a commit, and on errors; keeps the last good time', async () => {
    const h = harness({ [URL_A]: [t('x-y-1-30-v1')] });
    h.pollers.subscribe('ns/a', { url: URL_A, namespace: 'ns', intervalMs: MIN });
    await h.pollers.idle();
    assert.equal(h.changes.length, 1);

    h.tags.set(URL_A, [t('x-y-1-30-v1', 'b'.repeat(40))]); // tag moved
    h.clock.advance(MIN);
    await h.pollers.idle();
    assert.equal(h.changes.length, 2);
    assert.equal(h.pollers.commitOf({ url: URL_A, namespace: 'other' }, 'x-y-1-30-v1'), 'b'.repeat(40));

    h.failing.add(URL_A);
    h.clock.advance(MIN);
    await h.pollers.idle();
    assert.equal(h.changes.length, 3);
    const failed = h.pollers.listing('ns/a');
    assert.equal(failed?.ok, false);
    if (failed?.ok === false) {
      assert.equal(failed.reason, 'SourceUnreachable');
      assert.equal(failed.lastListedAt, '2026-01-01T00:01:00.000Z');
    }
    // The commits of the last good listing stay known.
    assert.equal(h.pollers.commitOf({ url: URL_A, namespace: 'ns' }, 'x-y-1-30-v1'), 'b'.repeat(40));

    h.failing.delete(URL_A);
    h.clock.advance(MIN);
    await h.pollers.idle();
    assert.equal(h.pollers.listing('ns/a')?.ok, true);
    assert.equal(h.changes.length, 4, 'recovery is a change');
  });

  it('backs off on consecutive failures (interval × 2^(n-1), capped) and returns to the interval on success', async () => {
    const h = harness({ [URL_A]: [t('x-y-1-30-v1')] });
    h.pollers.subscribe('ns/a', { url: URL_A, namespace: 'ns', intervalMs: MIN });
    await h.pollers.idle();
    h.failing.add(URL_A);
    // Over 40 minutes of failure, with a listing due every minute without back-off: failures at
    // +1, +2 (1×), +4 (2×), +8 (4×), +16 (8×) minutes, then every 10 minutes (the cap): +26, +36.
    const before = h.calls.length;
    for (let m = 0; m < 40; m++) {
      h.clock.advance(MIN);
      await h.pollers.idle();
    }
    assert.equal(h.calls.length - before, 7, 'seven attempts in 40 minutes, not forty');
    assert.equal(h.pollers.listing('ns/a')?.ok, false);
    h.failing.delete(URL_A);
    for (let m = 0; m < 24 && h.pollers.listing('ns/a')?.ok !== true; m++) {
      h.clock.advance(MIN);
      await h.pollers.idle();
    }
    assert.equal(h.pollers.listing('ns/a')?.ok, true, 'recovers by itself at the next attempt');
    const after = h.calls.length;
    h.clock.advance(MIN);
    await h.pollers.idle();
    assert.equal(h.calls.length - after, 1, 'back to one listing per interval');
    assert.equal(pollDelay(3_000, 1), 3_000);
    assert.equal(pollDelay(3_000, 4), 24_000);
    assert.equal(pollDelay(3_000, 50), 96_000, 'at most 2^5 times the interval');
    assert.equal(pollDelay(5 * MIN, 9), 10 * MIN, 'and not beyond 10 minutes');
    assert.equal(pollDelay(60 * MIN, 9), 60 * MIN, 'unless the interval is longer');
  });

  it('trigger() re-lists matching sources at once (URL normalized), others not', async () => {
    const h = harness();
    h.pollers.subscribe('ns/a', { url: URL_A, namespace: 'ns', intervalMs: 10 * MIN });
    h.pollers.subscribe('ns/b', { url: URL_B, namespace: 'ns', intervalMs: 10 * MIN });
    await h.pollers.idle();
    assert.equal(h.calls.length, 2);
    h.tags.set(URL_A, [t('x-y-1-30-v2')]);
    assert.equal(h.pollers.trigger(['HTTPS://git.example.com/stacks/A']), 1);
    await h.pollers.idle();
    assert.equal(h.calls.length, 3);
    assert.equal(h.calls.at(-1)?.url, URL_A);
    assert.deepEqual(h.changes.at(-1), ['ns/a']);
    assert.equal(h.pollers.trigger(['https://elsewhere.example.com/x.git']), 0);
  });

  it('a trigger during a running list lists once more afterwards, not concurrently', async () => {
    let release: () => void = () => {};
    let running = 0;
    let maxRunning = 0;
    let calls = 0;
    const clock = new FakeClock();
    const pollers = new SourcePollers({
      clock,
      lister: async () => {
        calls += 1;
        running += 1;
        maxRunning = Math.max(maxRunning, running);
        await new Promise<void>((r) => {
          release = r;
        });
        running -= 1;
        return [];
      },
      onChange: () => {},
    });
    pollers.subscribe('ns/a', { url: URL_A, namespace: 'ns', intervalMs: MIN });
    await Promise.resolve();
    pollers.trigger([URL_A]);
    pollers.trigger([URL_A]);
    release();
    await new Promise((r) => setImmediate(r));
    release();
    await pollers.idle();
    assert.equal(calls, 2);
    assert.equal(maxRunning, 1);
  });

  it('refresh() lists the source at once, outside the interval, and resolves with the new listing', async () => {
    const h = harness({ [URL_A]: [t('docker-ferrol-1-30-v1')] });
    h.pollers.subscribe('ns/a', { url: URL_A, namespace: 'ns', intervalMs: 60 * MIN });
    h.pollers.subscribe('ns/b', { url: URL_A, namespace: 'ns', intervalMs: 60 * MIN });
    await h.pollers.idle();
    h.tags.set(URL_A, [t('docker-ferrol-1-30-v1'), t('docker-ferrol-1-30-v2')]);
    h.clock.advance(1 * MIN); // far from the 60 min interval
    await h.pollers.refresh('ns/a');
    assert.equal(h.calls.length, 2);
    const listing = h.pollers.listing('ns/a');
    assert.deepEqual(listing?.ok === true ? listing.tags : [], [
      'docker-ferrol-1-30-v1',
      'docker-ferrol-1-30-v2',
    ]);
    // The source is shared: both subscribers are told the listing changed.
    assert.deepEqual(h.changes.at(-1), ['ns/a', 'ns/b']);
    // Unknown subscribers list nothing.
    await h.pollers.refresh('ns/unknown');
    assert.equal(h.calls.length, 2);
  });

  it('refresh() during a running listing waits for a listing started after the request', async () => {
    const releases: Array<() => void> = [];
    let calls = 0;
    let served = ['docker-ferrol-1-30-v1'];
    const pollers = new SourcePollers({
      clock: new FakeClock(),
      lister: async () => {
        calls += 1;
        const tags = served.map((x) => t(x));
        await new Promise<void>((r) => releases.push(r));
        return tags;
      },
      onChange: () => {},
    });
    pollers.subscribe('ns/a', { url: URL_A, namespace: 'ns', intervalMs: MIN });
    await Promise.resolve();
    assert.equal(calls, 1, 'the first listing runs (it read the tags before the push)');
    served = ['docker-ferrol-1-30-v1', 'docker-ferrol-1-30-v2'];
    let done = false;
    const refreshed = pollers.refresh('ns/a').then(() => {
      done = true;
    });
    releases.shift()?.();
    await new Promise((r) => setImmediate(r));
    assert.equal(done, false, 'the listing that started before the request does not count');
    assert.equal(calls, 2);
    releases.shift()?.();
    await refreshed;
    const listing = pollers.listing('ns/a');
    assert.deepEqual(listing?.ok === true ? listing.tags : [], [
      'docker-ferrol-1-30-v1',
      'docker-ferrol-1-30-v2',
    ]);
  });

  it('unsubscribing the last subscriber stops the poller', async () => {
    const h = harness();
    h.pollers.subscribe('ns/a', { url: URL_A, namespace: 'ns', intervalMs: MIN });
    await h.pollers.idle();
    h.pollers.unsubscribe('ns/a');
    assert.equal(h.pollers.size(), 0);
    h.clock.advance(10 * MIN);
    await h.pollers.idle();
    assert.equal(h.calls.length, 1);
    assert.equal(h.clock.pending(), 0);
  });
});

describe('normalizeRepoUrl', () => {
  it('matches clone, html and ssh URLs of one repository', () => {
    const want = 'github.com/org/stacks';
    for (const u of [
      'https://github.com/org/stacks.git',
      'https://github.com/Org/Stacks',
      'https://github.com/org/stacks/',
      'git@github.com:org/stacks.git',
      'ssh://git@github.com/org/stacks.git',
    ]) {
      assert.equal(normalizeRepoUrl(u), want, u);
    }
    assert.equal(normalizeRepoUrl('http://127.0.0.1:8080/x.git'), '127.0.0.1:8080/x');
  });
});
