// Issue 31 F2: a registry or Git server a tenant names cannot exhaust the controller's memory by
// what it lists. Against hostile sources on 127.0.0.1 (test/support/hostile-listing.ts): a
// registry serving pages of 1 MB tags (each page under the old 4 MiB page limit) or half a million
// strings that are not tags, and a Git server advertising many long refs that are no release tags.
// The heap the stored listings hold is measured in a child process (--expose-gc, after a full GC);
// the rest asserts what the pollers store, the reasons, the last good listing kept, and the bound
// on listings in flight.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { listTags } from '../../../controller/sources/git.ts';
import { LISTING_LIMITS } from '../../../controller/sources/listing.ts';
import { OciClient } from '../../../controller/sources/oci.ts';
import { SourcePollers } from '../../../controller/sources/poller.ts';
import {
  HOSTILE_DIGEST,
  HostileGitServer,
  HostileRegistry,
  invalidTags,
  longTags,
} from '../../support/hostile-listing.ts';

const ROOT = join(import.meta.dirname, '..', '..', '..');
const MB = 1024 * 1024;
const RELEASES = ['docker-ferrol-1-30-v1', 'docker-ferrol-1-30-v2'];

/** What each repository of the hostile registry lists. */
const PAGES: Record<string, (i: number) => string[] | undefined> = {
  // 3 tags of 1 MB a page, 50 pages: 150 MB of tags, each page under the old 4 MiB page limit.
  huge: (i) => (i < 50 ? longTags(3, 1_000_000, 3 * i) : undefined),
  // Half a million strings that are not OCI tags (~3.4 MB), and the releases.
  invalid: (i) => (i === 0 ? [...invalidTags(500_000), ...RELEASES] : undefined),
  good: (i) => (i === 0 ? [...RELEASES, 'latest'] : undefined),
};

let registry: HostileRegistry;
/** Which PAGES entry a repository "switch" serves now. */
let switchTo = 'good';

before(async () => {
  registry = await HostileRegistry.start({
    page: (i, repository) => {
      const name = repository === 'switch' ? switchTo : repository.replace(/^slow\d+$/, 'good');
      return PAGES[name]?.(i);
    },
  });
});
after(() => registry.stop());

function pollers(): SourcePollers {
  const client = new OciClient();
  return new SourcePollers({
    lister: (url, _creds, o) => client.listTags(url, undefined, o ?? {}),
    onChange: () => undefined,
  });
}

describe('OCI listings a tenant names are bounded (issue 31 F2)', { timeout: 180_000 }, () => {
  it('the stored listings of a 150 MB and a half-million-tag source hold a few MB of heap at most', async (t) => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [
        '--expose-gc',
        join(ROOT, 'test/support/listing-heap-child.ts'),
        registry.url('huge'),
        registry.url('invalid'),
      ],
      { cwd: ROOT, maxBuffer: 1 << 20, timeout: 150_000 },
    );
    const { growth, listings } = JSON.parse(stdout) as {
      growth: number;
      listings: Array<Record<string, unknown>>;
    };
    t.diagnostic(`heap held by the stored listings: ${(growth / MB).toFixed(1)} MB`);
    assert.ok(growth < 16 * MB, `the stored listings hold ${(growth / MB).toFixed(1)} MB of heap`);
    const detail = JSON.stringify(listings).slice(0, 600);
    assert.equal(listings[0]?.ok, false, detail);
    assert.equal(listings[0]?.reason, 'ListingTooLarge', detail);
    assert.match(String(listings[0]?.message), new RegExp(`${registry.host}/huge`), detail);
    assert.match(String(listings[0]?.message), /more than 4194304 bytes/, detail);
    assert.deepEqual(listings[1], { ok: true, tags: 2, notKept: 500_000 }, detail);
  });

  it('stops reading a listing at the byte limit', async () => {
    const sent = registry.pagesSent;
    const p = pollers();
    try {
      p.subscribe('ns/huge', {
        url: registry.url('huge'),
        namespace: 'ns',
        insecure: true,
        intervalMs: 3_600_000,
      });
      await p.idle();
      assert.equal(p.listing('ns/huge')?.ok, false);
      // 4 MiB is two pages of 3 MB: the third is never asked for.
      assert.ok(registry.pagesSent - sent <= 2, `${registry.pagesSent - sent} pages sent`);
    } finally {
      p.stop();
    }
  });

  it('a listing that turns hostile fails with ListingTooLarge and the last good listing is kept', async () => {
    switchTo = 'good';
    const p = pollers();
    const ref = { url: registry.url('switch'), namespace: 'ns', insecure: true };
    try {
      p.subscribe('ns/switch', { ...ref, intervalMs: 3_600_000 });
      await p.idle();
      const good = p.listing('ns/switch');
      assert.ok(good?.ok === true);
      assert.deepEqual([good.tags, good.notKept], [RELEASES, 1]);
      switchTo = 'huge';
      await p.refresh('ns/switch');
      const failed = p.listing('ns/switch');
      assert.equal(failed?.ok, false);
      assert.equal(failed?.ok === false && failed.reason, 'ListingTooLarge');
      assert.equal(p.commitOf(ref, 'docker-ferrol-1-30-v1'), HOSTILE_DIGEST, 'last good commits kept');
    } finally {
      switchTo = 'good';
      p.stop();
    }
  });
});

describe('listings in flight are bounded across sources (issue 31 F2)', { timeout: 120_000 }, () => {
  it(`at most ${LISTING_LIMITS.inFlight} sources are read at once, however many are listed`, async () => {
    const slow = await HostileRegistry.start({
      page: (i) => (i === 0 ? RELEASES : undefined),
      delayMs: 300,
    });
    const p = pollers();
    try {
      const n = LISTING_LIMITS.inFlight + 6;
      for (let i = 0; i < n; i++)
        p.subscribe(`ns/slow${i}`, {
          url: slow.url(`slow${i}`),
          namespace: 'ns',
          insecure: true,
          intervalMs: 3_600_000,
        });
      await p.idle();
      for (let i = 0; i < n; i++) assert.equal(p.listing(`ns/slow${i}`)?.ok, true, `source ${i} listed`);
      assert.equal(slow.pagesSent, n);
      assert.ok(slow.maxInFlight <= LISTING_LIMITS.inFlight, `${slow.maxInFlight} listings read at once`);
    } finally {
      p.stop();
      await slow.stop();
    }
  });
});

describe('Git ls-remote listings a tenant names are bounded (issue 31 F2)', { timeout: 120_000 }, () => {
  let hostile = false;
  let git: HostileGitServer;
  before(async () => {
    git = await HostileGitServer.start(function* () {
      for (const t of RELEASES) yield `refs/tags/${t}`;
      // Long refs that are no release tags: 500 of 60 KB (30 MB) when hostile, 30 otherwise (1.8 MB).
      for (let i = 0; i < (hostile ? 500 : 30); i++) yield `refs/tags/build-${'x'.repeat(60_000)}-${i}`;
      // And many short ones.
      for (let i = 0; i < 20_000; i++) yield `refs/tags/nightly-${i}`;
    });
  });
  after(() => git.stop());

  it('keeps only the release tags, counts the rest (long refs never held)', async () => {
    hostile = false;
    const tags = await listTags(git.url);
    assert.deepEqual(
      tags.map((t) => t.tag),
      RELEASES,
    );
    assert.equal((tags as { notKept?: number }).notKept, 20_030);
  });

  it('more than the byte limit of output: ListingTooLarge; the poller keeps the last good listing', async () => {
    hostile = false;
    const p = new SourcePollers({ lister: (url) => listTags(url), onChange: () => undefined });
    const ref = { url: git.url, namespace: 'ns' };
    try {
      p.subscribe('ns/git', { ...ref, intervalMs: 3_600_000 });
      await p.idle();
      assert.equal(p.listing('ns/git')?.ok, true);
      hostile = true;
      const sent = git.bytesSent;
      await p.refresh('ns/git');
      const failed = p.listing('ns/git');
      assert.equal(
        failed?.ok === false && failed.reason,
        'ListingTooLarge',
        JSON.stringify(failed).slice(0, 300),
      );
      assert.match(failed?.ok === false ? failed.message : '', /more than 4194304 bytes/);
      assert.equal(p.commitOf(ref, 'docker-ferrol-1-30-v1'), 'c'.repeat(40), 'last good commits kept');
      assert.ok(git.bytesSent - sent > 4 * MB);
    } finally {
      hostile = false;
      p.stop();
    }
  });
});
