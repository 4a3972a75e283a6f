// The objects a Cluster's refs point at (controlPlaneRef, infrastructureRef: any provider kind):
// the API version of a group is discovered once, and an informer of each kind is created on first
// use (optional: a kind that cannot be listed never makes /readyz fail). A Cluster whose ref is not
// known yet waits with exponential back-off (RefWaits); the kind's informer requeues it at once
// when the object appears.
import { type ClusterRef, clusterRef } from '../../api/clusterrefs.ts';
import type { PlainObject } from '../../rendering/index.ts';
import type { KubeClient } from '../../runtime/client.ts';
import type { Informer } from '../../runtime/informer.ts';
import type { Obj } from './types.ts';

/** Backoff of a Cluster waiting for the objects its refs point at: 2 s doubling to 5 min. */
export const REF_BACKOFF = { initialMs: 2_000, maxMs: 300_000 } as const;

/** The requeue delay of the `attempt`-th reconcile in a row that found a ref missing (0-based). */
export function refBackoffMs(attempt: number): number {
  return Math.min(REF_BACKOFF.maxMs, REF_BACKOFF.initialMs * 2 ** Math.min(attempt, 20));
}

/** What a ref resolved to. */
export interface RefRead {
  object: PlainObject | undefined;
  /** Not (yet) known: retried with back-off. */
  pending: boolean;
  /** Why it cannot be read (kind not served, the RBAC does not allow listing it), for the condition. */
  problem?: string;
}

export interface RefObjectReaderOptions {
  client: Pick<KubeClient, 'request' | 'resource'>;
  /** An optional informer of the kind (in the controller's scope). */
  informer: (apiVersion: string, kind: string) => Informer<Obj>;
  /** Requeues the Clusters that refer to the objects of a new informer of `kind`. */
  watch: (informer: Informer<Obj>, kind: string) => void;
}

export class RefObjectReader {
  private readonly opts: RefObjectReaderOptions;
  private readonly groupVersions = new Map<string, Promise<string | undefined>>();
  private readonly refInformers = new Map<string, Informer<Obj>>();

  constructor(opts: RefObjectReaderOptions) {
    this.opts = opts;
  }

  /** The ref's apiVersion, else the preferred version of its group (undefined: not served; asked again next time). */
  async apiVersionOf(ref: ClusterRef): Promise<string | undefined> {
    if (ref.apiVersion !== undefined) return ref.apiVersion;
    const group = ref.group;
    let p = this.groupVersions.get(group);
    if (p === undefined) {
      p = this.opts.client
        .request<{ preferredVersion?: { groupVersion?: string } }>('GET', `/apis/${group}`)
        .then((g) => g.preferredVersion?.groupVersion)
        .catch(() => undefined);
      this.groupVersions.set(group, p);
      void p.then((v) => {
        if (v === undefined) this.groupVersions.delete(group);
      });
    }
    return p;
  }

  /**
   * The object a ref points at. `pending`: not (yet) known, retried with backoff; `problem`: why it
   * cannot be read (kind not served, the RBAC does not allow listing it), for the condition. Ref
   * informers are optional: a kind that cannot be listed never makes /readyz fail.
   */
  async read(cluster: Obj, field: 'controlPlaneRef' | 'infrastructureRef'): Promise<RefRead> {
    const followed = clusterRef(cluster, field);
    if (followed === undefined) return { object: undefined, pending: false };
    // A ref the shared rule refuses is never read: the ClusterAddon says why (RefsNotReadable).
    if (!followed.ok) return { object: undefined, pending: false, problem: followed.problem };
    const ref = followed.ref;
    const apiVersion = await this.apiVersionOf(ref);
    if (apiVersion === undefined) {
      return {
        object: undefined,
        pending: true,
        problem: `${field} ${ref.kind} ${ref.name}: API group ${ref.group} is not served`,
      };
    }
    const key = `${apiVersion}/${ref.kind}`;
    let inf = this.refInformers.get(key);
    if (inf === undefined) {
      try {
        await this.opts.client.resource(apiVersion, ref.kind);
      } catch {
        return {
          object: undefined,
          pending: true,
          problem: `${field} ${ref.kind} ${ref.name}: kind ${ref.kind} is not served in ${apiVersion}`,
        };
      }
      inf = this.opts.informer(apiVersion, ref.kind);
      this.refInformers.set(key, inf);
      this.opts.watch(inf, ref.kind);
    }
    if (!inf.hasSynced()) {
      const failure = inf.lastFailure();
      return {
        object: undefined,
        pending: true,
        ...(failure !== undefined
          ? {
              problem: `${field} ${ref.kind} ${ref.name}: cannot list ${ref.kind} (${apiVersion}): ${failure} (grant stackflux list/watch on the kind, e.g. a ClusterRole labelled stackflux.io/aggregate-to-controller: "true")`,
            }
          : {}),
      };
    }
    const object = inf.getByName(ref.name, ref.namespace);
    return { object: object as PlainObject | undefined, pending: object === undefined };
  }
}

/** Reconciles in a row that waited for refs, per key: the backoff of the next try. */
export class RefWaits {
  private readonly waits = new Map<string, number>();

  /** One more reconcile of `key` waits for its refs: the delay before it tries again. */
  next(key: string): number {
    const attempt = this.waits.get(key) ?? 0;
    this.waits.set(key, attempt + 1);
    return refBackoffMs(attempt);
  }

  /** `key` no longer waits for refs. */
  clear(key: string): void {
    this.waits.delete(key);
  }
}
