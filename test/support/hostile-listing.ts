// Sources that answer a tag listing as a hostile tenant would (issue 31 F2), on 127.0.0.1:
//
// - HostileRegistry: an OCI distribution registry (plain HTTP, anonymous) whose tags/list is what
//   `pages` says: e.g. pages of 1 MB tags (each page under the old 4 MiB page limit, 100 pages of
//   them), or one page of half a million strings that are not OCI tags; release tags listed with it
//   resolve (HEAD) to a fixed digest. It counts the tag pages it sends and the most tag-page
//   requests it ever had open at once (to see the bound on listings in flight), and can hold each
//   page for `delayMs` first.
// - HostileGitServer: a Git smart-HTTP server (protocol v0 advertisement, the one every git
//   accepts) whose only repository advertises the refs `refs` yields, streamed with back-pressure:
//   many long non-release tags cost the test nothing to make.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/** A fake manifest digest: release tags of a HostileRegistry resolve to it (nothing reads it). */
export const HOSTILE_DIGEST = `sha256:${'d'.repeat(64)}`;

export interface HostileRegistryOptions {
  /** The tags of page i (0-based) of every repository; undefined: no such page (the listing ends). */
  page: (i: number, repository: string) => string[] | undefined;
  /** Held before each tag page is answered (to keep listings in flight). */
  delayMs?: number;
}

/**
 * `n` distinct tags of `bytes` characters each ("a…a<from>", "a…a<from+1>", …): valid OCI grammar
 * (but for the length), no release tags.
 */
export function longTags(n: number, bytes: number, from = 0): string[] {
  return Array.from({ length: n }, (_, i) => `${'a'.repeat(bytes - String(from + i).length)}${from + i}`);
}

/** `n` strings that are not OCI tags (they start with "-"), a few bytes each. */
export function invalidTags(n: number): string[] {
  return Array.from({ length: n }, (_, i) => `-${i.toString(36)}`);
}

function track(server: Server): Set<Socket> {
  const sockets = new Set<Socket>();
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  return sockets;
}

async function listen(server: Server): Promise<number> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return (server.address() as { port: number }).port;
}

/** Resolves when `res` can take more, or is gone. */
function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

async function close(server: Server, sockets: Set<Socket>): Promise<void> {
  for (const s of sockets) s.destroy();
  await new Promise<void>((r) => server.close(() => r()));
}

export class HostileRegistry {
  /** host:port, for oci://<host>/<repository> (insecure: plain HTTP). */
  host = '';
  /** Tag pages answered (completely sent or not). */
  pagesSent = 0;
  /** Bytes of tag pages written. */
  bytesSent = 0;
  /** Tag-page requests open now, and the most ever open at once. */
  inFlight = 0;
  maxInFlight = 0;
  private server: Server | undefined;
  private sockets = new Set<Socket>();
  private readonly pageCache = new Map<string, Buffer>();
  private readonly o: HostileRegistryOptions;

  private constructor(o: HostileRegistryOptions) {
    this.o = o;
  }

  static async start(o: HostileRegistryOptions): Promise<HostileRegistry> {
    const r = new HostileRegistry(o);
    r.server = createServer((req, res) => void r.answer(req, res));
    r.sockets = track(r.server);
    r.host = `127.0.0.1:${await listen(r.server)}`;
    return r;
  }

  url(repository: string): string {
    return `oci://${this.host}/${repository}`;
  }

  async stop(): Promise<void> {
    if (this.server !== undefined) await close(this.server, this.sockets);
  }

  private async answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname === '/v2/' || url.pathname === '/v2') return void res.end('{}');
    const list = /^\/v2\/(.+)\/tags\/list$/.exec(url.pathname);
    if (list?.[1] !== undefined) return this.tagPage(list[1], Number(url.searchParams.get('page') ?? 0), res);
    const manifest = /^\/v2\/(.+)\/manifests\/([^/]+)$/.exec(url.pathname);
    if (manifest !== null && req.method === 'HEAD') {
      res.writeHead(200, {
        'docker-content-digest': HOSTILE_DIGEST,
        'content-type': 'application/vnd.oci.image.manifest.v1+json',
      });
      return void res.end();
    }
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end('{"errors":[{"code":"NAME_UNKNOWN"}]}');
  }

  private async tagPage(repository: string, i: number, res: ServerResponse): Promise<void> {
    this.inFlight += 1;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    res.on('close', () => {
      this.inFlight -= 1;
    });
    if (this.o.delayMs !== undefined) await new Promise((r) => setTimeout(r, this.o.delayMs));
    const body = this.pageBody(repository, i);
    if (body === undefined) {
      res.writeHead(404);
      return void res.end();
    }
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (this.o.page(i + 1, repository) !== undefined)
      headers.link = `</v2/${repository}/tags/list?n=100&page=${i + 1}>; rel="next"`;
    res.writeHead(200, headers);
    this.pagesSent += 1;
    // Written in 64 KiB pieces: a client that stops reading stops the page.
    for (let at = 0; at < body.length && !res.destroyed; at += 65_536) {
      const piece = body.subarray(at, at + 65_536);
      this.bytesSent += piece.length;
      if (!res.write(piece)) await drained(res);
    }
    res.end();
  }

  private pageBody(repository: string, i: number): Buffer | undefined {
    const key = `${repository}\n${i}`;
    const cached = this.pageCache.get(key);
    if (cached !== undefined) return cached;
    const tags = this.o.page(i, repository);
    if (tags === undefined) return undefined;
    const body = Buffer.from(JSON.stringify({ name: repository, tags }));
    // Pages repeat across listings and repositories of one test: made once.
    if (this.pageCache.size < 16) this.pageCache.set(key, body);
    return body;
  }
}

/** One pkt-line (Git's length-prefixed line). */
function pkt(line: string): Buffer {
  const bytes = Buffer.from(line);
  return Buffer.concat([Buffer.from((bytes.length + 4).toString(16).padStart(4, '0')), bytes]);
}

const COMMIT = 'c'.repeat(40);

export class HostileGitServer {
  /** http://127.0.0.1:<port>/hostile.git */
  url = '';
  /** Bytes of ref advertisements written. */
  bytesSent = 0;
  private server: Server | undefined;
  private sockets = new Set<Socket>();
  private readonly refs: () => Iterable<string>;

  private constructor(refs: () => Iterable<string>) {
    this.refs = refs;
  }

  /** `refs`: the ref names (refs/tags/…) advertised, each pointing at one fixed commit id. */
  static async start(refs: () => Iterable<string>): Promise<HostileGitServer> {
    const g = new HostileGitServer(refs);
    g.server = createServer((req, res) => void g.answer(req, res));
    g.sockets = track(g.server);
    g.url = `http://127.0.0.1:${await listen(g.server)}/hostile.git`;
    return g;
  }

  async stop(): Promise<void> {
    if (this.server !== undefined) await close(this.server, this.sockets);
  }

  private async answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname !== '/hostile.git/info/refs' || url.searchParams.get('service') !== 'git-upload-pack') {
      res.writeHead(404);
      return void res.end();
    }
    res.writeHead(200, {
      'content-type': 'application/x-git-upload-pack-advertisement',
      'cache-control': 'no-cache',
    });
    const send = async (b: Buffer): Promise<void> => {
      this.bytesSent += b.length;
      if (!res.write(b)) await drained(res);
    };
    await send(Buffer.concat([pkt('# service=git-upload-pack\n'), Buffer.from('0000')]));
    let first = true;
    for (const ref of this.refs()) {
      if (res.destroyed) return;
      await send(pkt(first ? `${COMMIT} ${ref}\0agent=hostile\n` : `${COMMIT} ${ref}\n`));
      first = false;
    }
    if (!res.destroyed) res.end('0000');
  }
}
