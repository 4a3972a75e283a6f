// A hardened server for small JSON requests from senders the controller does not trust (the push
// webhook, Cluster API's runtime extension calls). What the method, path and headers alone decide
// is answered before any body byte is read (`screen`); the rest of such a body is read and dropped
// up to MAX_DRAIN, so the client gets the answer instead of a reset connection. A body is only held
// while the request fits the in-flight cap and the byte budget (503 otherwise), and must arrive
// within bodyTimeoutMs (408, connection closed). A request counts as in flight until it is answered,
// so a handler that waits (an API lookup) is bounded by the same cap. Over TLS when `tls` is given.
import {
  createServer as createHttpServer,
  type Server as HttpServer,
  type IncomingMessage,
  type ServerResponse,
} from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { SecureContextOptions } from 'node:tls';
import { listen, parseAddr } from './http.ts';
import { type Logger, silentLogger } from './logging.ts';

/** An oversized body is still read (and discarded) up to this, so the refusal reaches the client. */
export const MAX_DRAIN = 16 << 20;

export interface BodyRequestHead {
  method: string;
  /** The path without the query. */
  path: string;
  headers: Readonly<Record<string, string | string[] | undefined>>;
  /** The peer's address (for per-caller limits); undefined once the socket is gone. */
  remoteAddress?: string;
}

export interface BodyRequest extends BodyRequestHead {
  body: Buffer;
}

export interface BodyResponse {
  status: number;
  body: Record<string, unknown>;
}

/** Limits of a body server (none of them is reached by a sender that behaves). */
export interface BodyServerLimits {
  /** Largest accepted body in bytes (a larger Content-Length is answered 413 unread). */
  maxBody: number;
  /** Bytes held across all requests being read; each reserves its Content-Length (else maxBody). */
  bodyBudget: number;
  /** Requests read or handled at once. */
  maxInFlight: number;
  /** Open connections; Node drops connections beyond it at once. */
  maxConnections: number;
  /** A body must have arrived this long after its headers, or the request is answered 408 and closed. */
  bodyTimeoutMs: number;
  /** The headers (and a TLS handshake) must have arrived within this. */
  headersTimeoutMs: number;
}

export type BodyAdmission =
  | { admit: false; response: BodyResponse }
  /** `trusted`: the headers already proved the sender; others may use only `untrustedShare`. */
  | { admit: true; trusted: boolean; reserve: number };

export interface BodyServerOptions {
  /** Log component and the message of each request's log line. */
  name: string;
  limits: BodyServerLimits;
  /** What the head alone decides; an admitted request reserves `reserve` bytes of the budget. */
  screen: (head: BodyRequestHead) => BodyAdmission;
  handle: (req: BodyRequest) => BodyResponse | Promise<BodyResponse>;
  /** Answer of a request refused for the in-flight cap or the budget (503, Retry-After: 10). */
  busyMessage: string;
  /** Share of maxInFlight and bodyBudget an untrusted request may take (default 1). */
  untrustedShare?: number;
  /** Statuses logged at info (the rest at debug: anyone who reaches the port could flood the log). */
  logAtInfo?: (status: number) => boolean;
  /** Fields of the request's log line (never a secret). */
  logFields?: (req: IncomingMessage, out: BodyResponse) => Record<string, unknown>;
  logger?: Logger;
  /** Serve HTTPS with this certificate and key. */
  tls?: SecureContextOptions;
}

export interface BodyServerStats {
  /** Requests being read or handled. */
  inFlight: number;
  /** Body bytes held in memory now. */
  bufferedBytes: number;
  /** Bytes reserved by the requests being read (bufferedBytes never exceeds it). */
  reservedBytes: number;
}

export interface BodyServer {
  readonly url: string;
  readonly port: number;
  /** What the server holds now (for tests and debugging). */
  stats(): BodyServerStats;
  /** Replaces the TLS certificate for new connections (a rotated Secret); HTTPS servers only. */
  setSecureContext(tls: SecureContextOptions): void;
  close(): Promise<void>;
}

/** The first value of a header (Node joins most repeated headers, keeps arrays for some). */
export function headerValue(head: Pick<BodyRequestHead, 'headers'>, name: string): string | undefined {
  const v = head.headers[name.toLowerCase()];
  return Array.isArray(v) ? v[0] : v;
}

/** application/json or application/<x>+json (parameters ignored). */
export function isJsonContentType(contentType: string | undefined): boolean {
  const type = (contentType ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  return type === 'application/json' || /^application\/[a-z0-9.+-]+\+json$/.test(type);
}

/** An admitted request's reservation from its Content-Length (413 when over maxBody). */
export function admitLength(
  head: Pick<BodyRequestHead, 'headers'>,
  maxBody: number,
  trusted: boolean,
): BodyAdmission {
  const declared = headerValue(head, 'content-length');
  const length = declared === undefined ? undefined : Number(declared);
  if (length !== undefined && !(length <= maxBody))
    return {
      admit: false,
      response: { status: 413, body: { error: `body too large: at most ${maxBody} bytes` } },
    };
  return { admit: true, trusted, reserve: length ?? maxBody };
}

function headOf(req: IncomingMessage): BodyRequestHead {
  const remoteAddress = req.socket.remoteAddress;
  return {
    method: req.method ?? 'GET',
    path: (req.url ?? '/').split('?')[0] ?? '/',
    headers: req.headers,
    ...(remoteAddress !== undefined ? { remoteAddress } : {}),
  };
}

export async function serveBodies(addr: string, opts: BodyServerOptions): Promise<BodyServer> {
  const log = (opts.logger ?? silentLogger()).child({ component: opts.name });
  const { host, port } = parseAddr(addr);
  const { limits } = opts;
  const state: ServerState = {
    opts,
    log,
    limits,
    untrustedShare: opts.untrustedShare ?? 1,
    logAtInfo: opts.logAtInfo ?? ((status: number) => status < 400),
    tooLargeBody: { error: `body too large: at most ${limits.maxBody} bytes` },
    held: { inFlight: 0, bufferedBytes: 0, reservedBytes: 0 },
  };
  const server = createServer(state, (req, res) => onRequest(state, req, res));
  const { port: actual, shownHost } = await listen(server, host, port);
  return {
    port: actual,
    url: `${opts.tls === undefined ? 'http' : 'https'}://${shownHost}:${actual}`,
    stats: () => ({ ...state.held }),
    setSecureContext: (tls) => {
      if (!('setSecureContext' in server)) throw new Error(`${opts.name} serves plain HTTP`);
      server.setSecureContext(tls);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** What the requests of one server share: its options and what they hold together. */
interface ServerState {
  opts: BodyServerOptions;
  log: Logger;
  limits: BodyServerLimits;
  untrustedShare: number;
  logAtInfo: (status: number) => boolean;
  tooLargeBody: { error: string };
  held: BodyServerStats;
}

type Answer = (out: BodyResponse, close?: boolean) => void;

/** An HTTP or HTTPS server with the limits' timeouts and connection cap, serving `onRequest`. */
function createServer(
  state: ServerState,
  onRequest: (req: IncomingMessage, res: ServerResponse) => void,
): HttpServer | HttpsServer {
  const { opts, limits, log } = state;
  const serverOptions = {
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.bodyTimeoutMs + limits.headersTimeoutMs,
  };
  const server =
    opts.tls === undefined
      ? createHttpServer(serverOptions, onRequest)
      : createHttpsServer(
          { ...serverOptions, ...opts.tls, handshakeTimeout: limits.headersTimeoutMs },
          onRequest,
        );
  server.maxConnections = limits.maxConnections;
  // Expect: 100-continue: invite the body only when the headers admit it (else the answer comes
  // without the client having sent a byte of it).
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    if (opts.screen(headOf(req)).admit) res.writeContinue();
    server.emit('request', req, res);
  });
  // A failed handshake (no TLS, a client refusing the certificate) only closes that connection.
  server.on('tlsClientError', (err: Error) => log.debug({ error: err.message }, 'TLS handshake failed'));
  return server;
}

function onRequest(state: ServerState, req: IncomingMessage, res: ServerResponse): void {
  const answer = answerOnce(state, req, res);
  const deadline = bodyDeadline(state.limits, req, answer);
  req.on('error', () => undefined);

  const head = headOf(req);
  const screened = state.opts.screen(head);
  if (!screened.admit) {
    refuseUnread(req, deadline, answer, screened.response);
    return;
  }
  if (overCaps(state, screened)) {
    refuseUnread(req, deadline, answer, { status: 503, body: { error: state.opts.busyMessage } });
    return;
  }
  readAndHandle(state, req, res, head, screened.reserve, deadline, answer);
}

/** Answers the request (the first answer only) and logs it. */
function answerOnce(state: ServerState, req: IncomingMessage, res: ServerResponse): Answer {
  const { opts, log, logAtInfo } = state;
  let answered = false;
  return (out, close = false) => {
    if (answered) return;
    answered = true;
    log[logAtInfo(out.status) ? 'info' : 'debug'](
      { status: out.status, ...opts.logFields?.(req, out) },
      `${opts.name} request`,
    );
    const text = `${JSON.stringify(out.body)}\n`;
    res
      .writeHead(out.status, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(text),
        ...(out.status === 503 ? { 'retry-after': '10' } : {}),
        ...(close ? { connection: 'close' } : {}),
      })
      .end(text);
  };
}

/**
 * A stalled body (slowloris) is answered and its connection closed at the deadline, whether
 * the request is read or only drained after an early answer.
 */
function bodyDeadline(
  limits: BodyServerLimits,
  req: IncomingMessage,
  answer: Answer,
): ReturnType<typeof setTimeout> {
  const deadline = setTimeout(() => {
    answer({ status: 408, body: { error: `body not received within ${limits.bodyTimeoutMs} ms` } }, true);
    req.destroy();
  }, limits.bodyTimeoutMs);
  deadline.unref();
  req.on('close', () => clearTimeout(deadline));
  return deadline;
}

/** Answers before reading the body; the rest is read and dropped (so the client sees the answer). */
function refuseUnread(
  req: IncomingMessage,
  deadline: ReturnType<typeof setTimeout>,
  answer: Answer,
  out: BodyResponse,
): void {
  answer(out, true);
  let drained = 0;
  req.on('data', (c: Buffer) => {
    drained += c.length;
    if (drained > MAX_DRAIN) req.destroy();
  });
  req.on('end', () => clearTimeout(deadline));
}

/** Whether an admitted request would go over the in-flight cap or the byte budget (its share of them). */
function overCaps(state: ServerState, screened: { trusted: boolean; reserve: number }): boolean {
  const { held, limits } = state;
  const share = screened.trusted ? 1 : state.untrustedShare;
  return (
    held.inFlight + 1 > limits.maxInFlight * share ||
    held.reservedBytes + screened.reserve > limits.bodyBudget * share
  );
}

/** Reads an admitted request's body within its reservation, then answers what `handle` returns. */
function readAndHandle(
  state: ServerState,
  req: IncomingMessage,
  res: ServerResponse,
  head: BodyRequestHead,
  reserve: number,
  deadline: ReturnType<typeof setTimeout>,
  answer: Answer,
): void {
  const body = new HeldBody(state.held, reserve);
  let handling = false;
  req.on('close', () => {
    body.releaseBytes();
    // A request being handled keeps its slot until it is answered.
    if (!handling) body.releaseSlot();
  });
  res.on('close', () => body.releaseSlot());
  req.on('data', (c: Buffer) => {
    if (body.bytesReleased) return;
    if (!body.add(c)) {
      // More than declared, or a chunked body over maxBody: stop holding it.
      body.releaseSlot();
      answer({ status: 413, body: state.tooLargeBody }, true);
      res.once('finish', () => req.destroy());
    }
  });
  req.on('end', () => {
    clearTimeout(deadline);
    if (body.bytesReleased) return;
    const bytes = body.take();
    handling = true;
    Promise.resolve()
      .then(() => state.opts.handle({ ...head, body: bytes }))
      .catch((err: unknown) => ({
        status: 500,
        body: { error: err instanceof Error ? err.message : String(err) },
      }))
      .then((out) => {
        answer(out);
        body.releaseSlot();
      });
  });
}

/**
 * An admitted request's hold on the server: its in-flight slot, the bytes it reserved and the
 * chunks of its body read so far. Each is given back once.
 */
class HeldBody {
  /** The bytes were given back (the body was taken, refused or its request closed). */
  bytesReleased = false;
  private readonly held: BodyServerStats;
  private readonly reserve: number;
  private readonly chunks: Buffer[] = [];
  private size = 0;
  private slotReleased = false;

  constructor(held: BodyServerStats, reserve: number) {
    this.held = held;
    this.reserve = reserve;
    held.inFlight += 1;
    held.reservedBytes += reserve;
  }

  /** Keeps a chunk of the body; false (nothing kept) when it would exceed the reservation. */
  add(c: Buffer): boolean {
    if (this.size + c.length > this.reserve) return false;
    this.size += c.length;
    this.held.bufferedBytes += c.length;
    this.chunks.push(c);
    return true;
  }

  /** The whole body; its bytes are given back (the request keeps its slot). */
  take(): Buffer {
    const body = Buffer.concat(this.chunks);
    this.releaseBytes();
    return body;
  }

  releaseBytes(): void {
    if (this.bytesReleased) return;
    this.bytesReleased = true;
    this.held.reservedBytes -= this.reserve;
    this.held.bufferedBytes -= this.size;
    this.chunks.length = 0;
  }

  releaseSlot(): void {
    this.releaseBytes();
    if (this.slotReleased) return;
    this.slotReleased = true;
    this.held.inFlight -= 1;
  }
}
