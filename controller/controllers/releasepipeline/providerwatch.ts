// Events of provider kinds (spec.providerRef) → the pipeline's controllers' keys.

import { providerObjectKind } from '../../reconcilers/provider.ts';
import type { KubeObject } from '../../runtime/client.ts';
import { NAMESPACE_INDEX } from '../clusterstack.ts';
import { ownerKey } from '../common.ts';
import type { ProviderKinds } from '../provider.ts';
import type { PipelineControllers, PipelineInformers } from './types.ts';

/**
 * Provider objects → their release (owner); templates → the ClusterStacks and releases of the
 * namespace that name them (cost: the ClusterStacks/releases of one namespace).
 */
export function watchProviderKinds(
  providers: Pick<ProviderKinds, 'subscribe' | 'subscribeSynced'>,
  clusterStacks: PipelineInformers['clusterStacks'],
  releases: PipelineInformers['releases'],
  clusterStackController: PipelineControllers['clusterStack'],
  releaseController: PipelineControllers['release'],
): void {
  providers.subscribe((o) => {
    const ns = o.metadata.namespace;
    if (ns === undefined) return;
    const owner = ownerKey(o, 'ClusterStackRelease');
    if (owner !== undefined) {
      releaseController.enqueue(owner);
      return;
    }
    const names = (ref: { kind?: string; name?: string; apiVersion?: string } | undefined): boolean =>
      ref !== undefined &&
      ref.kind === o.kind &&
      ref.name === o.metadata.name &&
      ref.apiVersion === o.apiVersion;
    for (const cs of clusterStacks.byIndex(NAMESPACE_INDEX, ns))
      if (names(cs.spec.providerRef)) clusterStackController.enqueue(`${ns}/${cs.metadata.name}`);
    for (const r of releases.byIndex(NAMESPACE_INDEX, ns))
      if (names(r.spec.providerRef)) releaseController.enqueue(`${ns}/${r.metadata.name}`);
  });
  // A cache that just synced turns "looking up" into found/not found for everyone naming the kind.
  providers.subscribeSynced((apiVersion, kind) => {
    const key = (o: KubeObject) => `${o.metadata.namespace}/${o.metadata.name}`;
    const uses = (ref: { apiVersion?: string; kind?: string } | undefined): boolean =>
      ref?.apiVersion === apiVersion && (ref.kind === kind || providerObjectKind(ref.kind ?? '') === kind);
    for (const cs of clusterStacks.list())
      if (uses(cs.spec.providerRef)) clusterStackController.enqueue(key(cs));
    for (const r of releases.list()) if (uses(r.spec.providerRef)) releaseController.enqueue(key(r));
  });
}
