// A reverse proxy in front of an OCI registry that injects the faults a registry client meets
// (pattern: git-fault-proxy.ts): the client talks plain HTTP to the proxy, the proxy talks to the
// registry (HTTPS with its CA, or HTTP). Faults, switchable at run time with set():
//  - `pass`: forwards every request (streaming both ways);
//  - `rate-limit`: 429 with `Retry-After: <seconds>` (as registries rate-limiting pulls answer);
//  - `unavailable`: 503;
//  - `unauthorized`: 401 with a Basic challenge (credentials revoked);
//  - `hang`: accepts the request and never answers (until the fault changes or the proxy stops);
//  - `stall`: forwards, sends the status, headers and half of the first body chunk, then nothing
//    more (a download that stops midway; held like `hang`);
//  - `corrupt-blob`: forwards, but flips the first byte of a blob body (GET …/blobs/<digest>
//    answered 200), so the bytes no longer match their digest.
// A fault applies to the requests `match` accepts (default: all), for the next `times` of them
// (default: until changed). Each request is logged when its answer ends (method, path, status,
// body bytes sent, fault applied), so a bench can count requests and bytes.
import {
  createServer,
  request as httpRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Socket } from 'node:net';

export type OciFault =
  | 'pass'
  | 'rate-limit'
  | 'unavailable'
  | 'unauthorized'
  | 'hang'
  | 'stall'
  | 'corrupt-blob';

export interface OciFaultOptions {
  /** Which requests get the fault; the others pass. */
  match?: (req: { method: string; path: string }) => boolean;
  /** Apply to this many matching requests, then pass. */
  times?: number;
  /** Retry-After of `rate-limit`, in seconds (default 1). */
  retryAfterSeconds?: number;
}

export interface OciProxyRequest {
  at: number;
  method: string;
  path: string;
  /** Status sent to the client; 0 when the connection ended without an answer (hang). */
  status: number;
  /** Response body bytes sent to the client. */
  bytes: number;
  /** The fault applied to this request (`pass` when none). */
  fault: OciFault;
}

/** Adds the body bytes written to `res` to `entry.bytes` as they are written, whatever writes them (pipe included). */
export function countBodyBytes(res: ServerResponse, entry: { bytes: number }): void {
  const write = res.write.bind(res);
  res.write = ((chunk: unknown, ...rest: unknown[]) => {
    if (typeof chunk === 'string' || chunk instanceof Uint8Array) entry.bytes += Buffer.byteLength(chunk);
    return (write as (c: unknown, ...r: unknown[]) => boolean)(chunk, ...rest);
  }) as typeof res.write;
}

const blobGet = /^\/v2\/.+\/blobs\/[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$/;

export class OciFaultProxy {
  readonly log: OciProxyRequest[] = [];
  /** http://127.0.0.1:PORT */
  url = '';
  /** 127.0.0.1:PORT, as an OCI reference names the registry. */
  host = '';
  #fault: OciFault = 'pass';
  #opts: OciFaultOptions = {};
  #left = Number.POSITIVE_INFINITY;
  #server: Server | undefined;
  readonly #upstream: URL;
  readonly #ca: string | undefined;
  readonly #sockets = new Set<Socket>();
  /** Bytes written to connections that have closed. */
  #closedBytes = 0;
  readonly #hanging = new Set<ServerResponse>();

  private constructor(upstream: string, ca?: string) {
    this.#upstream = new URL(upstream);
    this.#ca = ca;
  }

  /**
   * A proxy forwarding to `upstream` (https:// or http:// base URL); `ca`: PEM the upstream's
   * certificate chains to; `port`: listen there (a stopped proxy started again on its port is a
   * registry that was down and is back at the same address), default any free port.
   */
  static async start(upstream: string, ca?: string, port = 0): Promise<OciFaultProxy> {
    const p = new OciFaultProxy(upstream, ca);
    const server = createServer((req, res) => p.#handle(req, res));
    server.on('connection', (s) => {
      p.#sockets.add(s);
      s.on('close', () => {
        p.#closedBytes += s.bytesWritten;
        p.#sockets.delete(s);
      });
    });
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    const addr = server.address();
    p.#server = server;
    p.host = `127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
    p.url = `http://${p.host}`;
    return p;
  }

  get fault(): OciFault {
    return this.#fault;
  }

  /** Requests held by `hang` or `stall` right now. */
  get hanging(): number {
    return this.#hanging.size;
  }

  /** Switches the fault; hanging requests are released (their connections closed). */
  set(fault: OciFault, opts: OciFaultOptions = {}): void {
    this.#fault = fault;
    this.#opts = opts;
    this.#left = opts.times ?? Number.POSITIVE_INFINITY;
    this.#releaseHanging();
  }

  /** Logged requests that `keep` accepts. */
  requests(keep: (r: OciProxyRequest) => boolean = () => true): OciProxyRequest[] {
    return this.log.filter(keep);
  }

  /** Every byte sent to clients so far (status lines, headers, framing and bodies). */
  get wireBytes(): number {
    let sum = this.#closedBytes;
    for (const s of this.#sockets) sum += s.bytesWritten;
    return sum;
  }

  /** Response body bytes sent for the logged requests `keep` accepts. */
  bytes(keep: (r: OciProxyRequest) => boolean = () => true): number {
    return this.requests(keep).reduce((sum, r) => sum + r.bytes, 0);
  }

  async stop(): Promise<void> {
    this.#releaseHanging();
    const server = this.#server;
    this.#server = undefined;
    for (const s of this.#sockets) s.destroy();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  #releaseHanging(): void {
    for (const res of this.#hanging) res.destroy();
    this.#hanging.clear();
  }

  /** The fault for this request, counting it against `times`. */
  #faultFor(method: string, path: string): OciFault {
    if (this.#fault === 'pass' || this.#left <= 0) return 'pass';
    if (this.#opts.match && !this.#opts.match({ method, path })) return 'pass';
    if (this.#fault === 'corrupt-blob' && !(method === 'GET' && blobGet.test(path.split('?')[0] ?? '')))
      return 'pass';
    this.#left--;
    return this.#fault;
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    const method = req.method ?? '';
    const path = req.url ?? '/';
    const fault = this.#faultFor(method, path);
    const entry: OciProxyRequest = { at: Date.now(), method, path, status: 0, bytes: 0, fault };
    countBodyBytes(res, entry);
    res.on('close', () => {
      entry.status = res.headersSent ? res.statusCode : 0;
      this.log.push(entry);
    });
    if (fault === 'hang') {
      req.resume();
      this.#hanging.add(res);
      return;
    }
    const errorAnswer: Partial<Record<OciFault, [number, Record<string, string>, string]>> = {
      'rate-limit': [429, { 'retry-after': String(this.#opts.retryAfterSeconds ?? 1) }, 'TOOMANYREQUESTS'],
      unavailable: [503, {}, 'UNAVAILABLE'],
      unauthorized: [401, { 'www-authenticate': 'Basic realm="oci-fault-proxy"' }, 'UNAUTHORIZED'],
    };
    const answer = errorAnswer[fault];
    if (answer) {
      req.resume();
      const [status, headers, code] = answer;
      res.writeHead(status, { 'content-type': 'application/json', ...headers });
      res.end(JSON.stringify({ errors: [{ code, message: `injected by the fault proxy (${fault})` }] }));
      return;
    }
    this.#forward(req, res, fault);
  }

  #forward(req: IncomingMessage, res: ServerResponse, fault: OciFault): void {
    const tls = this.#upstream.protocol === 'https:';
    const upstream = (tls ? httpsRequest : httpRequest)(
      {
        host: this.#upstream.hostname,
        port: this.#upstream.port,
        method: req.method,
        path: req.url,
        ...(tls && this.#ca ? { ca: this.#ca } : {}),
        // The registry builds absolute URLs (upload Location) from Host and X-Forwarded-Proto:
        // they must name the proxy, or the client would bypass it mid-upload.
        headers: { ...req.headers, host: this.host, 'x-forwarded-proto': 'http' },
      },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.on('error', () => res.destroy());
        if (fault === 'stall') {
          res.flushHeaders();
          this.#hanging.add(res);
          up.once('data', (chunk: Buffer) => {
            res.write(chunk.subarray(0, Math.max(1, Math.floor(chunk.length / 2))));
            up.destroy();
          });
          return;
        }
        if (fault !== 'corrupt-blob' || up.statusCode !== 200) {
          up.pipe(res);
          return;
        }
        up.once('data', (chunk: Buffer) => {
          const copy = Buffer.from(chunk);
          if (copy.length > 0) copy[0] = (copy[0] ?? 0) ^ 0xff;
          res.write(copy);
          up.pipe(res);
        });
      },
    );
    upstream.on('error', () => res.destroy());
    // A client cut off mid-request leaves the upstream request without the rest of its body: the
    // registry would wait for it for ever, and the open socket would keep the test process alive.
    res.on('close', () => upstream.destroy());
    req.pipe(upstream);
  }
}
