// The manager ties the runtime together: shared informers (started at once, so a standby replica
// has warm caches), controllers (started only while this replica leads, when leader election is
// on, and only after the caches synced), leader election, /metrics, /healthz, /readyz, and a
// graceful shutdown: stop intake, let in-flight reconciles finish, release the lease, stop the
// informers and servers — all within the shutdown timeout (30 s by default).
import { hostname } from 'node:os';
import type { KubeClient, KubeObject } from './client.ts';
import { type Clock, realClock } from './clock.ts';
import { Controller, type ControllerOptions } from './controller.ts';
import { EventRecorder, type EventRecorderOptions } from './events.ts';
import { type HttpServer, serveHttp } from './http.ts';
import { type Informer, type InformerScope, objectKey, SharedInformers } from './informer.ts';
import { LeaderElector, type LeaderElectorOptions } from './leaderelection.ts';
import { errorFields, type Logger, silentLogger } from './logging.ts';
import { RuntimeMetrics } from './metrics.ts';

export interface ManagerOptions {
  client: KubeClient;
  logger?: Logger;
  metrics?: RuntimeMetrics;
  clock?: Clock;
  /** e.g. ":8080" or "127.0.0.1:0"; omitted → no metrics server. */
  metricsAddr?: string;
  /** e.g. ":8081"; omitted → no health server. If equal to metricsAddr, one server serves both. */
  healthAddr?: string;
  leaderElection?: Omit<
    LeaderElectorOptions,
    'client' | 'identity' | 'onStartedLeading' | 'onStoppedLeading' | 'setLeading' | 'clock' | 'logger'
  > & { identity?: string };
  /** Graceful shutdown budget. Default 30 s. */
  shutdownTimeoutMs?: number;
  /**
   * Shard key (`--shard`): sharded informers select `sharding.fluxcd.io/key=KEY`; without it they
   * select objects that carry no shard key (Flux's convention). The Lease becomes `<name>-<KEY>`.
   */
  shard?: string;
  /** Options of the event recorder (client, clock and logger come from the manager). */
  events?: Omit<EventRecorderOptions, 'client' | 'clock' | 'logger'>;
}

/** The label of Flux's sharding convention. */
export const SHARD_LABEL = 'sharding.fluxcd.io/key';

/** The label selector of a shard: `KEY` → its objects; undefined → objects without a shard key. */
export function shardSelector(shard: string | undefined): string {
  return shard ? `${SHARD_LABEL}=${shard}` : `!${SHARD_LABEL}`;
}

/** a,b: both selectors (either may be empty). */
export function joinSelectors(...selectors: Array<string | undefined>): string {
  return selectors.filter((s) => s !== undefined && s !== '').join(',');
}

export type StopReason = 'stopped' | 'leadership-lost';

export class Manager {
  readonly client: KubeClient;
  readonly log: Logger;
  readonly metrics: RuntimeMetrics;
  readonly informers: SharedInformers;
  readonly elector: LeaderElector | undefined;
  readonly events: EventRecorder;
  /** The shard key, if this manager runs one shard. */
  readonly shard: string | undefined;
  private readonly clock: Clock;
  private readonly opts: ManagerOptions;
  private readonly controllers: Controller[] = [];
  private servers: HttpServer[] = [];
  private stopping: Promise<void> | undefined;
  private resolveDone: (r: StopReason) => void = () => {};
  /** Resolves when the manager has stopped, with why. */
  readonly done: Promise<StopReason>;
  private started = false;
  private leading = false;
  private readonly leadAbort = new AbortController();

  constructor(opts: ManagerOptions) {
    this.opts = opts;
    this.client = opts.client;
    this.clock = opts.clock ?? realClock;
    this.log = opts.logger ?? silentLogger();
    this.metrics = opts.metrics ?? new RuntimeMetrics({ processMetrics: true });
    this.metrics.observeClient(opts.client);
    this.informers = new SharedInformers({ client: opts.client, clock: this.clock, logger: this.log });
    this.shard = opts.shard || undefined;
    this.events = new EventRecorder({
      ...opts.events,
      client: opts.client,
      clock: this.clock,
      logger: this.log,
    });
    this.done = new Promise((r) => {
      this.resolveDone = r;
    });
    const le = opts.leaderElection;
    if (le) {
      const identity = le.identity ?? `${hostname()}_${crypto.randomUUID()}`;
      // One Lease per shard: replicas of one shard elect among themselves.
      const name = this.shard ? `${le.name}-${this.shard}` : le.name;
      this.elector = new LeaderElector({
        ...le,
        name,
        identity,
        client: opts.client,
        clock: this.clock,
        logger: this.log,
        setLeading: this.metrics.leaderElection(name),
        onStartedLeading: () => {
          this.leading = true;
          void this.startControllers();
        },
        onStoppedLeading: () => {
          const wasLeading = this.leading;
          this.leading = false;
          // Stop reconciling at once; in-flight reconciles see their signal aborted.
          for (const c of this.controllers) void c.stop({ abort: true });
          if (wasLeading && !this.stopping) {
            this.log.error('leadership lost; stopping');
            void this.stop('leadership-lost');
          }
        },
      });
    }
  }

  /** A shared informer; `optional`: created at run time for a discovered kind, not gating /readyz. */
  informer<T extends KubeObject = KubeObject>(
    apiVersion: string,
    kind: string,
    o: InformerScope & { optional?: boolean } = {},
  ): Informer<T> {
    return this.informers.informerFor<T>(apiVersion, kind, o);
  }

  /**
   * An informer of a kind that shards split (stackflux's own kinds, the Flux objects it manages,
   * CAPI Clusters): the given selector AND this manager's shard selector.
   */
  shardedInformer<T extends KubeObject = KubeObject>(
    apiVersion: string,
    kind: string,
    o: InformerScope = {},
  ): Informer<T> {
    return this.informer<T>(apiVersion, kind, {
      ...o,
      labelSelector: joinSelectors(o.labelSelector, shardSelector(this.shard)),
    });
  }

  /** obj with this manager's shard label (objects it creates stay in its shard); unchanged unsharded. */
  withShardLabel<T extends KubeObject>(obj: T): T {
    if (!this.shard) return obj;
    return {
      ...obj,
      metadata: { ...obj.metadata, labels: { ...obj.metadata.labels, [SHARD_LABEL]: this.shard } },
    };
  }

  addController(opts: Omit<ControllerOptions, 'metrics' | 'clock'>): Controller {
    const c = new Controller({
      ...opts,
      metrics: this.metrics,
      clock: this.clock,
      logger: opts.logger ?? this.log,
    });
    this.controllers.push(c);
    if (this.started && this.leading && this.informers.hasSynced()) c.start();
    return c;
  }

  /**
   * Enqueues keys into controller on informer events: by default the object's own key; with map,
   * the keys map returns (e.g. the owner, or every ClusterStack that uses a Cluster's class). With
   * changed (controller-runtime's update predicate), an update enqueues only when it says the
   * change matters to the controller: an object that maps to thousands of keys must not requeue
   * them all for a change none of them reads.
   */
  watch<T extends KubeObject>(
    controller: Controller,
    informer: Informer<T>,
    map?: (obj: T) => string[],
    changed?: (oldObj: T, newObj: T) => boolean,
  ): void {
    const enqueue = (obj: T): void => {
      for (const key of map ? map(obj) : [objectKey(obj)]) controller.enqueue(key);
    };
    informer.addEventHandler({
      onAdd: enqueue,
      onUpdate: (o, n) => {
        if (changed === undefined || changed(o, n)) enqueue(n);
      },
      onDelete: enqueue,
    });
  }

  /** Ready: every informer synced and not shutting down. */
  ready(): boolean {
    return !this.stopping && this.informers.hasSynced();
  }

  isLeader(): boolean {
    return this.elector ? this.leading : true;
  }

  /** Starts servers, informers, leader election (or the controllers directly). Returns once started. */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    await this.startServers();
    this.informers.start();
    if (this.elector) {
      void this.elector
        .run()
        .catch((err: unknown) => this.log.error(errorFields(err), 'leader election failed'));
    } else {
      this.leading = true;
      void this.startControllers();
    }
  }

  private async startControllers(): Promise<void> {
    await this.informers.waitForSync(this.leadAbort.signal);
    if (this.stopping || !this.leading) return;
    this.log.info({ controllers: this.controllers.length }, 'caches synced; starting controllers');
    for (const c of this.controllers) c.start();
  }

  private async startServers(): Promise<void> {
    const metrics = async () => {
      const { contentType, body } = await this.metrics.text();
      return { status: 200, contentType, body };
    };
    const healthz = () => ({ status: 200, body: 'ok\n' });
    const readyz = () =>
      this.ready()
        ? { status: 200, body: 'ok\n' }
        : { status: 503, body: 'caches not synced or shutting down\n' };
    const { metricsAddr, healthAddr } = this.opts;
    if (metricsAddr !== undefined && metricsAddr === healthAddr) {
      this.servers.push(
        await serveHttp(metricsAddr, { '/metrics': metrics, '/healthz': healthz, '/readyz': readyz }),
      );
      return;
    }
    if (metricsAddr !== undefined) this.servers.push(await serveHttp(metricsAddr, { '/metrics': metrics }));
    if (healthAddr !== undefined)
      this.servers.push(await serveHttp(healthAddr, { '/healthz': healthz, '/readyz': readyz }));
  }

  /** URLs of the servers, in order: metrics (if any), then health (if separate). */
  serverUrls(): string[] {
    return this.servers.map((s) => s.url);
  }

  /**
   * Graceful stop: intake stops at once, in-flight reconciles finish (their signal is aborted when
   * the timeout is near), the lease is released, informers and servers close.
   */
  stop(reason: StopReason = 'stopped'): Promise<void> {
    if (this.stopping) return this.stopping;
    this.stopping = (async () => {
      const budget = this.opts.shutdownTimeoutMs ?? 30_000;
      const started = this.clock.now();
      this.log.info({ reason }, 'shutting down');
      this.leadAbort.abort();
      // 1. stop intake + drain, with ~2/3 of the budget for in-flight work, then abort them.
      const drained = Promise.all(this.controllers.map((c) => c.stop()));
      const drainBudget = Math.floor(budget * 0.66);
      let timedOut = false;
      let timer: ReturnType<Clock['setTimeout']> | undefined;
      await Promise.race([
        drained,
        new Promise<void>((r) => {
          timer = this.clock.setTimeout(() => {
            timedOut = true;
            r();
          }, drainBudget);
        }),
      ]);
      if (timer !== undefined) this.clock.clearTimeout(timer);
      if (timedOut) {
        this.log.warn('in-flight reconciles did not finish in time; aborting them');
        await Promise.all(this.controllers.map((c) => c.stop({ abort: true })));
      }
      // 2. write pending event series, release the lease (after no reconcile runs any more).
      await this.events.flush();
      await this.elector?.stop();
      // 3. informers and servers.
      await this.informers.stop();
      await Promise.all(this.servers.map((s) => s.close()));
      this.log.info({ ms: Math.round(this.clock.now() - started) }, 'stopped');
      this.resolveDone(reason);
    })();
    return this.stopping;
  }

  /**
   * For the real process: SIGTERM/SIGINT → graceful stop then exit (0, or 1 on lost leadership;
   * forced after the budget); unhandled rejections and uncaught exceptions from reconcile code are
   * logged instead of killing the process.
   */
  installProcessHandlers(): void {
    const budget = this.opts.shutdownTimeoutMs ?? 30_000;
    const onSignal = (signal: string): void => {
      this.log.info({ signal }, 'signal received');
      const force = setTimeout(() => {
        this.log.error('graceful shutdown exceeded its budget; exiting');
        process.exit(1);
      }, budget);
      force.unref();
      void this.stop('stopped');
    };
    process.once('SIGTERM', () => onSignal('SIGTERM'));
    process.once('SIGINT', () => onSignal('SIGINT'));
    process.on('unhandledRejection', (reason) => {
      this.log.error(
        errorFields(reason),
        'unhandled promise rejection (ignored; the controller keeps running)',
      );
    });
    process.on('uncaughtException', (err) => {
      this.log.error(errorFields(err), 'uncaught exception (ignored; the controller keeps running)');
    });
    void this.done.then((reason) => {
      process.exitCode = reason === 'leadership-lost' ? 1 : 0;
      // Let stdout flush, then exit even if some handle (a socket) lingers.
      setTimeout(() => process.exit(), 100).unref();
    });
  }
}
