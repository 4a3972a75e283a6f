// Bounds on what one tag listing of a release source may make the controller hold (issue 31 F2):
// a source is named by a tenant, so its registry or Git server decides how many tags there are and
// how long each is. Every lister (OCI, Git, GitHub) reads its listing within LISTING_LIMITS:
//
// - bytes: one listing (all its pages, or all of ls-remote's output) is read as a stream and at
//   most maxBytes of it; one byte more fails the listing with ListingTooLarge (the poller keeps the
//   last good listing), nothing beyond the cap is buffered;
// - tags: only release tags (releases/tags.ts parseReleaseTag, of any stack: the lister does not
//   know the ClusterStack; classifyTags filters by stack later) and a few look-alikes (for the
//   ClusterStack's `malformed` report) are kept; every other tag, and anything that is not even an
//   OCI tag, is only counted (notKept), so a listing of a million 1 MB tags keeps nothing of them;
// - in flight: at most `inFlight` listings of all sources and kinds read at once (listingSlot), so
//   N hostile sources cannot hold N × maxBytes together.
// A leaf module (only the tag grammar and the source error), so every source can use it.
import { parseReleaseTag } from '../releases/tags.ts';
import { SourceError } from './contract.ts';

export interface ListingLimits {
  /** Bytes of one listing, all pages together (the JSON of an OCI listing, ls-remote's output). */
  maxBytes: number;
  /** Non-release tags that look like a release tag (<provider>-<name>-…) kept for the malformed report. */
  maxLookAlikes: number;
  /** Listings of all sources reading at once. */
  inFlight: number;
}

export const LISTING_LIMITS: Readonly<ListingLimits> = {
  // 4 MiB is ~40,000 release tags in OCI JSON and ~30,000 annotated tags in ls-remote output.
  maxBytes: 4 * 1024 * 1024,
  maxLookAlikes: 100,
  inFlight: 8,
};

/** Tags as the OCI distribution spec defines them: at most 128 characters. */
const OCI_TAG = /^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$/;
/** Starts like a release tag (<provider>-<name>-, lower case): classifyTags may call it malformed. */
const LOOK_ALIKE = /^[a-z0-9]+-[a-z0-9]+-/;

export function isOciTag(tag: string): boolean {
  return tag.length <= 128 && OCI_TAG.test(tag);
}

export type TagKind = 'release' | 'lookAlike' | 'other';

/** What a listed tag is to stackflux: a release tag (of any stack), a look-alike, or nothing. */
export function tagKind(tag: string): TagKind {
  if (!isOciTag(tag)) return 'other';
  if (parseReleaseTag(tag).ok) return 'release';
  return LOOK_ALIKE.test(tag) ? 'lookAlike' : 'other';
}

/**
 * Decides, tag by tag as a listing arrives, what is kept: every release tag, the first
 * maxLookAlikes distinct look-alikes; the rest is counted in notKept.
 */
export class TagSieve {
  notKept = 0;
  private readonly lookAlikes = new Set<string>();
  private readonly maxLookAlikes: number;

  constructor(maxLookAlikes = LISTING_LIMITS.maxLookAlikes) {
    this.maxLookAlikes = maxLookAlikes;
  }

  /** A sieve that goes on from `state()` of another (a page sieved in tagpage.ts's worker). */
  static restore(lookAlikes: readonly string[], maxLookAlikes: number): TagSieve {
    const sieve = new TagSieve(maxLookAlikes);
    for (const t of lookAlikes) sieve.lookAlikes.add(t);
    return sieve;
  }

  state(): { lookAlikes: string[]; maxLookAlikes: number } {
    return { lookAlikes: this.lookAlikeList(), maxLookAlikes: this.maxLookAlikes };
  }

  lookAlikeList(): string[] {
    return [...this.lookAlikes];
  }

  /** Takes over what a restored copy of this sieve counted and kept of one page. */
  absorb(notKept: number, lookAlikes: readonly string[]): void {
    this.notKept += notKept;
    for (const t of lookAlikes) this.lookAlikes.add(t);
  }

  keep(tag: string): boolean {
    const kind = tagKind(tag);
    if (kind === 'release') return true;
    if (kind === 'lookAlike' && (this.lookAlikes.has(tag) || this.lookAlikes.size < this.maxLookAlikes)) {
      this.lookAlikes.add(tag);
      return true;
    }
    this.notKept += 1;
    return false;
  }
}

/**
 * A listing's tags with the count of those not kept. The count rides on the array so that every
 * lister keeps its signature (Promise<RemoteTag[]>); notKeptOf reads it (0 when absent).
 */
export type SievedTags<T> = T[] & { notKept?: number };

export function withNotKept<T>(tags: T[], notKept: number): SievedTags<T> {
  const out = tags as SievedTags<T>;
  if (notKept > 0) out.notKept = notKept;
  return out;
}

export function notKeptOf(tags: readonly unknown[]): number {
  const n = (tags as { notKept?: unknown }).notKept;
  return typeof n === 'number' && Number.isSafeInteger(n) && n > 0 ? n : 0;
}

/**
 * Keeps what a TagSieve keeps of an already listed set of tags (the poller, for listers that
 * return more: fakes, or a source kind that does not sieve while reading). Adds to the lister's own count.
 */
export function sieveTags<T extends { tag: string }>(tags: readonly T[]): SievedTags<T> {
  const sieve = new TagSieve();
  const kept = tags.filter((t) => sieve.keep(t.tag));
  return withNotKept(kept, notKeptOf(tags) + sieve.notKept);
}

/** The error of a listing over LISTING_LIMITS.maxBytes: names the source and the limit. */
export function listingTooLarge(what: string, maxBytes: number): SourceError {
  return new SourceError(
    'ListingTooLarge',
    `${what}: the listing is more than ${maxBytes} bytes, the limit for one listing; keep fewer or shorter tags in the source (the last good listing is kept)`,
  );
}

/** Counts a listing's (or one answer's) bytes as they are read; `take` throws past the limit. */
export class ByteBudget {
  used = 0;
  readonly max: number;
  readonly what: string;
  private readonly tooLarge: (what: string, max: number) => SourceError;

  /** `tooLarge`: the error past the limit (default listingTooLarge). */
  constructor(
    what: string,
    max = LISTING_LIMITS.maxBytes,
    tooLarge: (what: string, max: number) => SourceError = listingTooLarge,
  ) {
    this.what = what;
    this.max = max;
    this.tooLarge = tooLarge;
  }

  get exceeded(): boolean {
    return this.used > this.max;
  }

  get left(): number {
    return Math.max(0, this.max - this.used);
  }

  take(bytes: number): void {
    this.used += bytes;
    if (this.used > this.max) throw this.tooLarge(this.what, this.max);
  }
}

/**
 * Reads a response body into one buffer within the budget, chunk by chunk: a declared length over
 * what is left, or one byte more than that, cancels the body and throws ListingTooLarge.
 */
export async function readWithinBudget(res: Response, budget: ByteBudget): Promise<Buffer> {
  const declared = Number(res.headers.get('content-length'));
  if (res.headers.has('content-length') && Number.isFinite(declared) && declared > budget.left) {
    await res.body?.cancel().catch(() => undefined);
    budget.take(declared);
  }
  if (res.body === null) return Buffer.alloc(0);
  const chunks: Buffer[] = [];
  try {
    for await (const chunk of res.body) {
      budget.take(chunk.byteLength);
      chunks.push(Buffer.from(chunk));
    }
  } catch (err) {
    await res.body.cancel().catch(() => undefined);
    if (err instanceof SourceError) throw err;
    // The request's timeout also ends a body that stalls half way.
    const name = err instanceof Error ? err.name : '';
    throw new SourceError(
      name === 'TimeoutError' || name === 'AbortError' ? 'SourceTimeout' : 'SourceUnreachable',
      `${budget.what}: the transfer broke off (${name || 'error'})`,
    );
  }
  return Buffer.concat(chunks);
}

/** A body that errors with ListingTooLarge once the budget is spent (for a client that reads it itself). */
export function budgetedBody(
  body: ReadableStream<Uint8Array>,
  budget: ByteBudget,
): ReadableStream<Uint8Array> {
  return body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, out) {
        budget.take(chunk.byteLength);
        out.enqueue(chunk);
      },
    }),
  );
}

/**
 * A fetch whose response bodies each count against a budget of their own (`budget()` makes it):
 * octokit reads and parses bodies itself.
 */
export function budgetedFetch(
  fetchImpl: typeof globalThis.fetch,
  budgetOf: () => ByteBudget,
): typeof globalThis.fetch {
  return (async (input: string | URL | Request, init?: RequestInit) => {
    const res = await fetchImpl(input, init);
    const budget = budgetOf();
    if (res.body === null) return res;
    const declared = Number(res.headers.get('content-length'));
    if (res.headers.has('content-length') && Number.isFinite(declared) && declared > budget.left) {
      await res.body.cancel().catch(() => undefined);
      budget.take(declared);
    }
    return new Response(budgetedBody(res.body, budget), {
      status: res.status,
      statusText: res.statusText,
      headers: res.headers,
    });
  }) as typeof globalThis.fetch;
}

/**
 * Splits a byte stream into lines of at most maxLine bytes as it arrives, without holding a longer
 * one: a longer line is skipped to its end and reported as overlong (onLine(undefined)).
 */
export class LineSplitter {
  private partial: Buffer[] = [];
  private partialBytes = 0;
  private overlong = false;
  private readonly maxLine: number;
  private readonly onLine: (line: string | undefined) => void;

  constructor(maxLine: number, onLine: (line: string | undefined) => void) {
    this.maxLine = maxLine;
    this.onLine = onLine;
  }

  push(chunk: Buffer): void {
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(0x0a, start);
      const end = nl < 0 ? chunk.length : nl;
      this.append(chunk.subarray(start, end));
      if (nl < 0) return;
      this.flush();
      start = nl + 1;
    }
  }

  /** The last line, when the stream does not end with a newline. */
  end(): void {
    if (this.partialBytes > 0 || this.overlong) this.flush();
  }

  private append(bytes: Buffer): void {
    if (this.overlong || bytes.length === 0) return;
    if (this.partialBytes + bytes.length > this.maxLine) {
      this.overlong = true;
      this.partial = [];
      this.partialBytes = 0;
      return;
    }
    this.partial.push(bytes);
    this.partialBytes += bytes.length;
  }

  private flush(): void {
    const line = this.overlong ? undefined : Buffer.concat(this.partial).toString('utf8');
    this.partial = [];
    this.partialBytes = 0;
    this.overlong = false;
    this.onLine(line);
  }
}

/** A counting semaphore: at most `size` holders; the others wait in order. */
export class Semaphore {
  private held = 0;
  private readonly size: number;
  private readonly waiting: Array<() => void> = [];

  constructor(size: number) {
    this.size = Math.max(1, Math.floor(size));
  }

  /** Holders now (tests, metrics). */
  get inUse(): number {
    return this.held;
  }

  async run<T>(fn: () => Promise<T>): Promise<T> {
    await this.acquire();
    try {
      return await fn();
    } finally {
      this.release();
    }
  }

  private acquire(): Promise<void> {
    if (this.held < this.size) {
      this.held += 1;
      return Promise.resolve();
    }
    // Resolved by release(), which hands its slot over (held stays the same).
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  private release(): void {
    const next = this.waiting.shift();
    if (next !== undefined) next();
    else this.held -= 1;
  }
}

/** The slots every listing of this process takes (LISTING_LIMITS.inFlight). */
let slots = new Semaphore(LISTING_LIMITS.inFlight);

/** Runs one listing's reading in a slot of the process-wide bound on listings in flight. */
export function listingSlot<T>(fn: () => Promise<T>): Promise<T> {
  return slots.run(fn);
}

/** Listings reading now (tests, metrics). */
export function listingsInFlight(): number {
  return slots.inUse;
}

/** Sets the bound on listings in flight (tests; a controller flag could). Only while none runs. */
export function configureListingSlots(inFlight: number): void {
  if (slots.inUse > 0) throw new Error('listings are in flight');
  slots = new Semaphore(inFlight);
}
