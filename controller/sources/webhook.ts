// Push webhook: POST /hooks/push re-lists the pushed repository at once, so a tag push starts a
// rollout in about a second instead of one poll interval.
//
// Two ways to authenticate, both with the one webhook secret:
//  - GitHub style: X-Hub-Signature-256: sha256=<HMAC-SHA256 of the raw body with the secret>;
//    the repository is the payload's repository.{clone_url,html_url,ssh_url,git_url,url}.
//  - Generic: Authorization: Bearer <secret> and a JSON body {"url": "<repository url>"}.
//  - Registry push notifications (CNCF Distribution's envelope, media type
//    application/vnd.docker.distribution.events.v1+json): a registry cannot sign, it sends the
//    static headers it is configured with, so it authenticates like the generic sender
//    (Authorization: Bearer <secret> in its endpoint's `headers`). A manifest push to repository R
//    re-lists every OCI source naming R, on whatever host (the registry's Host need not be ours).
// Comparisons are constant-time. A request that fails authentication changes nothing (401).
//
// Replay protection (signed requests): a delivery id (X-GitHub-Delivery, X-Gitea-Delivery,
// X-Gogs-Delivery) or a signature seen within REPLAY_WINDOW_MS is answered 409 and triggers
// nothing, so a captured request cannot be sent again to make the controller re-list. (GitHub
// payloads carry no signed timestamp: after the window a replay costs one extra listing. A bearer
// request carries the secret itself, so there is nothing to replay that the sender cannot forge.)
// Limits (WebhookLimits, enforced by runtime/bodyserver.ts): what the headers alone decide is
// answered before any body byte is read (no or a malformed signature, a wrong bearer token, not
// JSON, Content-Length over maxBody); a body is only held while the request fits the in-flight cap
// and the byte budget (503 otherwise), and must arrive within bodyTimeoutMs (408).
import { createHmac, timingSafeEqual } from 'node:crypto';
import {
  admitLength,
  type BodyServer,
  type BodyServerLimits,
  type BodyServerStats,
  headerValue,
  isJsonContentType,
  serveBodies,
} from '../runtime/bodyserver.ts';
import type { Logger } from '../runtime/logging.ts';

export const WEBHOOK_PATH = '/hooks/push';
/** Largest accepted body (GitHub caps webhook payloads at 25 MB; a push of tags is a few kB). */
export const MAX_BODY = 1 << 20;
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
  /** Re-lists the OCI sources of these repositories now (registry notifications); returns how many matched. */
  triggerOciRepositories?: (pushes: RegistryPush[]) => number;
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

const header = headerValue;

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

/** Manifest media types a registry notification names for a pushed release (not its blobs). */
const MANIFEST_TYPES = new Set([
  'application/vnd.oci.image.manifest.v1+json',
  'application/vnd.oci.image.index.v1+json',
  'application/vnd.docker.distribution.manifest.v2+json',
  'application/vnd.docker.distribution.manifest.list.v2+json',
]);
const MAX_NOTIFIED_EVENTS = 1000;

export interface RegistryPush {
  repository: string;
  /** The tag pushed, when the manifest was pushed by tag. */
  tag?: string;
}

/**
 * The manifest pushes of a Distribution notification envelope
 * (`{"events":[{"action":"push","target":{"repository","mediaType","tag",…}}]}`); undefined when
 * the payload is no envelope. Pulls, deletes and blob pushes trigger nothing.
 */
export function registryPushes(payload: unknown): RegistryPush[] | undefined {
  const events = (payload as { events?: unknown } | null)?.events;
  if (!Array.isArray(events)) return undefined;
  const pushes = new Map<string, RegistryPush>();
  for (const e of events.slice(0, MAX_NOTIFIED_EVENTS)) {
    const event = (e ?? {}) as { action?: unknown; target?: Record<string, unknown> };
    const target = event.target ?? {};
    if (event.action !== 'push' || typeof target.repository !== 'string') continue;
    if (typeof target.mediaType === 'string' && !MANIFEST_TYPES.has(target.mediaType)) continue;
    const tag = typeof target.tag === 'string' && target.tag !== '' ? target.tag : undefined;
    pushes.set(JSON.stringify([target.repository, tag]), {
      repository: target.repository,
      ...(tag !== undefined ? { tag } : {}),
    });
  }
  return [...pushes.values()];
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
  const pushed = registryPushes(payload);
  if (pushed !== undefined) {
    const matched = pushed.length > 0 ? (opts.triggerOciRepositories?.(pushed) ?? 0) : 0;
    return { status: 202, body: { ok: true, sources: matched } };
  }
  const urls = repositoryUrls(payload);
  if (urls.length === 0) return { status: 400, body: { error: 'no repository URL in the payload' } };
  const matched = opts.trigger(urls);
  return { status: 202, body: { ok: true, sources: matched } };
}

/** Limits of the webhook server (none of them is reached by a sender that behaves). */
export type WebhookLimits = BodyServerLimits;

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
  if (!isJsonContentType(header(req, 'content-type')))
    return refuse(415, 'content-type must be application/json');
  const admitted = admitLength(req, maxBody, authenticated);
  return admitted.admit ? { admit: true, authenticated, reserve: admitted.reserve } : admitted;
}

export type WebhookStats = BodyServerStats;

export type WebhookServer = Omit<BodyServer, 'setSecureContext'>;

export async function serveWebhook(addr: string, opts: WebhookOptions): Promise<WebhookServer> {
  const limits: WebhookLimits = { ...DEFAULT_WEBHOOK_LIMITS, ...opts.limits };
  const options: WebhookOptions = { ...opts, replayGuard: opts.replayGuard ?? new ReplayGuard() };
  return serveBodies(addr, {
    name: 'webhook',
    limits,
    screen: (head) => {
      const screened = screenWebhook(head, opts.secret, limits.maxBody);
      return screened.admit
        ? { admit: true, trusted: screened.authenticated, reserve: screened.reserve }
        : screened;
    },
    handle: (req) => handleWebhook(req, options),
    busyMessage: 'too many webhook requests in flight; retry later',
    untrustedShare: UNVERIFIED_SHARE,
    logAtInfo: (status) => status < 400 || status === 409,
    logFields: (req, out) => ({ event: req.headers['x-github-event'], sources: out.body.sources }),
    ...(opts.logger !== undefined ? { logger: opts.logger } : {}),
  });
}
