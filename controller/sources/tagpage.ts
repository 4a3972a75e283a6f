// One page of an OCI tag listing, parsed and sieved (listing.ts TagSieve). A page a registry sends
// may hold half a million strings in 4 MiB: JSON.parse and the sieve of such a page take the
// controller's event loop for seconds (and with it /healthz, Lease renewal and every other tenant).
// So a page over INLINE_BYTES is parsed and sieved in a worker thread with a heap of its own, and
// only what the sieve keeps comes back; a small page (every page a registry honouring `n=` sends)
// is parsed in place.

import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { SourceError } from './contract.ts';
import { TagSieve } from './listing.ts';

/** Pages up to this size are parsed on the event loop (about 3,000 tags: a millisecond or two). */
export const INLINE_BYTES = 64 * 1024;
/** The worker's heap: a 4 MiB page of short strings needs about 60 MB. */
const WORKER_HEAP_MB = 128;
/** An idle worker is ended after this long (listings come every few minutes per source). */
const WORKER_IDLE_MS = 30_000;

/**
 * The tags of one tags/list page (`{"name": …, "tags": [...]}`), strings only; anything else the
 * registry answered is SourceUnreachable naming `what`.
 */
export function parseTagPage(body: Buffer, what: string): string[] {
  let page: unknown;
  try {
    page = JSON.parse(body.toString('utf8'));
  } catch {
    throw new SourceError('SourceUnreachable', `${what}: the registry answered no JSON`);
  }
  const got = (page as { tags?: unknown } | null)?.tags;
  if (got === null || got === undefined) return [];
  if (!Array.isArray(got)) throw new SourceError('SourceUnreachable', `${what}: "tags" is not a list`);
  return got.filter((t): t is string => typeof t === 'string');
}

/** What the worker is asked and answers (the sieve's state travels with the page). */
export interface PageRequest {
  id: number;
  body: Uint8Array;
  what: string;
  sieve: SieveState;
}
export interface SieveState {
  lookAlikes: string[];
  maxLookAlikes: number;
}
export type PageReply =
  | { id: number; ok: true; kept: string[]; notKept: number; lookAlikes: string[] }
  | { id: number; ok: false; reason: string; message: string };

/** Parses and sieves one page as the worker does it (also used in place for small pages). */
export function sievePage(body: Buffer, what: string, sieve: TagSieve): string[] {
  return parseTagPage(body, what).filter((t) => sieve.keep(t));
}

/** The worker's answer to one request. */
export function answerPage(request: PageRequest): PageReply {
  const sieve = TagSieve.restore(request.sieve.lookAlikes, request.sieve.maxLookAlikes);
  try {
    const body = Buffer.from(request.body.buffer, request.body.byteOffset, request.body.byteLength);
    const kept = sievePage(body, request.what, sieve);
    return { id: request.id, ok: true, kept, notKept: sieve.notKept, lookAlikes: sieve.lookAlikeList() };
  } catch (err) {
    const reason = err instanceof SourceError ? err.reason : 'SourceUnreachable';
    return { id: request.id, ok: false, reason, message: err instanceof Error ? err.message : String(err) };
  }
}

const WORKER_PATH = fileURLToPath(
  new URL(`./tagpageworker.${import.meta.url.endsWith('.ts') ? 'ts' : 'js'}`, import.meta.url),
);

/** One worker for every listing of the process, started on demand and ended when idle. */
class PageWorker {
  private worker: Worker | undefined;
  private nextId = 0;
  private readonly waiting = new Map<
    number,
    { resolve: (r: PageReply) => void; reject: (e: Error) => void; what: string }
  >();
  private idle: NodeJS.Timeout | undefined;

  request(body: Buffer, what: string, sieve: SieveState): Promise<PageReply> {
    const worker = this.started();
    clearTimeout(this.idle);
    const id = this.nextId++;
    // A copy the worker owns: the caller's Buffer may share its memory with other Buffers.
    const copy = new Uint8Array(body);
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject, what });
      // Held while it has work (a CLI awaiting a listing has nothing else keeping it alive).
      worker.ref();
      const request: PageRequest = { id, body: copy, what, sieve };
      worker.postMessage(request, [copy.buffer]);
    });
  }

  private started(): Worker {
    if (this.worker !== undefined) return this.worker;
    const worker = new Worker(WORKER_PATH, {
      resourceLimits: { maxOldGenerationSizeMb: WORKER_HEAP_MB },
      stdout: false,
      stderr: false,
    });
    worker.unref();
    worker.on('message', (reply: PageReply) => {
      const w = this.waiting.get(reply.id);
      this.waiting.delete(reply.id);
      w?.resolve(reply);
      if (this.waiting.size === 0) {
        worker.unref();
        this.idleSoon();
      }
    });
    // Out of its heap (a page built to exhaust it) or crashed: every page it held fails, naming
    // its listing; the next page starts a new worker.
    const fail = (err: Error) => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      for (const [, w] of this.waiting)
        w.reject(
          new SourceError(
            'ListingTooLarge',
            `${w.what}: a page of the listing could not be parsed within ${WORKER_HEAP_MB} MB (${err.message})`,
          ),
        );
      this.waiting.clear();
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`the parser exited with code ${code}`)));
    this.worker = worker;
    return worker;
  }

  private idleSoon(): void {
    clearTimeout(this.idle);
    this.idle = setTimeout(() => {
      if (this.waiting.size > 0 || this.worker === undefined) return;
      const w = this.worker;
      this.worker = undefined;
      void w.terminate();
    }, WORKER_IDLE_MS);
    this.idle.unref();
  }
}

const pageWorker = new PageWorker();

/**
 * The tags of one page `sieve` keeps (its count and look-alikes updated), parsed off the event
 * loop when the page is large.
 */
export async function sieveTagPage(body: Buffer, what: string, sieve: TagSieve): Promise<string[]> {
  if (body.byteLength <= INLINE_BYTES) return sievePage(body, what, sieve);
  const reply = await pageWorker.request(body, what, sieve.state());
  if (!reply.ok) throw new SourceError(reply.reason, reply.message);
  sieve.absorb(reply.notKept, reply.lookAlikes);
  return reply.kept;
}
