// One Kubernetes client per process: kubeconfig (flag / KUBECONFIG / in-cluster), a keep-alive
// HTTPS agent, a client-side QPS/burst limit, and a small typed request layer for any resource
// (GET / LIST / WATCH / server-side apply / status apply / delete / finalizers), with discovery of
// plural names cached per group-version.
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { ObjectMeta as ApiObjectMeta, OwnerReference } from '../api/meta.ts';
import { type Clock, realClock, sleep } from './clock.ts';
import { type KubeConfigSource, loadKubeConfig } from './kubeconfig.ts';
import { BucketRateLimiter } from './workqueue.ts';

export const FIELD_MANAGER = 'stackflux';

export type { OwnerReference };

/** metav1.ObjectMeta as the API server returns it: api/meta.ts's fields, all optional, and the rest. */
export interface ObjectMeta extends Partial<ApiObjectMeta> {
  generateName?: string;
  managedFields?: unknown[];
  [key: string]: unknown;
}

export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  [key: string]: unknown;
}

export interface ObjectList<T extends KubeObject = KubeObject> {
  items: T[];
  metadata: { resourceVersion?: string; continue?: string };
}

export interface WatchEvent<T extends KubeObject = KubeObject> {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: T;
}

/** Sends of one request whose pooled connection the server had closed (see KubeClient.open). */
const STALE_CONNECTION_ATTEMPTS = 3;

/** A failed API call: HTTP status plus the decoded metav1.Status when there is one. */
export class ApiError extends Error {
  readonly status: number;
  readonly reason: string;
  readonly body: string;

  constructor(method: string, path: string, status: number, body: string) {
    let reason = '';
    let message = body.slice(0, 500);
    try {
      const s = JSON.parse(body) as { reason?: unknown; message?: unknown };
      if (typeof s.reason === 'string') reason = s.reason;
      if (typeof s.message === 'string') message = s.message;
    } catch {}
    super(`${method} ${path}: ${status}${reason ? ` ${reason}` : ''}: ${message}`);
    this.name = 'ApiError';
    this.status = status;
    this.reason = reason;
    this.body = body;
  }
}

export function isNotFound(err: unknown): boolean {
  return err instanceof ApiError && err.status === 404;
}
export function isConflict(err: unknown): boolean {
  return err instanceof ApiError && err.status === 409;
}
export function isGone(err: unknown): boolean {
  return err instanceof ApiError && err.status === 410;
}

export interface ResourceInfo {
  group: string;
  version: string;
  apiVersion: string;
  kind: string;
  plural: string;
  namespaced: boolean;
}

export function collectionPath(res: ResourceInfo, namespace?: string): string {
  const base = res.group ? `/apis/${res.group}/${res.version}` : `/api/${res.version}`;
  return res.namespaced && namespace
    ? `${base}/namespaces/${encodeURIComponent(namespace)}/${res.plural}`
    : `${base}/${res.plural}`;
}

export function objectPath(
  res: ResourceInfo,
  name: string,
  namespace?: string,
  subresource?: string,
): string {
  if (res.namespaced && !namespace) throw new Error(`${res.kind} ${name}: namespace required`);
  const p = `${collectionPath(res, namespace)}/${encodeURIComponent(name)}`;
  return subresource ? `${p}/${subresource}` : p;
}

function splitApiVersion(apiVersion: string): { group: string; version: string } {
  const i = apiVersion.indexOf('/');
  return i < 0
    ? { group: '', version: apiVersion }
    : { group: apiVersion.slice(0, i), version: apiVersion.slice(i + 1) };
}

export type Query = Record<string, string | number | boolean | undefined>;

function queryString(q: Query | undefined): string {
  if (!q) return '';
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) if (v !== undefined) p.set(k, String(v));
  const s = p.toString();
  return s ? `?${s}` : '';
}

export interface ClientOptions {
  /** Path of a kubeconfig file; else $KUBECONFIG, else in-cluster, else ~/.kube/config. */
  kubeconfig?: string;
  context?: string;
  /** Client-side limit for non-watch requests (controller-runtime default 20 qps / burst 30). */
  qps?: number;
  burst?: number;
  userAgent?: string;
  clock?: Clock;
  /** Per-request timeout for non-watch requests (ms). */
  timeoutMs?: number;
}

export { type KubeConfigSource, loadKubeConfig };

export interface RequestOptions {
  query?: Query;
  /** Accept header (default application/json); e.g. PartialObjectMetadata for metadata-only reads. */
  accept?: string;
  body?: unknown;
  contentType?: string;
  signal?: AbortSignal;
  /** Skip the client-side rate limit (watches, lease renewals). */
  unlimited?: boolean;
}

export interface ListOptions {
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
  limit?: number;
  continue?: string;
  resourceVersion?: string;
  resourceVersionMatch?: string;
  /** Only metadata (PartialObjectMetadataList): no spec, status or data crosses the wire. */
  metadataOnly?: boolean;
  signal?: AbortSignal;
}

/** Accept headers of metadata-only reads (what client-go's metadata client sends). */
export const ACCEPT_METADATA_LIST = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1';
export const ACCEPT_METADATA = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1';

export interface WatchOptions {
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
  resourceVersion?: string;
  allowWatchBookmarks?: boolean;
  /** Server-side timeout of the watch in seconds. */
  timeoutSeconds?: number;
  /** Events carry PartialObjectMetadata (metadata only). */
  metadataOnly?: boolean;
  signal?: AbortSignal;
}

export interface ApplyOptions {
  fieldManager?: string;
  /** Take ownership of conflicting fields. Only for fields stackflux owns. */
  force?: boolean;
  dryRun?: boolean;
  signal?: AbortSignal;
}

const WRITE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** How often one request is sent again because the server said Retry-After (client-go: 10). */
export const MAX_RETRY_AFTER = 10;
/** The longest wait a Retry-After gets; a larger (or absurd) value waits this long. */
export const MAX_RETRY_AFTER_MS = 60_000;

/**
 * How long to wait before sending a request again, from its answer: for 429 Too Many Requests
 * and 500–504 that carry Retry-After in seconds (client-go's checkWait); undefined otherwise
 * (the error goes to the caller). A Retry-After of 0 waits 1 s, so such a server is not hammered.
 */
export function retryAfterMs(status: number, header: string | string[] | undefined): number | undefined {
  if (status !== 429 && (status < 500 || status > 504)) return undefined;
  const text = Array.isArray(header) ? header[0] : header;
  if (text === undefined || !/^\s*\d+\s*$/.test(text)) return undefined;
  const seconds = Number(text);
  return Math.min(Math.max(seconds, 1) * 1000, MAX_RETRY_AFTER_MS);
}

/** The resource of an API path: plural, plus "/subresource"; "other" for discovery and the like. */
export function resourceOfPath(path: string): string {
  const parts = (path.split('?')[0] ?? '').split('/').filter((p) => p !== '');
  let i = parts[0] === 'api' ? 2 : parts[0] === 'apis' ? 3 : -1;
  if (i < 0 || i >= parts.length) return 'other';
  if (parts[i] === 'namespaces' && parts.length > i + 2) i += 2;
  const sub = parts[i + 2];
  return sub !== undefined ? `${parts[i]}/${sub}` : (parts[i] ?? 'other');
}

export type PropagationPolicy = 'Foreground' | 'Background' | 'Orphan';

export class KubeClient {
  readonly config: KubeConfigSource;
  readonly server: string;
  private readonly agent: HttpsAgent | HttpAgent;
  private readonly isHttps: boolean;
  private readonly tls: Record<string, unknown> = {};
  private staticHeaders: Record<string, string> | undefined;
  private readonly dynamicAuth: boolean;
  private readonly limiter: BucketRateLimiter;
  private readonly clock: Clock;
  private readonly userAgent: string;
  private readonly timeoutMs: number;
  private readonly discovery = new Map<string, Promise<ResourceInfo[]>>();
  /** Requests sent, by "METHOD CODE RESOURCE" (code 0: no response); watches count as WATCH. */
  private readonly counts = new Map<string, number>();

  constructor(config: KubeConfigSource, opts: ClientOptions = {}) {
    this.config = config;
    const cluster = config.getCurrentCluster();
    if (!cluster) throw new Error('kubeconfig has no current cluster');
    this.server = cluster.server.replace(/\/+$/, '');
    this.isHttps = this.server.startsWith('https:');
    this.clock = opts.clock ?? realClock;
    this.limiter = new BucketRateLimiter(opts.qps ?? 20, opts.burst ?? 30, this.clock);
    this.userAgent = opts.userAgent ?? 'stackflux';
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    const user = config.getCurrentUser();
    // Exec plugins, auth providers and token files (rotated) are asked again for every request.
    const lean = config as Partial<{ hasDynamicAuth(): boolean }>;
    this.dynamicAuth =
      typeof lean.hasDynamicAuth === 'function'
        ? lean.hasDynamicAuth()
        : Boolean(user && (user.exec || user.authProvider));
    const agentOpts = { keepAlive: true, maxSockets: 100 };
    this.agent = this.isHttps ? new HttpsAgent(agentOpts) : new HttpAgent(agentOpts);
  }

  /** TLS material and auth headers from the kubeconfig; re-read per request for exec/token-file auth. */
  private async connectionOptions(): Promise<{
    headers: Record<string, string>;
    tls: Record<string, unknown>;
  }> {
    if (this.staticHeaders && !this.dynamicAuth) return { headers: this.staticHeaders, tls: this.tls };
    const o: { headers?: Record<string, unknown>; [k: string]: unknown } = {};
    await this.config.applyToHTTPSOptions(o);
    for (const k of ['ca', 'cert', 'key', 'pfx', 'passphrase', 'rejectUnauthorized', 'servername']) {
      if (o[k] !== undefined) this.tls[k] = o[k];
    }
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(o.headers ?? {})) if (v !== undefined) headers[k] = String(v);
    if (typeof o.auth === 'string') headers.Authorization = `Basic ${Buffer.from(o.auth).toString('base64')}`;
    this.staticHeaders = headers;
    return { headers, tls: this.tls };
  }

  private async open(
    method: string,
    path: string,
    opts: RequestOptions,
    timeoutMs: number,
  ): Promise<IncomingMessage> {
    if (!opts.unlimited) {
      const delay = this.limiter.when('');
      if (delay > 0) await sleep(this.clock, delay, opts.signal);
    }
    opts.signal?.throwIfAborted();
    const { headers, tls } = await this.connectionOptions();
    const url = `${this.server}${path}${queryString(opts.query)}`;
    let payload: string | undefined;
    if (opts.body !== undefined)
      payload = typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
    const reqHeaders: Record<string, string> = {
      ...headers,
      accept: opts.accept ?? 'application/json',
      'user-agent': this.userAgent,
    };
    if (payload !== undefined) {
      reqHeaders['content-type'] = opts.contentType ?? 'application/json';
      reqHeaders['content-length'] = String(Buffer.byteLength(payload));
    }
    const verb = method === 'GET' && opts.query?.watch === true ? 'WATCH' : method;
    const resource = resourceOfPath(path);
    // A pooled keep-alive connection the server closed as this request went out fails before any
    // answer (ECONNRESET, EPIPE). As Go's transport (client-go) does, such a request is sent again
    // on another connection; not a create (POST), which the server may have received.
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.send({
          url,
          method,
          path,
          headers: reqHeaders,
          tls,
          payload,
          opts,
          timeoutMs,
          verb,
          resource,
        });
      } catch (err) {
        const code = (err as { code?: unknown }).code;
        const staleConnection =
          (err as { reusedSocket?: unknown }).reusedSocket === true &&
          (code === 'ECONNRESET' || code === 'EPIPE');
        if (!staleConnection || method === 'POST' || attempt >= STALE_CONNECTION_ATTEMPTS) throw err;
        opts.signal?.throwIfAborted();
      }
    }
  }

  /** One HTTP request of open(); its error carries whether it went out on a pooled connection. */
  private send(r: {
    url: string;
    method: string;
    path: string;
    headers: Record<string, string>;
    tls: Awaited<ReturnType<KubeClient['connectionOptions']>>['tls'];
    payload: string | undefined;
    opts: RequestOptions;
    timeoutMs: number;
    verb: string;
    resource: string;
  }): Promise<IncomingMessage> {
    const { url, method, path, headers: reqHeaders, tls, payload, opts, timeoutMs, verb, resource } = r;
    return new Promise((resolve, reject) => {
      const options = {
        method,
        headers: reqHeaders,
        agent: this.agent,
        ...tls,
        ...(opts.signal ? { signal: opts.signal } : {}),
      };
      const onResponse = (res: IncomingMessage): void => {
        this.count(verb, res.statusCode ?? 0, resource);
        resolve(res);
      };
      const req = this.isHttps
        ? httpsRequest(url, options, onResponse)
        : httpRequest(url, options, onResponse);
      req.on('error', (err) => {
        this.count(verb, 0, resource);
        reject(Object.assign(err, { reusedSocket: req.reusedSocket }));
      });
      if (timeoutMs > 0) {
        req.setTimeout(timeoutMs, () =>
          req.destroy(new Error(`${method} ${path}: no response within ${timeoutMs} ms`)),
        );
      }
      if (payload !== undefined) req.write(payload);
      req.end();
    });
  }

  private count(verb: string, code: number, resource: string): void {
    const key = `${verb} ${code} ${resource}`;
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }

  private countsBy<K extends string>(
    keyOf: (method: string, code: number, resource: string) => K,
  ): Map<K, number> {
    const out = new Map<K, number>();
    for (const [k, n] of this.counts) {
      const [method = '', code = '0', resource = ''] = k.split(' ');
      const key = keyOf(method, Number(code), resource);
      out.set(key, (out.get(key) ?? 0) + n);
    }
    return out;
  }

  /**
   * Requests this client has sent: one entry per method (GET, WATCH, POST, PUT, PATCH, DELETE) and
   * HTTP status (0 when no response came), like client-go's rest_client_requests_total.
   */
  requestCounts(): Array<{ method: string; code: number; count: number }> {
    return [...this.countsBy((m, c) => `${m} ${c}`)].map(([k, count]) => {
      const [method = '', code = '0'] = k.split(' ');
      return { method, code: Number(code), count };
    });
  }

  /** Requests by method and resource ("clusteraddons", "clusteraddons/status", "events", …). */
  requestCountsByResource(): Array<{ method: string; resource: string; count: number }> {
    return [...this.countsBy((m, _c, r) => `${m} ${r}`)].map(([k, count]) => {
      const [method = '', resource = ''] = k.split(' ');
      return { method, resource, count };
    });
  }

  /** How many write requests (POST, PUT, PATCH, DELETE) this client has sent, whatever their outcome. */
  writeCount(): number {
    let n = 0;
    for (const { method, count } of this.requestCounts()) if (WRITE_METHODS.has(method)) n += count;
    return n;
  }

  /**
   * One request; JSON response decoded; non-2xx → ApiError. When the server asks to come back
   * later (429, or 5xx with Retry-After: API priority and fairness, a restarting server) the same
   * request is sent again after the time it names, at most MAX_RETRY_AFTER times, as client-go does.
   */
  async request<T>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      const res = await this.open(method, path, opts, this.timeoutMs);
      const chunks: Buffer[] = [];
      for await (const c of res) chunks.push(c as Buffer);
      const body = Buffer.concat(chunks).toString('utf8');
      const status = res.statusCode ?? 0;
      const wait = attempt < MAX_RETRY_AFTER ? retryAfterMs(status, res.headers['retry-after']) : undefined;
      if (wait !== undefined) {
        await sleep(this.clock, wait, opts.signal);
        opts.signal?.throwIfAborted();
        continue;
      }
      if (status < 200 || status >= 300) throw new ApiError(method, path, status, body);
      return (body ? JSON.parse(body) : undefined) as T;
    }
  }

  /** Streams the events of a watch; ends when the server closes it. Non-2xx → ApiError. */
  async *watchPath<T extends KubeObject>(
    path: string,
    query: Query,
    signal?: AbortSignal,
    accept?: string,
  ): AsyncGenerator<WatchEvent<T>> {
    const res = await this.open(
      'GET',
      path,
      {
        query: { ...query, watch: true },
        unlimited: true,
        ...(signal ? { signal } : {}),
        ...(accept ? { accept } : {}),
      },
      0,
    );
    const status = res.statusCode ?? 0;
    if (status < 200 || status >= 300) {
      const chunks: Buffer[] = [];
      for await (const c of res) chunks.push(c as Buffer);
      throw new ApiError('WATCH', path, status, Buffer.concat(chunks).toString('utf8'));
    }
    let buffer = '';
    res.setEncoding('utf8');
    try {
      for await (const chunk of res) {
        buffer += chunk as string;
        let nl = buffer.indexOf('\n');
        while (nl >= 0) {
          const line = buffer.slice(0, nl).trim();
          buffer = buffer.slice(nl + 1);
          if (line) yield JSON.parse(line) as WatchEvent<T>;
          nl = buffer.indexOf('\n');
        }
      }
    } finally {
      res.destroy();
    }
    if (buffer.trim()) yield JSON.parse(buffer) as WatchEvent<T>;
  }

  /** Plural name and scope of apiVersion/kind, from discovery (cached; refreshed once on a miss). */
  async resource(apiVersion: string, kind: string): Promise<ResourceInfo> {
    for (const refresh of [false, true]) {
      if (refresh) this.discovery.delete(apiVersion);
      let list = this.discovery.get(apiVersion);
      if (!list) {
        list = this.discover(apiVersion);
        this.discovery.set(apiVersion, list);
        list.catch(() => this.discovery.delete(apiVersion));
      }
      const found = (await list).find((r) => r.kind === kind);
      if (found) return found;
    }
    throw new Error(`the server does not serve kind ${kind} in ${apiVersion}`);
  }

  private async discover(apiVersion: string): Promise<ResourceInfo[]> {
    const { group, version } = splitApiVersion(apiVersion);
    const path = group ? `/apis/${group}/${version}` : `/api/${version}`;
    const list = await this.request<{
      resources?: Array<{ name: string; kind: string; namespaced: boolean }>;
    }>('GET', path);
    return (list.resources ?? [])
      .filter((r) => !r.name.includes('/'))
      .map((r) => ({ group, version, apiVersion, kind: r.kind, plural: r.name, namespaced: r.namespaced }));
  }

  async get<T extends KubeObject = KubeObject>(
    apiVersion: string,
    kind: string,
    name: string,
    namespace?: string,
    signal?: AbortSignal,
  ): Promise<T | undefined> {
    const res = await this.resource(apiVersion, kind);
    try {
      return await this.request<T>('GET', objectPath(res, name, namespace), signal ? { signal } : {});
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /** One page of a LIST; items get apiVersion and kind filled in (the API leaves them out). */
  async list<T extends KubeObject = KubeObject>(
    apiVersion: string,
    kind: string,
    o: ListOptions = {},
  ): Promise<ObjectList<T>> {
    const res = await this.resource(apiVersion, kind);
    const list = await this.request<ObjectList<T>>('GET', collectionPath(res, o.namespace), {
      query: {
        labelSelector: o.labelSelector,
        fieldSelector: o.fieldSelector,
        limit: o.limit,
        continue: o.continue,
        resourceVersion: o.resourceVersion,
        resourceVersionMatch: o.resourceVersionMatch,
      },
      ...(o.metadataOnly ? { accept: ACCEPT_METADATA_LIST } : {}),
      ...(o.signal ? { signal: o.signal } : {}),
    });
    list.items = (list.items ?? []).map((item) => ({ ...item, apiVersion, kind }));
    return list;
  }

  /**
   * The pages of a LIST, one at a time (a consistent snapshot: every page carries the first page's
   * resourceVersion), so a caller that keeps a lean copy of each item holds one page of full
   * objects at a time, not the whole collection.
   */
  async *listPages<T extends KubeObject = KubeObject>(
    apiVersion: string,
    kind: string,
    o: ListOptions = {},
  ): AsyncGenerator<ObjectList<T>> {
    let cont: string | undefined;
    let resourceVersion: string | undefined;
    do {
      const page: ObjectList<T> = await this.list<T>(apiVersion, kind, {
        ...o,
        limit: o.limit ?? 500,
        ...(cont ? { continue: cont } : {}),
      });
      resourceVersion ??= page.metadata.resourceVersion;
      cont = page.metadata.continue || undefined;
      yield { items: page.items, metadata: resourceVersion !== undefined ? { resourceVersion } : {} };
    } while (cont);
  }

  /** Every page of a LIST; the resourceVersion is the first page's (a consistent snapshot). */
  async listAll<T extends KubeObject = KubeObject>(
    apiVersion: string,
    kind: string,
    o: ListOptions = {},
  ): Promise<ObjectList<T>> {
    const items: T[] = [];
    let resourceVersion: string | undefined;
    for await (const page of this.listPages<T>(apiVersion, kind, o)) {
      items.push(...page.items);
      resourceVersion = page.metadata.resourceVersion;
    }
    return { items, metadata: resourceVersion !== undefined ? { resourceVersion } : {} };
  }

  async *watch<T extends KubeObject = KubeObject>(
    apiVersion: string,
    kind: string,
    o: WatchOptions = {},
  ): AsyncGenerator<WatchEvent<T>> {
    const res = await this.resource(apiVersion, kind);
    yield* this.watchPath<T>(
      collectionPath(res, o.namespace),
      {
        labelSelector: o.labelSelector,
        fieldSelector: o.fieldSelector,
        resourceVersion: o.resourceVersion,
        allowWatchBookmarks: o.allowWatchBookmarks ?? true,
        timeoutSeconds: o.timeoutSeconds,
      },
      o.signal,
      o.metadataOnly ? ACCEPT_METADATA : undefined,
    );
  }

  async create<T extends KubeObject>(obj: T, signal?: AbortSignal): Promise<T & KubeObject> {
    const res = await this.resource(obj.apiVersion, obj.kind);
    return this.request<T>('POST', collectionPath(res, obj.metadata.namespace), {
      body: obj,
      query: { fieldManager: FIELD_MANAGER },
      ...(signal ? { signal } : {}),
    });
  }

  /** PUT (optimistic concurrency through metadata.resourceVersion). */
  async update<T extends KubeObject>(obj: T, signal?: AbortSignal): Promise<T & KubeObject> {
    const res = await this.resource(obj.apiVersion, obj.kind);
    return this.request<T>('PUT', objectPath(res, this.nameOf(obj), obj.metadata.namespace), {
      body: obj,
      query: { fieldManager: FIELD_MANAGER },
      ...(signal ? { signal } : {}),
    });
  }

  /** Server-side apply of obj (its fields = what stackflux owns) with field manager "stackflux". */
  async apply<T extends KubeObject>(obj: T, o: ApplyOptions = {}): Promise<T & KubeObject> {
    return this.applyTo(obj, undefined, o);
  }

  /** Server-side apply to the status subresource (does not bump metadata.generation). */
  async applyStatus<T extends KubeObject>(obj: T, o: ApplyOptions = {}): Promise<T & KubeObject> {
    return this.applyTo(obj, 'status', o);
  }

  private async applyTo<T extends KubeObject>(
    obj: T,
    sub: string | undefined,
    o: ApplyOptions,
  ): Promise<T & KubeObject> {
    const res = await this.resource(obj.apiVersion, obj.kind);
    const { managedFields: _m, resourceVersion: _rv, ...metadata } = obj.metadata;
    return this.request<T>('PATCH', objectPath(res, this.nameOf(obj), obj.metadata.namespace, sub), {
      body: { ...obj, metadata },
      contentType: 'application/apply-patch+yaml',
      query: {
        fieldManager: o.fieldManager ?? FIELD_MANAGER,
        force: o.force ?? false,
        dryRun: o.dryRun ? 'All' : undefined,
      },
      ...(o.signal ? { signal: o.signal } : {}),
    });
  }

  /** JSON merge patch; include metadata.resourceVersion in the patch to make it conditional. */
  async mergePatch<T extends KubeObject>(
    apiVersion: string,
    kind: string,
    name: string,
    namespace: string | undefined,
    patch: unknown,
    o: { subresource?: string; signal?: AbortSignal } = {},
  ): Promise<T> {
    const res = await this.resource(apiVersion, kind);
    return this.request<T>('PATCH', objectPath(res, name, namespace, o.subresource), {
      body: patch,
      contentType: 'application/merge-patch+json',
      query: { fieldManager: FIELD_MANAGER },
      ...(o.signal ? { signal: o.signal } : {}),
    });
  }

  /** Deletes; false when it was already gone. Preconditions make it conditional on uid/resourceVersion. */
  async delete(
    apiVersion: string,
    kind: string,
    name: string,
    namespace?: string,
    o: {
      propagationPolicy?: PropagationPolicy;
      preconditions?: { uid?: string; resourceVersion?: string };
      signal?: AbortSignal;
    } = {},
  ): Promise<boolean> {
    const res = await this.resource(apiVersion, kind);
    try {
      await this.request('DELETE', objectPath(res, name, namespace), {
        body: {
          apiVersion: 'v1',
          kind: 'DeleteOptions',
          propagationPolicy: o.propagationPolicy ?? 'Background',
          ...(o.preconditions ? { preconditions: o.preconditions } : {}),
        },
        ...(o.signal ? { signal: o.signal } : {}),
      });
      return true;
    } catch (err) {
      if (isNotFound(err)) return false;
      throw err;
    }
  }

  /** Adds a finalizer, conditional on obj's resourceVersion (409 Conflict if it changed). */
  async addFinalizer<T extends KubeObject>(
    obj: T,
    finalizer: string,
    signal?: AbortSignal,
  ): Promise<T & KubeObject> {
    const current = obj.metadata.finalizers ?? [];
    if (current.includes(finalizer)) return obj;
    return this.setFinalizers(obj, [...current, finalizer], signal);
  }

  /** Removes a finalizer, conditional on obj's resourceVersion (409 Conflict if it changed). */
  async removeFinalizer<T extends KubeObject>(
    obj: T,
    finalizer: string,
    signal?: AbortSignal,
  ): Promise<T & KubeObject> {
    const current = obj.metadata.finalizers ?? [];
    if (!current.includes(finalizer)) return obj;
    return this.setFinalizers(
      obj,
      current.filter((f) => f !== finalizer),
      signal,
    );
  }

  private setFinalizers<T extends KubeObject>(
    obj: T,
    finalizers: string[],
    signal?: AbortSignal,
  ): Promise<T> {
    const rv = obj.metadata.resourceVersion;
    if (!rv)
      throw new Error(
        `${obj.kind} ${this.nameOf(obj)}: resourceVersion required to change finalizers safely`,
      );
    return this.mergePatch<T>(
      obj.apiVersion,
      obj.kind,
      this.nameOf(obj),
      obj.metadata.namespace,
      { metadata: { finalizers, resourceVersion: rv } },
      signal ? { signal } : {},
    );
  }

  private nameOf(obj: KubeObject): string {
    const name = obj.metadata.name;
    if (!name) throw new Error(`${obj.kind}: metadata.name is required`);
    return name;
  }

  /** Closes idle keep-alive connections (end of process / tests). */
  close(): void {
    this.agent.destroy();
  }
}

/**
 * Sets obj's controller owner reference to owner (controller and blockOwnerDeletion true), like
 * controllerutil.SetControllerReference. Cross-namespace owners are refused (garbage collection
 * would delete the dependent). Returns a new object.
 */
export function withControllerReference<T extends KubeObject>(obj: T, owner: KubeObject): T {
  const { name, uid, namespace } = owner.metadata;
  if (!name || !uid) throw new Error(`owner ${owner.kind} must have name and uid`);
  if (namespace && obj.metadata.namespace !== namespace) {
    throw new Error(
      `cross-namespace owner reference: ${owner.kind} ${namespace}/${name} cannot own an object in ${obj.metadata.namespace ?? '(cluster scope)'}`,
    );
  }
  const others = (obj.metadata.ownerReferences ?? []).filter((r) => {
    if (r.uid === uid) return false;
    if (r.controller)
      throw new Error(`${obj.kind} ${obj.metadata.name} already has controller ${r.kind} ${r.name}`);
    return true;
  });
  const ref: OwnerReference = {
    apiVersion: owner.apiVersion,
    kind: owner.kind,
    name,
    uid,
    controller: true,
    blockOwnerDeletion: true,
  };
  return { ...obj, metadata: { ...obj.metadata, ownerReferences: [...others, ref] } };
}

let shared: KubeClient | undefined;

/** The process-wide client, created on first use from opts (later opts are ignored). */
export function sharedClient(opts: ClientOptions = {}): KubeClient {
  if (!shared) {
    const kc = loadKubeConfig({
      ...(opts.kubeconfig ? { kubeconfig: opts.kubeconfig } : {}),
      ...(opts.context ? { context: opts.context } : {}),
    });
    shared = new KubeClient(kc, opts);
  }
  return shared;
}
