// Shared inputs for the rendering unit tests: a v1beta2 Cluster and a release tree built in memory.
import type { ReleaseTree, StackManifest } from '../../../controller/api/release.ts';
import {
  type RenderAddonInput,
  RenderPool,
  type RenderPoolOptions,
} from '../../../controller/rendering/index.ts';

export function sampleCluster(
  overrides: { name?: string; podCidr?: string; host?: string; port?: number } = {},
) {
  return {
    apiVersion: 'cluster.x-k8s.io/v1beta2',
    kind: 'Cluster',
    metadata: {
      name: overrides.name ?? 'alpha',
      namespace: 'team-a',
      uid: '7b1c7a52-0000-4000-8000-000000000001',
    },
    spec: {
      clusterNetwork: {
        pods: { cidrBlocks: [overrides.podCidr ?? '192.168.0.0/16', '10.250.0.0/16'] },
        services: { cidrBlocks: ['10.128.0.0/12'] },
        serviceDomain: 'cluster.local',
      },
      controlPlaneEndpoint: { host: overrides.host ?? '172.18.0.3', port: overrides.port ?? 6443 },
      controlPlaneRef: {
        apiGroup: 'controlplane.cluster.x-k8s.io',
        kind: 'KubeadmControlPlane',
        name: 'alpha-cp',
      },
      infrastructureRef: {
        apiGroup: 'infrastructure.cluster.x-k8s.io',
        kind: 'DockerCluster',
        name: 'alpha-infra',
      },
      topology: {
        classRef: { name: 'docker-ferrol-1-30-v1' },
        version: 'v1.30.4',
        controlPlane: { replicas: 1 },
      },
    },
  };
}

export function stackOf(addons: StackManifest['addons']): StackManifest {
  return {
    apiVersion: 'stackflux.io/v1alpha1',
    kind: 'Stack',
    provider: 'docker',
    name: 'test',
    kubernetesVersion: 'v1.30.4',
    version: 'v1',
    addons,
  };
}

/** A tree with one addon `a` holding the given files (relative to cluster-addon/a/). */
export function treeOf(files: Record<string, string>, addon = 'a'): ReleaseTree {
  const tree = new Map<string, string>([['stack.yaml', 'unused by the renderer\n']]);
  for (const [path, text] of Object.entries(files)) tree.set(`cluster-addon/${addon}/${path}`, text);
  return tree;
}

/** A ConfigMap template whose data is `body` (already indented by two spaces). */
export function configMap(body: string, name = 'cm'): string {
  return `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${name}\ndata:\n${body}\n`;
}

/** Addon `a` of a one-addon stack with the given files and central values, for sampleCluster(). */
export function addonInput(
  files: Record<string, string>,
  values?: Record<string, unknown>,
): RenderAddonInput {
  return {
    tree: treeOf(files),
    stack: stackOf([{ name: 'a' }]),
    addon: 'a',
    cluster: sampleCluster(),
    ...(values !== undefined ? { centralValues: { a: values } } : {}),
  };
}

/** Runs fn with a render pool of its own, closed afterwards. */
export async function withPool(
  opts: RenderPoolOptions,
  fn: (pool: RenderPool) => Promise<void>,
): Promise<void> {
  const pool = new RenderPool(opts);
  try {
    await fn(pool);
  } finally {
    await pool.close();
  }
}
