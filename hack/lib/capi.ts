// Plays Cluster API's topology controller where none runs (the test environment and the demo):
// whenever a Cluster's metadata.generation is newer than its conditions, it writes the v1beta2
// conditions Available and TopologyReconciled (True, observedGeneration = generation), as Cluster
// API does once a topology change is rolled out. Progressive rollouts gate on them.
import type { KubeClient, KubeObject } from '../../controller/runtime/client.ts';

export const CAPI_V1BETA2 = 'cluster.x-k8s.io/v1beta2';
export const PLAYER_FIELD_MANAGER = 'plays-capi-topology-controller';

type Cluster = KubeObject & {
  metadata: { generation?: number };
  status?: { conditions?: Array<{ type: string; observedGeneration?: number }> };
};

/** Marks every Cluster of namespace ns rolled out at its current generation; returns the Clusters listed. */
export async function markClustersRolledOut(client: KubeClient, ns: string): Promise<Cluster[]> {
  const list = await client.listAll<Cluster>(CAPI_V1BETA2, 'Cluster', { namespace: ns });
  for (const c of list.items) {
    const gen = c.metadata.generation ?? 1;
    const conds = c.status?.conditions ?? [];
    const current = ['Available', 'TopologyReconciled'].every(
      (t) => conds.find((x) => x.type === t)?.observedGeneration === gen,
    );
    if (current) continue;
    const condition = (type: string) => ({
      type,
      status: 'True',
      reason: type === 'Available' ? 'Available' : 'ReconcileSucceeded',
      message: '',
      observedGeneration: gen,
      lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
    });
    await client.applyStatus(
      {
        apiVersion: CAPI_V1BETA2,
        kind: 'Cluster',
        metadata: { name: c.metadata.name ?? '', namespace: ns },
        status: { conditions: [condition('Available'), condition('TopologyReconciled')] },
      },
      { fieldManager: PLAYER_FIELD_MANAGER, force: true },
    );
  }
  return list.items;
}

/** Runs markClustersRolledOut every intervalMs (errors are retried); onList sees each listing. */
export function playClusterApi(
  client: KubeClient,
  ns: string,
  onList: (clusters: KubeObject[]) => void = () => undefined,
  intervalMs = 300,
): { stop: () => Promise<void> } {
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      await markClustersRolledOut(client, ns)
        .then(onList)
        .catch(() => undefined);
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await loop;
    },
  };
}
