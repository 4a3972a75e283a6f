// Push webhook: POST /hooks/push re-lists the pushed repository at once, so a tag push starts a
// rollout in about a second instead of one poll interval.
//
// Two ways to authenticate, both with the one webhook secret:
//  - GitHub style: X-Hub-Signature-256: sha256=<HMAC-SHA256 of the raw body with the secret>;
//    the repository is the payload's repository.{clone_url,html_url,ssh_url,git_url,url}.
//  - Generic: Authorization: Bearer <secret> and a JSON body {"url": "<repository url>"}.
// Comparisons are constant-time. A request that fails authentication changes nothing (401).
//
// Replay protection (signed requests): a delivery id (X-GitHub-Delivery, X-Gitea-Delivery,
// X-Gogs-Delivery) or a signature seen within REPLAY_WINDOW_MS is answered 409 and triggers
// nothing, so a captured request cannot be sent again to make the controller re-list. (GitHub
// payloads carry no signed timestamp: after the window a replay costs one extra listing. A bearer
// request carries the secret itself, so there is nothing to replay that the sender cannot forge.)
// Limits (WebhookLimits): what the headers alone decide is answered before any body byte is read
// (no or a malformed signature, a wrong bearer token, not JSON, Content-Length over maxBody); the
// rest of such a body is read and dropped up to MAX_DRAIN, so the client gets the answer instead
// of a reset connection. A body is only held while the request fits the in-flight cap and the
// byte budget (503 otherwise), and must arrive within bodyTimeoutMs (408, connection closed).
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseAddr } from '../runtime/http.ts';
import { type Logger, silentLogger } from '../runtime/logging.ts';

export const WEBHOOK_PATH = '/hooks/push';
/** Largest accepted body (GitHub caps webhook payloads at 25 MB; a push of tags is a few kB). */
export const MAX_BODY = 1 << 20;
/** An oversized body is still read (and discarded) up to this, so the 413 reaches the client. */
const MAX_DRAIN = 16 << 20;
/** How long a delivery id or signature is remembered for replay protection. */
export const REPLAY_WINDOW_MS = 10 * 60_000;
const MAX_REMEMBERED = 10_000;

/** Remembers delivery ids and signatures for a window; bounded (the oldest go first). */
export class ReplayGuard {
  private readonly seen = new Map<string, number>();
  private readonly windowMs: number;
  private readonly now: () => number;

  constructor(o: { windowMs?: number; now?: () => number } = {}) {
    this.windowMs = o.windowMs ?? REPLAY_WINDOW_MS;
    this.now = o.now ?? Date.now;
  }

  /** True if any key was seen within the window; otherwise records them all and returns false. */
  replayed(keys: readonly string[]): boolean {
    const now = this.now();
    for (const [k, at] of this.seen) {
      if (now - at < this.windowMs) break; // insertion order = time order
      this.seen.delete(k);
    }
    if (keys.some((k) => this.seen.has(k))) return true;
    for (const k of keys) {
      if (this.seen.size >= MAX_REMEMBERED) {
        const oldest = this.seen.keys().next().value;
        if (oldest !== undefined) this.seen.delete(oldest);
      }
      this.seen.set(k, now);
    }
    return false;
  }
}

export interface WebhookRequest {
  method: string;
  path: string;
  headers: Readonly<Record<string, string | string[] | undefined>>;
  body: Buffer;
}

export interface WebhookResponse {
  status: number;
  body: Record<string, unknown>;
}

export interface WebhookOptions {
  /** The shared secret; empty → every request is refused (the endpoint is unconfigured). */
  secret: string;
  /** Re-lists the sources with these URLs now; returns how many matched. */
  trigger: (urls: string[]) => number;
  logger?: Logger;
  /** Replay protection for signed requests (serveWebhook creates one when not given). */
  replayGuard?: ReplayGuard;
  /** Limits of serveWebhook (DEFAULT_WEBHOOK_LIMITS where not given). */
  limits?: Partial<WebhookLimits>;
}

/** "sha256=<hex>" for body under secret. */
export function signBody(secret: string, body: Buffer | string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

function constantTimeEqual(a: string, b: string): boolean {
  const ab = Buffer.from(a, 'utf8');
  const bb = Buffer.from(b, 'utf8');
  // Compare equal-length buffers always, so the length of the expected value does not leak via timing.
  const len = Math.max(ab.length, bb.length, 1);
  const pa = Buffer.alloc(len);
  const pb = Buffer.alloc(len);
  ab.copy(pa);
  bb.copy(pb);
  return timingSafeEqual(pa, pb) && ab.length === bb.length;
}

/** Verifies a GitHub X-Hub-Signature-256 header over the raw body. */
export function verifySignature(secret: string, body: Buffer, header: string | undefined): boolean {
  if (secret === '' || header === undefined) return false;
  return constantTimeEqual(signBody(secret, body), header.trim());
}

function header(req: Pick<WebhookRequest, 'headers'>, name: string): string | undefined {
  const v = req.headers[name.toLowerCase()];
  return Array.isArray(v) ? v[0] : v;
}

function repositoryUrls(payload: unknown): string[] {
  if (typeof payload !== 'object' || payload === null) return [];
  const p = payload as Record<string, unknown>;
  const urls: string[] = [];
  if (typeof p.url === 'string') urls.push(p.url);
  const repo = p.repository;
  if (typeof repo === 'object' && repo !== null) {
    const r = repo as Record<string, unknown>;
    for (const k of ['clone_url', 'html_url', 'ssh_url', 'git_url', 'url', 'git_http_url', 'git_ssh_url']) {
      const v = r[k];
      if (typeof v === 'string' && v !== '') urls.push(v);
    }
  }
  return [...new Set(urls)];
}

/** Handles one request (pure apart from calling trigger). */
export function handleWebhook(req: WebhookRequest, opts: WebhookOptions): WebhookResponse {
  if (req.path !== WEBHOOK_PATH) return { status: 404, body: { error: 'not found' } };
  if (req.method !== 'POST') return { status: 405, body: { error: 'use POST' } };
  const signature = header(req, 'x-hub-signature-256');
  const authorization = header(req, 'authorization');
  let authenticated = false;
  if (signature !== undefined) {
    authenticated = verifySignature(opts.secret, req.body, signature);
  } else if (authorization !== undefined && /^Bearer\s+/i.test(authorization)) {
    authenticated =
      opts.secret !== '' && constantTimeEqual(authorization.replace(/^Bearer\s+/i, '').trim(), opts.secret);
  }
  if (!authenticated) return { status: 401, body: { error: 'invalid signature or token' } };
  if (signature !== undefined && opts.replayGuard !== undefined) {
    const delivery = ['x-github-delivery', 'x-gitea-delivery', 'x-gogs-delivery']
      .map((h) => header(req, h))
      .find((v) => v !== undefined && v !== '');
    const keys = [
      `signature:${signature.trim()}`,
      ...(delivery !== undefined ? [`delivery:${delivery}`] : []),
    ];
    if (opts.replayGuard.replayed(keys)) {
      return { status: 409, body: { error: 'replayed delivery: this delivery was already processed' } };
    }
  }

  const event = header(req, 'x-github-event');
  if (event === 'ping') return { status: 200, body: { ok: true, event: 'ping' } };
  let payload: unknown;
  try {
    payload = JSON.parse(req.body.toString('utf8'));
  } catch {
    return { status: 400, body: { error: 'body is not JSON' } };
  }
  const urls = repositoryUrls(payload);
  if (urls.length === 0) return { status: 400, body: { error: 'no repository URL in the payload' } };
  const matched = opts.trigger(urls);
  return { status: 202, body: { ok: true, sources: matched } };
}

/** Limits of the webhook server (none of them is reached by a sender that behaves). */
export interface WebhookLimits {
  /** Largest accepted body in bytes (a larger Content-Length is answered 413 unread). */
  maxBody: number;
  /** Bytes held across all requests being read; each reserves its Content-Length (else maxBody). */
  bodyBudget: number;
  /** Requests whose body is being read at once. */
  maxInFlight: number;
  /** Open connections; Node drops connections beyond it at once. */
  maxConnections: number;
  /** A body must have arrived this long after its headers, or the request is answered 408 and closed. */
  bodyTimeoutMs: number;
  /** The headers must have arrived within this (Node's headersTimeout). */
  headersTimeoutMs: number;
}

export const DEFAULT_WEBHOOK_LIMITS: Readonly<WebhookLimits> = {
  maxBody: MAX_BODY,
  bodyBudget: 8 * MAX_BODY,
  maxInFlight: 64,
  maxConnections: 256,
  bodyTimeoutMs: 10_000,
  headersTimeoutMs: 10_000,
};

/**
 * The share of maxInFlight and bodyBudget a request may take while its sender is unknown (a
 * signature is only checked over the whole body); the rest stays free for requests whose bearer
 * token the headers already proved, so a flood of unsigned bodies cannot shut out a real sender.
 */
const UNVERIFIED_SHARE = 0.75;

const SIGNATURE_SHAPE = /^sha256=[0-9a-f]{64}$/i;

export type WebhookAdmission =
  | { admit: false; response: WebhookResponse }
  | { admit: true; authenticated: boolean; reserve: number };

function isJson(contentType: string | undefined): boolean {
  const type = (contentType ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  return type === 'application/json' || /^application\/[a-z0-9.+-]+\+json$/.test(type);
}

/**
 * What the method, path and headers alone decide, before any body byte is read: wrong path or
 * method, no or a malformed signature, a wrong bearer token, a body that is not JSON or declared
 * larger than maxBody. An admitted request reserves its declared length (maxBody when chunked).
 */
export function screenWebhook(
  req: Omit<WebhookRequest, 'body'>,
  secret: string,
  maxBody: number = MAX_BODY,
): WebhookAdmission {
  const refuse = (status: number, error: string): WebhookAdmission => ({
    admit: false,
    response: { status, body: { error } },
  });
  if (req.path !== WEBHOOK_PATH) return refuse(404, 'not found');
  if (req.method !== 'POST') return refuse(405, 'use POST');
  const signature = header(req, 'x-hub-signature-256');
  const authorization = header(req, 'authorization');
  let authenticated = false;
  if (secret === '') return refuse(401, 'invalid signature or token');
  if (signature !== undefined) {
    if (!SIGNATURE_SHAPE.test(signature.trim())) return refuse(401, 'invalid signature or token');
  } else if (authorization !== undefined && /^Bearer\s+/i.test(authorization)) {
    if (!constantTimeEqual(authorization.replace(/^Bearer\s+/i, '').trim(), secret))
      return refuse(401, 'invalid signature or token');
    authenticated = true;
  } else return refuse(401, 'invalid signature or token');
  if (!isJson(header(req, 'content-type'))) return refuse(415, 'content-type must be application/json');
  const declared = header(req, 'content-length');
  const length = declared === undefined ? undefined : Number(declared);
  if (length !== undefined && !(length <= maxBody))
    return refuse(413, `body too large: at most ${maxBody} bytes`);
  return { admit: true, authenticated, reserve: length ?? maxBody };
}

export interface WebhookStats {
  /** Requests whose body is being read. */
  inFlight: number;
  /** Body bytes held in memory now. */
  bufferedBytes: number;
  /** Bytes reserved by the requests being read (bufferedBytes never exceeds it). */
  reservedBytes: number;
}

export interface WebhookServer {
  readonly url: string;
  readonly port: number;
  /** What the server holds now (for tests and debugging). */
  stats(): WebhookStats;
  close(): Promise<void>;
}

export async function serveWebhook(addr: string, opts: WebhookOptions): Promise<WebhookServer> {
  const log = (opts.logger ?? silentLogger()).child({ component: 'webhook' });
  const { host, port } = parseAddr(addr);
  const limits: WebhookLimits = { ...DEFAULT_WEBHOOK_LIMITS, ...opts.limits };
  const options: WebhookOptions = { ...opts, replayGuard: opts.replayGuard ?? new ReplayGuard() };
  const tooLargeBody = { error: `body too large: at most ${limits.maxBody} bytes` };
  const held = { inFlight: 0, bufferedBytes: 0, reservedBytes: 0 };
  const server: Server = createServer(
    {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.bodyTimeoutMs + limits.headersTimeoutMs,
    },
    (req, res) => {
      let answered = false;
      const answer = (out: WebhookResponse, close = false): void => {
        if (answered) return;
        answered = true;
        // Refusals at debug: anyone who reaches the port could otherwise flood the log.
        const level = out.status < 400 || out.status === 409 ? 'info' : 'debug';
        log[level](
          { status: out.status, event: req.headers['x-github-event'], sources: out.body.sources },
          'webhook request',
        );
        res
          .writeHead(out.status, {
            'content-type': 'application/json',
            ...(out.status === 503 ? { 'retry-after': '10' } : {}),
            ...(close ? { connection: 'close' } : {}),
          })
          .end(`${JSON.stringify(out.body)}\n`);
      };
      // A stalled body (slowloris) is answered and its connection closed at the deadline, whether
      // the request is read or only drained after an early answer.
      const deadline = setTimeout(() => {
        answer({ status: 408, body: { error: `body not received within ${limits.bodyTimeoutMs} ms` } }, true);
        req.destroy();
      }, limits.bodyTimeoutMs);
      deadline.unref();
      req.on('close', () => clearTimeout(deadline));
      req.on('error', () => undefined);

      /** Answers before reading the body; the rest is read and dropped (so the client sees the answer). */
      const refuseUnread = (out: WebhookResponse): void => {
        answer(out, true);
        let drained = 0;
        req.on('data', (c: Buffer) => {
          drained += c.length;
          if (drained > MAX_DRAIN) req.destroy();
        });
        req.on('end', () => clearTimeout(deadline));
      };

      const screened = screenWebhook(
        { method: req.method ?? 'GET', path: (req.url ?? '/').split('?')[0] ?? '/', headers: req.headers },
        opts.secret,
        limits.maxBody,
      );
      if (!screened.admit) return refuseUnread(screened.response);
      const share = screened.authenticated ? 1 : UNVERIFIED_SHARE;
      if (
        held.inFlight + 1 > limits.maxInFlight * share ||
        held.reservedBytes + screened.reserve > limits.bodyBudget * share
      )
        return refuseUnread({
          status: 503,
          body: { error: 'too many webhook requests in flight; retry later' },
        });

      held.inFlight += 1;
      held.reservedBytes += screened.reserve;
      const chunks: Buffer[] = [];
      let size = 0;
      let released = false;
      const release = (): void => {
        if (released) return;
        released = true;
        held.inFlight -= 1;
        held.reservedBytes -= screened.reserve;
        held.bufferedBytes -= size;
        chunks.length = 0;
      };
      req.on('close', release);
      req.on('data', (c: Buffer) => {
        if (released) return;
        if (size + c.length > screened.reserve) {
          // More than declared, or a chunked body over maxBody: stop holding it.
          release();
          answer({ status: 413, body: tooLargeBody }, true);
          res.once('finish', () => req.destroy());
          return;
        }
        size += c.length;
        held.bufferedBytes += c.length;
        chunks.push(c);
      });
      req.on('end', () => {
        clearTimeout(deadline);
        if (released) return;
        const body = Buffer.concat(chunks);
        release();
        let out: WebhookResponse;
        try {
          out = handleWebhook(
            {
              method: req.method ?? 'GET',
              path: (req.url ?? '/').split('?')[0] ?? '/',
              headers: req.headers,
              body,
            },
            options,
          );
        } catch (err) {
          out = { status: 500, body: { error: err instanceof Error ? err.message : String(err) } };
        }
        answer(out);
      });
    },
  );
  server.maxConnections = limits.maxConnections;
  // Expect: 100-continue: invite the body only when the headers admit it (else the answer comes
  // without the client having sent a byte of it).
  server.on('checkContinue', (req, res) => {
    const screened = screenWebhook(
      { method: req.method ?? 'GET', path: (req.url ?? '/').split('?')[0] ?? '/', headers: req.headers },
      opts.secret,
      limits.maxBody,
    );
    if (screened.admit) res.writeContinue();
    server.emit('request', req, res);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const actual = (server.address() as AddressInfo).port;
  const shownHost = host === '0.0.0.0' ? '127.0.0.1' : host;
  return {
    port: actual,
    url: `http://${shownHost}:${actual}`,
    stats: () => ({ ...held }),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
