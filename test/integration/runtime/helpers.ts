// Helpers shared by the runtime integration tests (real API server from hack/testenv).
import { KubeClient, type KubeObject } from '../../../controller/runtime/client.ts';
import { type Informer, objectKey } from '../../../controller/runtime/informer.ts';
import { eventually, kubeConfigFrom, testEnv, uniqueName } from '../../support/env.ts';

export function runtimeClient(): KubeClient {
  return new KubeClient(kubeConfigFrom(testEnv().kubeconfig), { qps: 500, burst: 500 });
}

export async function freshNamespace(client: KubeClient, prefix: string): Promise<string> {
  const name = uniqueName(prefix);
  await client.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
  return name;
}

export async function deleteNamespace(client: KubeClient, name: string): Promise<void> {
  await client.delete('v1', 'Namespace', name);
}

/** Installs a namespaced CRD `Widget` with a status subresource in a group unique to this process. */
export async function installWidgetCrd(
  client: KubeClient,
  group = `${uniqueName('rt')}.test.stackflux.io`,
): Promise<{ apiVersion: string; kind: string; name: string }> {
  const name = `widgets.${group}`;
  const crd: KubeObject = {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name },
    spec: {
      group,
      scope: 'Namespaced',
      names: { plural: 'widgets', singular: 'widget', kind: 'Widget', listKind: 'WidgetList' },
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          subresources: { status: {} },
          schema: {
            openAPIV3Schema: {
              type: 'object',
              properties: {
                spec: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
                status: {
                  type: 'object',
                  properties: {
                    observedGeneration: { type: 'integer' },
                    conditions: {
                      type: 'array',
                      'x-kubernetes-list-type': 'map',
                      'x-kubernetes-list-map-keys': ['type'],
                      items: {
                        type: 'object',
                        required: ['type', 'status', 'reason', 'message', 'lastTransitionTime'],
                        properties: {
                          type: { type: 'string' },
                          status: { type: 'string', enum: ['True', 'False', 'Unknown'] },
                          reason: { type: 'string' },
                          message: { type: 'string' },
                          observedGeneration: { type: 'integer' },
                          lastTransitionTime: { type: 'string', format: 'date-time' },
                        },
                      },
                    },
                  },
                },
              },
            },
          },
        },
      ],
    },
  };
  await client.create(crd);
  await eventually(`CRD ${name} established`, async () => {
    const got = await client.get<
      KubeObject & { status?: { conditions?: Array<{ type: string; status: string }> } }
    >('apiextensions.k8s.io/v1', 'CustomResourceDefinition', name);
    return got?.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')
      ? true
      : undefined;
  });
  return { apiVersion: `${group}/v1`, kind: 'Widget', name };
}

export async function deleteCrd(client: KubeClient, name: string): Promise<void> {
  await client.delete('apiextensions.k8s.io/v1', 'CustomResourceDefinition', name);
}

export type ConfigMap = KubeObject & { data?: Record<string, string> };

/** A deterministic pseudo-random sequence (mulberry32), so a failing run can be repeated. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export async function inParallel<T>(
  items: T[],
  limit: number,
  fn: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const item = items[next++] as T;
      await fn(item);
    }
  };
  await Promise.all(Array.from({ length: limit }, worker));
}

/** name → resourceVersion of a fresh LIST. */
export async function snapshot(client: KubeClient, ns: string): Promise<Map<string, string>> {
  const list = await client.listAll<ConfigMap>('v1', 'ConfigMap', { namespace: ns });
  return new Map(list.items.map((o) => [objectKey(o), o.metadata.resourceVersion ?? '']));
}

export function mirror(inf: Informer<ConfigMap>): Map<string, string> {
  return new Map(inf.list().map((o) => [objectKey(o), o.metadata.resourceVersion ?? '']));
}

export function diff(want: Map<string, string>, got: Map<string, string>): string | undefined {
  const missed = [...want.keys()].filter((k) => !got.has(k));
  const ghosts = [...got.keys()].filter((k) => !want.has(k));
  const stale = [...want.keys()].filter((k) => got.has(k) && got.get(k) !== want.get(k));
  if (missed.length + ghosts.length + stale.length === 0) return undefined;
  return `missed ${missed.length} ${missed.slice(0, 5)}; ghosts ${ghosts.length} ${ghosts.slice(0, 5)}; stale ${stale.length} ${stale.slice(0, 5)}`;
}
