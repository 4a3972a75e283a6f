// Fakes the release pipeline collaborators' unit tests share: informers with the NAMESPACE_INDEX,
// a controller recording what is enqueued, a manager recording its watches, and objects.
import type { ClusterStack } from '../../../../controller/api/clusterstack.ts';
import type { ClusterStackRelease } from '../../../../controller/api/clusterstackrelease.ts';
import { NAMESPACE_INDEX } from '../../../../controller/controllers/clusterstack.ts';
import { namespaceIndex } from '../../../../controller/controllers/releasepipeline/informers.ts';
import type { KubeObject } from '../../../../controller/runtime/client.ts';
import type { Controller } from '../../../../controller/runtime/controller.ts';
import type { Informer } from '../../../../controller/runtime/informer.ts';
import { FakeInformer } from '../clusteraddon/fakes.ts';

export { FakeInformer };

export type Stack = ClusterStack & KubeObject;
export type Release = ClusterStackRelease & KubeObject;

export function stack(namespace: string, name: string, spec: Partial<ClusterStack['spec']> = {}): Stack {
  return {
    apiVersion: 'stackflux.io/v1alpha1',
    kind: 'ClusterStack',
    metadata: { namespace, name },
    spec,
  } as Stack;
}

export function rel(
  namespace: string,
  name: string,
  spec: Partial<ClusterStackRelease['spec']>,
  owner?: string,
): Release {
  return {
    apiVersion: 'stackflux.io/v1alpha1',
    kind: 'ClusterStackRelease',
    metadata: {
      namespace,
      name,
      ...(owner !== undefined
        ? {
            ownerReferences: [
              { kind: 'ClusterStack', name: owner, controller: true, apiVersion: 'a/v1', uid: 'u' },
            ],
          }
        : {}),
    },
    spec,
  } as Release;
}

/** A CAPI Cluster of `namespace` using ClusterClass `className` (of `classNamespace`). */
export function cluster(
  namespace: string,
  name: string,
  className: string,
  classNamespace?: string,
): KubeObject {
  return {
    apiVersion: 'cluster.x-k8s.io/v1beta1',
    kind: 'Cluster',
    metadata: { namespace, name },
    spec: {
      topology: { classRef: { name: className, ...(classNamespace ? { namespace: classNamespace } : {}) } },
    },
  } as KubeObject;
}

/** Informers of ClusterStacks and releases, indexed by namespace as the pipeline indexes them. */
export function indexed<T extends KubeObject>(objects: T[]): FakeInformer<T> {
  const inf = new FakeInformer<T>(objects);
  inf.addIndexer(NAMESPACE_INDEX, namespaceIndex);
  return inf;
}

export function asInformer<T extends KubeObject>(f: FakeInformer<T>): Informer<T> {
  return f.informer;
}

/** A controller recording its keys. */
export function recordingController(): { keys: string[]; controller: Controller } {
  const keys: string[] = [];
  return { keys, controller: { enqueue: (k: string) => void keys.push(k) } as unknown as Controller };
}
