// The watches that map events of related objects to the pipeline's controllers' keys: a
// ClusterStack's own objects and its releases; a release's own objects, the Flux objects it owns,
// the Clusters using its class (both the old and the new object on updates: a Cluster moving from
// v3 to v4 frees v3), and what decides sharing with other namespaces.
import type { ClusterStack } from '../../api/clusterstack.ts';
import type { KubeObject } from '../../runtime/client.ts';
import type { Informer } from '../../runtime/informer.ts';
import { objectKey } from '../../runtime/informer.ts';
import type { Manager } from '../../runtime/manager.ts';
import type { ClusterUseView } from '../clusterview.ts';
import { sameJson } from '../common.ts';
import { namespaceLabelsChanged } from '../namespaces.ts';
import {
  clusterStacksOf,
  releaseOwning,
  releasesOf,
  releasesOfStack,
  sharingStacks,
  stackOfRelease,
} from './keys.ts';
import type { PipelineControllers, PipelineInformers } from './types.ts';

/** ClusterStack controller: its own objects, its releases (by owner). */
export function watchClusterStackInputs(
  manager: Pick<Manager, 'watch'>,
  informers: Pick<PipelineInformers, 'clusterStacks' | 'releases'>,
  clusterStackController: PipelineControllers['clusterStack'],
): void {
  manager.watch(clusterStackController, informers.clusterStacks);
  manager.watch(clusterStackController, informers.releases, stackOfRelease);
}

/**
 * Release controller: its own objects, the Flux objects it owns, Clusters by class (and the
 * ClusterStacks of Clusters by namespace); sharing; everything once the Cluster view is complete.
 */
export function watchReleaseInputs(
  manager: Pick<Manager, 'watch'>,
  informers: PipelineInformers & { namespaces: Informer<KubeObject> },
  clusterView: Pick<ClusterUseView, 'onChange' | 'onSynced'>,
  controllers: PipelineControllers,
): void {
  const { clusterStacks, releases, gitRepositories, kustomizations, namespaces } = informers;
  const { clusterStack: clusterStackController, release: releaseController } = controllers;
  manager.watch(releaseController, releases);
  manager.watch(releaseController, gitRepositories, releaseOwning);
  manager.watch(releaseController, kustomizations, releaseOwning);
  // Both the old and the new object on updates: a Cluster moving from v3 to v4 frees v3. Only
  // changes of the class a Cluster uses arrive here (status updates do not).
  const stacksOfCluster = clusterStacksOf(clusterStacks);
  const releasesOfCluster = releasesOf(releases);
  clusterView.onChange((objs) => {
    const cs = new Set(objs.flatMap(stacksOfCluster));
    const rel = new Set(objs.flatMap(releasesOfCluster));
    for (const k of cs) clusterStackController.enqueue(k);
    for (const k of rel) releaseController.enqueue(k);
  });
  // Sharing with other namespaces (spec.clusterNamespaceSelector): a changed selector or a
  // Namespace's changed labels re-decide what is in use, for the few ClusterStacks that share.
  const ofStack = releasesOfStack(releases);
  manager.watch(
    releaseController,
    clusterStacks,
    ofStack,
    (o: ClusterStack & KubeObject, n: ClusterStack & KubeObject) =>
      !sameJson(o.spec.clusterNamespaceSelector, n.spec.clusterNamespaceSelector),
  );
  manager.watch(
    clusterStackController,
    namespaces,
    () => sharingStacks(clusterStacks).map(objectKey),
    namespaceLabelsChanged,
  );
  manager.watch(
    releaseController,
    namespaces,
    () => sharingStacks(clusterStacks).flatMap(ofStack),
    namespaceLabelsChanged,
  );
  // Once every Cluster is known, garbage collection that waited can run: everything is looked at.
  clusterView.onSynced(() => {
    for (const cs of clusterStacks.list()) clusterStackController.enqueue(objectKey(cs));
    for (const r of releases.list()) releaseController.enqueue(objectKey(r));
  });
}
