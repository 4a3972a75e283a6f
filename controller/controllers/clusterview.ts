// The in-use view of Cluster API Clusters: which Clusters name which ClusterClass, over EVERY
// namespace and shard. Garbage collection of releases asks this view, and only when it is
// complete (Cluster API served, the first LIST done) may a release be deleted (fail closed):
// `--namespace` and `--shard` narrow what this controller reconciles, never what counts as in use
// (a Cluster in another namespace can name a ClusterClass here; a Cluster of another shard uses
// this shard's releases just the same).
//
// - Cluster API may be missing when stackflux starts: discovery is polled with backoff and the
//   informer starts once the Cluster kind is served, without a restart.
// - The informer is separate from the Manager's shared informers, so a Cluster list the RBAC
//   forbids (or a slow one) never holds back readiness or the other controllers; it only keeps
//   garbage collection waiting, with a reason.
// - Objects are cut down to what the in-use check reads (name, namespace, the class reference):
//   a full LIST/WATCH (the class is in spec, so a metadata-only view cannot answer) but memory
//   of a few hundred bytes per Cluster; updates that do not change the class are dropped.
import { type ClusterUse, clusterUse } from '../reconcilers/clusterstack.ts';
import type { KubeObject } from '../runtime/client.ts';
import { type Clock, realClock, type TimerHandle } from '../runtime/clock.ts';
import { Informer } from '../runtime/informer.ts';
import { errorFields, type Logger } from '../runtime/logging.ts';
import type { Manager } from '../runtime/manager.ts';

export const CLUSTER_API_VERSIONS = ['cluster.x-k8s.io/v1beta2', 'cluster.x-k8s.io/v1beta1'];

/** Index: "<class namespace>/<class name>" of the ClusterClass a Cluster uses. */
export const CLASS_INDEX = 'clusterclass';
/** Index: the namespace of the ClusterClass a Cluster uses. */
const CLASS_NAMESPACE_INDEX = 'clusterclass-namespace';

/** Why the view cannot answer yet (a condition reason and message). */
export interface ViewGap {
  reason: 'ClusterAPINotServed' | 'ClustersNotSynced';
  message: string;
}

/** The Cluster API version the server serves (v1beta2 preferred), or undefined without Cluster API. */
export async function servedClusterApiVersion(manager: Pick<Manager, 'client'>): Promise<string | undefined> {
  for (const v of CLUSTER_API_VERSIONS) {
    try {
      await manager.client.resource(v, 'Cluster');
      return v;
    } catch {}
  }
  return undefined;
}

/** The parts of a Cluster the in-use check reads. */
export function slimCluster(obj: KubeObject): KubeObject {
  const spec = (obj as { spec?: { topology?: Record<string, unknown> } }).spec;
  const t = spec?.topology;
  const topology =
    t === undefined
      ? undefined
      : Object.fromEntries(
          Object.entries({ classRef: t.classRef, class: t.class, classNamespace: t.classNamespace }).filter(
            ([, v]) => v !== undefined,
          ),
        );
  const { name, namespace, uid, resourceVersion, deletionTimestamp } = obj.metadata;
  return {
    apiVersion: obj.apiVersion,
    kind: obj.kind,
    metadata: Object.fromEntries(
      Object.entries({ name, namespace, uid, resourceVersion, deletionTimestamp }).filter(
        ([, v]) => v !== undefined,
      ),
    ) as KubeObject['metadata'],
    ...(topology !== undefined ? { spec: { topology } } : {}),
  } as KubeObject;
}

function classNamespaceOf(c: KubeObject, use: ClusterUse): string {
  return use.classNamespace ?? c.metadata.namespace ?? '';
}

function sameUse(a: KubeObject, b: KubeObject): boolean {
  const ua = clusterUse(a);
  const ub = clusterUse(b);
  if (ua === undefined || ub === undefined) return ua === ub;
  return ua.className === ub.className && classNamespaceOf(a, ua) === classNamespaceOf(b, ub);
}

export interface ClusterViewOptions {
  manager: Pick<Manager, 'client' | 'log'>;
  clock?: Clock;
  /** Discovery polling while Cluster API is not served: first delay and cap (ms). */
  pollInitialMs?: number;
  pollMaxMs?: number;
}

export class ClusterUseView {
  private readonly opts: ClusterViewOptions;
  private readonly clock: Clock;
  private readonly log: Logger;
  private informer: Informer<KubeObject> | undefined;
  private apiVersion: string | undefined;
  private timer: TimerHandle | undefined;
  private stopped = false;
  private synced = false;
  private readonly changeHandlers: Array<(clusters: KubeObject[]) => void> = [];
  private readonly syncHandlers: Array<() => void> = [];

  constructor(opts: ClusterViewOptions) {
    this.opts = opts;
    this.clock = opts.clock ?? realClock;
    this.log = opts.manager.log.child({ component: 'cluster-use-view' });
  }

  /** Called with the Clusters (old and new on updates) whose class use changed. */
  onChange(fn: (clusters: KubeObject[]) => void): void {
    this.changeHandlers.push(fn);
  }

  /** Called once the view is complete (after the first LIST of Clusters). */
  onSynced(fn: () => void): void {
    this.syncHandlers.push(fn);
  }

  /** The Cluster API version served at the last discovery, if any. */
  clusterApiVersion(): string | undefined {
    return this.apiVersion;
  }

  /** undefined when the view is complete; else why not (garbage collection waits). */
  gap(): ViewGap | undefined {
    if (this.informer === undefined) {
      return {
        reason: 'ClusterAPINotServed',
        message:
          'the API server serves no Cluster API Cluster kind, so no release can be known to be unused; ' +
          'stackflux checks again with backoff and starts watching Clusters once Cluster API is installed',
      };
    }
    if (!this.synced) {
      return {
        reason: 'ClustersNotSynced',
        message:
          `the first list of every ${this.apiVersion} Cluster has not completed ` +
          `(${this.informer.stats.errors} failed attempts; the controller log has the error, e.g. RBAC)`,
      };
    }
    return undefined;
  }

  /** Clusters whose ClusterClass is in namespace ns; undefined while the view is incomplete. */
  usingNamespace(ns: string): ClusterUse[] | undefined {
    if (this.gap() !== undefined || this.informer === undefined) return undefined;
    return this.informer.byIndex(CLASS_NAMESPACE_INDEX, ns).flatMap((c) => {
      const use = clusterUse(c);
      if (use === undefined) return [];
      // A Cluster of another namespace is shown with its namespace.
      const foreign = c.metadata.namespace !== ns;
      const name = foreign ? `${c.metadata.namespace}/${use.name}` : use.name;
      return [
        {
          ...use,
          name,
          classNamespace: ns,
          ...(foreign ? { clusterNamespace: c.metadata.namespace ?? '' } : {}),
        },
      ];
    });
  }

  /** Names of the Clusters using ClusterClass ns/className; undefined while the view is incomplete. */
  usingClass(ns: string, className: string): string[] | undefined {
    if (this.gap() !== undefined || this.informer === undefined) return undefined;
    return this.informer
      .byIndex(CLASS_INDEX, `${ns}/${className}`)
      .map((c) =>
        c.metadata.namespace === ns ? c.metadata.name : `${c.metadata.namespace}/${c.metadata.name}`,
      )
      .filter((n): n is string => n !== undefined && n !== '');
  }

  /** Starts discovering Cluster API (and then watching Clusters). */
  start(): void {
    void this.discover(this.opts.pollInitialMs ?? 1000);
  }

  stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.timer = undefined;
    return this.informer?.stop() ?? Promise.resolve();
  }

  private async discover(delayMs: number): Promise<void> {
    if (this.stopped) return;
    const version = await servedClusterApiVersion(this.opts.manager).catch(() => undefined);
    if (this.stopped) return;
    if (version === undefined) {
      if (delayMs === (this.opts.pollInitialMs ?? 1000)) {
        this.log.warn(
          'the API server serves no Cluster API Cluster kind: releases are not garbage-collected until it does',
        );
      }
      const next = Math.min(delayMs * 2, this.opts.pollMaxMs ?? 60_000);
      this.timer = this.clock.setTimeout(() => {
        this.timer = undefined;
        void this.discover(next);
      }, delayMs);
      return;
    }
    this.watch(version);
  }

  private watch(version: string): void {
    this.apiVersion = version;
    const inf = new Informer<KubeObject>({
      client: this.opts.manager.client,
      apiVersion: version,
      kind: 'Cluster',
      clock: this.clock,
      logger: this.log,
      transform: slimCluster,
    });
    inf.addIndexer(CLASS_INDEX, (c) => {
      const use = clusterUse(c);
      return use === undefined ? [] : [`${classNamespaceOf(c, use)}/${use.className}`];
    });
    inf.addIndexer(CLASS_NAMESPACE_INDEX, (c) => {
      const use = clusterUse(c);
      return use === undefined ? [] : [classNamespaceOf(c, use)];
    });
    const changed = (objs: KubeObject[]): void => {
      if (!this.synced) return; // the sync handlers cover everything listed at first
      for (const fn of this.changeHandlers) fn(objs);
    };
    inf.addEventHandler({
      onAdd: (c) => changed([c]),
      onUpdate: (o, n) => {
        if (!sameUse(o, n)) changed([o, n]);
      },
      onDelete: (c) => changed([c]),
    });
    this.informer = inf;
    inf.start();
    this.log.info({ apiVersion: version }, 'watching every Cluster for the in-use check');
    void inf
      .waitForSync()
      .then(() => {
        if (this.stopped) return;
        this.synced = true;
        this.log.info({ clusters: inf.size() }, 'in-use view of Clusters complete');
        for (const fn of this.syncHandlers) fn();
      })
      .catch((err: unknown) => this.log.warn(errorFields(err), 'waiting for the Cluster list'));
  }
}
