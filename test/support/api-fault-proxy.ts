// A fault-injecting HTTP proxy in front of the real kube-apiserver of hack/testenv: clients talk
// plain HTTP to it (a kubeconfig of its own), it forwards every request over HTTPS unchanged
// (watches streamed) unless its policy answers it itself, e.g. 429 Too Many Requests with a
// Retry-After, as API priority and fairness does. Every request is logged with the proxy's own
// receive time, so a test can check from the server's side when a client came back.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { Agent, request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';

/** One request as the proxy saw it. */
export interface ProxyEntry {
  /** Receive time (ms since the epoch, monotonic within the test process). */
  at: number;
  method: string;
  path: string;
  /** The object's name: metadata.name of a body, else the last path segment. */
  name: string;
  /** How many requests with the same method, path and name came before this one. */
  attempt: number;
  /** The status answered (0 when the upstream connection failed). */
  status: number;
  /** Retry-After seconds when the proxy refused the request itself. */
  retryAfter?: number;
}

/** Decides per request: a number refuses it with 429 and Retry-After of that many seconds. */
export type FaultPolicy = (r: {
  method: string;
  path: string;
  name: string;
  attempt: number;
}) => number | undefined;

interface KubeconfigDoc {
  clusters: Array<{ name: string; cluster: Record<string, unknown> }>;
  [k: string]: unknown;
}

const now = (): number => performance.timeOrigin + performance.now();

export class FaultProxy {
  readonly log: ProxyEntry[] = [];
  /** A kubeconfig with the original's user and the proxy as server. */
  kubeconfig = '';
  url = '';
  private server: Server | undefined;
  private readonly attempts = new Map<string, number>();
  private readonly agent = new Agent({ keepAlive: true, maxSockets: 100 });

  private readonly upstream: URL;
  private readonly ca: string | undefined;
  private readonly policy: FaultPolicy;

  private constructor(upstream: URL, ca: string | undefined, policy: FaultPolicy) {
    this.upstream = upstream;
    this.ca = ca;
    this.policy = policy;
  }

  /** Starts a proxy for the API server of kubeconfig file `kubeconfig`. */
  static async start(kubeconfig: string, policy: FaultPolicy): Promise<FaultProxy> {
    const doc = parse(readFileSync(kubeconfig, 'utf8')) as KubeconfigDoc;
    const cluster = doc.clusters[0]?.cluster ?? {};
    const caData = cluster['certificate-authority-data'];
    const caFile = cluster['certificate-authority'];
    const ca =
      typeof caData === 'string'
        ? Buffer.from(caData, 'base64').toString('utf8')
        : typeof caFile === 'string'
          ? readFileSync(caFile, 'utf8')
          : undefined;
    const proxy = new FaultProxy(new URL(String(cluster.server)), ca, policy);
    const server = createServer((req, res) => void proxy.handle(req, res));
    proxy.server = server;
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const addr = server.address();
    proxy.url = `http://127.0.0.1:${typeof addr === 'object' && addr !== null ? addr.port : 0}`;
    // Plain HTTP: client-node insists on skip-TLS-verify for an http:// server (there is no TLS).
    for (const c of doc.clusters) c.cluster = { server: proxy.url, 'insecure-skip-tls-verify': true };
    proxy.kubeconfig = join(mkdtempSync(join(tmpdir(), 'stackflux-fault-proxy-')), 'kubeconfig');
    writeFileSync(proxy.kubeconfig, stringify(doc));
    return proxy;
  }

  /** The log entries the proxy refused itself. */
  refused(): ProxyEntry[] {
    return this.log.filter((e) => e.retryAfter !== undefined);
  }

  async close(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((r) => this.server?.close(r));
    this.agent.destroy();
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const at = now();
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    const method = req.method ?? 'GET';
    const path = req.url ?? '/';
    const name = nameOf(path, body);
    const key = `${method} ${path.split('?')[0]} ${name}`;
    const attempt = this.attempts.get(key) ?? 0;
    this.attempts.set(key, attempt + 1);
    const entry: ProxyEntry = { at, method, path, name, attempt, status: 0 };
    this.log.push(entry);
    const retryAfter = this.policy({ method, path, name, attempt });
    if (retryAfter !== undefined) {
      entry.status = 429;
      entry.retryAfter = retryAfter;
      res.writeHead(429, { 'content-type': 'application/json', 'retry-after': String(retryAfter) });
      res.end(
        JSON.stringify({
          kind: 'Status',
          apiVersion: 'v1',
          status: 'Failure',
          reason: 'TooManyRequests',
          message: 'the fault proxy says: too many requests, please try again later',
          code: 429,
        }),
      );
      return;
    }
    const headers = { ...req.headers, host: this.upstream.host };
    const up = request(
      new URL(path, this.upstream),
      { method, headers, agent: this.agent, ...(this.ca !== undefined ? { ca: this.ca } : {}) },
      (upRes) => {
        entry.status = upRes.statusCode ?? 0;
        res.writeHead(upRes.statusCode ?? 502, upRes.headers);
        upRes.pipe(res);
        res.on('close', () => upRes.destroy());
      },
    );
    up.on('error', () => {
      if (!res.headersSent) res.writeHead(502);
      res.destroy();
    });
    up.end(body);
  }
}

function nameOf(path: string, body: Buffer): string {
  if (body.length > 0) {
    try {
      const name = (JSON.parse(body.toString('utf8')) as { metadata?: { name?: unknown } }).metadata?.name;
      if (typeof name === 'string') return name;
    } catch {}
  }
  return (
    (path.split('?')[0] ?? '')
      .split('/')
      .filter((p) => p !== '')
      .at(-1) ?? ''
  );
}
