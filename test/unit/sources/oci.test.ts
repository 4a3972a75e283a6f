// The pure parts of the OCI source: URL grammar, WWW-Authenticate challenges, Link pagination,
// .dockerconfigjson credentials, digest checks, and rate limiting through an injected fetch.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '../../../controller/runtime/clock.ts';
import { SourceError } from '../../../controller/sources/git.ts';
import { nextLink, RateLimitedError } from '../../../controller/sources/github.ts';
import { notKeptOf } from '../../../controller/sources/listing.ts';
import {
  checkDigest,
  OciClient,
  ociCredentialsOf,
  parseAuthChallenges,
  parseDockerConfigJson,
  parseOciUrl,
  sha256Digest,
} from '../../../controller/sources/oci.ts';

function reasonOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof SourceError, String(err));
    return err.reason;
  }
  return 'no error';
}

describe('parseOciUrl', () => {
  it('splits host[:port] and the repository path', () => {
    assert.deepEqual(parseOciUrl('oci://registry.scs.community/kaas/cluster-stacks'), {
      registry: 'registry.scs.community',
      repository: 'kaas/cluster-stacks',
    });
    assert.deepEqual(parseOciUrl('oci://LOCALHOST:5000/a/b.c/d__e/f-g/'), {
      registry: 'localhost:5000',
      repository: 'a/b.c/d__e/f-g',
    });
    assert.deepEqual(parseOciUrl('oci://[::1]:5000/x'), { registry: '[::1]:5000', repository: 'x' });
  });

  for (const [url, why] of [
    ['https://ghcr.io/a/b', 'another scheme'],
    ['oci://user:pw@ghcr.io/a/b', 'credentials'],
    ['oci://ghcr.io/a/b?x=1', 'a query'],
    ['oci://ghcr.io/a/b#f', 'a fragment'],
    ['oci://ghcr.io/', 'no repository'],
    ['oci://ghcr.io/A/b', 'upper case in the repository'],
    ['oci://ghcr.io/a//b', 'an empty component'],
    ['oci://ghcr.io/a/../b', 'a dot-dot component'],
    ['oci://ghcr.io/a/b:v1', 'a tag'],
    ['oci://ghcr.io/-a/b', 'a component starting with a separator'],
    ['oci://gh cr.io/a', 'a space in the host'],
    ['oci://ghcr.io:99999/a', 'a port out of range'],
  ] as const) {
    it(`refuses ${why}: ${url}`, () =>
      assert.equal(
        reasonOf(() => parseOciUrl(url)),
        'InvalidUrl',
      ));
  }

  it('never repeats the credentials of a refused URL', () => {
    try {
      parseOciUrl('oci://me:hunter22@ghcr.io/a');
      assert.fail('accepted');
    } catch (err) {
      assert.ok(err instanceof Error);
      assert.doesNotMatch(err.message.replace(/"oci:\/\/me:hunter22@[^"]*"/, ''), /hunter22/);
    }
  });
});

describe('parseAuthChallenges', () => {
  it('reads a Bearer challenge with quoted parameters (Distribution, Docker Hub)', () => {
    assert.deepEqual(
      parseAuthChallenges(
        'Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/alpine:pull"',
      ),
      [
        {
          scheme: 'bearer',
          params: {
            realm: 'https://auth.docker.io/token',
            service: 'registry.docker.io',
            scope: 'repository:library/alpine:pull',
          },
        },
      ],
    );
  });

  it('reads Basic, several challenges, escapes and commas inside quotes', () => {
    assert.deepEqual(parseAuthChallenges('Basic realm="Registry Realm"'), [
      { scheme: 'basic', params: { realm: 'Registry Realm' } },
    ]);
    assert.deepEqual(parseAuthChallenges('Basic realm="a, b", Bearer realm="https://t/x",scope="s\\"q"'), [
      { scheme: 'basic', params: { realm: 'a, b' } },
      { scheme: 'bearer', params: { realm: 'https://t/x', scope: 's"q' } },
    ]);
  });

  it('gives nothing for an empty header', () => assert.deepEqual(parseAuthChallenges(''), []));
});

describe('Link pagination of tags/list', () => {
  it('finds rel="next" as Distribution sends it', () => {
    assert.equal(
      nextLink('</v2/a/b/tags/list?last=t099&n=100>; rel="next"'),
      '/v2/a/b/tags/list?last=t099&n=100',
    );
    assert.equal(nextLink('</x>; rel="prev"'), undefined);
  });
});

describe('parseDockerConfigJson', () => {
  const config = JSON.stringify({
    auths: {
      'https://index.docker.io/v1/': { auth: Buffer.from('hub:hubpw').toString('base64') },
      'registry.example:5000': { username: 'u', password: 'p:w' },
      'ghcr.io': { auth: Buffer.from('x:tok:en').toString('base64') },
      'id.example': { identitytoken: 'refresh-me' },
    },
  });

  it('picks the entry of the registry host, from auth or username/password', () => {
    // Docker Hub's registry host finds what docker login wrote for its index.
    assert.deepEqual(parseDockerConfigJson(config, 'registry-1.docker.io'), {
      username: 'hub',
      password: 'hubpw',
    });
    assert.deepEqual(parseDockerConfigJson(config, 'index.docker.io'), {
      username: 'hub',
      password: 'hubpw',
    });
    assert.deepEqual(parseDockerConfigJson(config, 'registry.example:5000'), {
      username: 'u',
      password: 'p:w',
    });
    assert.deepEqual(parseDockerConfigJson(config, 'ghcr.io'), { username: 'x', password: 'tok:en' });
    assert.deepEqual(parseDockerConfigJson(config, 'id.example'), { identityToken: 'refresh-me' });
    assert.equal(parseDockerConfigJson(config, 'registry.example'), undefined);
  });

  it('refuses JSON that is not and an auth that is no user:password, naming no value', () => {
    assert.equal(
      reasonOf(() => parseDockerConfigJson('{nope', 'h')),
      'InvalidSecret',
    );
    const bad = JSON.stringify({ auths: { h: { auth: Buffer.from('s3cretnocolon').toString('base64') } } });
    try {
      parseDockerConfigJson(bad, 'h');
      assert.fail('accepted');
    } catch (err) {
      assert.ok(err instanceof SourceError && err.reason === 'InvalidSecret');
      assert.doesNotMatch(err.message, /s3cret/);
    }
  });

  it('maps a Secret of keys: a token is the bearer first and the password at the realm, username/password stay basic', () => {
    assert.deepEqual(ociCredentialsOf({ username: 'x-access-token', password: 't', token: 't' }, 'h'), {
      token: 't',
      username: 'x-access-token',
      password: 't',
    });
    assert.deepEqual(ociCredentialsOf({ username: 'u', password: 'p' }, 'h'), {
      username: 'u',
      password: 'p',
    });
    assert.deepEqual(ociCredentialsOf({ dockerConfigJson: config }, 'ghcr.io'), {
      username: 'x',
      password: 'tok:en',
    });
  });
});

describe('checkDigest', () => {
  const bytes = Buffer.from('cluster stack');
  const digest = sha256Digest(bytes);

  it('accepts the bytes of the digest and size', () => {
    assert.match(digest, /^sha256:[a-f0-9]{64}$/);
    checkDigest(bytes, digest, 'layer x', bytes.length);
  });

  it('names what is wrong without describing the bytes that came back: flipped byte, other size (DigestMismatch, retried), not sha256 (InvalidRelease)', () => {
    const flipped = Buffer.from(bytes);
    flipped[0] = (flipped[0] ?? 0) ^ 1;
    const noSizeNorDigestOf = (message: string, got: Uint8Array): void => {
      // Issue 31 F1: a second manifest using the size and digest of what came back would make
      // those (unverified) bytes a release file.
      assert.ok(!message.includes(sha256Digest(got)), message);
      assert.ok(!new RegExp(`\\b${got.byteLength}\\b`).test(message), message);
    };
    assert.throws(
      () => checkDigest(flipped, digest, 'layer metadata.yaml'),
      (err: unknown) => {
        // Bytes that do not match are not the release: no verdict on it.
        assert.ok(err instanceof SourceError && err.reason === 'DigestMismatch');
        assert.equal(err.message, `layer metadata.yaml: the content does not match its digest ${digest}`);
        noSizeNorDigestOf(err.message, flipped);
        return true;
      },
    );
    const longer = Buffer.concat([bytes, Buffer.from('{"AccessKeyId":"x"}')]);
    assert.throws(
      () => checkDigest(longer, digest, 'layer y', bytes.length),
      (err: unknown) => {
        assert.ok(err instanceof SourceError && err.reason === 'DigestMismatch');
        assert.equal(
          err.message,
          `layer y: the content is not the ${bytes.length} bytes the descriptor says`,
        );
        noSizeNorDigestOf(err.message, longer);
        return true;
      },
    );
    assert.throws(
      () => checkDigest(bytes, `sha512:${'0'.repeat(128)}`, 'layer z'),
      (err: unknown) =>
        err instanceof SourceError && err.reason === 'InvalidRelease' && /is not sha256/.test(err.message),
    );
  });
});

describe('OciClient rate limiting', () => {
  it('turns 429 Retry-After into RateLimited and sends nothing to the registry before retryAt', async () => {
    const clock = new FakeClock(Date.parse('2026-01-01T00:00:00Z'));
    let calls = 0;
    const fetch = (async () => {
      calls += 1;
      return new Response('{"errors":[{"code":"TOOMANYREQUESTS"}]}', {
        status: 429,
        headers: { 'retry-after': '120' },
      });
    }) as typeof globalThis.fetch;
    const client = new OciClient({ fetch, clock });
    const err = await client.listTagNames('oci://r.example/a', undefined).catch((e: unknown) => e);
    assert.ok(err instanceof RateLimitedError);
    assert.equal(err.reason, 'RateLimited');
    assert.equal(err.retryAt, clock.now() + 120_000);
    const again = await client.listTagNames('oci://r.example/a', undefined).catch((e: unknown) => e);
    assert.ok(again instanceof RateLimitedError);
    assert.equal(calls, 1);
    clock.advance(120_000);
    await client.listTagNames('oci://r.example/a', undefined).catch(() => undefined);
    assert.equal(calls, 2);
  });

  it('refuses a token realm that is not https (credentials would go there in clear)', async () => {
    const fetch = (async () =>
      new Response(null, {
        status: 401,
        headers: { 'www-authenticate': 'Bearer realm="http://auth.example/token",service="s"' },
      })) as typeof globalThis.fetch;
    const client = new OciClient({ fetch });
    const err = await client
      .listTagNames('oci://r.example/a', { username: 'u', password: 'pw-never-sent' })
      .catch((e: unknown) => e);
    assert.ok(err instanceof SourceError);
    assert.equal(err.reason, 'AuthenticationFailed');
    assert.match(err.message, /realm http:\/\/auth\.example is not https/);
  });
});

describe('OciClient listing', () => {
  it('leaves out a release tag whose manifest is not found yet (a push in progress), keeps the rest', async () => {
    const digest = `sha256:${'e'.repeat(64)}`;
    const fetch = (async (input: string | URL | Request) => {
      const url = String(input);
      if (url.includes('/tags/list'))
        return new Response(
          JSON.stringify({ name: 'a', tags: ['docker-ferrol-1-30-v1', 'docker-ferrol-1-30-v2', 'latest'] }),
        );
      if (url.endsWith('/manifests/docker-ferrol-1-30-v1'))
        return new Response(null, { status: 200, headers: { 'docker-content-digest': digest } });
      return new Response(null, { status: 404 });
    }) as typeof globalThis.fetch;
    const tags = await new OciClient({ fetch }).listTags('oci://r.example/a', undefined);
    // "latest" is no release tag: counted, not kept (issue 31 F2).
    assert.deepEqual([...tags], [{ tag: 'docker-ferrol-1-30-v1', commit: digest }]);
    assert.equal(notKeptOf(tags), 1);
  });

  it('fails the whole listing when a tag page fails (no partial listing)', async () => {
    let page = 0;
    const fetch = (async () => {
      page += 1;
      if (page === 1)
        return new Response(JSON.stringify({ tags: ['x'] }), {
          headers: { link: '</v2/a/tags/list?last=x&n=100>; rel="next"' },
        });
      return new Response('{"errors":[{"code":"UNKNOWN"}]}', { status: 500 });
    }) as typeof globalThis.fetch;
    const err = await new OciClient({ fetch })
      .listTags('oci://r.example/a', undefined)
      .catch((e: unknown) => e);
    assert.ok(err instanceof SourceError);
    assert.equal(err.reason, 'SourceUnreachable');
    assert.match(err.message, /HTTP 500 UNKNOWN/);
  });

  it('does not follow a Link to another origin', async () => {
    const fetch = (async () =>
      new Response(JSON.stringify({ tags: ['x'] }), {
        headers: { link: '<https://evil.example/v2/a/tags/list?last=x>; rel="next"' },
      })) as typeof globalThis.fetch;
    const err = await new OciClient({ fetch })
      .listTagNames('oci://r.example/a', undefined)
      .catch((e: unknown) => e);
    assert.ok(err instanceof SourceError);
    assert.match(err.message, /pagination left https:\/\/r\.example/);
  });
});

describe('OciClient token service', () => {
  it('a 429 from the token realm is RateLimited with its Retry-After', async () => {
    const clock = new FakeClock(Date.parse('2026-01-01T00:00:00Z'));
    const fetch = (async (input: string | URL | Request) => {
      if (String(input).startsWith('https://auth.example/'))
        return new Response(null, { status: 429, headers: { 'retry-after': '45' } });
      return new Response(null, {
        status: 401,
        headers: { 'www-authenticate': 'Bearer realm="https://auth.example/token",service="r"' },
      });
    }) as typeof globalThis.fetch;
    const err = await new OciClient({ fetch, clock })
      .listTagNames('oci://r.example/a', undefined)
      .catch((e: unknown) => e);
    assert.ok(err instanceof RateLimitedError, String(err));
    assert.equal(err.retryAt, clock.now() + 45_000);
  });
});

// Issue 31 F2: a registry a tenant names must not make the controller hold what it lists.
describe('OciClient: a hostile tag listing', () => {
  /** A registry whose tags/list answers page i from `pages`, linking the next. */
  function registry(pages: string[][]): { fetch: typeof globalThis.fetch; served: () => number } {
    let served = 0;
    const fetch = (async (input: string | URL | Request) => {
      const url = new URL(String(input));
      if (!url.pathname.endsWith('/tags/list'))
        return new Response(null, {
          status: 200,
          headers: { 'docker-content-digest': `sha256:${'e'.repeat(64)}` },
        });
      const i = Number(url.searchParams.get('page') ?? 0);
      served += 1;
      const headers: Record<string, string> = {};
      if (i + 1 < pages.length) headers.link = `</v2/a/tags/list?page=${i + 1}>; rel="next"`;
      return new Response(JSON.stringify({ name: 'a', tags: pages[i] }), { headers });
    }) as typeof globalThis.fetch;
    return { fetch, served: () => served };
  }

  it('pages of 1 MB tags (each page under the old 4 MiB page limit): ListingTooLarge after 4 MiB in all', async () => {
    const page = Array.from({ length: 3 }, (_, i) => `${'a'.repeat(1_000_000)}${i}`);
    const r = registry(Array.from({ length: 100 }, () => page));
    const err = await new OciClient({ fetch: r.fetch })
      .listTags('oci://r.example/a', undefined)
      .catch((e: unknown) => e);
    assert.ok(err instanceof SourceError, String(err));
    assert.equal(err.reason, 'ListingTooLarge');
    assert.match(err.message, /oci:\/\/r\.example\/a/);
    assert.match(err.message, /more than 4194304 bytes, the limit for one listing/);
    assert.equal(r.served(), 2, 'no page read past the limit');
  });

  it('half a million strings that are not OCI tags: none kept, all counted; the release tags kept', async () => {
    const junk = Array.from({ length: 500_000 }, (_, i) => `-${i.toString(36)}`);
    const r = registry([
      [...junk, 'docker-ferrol-1-30-v1', 'latest', 'x'.repeat(129)],
      ['docker-ferrol-1-30-v2'],
    ]);
    const tags = await new OciClient({ fetch: r.fetch }).listTags('oci://r.example/a', undefined);
    assert.deepEqual(
      tags.map((t) => t.tag),
      ['docker-ferrol-1-30-v1', 'docker-ferrol-1-30-v2'],
    );
    assert.equal((tags as { notKept?: number }).notKept, 500_002);
  });
});
