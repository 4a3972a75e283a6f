// Listing the releases of a GitHub repository through the REST API (octokit), as the tags the
// ClusterStack machinery consumes.
//
// - Paginated: `per_page=100`, following the `Link: rel="next"` header. The pages are walked by
//   hand (not octokit's `paginate`) because every page carries its own ETag.
// - Conditional: each page's ETag is kept (per repository and token) and sent back as
//   `If-None-Match`; a 304 answers from the cached page. GitHub does not count a 304 against the
//   rate limit, so an unchanged repository costs nothing but round trips.
// - Rate-limit aware: a 403/429 with `x-ratelimit-remaining: 0` or `retry-after` becomes a
//   RateLimitedError (reason `RateLimited`) carrying the reset time; until then no request for
//   that repository and token is made (the same error is returned at once), and the poller
//   schedules its next listing after the reset. A successful answer with
//   `x-ratelimit-remaining: 0` blocks the same way, before GitHub has to refuse.
// - Bounded (listing.ts): 100 pages per list, 8 MiB per page (octokit reads bodies through
//   budgetedFetch), a listing slot; a page is cached with only the fields and
//   items that can become a release (leanItem), the others counted as not kept.
// - Which releases: drafts never; prereleases only when the tag is a custom-channel tag
//   (`...-v0-<channel>-<suffix>`); a prerelease with a stable-looking tag is not a release yet.
// - Commits: from the tags API (`GET /repos/{owner}/{repo}/tags`, same pagination and ETags),
//   which gives each tag's commit already peeled. Not `target_commitish`: for a release of an
//   existing tag it is only the branch or commit the release was created against, not where the
//   tag points, and a branch name resolves to nothing stable. Not `git ls-remote`: it would need a
//   second transport and credentials path for every poll, while the tags list is free when
//   unchanged (304). A release whose tag is not (yet) in the tags list is left out until it is.
// - The token (the Secret's `token` key, which secretCredentials hands over as the password)
//   goes only into the Authorization header: never into a URL, a log line or an error message
//   (GitHub's own messages are scrubbed of it too). Page URLs from Link headers must stay on the
//   API origin, so the token is never sent elsewhere.
// The tree at a tag is not read here: the https clone URL (sourceUrl) with the token as password
// goes through git.ts's fetchReleaseTree like any Git source; a release carrying csctl assets is
// listed with its assets' identity and read from them (githubassets.ts).
import { createHash } from 'node:crypto';
import { Octokit } from '@octokit/rest';
import { isCsctlAssetSet } from '../releases/csctl/assets.ts';
import { parseReleaseTag } from '../releases/tags.ts';
import { type Clock, realClock } from '../runtime/clock.ts';
import { EgressRefusedError, egressFetch, egressRefusal } from './egress.ts';
import { type RemoteTag, SourceError } from './git.ts';
import { githubAssetsIdentity, releaseAssetsOf } from './githubassets.ts';
import { ByteBudget, budgetedFetch, listingSlot, listingTooLarge, tagKind, withNotKept } from './listing.ts';

export interface GitHubRepo {
  owner: string;
  repo: string;
}

/** Lists the release tags of a GitHub repository; token from the source's Secret. */
export type GitHubTagLister = (repo: GitHubRepo, token: string | undefined) => Promise<RemoteTag[]>;

export interface GitHubReleasesOptions {
  /** API root, e.g. for GitHub Enterprise Server; default https://api.github.com. */
  baseUrl?: string;
  /** Injected fetch (tests); default: the global fetch. */
  fetch?: typeof globalThis.fetch;
  /** now() is read as Unix epoch milliseconds (the real clock is). */
  clock?: Clock;
  userAgent?: string;
}

/** The GitHub API refused for rate limiting: no request before retryAt. */
export class RateLimitedError extends SourceError {
  /** Unix epoch milliseconds after which a request may be made again. */
  readonly retryAt: number;
  constructor(message: string, retryAt: number) {
    super('RateLimited', message);
    this.name = 'RateLimitedError';
    this.retryAt = retryAt;
  }
}

interface ReleaseItem {
  tag_name?: string;
  draft?: boolean;
  prerelease?: boolean;
  /** "the date of the commit used for the release" (GitHub REST docs): orders custom channels. */
  created_at?: string;
  assets?: unknown;
}

interface TagItem {
  name?: string;
  commit?: { sha?: string };
}

interface CachedPage {
  etag: string | undefined;
  /** Only the fields and items a listing uses (leanItem): a page's JSON is not kept. */
  items: unknown[];
  /** Items of the page that were not kept (not a release tag or look-alike: listing.ts). */
  dropped: number;
  next: string | undefined;
}

/** Pages of one list (releases, tags) followed; more is TooManyTags. 100 pages are 10,000 items. */
const MAX_PAGES = 100;
/**
 * Bytes of one page: a release's JSON carries its notes (at most 125,000 characters), so a page of
 * 100 can be large; only its lean items outlive it.
 */
const MAX_PAGE_BYTES = 8 * 1024 * 1024;

/**
 * What a listing keeps of one item of a releases or tags page: the fields it reads, and only for
 * a tag stackflux could use (tagKind: a release tag or a look-alike of one); undefined otherwise.
 */
export function leanItem(item: unknown): unknown {
  const i = (item ?? {}) as Record<string, unknown>;
  if ('tag_name' in i) {
    if (typeof i.tag_name !== 'string' || tagKind(i.tag_name) === 'other') return undefined;
    return {
      tag_name: i.tag_name,
      draft: i.draft,
      prerelease: i.prerelease,
      created_at: typeof i.created_at === 'string' ? i.created_at.slice(0, 64) : undefined,
      assets: releaseAssetsOf(i),
    };
  }
  if (typeof i.name !== 'string' || tagKind(i.name) === 'other') return undefined;
  const sha = (i.commit as { sha?: unknown } | undefined)?.sha;
  return { name: i.name, commit: { sha: typeof sha === 'string' ? sha.slice(0, 64) : undefined } };
}

interface RepoState {
  /** Page URL → last good answer. */
  pages: Map<string, CachedPage>;
  blockedUntil: number | undefined;
}

/** One page must answer within this, or the listing fails (and is retried by the poller). */
const REQUEST_TIMEOUT_MS = 60_000;

type Headers = Record<string, string | number | undefined>;

interface HttpErrorLike {
  status: number;
  message: string;
  response?: { headers?: Headers; data?: unknown };
}

function isHttpError(err: unknown): err is HttpErrorLike {
  return err instanceof Error && typeof (err as { status?: unknown }).status === 'number';
}

function header(headers: Headers | undefined, name: string): string | undefined {
  const v = headers?.[name];
  return v === undefined ? undefined : String(v);
}

/** The rel="next" target of a Link header. */
export function nextLink(link: string | undefined): string | undefined {
  if (link === undefined) return undefined;
  for (const part of link.split(',')) {
    const m = /^\s*<([^>]+)>\s*;(.*)$/.exec(part);
    if (m?.[1] !== undefined && /\brel="?([^"]*\s)?next(\s[^"]*)?"?/.test(m[2] ?? '')) return m[1];
  }
  return undefined;
}

/**
 * When the response says the rate limit is exhausted, the epoch ms when it resets: the later of
 * `retry-after` (seconds from now) and `x-ratelimit-reset` (epoch seconds) when remaining is 0.
 */
export function rateLimitReset(headers: Headers | undefined, now: number): number | undefined {
  let at: number | undefined;
  const retryAfter = header(headers, 'retry-after');
  if (retryAfter !== undefined) {
    const s = Number(retryAfter);
    const date = Date.parse(retryAfter);
    if (Number.isFinite(s)) at = now + Math.max(0, s) * 1000;
    else if (Number.isFinite(date)) at = date;
  }
  if (header(headers, 'x-ratelimit-remaining') === '0') {
    const reset = Number(header(headers, 'x-ratelimit-reset'));
    // No reset header: GitHub's primary limit window is an hour; a minute is a cautious guess.
    const resetAt = Number.isFinite(reset) && reset > 0 ? reset * 1000 : now + 60_000;
    at = Math.max(at ?? 0, resetAt);
  }
  return at;
}

function scrubToken(text: string, token: string | undefined): string {
  let out = text.replace(/(https?:\/\/)[^/@\s]+@/g, '$1***@');
  if (token !== undefined && token.length >= 3) out = out.split(token).join('***');
  return out.replace(/\s+/g, ' ').trim().slice(0, 300);
}

export class GitHubReleases {
  private readonly baseUrl: string;
  private readonly fetchImpl: typeof globalThis.fetch;
  private readonly clock: Clock;
  private readonly userAgent: string;
  private readonly states = new Map<string, RepoState>();
  /** HTTP requests sent (tests, metrics). */
  requests = 0;

  constructor(opts: GitHubReleasesOptions = {}) {
    this.baseUrl = (opts.baseUrl ?? 'https://api.github.com').replace(/\/+$/, '');
    // Every request through the outbound policy (egress.ts): --github-api-url may name any host.
    this.fetchImpl = opts.fetch ?? egressFetch;
    this.clock = opts.clock ?? realClock;
    this.userAgent = opts.userAgent ?? 'stackflux';
  }

  /** A GitHubTagLister bound to this client (one client keeps every repository's cache). */
  lister(): GitHubTagLister {
    return (repo, token) => this.listTags(repo, token);
  }

  /** Epoch ms before which no request for the repository (with this token) is made, if any. */
  blockedUntil(repo: GitHubRepo, token: string | undefined): number | undefined {
    return this.states.get(this.stateKey(repo, token))?.blockedUntil;
  }

  async listTags(repo: GitHubRepo, token: string | undefined): Promise<RemoteTag[]> {
    const name = `${repo.owner}/${repo.repo}`;
    const key = this.stateKey(repo, token);
    let state = this.states.get(key);
    if (state === undefined) {
      state = { pages: new Map(), blockedUntil: undefined };
      this.states.set(key, state);
    }
    const now = this.clock.now();
    if (state.blockedUntil !== undefined) {
      if (now < state.blockedUntil) throw this.rateLimited(name, state.blockedUntil);
      state.blockedUntil = undefined;
    }
    const repoState = state;
    const { releases, tags, dropped } = await listingSlot(() => this.readLists(repo, token, repoState));

    const commits = new Map<string, string>();
    for (const t of tags) {
      if (typeof t.name === 'string' && typeof t.commit?.sha === 'string') commits.set(t.name, t.commit.sha);
    }
    const out = new Map<string, string>();
    const times = new Map<string, number>();
    for (const r of releases) {
      const tag = r.tag_name;
      if (typeof tag !== 'string' || tag === '' || r.draft === true) continue;
      if (r.prerelease === true) {
        const parsed = parseReleaseTag(tag);
        if (!parsed.ok || parsed.value.channel !== 'custom') continue;
      }
      // A release carrying csctl assets is read from them (githubassets.ts): its identity is
      // theirs, whether or not its tag is in the tags list yet.
      const assets = releaseAssetsOf(r);
      const commit = isCsctlAssetSet(assets.map((a) => a.name))
        ? githubAssetsIdentity(assets)
        : commits.get(tag);
      if (commit !== undefined) out.set(tag, commit);
      const time = typeof r.created_at === 'string' ? Date.parse(r.created_at) : Number.NaN;
      if (Number.isFinite(time) && parseReleaseTag(tag).ok) times.set(tag, Math.floor(time / 1000));
    }
    const listed = [...out.entries()]
      .map(([tag, commit]) => {
        const time = times.get(tag);
        const custom = /-v0-[a-z0-9]+-[a-z0-9]+$/.test(tag);
        return custom && time !== undefined ? { tag, commit, time } : { tag, commit };
      })
      .sort((a, b) => (a.tag < b.tag ? -1 : a.tag > b.tag ? 1 : 0));
    return withNotKept(listed, dropped);
  }

  /**
   * The releases and tags lists of a repository, in a listing slot, each page's body within
   * MAX_PAGE_BYTES (octokit reads it through budgetedFetch). Returns the releases not kept as `dropped`.
   */
  private async readLists(
    repo: GitHubRepo,
    token: string | undefined,
    state: RepoState,
  ): Promise<{ releases: ReleaseItem[]; tags: TagItem[]; dropped: number }> {
    const name = `${repo.owner}/${repo.repo}`;
    // Per page: the lean items of every page are what is kept (≤ MAX_PAGES × 100 per list).
    let page: ByteBudget | undefined;
    const budgetOfPage = (): ByteBudget => {
      page = new ByteBudget(`a page of the releases or tags of ${name}`, MAX_PAGE_BYTES);
      return page;
    };
    const octokit = new Octokit({
      ...(token ? { auth: token } : {}),
      baseUrl: this.baseUrl,
      userAgent: this.userAgent,
      log: { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} },
      request: { fetch: budgetedFetch(this.fetchImpl, budgetOfPage) },
    });
    const base = `${this.baseUrl}/repos/${encodeURIComponent(repo.owner)}/${encodeURIComponent(repo.repo)}`;
    const visited = new Set<string>();
    const exceeded = (): ByteBudget | undefined => (page?.exceeded === true ? page : undefined);
    const list = (first: string) => this.listAll(octokit, state, first, name, token, visited, exceeded);
    const releases = await list(`${base}/releases?per_page=100`);
    const tags = await list(`${base}/tags?per_page=100`);
    // Pages that no longer exist (the list got shorter) leave the cache.
    for (const url of state.pages.keys()) if (!visited.has(url)) state.pages.delete(url);
    return {
      releases: releases.items as ReleaseItem[],
      tags: tags.items as TagItem[],
      dropped: releases.dropped,
    };
  }

  private stateKey(repo: GitHubRepo, token: string | undefined): string {
    // ETags and what is visible depend on the token; only a digest of it is kept as a key.
    const who = token ? createHash('sha256').update(token).digest('hex').slice(0, 16) : '';
    return JSON.stringify([this.baseUrl, repo.owner.toLowerCase(), repo.repo.toLowerCase(), who]);
  }

  private rateLimited(name: string, retryAt: number): RateLimitedError {
    return new RateLimitedError(
      `GitHub API rate limit reached for ${name}; next request after ${new Date(retryAt).toISOString()}`,
      retryAt,
    );
  }

  /** Every item of a paginated list, each page conditional on its cached ETag. */
  private async listAll(
    octokit: Octokit,
    state: RepoState,
    first: string,
    name: string,
    token: string | undefined,
    visited: Set<string>,
    exceeded: () => ByteBudget | undefined,
  ): Promise<{ items: unknown[]; dropped: number }> {
    const items: unknown[] = [];
    let dropped = 0;
    const origin = new URL(this.baseUrl).origin;
    let url: string | undefined = first;
    for (let pages = 0; url !== undefined; pages++) {
      if (visited.has(url)) break; // a Link loop ends the list, it does not spin
      if (pages >= MAX_PAGES)
        throw new SourceError('TooManyTags', `listing releases of ${name}: more than ${MAX_PAGES} pages`);
      if (new URL(url).origin !== origin) {
        throw new SourceError(
          'SourceUnreachable',
          `listing releases of ${name}: pagination left ${origin}; not following it`,
        );
      }
      visited.add(url);
      const cached = state.pages.get(url);
      let page: CachedPage;
      this.requests += 1;
      try {
        const res = await octokit.request({
          method: 'GET',
          url,
          headers: cached?.etag !== undefined ? { 'if-none-match': cached.etag } : {},
          request: { signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) },
        });
        // octokit answers a body it could not read as "" (no error): the budget tells.
        if (exceeded() !== undefined) throw new Error('over the page limit');
        const headers = res.headers as Headers;
        // Source requests follow no redirect (egress.ts): octokit hands a 3xx over as an answer.
        if ((res.status as number) >= 300 && (res.status as number) < 400)
          throw new SourceError(
            'SourceUnreachable',
            `listing releases of ${name}: the GitHub API answered HTTP ${res.status} (a renamed or moved repository? name it as it is now); redirects are not followed`,
          );
        const all = Array.isArray(res.data) ? (res.data as unknown[]) : [];
        const kept = all.map(leanItem).filter((i) => i !== undefined);
        page = {
          etag: header(headers, 'etag'),
          items: kept,
          dropped: all.length - kept.length,
          next: nextLink(header(headers, 'link')),
        };
        state.pages.set(url, page);
        if (header(headers, 'x-ratelimit-remaining') === '0') {
          state.blockedUntil = rateLimitReset(headers, this.clock.now());
        }
      } catch (err) {
        const over = exceeded();
        if (over !== undefined) throw listingTooLarge(over.what, over.max);
        if (isHttpError(err) && err.status === 304 && cached !== undefined) {
          page = cached;
        } else {
          throw this.toSourceError(err, state, name, token);
        }
      }
      items.push(...page.items);
      dropped += page.dropped;
      url = page.next;
    }
    return { items, dropped };
  }

  private toSourceError(
    err: unknown,
    state: RepoState,
    name: string,
    token: string | undefined,
  ): SourceError {
    const refused = egressRefusal(err);
    if (refused !== undefined)
      return new EgressRefusedError(`listing releases of ${name}: ${scrubToken(refused.message, token)}`);
    if (err instanceof SourceError) return err;
    if (!isHttpError(err)) {
      const msg = scrubToken(err instanceof Error ? err.message : String(err), token);
      return new SourceError('SourceUnreachable', `listing releases of ${name}: ${msg}`);
    }
    const headers = err.response?.headers;
    if (err.status === 403 || err.status === 429) {
      const retryAt = rateLimitReset(headers, this.clock.now());
      if (retryAt !== undefined) {
        state.blockedUntil = retryAt;
        return this.rateLimited(name, retryAt);
      }
    }
    const msg = scrubToken(err.message, token);
    const text = `listing releases of ${name}: HTTP ${err.status}${msg ? ` ${msg}` : ''}`;
    if (err.status === 401 || err.status === 403) return new SourceError('AuthenticationFailed', text);
    // GitHub answers 404 for private repositories the token cannot see.
    if (err.status === 404) return new SourceError('RepositoryNotFound', text);
    return new SourceError('SourceUnreachable', text);
  }
}
