// Dispatch by source kind (sources/releasetree.ts) and the poller's handling of OCI sources:
// listing and reading go to the OCI client for oci:// URLs and to git for everything else.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { FakeClock } from '../../../controller/runtime/clock.ts';
import { SourceError } from '../../../controller/sources/git.ts';
import { OciClient } from '../../../controller/sources/oci.ts';
import { SourcePollers, sourceKey } from '../../../controller/sources/poller.ts';
import { releaseTreeFetcher, sourceTagLister } from '../../../controller/sources/releasetree.ts';
import { readStackDir } from '../../../hack/lib/stack-dir.ts';
import { PLACEHOLDER_STACK } from '../../support/csctl-substitute.ts';

const cache = mkdtempSync(join(tmpdir(), 'stackflux-releasetree-'));
after(() => rmSync(cache, { recursive: true, force: true }));

/** An OciClient whose every request is recorded and answered 404. */
function recordingClient() {
  const urls: string[] = [];
  const fetch = (async (input: string | URL | Request) => {
    urls.push(String(input));
    return new Response('{"errors":[{"code":"NAME_UNKNOWN"}]}', { status: 404 });
  }) as typeof globalThis.fetch;
  return { client: new OciClient({ fetch }), urls };
}

describe('sourceTagLister', () => {
  it('lists oci:// URLs with the OCI client (https unless insecure) and the rest with git', async () => {
    const { client, urls } = recordingClient();
    const git: string[] = [];
    const lister = sourceTagLister({ oci: client }, async (url) => {
      git.push(url);
      return [];
    });
    await lister('https://git.example/stacks.git', undefined);
    const err = await lister('oci://r.example/kaas/stacks', undefined).catch((e: unknown) => e);
    assert.ok(err instanceof SourceError);
    assert.equal(err.reason, 'RepositoryNotFound');
    await lister('oci://r.example/kaas/stacks', undefined, { insecure: true }).catch(() => undefined);
    assert.deepEqual(git, ['https://git.example/stacks.git']);
    assert.deepEqual(urls, [
      'https://r.example/v2/kaas/stacks/tags/list?n=100',
      'http://r.example/v2/kaas/stacks/tags/list?n=100',
    ]);
  });

  it('refuses an OCI source when the controller has no OCI client', async () => {
    const err = await sourceTagLister({})('oci://r.example/a', undefined).catch((e: unknown) => e);
    assert.ok(err instanceof SourceError);
    assert.equal(err.reason, 'Unsupported');
  });
});

describe('releaseTreeFetcher', () => {
  it('reads an OCI release by its digest through the OCI client', async () => {
    const { client, urls } = recordingClient();
    const fetchTree = releaseTreeFetcher({ oci: client, assetsToTree: () => new Map() });
    const digest = `sha256:${'b'.repeat(64)}`;
    const err = await fetchTree(
      { url: 'oci://r.example/kaas/stacks' },
      'docker-ferrol-1-30-v1',
      digest,
      cache,
      undefined,
    ).catch((e: unknown) => e);
    assert.ok(err instanceof SourceError);
    assert.deepEqual(urls, [`https://r.example/v2/kaas/stacks/manifests/${digest}`]);
  });

  it('refuses OCI releases without an OCI client, and leaves Git URLs to git', async () => {
    const noOci = releaseTreeFetcher({});
    const err = await noOci(
      { url: 'oci://r.example/a' },
      't',
      `sha256:${'c'.repeat(64)}`,
      cache,
      undefined,
    ).catch((e: unknown) => e);
    assert.ok(err instanceof SourceError);
    assert.equal(err.reason, 'Unsupported');
    const gitErr = await noOci({ url: 'file:///etc' }, 't', 'abc', cache, undefined).catch((e: unknown) => e);
    assert.ok(gitErr instanceof SourceError);
    assert.equal(gitErr.reason, 'InvalidURL', 'the Git path validated the URL');
  });
});

describe("a tenant Secret's credentials over plain http (issue 31 F12)", () => {
  const creds = { username: 'tenant', password: 'pw', secret: 'ns/registry-creds' };
  const digest = `sha256:${'d'.repeat(64)}`;

  it('are not sent unless the Secret is labelled stackflux.io/allow-plain-http; the condition names the label', async () => {
    const { client, urls } = recordingClient();
    const lister = sourceTagLister({ oci: client });
    const fetchTree = releaseTreeFetcher({ oci: client, assetsToTree: () => new Map() });
    for (const attempt of [
      lister('oci://r.example/kaas/stacks', creds, { insecure: true }),
      fetchTree({ url: 'oci://r.example/kaas/stacks', insecure: true }, 't', digest, cache, creds),
    ]) {
      const err = await attempt.catch((e: unknown) => e);
      assert.ok(err instanceof SourceError, String(err));
      assert.equal(err.reason, 'PlainHttpNotAllowed');
      assert.match(
        err.message,
        /Secret ns\/registry-creds is not labelled stackflux\.io\/allow-plain-http: "true".*kubectl label secret -n ns registry-creds stackflux\.io\/allow-plain-http=true/,
      );
      assert.ok(!err.message.includes('pw'));
    }
    assert.deepEqual(urls, [], 'no request at all');
  });

  it('are sent when the Secret opts in, and over https whatever the label', async () => {
    const { client, urls } = recordingClient();
    const lister = sourceTagLister({ oci: client });
    await lister('oci://r.example/kaas/stacks', { ...creds, allowPlainHttp: true }, { insecure: true }).catch(
      () => undefined,
    );
    await lister('oci://r.example/kaas/stacks', creds, {}).catch(() => undefined);
    assert.deepEqual(urls, [
      'http://r.example/v2/kaas/stacks/tags/list?n=100',
      'https://r.example/v2/kaas/stacks/tags/list?n=100',
    ]);
  });
});

describe('SourcePollers with OCI sources', () => {
  it('an insecure source is another source than the same URL over https', () => {
    const ref = { url: 'oci://r.example/a', namespace: 'ns' };
    assert.notEqual(sourceKey(ref), sourceKey({ ...ref, insecure: true }));
  });

  it('a registry push re-lists the OCI sources naming the repository, on any host, and only those', async () => {
    const listed: string[] = [];
    const pollers = new SourcePollers({
      lister: async (url, _creds, o) => {
        listed.push(`${url}${o?.insecure ? ' (insecure)' : ''}`);
        return [];
      },
      onChange: () => undefined,
    });
    pollers.subscribe('ns/a', {
      url: 'oci://r.example:5000/kaas/stacks',
      namespace: 'ns',
      insecure: true,
      intervalMs: 3_600_000,
    });
    pollers.subscribe('ns/b', {
      url: 'oci://other.example/kaas/other',
      namespace: 'ns',
      intervalMs: 3_600_000,
    });
    await pollers.idle();
    listed.length = 0;
    assert.equal(pollers.triggerOciRepositories([{ repository: 'kaas/stacks' }]), 1);
    await pollers.idle();
    assert.deepEqual(listed, ['oci://r.example:5000/kaas/stacks (insecure)']);
    assert.equal(pollers.triggerOciRepositories([{ repository: 'nothing/here' }]), 0);
    pollers.stop();
  });

  it('lists again until the pushed tag shows (Distribution notifies before it links the tag), then stops', async () => {
    const clock = new FakeClock(Date.parse('2026-01-01T00:00:00Z'));
    let visible = false;
    let lists = 0;
    const pollers = new SourcePollers({
      clock,
      lister: async () => {
        lists += 1;
        return visible ? [{ tag: 'docker-ferrol-1-30-v2', commit: `sha256:${'d'.repeat(64)}` }] : [];
      },
      onChange: () => undefined,
    });
    const ref = { url: 'oci://r.example/kaas/stacks', namespace: 'ns' };
    pollers.subscribe('ns/a', { ...ref, intervalMs: 3_600_000 });
    await pollers.idle();
    lists = 0;
    pollers.triggerOciRepositories([{ repository: 'kaas/stacks', tag: 'docker-ferrol-1-30-v2' }]);
    await pollers.idle();
    assert.equal(lists, 1);
    // The tag is linked now; the next listing comes without another notification, long before the interval.
    visible = true;
    clock.advance(250);
    await pollers.idle();
    assert.equal(lists, 2);
    assert.equal(pollers.commitOf(ref, 'docker-ferrol-1-30-v2'), `sha256:${'d'.repeat(64)}`);
    clock.advance(60_000);
    await pollers.idle();
    assert.equal(lists, 2, 'no further listing once the tag showed');
    pollers.stop();
  });

  it('gives up on a pushed tag that never shows after a bounded number of listings', async () => {
    const clock = new FakeClock(Date.parse('2026-01-01T00:00:00Z'));
    let lists = 0;
    const pollers = new SourcePollers({
      clock,
      lister: async () => {
        lists += 1;
        return [];
      },
      onChange: () => undefined,
    });
    pollers.subscribe('ns/a', { url: 'oci://r.example/kaas/stacks', namespace: 'ns', intervalMs: 3_600_000 });
    await pollers.idle();
    lists = 0;
    pollers.triggerOciRepositories([{ repository: 'kaas/stacks', tag: 'never' }]);
    for (let i = 0; i < 20; i++) {
      await pollers.idle();
      clock.advance(10_000);
    }
    await pollers.idle();
    assert.equal(lists, 6);
    pollers.stop();
  });
});

describe('releaseTreeFetcher: a Git tag as its tool released it', () => {
  it("hands out a csctl stack folder with csctl's placeholders replaced by the tag's version (issue 32)", async () => {
    const { dir, tag } = PLACEHOLDER_STACK;
    const asCommitted = readStackDir(dir);
    assert.match(asCommitted.get('cluster-class/Chart.yaml') ?? '', /version: << \.ClusterClassVersion >>/);
    const read: string[] = [];
    const fetchTree = releaseTreeFetcher({
      gitTree: async (url, t, commit, path) => {
        read.push(`${url} ${t} ${commit} ${path}`);
        return asCommitted;
      },
    });
    const tree = await fetchTree(
      { url: 'https://git.example/stacks.git', path: 'p' },
      tag,
      'c1',
      cache,
      undefined,
    );
    assert.deepEqual(read, [`https://git.example/stacks.git ${tag} c1 p`]);
    assert.match(tree.get('cluster-class/Chart.yaml') ?? '', /\nversion: v2\n/);
    assert.match(tree.get('cluster-addon/Chart.yaml') ?? '', /\nversion: v2\n/);
    assert.equal(tree.get('csctl.yaml'), asCommitted.get('csctl.yaml'));
  });
});
