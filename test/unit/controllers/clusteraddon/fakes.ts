// Fakes the ClusterAddon collaborators' unit tests share: an in-memory informer with indexes (the
// part of runtime/informer.ts the collaborators read), a recording Kubernetes client, an Event
// recorder and ReconcileContext.
import { ApiError, type KubeClient, type KubeObject } from '../../../../controller/runtime/client.ts';
import type { ReconcileContext } from '../../../../controller/runtime/controller.ts';
import type { IndexFunc, Informer } from '../../../../controller/runtime/informer.ts';
import { silentLogger } from '../../../../controller/runtime/logging.ts';

export class FakeInformer<T extends KubeObject = KubeObject> {
  readonly store = new Map<string, T>();
  readonly indexers = new Map<string, IndexFunc<T>>();
  synced = true;
  failure: string | undefined;

  constructor(objects: T[] = []) {
    for (const o of objects) this.add(o);
  }

  add(o: T): void {
    const ns = o.metadata.namespace;
    this.store.set(ns ? `${ns}/${o.metadata.name}` : (o.metadata.name ?? ''), o);
  }

  addIndexer(name: string, fn: IndexFunc<T>): void {
    this.indexers.set(name, fn);
  }

  byIndex(name: string, value: string): T[] {
    const fn = this.indexers.get(name);
    if (fn === undefined) throw new Error(`no index ${name}`);
    return [...this.store.values()].filter((o) => fn(o).includes(value));
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

  hasSynced(): boolean {
    return this.synced;
  }

  lastFailure(): string | undefined {
    return this.failure;
  }

  /** As the collaborators' Informer type. */
  get informer(): Informer<T> {
    return this as unknown as Informer<T>;
  }
}

export interface Call {
  verb: string;
  args: unknown[];
}

/** A client recording its calls; `answer` decides each call's result (default: echo the object). */
export function recordingClient(answer: (verb: string, args: unknown[]) => unknown = defaultAnswer) {
  const calls: Call[] = [];
  const method =
    (verb: string) =>
    async (...args: unknown[]): Promise<unknown> => {
      calls.push({ verb, args });
      return answer(verb, args);
    };
  const client = {
    apply: method('apply'),
    applyStatus: method('applyStatus'),
    mergePatch: method('mergePatch'),
    delete: method('delete'),
    resource: method('resource'),
    request: method('request'),
    get: method('get'),
  };
  return { calls, client: client as unknown as KubeClient };
}

function defaultAnswer(verb: string, args: unknown[]): unknown {
  return verb === 'apply'
    ? { ...(args[0] as object), metadata: { ...(args[0] as KubeObject).metadata, resourceVersion: '2' } }
    : {};
}

/** A 404 as the client throws it. */
export function notFound(): Error {
  return new ApiError('GET', '/x', 404, '{"reason":"NotFound","message":"not found"}');
}

export function recordingEvents() {
  const events: { obj: KubeObject; type: string; reason: string; note: string }[] = [];
  return {
    events,
    recorder: {
      event: async (obj: KubeObject, type: string, reason: string, _action: string, note: string) => {
        events.push({ obj, type, reason, note });
      },
    },
  };
}

export function context(key: string): ReconcileContext {
  const [namespace, name = ''] = key.split('/');
  return {
    key,
    namespace,
    name,
    reconcileID: 'r1',
    log: silentLogger(),
    signal: new AbortController().signal,
  };
}

/** A partial object as a KubeObject (tests only set what the code under test reads). */
export function ko(o: object): KubeObject {
  return o as KubeObject;
}
