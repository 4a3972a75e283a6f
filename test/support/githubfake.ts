// A local HTTP server speaking the part of the GitHub REST API stackflux's GitHub lister reads
// (controller/sources/github.ts): `GET /repos/{owner}/{repo}/releases` and `.../tags`, one item
// per page with `Link: <...>; rel="next"` (so pagination is always exercised), ETags answered
// with 304 on `If-None-Match`, and a token check (`Authorization: token T` or `Bearer T`; a wrong
// one gets 401 "Bad credentials"). Faults, as GitHub shows them:
//  - `rate-limit`: 403 with `x-ratelimit-remaining: 0` and `x-ratelimit-reset` (epoch seconds);
//  - `retry-after`: 429 with `retry-after` (seconds);
//  - `server-error`: 503 on every request;
//  - `next-page-fails`: the second page of the releases answers 500 (the first one links to it);
//  - `cut-body`: the first page of the releases announces more bytes than it sends, then closes.
// `once` faults answer one request and then turn back to `ok`. Every request is logged.
// Release assets: a release may carry assets (listed in `assets[]` of the releases and of
// `GET /repos/{o}/{r}/releases/tags/{tag}`); `GET /repos/{o}/{r}/releases/assets/{id}` with
// `Accept: application/octet-stream` answers 302 to a second origin, the "storage" server
// (`storageUrl`, its own request log `storageLog`), which serves the bytes as GitHub's storage host
// does: without asking for the token. replaceAsset() uploads a new asset in place of one (new id and
// time, as GitHub does); `storageExtraBytes` makes the storage send more than the listed size.
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';

export type GitHubFault =
  | 'ok'
  | 'rate-limit'
  | 'retry-after'
  | 'server-error'
  | 'next-page-fails'
  | 'cut-body';

export interface GitHubRequest {
  at: number;
  path: string;
  status: number;
  /** The Authorization header as sent (tests check what was sent, and that it stays here). */
  authorization: string;
}

export interface FakeAsset {
  id: number;
  name: string;
  bytes: Uint8Array;
  updated_at: string;
}

export interface FakeRelease {
  tag: string;
  commit: string;
  assets?: FakeAsset[];
}

let nextAssetId = 1000;
let assetClock = Date.parse('2026-01-01T00:00:00Z');

function newAsset(name: string, bytes: Uint8Array): FakeAsset {
  assetClock += 1000;
  return { id: nextAssetId++, name, bytes, updated_at: new Date(assetClock).toISOString() };
}

/** Assets {name → bytes} as a release's assets, each with a new id. */
export function fakeAssets(files: ReadonlyMap<string, Uint8Array>): FakeAsset[] {
  return [...files].map(([name, bytes]) => newAsset(name, bytes));
}

function assetJson(a: FakeAsset) {
  return {
    id: a.id,
    name: a.name,
    size: a.bytes.byteLength,
    updated_at: a.updated_at,
    content_type: 'application/octet-stream',
  };
}

export class GitHubFake {
  readonly log: GitHubRequest[] = [];
  url = '';
  releases: FakeRelease[] = [];
  /** Accepted token; undefined: no authentication required. */
  token: string | undefined;
  #fault: GitHubFault = 'ok';
  #once = false;
  /** rate-limit: epoch seconds of the reset; retry-after: seconds. */
  #param = 0;
  #server: Server | undefined;
  #storage: Server | undefined;
  /** The storage origin asset downloads are redirected to. */
  storageUrl = '';
  readonly storageLog: GitHubRequest[] = [];
  /** Bytes the storage sends beyond an asset's listed size (a download that must be refused). */
  storageExtraBytes = 0;

  static async start(): Promise<GitHubFake> {
    const f = new GitHubFake();
    const listen = async (server: Server): Promise<string> => {
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
      const addr = server.address();
      return `http://127.0.0.1:${typeof addr === 'object' && addr !== null ? addr.port : 0}`;
    };
    f.#server = createServer((req, res) => f.#handle(req, res));
    f.url = await listen(f.#server);
    f.#storage = createServer((req, res) => f.#serveStorage(req, res));
    f.storageUrl = await listen(f.#storage);
    return f;
  }

  /** Replaces asset `name` of release `tag` with `bytes`: a new asset id and time, as GitHub does. */
  replaceAsset(tag: string, name: string, bytes: Uint8Array): void {
    const release = this.releases.find((r) => r.tag === tag);
    const at = release?.assets?.findIndex((a) => a.name === name) ?? -1;
    if (release?.assets === undefined || at < 0) throw new Error(`no asset ${name} in ${tag}`);
    release.assets[at] = newAsset(name, bytes);
  }

  #asset(id: number): FakeAsset | undefined {
    for (const r of this.releases) for (const a of r.assets ?? []) if (a.id === id) return a;
    return undefined;
  }

  #serveStorage(req: IncomingMessage, res: ServerResponse) {
    const url = new URL(req.url ?? '/', this.storageUrl);
    const entry: GitHubRequest = {
      at: Date.now(),
      path: url.pathname,
      status: 0,
      authorization: req.headers.authorization ?? '',
    };
    this.storageLog.push(entry);
    const m = /^\/blobs\/(\d+)$/.exec(url.pathname);
    const asset =
      m === null || url.searchParams.get('sig') !== 'signed' ? undefined : this.#asset(Number(m[1]));
    entry.status = asset === undefined ? 404 : 200;
    if (asset === undefined) {
      res.writeHead(404);
      res.end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    res.end(Buffer.concat([asset.bytes, Buffer.alloc(this.storageExtraBytes, 0x41)]));
  }

  /** Sets the fault; `param`: the reset (epoch s) of rate-limit, the seconds of retry-after. */
  set(fault: GitHubFault, o: { param?: number; once?: boolean } = {}): void {
    this.#fault = fault;
    this.#param = o.param ?? 0;
    this.#once = o.once ?? false;
  }

  requests(from: number, to: number, keep: (r: GitHubRequest) => boolean = () => true): GitHubRequest[] {
    return this.log.filter((r) => r.at >= from && r.at < to && keep(r));
  }

  async stop(): Promise<void> {
    for (const s of [this.#server, this.#storage]) {
      s?.closeAllConnections();
      await new Promise<void>((resolve) => (s ? s.close(() => resolve()) : resolve()));
    }
  }

  #handle(req: IncomingMessage, res: ServerResponse) {
    const url = new URL(req.url ?? '/', this.url);
    const entry: GitHubRequest = {
      at: Date.now(),
      path: `${url.pathname}${url.search}`,
      status: 0,
      authorization: req.headers.authorization ?? '',
    };
    this.log.push(entry);
    const send = (status: number, headers: Record<string, string>, body: string): void => {
      entry.status = status;
      res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers });
      res.end(body);
    };
    const given = (req.headers.authorization ?? '').replace(/^(token|bearer)\s+/i, '');
    const unauthorized = this.token !== undefined && given !== this.token;
    const byTag = /^\/repos\/[^/]+\/[^/]+\/releases\/tags\/([^/]+)$/.exec(url.pathname);
    const byAsset = /^\/repos\/[^/]+\/[^/]+\/releases\/assets\/(\d+)$/.exec(url.pathname);
    if ((byTag !== null || byAsset !== null) && unauthorized)
      return send(401, {}, JSON.stringify({ message: 'Bad credentials' }));
    if (byTag !== null) {
      const r = this.releases.find((x) => x.tag === decodeURIComponent(byTag[1] ?? ''));
      if (r === undefined) return send(404, {}, JSON.stringify({ message: 'Not Found' }));
      return send(
        200,
        {},
        JSON.stringify({
          tag_name: r.tag,
          draft: false,
          prerelease: false,
          assets: (r.assets ?? []).map(assetJson),
        }),
      );
    }
    if (byAsset !== null) {
      const asset = this.#asset(Number(byAsset[1]));
      if (asset === undefined) return send(404, {}, JSON.stringify({ message: 'Not Found' }));
      if (req.headers.accept !== 'application/octet-stream')
        return send(200, {}, JSON.stringify(assetJson(asset)));
      return send(302, { location: `${this.storageUrl}/blobs/${asset.id}?sig=signed` }, '');
    }
    const m = /^\/repos\/([^/]+)\/([^/]+)\/(releases|tags)$/.exec(url.pathname);
    if (m === null) return send(404, {}, JSON.stringify({ message: 'Not Found' }));
    if (unauthorized) return send(401, {}, JSON.stringify({ message: 'Bad credentials' }));
    const kind = m[3] as 'releases' | 'tags';
    const page = Number(url.searchParams.get('page') ?? '1');
    const fault = this.#fault;
    const hits =
      fault === 'rate-limit' ||
      fault === 'retry-after' ||
      fault === 'server-error' ||
      (fault === 'next-page-fails' && kind === 'releases' && page === 2) ||
      (fault === 'cut-body' && kind === 'releases' && page === 1);
    if (hits && this.#once) this.#fault = 'ok';
    if (hits && fault === 'rate-limit')
      return send(
        403,
        { 'x-ratelimit-limit': '60', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(this.#param) },
        JSON.stringify({ message: 'API rate limit exceeded for 127.0.0.1.' }),
      );
    if (hits && fault === 'retry-after')
      return send(
        429,
        { 'retry-after': String(this.#param) },
        JSON.stringify({ message: 'You have exceeded a secondary rate limit.' }),
      );
    if (hits && (fault === 'server-error' || fault === 'next-page-fails'))
      return send(fault === 'server-error' ? 503 : 500, {}, JSON.stringify({ message: 'Server Error' }));

    const items =
      kind === 'releases'
        ? this.releases.map((r) => ({
            tag_name: r.tag,
            draft: false,
            prerelease: false,
            created_at: '2026-01-01T00:00:00Z',
            assets: (r.assets ?? []).map(assetJson),
          }))
        : this.releases.map((r) => ({ name: r.tag, commit: { sha: r.commit } }));
    const body = JSON.stringify(items.slice(page - 1, page));
    const headers: Record<string, string> = {
      etag: `"${createHash('sha256').update(body).digest('hex').slice(0, 32)}"`,
      'x-ratelimit-limit': '5000',
      'x-ratelimit-remaining': '4999',
    };
    if (page < items.length) {
      const next = new URL(url);
      next.searchParams.set('page', String(page + 1));
      headers.link = `<${next.toString()}>; rel="next"`;
    }
    if (hits && fault === 'cut-body') {
      entry.status = 200;
      res.writeHead(200, {
        'content-type': 'application/json; charset=utf-8',
        'content-length': String(Buffer.byteLength(body) + 100),
      });
      res.write(body.slice(0, Math.floor(body.length / 2)));
      res.socket?.destroy();
      return;
    }
    if (req.headers['if-none-match'] === headers.etag) return send(304, headers, '');
    send(200, headers, body);
  }
}
