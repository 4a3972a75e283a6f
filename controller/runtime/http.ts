// A tiny HTTP server for /metrics, /healthz and /readyz (no framework needed).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface HttpResponse {
  status: number;
  contentType?: string;
  body: string;
}

export type Route = () => Promise<HttpResponse> | HttpResponse;

export interface HttpServer {
  readonly port: number;
  readonly url: string;
  close(): Promise<void>;
}

/** Parses ":8080", "8080", "127.0.0.1:0", "[::1]:9000" into host and port. */
export function parseAddr(addr: string): { host: string; port: number } {
  const a = addr.trim();
  let host = '';
  let port = a;
  const v6 = /^\[([^\]]+)\]:(\d+)$/.exec(a);
  if (v6) {
    host = v6[1] ?? '';
    port = v6[2] ?? '';
  } else if (a.includes(':')) {
    const i = a.lastIndexOf(':');
    host = a.slice(0, i);
    port = a.slice(i + 1);
  }
  if (!/^\d+$/.test(port) || Number(port) > 65535) {
    throw new Error(`invalid listen address ${JSON.stringify(addr)} (want host:port or :port)`);
  }
  return { host: host || '0.0.0.0', port: Number(port) };
}

/** Listens on host:port; the port bound (for port 0) and a host to show in URLs. */
export async function listen(
  server: Pick<Server, 'once' | 'off' | 'listen' | 'address'>,
  host: string,
  port: number,
): Promise<{ port: number; shownHost: string }> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const shownHost = host === '0.0.0.0' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
  return { port: (server.address() as AddressInfo).port, shownHost };
}

export async function serveHttp(addr: string, routes: Record<string, Route>): Promise<HttpServer> {
  const { host, port } = parseAddr(addr);
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const route = routes[path];
    if (!route || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    Promise.resolve()
      .then(route)
      .then(
        (r) => {
          res.writeHead(r.status, { 'content-type': r.contentType ?? 'text/plain; charset=utf-8' });
          res.end(req.method === 'HEAD' ? undefined : r.body);
        },
        (err: unknown) => {
          res.writeHead(500, { 'content-type': 'text/plain' });
          res.end(`${err instanceof Error ? err.message : String(err)}\n`);
        },
      );
  });
  server.keepAliveTimeout = 5_000;
  const { port: actual, shownHost } = await listen(server, host, port);
  return {
    port: actual,
    url: `http://${shownHost}:${actual}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}
