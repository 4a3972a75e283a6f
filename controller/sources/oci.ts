// Reading csctl releases from an OCI registry (the distribution spec), with a client of our own:
// list tags (paginated by Link), resolve a tag to its manifest digest (HEAD), and read a release
// artifact by digest, every byte verified against the digest that names it.
//
// - Auth: a request answered 401 is retried once with what its WWW-Authenticate challenge asks:
//   Bearer → a token from the realm (anonymous, with basic credentials, or an identity token
//   exchanged by the OAuth2 refresh-token grant), cached per (realm, service, scope, credentials)
//   until expires_in; Basic → the basic credentials. A `token` credential (registry token) is sent
//   as the bearer itself. The realm may be another host (Docker Hub's is) but must be https unless
//   the source is insecure.
// - Where requests go: every request (registry, realm, blob redirect) goes through egress.ts, so a
//   realm or redirect naming an internal address or name is refused (EgressRefused) unless the
//   platform's --allow-source-networks lists it. Plain http follows no redirect.
// - Bytes that fail verification are never described (no size, no digest of what came back): a
//   message naming them would let a second manifest that uses those values accept them.
// - Credentials go only into Authorization headers to the registry and its realm: never into a URL,
//   a log line, a condition or an error (messages are built here and scrubbed of them anyway). A
//   blob redirect to another origin is followed without the Authorization header.
// - 429 (and 503 with Retry-After) → RateLimitedError with retryAt: the poller waits until then, and
//   this client sends nothing to that registry before it. A token service's 429 is RateLimited too.
// - Listing: tags/list pages, then one HEAD per release tag (the digest is the release's commit);
//   a tag whose manifest is not found yet (a push in progress) is left out of that listing.
// - Reading: by digest only; node image layers are skipped, every other layer is an asset.
// - Bounded: tag pages, the bytes of a listing (all pages), the tags kept (release tags only, the
//   rest counted: listing.ts), listings in flight, manifest bytes, blob bytes (per blob and per
//   release, the release tree's byte limit), one request's time.
import { createHash } from 'node:crypto';
import type { ReleaseTree } from '../api/release.ts';
import { pathProblem } from '../releases/paths.ts';
import { parseReleaseTag } from '../releases/tags.ts';
import { type Clock, realClock } from '../runtime/clock.ts';
import { requestSignal } from './deadline.ts';
import { EgressRefusedError, egressFetch, egressRefusal } from './egress.ts';
import {
  cacheReleaseTree,
  type GitCredentials,
  RELEASE_TREE_LIMITS,
  type RemoteTag,
  SourceError,
} from './git.ts';
import { nextLink, RateLimitedError, rateLimitReset } from './github.ts';
import {
  ByteBudget,
  LISTING_LIMITS,
  listingSlot,
  notKeptOf,
  readWithinBudget,
  type SievedTags,
  TagSieve,
  withNotKept,
} from './listing.ts';
import { sieveTagPage } from './tagpage.ts';

/** The artifact type csctl gives a release (csctl pkg/cmd/mediatype.go clusterStackArtifactType). */
export const CSCTL_ARTIFACT_TYPE = 'application/vnd.scs.cluster-stacks.v1';
export const OCI_MANIFEST = 'application/vnd.oci.image.manifest.v1+json';
export const OCI_INDEX = 'application/vnd.oci.image.index.v1+json';
const OCI_EMPTY_CONFIG = 'application/vnd.oci.empty.v1+json';
const TITLE_ANNOTATION = 'org.opencontainers.image.title';
/**
 * Layers not read: a node image (csctl nodeImageMediaType) can be gigabytes and nothing of it is
 * rendered. Every other layer is read, whatever its media type: csctl gives some assets none (its
 * getMediaType knows no cluster-addon-values.yaml, so oras writes the default layer type) and CSO
 * reads every layer.
 */
export const SKIPPED_LAYER_TYPES: ReadonlySet<string> = new Set([
  'application/vnd.scs.node-image.layer.v1.tar+gzip',
]);
const MANIFEST_ACCEPT = [OCI_MANIFEST, OCI_INDEX].join(', ');

export interface OciRef {
  /** host[:port], lower case. */
  registry: string;
  /** The repository name (distribution spec grammar). */
  repository: string;
}

/** Repository names as the distribution spec defines them: path components joined by "/". */
const REPOSITORY_NAME = /^[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(\/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*$/;
const HOST =
  /^([a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*|\[[0-9a-f:.]+\])(:[0-9]{1,5})?$/;
const MAX_REPOSITORY_LENGTH = 255;

/** `oci://host[:port]/repo/path`: no credentials, query, fragment or tag; the repository as the spec's grammar. */
export function parseOciUrl(url: string): OciRef {
  const bad = (why: string): SourceError =>
    new SourceError('InvalidUrl', `OCI repository URL ${JSON.stringify(url)} ${why}`);
  const m = /^oci:\/\/([^/]*)\/(.*)$/.exec(url);
  if (m === null) throw bad('must be oci://<host>[:<port>]/<repository>');
  const [, authority = '', path = ''] = m;
  if (authority.includes('@'))
    throw bad('must not embed credentials; reference a Secret with spec.source.oci.secretRef');
  if (/[?#]/.test(path)) throw bad('must have no query or fragment');
  const registry = authority.toLowerCase();
  if (!HOST.test(registry)) throw bad('has no valid host[:port]');
  const port = /:([0-9]+)$/.exec(registry)?.[1];
  if (port !== undefined && (Number(port) < 1 || Number(port) > 65535)) throw bad('has an invalid port');
  const repository = path.replace(/\/+$/, '');
  if (!REPOSITORY_NAME.test(repository) || repository.length > MAX_REPOSITORY_LENGTH)
    throw bad(
      'names no valid repository: lower-case path components of letters and digits, separated by ".", "_", "__" or dashes',
    );
  return { registry, repository };
}

export interface OciCredentials {
  username?: string;
  password?: string;
  /** A registry token, sent as the bearer. */
  token?: string;
  /** An identity token, exchanged at the realm (OAuth2 refresh-token grant). */
  identityToken?: string;
}

/** docker login writes Docker Hub's credentials for index.docker.io; its registry is registry-1.docker.io. */
function dockerHubAlias(host: string): string {
  return host === 'docker.io' || host === 'registry-1.docker.io' ? 'index.docker.io' : host;
}

/**
 * The credentials of a `kubernetes.io/dockerconfigjson` Secret for `registry` (host[:port]):
 * `auths` keys may be a bare host or a URL (`https://host/v1/`), as docker login writes them.
 */
export function parseDockerConfigJson(json: string, registry: string): OciCredentials | undefined {
  let config: unknown;
  try {
    config = JSON.parse(json);
  } catch {
    throw new SourceError('InvalidSecret', 'the .dockerconfigjson of the Secret is not JSON');
  }
  const auths = (config as { auths?: unknown } | null)?.auths;
  if (typeof auths !== 'object' || auths === null) return undefined;
  const wanted = dockerHubAlias(registry.toLowerCase());
  for (const [key, value] of Object.entries(auths as Record<string, unknown>)) {
    const host = key
      .toLowerCase()
      .replace(/^[a-z][a-z0-9+.-]*:\/\//, '')
      .replace(/\/.*$/, '');
    if (dockerHubAlias(host) !== wanted || typeof value !== 'object' || value === null) continue;
    const v = value as Record<string, unknown>;
    const str = (k: string): string | undefined =>
      typeof v[k] === 'string' && v[k] !== '' ? (v[k] as string) : undefined;
    const out: OciCredentials = {};
    const auth = str('auth');
    if (auth !== undefined) {
      const decoded = Buffer.from(auth, 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      if (colon < 0)
        throw new SourceError(
          'InvalidSecret',
          `the auth of ${key} in .dockerconfigjson is not user:password`,
        );
      out.username = decoded.slice(0, colon);
      out.password = decoded.slice(colon + 1);
    }
    const username = str('username');
    const password = str('password');
    if (username !== undefined) out.username = username;
    if (password !== undefined) out.password = password;
    const identity = str('identitytoken');
    const token = str('registrytoken');
    if (identity !== undefined) out.identityToken = identity;
    if (token !== undefined) out.token = token;
    return out;
  }
  return undefined;
}

/** The registry credentials of a source Secret (keys username/password/token, or a .dockerconfigjson). */
export function ociCredentialsOf(
  creds: GitCredentials | undefined,
  registry: string,
): OciCredentials | undefined {
  if (creds === undefined) return undefined;
  if (creds.dockerConfigJson !== undefined) return parseDockerConfigJson(creds.dockerConfigJson, registry);
  // A `token` is tried as the bearer first; refused, it is the password at the token realm (how
  // ghcr.io and GitLab take personal access tokens).
  if (creds.token !== undefined)
    return { token: creds.token, username: creds.username ?? 'x-access-token', password: creds.token };
  const out: OciCredentials = {};
  if (creds.username !== undefined) out.username = creds.username;
  if (creds.password !== undefined) out.password = creds.password;
  return out;
}

export interface AuthChallenge {
  scheme: string;
  params: Record<string, string>;
}

/** The challenges of a WWW-Authenticate header (RFC 7235: scheme then comma-separated auth-params). */
export function parseAuthChallenges(header: string): AuthChallenge[] {
  const out: AuthChallenge[] = [];
  const re =
    /\s*(?:([A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]*)(?=\s+[A-Za-z0-9!#$%&'*+.^_`|~-]+\s*=|\s*,|\s*$)|([A-Za-z0-9!#$%&'*+.^_`|~-]+)\s*=\s*("((?:[^"\\]|\\.)*)"|[^\s,]*))\s*,?/gy;
  let current: AuthChallenge | undefined;
  re.lastIndex = 0;
  while (re.lastIndex < header.length) {
    const m = re.exec(header);
    if (m === null || m[0] === '') break;
    if (m[1] !== undefined) {
      current = { scheme: m[1].toLowerCase(), params: {} };
      out.push(current);
    } else if (m[2] !== undefined && current !== undefined) {
      const value = m[4] !== undefined ? m[4].replace(/\\(.)/g, '$1') : (m[3] ?? '');
      current.params[m[2].toLowerCase()] = value;
    }
  }
  return out;
}

/** "sha256:<hex>" of bytes. */
export function sha256Digest(bytes: Uint8Array): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
}

const SHA256_DIGEST = /^sha256:[a-f0-9]{64}$/;
/** Tags as the distribution spec defines them (so a tag from a listing is one path segment, never ".."). */
const OCI_TAG = /^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$/;

/**
 * Throws DigestMismatch naming `what` unless bytes have the digest (and size, when given). Not
 * InvalidRelease: the release IS its digest, so bytes that do not match are not the release (a
 * proxy, a broken cache or disk on the way): no verdict on it, the read is tried again with
 * back-off. A digest that is not sha256:<hex> is a verdict (InvalidRelease).
 */
export function checkDigest(bytes: Uint8Array, digest: string, what: string, size?: number): void {
  if (!SHA256_DIGEST.test(digest))
    throw new SourceError(
      'InvalidRelease',
      `${what}: digest ${JSON.stringify(digest)} is not sha256:<64 hex>`,
    );
  // What came back is not described: its size or digest would be all a second manifest needs to
  // have those bytes accepted (F1 of issue 31).
  if (size !== undefined && bytes.byteLength !== size)
    throw new SourceError(
      'DigestMismatch',
      `${what}: the content is not the ${size} bytes the descriptor says`,
    );
  if (sha256Digest(bytes) !== digest)
    throw new SourceError('DigestMismatch', `${what}: the content does not match its digest ${digest}`);
}

export { parseTagPage } from './tagpage.ts';

export interface OciLimits {
  /** Tags per page asked for (the registry may send fewer). */
  pageSize: number;
  maxPages: number;
  /** Release tags kept of one listing (others are only counted: listing.ts). */
  maxTags: number;
  /** Bytes of one listing, all pages together (listing.ts LISTING_LIMITS.maxBytes). */
  maxListingBytes: number;
  maxManifestBytes: number;
  /** Layers of one release (each a file of the release). */
  maxLayers: number;
  /** Bytes of all layers of one release, and so of each. */
  maxReleaseBytes: number;
  /** One request (headers and body). */
  requestTimeoutMs: number;
  /** HEAD requests running at once while resolving tags. */
  resolveConcurrency: number;
}

export const OCI_LIMITS: Readonly<OciLimits> = {
  pageSize: 100,
  maxPages: 100,
  maxTags: 10_000,
  maxListingBytes: LISTING_LIMITS.maxBytes,
  maxManifestBytes: 4 * 1024 * 1024,
  maxLayers: RELEASE_TREE_LIMITS.maxFiles,
  maxReleaseBytes: RELEASE_TREE_LIMITS.maxBytes,
  requestTimeoutMs: 60_000,
  resolveConcurrency: 4,
};

export interface OciSourceOptions {
  /** Plain http allowed (spec.source.oci.insecure); default https only. */
  insecure?: boolean;
  /** Ends every request of the read (its total deadline: ./deadline.ts). */
  signal?: AbortSignal | undefined;
}

export interface OciClientOptions {
  fetch?: typeof globalThis.fetch;
  clock?: Clock;
  limits?: Partial<OciLimits>;
}

interface CachedToken {
  token: string;
  expiresAt: number;
}

/** The files of a csctl release artifact: asset file name (title annotation) → bytes, each verified. */
export type ReleaseAssets = ReadonlyMap<string, Uint8Array>;

/** Turns the assets of a csctl release into its tree (task "assets": releases/csctl/assets.ts). */
export type AssetsToTree = (assets: ReleaseAssets) => ReleaseTree;

interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  title: string;
}

function scrubSecrets(text: string, creds: OciCredentials | undefined): string {
  let out = text.replace(/(https?:\/\/)[^/@\s]+@/g, '$1***@');
  for (const s of [creds?.password, creds?.token, creds?.identityToken, creds?.username]) {
    if (s !== undefined && s.length >= 3) out = out.split(s).join('***');
  }
  return out.replace(/\s+/g, ' ').trim().slice(0, 300);
}

function credsKey(creds: OciCredentials | undefined): string {
  if (creds === undefined) return '';
  return createHash('sha256').update(JSON.stringify(creds)).digest('hex').slice(0, 16);
}

/** Reads a response body, at most max bytes (more is an error naming what). */
async function readCapped(res: Response, max: number, what: string): Promise<Buffer> {
  const declared = Number(res.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > max) {
    await res.body?.cancel().catch(() => undefined);
    throw new SourceError(
      'InvalidRelease',
      `${what} is ${declared} bytes, more than the limit of ${max} bytes`,
    );
  }
  const chunks: Buffer[] = [];
  let total = 0;
  if (res.body === null) return Buffer.alloc(0);
  try {
    for await (const chunk of res.body) {
      total += chunk.byteLength;
      if (total > max) {
        await res.body.cancel().catch(() => undefined);
        throw new SourceError('InvalidRelease', `${what} is more than the limit of ${max} bytes`);
      }
      chunks.push(Buffer.from(chunk));
    }
  } catch (err) {
    if (err instanceof SourceError) throw err;
    // The request's timeout also ends a body that stalls half way.
    const name = err instanceof Error ? err.name : '';
    throw new SourceError(
      name === 'TimeoutError' || name === 'AbortError' ? 'SourceTimeout' : 'SourceUnreachable',
      `reading ${what}: the transfer broke off (${name || 'error'})`,
    );
  }
  return Buffer.concat(chunks);
}

/** A distribution-spec client; one per process keeps tokens and rate-limit state for every registry. */
export class OciClient {
  private readonly fetchImpl: typeof globalThis.fetch;
  private readonly clock: Clock;
  readonly limits: Readonly<OciLimits>;
  private readonly tokens = new Map<string, CachedToken>();
  /** origin → epoch ms before which nothing is sent there (rate limited). */
  private readonly blocked = new Map<string, number>();
  /** HTTP requests sent (tests, metrics). */
  requests = 0;

  constructor(opts: OciClientOptions = {}) {
    this.fetchImpl = opts.fetch ?? egressFetch;
    this.clock = opts.clock ?? realClock;
    this.limits = { ...OCI_LIMITS, ...opts.limits };
  }

  private base(ref: OciRef, o: OciSourceOptions): string {
    return `${o.insecure === true ? 'http' : 'https'}://${ref.registry}/v2/${ref.repository}`;
  }

  /**
   * The tags of the repository stackflux keeps (listing.ts: release tags and a few look-alikes;
   * the others only counted in notKept), following Link rel="next" on the same origin; a failed
   * page fails all. The pages are read in a listing slot, within one byte budget for all of them.
   */
  async listTagNames(
    url: string,
    creds: OciCredentials | undefined,
    o: OciSourceOptions = {},
  ): Promise<SievedTags<string>> {
    const ref = parseOciUrl(url);
    return listingSlot(() => this.readTagPages(ref, url, creds, o));
  }

  private async readTagPages(
    ref: OciRef,
    url: string,
    creds: OciCredentials | undefined,
    o: OciSourceOptions,
  ): Promise<SievedTags<string>> {
    const first = `${this.base(ref, o)}/tags/list?n=${this.limits.pageSize}`;
    const origin = new URL(first).origin;
    const what = `listing tags of ${url}`;
    const budget = new ByteBudget(what, this.limits.maxListingBytes);
    const sieve = new TagSieve();
    const kept = new Set<string>();
    const visited = new Set<string>();
    let next: string | undefined = first;
    while (next !== undefined) {
      if (visited.has(next)) break; // a Link loop ends the list, it does not spin
      if (visited.size >= this.limits.maxPages)
        throw new SourceError('TooManyTags', `${what}: more than ${this.limits.maxPages} pages`);
      visited.add(next);
      const res = await this.request(
        next,
        { method: 'GET', accept: 'application/json' },
        ref,
        creds,
        o,
        what,
      );
      for (const t of await sieveTagPage(await readWithinBudget(res, budget), what, sieve)) kept.add(t);
      if (kept.size > this.limits.maxTags)
        throw new SourceError('TooManyTags', `${what}: more than ${this.limits.maxTags} release tags`);
      const link = nextLink(res.headers.get('link') ?? undefined);
      next = link === undefined ? undefined : new URL(link, next).toString();
      if (next !== undefined && new URL(next).origin !== origin)
        throw new SourceError('SourceUnreachable', `${what}: pagination left ${origin}; not following it`);
    }
    return withNotKept([...kept].sort(), sieve.notKept);
  }

  /** The manifest digest a tag points at now (HEAD; GET and hash when the registry names no digest). */
  async resolveTag(
    url: string,
    tag: string,
    creds: OciCredentials | undefined,
    o: OciSourceOptions = {},
  ): Promise<string> {
    const ref = parseOciUrl(url);
    if (!OCI_TAG.test(tag)) throw new SourceError('InvalidTag', `${JSON.stringify(tag)} is not an OCI tag`);
    const target = `${this.base(ref, o)}/manifests/${tag}`;
    const what = `resolving ${tag} of ${url}`;
    const head = await this.request(target, { method: 'HEAD', accept: MANIFEST_ACCEPT }, ref, creds, o, what);
    const digest = head.headers.get('docker-content-digest');
    if (digest !== null && SHA256_DIGEST.test(digest)) return digest;
    const res = await this.request(target, { method: 'GET', accept: MANIFEST_ACCEPT }, ref, creds, o, what);
    return sha256Digest(await readCapped(res, this.limits.maxManifestBytes, `the manifest of ${tag}`));
  }

  /**
   * Tags as the poller wants them: the kept tags (listTagNames), and for each release tag its manifest
   * digest as `commit` (one HEAD per release tag per listing, so a moved tag shows at the next
   * listing). Other tags keep an empty commit: they never become releases. A tag whose manifest
   * is not found (404) is left out: the listing raced a push (Distribution lists a tag before its
   * link is written) or a delete, and the next listing has it settled.
   */
  async listTags(
    url: string,
    creds: OciCredentials | undefined,
    o: OciSourceOptions = {},
  ): Promise<RemoteTag[]> {
    const names = await this.listTagNames(url, creds, o);
    const out: RemoteTag[] = names.map((tag) => ({ tag, commit: '' }));
    const wanted = out.filter((t) => parseReleaseTag(t.tag).ok);
    let at = 0;
    const worker = async (): Promise<void> => {
      while (at < wanted.length) {
        const t = wanted[at++];
        if (t === undefined) continue;
        try {
          t.commit = await this.resolveTag(url, t.tag, creds, o);
        } catch (err) {
          // A HEAD answer has no body to tell an unknown manifest from an unknown repository, but
          // the repository was just listed.
          if (!(err instanceof SourceError && /NotFound$/.test(err.reason))) throw err;
          unsettled.add(t.tag);
        }
      }
    };
    const unsettled = new Set<string>();
    await Promise.all(Array.from({ length: Math.max(1, this.limits.resolveConcurrency) }, worker));
    return withNotKept(
      out.filter((t) => !unsettled.has(t.tag)),
      notKeptOf(names),
    );
  }

  /**
   * The assets of the release artifact with manifest `digest`: the manifest's bytes must hash to
   * the digest, its artifactType must be csctl's, every layer is fetched by digest and verified
   * (sha256 and size), within the limits.
   */
  async fetchAssets(
    url: string,
    digest: string,
    creds: OciCredentials | undefined,
    o: OciSourceOptions = {},
  ): Promise<Map<string, Uint8Array>> {
    const ref = parseOciUrl(url);
    if (!SHA256_DIGEST.test(digest))
      throw new SourceError(
        'InvalidRelease',
        `release digest ${JSON.stringify(digest)} is not sha256:<64 hex>`,
      );
    const what = `reading ${url}@${digest}`;
    const res = await this.request(
      `${this.base(ref, o)}/manifests/${digest}`,
      { method: 'GET', accept: MANIFEST_ACCEPT },
      ref,
      creds,
      o,
      what,
    );
    const bytes = await readCapped(res, this.limits.maxManifestBytes, `the manifest ${digest}`);
    const header = res.headers.get('docker-content-digest');
    if (header !== null && header !== digest)
      throw new SourceError('DigestMismatch', `the manifest ${digest}: the registry names it ${header}`);
    checkDigest(bytes, digest, `the manifest ${digest}`);
    const layers = this.releaseLayers(bytes, digest);
    const assets = new Map<string, Uint8Array>();
    for (const layer of layers) {
      const blob = await this.fetchBlob(ref, layer, creds, o, what);
      checkDigest(blob, layer.digest, `layer ${layer.title} (${layer.digest})`, layer.size);
      assets.set(layer.title, blob);
    }
    return assets;
  }

  /** The layers of a csctl release manifest, checked before any blob is read. */
  private releaseLayers(bytes: Buffer, digest: string): Descriptor[] {
    const invalid = (why: string): SourceError =>
      new SourceError('InvalidRelease', `the manifest ${digest} ${why}`);
    let m: Record<string, unknown>;
    try {
      m = JSON.parse(bytes.toString('utf8')) as Record<string, unknown>;
    } catch {
      throw invalid('is not JSON');
    }
    if (typeof m !== 'object' || m === null) throw invalid('is not a JSON object');
    if (m.mediaType === OCI_INDEX || Array.isArray(m.manifests))
      throw invalid(`is an image index, not a csctl release manifest (${OCI_MANIFEST})`);
    const config = m.config as { mediaType?: unknown } | undefined;
    const artifactType =
      typeof m.artifactType === 'string'
        ? m.artifactType
        : typeof config?.mediaType === 'string' && config.mediaType !== OCI_EMPTY_CONFIG
          ? config.mediaType
          : undefined;
    if (artifactType !== CSCTL_ARTIFACT_TYPE)
      throw invalid(
        `has artifact type ${JSON.stringify(artifactType ?? '(none)')}, not ${CSCTL_ARTIFACT_TYPE}: it is not a csctl release`,
      );
    if (!Array.isArray(m.layers)) throw invalid('has no layers');
    if (m.layers.length > this.limits.maxLayers)
      throw invalid(`has ${m.layers.length} layers, more than the limit of ${this.limits.maxLayers}`);
    const layers: Descriptor[] = [];
    const titles = new Set<string>();
    let total = 0;
    m.layers.forEach((l: unknown, i: number) => {
      const d = (l ?? {}) as Record<string, unknown>;
      if (typeof d.mediaType === 'string' && SKIPPED_LAYER_TYPES.has(d.mediaType)) return;
      const annotations = (d.annotations ?? {}) as Record<string, unknown>;
      const title = annotations[TITLE_ANNOTATION];
      if (typeof title !== 'string' || title === '')
        throw invalid(`layer ${i} has no ${TITLE_ANNOTATION} annotation (the asset's file name)`);
      const problem = pathProblem(title);
      if (problem !== undefined || title.includes('/'))
        throw invalid(
          `layer ${i}: title ${JSON.stringify(title)} is not a plain file name${problem ? ` (${problem})` : ''}`,
        );
      if (titles.has(title)) throw invalid(`names the file ${title} twice`);
      titles.add(title);
      if (typeof d.digest !== 'string' || !SHA256_DIGEST.test(d.digest))
        throw invalid(`layer ${title}: digest ${JSON.stringify(d.digest)} is not sha256:<64 hex>`);
      if (typeof d.size !== 'number' || !Number.isSafeInteger(d.size) || d.size < 0)
        throw invalid(`layer ${title}: size ${JSON.stringify(d.size)} is not a byte count`);
      total += d.size;
      layers.push({ mediaType: String(d.mediaType ?? ''), digest: d.digest, size: d.size, title });
    });
    if (total > this.limits.maxReleaseBytes)
      throw invalid(
        `has layers of ${total} bytes in all, more than the limit of ${this.limits.maxReleaseBytes} bytes`,
      );
    return layers;
  }

  /** A blob by digest; a redirect to another origin is followed without credentials. */
  private async fetchBlob(
    ref: OciRef,
    layer: Descriptor,
    creds: OciCredentials | undefined,
    o: OciSourceOptions,
    what: string,
  ): Promise<Buffer> {
    let target = `${this.base(ref, o)}/blobs/${layer.digest}`;
    const origin = new URL(target).origin;
    for (let hop = 0; hop <= 5; hop++) {
      const res = await this.request(
        target,
        { method: 'GET', accept: '*/*', anonymous: new URL(target).origin !== origin, manual: true },
        ref,
        creds,
        o,
        what,
      );
      if (res.status >= 300 && res.status < 400) {
        const location = res.headers.get('location');
        await res.body?.cancel().catch(() => undefined);
        if (location === null)
          throw new SourceError('SourceUnreachable', `${what}: a redirect without Location`);
        // Over plain http the redirect itself may have been written by anyone on the path.
        if (new URL(target).protocol === 'http:')
          throw new SourceError(
            'InsecureSource',
            `${what}: blob ${layer.digest} redirects over plain http; not following it (plain http follows no redirect)`,
          );
        const nextUrl = new URL(location, target);
        if (nextUrl.protocol !== 'https:' && !(o.insecure === true && nextUrl.protocol === 'http:'))
          throw new SourceError(
            'SourceUnreachable',
            `${what}: blob ${layer.digest} redirects to a ${nextUrl.protocol} URL`,
          );
        target = nextUrl.toString();
        continue;
      }
      // One byte more than the descriptor says is enough to know the blob is not it.
      return readCapped(
        res,
        Math.min(layer.size + 1, this.limits.maxReleaseBytes + 1),
        `layer ${layer.title} (${layer.digest})`,
      ).catch((err: unknown) => {
        if (err instanceof SourceError && err.reason === 'InvalidRelease')
          throw new SourceError(
            // Over the release limit is a verdict; merely longer than its descriptor is not the blob.
            layer.size < this.limits.maxReleaseBytes ? 'DigestMismatch' : 'InvalidRelease',
            `layer ${layer.title} (${layer.digest}): more bytes than the descriptor's ${layer.size}`,
          );
        throw err;
      });
    }
    throw new SourceError('SourceUnreachable', `${what}: blob ${layer.digest} redirects more than 5 times`);
  }

  /**
   * One request with the registry's auth dance: the cached credential for the repository's pull
   * scope first; a 401 is answered from its challenge and the request is sent once more.
   * Non-2xx answers become SourceErrors (3xx only when `manual`).
   */
  private async request(
    url: string,
    r: { method: string; accept: string; anonymous?: boolean; manual?: boolean },
    ref: OciRef,
    creds: OciCredentials | undefined,
    o: OciSourceOptions,
    what: string,
  ): Promise<Response> {
    const target = new URL(url);
    if (target.protocol !== 'https:' && !(o.insecure === true && target.protocol === 'http:'))
      throw new SourceError(
        'InsecureSource',
        `${what}: ${target.protocol} is allowed only with spec.source.oci.insecure`,
      );
    const origin = target.origin;
    const blockedUntil = this.blocked.get(origin);
    if (blockedUntil !== undefined) {
      if (this.clock.now() < blockedUntil) throw this.rateLimited(ref, blockedUntil);
      this.blocked.delete(origin);
    }
    const scope = `repository:${ref.repository}:pull`;
    const cacheKey = `${origin}\n${scope}\n${credsKey(creds)}`;
    let authorization = r.anonymous === true ? undefined : this.cachedAuthorization(cacheKey, creds);
    for (let attempt = 0; ; attempt++) {
      const res = await this.send(url, { ...r, signal: o.signal }, authorization, what, creds);
      if (res.status === 401 && attempt === 0 && r.anonymous !== true) {
        const challenge = res.headers.get('www-authenticate') ?? '';
        await res.body?.cancel().catch(() => undefined);
        authorization = await this.answer(challenge, scope, cacheKey, creds, o, what);
        if (authorization !== undefined) continue;
      }
      if (res.ok || (r.manual === true && res.status >= 300 && res.status < 400)) return res;
      throw await this.failure(res, ref, origin, what, creds);
    }
  }

  private cachedAuthorization(cacheKey: string, creds: OciCredentials | undefined): string | undefined {
    const cached = this.tokens.get(cacheKey);
    if (cached !== undefined && cached.expiresAt > this.clock.now()) return cached.token;
    if (creds?.token !== undefined) return `Bearer ${creds.token}`;
    return undefined;
  }

  /** The Authorization a challenge asks for; undefined when there is nothing to offer. */
  private async answer(
    header: string,
    scope: string,
    cacheKey: string,
    creds: OciCredentials | undefined,
    o: OciSourceOptions,
    what: string,
  ): Promise<string | undefined> {
    const challenges = parseAuthChallenges(header);
    const bearer = challenges.find((c) => c.scheme === 'bearer');
    const basic = challenges.find((c) => c.scheme === 'basic');
    const basicValue =
      creds?.username !== undefined || creds?.password !== undefined
        ? `Basic ${Buffer.from(`${creds?.username ?? ''}:${creds?.password ?? ''}`).toString('base64')}`
        : undefined;
    if (bearer !== undefined) {
      const token = await this.fetchToken(bearer, scope, creds, basicValue, o, what);
      // A token without expires_in lives 60 s (the distribution token spec's default).
      this.tokens.set(cacheKey, {
        token: `Bearer ${token.token}`,
        expiresAt: this.clock.now() + token.expiresIn * 1000,
      });
      return `Bearer ${token.token}`;
    }
    if (basic !== undefined && basicValue !== undefined) {
      this.tokens.set(cacheKey, { token: basicValue, expiresAt: Number.POSITIVE_INFINITY });
      return basicValue;
    }
    return undefined;
  }

  private async fetchToken(
    challenge: AuthChallenge,
    defaultScope: string,
    creds: OciCredentials | undefined,
    basicValue: string | undefined,
    o: OciSourceOptions,
    what: string,
  ): Promise<{ token: string; expiresIn: number }> {
    const realm = challenge.params.realm;
    if (realm === undefined)
      throw new SourceError('AuthenticationFailed', `${what}: the Bearer challenge names no realm`);
    let realmUrl: URL;
    try {
      realmUrl = new URL(realm);
    } catch {
      throw new SourceError('AuthenticationFailed', `${what}: the token realm is not a URL`);
    }
    if (realmUrl.protocol !== 'https:' && !(o.insecure === true && realmUrl.protocol === 'http:'))
      throw new SourceError(
        'AuthenticationFailed',
        `${what}: the token realm ${realmUrl.origin} is not https (credentials are sent there)`,
      );
    const scope = challenge.params.scope ?? defaultScope;
    const service = challenge.params.service;
    const realmWhat = `${what}: the token realm ${realmUrl.origin}`;
    let res: Response;
    if (creds?.identityToken !== undefined) {
      const form = new URLSearchParams({
        grant_type: 'refresh_token',
        refresh_token: creds.identityToken,
        client_id: 'stackflux',
        scope,
      });
      if (service !== undefined) form.set('service', service);
      res = await this.send(
        realmUrl.toString(),
        { method: 'POST', accept: 'application/json', form, signal: o.signal },
        undefined,
        realmWhat,
        creds,
      );
    } else {
      if (service !== undefined) realmUrl.searchParams.set('service', service);
      realmUrl.searchParams.set('scope', scope);
      res = await this.send(
        realmUrl.toString(),
        { method: 'GET', accept: 'application/json', signal: o.signal },
        basicValue,
        realmWhat,
        creds,
      );
    }
    if (!res.ok) {
      await res.body?.cancel().catch(() => undefined);
      const retryAt =
        res.status === 429 || res.status === 503
          ? (rateLimitReset(
              { 'retry-after': res.headers.get('retry-after') ?? undefined },
              this.clock.now(),
            ) ?? (res.status === 429 ? this.clock.now() + 60_000 : undefined))
          : undefined;
      // The poller waits until then (Docker Hub's token service limits too).
      if (retryAt !== undefined)
        throw new RateLimitedError(
          `the token service ${realmUrl.origin} is rate limiting; next request after ${new Date(retryAt).toISOString()}`,
          retryAt,
        );
      throw new SourceError(
        res.status === 401 || res.status === 403 ? 'AuthenticationFailed' : 'SourceUnreachable',
        `${what}: the token service ${realmUrl.origin} answered HTTP ${res.status}`,
      );
    }
    const body = await readCapped(res, 1 << 20, 'the token answer');
    let parsed: { token?: unknown; access_token?: unknown; expires_in?: unknown };
    try {
      parsed = JSON.parse(body.toString('utf8'));
    } catch {
      throw new SourceError('AuthenticationFailed', `${what}: the token service answered no JSON`);
    }
    const token = typeof parsed.token === 'string' ? parsed.token : parsed.access_token;
    if (typeof token !== 'string' || token === '')
      throw new SourceError('AuthenticationFailed', `${what}: the token service answered no token`);
    const expiresIn = typeof parsed.expires_in === 'number' && parsed.expires_in > 0 ? parsed.expires_in : 60;
    // Renew a little early: a token that expires in flight fails the request.
    return { token, expiresIn: Math.max(1, expiresIn - 5) };
  }

  private async send(
    url: string,
    r: {
      method: string;
      accept: string;
      manual?: boolean;
      form?: URLSearchParams;
      signal?: AbortSignal | undefined;
    },
    authorization: string | undefined,
    what: string,
    creds: OciCredentials | undefined,
  ): Promise<Response> {
    this.requests += 1;
    const headers: Record<string, string> = { accept: r.accept, 'user-agent': 'stackflux' };
    if (authorization !== undefined) headers.authorization = authorization;
    if (r.form !== undefined) headers['content-type'] = 'application/x-www-form-urlencoded';
    try {
      return await this.fetchImpl(url, {
        method: r.method,
        headers,
        redirect: 'manual',
        ...(r.form !== undefined ? { body: r.form.toString() } : {}),
        signal: requestSignal(this.limits.requestTimeoutMs, r.signal),
      });
    } catch (err) {
      // The read's deadline passed: its own error says so (withDeadline has already rejected).
      if (r.signal?.aborted === true) throw r.signal.reason;
      const refused = egressRefusal(err);
      if (refused !== undefined)
        throw new EgressRefusedError(`${what}: ${scrubSecrets(refused.message, creds)}`);
      const name = err instanceof Error ? err.name : '';
      const message = scrubSecrets(
        err instanceof Error
          ? `${err.message}${(err as { cause?: { code?: string } }).cause?.code ? ` (${(err as { cause?: { code?: string } }).cause?.code})` : ''}`
          : String(err),
        creds,
      );
      if (name === 'TimeoutError' || name === 'AbortError')
        throw new SourceError(
          'SourceTimeout',
          `${what}: no answer within ${this.limits.requestTimeoutMs / 1000} s`,
        );
      throw new SourceError('SourceUnreachable', `${what}: ${message}`);
    }
  }

  private async failure(
    res: Response,
    ref: OciRef,
    origin: string,
    what: string,
    creds: OciCredentials | undefined,
  ): Promise<SourceError> {
    const headers = { 'retry-after': res.headers.get('retry-after') ?? undefined };
    let codes = '';
    try {
      const body = await readCapped(res, 64 * 1024, 'an error answer');
      const errors = (JSON.parse(body.toString('utf8')) as { errors?: Array<{ code?: unknown }> }).errors;
      if (Array.isArray(errors))
        codes = errors
          .flatMap((e) => (typeof e?.code === 'string' && /^[A-Z_]{1,40}$/.test(e.code) ? [e.code] : []))
          .join(', ');
    } catch {}
    const text = scrubSecrets(`${what}: HTTP ${res.status}${codes ? ` ${codes}` : ''}`, creds);
    if (res.status === 429 || res.status === 503) {
      const retryAt =
        rateLimitReset(headers, this.clock.now()) ??
        (res.status === 429 ? this.clock.now() + 60_000 : undefined);
      if (retryAt !== undefined) {
        this.blocked.set(origin, retryAt);
        return this.rateLimited(ref, retryAt);
      }
    }
    if (res.status === 401 || res.status === 403) return new SourceError('AuthenticationFailed', text);
    if (res.status === 404)
      return new SourceError(
        /MANIFEST_UNKNOWN|BLOB_UNKNOWN/.test(codes) ? 'ArtifactNotFound' : 'RepositoryNotFound',
        text,
      );
    return new SourceError('SourceUnreachable', text);
  }

  private rateLimited(ref: OciRef, retryAt: number): RateLimitedError {
    return new RateLimitedError(
      `registry ${ref.registry} is rate limiting; next request after ${new Date(retryAt).toISOString()}`,
      retryAt,
    );
  }
}

export interface OciTreeOptions extends OciSourceOptions {
  client: OciClient;
  /** Assets → release tree (releases/csctl/assets.ts releaseTreeFromCsctlAssets). */
  assetsToTree: AssetsToTree;
}

/**
 * The release tree of the artifact `digest` of an OCI repository, cached on disk by (url, digest)
 * like Git trees (git.ts cacheReleaseTree): a digest's content never changes, so a cached tree or
 * the finding that it is invalid holds forever; concurrent calls share one fetch. The tag only
 * names the release in messages: the artifact is read by digest, never by tag.
 */
export function fetchOciReleaseTree(
  url: string,
  tag: string,
  digest: string,
  cacheDir: string,
  creds: GitCredentials | undefined,
  o: OciTreeOptions,
): Promise<ReleaseTree> {
  let ref: OciRef;
  try {
    ref = parseOciUrl(url);
  } catch (err) {
    return Promise.reject(err);
  }
  const limits = o.client.limits;
  const key = createHash('sha256')
    .update(
      `oci\n${ref.registry}/${ref.repository}\n${digest}\n${limits.maxLayers}\n${limits.maxReleaseBytes}`,
    )
    .digest('hex')
    .slice(0, 32);
  return cacheReleaseTree(cacheDir, key, async () => {
    try {
      const assets = await o.client.fetchAssets(url, digest, ociCredentialsOf(creds, ref.registry), o);
      return o.assetsToTree(assets);
    } catch (err) {
      if (err instanceof SourceError && (err.reason === 'InvalidRelease' || err.reason === 'DigestMismatch'))
        throw new SourceError(err.reason, `release ${tag} (${digest}): ${err.message}`);
      throw err;
    }
  });
}
