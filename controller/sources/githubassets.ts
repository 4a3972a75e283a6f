// A GitHub release that carries csctl assets is read from its assets, through the API root
// stackflux is configured with (GitHub Enterprise too), not from a clone:
//
// - Identity: the listing (github.ts) gives such a release the "commit"
//   `github-assets:sha256:<hex>`, a digest over the sorted (name, id, size, updated_at) of its csctl
//   assets. Replacing an asset (GitHub gives the new upload a new id and time) changes it, so a
//   replaced asset is a moved tag: reported (TagMoved), never applied unvalidated.
// - Fetch: `GET /repos/{o}/{r}/releases/tags/{tag}` again, the digest must still be the pinned one
//   (else TagMoved), then each csctl asset `GET /repos/{o}/{r}/releases/assets/{id}` with
//   `Accept: application/octet-stream`. GitHub answers with a redirect to its storage host, which
//   is followed WITHOUT the Authorization header (the token is for the API only). Each download must
//   be exactly the listed size and all of them at most the release tree's byte limit; the bytes go
//   to releaseTreeFromCsctlAssets (hostile-input checks) and are cached on disk by identity.
// - The token is never put in a URL, a log line or an error message.
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import type { ReleaseTree } from '../api/release.ts';
import { csctlAssetKind, releaseTreeFromCsctlAssets } from '../releases/csctl/assets.ts';
import { DEFAULT_GITHUB_API_URL } from '../releases/githuburl.ts';
import { resolveUnder } from '../releases/paths.ts';
import { RELEASE_TREE_LIMITS, type ReleaseTreeLimits, SourceError } from './contract.ts';
import { requestSignal } from './deadline.ts';
import { EgressRefusedError, egressFetch, egressRefusal } from './egress.ts';
import { ByteBudget, readWithinBudget } from './listing.ts';

export const GITHUB_ASSETS_IDENTITY_PREFIX = 'github-assets:sha256:';

/** A release asset as GitHub lists it (`assets[]` of a release). */
export interface GitHubAsset {
  id: number;
  name: string;
  size: number;
  updated_at: string;
}

/** Whether a release's "commit" is an assets identity (read from assets, not from Git). */
export function isGitHubAssetsIdentity(commit: string): boolean {
  return commit.startsWith(GITHUB_ASSETS_IDENTITY_PREFIX);
}

/** The csctl assets of a release that are read (the provider plugin's node images are not). */
export function csctlAssetsToRead(assets: readonly GitHubAsset[]): GitHubAsset[] {
  return assets
    .filter((a) => {
      const kind = csctlAssetKind(a.name);
      return kind !== undefined && kind !== 'provider';
    })
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** The identity of a release read from its csctl assets: changes when any of them is replaced. */
export function githubAssetsIdentity(assets: readonly GitHubAsset[]): string {
  const h = createHash('sha256');
  for (const a of csctlAssetsToRead(assets)) h.update(`${a.name}\0${a.id}\0${a.size}\0${a.updated_at}\n`);
  return `${GITHUB_ASSETS_IDENTITY_PREFIX}${h.digest('hex')}`;
}

/** `assets[]` of a release as GitHub returned it, keeping only well-formed entries. */
export function releaseAssetsOf(release: unknown): GitHubAsset[] {
  const list = (release as { assets?: unknown } | null)?.assets;
  if (!Array.isArray(list)) return [];
  return list.flatMap((a: Record<string, unknown>) =>
    typeof a?.id === 'number' &&
    typeof a.name === 'string' &&
    typeof a.size === 'number' &&
    typeof a.updated_at === 'string'
      ? [{ id: a.id, name: a.name, size: a.size, updated_at: a.updated_at }]
      : [],
  );
}

export interface GitHubAssetsOptions {
  /** API root; default https://api.github.com. */
  baseUrl?: string;
  fetch?: typeof globalThis.fetch;
  userAgent?: string;
}

/** One request must answer (and a download finish) within this. */
const REQUEST_TIMEOUT_MS = 120_000;
const MAX_REDIRECTS = 3;
/** Bytes of one release's JSON (GitHub allows 125,000 characters of notes and 1,000 assets). */
const MAX_RELEASE_JSON_BYTES = 8 * 1024 * 1024;
const COMPLETE = '.complete';

export class GitHubReleaseAssets {
  private readonly baseUrl: string;
  private readonly fetchImpl: typeof globalThis.fetch;
  private readonly userAgent: string;
  private readonly inflight = new Map<string, Promise<ReleaseTree>>();
  /** HTTP requests sent (tests). */
  requests = 0;

  constructor(opts: GitHubAssetsOptions = {}) {
    this.baseUrl = (opts.baseUrl ?? DEFAULT_GITHUB_API_URL).replace(/\/+$/, '');
    // The storage redirect goes through the outbound policy like the API request (egress.ts).
    this.fetchImpl = opts.fetch ?? egressFetch;
    this.userAgent = opts.userAgent ?? 'stackflux';
  }

  /**
   * The release tree of `tag` of owner/repo from its csctl assets, which must still have
   * `identity` (else TagMoved). InvalidRelease for assets that are not a valid csctl release.
   */
  fetchTree(
    repo: { owner: string; repo: string },
    tag: string,
    identity: string,
    token: string | undefined,
    cacheDir: string,
    limits: ReleaseTreeLimits = RELEASE_TREE_LIMITS,
    signal?: AbortSignal,
  ): Promise<ReleaseTree> {
    const key = createHash('sha256')
      .update(`${this.baseUrl}\n${repo.owner}/${repo.repo}\n${tag}\n${identity}`)
      .digest('hex')
      .slice(0, 32);
    const dir = join(cacheDir, 'github-assets', key);
    const running = this.inflight.get(key);
    if (running !== undefined) return running;
    const promise = this.fetchOnce(repo, tag, identity, token, dir, limits, signal).finally(() =>
      this.inflight.delete(key),
    );
    this.inflight.set(key, promise);
    return promise;
  }

  private async fetchOnce(
    repo: { owner: string; repo: string },
    tag: string,
    identity: string,
    token: string | undefined,
    dir: string,
    limits: ReleaseTreeLimits,
    signal: AbortSignal | undefined,
  ): Promise<ReleaseTree> {
    const cached = readCached(dir);
    if (cached !== undefined) return releaseTreeFromCsctlAssets(cached, limits);
    const name = `${repo.owner}/${repo.repo}`;
    const base = `${this.baseUrl}/repos/${encodeURIComponent(repo.owner)}/${encodeURIComponent(repo.repo)}`;
    const res = await this.request(
      `${base}/releases/tags/${encodeURIComponent(tag)}`,
      token,
      name,
      'application/vnd.github+json',
      undefined,
      signal,
    );
    // A release's JSON is read within a bound too (its notes and up to 1,000 assets fit easily).
    const tooLarge = (what: string, max: number): SourceError =>
      new SourceError('SourceUnreachable', `${what}: the API answered more than ${max} bytes`);
    const body = await readWithinBudget(
      res,
      new ByteBudget(`release ${tag} of ${name}`, MAX_RELEASE_JSON_BYTES, tooLarge),
    );
    let release: unknown;
    try {
      release = JSON.parse(body.toString('utf8'));
    } catch {
      throw new SourceError('SourceUnreachable', `release ${tag} of ${name}: the API answered with no JSON`);
    }
    const all = releaseAssetsOf(release);
    const now = githubAssetsIdentity(all);
    if (now !== identity)
      throw new SourceError(
        'TagMoved',
        `the csctl assets of release ${tag} of ${name} were replaced (now ${now}, validated ${identity}); nothing of them is applied: cut a new release instead of replacing assets`,
      );
    const wanted = csctlAssetsToRead(all);
    const total = wanted.reduce((sum, a) => sum + a.size, 0);
    if (total > limits.maxBytes)
      throw new SourceError(
        'InvalidRelease',
        `the csctl assets of release ${tag} of ${name} are ${total} bytes (limit ${limits.maxBytes})`,
      );
    const assets = new Map<string, Uint8Array>();
    for (const asset of wanted)
      assets.set(asset.name, await this.download(base, asset, token, name, tag, signal));
    const tree = releaseTreeFromCsctlAssets(assets, limits);
    writeCached(dir, assets);
    return tree;
  }

  /** One asset's bytes: the API's redirect followed without the token, exactly the listed size. */
  private async download(
    base: string,
    asset: GitHubAsset,
    token: string | undefined,
    name: string,
    tag: string,
    signal: AbortSignal | undefined,
  ): Promise<Uint8Array> {
    const where = `release asset ${asset.name} of ${tag} of ${name}`;
    let url = `${base}/releases/assets/${asset.id}`;
    let res = await this.request(url, token, name, 'application/octet-stream', where, signal).catch(
      (err: unknown) => {
        // Listed a moment ago: an asset gone now was replaced or deleted since.
        if (err instanceof SourceError && err.reason === 'TagNotFound')
          throw new SourceError('TagMoved', `${where}: gone since the release was listed (replaced?)`);
        throw err;
      },
    );
    for (let hops = 0; res.status >= 300 && res.status < 400; hops++) {
      const location = res.headers.get('location');
      await res.body?.cancel();
      if (location === null || hops >= MAX_REDIRECTS)
        throw new SourceError('SourceUnreachable', `${where}: too many or empty redirects`);
      // Plain http here is the platform's choice (--github-api-url), not a tenant's; the storage
      // host is checked by the outbound policy when it connects (egress.ts).
      const next = URL.parse(location, url);
      if (next === null || (next.protocol !== 'https:' && next.protocol !== 'http:'))
        throw new SourceError(
          'SourceUnreachable',
          `${where}: redirected to ${next === null ? 'an invalid URL' : `a ${next.protocol} URL`}; not following it`,
        );
      url = next.toString();
      // The storage host gets no Authorization header: its URL is signed, the token is GitHub's.
      res = await this.request(url, undefined, name, 'application/octet-stream', where, signal);
    }
    return readCapped(res, asset.size, where);
  }

  private async request(
    url: string,
    token: string | undefined,
    name: string,
    accept: string,
    where = `listing the release assets of ${name}`,
    signal?: AbortSignal,
  ): Promise<Response> {
    const headers: Record<string, string> = { accept, 'user-agent': this.userAgent };
    if (token) headers.authorization = `Bearer ${token}`;
    this.requests += 1;
    let res: Response;
    try {
      res = await this.fetchImpl(url, {
        headers,
        redirect: 'manual',
        signal: requestSignal(REQUEST_TIMEOUT_MS, signal),
      });
    } catch (err) {
      if (signal?.aborted === true) throw signal.reason;
      const refused = egressRefusal(err);
      if (refused !== undefined) throw new EgressRefusedError(`${where}: ${scrub(refused.message, token)}`);
      throw new SourceError('SourceUnreachable', `${where}: ${scrub((err as Error).message, token)}`);
    }
    if (res.ok || (res.status >= 300 && res.status < 400)) return res;
    await res.body?.cancel();
    const text = `${where}: HTTP ${res.status}`;
    // GitHub refuses for its rate limit with 403/429 and these headers, not for credentials.
    if (
      res.status === 429 ||
      res.headers.get('x-ratelimit-remaining') === '0' ||
      res.headers.has('retry-after')
    )
      throw new SourceError('RateLimited', `${text} (GitHub API rate limit; retried later)`);
    if (res.status === 401 || res.status === 403) throw new SourceError('AuthenticationFailed', text);
    if (res.status === 404) throw new SourceError('TagNotFound', text);
    throw new SourceError('SourceUnreachable', text);
  }
}

function scrub(text: string, token: string | undefined): string {
  const out = token !== undefined && token.length >= 3 ? text.split(token).join('***') : text;
  return out.replace(/\s+/g, ' ').slice(0, 300);
}

/** The body, refused as soon as it passes `size` bytes, and when it ends short of it. */
async function readCapped(res: Response, size: number, where: string): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let got = 0;
  const reader = res.body?.getReader();
  if (reader !== undefined) {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      got += value.byteLength;
      if (got > size) {
        await reader.cancel();
        throw new SourceError('InvalidRelease', `${where}: more than the listed ${size} bytes`);
      }
      chunks.push(value);
    }
  }
  // How many bytes did come is not said: what failed verification is never described.
  if (got !== size) throw new SourceError('InvalidRelease', `${where}: fewer bytes than the listed ${size}`);
  return Buffer.concat(chunks);
}

function readCached(dir: string): Map<string, Uint8Array> | undefined {
  if (!existsSync(join(dir, COMPLETE))) return undefined;
  const assets = new Map<string, Uint8Array>();
  for (const name of readdirSync(dir)) if (name !== COMPLETE) assets.set(name, readFileSync(join(dir, name)));
  return assets;
}

/** Writes the assets under `dir` (names checked), published by a rename: never half a release. */
function writeCached(dir: string, assets: ReadonlyMap<string, Uint8Array>): void {
  const parent = join(dir, '..');
  mkdirSync(parent, { recursive: true });
  const tmp = mkdtempSync(`${dir}.tmp-`);
  try {
    for (const [name, bytes] of assets) writeFileSync(resolveUnder(tmp, name), bytes);
    writeFileSync(join(tmp, COMPLETE), '');
    rmSync(dir, { recursive: true, force: true });
    renameSync(tmp, dir);
  } catch {
    // A cache that cannot be written costs a download next time, nothing else.
    rmSync(tmp, { recursive: true, force: true });
  }
}
