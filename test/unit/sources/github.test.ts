// The GitHub Releases source against recorded-shape responses through octokit's fetch injection
// (there is no GitHub here: the live API path is not exercised by these tests).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '../../../controller/runtime/clock.ts';
import { SourceError } from '../../../controller/sources/git.ts';
import {
  GitHubReleases,
  nextLink,
  RateLimitedError,
  rateLimitReset,
} from '../../../controller/sources/github.ts';
import { SourcePollers } from '../../../controller/sources/poller.ts';

const API = 'https://api.github.com';
const TOKEN = 'ghp_s3cretT0kenValue1234567890';
const REPO = { owner: 'acme', repo: 'stacks' };
const T0 = Date.parse('2026-01-01T00:00:00Z');

interface Recorded {
  url: string;
  headers: Record<string, string>;
}

type Route = (url: URL, headers: Record<string, string>) => Response;

function fakeGitHub(route: Route) {
  const requests: Recorded[] = [];
  const fetch = (async (input: string | URL | Request, init?: RequestInit) => {
    const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
    const headers: Record<string, string> = {};
    for (const [k, v] of new Headers(init?.headers)) headers[k.toLowerCase()] = v;
    requests.push({ url: url.href, headers });
    return route(url, headers);
  }) as typeof globalThis.fetch;
  return { fetch, requests };
}

function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(status === 304 ? null : JSON.stringify(body), {
    status,
    headers: { 'content-type': 'application/json; charset=utf-8', ...headers },
  });
}

const sha = (c: string): string => c.repeat(40);

function release(tag: string, extra: Record<string, unknown> = {}) {
  return { tag_name: tag, draft: false, prerelease: false, target_commitish: 'main', ...extra };
}

/** Releases in two pages (100 + 2), tags in one page, with ETags; 304 when If-None-Match matches. */
function twoPageRepo() {
  const page1 = [
    release('docker-ferrol-1-30-v1'),
    release('docker-ferrol-1-30-v2'),
    release('docker-ferrol-1-30-v3', { draft: true }),
    release('docker-ferrol-1-30-v4', { prerelease: true }),
    release('docker-ferrol-1-30-v0-sha-abc1234', { prerelease: true }),
    ...Array.from({ length: 95 }, (_, i) => release(`other-${i}`)),
  ];
  const page2 = [release('docker-ferrol-1-31-v1'), release('not-in-tags-yet')];
  const tags = [
    'docker-ferrol-1-30-v1',
    'docker-ferrol-1-30-v2',
    'docker-ferrol-1-30-v3',
    'docker-ferrol-1-30-v4',
    'docker-ferrol-1-30-v0-sha-abc1234',
    'docker-ferrol-1-31-v1',
    ...Array.from({ length: 95 }, (_, i) => `other-${i}`),
  ].map((name, i) => ({ name, commit: { sha: sha(((i % 15) + 1).toString(16)) } }));
  const state = { page1, page2, tags, v: 1 };
  const h = fakeGitHub((url, headers) => {
    const path = url.pathname;
    const page = url.searchParams.get('page') ?? '1';
    assert.equal(url.searchParams.get('per_page'), '100');
    let body: unknown;
    let link: string | undefined;
    if (path === '/repos/acme/stacks/releases' && page === '1') {
      body = state.page1;
      link = `<${API}/repositories/42/releases?per_page=100&page=2>; rel="next", <${API}/repositories/42/releases?per_page=100&page=2>; rel="last"`;
    } else if (path === '/repositories/42/releases' && page === '2') {
      body = state.page2;
      link = `<${API}/repositories/42/releases?per_page=100&page=1>; rel="first", <${API}/repositories/42/releases?per_page=100&page=1>; rel="prev"`;
    } else if (path === '/repos/acme/stacks/tags') {
      body = state.tags;
    } else {
      return json(404, { message: 'Not Found' });
    }
    const etag = `W/"${path}-${page}-v${state.v}"`;
    const common = {
      'x-ratelimit-limit': '5000',
      'x-ratelimit-remaining': '4999',
      'x-ratelimit-reset': '1767229200',
    };
    if (headers['if-none-match'] === etag) return json(304, undefined, { etag, ...common });
    return json(200, body, { etag, ...common, ...(link !== undefined ? { link } : {}) });
  });
  return { ...h, state };
}

describe('GitHubReleases', () => {
  it('follows pagination and maps releases to tags with commits from the tags API', async () => {
    const gh = twoPageRepo();
    const client = new GitHubReleases({ fetch: gh.fetch, clock: new FakeClock(T0) });
    const tags = await client.listTags(REPO, TOKEN);

    assert.deepEqual(
      gh.requests.map((r) => r.url),
      [
        `${API}/repos/acme/stacks/releases?per_page=100`,
        `${API}/repositories/42/releases?per_page=100&page=2`,
        `${API}/repos/acme/stacks/tags?per_page=100`,
      ],
    );
    for (const r of gh.requests) assert.equal(r.headers.authorization, `token ${TOKEN}`);
    const names = tags.map((t) => t.tag);
    // Drafts out; a prerelease only when its tag is a custom-channel tag; page 2 included;
    // a release whose tag the tags API does not list (yet) left out.
    assert.ok(names.includes('docker-ferrol-1-30-v1'));
    assert.ok(names.includes('docker-ferrol-1-30-v2'));
    assert.ok(!names.includes('docker-ferrol-1-30-v3'), 'draft excluded');
    assert.ok(!names.includes('docker-ferrol-1-30-v4'), 'stable-looking prerelease excluded');
    assert.ok(names.includes('docker-ferrol-1-30-v0-sha-abc1234'), 'custom-channel prerelease included');
    assert.ok(names.includes('docker-ferrol-1-31-v1'), 'second page followed');
    assert.ok(!names.includes('not-in-tags-yet'));
    // The 95 other-N releases are not release tags: counted, not kept (issue 31 F2).
    assert.equal(tags.length, 4);
    assert.equal((tags as { notKept?: number }).notKept, 95);
    assert.deepEqual(
      tags.find((t) => t.tag === 'docker-ferrol-1-30-v2'),
      { tag: 'docker-ferrol-1-30-v2', commit: sha('2') },
    );
    assert.deepEqual(names, [...names].sort(), 'sorted by tag');
  });

  it('sends If-None-Match with the cached ETags and answers a 304 from the cache', async () => {
    const gh = twoPageRepo();
    const client = new GitHubReleases({ fetch: gh.fetch, clock: new FakeClock(T0) });
    const first = await client.listTags(REPO, TOKEN);
    const n = gh.requests.length;

    const second = await client.listTags(REPO, TOKEN);
    const again = gh.requests.slice(n);
    assert.equal(again.length, 3, 'every page asked again, conditionally');
    assert.deepEqual(
      again.map((r) => r.headers['if-none-match']),
      [
        'W/"/repos/acme/stacks/releases-1-v1"',
        'W/"/repositories/42/releases-2-v1"',
        'W/"/repos/acme/stacks/tags-1-v1"',
      ],
    );
    assert.deepEqual(second, first, 'a 304 is a cache hit, not an error');

    // The repository changes: new ETags, new content.
    gh.state.v = 2;
    gh.state.page2 = [...gh.state.page2, release('docker-ferrol-1-30-v5')];
    gh.state.tags = [...gh.state.tags, { name: 'docker-ferrol-1-30-v5', commit: { sha: sha('f') } }];
    const third = await client.listTags(REPO, TOKEN);
    assert.deepEqual(
      third.find((t) => t.tag === 'docker-ferrol-1-30-v5'),
      { tag: 'docker-ferrol-1-30-v5', commit: sha('f') },
    );
    const m = gh.requests.length;
    await client.listTags(REPO, TOKEN);
    assert.equal(gh.requests[m]?.headers['if-none-match'], 'W/"/repos/acme/stacks/releases-1-v2"');
  });

  it('keeps ETag caches apart per token', async () => {
    const gh = twoPageRepo();
    const client = new GitHubReleases({ fetch: gh.fetch, clock: new FakeClock(T0) });
    await client.listTags(REPO, TOKEN);
    const n = gh.requests.length;
    await client.listTags(REPO, 'another-token-value');
    assert.equal(gh.requests[n]?.headers['if-none-match'], undefined);
  });

  it('turns a 403 with x-ratelimit-remaining: 0 into RateLimited with the reset time and makes no request before it', async () => {
    const clock = new FakeClock(T0);
    const reset = T0 / 1000 + 900; // 15 minutes
    let limited = true;
    const ok = twoPageRepo();
    const gh = fakeGitHub((url, headers) => {
      if (limited) {
        return json(
          403,
          {
            message: `API rate limit exceeded for token ${TOKEN}.`,
            documentation_url: 'https://docs.github.com/rest/overview/rate-limits-for-the-rest-api',
          },
          { 'x-ratelimit-limit': '5000', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(reset) },
        );
      }
      return (ok.fetch as unknown as (u: string, i: RequestInit) => Response)(url.href, { headers });
    });
    const client = new GitHubReleases({ fetch: gh.fetch, clock });

    const err = await client.listTags(REPO, TOKEN).then(
      () => assert.fail('expected a rate-limit error'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof RateLimitedError);
    assert.ok(err instanceof SourceError);
    assert.equal(err.reason, 'RateLimited');
    assert.equal(err.retryAt, reset * 1000);
    assert.match(err.message, /2026-01-01T00:15:00\.000Z/);
    assert.ok(!err.message.includes(TOKEN), 'token never in the error');
    assert.ok(!JSON.stringify(err).includes(TOKEN));
    assert.equal(gh.requests.length, 1);
    assert.equal(client.blockedUntil(REPO, TOKEN), reset * 1000);

    // Before the reset: the same error at once, no request (even if GitHub would answer now).
    limited = false;
    clock.advance(14 * 60_000);
    await assert.rejects(client.listTags(REPO, TOKEN), (e: unknown) => {
      assert.ok(e instanceof RateLimitedError);
      assert.equal(e.retryAt, reset * 1000);
      return true;
    });
    assert.equal(gh.requests.length, 1, 'no request before the reset');

    // After the reset: listing resumes.
    clock.advance(60_000);
    const tags = await client.listTags(REPO, TOKEN);
    assert.ok(tags.length > 0);
    assert.equal(client.blockedUntil(REPO, TOKEN), undefined);
  });

  it('honours retry-after on 429 and secondary-limit 403s', async () => {
    for (const status of [429, 403]) {
      const clock = new FakeClock(T0);
      const gh = fakeGitHub(() =>
        json(status, { message: 'You have exceeded a secondary rate limit.' }, { 'retry-after': '120' }),
      );
      const client = new GitHubReleases({ fetch: gh.fetch, clock });
      await assert.rejects(client.listTags(REPO, TOKEN), (e: unknown) => {
        assert.ok(e instanceof RateLimitedError);
        assert.equal(e.retryAt, T0 + 120_000);
        return true;
      });
      clock.advance(119_000);
      await assert.rejects(client.listTags(REPO, TOKEN), { reason: 'RateLimited' });
      assert.equal(gh.requests.length, 1, `${status}: no request before retry-after`);
    }
  });

  it('a successful answer with remaining 0 blocks until the reset without another request', async () => {
    const clock = new FakeClock(T0);
    const reset = T0 / 1000 + 600;
    const gh = fakeGitHub((url) =>
      json(200, url.pathname.endsWith('/tags') ? [] : [], {
        etag: '"e"',
        'x-ratelimit-remaining': '0',
        'x-ratelimit-reset': String(reset),
      }),
    );
    const client = new GitHubReleases({ fetch: gh.fetch, clock });
    assert.deepEqual(await client.listTags(REPO, TOKEN), []);
    assert.equal(gh.requests.length, 2);
    await assert.rejects(client.listTags(REPO, TOKEN), { reason: 'RateLimited' });
    assert.equal(gh.requests.length, 2);
  });

  it('maps other failures to reasons without the token in the message', async () => {
    const cases: Array<[number, string]> = [
      [401, 'AuthenticationFailed'],
      [403, 'AuthenticationFailed'],
      [404, 'RepositoryNotFound'],
      [500, 'SourceUnreachable'],
    ];
    for (const [status, reason] of cases) {
      const gh = fakeGitHub(() => json(status, { message: `Bad credentials ${TOKEN}` }));
      const client = new GitHubReleases({ fetch: gh.fetch, clock: new FakeClock(T0) });
      await assert.rejects(client.listTags(REPO, TOKEN), (e: unknown) => {
        assert.ok(e instanceof SourceError);
        assert.equal(e.reason, reason, `HTTP ${status}`);
        assert.ok(!e.message.includes(TOKEN), `HTTP ${status}: ${e.message}`);
        assert.match(e.message, /acme\/stacks/);
        return true;
      });
      // Not rate limited: the next call goes out.
      await client.listTags(REPO, TOKEN).catch(() => {});
      assert.equal(gh.requests.length, 2);
    }
    const down = fakeGitHub(() => {
      throw new TypeError(`fetch failed for ${TOKEN}`);
    });
    const client = new GitHubReleases({ fetch: down.fetch, clock: new FakeClock(T0) });
    await assert.rejects(client.listTags(REPO, TOKEN), (e: unknown) => {
      assert.ok(e instanceof SourceError);
      assert.equal(e.reason, 'SourceUnreachable');
      assert.ok(!e.message.includes(TOKEN));
      return true;
    });
  });

  it('does not follow a Link to another origin (the token would go there)', async () => {
    const gh = fakeGitHub(() =>
      json(200, [release('docker-ferrol-1-30-v1')], {
        link: '<https://evil.example.com/steal?page=2>; rel="next"',
      }),
    );
    const client = new GitHubReleases({ fetch: gh.fetch, clock: new FakeClock(T0) });
    await assert.rejects(client.listTags(REPO, TOKEN), /pagination left https:\/\/api\.github\.com/);
    assert.ok(gh.requests.every((r) => r.url.startsWith(API)));
  });

  it('lists public repositories without a token', async () => {
    const gh = twoPageRepo();
    const client = new GitHubReleases({ fetch: gh.fetch, clock: new FakeClock(T0) });
    await client.listTags(REPO, undefined);
    assert.equal(gh.requests[0]?.headers.authorization, undefined);
  });
});

describe('nextLink / rateLimitReset', () => {
  it('parses the next link', () => {
    assert.equal(
      nextLink('<https://a/x?page=2>; rel="next", <https://a/x?page=9>; rel="last"'),
      'https://a/x?page=2',
    );
    assert.equal(nextLink('<https://a/x?page=1>; rel="prev"'), undefined);
    assert.equal(nextLink(undefined), undefined);
  });

  it('takes the later of retry-after and the reset', () => {
    assert.equal(rateLimitReset({ 'retry-after': '30' }, 1000), 31_000);
    assert.equal(rateLimitReset({ 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '100' }, 0), 100_000);
    assert.equal(rateLimitReset({ 'x-ratelimit-remaining': '5', 'x-ratelimit-reset': '100' }, 0), undefined);
    assert.equal(
      rateLimitReset({ 'retry-after': '500', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '100' }, 0),
      500_000,
    );
  });
});

describe('SourcePollers with a GitHub source', () => {
  const CLONE = 'https://github.com/acme/stacks.git';
  const MIN = 60_000;

  function pollerHarness(route: Route) {
    const clock = new FakeClock(T0);
    const gh = fakeGitHub(route);
    const client = new GitHubReleases({ fetch: gh.fetch, clock });
    const gitCalls: string[] = [];
    const pollers = new SourcePollers({
      clock,
      lister: async (url) => {
        gitCalls.push(url);
        return [];
      },
      githubLister: client.lister(),
      credentials: async () => ({ username: 'x-access-token', password: TOKEN }),
      onChange: () => {},
    });
    return { clock, gh, pollers, gitCalls };
  }

  it('routes a github ref to the GitHub lister with the Secret token, apart from a Git source on the same URL', async () => {
    const h = pollerHarness(() => json(200, [], { etag: '"x"' }));
    h.pollers.subscribe('ns/gh', {
      url: CLONE,
      namespace: 'ns',
      secretName: 'gh-token',
      github: REPO,
      intervalMs: 5 * MIN,
    });
    h.pollers.subscribe('ns/git', {
      url: CLONE,
      namespace: 'ns',
      secretName: 'gh-token',
      intervalMs: 5 * MIN,
    });
    await h.pollers.idle();
    assert.equal(h.pollers.size(), 2);
    assert.deepEqual(h.gitCalls, [CLONE]);
    assert.equal(h.gh.requests.length, 2, 'releases + tags');
    assert.equal(h.gh.requests[0]?.headers.authorization, `token ${TOKEN}`);
    assert.equal(h.pollers.listing('ns/gh')?.ok, true);
  });

  it('schedules the next listing after the rate-limit reset, and a webhook trigger does not list before it', async () => {
    const reset = T0 / 1000 + 30 * 60; // 30 minutes, longer than the 5m interval
    let limited = true;
    const h = pollerHarness((url) =>
      limited
        ? json(
            403,
            { message: 'API rate limit exceeded' },
            { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(reset) },
          )
        : json(
            200,
            url.pathname.endsWith('/tags')
              ? [{ name: 'docker-ferrol-1-30-v1', commit: { sha: sha('a') } }]
              : [release('docker-ferrol-1-30-v1')],
            { etag: '"y"' },
          ),
    );
    h.pollers.subscribe('ns/gh', {
      url: CLONE,
      namespace: 'ns',
      secretName: 's',
      github: REPO,
      intervalMs: 5 * MIN,
    });
    await h.pollers.idle();
    const listing = h.pollers.listing('ns/gh');
    assert.equal(listing?.ok, false);
    assert.equal(listing?.ok === false ? listing.reason : '', 'RateLimited');
    assert.match(listing?.ok === false ? listing.message : '', /2026-01-01T00:30:00\.000Z/);
    assert.ok(!JSON.stringify(listing).includes(TOKEN));
    assert.equal(h.gh.requests.length, 1);
    assert.equal(h.clock.nextDue(), reset * 1000, 'next listing at the reset, not after the interval');

    h.clock.advance(10 * MIN);
    assert.equal(h.pollers.trigger([CLONE]), 1);
    await h.pollers.idle();
    assert.equal(h.gh.requests.length, 1, 'no request before the reset');

    limited = false;
    h.clock.advance(20 * MIN);
    await h.pollers.idle();
    assert.equal(h.gh.requests.length, 3);
    assert.equal(h.pollers.listing('ns/gh')?.ok, true);
    // A release only knows url + secret: it still finds the commit the GitHub source resolved.
    assert.equal(
      h.pollers.commitOf({ url: CLONE, namespace: 'ns', secretName: 's' }, 'docker-ferrol-1-30-v1'),
      sha('a'),
    );
    assert.equal(h.clock.nextDue(), reset * 1000 + 5 * MIN, 'back to the interval');
  });
});

describe('GitHubReleases: a hostile repository (issue 31 F2)', () => {
  it('a page of more than 8 MiB is ListingTooLarge naming the repository', async () => {
    const notes = 'n'.repeat(100_000);
    const gh = fakeGitHub((url) =>
      url.pathname.endsWith('/releases')
        ? json(
            200,
            Array.from({ length: 100 }, (_, i) => release(`docker-ferrol-1-30-v${i + 1}`, { body: notes })),
          )
        : json(200, []),
    );
    const err = await new GitHubReleases({ fetch: gh.fetch, clock: new FakeClock(T0) })
      .listTags(REPO, TOKEN)
      .catch((e: unknown) => e);
    assert.ok(err instanceof SourceError, String(err));
    assert.equal(err.reason, 'ListingTooLarge');
    assert.match(err.message, /acme\/stacks: the listing is more than 8388608 bytes/);
  });

  it('follows at most 100 pages of a list (TooManyTags), however many the Link headers promise', async () => {
    const gh = fakeGitHub((url) => {
      const page = Number(url.searchParams.get('page') ?? 1);
      // 150 pages (an old client followed them all); this client stops at 100.
      const link = `<${API}/repos/acme/stacks/releases?per_page=100&page=${page + 1}>; rel="next"`;
      return json(200, [release(`build-${page}`)], page < 150 ? { link } : {});
    });
    const err = await new GitHubReleases({ fetch: gh.fetch, clock: new FakeClock(T0) })
      .listTags(REPO, TOKEN)
      .catch((e: unknown) => e);
    assert.ok(err instanceof SourceError, String(err));
    assert.equal(err.reason, 'TooManyTags');
    assert.equal(gh.requests.length, 100);
  });
});
