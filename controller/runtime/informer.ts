// A shared informer: an in-memory mirror of one resource (optionally one namespace / selector),
// kept by LIST then WATCH from the last resourceVersion, with event handlers and indexes.
//
// It never stops on its own: any error (network, 5xx, a watch stream that ends or breaks, the API
// server restarting) restarts the watch after a backoff; 410 Gone (resourceVersion too old, as an
// HTTP status or as an ERROR event) relists; a watchdog restarts a watch that has been silent for
// too long (bookmarks keep healthy watches talking). resourceVersion is opaque: it is stored and
// sent back, compared only for equality, never numerically.

import { ApiError, isGone, type KubeClient, type KubeObject, type WatchEvent } from './client.ts';
import { type Clock, realClock, sleep, type TimerHandle } from './clock.ts';
import { internStrings, sharedStrings } from './intern.ts';
import { errorFields, type Logger, silentLogger } from './logging.ts';

export interface EventHandler<T extends KubeObject> {
  onAdd?(obj: T): void;
  onUpdate?(oldObj: T, newObj: T): void;
  onDelete?(obj: T): void;
}

export type IndexFunc<T extends KubeObject> = (obj: T) => string[];

export interface InformerOptions<T extends KubeObject> {
  client: KubeClient;
  apiVersion: string;
  kind: string;
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
  clock?: Clock;
  logger?: Logger;
  /** Applied to every object before it is stored; by default leanObject (no managedFields, no last-applied). */
  transform?: (obj: KubeObject) => T;
  /**
   * Share one copy of repeated string values (and index values) between cached objects (intern.ts);
   * default true. Values are unchanged; only duplicate copies go.
   */
  internStrings?: boolean;
  /** Restart a watch that delivered nothing (not even a bookmark) for this long. Default 150 s. */
  watchdogMs?: number;
  /** Server-side watch timeout in seconds; default random in [300, 600) like client-go. */
  watchTimeoutSeconds?: number;
  /** Backoff after errors: initial and maximum delay (client-go: 800 ms → 30 s). */
  backoffInitialMs?: number;
  backoffMaxMs?: number;
  /** Page size of LISTs (default DEFAULT_PAGE_SIZE, 250). */
  pageSize?: number;
  /**
   * Cache metadata only (PartialObjectMetadata: names, labels, annotations, owners, finalizers):
   * for kinds a controller only needs to know exist (e.g. Secrets), so neither their data nor
   * their spec is sent or kept. Cached objects keep the informer's apiVersion and kind.
   */
  metadataOnly?: boolean;
}

export interface InformerStats {
  lists: number;
  watches: number;
  gone: number;
  errors: number;
  watchdogRestarts: number;
  events: number;
}

/**
 * Objects per LIST page. Small enough that a page's full objects (managedFields and all) die in
 * V8's young generation once transformed; large enough that the informers of a 10,000-Cluster
 * fleet list within the client's burst (about 280 requests).
 */
const DEFAULT_PAGE_SIZE = 250;

/** Default transform: drop metadata.managedFields (often half an object's size). */
export function stripManagedFields<T extends KubeObject>(obj: KubeObject): T {
  if (obj.metadata?.managedFields === undefined) return obj as T;
  const { managedFields: _drop, ...metadata } = obj.metadata;
  return { ...obj, metadata } as T;
}

/** kubectl's copy of the whole object as last applied: often as big as the object; never read here. */
export const LAST_APPLIED_ANNOTATION = 'kubectl.kubernetes.io/last-applied-configuration';

/** Flux's own records in the status of its objects: what it applied, and its reconcile history. */
const FLUX_GROUP_SUFFIX = '.toolkit.fluxcd.io/';
const FLUX_RECORDS = ['inventory', 'history'] as const;

/**
 * The Flux kinds stackflux creates and watches, and the only status fields any reader of their
 * caches looks at: the Ready condition and observedGeneration (readiness of the current
 * generation, reconcilers/clusteraddon/readiness.ts fluxReady, reconcilers/clusterstackrelease.ts
 * kustomizationReady; no reader looks at another condition type of these kinds),
 * lastAppliedRevision (Kustomization: the revision an addon / release runs), history (HelmRelease:
 * its newest Helm release, cut down below) and lastHandledReconcileAt (one short string, kept for
 * whoever shows it). The rest (GitRepository status.artifact, lastAttempted*, storageNamespace,
 * observedIgnore, …) is never read from a cache; the CLI reads the live objects, not these caches.
 * needsApply compares spec, labels, annotations and owners, never status: dropping status fields
 * cannot make a converged object look changed.
 */
const FLUX_MANAGED_KINDS = new Set(['Kustomization', 'GitRepository', 'HelmRelease']);
const FLUX_STATUS_READ = new Set([
  'conditions',
  'observedGeneration',
  'lastAppliedRevision',
  'lastHandledReconcileAt',
  'history',
]);

/** Of a HelmRelease's history, the fields of the newest Helm release that stackflux shows. */
const HELM_RELEASE_FIELDS = [
  'name',
  'namespace',
  'version',
  'status',
  'chartName',
  'chartVersion',
  'configDigest',
];

function latestHelmRelease(entry: unknown): Record<string, unknown> | undefined {
  if (typeof entry !== 'object' || entry === null) return undefined;
  return Object.fromEntries(Object.entries(entry).filter(([k]) => HELM_RELEASE_FIELDS.includes(k)));
}

function isFluxObject(obj: KubeObject): boolean {
  return typeof obj.apiVersion === 'string' && obj.apiVersion.includes(FLUX_GROUP_SUFFIX);
}

/** Whether the status field `key` of this Flux object is dropped from the cache. */
function droppedFluxField(kind: string, key: string): boolean {
  if (FLUX_MANAGED_KINDS.has(kind)) return !FLUX_STATUS_READ.has(key) || key === 'history';
  return (FLUX_RECORDS as readonly string[]).includes(key);
}

/** The conditions of a managed Flux kind that are read: Ready only. */
const FLUX_CONDITIONS_READ = 'Ready';

function isReadCondition(c: unknown): boolean {
  return typeof c === 'object' && c !== null && (c as { type?: unknown }).type === FLUX_CONDITIONS_READ;
}

/** Whether anything of this Flux object's status is dropped from the cache. */
function leanFluxStatusDrops(kind: string, status: Record<string, unknown>): boolean {
  if (Object.keys(status).some((k) => droppedFluxField(kind, k))) return true;
  const conditions = status.conditions;
  return FLUX_MANAGED_KINDS.has(kind) && Array.isArray(conditions) && !conditions.every(isReadCondition);
}

/** What stays of a Flux object's status (see FLUX_STATUS_READ). */
function leanFluxStatus(kind: string, status: Record<string, unknown>): Record<string, unknown> {
  const kept: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(status)) if (!droppedFluxField(kind, k)) kept[k] = v;
  if (FLUX_MANAGED_KINDS.has(kind) && Array.isArray(kept.conditions)) {
    // An array literal: exactly sized (filter's result keeps spare capacity).
    const ready: unknown = kept.conditions.find(isReadCondition);
    kept.conditions = ready !== undefined ? [ready] : [];
  }
  const history = status.history;
  const latest = kind === 'HelmRelease' && Array.isArray(history) ? latestHelmRelease(history[0]) : undefined;
  return latest !== undefined ? { ...kept, history: [latest] } : kept;
}

/**
 * Default transform: drops what no controller here reads but can be most of an object's size:
 * metadata.managedFields, kubectl's last-applied-configuration annotation, and on Flux objects
 * status.inventory / status.history (Flux's bookkeeping; of a HelmRelease's history only the
 * newest Helm release's revision, chart version and values digest stay); on the Flux kinds
 * stackflux manages every status field but those FLUX_STATUS_READ names, and every condition but
 * Ready. Other fields stay:
 * templates may read any field of a Cluster.
 */
export function leanObject<T extends KubeObject>(obj: KubeObject): T {
  const annotations = obj.metadata?.annotations;
  const lastApplied = annotations !== undefined && LAST_APPLIED_ANNOTATION in annotations;
  const status = obj.status as Record<string, unknown> | undefined;
  const fluxStatus = status !== undefined && isFluxObject(obj) && leanFluxStatusDrops(obj.kind, status);
  if (!lastApplied && !fluxStatus) return stripManagedFields<T>(obj);
  const { managedFields: _m, ...metadata } = obj.metadata;
  const out: KubeObject = { ...obj, metadata };
  if (lastApplied) {
    const { [LAST_APPLIED_ANNOTATION]: _drop, ...rest } = annotations;
    out.metadata = { ...metadata, annotations: rest };
  }
  if (fluxStatus) out.status = leanFluxStatus(obj.kind, status);
  return out as T;
}

export function objectKey(obj: KubeObject): string {
  const ns = obj.metadata.namespace;
  const name = obj.metadata.name ?? '';
  return ns ? `${ns}/${name}` : name;
}

class WatchdogFired extends Error {
  constructor(ms: number) {
    super(`watch silent for ${ms} ms; restarting it`);
    this.name = 'WatchdogFired';
  }
}

class WatchExpired extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WatchExpired';
  }
}

export class Informer<T extends KubeObject = KubeObject> {
  readonly apiVersion: string;
  readonly kind: string;
  readonly namespace: string | undefined;
  readonly stats: InformerStats = {
    lists: 0,
    watches: 0,
    gone: 0,
    errors: 0,
    watchdogRestarts: 0,
    events: 0,
  };
  private readonly opts: InformerOptions<T>;
  private readonly client: KubeClient;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly transform: (obj: KubeObject) => T;
  private readonly intern: boolean;
  private readonly store = new Map<string, T>();
  private readonly handlers: EventHandler<T>[] = [];
  private readonly indexers = new Map<
    string,
    { fn: IndexFunc<T>; index: Map<string, Set<string>>; byKey: Map<string, string[]> }
  >();
  private resourceVersion: string | undefined;
  private synced = false;
  /** Why the last LIST/WATCH failed, until a LIST succeeds again. */
  private failure: string | undefined;
  private syncWaiters: Array<() => void> = [];
  private running: Promise<void> | undefined;
  private readonly stopController = new AbortController();
  private watchAbort: AbortController | undefined;
  private needList = true;

  constructor(opts: InformerOptions<T>) {
    this.opts = opts;
    this.client = opts.client;
    this.apiVersion = opts.apiVersion;
    this.kind = opts.kind;
    this.namespace = opts.namespace;
    this.clock = opts.clock ?? realClock;
    this.log = (opts.logger ?? silentLogger()).child({ informer: `${opts.apiVersion}/${opts.kind}` });
    const transform = opts.transform ?? ((o: KubeObject) => leanObject<T>(o));
    this.intern = opts.internStrings !== false;
    this.transform = this.intern ? (o) => internStrings(transform(o), sharedStrings) : transform;
  }

  /** Registers handlers. If the cache already holds objects, onAdd is called for each of them. */
  addEventHandler(h: EventHandler<T>): void {
    this.handlers.push(h);
    if (h.onAdd) for (const obj of this.store.values()) this.call(() => h.onAdd?.(obj));
  }

  /** Adds an index (e.g. Clusters by spec.topology.class); indexes existing objects too. */
  addIndexer(name: string, fn: IndexFunc<T>): void {
    const entry = { fn, index: new Map<string, Set<string>>(), byKey: new Map<string, string[]>() };
    this.indexers.set(name, entry);
    for (const [key, obj] of this.store) this.indexOne(entry, key, obj);
  }

  byIndex(name: string, value: string): T[] {
    const entry = this.indexers.get(name);
    if (!entry) throw new Error(`no index ${name} on ${this.kind} informer`);
    const keys = entry.index.get(value);
    if (!keys) return [];
    const out: T[] = [];
    for (const k of keys) {
      const o = this.store.get(k);
      if (o) out.push(o);
    }
    return out;
  }

  get(key: string): T | undefined {
    return this.store.get(key);
  }

  getByName(name: string, namespace?: string): T | undefined {
    return this.store.get(namespace ? `${namespace}/${name}` : name);
  }

  list(): T[] {
    return [...this.store.values()];
  }

  keys(): string[] {
    return [...this.store.keys()];
  }

  size(): number {
    return this.store.size;
  }

  hasSynced(): boolean {
    return this.synced;
  }

  /** Why the last LIST/WATCH failed (e.g. 403 Forbidden), until a LIST succeeds again. */
  lastFailure(): string | undefined {
    return this.failure;
  }

  /** The resourceVersion the next watch would start from (opaque). */
  lastResourceVersion(): string | undefined {
    return this.resourceVersion;
  }

  /** Resolves once the first LIST has been stored (or at once when stopped). */
  waitForSync(signal?: AbortSignal): Promise<void> {
    if (this.synced || this.stopController.signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      this.syncWaiters.push(resolve);
      signal?.addEventListener('abort', () => resolve(), { once: true });
    });
  }

  start(): void {
    if (this.running) return;
    this.running = this.run();
  }

  async stop(): Promise<void> {
    this.stopController.abort();
    this.watchAbort?.abort();
    for (const w of this.syncWaiters.splice(0)) w();
    await this.running;
  }

  /**
   * Fault injection for tests: end the current watch now and start the next one from
   * `fromResourceVersion` (default: where it was). A stale version exercises the 410 path.
   */
  restartWatch(fromResourceVersion?: string): void {
    if (fromResourceVersion !== undefined) this.resourceVersion = fromResourceVersion;
    this.watchAbort?.abort(new Error('watch restart requested'));
  }

  private async run(): Promise<void> {
    const stop = this.stopController.signal;
    let failures = 0;
    while (!stop.aborted) {
      try {
        if (this.needList || this.resourceVersion === undefined) {
          await this.relist();
          this.needList = false;
        }
        await this.watchOnce();
        failures = 0;
      } catch (err) {
        if (stop.aborted) break;
        if (isGone(err) || err instanceof WatchExpired) {
          this.stats.gone += 1;
          this.needList = true;
          this.log.info(errorFields(err), 'resourceVersion expired (410 Gone); relisting');
          continue;
        }
        if (err instanceof WatchdogFired) {
          this.stats.watchdogRestarts += 1;
          this.log.warn(errorFields(err), 'watch watchdog fired');
          continue;
        }
        if (err instanceof Error && err.message === 'watch restart requested') continue;
        if (
          this.watchAbort?.signal.reason instanceof Error &&
          this.watchAbort.signal.reason.message === 'watch restart requested'
        ) {
          continue;
        }
        failures += 1;
        this.stats.errors += 1;
        this.failure = err instanceof Error ? err.message : String(err);
        const delay = this.backoff(failures);
        this.log.warn({ ...errorFields(err), retryInMs: delay, failures }, 'list/watch failed; retrying');
        await sleep(this.clock, delay, stop);
      }
    }
  }

  private backoff(failures: number): number {
    const initial = this.opts.backoffInitialMs ?? 800;
    const max = this.opts.backoffMaxMs ?? 30_000;
    const base = Math.min(max, initial * 2 ** Math.min(30, failures - 1));
    // Jitter up to +10 % so many informers do not retry in lockstep.
    return Math.round(base * (1 + Math.random() * 0.1));
  }

  private async relist(): Promise<void> {
    this.stats.lists += 1;
    const pages = this.client.listPages<KubeObject>(this.apiVersion, this.kind, {
      ...(this.namespace ? { namespace: this.namespace } : {}),
      ...(this.opts.labelSelector ? { labelSelector: this.opts.labelSelector } : {}),
      ...(this.opts.fieldSelector ? { fieldSelector: this.opts.fieldSelector } : {}),
      limit: this.opts.pageSize ?? DEFAULT_PAGE_SIZE,
      ...(this.opts.metadataOnly ? { metadataOnly: true } : {}),
      signal: this.stopController.signal,
    });
    // Each page is transformed as it arrives: the full objects of one page are garbage before the
    // next is read (listing 10,000 Clusters whole first held ~200 MB of them at once).
    const seen = new Set<string>();
    let resourceVersion: string | undefined;
    for await (const page of pages) {
      for (const raw of page.items) {
        const obj = this.transform(raw);
        const key = objectKey(obj);
        seen.add(key);
        this.upsert(key, obj);
      }
      resourceVersion = page.metadata.resourceVersion;
    }
    for (const [key, old] of [...this.store]) {
      if (!seen.has(key)) this.remove(key, old);
    }
    this.resourceVersion = resourceVersion;
    this.failure = undefined;
    if (!this.synced) {
      this.synced = true;
      for (const w of this.syncWaiters.splice(0)) w();
      this.log.info({ objects: this.store.size }, 'cache synced');
    }
  }

  private async watchOnce(): Promise<void> {
    const abort = new AbortController();
    this.watchAbort = abort;
    const onStop = (): void => abort.abort();
    this.stopController.signal.addEventListener('abort', onStop, { once: true });
    // stop() may have run between the relist and here: its abort event has already fired, and
    // without this check the watch would live until its server timeout (5–10 minutes).
    if (this.stopController.signal.aborted) abort.abort();
    const watchdogMs = this.opts.watchdogMs ?? 150_000;
    let timer: TimerHandle | undefined;
    let watchdogFired = false;
    const arm = (): void => {
      if (timer !== undefined) this.clock.clearTimeout(timer);
      timer = this.clock.setTimeout(() => {
        watchdogFired = true;
        abort.abort(new WatchdogFired(watchdogMs));
      }, watchdogMs);
    };
    this.stats.watches += 1;
    arm();
    try {
      const timeoutSeconds = this.opts.watchTimeoutSeconds ?? Math.floor(300 + Math.random() * 300);
      const events = this.client.watch<KubeObject>(this.apiVersion, this.kind, {
        ...(this.namespace ? { namespace: this.namespace } : {}),
        ...(this.opts.labelSelector ? { labelSelector: this.opts.labelSelector } : {}),
        ...(this.opts.fieldSelector ? { fieldSelector: this.opts.fieldSelector } : {}),
        ...(this.resourceVersion !== undefined ? { resourceVersion: this.resourceVersion } : {}),
        allowWatchBookmarks: true,
        timeoutSeconds,
        ...(this.opts.metadataOnly ? { metadataOnly: true } : {}),
        signal: abort.signal,
      });
      for await (const ev of events) {
        arm();
        this.handleEvent(ev);
      }
    } catch (err) {
      if (watchdogFired) throw new WatchdogFired(watchdogMs);
      const reason: unknown = abort.signal.reason;
      if (abort.signal.aborted && reason instanceof Error && reason.message === 'watch restart requested') {
        throw reason;
      }
      throw err;
    } finally {
      if (timer !== undefined) this.clock.clearTimeout(timer);
      this.stopController.signal.removeEventListener('abort', onStop);
    }
  }

  private handleEvent(ev: WatchEvent<KubeObject>): void {
    this.stats.events += 1;
    if (ev.type === 'ERROR') {
      const status = ev.object as unknown as { code?: number; reason?: string; message?: string };
      if (status.code === 410 || status.reason === 'Expired' || status.reason === 'Gone') {
        throw new WatchExpired(status.message ?? 'resourceVersion too old');
      }
      throw new ApiError(
        'WATCH',
        `${this.apiVersion}/${this.kind}`,
        status.code ?? 500,
        JSON.stringify(ev.object),
      );
    }
    const rv = ev.object?.metadata?.resourceVersion;
    if (ev.type === 'BOOKMARK') {
      if (rv) this.resourceVersion = rv;
      return;
    }
    const raw: KubeObject = { ...ev.object, apiVersion: this.apiVersion, kind: this.kind };
    const obj = this.transform(raw);
    const key = objectKey(obj);
    if (ev.type === 'DELETED') {
      const old = this.store.get(key);
      this.remove(key, old ?? obj);
    } else {
      this.upsert(key, obj);
    }
    if (rv) this.resourceVersion = rv;
  }

  private upsert(key: string, obj: T): void {
    const old = this.store.get(key);
    if (old && old.metadata.resourceVersion === obj.metadata.resourceVersion) return;
    this.store.set(key, obj);
    for (const entry of this.indexers.values()) this.indexOne(entry, key, obj);
    for (const h of this.handlers) {
      if (old) this.call(() => h.onUpdate?.(old, obj));
      else this.call(() => h.onAdd?.(obj));
    }
  }

  private remove(key: string, obj: T): void {
    const existed = this.store.delete(key);
    for (const entry of this.indexers.values()) this.unindexOne(entry, key);
    if (!existed) return;
    for (const h of this.handlers) this.call(() => h.onDelete?.(obj));
  }

  private indexOne(
    entry: { fn: IndexFunc<T>; index: Map<string, Set<string>>; byKey: Map<string, string[]> },
    key: string,
    obj: T,
  ): void {
    this.unindexOne(entry, key);
    let values: string[] = [];
    try {
      values = entry.fn(obj);
      if (this.intern) values = values.map((v) => sharedStrings.intern(v));
    } catch (err) {
      this.log.error({ key, ...errorFields(err) }, 'index function failed');
    }
    entry.byKey.set(key, values);
    for (const v of values) {
      let set = entry.index.get(v);
      if (!set) {
        set = new Set();
        entry.index.set(v, set);
      }
      set.add(key);
    }
  }

  private unindexOne(
    entry: { index: Map<string, Set<string>>; byKey: Map<string, string[]> },
    key: string,
  ): void {
    const old = entry.byKey.get(key);
    if (!old) return;
    entry.byKey.delete(key);
    for (const v of old) {
      const set = entry.index.get(v);
      set?.delete(key);
      if (set && set.size === 0) entry.index.delete(v);
    }
  }

  private call(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.log.error(errorFields(err), 'event handler failed');
    }
  }
}

/** What one shared informer watches: a namespace (default all), selectors, metadata only or whole objects. */
export interface InformerScope {
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
  metadataOnly?: boolean;
}

/** One informer per (apiVersion, kind, namespace, selectors, metadataOnly), shared by every controller. */
export class SharedInformers {
  private readonly informers = new Map<string, Informer<KubeObject>>();
  /** Informers created on demand for kinds found at run time (they do not gate readiness). */
  private readonly optional = new Set<Informer<KubeObject>>();
  private readonly defaults: Omit<InformerOptions<KubeObject>, 'apiVersion' | 'kind'>;
  private started = false;

  constructor(defaults: Omit<InformerOptions<KubeObject>, 'apiVersion' | 'kind'>) {
    this.defaults = defaults;
  }

  informerFor<T extends KubeObject = KubeObject>(
    apiVersion: string,
    kind: string,
    o: InformerScope & { optional?: boolean } = {},
  ): Informer<T> {
    const { optional, ...selectors } = o;
    const key = JSON.stringify([
      apiVersion,
      kind,
      o.namespace ?? '',
      o.labelSelector ?? '',
      o.fieldSelector ?? '',
      o.metadataOnly === true,
    ]);
    let inf = this.informers.get(key);
    if (!inf) {
      inf = new Informer<KubeObject>({ ...this.defaults, ...selectors, apiVersion, kind });
      this.informers.set(key, inf);
      if (optional === true) this.optional.add(inf);
      if (this.started) inf.start();
    } else if (optional !== true) {
      this.optional.delete(inf);
    }
    return inf as unknown as Informer<T>;
  }

  start(): void {
    this.started = true;
    for (const inf of this.informers.values()) inf.start();
  }

  /**
   * Every informer synced, except optional ones: a kind whose LIST keeps failing (not served any
   * more, not allowed) must not keep the controller unready.
   */
  hasSynced(): boolean {
    for (const inf of this.informers.values()) if (!this.optional.has(inf) && !inf.hasSynced()) return false;
    return true;
  }

  async waitForSync(signal?: AbortSignal): Promise<void> {
    await Promise.all(
      [...this.informers.values()].filter((i) => !this.optional.has(i)).map((i) => i.waitForSync(signal)),
    );
  }

  async stop(): Promise<void> {
    await Promise.all([...this.informers.values()].map((i) => i.stop()));
  }

  all(): Informer<KubeObject>[] {
    return [...this.informers.values()];
  }
}
