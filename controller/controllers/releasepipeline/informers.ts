// The sharded informers of the release pipeline (--shard): stackflux's own kinds and the Flux
// objects it manages (only those labelled as managed by stackflux), in one namespace or all.
import type { ClusterStack } from '../../api/clusterstack.ts';
import type { ClusterStackRelease } from '../../api/clusterstackrelease.ts';
import {
  FLUX_KUSTOMIZE_API_VERSION,
  FLUX_SOURCE_API_VERSION,
  type GitRepository,
  type Kustomization,
} from '../../api/flux.ts';
import { API_VERSION } from '../../api/meta.ts';
import { MANAGED_BY_LABELS } from '../../releases/flux.ts';
import type { KubeObject } from '../../runtime/client.ts';
import type { Manager } from '../../runtime/manager.ts';
import type { PipelineInformers } from './types.ts';

/** The NAMESPACE_INDEX of the ClusterStacks and releases: an object's namespace. */
export function namespaceIndex(obj: KubeObject): string[] {
  return obj.metadata.namespace ? [obj.metadata.namespace] : [];
}

/** The pipeline's sharded informers, of `namespace` (undefined or "": every namespace). */
export function pipelineInformers(
  manager: Pick<Manager, 'shardedInformer'>,
  namespace: string | undefined,
): PipelineInformers {
  const scope = namespace ? { namespace } : {};
  const managedBy = Object.entries(MANAGED_BY_LABELS)
    .map(([k, v]) => `${k}=${v}`)
    .join(',');

  // Sharded kinds (--shard): stackflux's own, the Flux objects it manages, CAPI Clusters.
  const clusterStacks = manager.shardedInformer<ClusterStack & KubeObject>(
    API_VERSION,
    'ClusterStack',
    scope,
  );
  const releases = manager.shardedInformer<ClusterStackRelease & KubeObject>(
    API_VERSION,
    'ClusterStackRelease',
    scope,
  );
  const gitRepositories = manager.shardedInformer<GitRepository & KubeObject>(
    FLUX_SOURCE_API_VERSION,
    'GitRepository',
    {
      ...scope,
      labelSelector: managedBy,
    },
  );
  const kustomizations = manager.shardedInformer<Kustomization & KubeObject>(
    FLUX_KUSTOMIZE_API_VERSION,
    'Kustomization',
    {
      ...scope,
      labelSelector: managedBy,
    },
  );
  return { clusterStacks, releases, gitRepositories, kustomizations };
}
