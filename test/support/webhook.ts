// Raw HTTP requests to the push webhook, as a hostile sender writes them: headers that promise a
// body, then only part of it (or none), so a test can see what the server does before the body.
import { connect, type Socket } from 'node:net';
import { connect as connectTls } from 'node:tls';
import {
  serveWebhook,
  WEBHOOK_PATH,
  type WebhookLimits,
  type WebhookServer,
} from '../../controller/sources/webhook.ts';

export interface RawAnswer {
  /** The status code, or 0 when the connection closed without an answer. */
  status: number;
  body: string;
  /** Resolves when the server closed the connection. */
  closed: Promise<void>;
  socket: Socket;
}

/**
 * Sends `headers` for POST `path` and `body` (possibly less than the Content-Length it declares),
 * and resolves with the server's answer once it came (the connection is left open, so a stalled
 * request stays stalled). `guardMs` only stops a hang: a server that never answers resolves 0.
 * An https `url` is reached over TLS trusting `ca`.
 */
export function rawRequest(
  url: string,
  path: string,
  headers: Record<string, string>,
  body: Buffer | string = '',
  guardMs = 30_000,
  ca?: string | Buffer,
): Promise<RawAnswer> {
  const { hostname, port, protocol } = new URL(url);
  const socket =
    protocol === 'https:'
      ? connectTls({ port: Number(port), host: hostname, servername: 'localhost', ...(ca ? { ca } : {}) })
      : connect(Number(port), hostname);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.on('error', () => undefined);
  const head = [
    `${headers[':method'] ?? 'POST'} ${path} HTTP/1.1`,
    `host: ${hostname}:${port}`,
    ...Object.entries(headers)
      .filter(([k]) => !k.startsWith(':'))
      .map(([k, v]) => `${k}: ${v}`),
  ];
  socket.write(`${head.join('\r\n')}\r\n\r\n`);
  if (body.length > 0) socket.write(body);
  return new Promise((resolve) => {
    let text = '';
    const done = (status: number, rest: string) => {
      clearTimeout(guard);
      socket.removeAllListeners('data');
      resolve({ status, body: rest, closed, socket });
    };
    const guard = setTimeout(() => done(0, ''), guardMs);
    socket.on('data', (c: Buffer) => {
      text += c.toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      // The server's answers are one JSON line.
      if (end >= 0 && text.indexOf('\n', end + 4) >= 0)
        done(Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), text.slice(end + 4).trim());
    });
    socket.once('close', () => done(Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), text));
  });
}

/** Headers of a request that claims a GitHub signature (unverifiable until the whole body is read). */
export function unverifiedHeaders(contentLength: number): Record<string, string> {
  return {
    'content-type': 'application/json',
    'content-length': String(contentLength),
    'x-hub-signature-256': `sha256=${'0'.repeat(64)}`,
  };
}

/**
 * Starts a webhook server (secret SECRET_FOR_TESTS, these limits), lets `send` post raw requests
 * to it and returns the last answer as a corpus outcome: reason "HTTP <status>", message its body.
 * Every connection is closed afterwards.
 */
export async function webhookOutcome(
  limits: Partial<WebhookLimits>,
  send: (
    post: (headers: Record<string, string>, body?: Buffer | string) => Promise<RawAnswer>,
    server: WebhookServer,
  ) => Promise<RawAnswer>,
): Promise<{ reason: string; message: string }> {
  const server = await serveWebhook('127.0.0.1:0', { secret: SECRET_FOR_TESTS, trigger: () => 0, limits });
  const sockets: Socket[] = [];
  try {
    const answer = await send(async (headers, body) => {
      const a = await rawRequest(server.url, WEBHOOK_PATH, headers, body);
      sockets.push(a.socket);
      return a;
    }, server);
    return { reason: `HTTP ${answer.status}`, message: answer.body };
  } finally {
    for (const s of sockets) s.destroy();
    await server.close();
  }
}

export const SECRET_FOR_TESTS = 'webhook-test-secret';

/** Resolves once the server reads `n` requests at once (polls its stats). */
export async function untilInFlight(server: WebhookServer, n: number): Promise<void> {
  while (server.stats().inFlight < n) await new Promise((resolve) => setTimeout(resolve, 10));
}
