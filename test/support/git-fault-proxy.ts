// A reverse HTTP proxy in front of the test Git server that injects faults, for the fault-matrix
// tests (issue 11): stackflux talks to the proxy, Flux may read the real server.
//
// Modes:
//  - `pass`: forwards every request (streaming both ways);
//  - `refuse`: the listening socket is closed, so connections are refused (the same port is
//    listened on again when the mode changes back);
//  - `stall`: accepts, forwards the request, sends the upstream's status line, headers and first
//    chunk of the body, then stops answering (the connection stays open until the mode changes);
//  - `reject-push`: forwards everything except the receive-pack POST, which gets `status` with a
//    body naming the policy (as a hosting service refusing a push would);
//  - `fail`: answers every request with `status` (an HTTP error from the server side);
//  - `drip`: forwards, but sends the upstream's answer one byte every DRIP_INTERVAL_MS (faster than
//    git's GIT_HTTP_LOW_SPEED_LIMIT of 1 byte/s, so git's own stall check never ends it);
//  - `drip-fetch`: `drip` for the answers to the git CLI's fetches only (upload-pack requests that
//    want objects, from a `git/…` user agent), so listings pass, every release tree read of
//    stackflux drips, and Flux (go-git) reading the same repository is not held.
// Every request that reaches the proxy is logged (time, method, path, response body bytes sent) so
// a test can count attempts over a window (back-off, not a hot loop); wireBytes counts every byte
// sent (headers too), so a bench can compare what a listing costs on the wire.
import { createServer, type IncomingMessage, request, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { gunzipSync } from 'node:zlib';
import { countBodyBytes } from './oci-fault-proxy.ts';

export type FaultMode = 'pass' | 'refuse' | 'stall' | 'reject-push' | 'fail' | 'drip' | 'drip-fetch';

/** One byte this often: 10 bytes/s, ten times git's low-speed limit. */
const DRIP_INTERVAL_MS = 100;

export interface ProxyRequest {
  at: number;
  method: string;
  path: string;
  userAgent: string;
  /** What the proxy did with it. */
  mode: FaultMode;
  /** Response body bytes sent to the client so far. */
  bytes: number;
}

export class FaultProxy {
  readonly log: ProxyRequest[] = [];
  /** Base URL of the proxy (http://127.0.0.1:PORT). */
  url = '';
  #mode: FaultMode = 'pass';
  #status = 403;
  #server: Server | undefined;
  #port = 0;
  readonly #upstream: URL;
  readonly #sockets = new Set<Socket>();
  /** Bytes written to connections that have closed. */
  #closedBytes = 0;
  readonly #stalled = new Set<ServerResponse>();

  private constructor(upstream: string) {
    this.#upstream = new URL(upstream);
  }

  /** A proxy forwarding to `upstream` (an http:// base URL), listening on a free port. */
  static async start(upstream: string): Promise<FaultProxy> {
    const p = new FaultProxy(upstream);
    await p.#listen();
    p.url = `http://127.0.0.1:${p.#port}`;
    return p;
  }

  /** The proxied form of an upstream URL (same path). */
  proxied(upstreamUrl: string): string {
    const u = new URL(upstreamUrl);
    return `${this.url}${u.pathname}`;
  }

  get mode(): FaultMode {
    return this.#mode;
  }

  /** Switches the fault; `status` is the HTTP status of `reject-push` and `fail`. */
  async set(mode: FaultMode, status = 403): Promise<void> {
    const was = this.#mode;
    this.#mode = mode;
    this.#status = status;
    if (mode === 'refuse' && was !== 'refuse') await this.#close();
    if (mode !== 'refuse' && was === 'refuse') await this.#listen();
    if (mode !== 'stall' && mode !== 'drip' && mode !== 'drip-fetch') {
      for (const res of this.#stalled) res.destroy();
      this.#stalled.clear();
    }
  }

  /** Answers held now by `stall`, or being dripped by `drip`/`drip-fetch`. */
  get held(): number {
    return this.#stalled.size;
  }

  /** Client connections open now (a killed git process closes its own). */
  get openConnections(): number {
    return this.#sockets.size;
  }

  /** Every byte sent to clients so far (status lines, headers, framing and bodies). */
  get wireBytes(): number {
    let sum = this.#closedBytes;
    for (const s of this.#sockets) sum += s.bytesWritten;
    return sum;
  }

  /** Requests logged in [from, to) (epoch ms) that `keep` accepts. */
  requests(from: number, to: number, keep: (r: ProxyRequest) => boolean = () => true): ProxyRequest[] {
    return this.log.filter((r) => r.at >= from && r.at < to && keep(r));
  }

  async stop(): Promise<void> {
    for (const res of this.#stalled) res.destroy();
    await this.#close();
  }

  #listen(): Promise<void> {
    const server = createServer((req, res) => this.#handle(req, res));
    server.on('connection', (s) => {
      this.#sockets.add(s);
      s.on('close', () => {
        this.#closedBytes += s.bytesWritten;
        this.#sockets.delete(s);
      });
    });
    this.#server = server;
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.#port, '127.0.0.1', () => {
        const addr = server.address();
        if (typeof addr === 'object' && addr !== null) this.#port = addr.port;
        resolve();
      });
    });
  }

  #close(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    if (server === undefined) return Promise.resolve();
    for (const s of this.#sockets) s.destroy();
    this.#sockets.clear();
    return new Promise((resolve) => server.close(() => resolve()));
  }

  /** The whole upstream answer, then one byte of it per DRIP_INTERVAL_MS (chunked: no length). */
  #drip(up: IncomingMessage, res: ServerResponse): void {
    const { 'content-length': _length, ...headers } = up.headers;
    res.writeHead(up.statusCode ?? 502, headers);
    res.flushHeaders();
    this.#stalled.add(res);
    res.on('close', () => this.#stalled.delete(res));
    const chunks: Buffer[] = [];
    up.on('data', (c: Buffer) => chunks.push(c));
    up.on('end', () => {
      const body = Buffer.concat(chunks);
      let at = 0;
      const timer = setInterval(() => {
        if (res.destroyed || at >= body.length) {
          clearInterval(timer);
          if (!res.destroyed) res.end();
          return;
        }
        res.write(body.subarray(at, at + 1));
        at += 1;
      }, DRIP_INTERVAL_MS);
      res.on('close', () => clearInterval(timer));
    });
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    const mode = this.#mode;
    const path = req.url ?? '/';
    const entry: ProxyRequest = {
      at: Date.now(),
      method: req.method ?? '',
      path,
      userAgent: req.headers['user-agent'] ?? '',
      mode,
      bytes: 0,
    };
    this.log.push(entry);
    countBodyBytes(res, entry);
    const isPush = req.method === 'POST' && /\/git-receive-pack$/.test(path.split('?')[0] ?? '');
    if (mode === 'fail' || (mode === 'reject-push' && isPush)) {
      req.resume();
      res.writeHead(this.#status, { 'Content-Type': 'text/plain' });
      res.end(`push refused by the fault proxy (HTTP ${this.#status})\n`);
      return;
    }
    // The request body, to tell a fetch from a listing (drip-fetch).
    const sent: Buffer[] = [];
    if (mode === 'drip-fetch') req.on('data', (c: Buffer) => sent.push(c));
    const upstream = request(
      {
        host: this.#upstream.hostname,
        port: this.#upstream.port,
        method: req.method,
        path,
        headers: { ...req.headers, host: this.#upstream.host },
      },
      (up) => {
        if (this.#mode === 'stall') {
          // Status, headers and the first chunk, then nothing more.
          res.writeHead(up.statusCode ?? 502, up.headers);
          res.flushHeaders();
          up.once('data', (chunk: Buffer) => {
            res.write(chunk.subarray(0, Math.max(1, Math.floor(chunk.length / 2))));
            up.destroy();
          });
          this.#stalled.add(res);
          return;
        }
        if (this.#mode === 'drip' || (this.#mode === 'drip-fetch' && wantsObjects(req, sent))) {
          this.#drip(up, res);
          return;
        }
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    upstream.on('error', () => res.destroy());
    // A client cut off mid-request (a fault closed its socket) leaves the upstream request without
    // the rest of its body: the Git server would wait for it for ever, and so would this process.
    res.on('close', () => upstream.destroy());
    req.pipe(upstream);
  }
}

/** An upload-pack request that asks for objects (a fetch, protocol v0 or v2), not a listing. */
function wantsObjects(req: IncomingMessage, sent: Buffer[]): boolean {
  if (req.method !== 'POST' || !/\/git-upload-pack$/.test((req.url ?? '').split('?')[0] ?? '')) return false;
  if (!/^git\//.test(req.headers['user-agent'] ?? '')) return false;
  let body = Buffer.concat(sent);
  try {
    if (req.headers['content-encoding'] === 'gzip') body = gunzipSync(body);
  } catch {}
  const text = body.toString('latin1');
  return text.includes('command=fetch') || /(^|\n)[0-9a-f]{4}want /.test(text);
}
