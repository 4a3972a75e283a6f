// The hardened body server (controller/runtime/bodyserver.ts) on its own, over raw sockets: what
// the head decides is answered before the body is read, the in-flight cap and the byte budget
// refuse with 503 (an untrusted request gets its share only), a body over its reservation is 413, a
// stalled one 408 at the deadline, and whatever a request held is given back once it ends.
// The push webhook's and the runtime extension's use of it are tested with them.
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { describe, it } from 'node:test';
import {
  admitLength,
  type BodyServer,
  type BodyServerLimits,
  type BodyServerOptions,
  headerValue,
  serveBodies,
} from '../../../controller/runtime/bodyserver.ts';

const LIMITS: BodyServerLimits = {
  maxBody: 1000,
  bodyBudget: 2000,
  maxInFlight: 4,
  maxConnections: 50,
  bodyTimeoutMs: 300,
  headersTimeoutMs: 5000,
};

interface Reply {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** A server whose head screen refuses /refuse and trusts "Bearer ok"; /wait answers once `release()` is called. */
async function withServer(
  overrides: Partial<BodyServerOptions> & { limits?: Partial<BodyServerLimits> },
  fn: (server: BodyServer, release: () => void) => Promise<void>,
): Promise<void> {
  const { limits: limitOverrides, ...options } = overrides;
  const limits = { ...LIMITS, ...limitOverrides };
  let release = () => {};
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  const server = await serveBodies('127.0.0.1:0', {
    name: 'test',
    limits,
    busyMessage: 'busy, retry',
    screen: (head) =>
      head.path === '/refuse'
        ? { admit: false, response: { status: 403, body: { error: 'refused' } } }
        : admitLength(head, limits.maxBody, headerValue(head, 'authorization') === 'Bearer ok'),
    handle: async (req) => {
      if (req.path === '/throw') throw new Error('boom');
      if (req.path === '/wait') await released;
      return { status: 200, body: { path: req.path, got: req.body.toString() } };
    },
    ...options,
  });
  try {
    await fn(server, release);
  } finally {
    release();
    await server.close();
  }
}

/** Opens a connection to the server and writes `text` (a request, perhaps only its start). */
async function send(server: BodyServer, text: string): Promise<Socket> {
  const socket = connect(server.port, '127.0.0.1');
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  socket.write(text);
  return socket;
}

/** The first response on the connection, and whether the server closed it afterwards. */
function reply(socket: Socket): Promise<Reply & { closed: Promise<void> }> {
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  return new Promise((resolve, reject) => {
    let data = '';
    socket.setEncoding('utf8');
    socket.on('error', () => undefined);
    socket.on('data', (chunk: string) => {
      data += chunk;
      const end = data.indexOf('\r\n\r\n');
      if (end < 0) return;
      const [statusLine = '', ...lines] = data.slice(0, end).split('\r\n');
      const headers = Object.fromEntries(
        lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
      );
      const body = data.slice(end + 4);
      if (body.length < Number(headers['content-length'] ?? 0)) return;
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body, closed });
    });
    closed.then(() => reject(new Error(`closed without a full answer: ${JSON.stringify(data)}`)));
  });
}

async function request(server: BodyServer, text: string): Promise<Reply> {
  const socket = await send(server, text);
  try {
    return await reply(socket);
  } finally {
    socket.destroy();
  }
}

const post = (path: string, body: string, headers = '') =>
  `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${headers}\r\n${body}`;

/** Waits until `check` holds (what the server holds changes as it reads and closes). */
async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(check(), 'condition not reached within 2 s');
}

const idle = { inFlight: 0, bufferedBytes: 0, reservedBytes: 0 };

describe('serveBodies', () => {
  it("answers what handle returns as JSON, and a handler's error as 500 with its message", async () => {
    await withServer({}, async (server) => {
      const ok = await request(server, post('/echo?q=1', 'hello'));
      assert.equal(ok.status, 200);
      assert.equal(ok.headers['content-type'], 'application/json');
      assert.equal(ok.body, `${JSON.stringify({ path: '/echo', got: 'hello' })}\n`);
      const failed = await request(server, post('/throw', 'x'));
      assert.equal(failed.status, 500);
      assert.deepEqual(JSON.parse(failed.body), { error: 'boom' });
      await until(() => server.stats().inFlight === 0);
      assert.deepEqual(server.stats(), idle);
    });
  });

  it('a request its head refuses is answered before any body byte is sent, and its connection closed', async () => {
    await withServer({}, async (server) => {
      // Content-Length 5, and no body at all: the answer cannot have waited for it.
      const socket = await send(server, 'POST /refuse HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n');
      const refused = await reply(socket);
      assert.equal(refused.status, 403);
      assert.equal(refused.headers.connection, 'close');
      assert.deepEqual(JSON.parse(refused.body), { error: 'refused' });
      socket.destroy();
      const tooLarge = await request(server, 'POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n');
      assert.equal(tooLarge.status, 413);
      assert.deepEqual(JSON.parse(tooLarge.body), { error: 'body too large: at most 1000 bytes' });
      await until(() => server.stats().inFlight === 0);
      assert.deepEqual(server.stats(), idle);
    });
  });

  it('a chunked body over its reservation (maxBody) is 413 and gives back what it held', async () => {
    await withServer({}, async (server) => {
      const chunk = 'x'.repeat(1500);
      const answer = await request(
        server,
        `POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n${chunk.length.toString(16)}\r\n${chunk}\r\n0\r\n\r\n`,
      );
      assert.equal(answer.status, 413);
      assert.equal(answer.headers.connection, 'close');
      await until(() => server.stats().inFlight === 0);
      assert.deepEqual(server.stats(), idle);
    });
  });

  it('past its share of the in-flight cap a request is 503 with Retry-After; one being handled keeps its slot until answered', async () => {
    // Four in flight; an untrusted request may take half of them.
    await withServer({ untrustedShare: 0.5 }, async (server, release) => {
      const waiting = [await send(server, post('/wait', 'a')), await send(server, post('/wait', 'b'))];
      const answers = waiting.map((s) => reply(s));
      // The bodies are read (their bytes given back), the slots kept while the handler waits.
      await until(() => server.stats().inFlight === 2 && server.stats().reservedBytes === 0);
      assert.deepEqual(server.stats(), { inFlight: 2, bufferedBytes: 0, reservedBytes: 0 });
      const busy = await request(server, post('/echo', 'c'));
      assert.equal(busy.status, 503);
      assert.equal(busy.headers['retry-after'], '10');
      assert.deepEqual(JSON.parse(busy.body), { error: 'busy, retry' });
      // A trusted request may use the whole cap.
      const trusted = await request(server, post('/echo', 'd', 'Authorization: Bearer ok\r\n'));
      assert.equal(trusted.status, 200);
      release();
      for (const answer of await Promise.all(answers)) assert.equal(answer.status, 200);
      for (const s of waiting) s.destroy();
      await until(() => server.stats().inFlight === 0);
      assert.deepEqual(server.stats(), idle);
    });
  });

  it('a request reserves its Content-Length of the byte budget while its body arrives; past its share, 503', async () => {
    await withServer({ untrustedShare: 0.5 }, async (server) => {
      // 800 of the untrusted share of 1000 bytes reserved, 300 of them read so far.
      const slow = await send(server, post('/x', 'y'.repeat(800)).slice(0, -500));
      await until(() => server.stats().bufferedBytes === 300);
      assert.deepEqual(server.stats(), { inFlight: 1, bufferedBytes: 300, reservedBytes: 800 });
      const over = await request(server, post('/echo', 'z'.repeat(300)));
      assert.equal(over.status, 503);
      const within = await request(server, post('/echo', 'z'.repeat(200)));
      assert.equal(within.status, 200);
      slow.destroy();
      await until(() => server.stats().inFlight === 0);
      assert.deepEqual(server.stats(), idle);
    });
  });

  it('a body that stalls is answered 408 at the deadline and its connection closed', async () => {
    await withServer({}, async (server) => {
      const socket = await send(server, 'POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc');
      const stalled = await reply(socket);
      assert.equal(stalled.status, 408);
      assert.deepEqual(JSON.parse(stalled.body), { error: 'body not received within 300 ms' });
      await stalled.closed;
      await until(() => server.stats().inFlight === 0);
      assert.deepEqual(server.stats(), idle);
    });
  });
});
