// Events (events.k8s.io/v1) on reconciled objects, for what a human should see in
// `kubectl describe`. Repeats are correlated like client-go's event recorder: the same
// (object, type, reason, action, note) seen again within the window does not create another
// Event; it becomes a series on the first one (series.count / series.lastObservedTime, PATCHed).
// The first repeat is written at once; later repeats are coalesced into at most one PATCH per
// seriesFlushMs (and a final one on flush()). The correlation cache is bounded (least recently
// used entries go first). Recording never throws and never rejects: failures are logged.
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { isNotFound, type KubeClient, type KubeObject } from './client.ts';
import { type Clock, realClock, type TimerHandle } from './clock.ts';
import { errorFields, type Logger, silentLogger } from './logging.ts';

export const EVENTS_API_VERSION = 'events.k8s.io/v1';
export const REPORTING_CONTROLLER = 'stackflux';

export type EventType = 'Normal' | 'Warning';

/** What controllers depend on: a recorder (or a no-op one in tests and the offline renderer). */
export interface Recorder {
  event(obj: KubeObject, type: EventType, reason: string, action: string, note: string): Promise<void>;
}

export const noopRecorder: Recorder = { event: async () => {} };

export interface EventRecorderOptions {
  client: KubeClient;
  clock?: Clock;
  logger?: Logger;
  /** Default "stackflux". */
  reportingController?: string;
  /** Default $POD_NAME, else the host name. */
  reportingInstance?: string;
  /** Repeats within this time of the last observation join the series. Default 6 min (client-go). */
  windowMs?: number;
  /** Later repeats are PATCHed at most this often. 0 = every repeat at once. Default 30 s. */
  seriesFlushMs?: number;
  /** Correlation cache entries. Default 4096. */
  maxEntries?: number;
}

export interface EventObject extends KubeObject {
  eventTime: string;
  series?: { count: number; lastObservedTime: string };
  reportingController: string;
  reportingInstance: string;
  action: string;
  reason: string;
  note?: string;
  type: EventType;
  regarding: {
    apiVersion: string;
    kind: string;
    name: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
  };
}

interface Entry {
  key: string;
  event: EventObject;
  /** Observations so far (1 = only the first). */
  count: number;
  /** count as last written to the API server. */
  written: number;
  lastObservedAt: number;
  timer: TimerHandle | undefined;
  /** Writes of this entry run one after the other. */
  chain: Promise<void>;
}

/** metav1.MicroTime wants exactly six fractional digits. */
export function microTime(ms: number): string {
  const iso = new Date(Math.floor(ms)).toISOString();
  const micros = String(Math.floor((ms % 1) * 1000)).padStart(3, '0');
  return iso.replace(/\.(\d{3})Z$/, `.$1${micros}Z`);
}

/** client-go's "<regarding name>.<hex time>", plus random digits so replicas never collide. */
export function eventName(regardingName: string, nowMs: number): string {
  const suffix = `${Math.floor(nowMs).toString(16)}${randomBytes(3).toString('hex')}`;
  return `${regardingName.slice(0, 253 - suffix.length - 1)}.${suffix}`;
}

const MAX_NOTE = 1024;
const MAX_FIELD = 128;

function truncate(s: string, n: number): string {
  return s.length <= n ? s : `${s.slice(0, n - 3)}...`;
}

export class EventRecorder implements Recorder {
  private readonly client: KubeClient;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly controller: string;
  private readonly instance: string;
  private readonly windowMs: number;
  private readonly flushMs: number;
  private readonly maxEntries: number;
  private readonly cache = new Map<string, Entry>();

  constructor(opts: EventRecorderOptions) {
    this.client = opts.client;
    this.clock = opts.clock ?? realClock;
    this.log = (opts.logger ?? silentLogger()).child({ component: 'events' });
    this.controller = opts.reportingController ?? REPORTING_CONTROLLER;
    this.instance = truncate(opts.reportingInstance ?? (process.env.POD_NAME || hostname()), MAX_FIELD);
    this.windowMs = opts.windowMs ?? 6 * 60_000;
    this.flushMs = opts.seriesFlushMs ?? 30_000;
    this.maxEntries = Math.max(1, opts.maxEntries ?? 4096);
  }

  /** Entries in the correlation cache (tests). */
  size(): number {
    return this.cache.size;
  }

  /**
   * Records an event on obj. Resolves once it is written (or failed and was logged); never rejects,
   * so callers may `void` it.
   */
  event(obj: KubeObject, type: EventType, reason: string, action: string, note: string): Promise<void> {
    try {
      return this.record(obj, type, reason, action, note);
    } catch (err) {
      this.log.error(errorFields(err), 'recording an event failed');
      return Promise.resolve();
    }
  }

  /** Writes every pending series count now (shutdown, tests). */
  async flush(): Promise<void> {
    const writes: Promise<void>[] = [];
    for (const e of this.cache.values()) {
      if (e.timer !== undefined) {
        this.clock.clearTimeout(e.timer);
        e.timer = undefined;
      }
      if (e.count > e.written) writes.push(this.enqueueWrite(e));
      else writes.push(e.chain);
    }
    await Promise.all(writes);
  }

  private record(
    obj: KubeObject,
    type: EventType,
    reason: string,
    action: string,
    note: string,
  ): Promise<void> {
    const now = this.clock.now();
    const m = obj.metadata;
    const regarding: EventObject['regarding'] = {
      apiVersion: obj.apiVersion,
      kind: obj.kind,
      name: m.name ?? '',
      ...(m.namespace ? { namespace: m.namespace } : {}),
      ...(m.uid ? { uid: m.uid } : {}),
    };
    const key = JSON.stringify([
      regarding.apiVersion,
      regarding.kind,
      regarding.namespace ?? '',
      regarding.name,
      regarding.uid ?? '',
      type,
      reason,
      action,
      note,
    ]);
    const found = this.cache.get(key);
    if (found !== undefined && now - found.lastObservedAt <= this.windowMs) {
      // LRU: move to the end.
      this.cache.delete(key);
      this.cache.set(key, found);
      found.count += 1;
      found.lastObservedAt = now;
      if (found.written <= 1 || this.flushMs <= 0) return this.enqueueWrite(found);
      found.timer ??= this.clock.setTimeout(() => {
        found.timer = undefined;
        void this.enqueueWrite(found);
      }, this.flushMs);
      return Promise.resolve();
    }
    if (found !== undefined) this.evict(found);
    const event: EventObject = {
      apiVersion: EVENTS_API_VERSION,
      kind: 'Event',
      metadata: {
        name: eventName(regarding.name, now),
        namespace: regarding.namespace ?? 'default',
      },
      eventTime: microTime(now),
      reportingController: this.controller,
      reportingInstance: this.instance,
      action: truncate(action, MAX_FIELD),
      reason: truncate(reason, MAX_FIELD),
      note: truncate(note, MAX_NOTE),
      type,
      regarding,
    };
    const entry: Entry = {
      key,
      event,
      count: 1,
      written: 0,
      lastObservedAt: now,
      timer: undefined,
      chain: Promise.resolve(),
    };
    this.cache.set(key, entry);
    while (this.cache.size > this.maxEntries) {
      const oldest = this.cache.values().next().value;
      if (oldest === undefined) break;
      this.evict(oldest);
    }
    return this.enqueueWrite(entry);
  }

  /** Drops an entry; a series count not written yet is written first (best effort). */
  private evict(e: Entry): void {
    this.cache.delete(e.key);
    if (e.timer !== undefined) {
      this.clock.clearTimeout(e.timer);
      e.timer = undefined;
    }
    if (e.count > e.written) void this.enqueueWrite(e);
  }

  private enqueueWrite(e: Entry): Promise<void> {
    const next = e.chain.then(() => this.write(e));
    e.chain = next;
    return next;
  }

  /** Creates the Event, or PATCHes its series to the current count. Never rejects. */
  private async write(e: Entry): Promise<void> {
    const count = e.count;
    if (count <= e.written) return;
    const series = count > 1 ? { count, lastObservedTime: microTime(e.lastObservedAt) } : undefined;
    const ns = e.event.metadata.namespace;
    const name = e.event.metadata.name ?? '';
    try {
      if (e.written === 0) {
        await this.client.create<EventObject>({ ...e.event, ...(series ? { series } : {}) });
      } else {
        try {
          await this.client.mergePatch(EVENTS_API_VERSION, 'Event', name, ns, { series });
        } catch (err) {
          if (!isNotFound(err)) throw err;
          // The Event expired (TTL) or was deleted: start again with a new one carrying the series.
          e.event = {
            ...e.event,
            metadata: { ...e.event.metadata, name: eventName(e.event.regarding.name, this.clock.now()) },
          };
          await this.client.create<EventObject>({ ...e.event, ...(series ? { series } : {}) });
        }
      }
      e.written = count;
    } catch (err) {
      // Do not retry forever: the next repeat (or flush) tries again with the newest count.
      this.log.warn(
        {
          ...errorFields(err),
          regarding: `${e.event.regarding.kind} ${ns}/${e.event.regarding.name}`,
          reason: e.event.reason,
        },
        'writing an event failed',
      );
    }
  }
}
