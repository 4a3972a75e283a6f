// One poller per distinct release source, shared by every ClusterStack that uses it: a hundred
// ClusterStacks on one repository cost one `ls-remote` per interval, not a hundred.
//
// A source is (url, secret): the same URL with different credentials is a different source
// (a Secret is namespaced, so its key carries the namespace). The interval is the smallest
// interval among the subscribers. When a listing changes (tags or commits), or listing fails,
// every subscriber is notified (the ClusterStack controller enqueues them); the last result is
// readable synchronously. The lister, the credentials lookup and the clock are injected.
//
// A GitHub Releases source (ref.github) is listed by the GitHub lister instead of ls-remote; it is
// a different source from a Git source on the same URL. An OCI source (oci:// URL) is listed by the
// same lister (sources/releasetree.ts dispatches by URL), its tags' commits being manifest digests;
// over plain http (insecure) it is a different source from the same URL over https. When a listing fails with an error that
// carries `retryAt` (epoch ms; a GitHub rate limit), the next listing is not scheduled before it.
// Consecutive failures back off: the n-th failure in a row waits interval × 2^(n-1) (at most
// MAX_BACKOFF_DOUBLINGS doublings, and never beyond the larger of the interval and
// MAX_BACKOFF_MS), so an unreachable or stalled source is not hammered at a short interval; the
// first good listing returns to the interval. A webhook or reconcile request still lists at once.
// What is kept of a listing until the next one is sieved (listing.ts): release tags and a few
// look-alikes; the other tags are only counted (SourceListing.notKept).
import type { SourceListing } from '../reconcilers/clusterstack.ts';
import { type Clock, realClock, type TimerHandle } from '../runtime/clock.ts';
import { errorFields, type Logger, silentLogger } from '../runtime/logging.ts';
import { type GitCredentials, type RemoteTag, SourceError } from './git.ts';
import type { GitHubRepo, GitHubTagLister } from './github.ts';
import { notKeptOf, sieveTags } from './listing.ts';

/**
 * Lists a source's tags; `o.insecure`: an OCI source over plain http (sources/releasetree.ts
 * dispatches by URL); `o.signal` ends the listing (its total deadline: ./deadline.ts).
 */
export type TagLister = (
  url: string,
  creds: GitCredentials | undefined,
  o?: { insecure?: boolean; signal?: AbortSignal },
) => Promise<RemoteTag[]>;

/** Resolves the credentials of a source's Secret (namespace/name); throws when it cannot. */
export type CredentialsResolver = (namespace: string, secretName: string) => Promise<GitCredentials>;

export interface SourceRef {
  url: string;
  /** Namespace of the subscriber (where secretRef lives). */
  namespace: string;
  secretName?: string;
  /** Set for a GitHub Releases source (url is then its https clone URL). */
  github?: GitHubRepo;
  /** An OCI source (oci:// URL) over plain http: a different source from the same URL over https. */
  insecure?: boolean;
}

export interface Subscription extends SourceRef {
  /** Poll interval this subscriber wants (ms). */
  intervalMs: number;
}

export interface PollerOptions {
  lister: TagLister;
  /** Lists GitHub Releases sources; the token is the credentials' password (the Secret's `token`). */
  githubLister?: GitHubTagLister;
  credentials?: CredentialsResolver;
  /** Called with the subscriber keys of a source whose listing changed or failed. */
  onChange: (subscribers: string[]) => void;
  clock?: Clock;
  logger?: Logger;
  /** Observes each ls-remote: duration (s) and whether it failed. */
  observe?: (seconds: number, ok: boolean) => void;
}

/** Repository URL as the webhook matches it: no scheme, user, trailing slash or ".git"; lower case. */
export function normalizeRepoUrl(url: string): string {
  let s = url.trim().toLowerCase();
  s = s.replace(/^[a-z][a-z0-9+.-]*:\/\//, '');
  s = s.replace(/^[^@/]+@/, '');
  // scp-like "host:owner/repo" → "host/owner/repo" (but keep "host:port/...").
  s = s.replace(/^([^/:]+):(?!\d+(\/|$))/, '$1/');
  s = s.replace(/\/+$/, '').replace(/\.git$/, '');
  return s;
}

export function sourceKey(ref: SourceRef): string {
  const key = ref.secretName === undefined ? [ref.url] : [ref.url, ref.namespace, ref.secretName];
  if (ref.insecure === true) key.push('insecure');
  return JSON.stringify(
    ref.github === undefined ? key : ['github', ref.github.owner, ref.github.repo, ...key],
  );
}

function withoutKind(ref: SourceRef): SourceRef {
  const { github: _, ...rest } = ref;
  return rest;
}

interface Poller {
  key: string;
  ref: SourceRef;
  subscribers: Map<string, number>;
  listing: SourceListing | undefined;
  tags: RemoteTag[] | undefined;
  lastOkAt: string | undefined;
  timer: TimerHandle | undefined;
  /** When the last listing finished (clock ms). */
  lastListAt: number | undefined;
  /** Not before this (epoch ms): the source asked to wait (rate limit). */
  retryAt: number | undefined;
  /** Listings that failed in a row (back-off). */
  failures: number;
  /** Tags a registry said were pushed that no listing has shown yet. */
  awaiting: Set<string>;
  /** Listings since the last push notification that did not show every awaited tag. */
  awaitListings: number;
  running: Promise<void> | undefined;
  again: boolean;
  lists: number;
  stopped: boolean;
}

const MAX_BACKOFF_DOUBLINGS = 5;
/** First wait before listing again for a pushed tag the listing did not show yet (doubles). */
const AWAIT_BASE_MS = 250;
const MAX_AWAIT_LISTINGS = 6;
const MAX_AWAITED_TAGS = 1000;
const MAX_BACKOFF_MS = 10 * 60_000;

/** The wait before the next listing: the interval, doubled per consecutive failure beyond the first. */
export function pollDelay(intervalMs: number, failures: number): number {
  if (failures <= 1) return intervalMs;
  const backedOff = intervalMs * 2 ** Math.min(failures - 1, MAX_BACKOFF_DOUBLINGS);
  return Math.min(backedOff, Math.max(intervalMs, MAX_BACKOFF_MS));
}

function sameTags(a: RemoteTag[] | undefined, b: RemoteTag[]): boolean {
  if (a === undefined || a.length !== b.length) return false;
  return a.every((t, i) => t.tag === b[i]?.tag && t.commit === b[i]?.commit && t.time === b[i]?.time);
}

export class SourcePollers {
  private readonly opts: PollerOptions;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly pollers = new Map<string, Poller>();
  /** subscriber key → source key */
  private readonly subscriptions = new Map<string, string>();
  private stopped = false;

  constructor(opts: PollerOptions) {
    this.opts = opts;
    this.clock = opts.clock ?? realClock;
    this.log = (opts.logger ?? silentLogger()).child({ component: 'source-poller' });
  }

  /**
   * Subscribes (or moves) a subscriber to a source. Idempotent: the same subscription again
   * changes nothing; a shorter interval reschedules the poller sooner. A new source is listed at once.
   */
  subscribe(subscriber: string, sub: Subscription): void {
    if (this.stopped) return;
    const key = sourceKey(sub);
    const previous = this.subscriptions.get(subscriber);
    if (previous !== undefined && previous !== key) this.unsubscribe(subscriber);
    let p = this.pollers.get(key);
    if (p === undefined) {
      p = {
        key,
        ref: {
          url: sub.url,
          namespace: sub.namespace,
          ...(sub.secretName !== undefined ? { secretName: sub.secretName } : {}),
          ...(sub.github !== undefined ? { github: { owner: sub.github.owner, repo: sub.github.repo } } : {}),
          ...(sub.insecure === true ? { insecure: true } : {}),
        },
        subscribers: new Map(),
        listing: undefined,
        tags: undefined,
        lastOkAt: undefined,
        timer: undefined,
        lastListAt: undefined,
        retryAt: undefined,
        failures: 0,
        awaiting: new Set(),
        awaitListings: 0,
        running: undefined,
        again: false,
        lists: 0,
        stopped: false,
      };
      this.pollers.set(key, p);
    }
    const before = this.intervalOf(p);
    p.subscribers.set(subscriber, sub.intervalMs);
    this.subscriptions.set(subscriber, key);
    if (p.listing === undefined && p.running === undefined && p.timer === undefined) {
      this.listNow(p);
    } else if (this.intervalOf(p) < before) {
      this.schedule(p);
    }
  }

  unsubscribe(subscriber: string): void {
    const key = this.subscriptions.get(subscriber);
    if (key === undefined) return;
    this.subscriptions.delete(subscriber);
    const p = this.pollers.get(key);
    if (p === undefined) return;
    p.subscribers.delete(subscriber);
    if (p.subscribers.size === 0) {
      p.stopped = true;
      if (p.timer !== undefined) this.clock.clearTimeout(p.timer);
      p.timer = undefined;
      this.pollers.delete(key);
    }
  }

  /** The last listing of the subscriber's source; undefined before the first one finished. */
  listing(subscriber: string): SourceListing | undefined {
    const key = this.subscriptions.get(subscriber);
    return key === undefined ? undefined : this.pollers.get(key)?.listing;
  }

  /**
   * The commit a tag of a source resolved to in its last successful listing. A ref without
   * `github` (a release only knows url and secret) also finds a GitHub source on that URL.
   */
  commitOf(ref: SourceRef, tag: string): string | undefined {
    const exact = this.pollers.get(sourceKey(ref))?.tags?.find((t) => t.tag === tag)?.commit;
    if (exact !== undefined || ref.github !== undefined) return exact;
    const key = sourceKey(ref);
    for (const p of this.pollers.values()) {
      if (p.ref.github === undefined || sourceKey(withoutKind(p.ref)) !== key) continue;
      const commit = p.tags?.find((t) => t.tag === tag)?.commit;
      if (commit !== undefined) return commit;
    }
    return undefined;
  }

  /** Number of ls-remote calls made for the source (tests, metrics). */
  listCount(ref: SourceRef): number {
    return this.pollers.get(sourceKey(ref))?.lists ?? 0;
  }

  /** Distinct sources polled. */
  size(): number {
    return this.pollers.size;
  }

  urls(): string[] {
    return [...new Set([...this.pollers.values()].map((p) => p.ref.url))];
  }

  /**
   * Lists every source whose URL matches one of urls (normalized) now, regardless of the interval
   * (push webhook). Returns how many sources matched.
   */
  trigger(urls: readonly string[]): number {
    const wanted = new Set(urls.map(normalizeRepoUrl));
    let n = 0;
    for (const p of this.pollers.values()) {
      if (!wanted.has(normalizeRepoUrl(p.ref.url))) continue;
      n += 1;
      // A rate-limited source is listed when the limit resets, not sooner.
      if (p.retryAt !== undefined && p.retryAt > this.clock.now()) continue;
      this.listNow(p);
    }
    return n;
  }

  /**
   * Lists every OCI source (oci:// URL) whose repository was pushed to now, on any host (a registry
   * push notification: the host the registry saw need not be the one stackflux uses). Distribution
   * sends the manifest push event before it links the tag, so a listing may not show the pushed tag
   * yet: the source is listed again after AWAIT_BASE_MS, doubling, until it does (at most
   * MAX_AWAIT_LISTINGS listings). Returns how many sources matched.
   */
  triggerOciRepositories(pushes: ReadonlyArray<{ repository: string; tag?: string }>): number {
    let n = 0;
    for (const p of this.pollers.values()) {
      const repository = /^oci:\/\/[^/]+\/(.+?)\/*$/.exec(p.ref.url)?.[1]?.toLowerCase();
      const pushed = pushes.filter((x) => x.repository.toLowerCase() === repository);
      if (pushed.length === 0) continue;
      n += 1;
      for (const x of pushed)
        if (x.tag !== undefined && p.awaiting.size < MAX_AWAITED_TAGS) p.awaiting.add(x.tag);
      p.awaitListings = 0;
      if (p.retryAt !== undefined && p.retryAt > this.clock.now()) continue;
      this.listNow(p);
    }
    return n;
  }

  /**
   * Lists the subscriber's source now, outside the interval (a reconcile request on a subscriber),
   * and resolves once a listing that started after this call has finished: listing(subscriber) is
   * then fresh. A listing already running is followed by one more. A rate-limited source is not
   * listed before its limit resets (its last result stays). Subscribers of the same source are
   * notified as usual when the listing changed.
   */
  async refresh(subscriber: string): Promise<void> {
    const key = this.subscriptions.get(subscriber);
    const p = key === undefined ? undefined : this.pollers.get(key);
    if (p === undefined || p.stopped || this.stopped) return;
    if (p.retryAt !== undefined && p.retryAt > this.clock.now()) return;
    // A listing already running started before this request: wait for it and the one after it.
    let waits = p.running === undefined ? 1 : 2;
    this.listNow(p);
    while (waits > 0 && p.running !== undefined) {
      waits -= 1;
      await p.running;
    }
  }

  /** Resolves once no listing is running (tests). */
  async idle(): Promise<void> {
    for (;;) {
      const running = [...this.pollers.values()].flatMap((p) => (p.running ? [p.running] : []));
      if (running.length === 0) return;
      await Promise.all(running);
    }
  }

  stop(): void {
    this.stopped = true;
    for (const p of this.pollers.values()) {
      p.stopped = true;
      if (p.timer !== undefined) this.clock.clearTimeout(p.timer);
      p.timer = undefined;
    }
  }

  private intervalOf(p: Poller): number {
    let min = Number.POSITIVE_INFINITY;
    for (const ms of p.subscribers.values()) if (ms < min) min = ms;
    return min;
  }

  private schedule(p: Poller): void {
    if (p.stopped || this.stopped) return;
    const interval = this.intervalOf(p);
    if (!Number.isFinite(interval)) return;
    let wait = pollDelay(interval, p.failures);
    if (p.awaiting.size > 0 && p.awaitListings > 0)
      wait = Math.min(wait, AWAIT_BASE_MS * 2 ** (p.awaitListings - 1));
    const due = Math.max(this.clock.now(), (p.lastListAt ?? this.clock.now()) + wait, p.retryAt ?? 0);
    if (p.timer !== undefined) this.clock.clearTimeout(p.timer);
    p.timer = this.clock.setTimeout(() => {
      p.timer = undefined;
      this.listNow(p);
    }, due - this.clock.now());
  }

  private listNow(p: Poller): void {
    if (p.stopped || this.stopped) return;
    if (p.running !== undefined) {
      p.again = true;
      return;
    }
    if (p.timer !== undefined) {
      this.clock.clearTimeout(p.timer);
      p.timer = undefined;
    }
    p.running = this.listOnce(p).finally(() => {
      p.running = undefined;
      if (p.again) {
        p.again = false;
        this.listNow(p);
      } else {
        p.lastListAt = this.clock.now();
        this.schedule(p);
      }
    });
  }

  private async listOnce(p: Poller): Promise<void> {
    const started = this.clock.now();
    p.lists += 1;
    let next: SourceListing;
    let changed: boolean;
    try {
      const creds =
        p.ref.secretName !== undefined
          ? await this.resolveCredentials(p.ref.namespace, p.ref.secretName)
          : undefined;
      // Only what a source's tags can become is kept until the next listing (listing.ts).
      const tags = sieveTags(await this.list(p.ref, creds));
      const notKept = notKeptOf(tags);
      p.retryAt = undefined;
      p.failures = 0;
      const listedAt = new Date(this.clock.now()).toISOString();
      changed = p.listing?.ok !== true || !sameTags(p.tags, tags) || (p.listing.notKept ?? 0) !== notKept;
      p.tags = tags;
      if (p.awaiting.size > 0) {
        for (const t of tags) p.awaiting.delete(t.tag);
        p.awaitListings += 1;
        if (p.awaitListings >= MAX_AWAIT_LISTINGS) p.awaiting.clear();
      }
      p.lastOkAt = listedAt;
      const timed = tags.filter((t) => t.time !== undefined);
      next = {
        ok: true,
        tags: tags.map((t) => t.tag),
        ...(notKept > 0 ? { notKept } : {}),
        ...(timed.length > 0 ? { times: Object.fromEntries(timed.map((t) => [t.tag, t.time ?? 0])) } : {}),
        listedAt,
      };
      this.opts.observe?.((this.clock.now() - started) / 1000, true);
      if (changed) this.log.info({ url: p.ref.url, tags: tags.length }, 'source listing changed');
    } catch (err) {
      const reason =
        err instanceof Error && typeof (err as { reason?: unknown }).reason === 'string'
          ? String((err as { reason?: unknown }).reason)
          : 'ListFailed';
      const message = err instanceof Error ? err.message : String(err);
      const retryAt = (err as { retryAt?: unknown } | undefined)?.retryAt;
      p.retryAt = typeof retryAt === 'number' && Number.isFinite(retryAt) ? retryAt : undefined;
      p.failures += 1;
      next = {
        ok: false,
        reason,
        message,
        ...(p.lastOkAt !== undefined ? { lastListedAt: p.lastOkAt } : {}),
      };
      changed = true;
      this.opts.observe?.((this.clock.now() - started) / 1000, false);
      this.log.warn(
        { url: p.ref.url, reason, failures: p.failures, ...errorFields(err) },
        'listing the source failed',
      );
    }
    if (p.stopped) return;
    p.listing = next;
    if (changed) {
      try {
        this.opts.onChange([...p.subscribers.keys()].sort());
      } catch (err) {
        this.log.error(errorFields(err), 'source change handler failed');
      }
    }
  }

  private list(ref: SourceRef, creds: GitCredentials | undefined): Promise<RemoteTag[]> {
    if (ref.github === undefined)
      return this.opts.lister(ref.url, creds, ref.insecure === true ? { insecure: true } : {});
    if (this.opts.githubLister === undefined) {
      return Promise.reject(
        new SourceError('Unsupported', 'this controller was started without GitHub Releases support'),
      );
    }
    return this.opts.githubLister(ref.github, creds?.password);
  }

  private async resolveCredentials(namespace: string, secretName: string): Promise<GitCredentials> {
    if (this.opts.credentials === undefined) return {};
    return this.opts.credentials(namespace, secretName);
  }
}
