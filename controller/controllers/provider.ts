// Provider kinds are only known at run time (a ClusterStack's providerRef names them), so their
// caches are created on first use, like the ClusterAddon controller's ref informers: discovery
// first (a kind the API server does not serve gets no informer and is re-checked after a while, so
// installing the provider's CRDs later is picked up), then an OPTIONAL shared informer — it never
// gates /readyz, because a LIST that keeps failing (kind removed, RBAC not aggregated yet) must not
// make the whole controller unready. Events of every provider informer go to the subscribers
// (the ClusterStack and ClusterStackRelease controllers map them to their keys).

import {
  type ProviderLookup,
  type ProviderObject,
  type ProviderRef,
  type ProviderTemplate,
  providerObjectKind,
} from '../reconcilers/provider.ts';
import { MANAGED_BY_LABELS } from '../releases/flux.ts';
import { isNotFound, type KubeObject } from '../runtime/client.ts';
import type { Clock } from '../runtime/clock.ts';
import type { Informer } from '../runtime/informer.ts';
import type { Manager } from '../runtime/manager.ts';

/** How long "not served" is believed before discovery is asked again. */
export const NOT_SERVED_RECHECK_MS = 30_000;

type Served = { served: true } | { served: false; at: number; error?: string };

export class ProviderKinds {
  private readonly manager: Manager;
  private readonly clock: Clock;
  private readonly namespace: string | undefined;
  private readonly served = new Map<string, Promise<Served>>();
  private readonly informers = new Map<string, Informer<KubeObject>>();
  private readonly subscribers: Array<(obj: KubeObject) => void> = [];
  private readonly syncSubscribers: Array<(apiVersion: string, kind: string) => void> = [];

  constructor(o: { manager: Manager; clock: Clock; namespace?: string }) {
    this.manager = o.manager;
    this.clock = o.clock;
    this.namespace = o.namespace;
  }

  /** Called with every added, changed or deleted object of any provider kind. */
  subscribe(fn: (obj: KubeObject) => void): void {
    this.subscribers.push(fn);
  }

  /** Called once per provider kind when its cache has synced (a missing object is now "not found"). */
  subscribeSynced(fn: (apiVersion: string, kind: string) => void): void {
    this.syncSubscribers.push(fn);
  }

  /** Informers created so far (for tests and metrics). */
  kinds(): string[] {
    return [...this.informers.keys()].sort();
  }

  private async isServed(apiVersion: string, kind: string): Promise<Served> {
    const key = `${apiVersion}/${kind}`;
    const cached = this.served.get(key);
    if (cached !== undefined) {
      const s = await cached;
      if (s.served || this.clock.now() - s.at < NOT_SERVED_RECHECK_MS) return s;
    }
    const p = this.manager.client.resource(apiVersion, kind).then(
      (): Served => ({ served: true }),
      (err: unknown): Served => ({
        served: false,
        at: this.clock.now(),
        // Discovery answered "no such kind/group" → not served; anything else is a transient error.
        ...(isNotFound(err) || (err instanceof Error && /does not serve/.test(err.message))
          ? {}
          : { error: err instanceof Error ? err.message : String(err) }),
      }),
    );
    this.served.set(key, p);
    const s = await p;
    if (!s.served && s.error !== undefined) this.served.delete(key);
    return s;
  }

  private informerFor(apiVersion: string, kind: string, labelSelector?: string): Informer<KubeObject> {
    const key = `${apiVersion}/${kind}`;
    let inf = this.informers.get(key);
    if (inf === undefined) {
      inf = this.manager.informer<KubeObject>(apiVersion, kind, {
        ...(this.namespace !== undefined ? { namespace: this.namespace } : {}),
        ...(labelSelector !== undefined ? { labelSelector } : {}),
        optional: true,
      });
      this.informers.set(key, inf);
      const notify = (o: KubeObject): void => {
        for (const fn of this.subscribers) fn(o);
      };
      inf.addEventHandler({ onAdd: notify, onUpdate: (_o, n) => notify(n), onDelete: notify });
      void inf.waitForSync().then(() => {
        if (inf?.hasSynced()) for (const fn of this.syncSubscribers) fn(apiVersion, kind);
      });
    }
    return inf;
  }

  /** One object of a provider kind from its cache (created on first use). */
  async lookup<T extends KubeObject>(
    apiVersion: string,
    kind: string,
    name: string,
    namespace: string,
    labelSelector?: string,
  ): Promise<ProviderLookup<T>> {
    const served = await this.isServed(apiVersion, kind);
    if (!served.served) {
      return served.error !== undefined
        ? { state: 'pending', message: `discovery of ${kind} in ${apiVersion} failed: ${served.error}` }
        : { state: 'notServed', apiVersion, kind };
    }
    const inf = this.informerFor(apiVersion, kind, labelSelector);
    if (!inf.hasSynced()) {
      return {
        state: 'pending',
        message:
          `waiting for the cache of ${kind} (${apiVersion}) to sync; stackflux needs get/list/watch on it, ` +
          'granted by a ClusterRole labelled stackflux.io/aggregate-to-controller: "true"',
      };
    }
    const obj = inf.getByName(name, namespace);
    return obj === undefined ? { state: 'notFound' } : { state: 'found', object: obj as T };
  }

  /** The template a providerRef names, checking that the provider object kind is served too. */
  async template(ref: ProviderRef, namespace: string): Promise<ProviderLookup<ProviderTemplate>> {
    const template = await this.lookup<ProviderTemplate & KubeObject>(
      ref.apiVersion,
      ref.kind,
      ref.name,
      namespace,
    );
    if (template.state !== 'found') return template;
    const objectKind = providerObjectKind(ref.kind);
    const served = await this.isServed(ref.apiVersion, objectKind);
    if (!served.served && served.error === undefined) {
      return { state: 'notServed', apiVersion: ref.apiVersion, kind: objectKind };
    }
    return template;
  }

  /** The provider object of a release (only objects stackflux labelled are cached). */
  object(ref: ProviderRef, namespace: string): Promise<ProviderLookup<ProviderObject>> {
    const managedBy = Object.entries(MANAGED_BY_LABELS)
      .map(([k, v]) => `${k}=${v}`)
      .join(',');
    return this.lookup<ProviderObject & KubeObject>(ref.apiVersion, ref.kind, ref.name, namespace, managedBy);
  }
}
