// Wires the release pipeline into a Manager: informers (with the indexes the controllers read),
// the shared source pollers, the ClusterStack and ClusterStackRelease controllers, and the watches
// that map events of related objects to their keys.
import { realClock } from '../runtime/clock.ts';
import type { Controller } from '../runtime/controller.ts';
import { errorFields } from '../runtime/logging.ts';
import type { Manager } from '../runtime/manager.ts';
import type { SourcePollers } from '../sources/poller.ts';
import type { ReleaseTreeFetcher } from '../sources/releasetree.ts';
import { NAMESPACE_INDEX } from './clusterstack.ts';
import { ClusterUseView, servedClusterApiVersion } from './clusterview.ts';
import { namespaceInformer } from './namespaces.ts';
import { ProviderKinds } from './provider.ts';
import { pipelineClasses } from './releasepipeline/classes.ts';
import { addClusterStackController, addReleaseController } from './releasepipeline/controllers.ts';
import { namespaceIndex, pipelineInformers } from './releasepipeline/informers.ts';
import { watchProviderKinds } from './releasepipeline/providerwatch.ts';
import { enqueueChangedStacks, pipelinePollers, pipelineSources } from './releasepipeline/sources.ts';
import type { LateControllers, ReleasePipelineOptions } from './releasepipeline/types.ts';
import { watchClusterStackInputs, watchReleaseInputs } from './releasepipeline/watches.ts';
import { type ReleaseReads, sourceReads } from './sourcereads.ts';

export { CLUSTER_API_VERSIONS, servedClusterApiVersion } from './clusterview.ts';
export type { ReleasePipelineOptions } from './releasepipeline/types.ts';

export interface ReleasePipeline {
  pollers: SourcePollers;
  clusterStackController: Controller;
  releaseController: Controller;
  clusterApiVersion: string | undefined;
  /** Reads release trees of every kind of source (the ClusterAddon controller reads with it too). */
  fetchTree: ReleaseTreeFetcher;
  /** Which Clusters use which ClusterClass, over every namespace and shard (garbage collection). */
  clusterView: ClusterUseView;
  /** The background reads of release trees and listings (the impact controller reads with them too). */
  reads: ReleaseReads;
}

/**
 * The pipeline as a composition of its collaborators (controllers/releasepipeline/): the sharded
 * informers, the source access and pollers, the two controllers, the cluster-class renderer,
 * and the watches. The pollers and the background reads are created before the controllers they
 * requeue, which they reach through `late` once each exists.
 */
export async function setupReleasePipeline(
  manager: Manager,
  opts: ReleasePipelineOptions,
): Promise<ReleasePipeline> {
  const clock = opts.clock ?? realClock;
  const log = manager.log;
  const informers = pipelineInformers(manager, opts.namespace);
  const { clusterStacks, releases } = informers;
  // Clusters count as "in use" from every namespace and shard, and only a complete view lets a
  // release be deleted (clusterview.ts); Cluster API installed later is picked up without restart.
  const clusterView = new ClusterUseView({ manager, clock });
  // Namespace labels: a Cluster of another namespace counts only where its ClusterStack serves it.
  const namespaces = namespaceInformer(manager);
  const clusterApiVersion = await servedClusterApiVersion(manager);
  clusterStacks.addIndexer(NAMESPACE_INDEX, namespaceIndex);
  releases.addIndexer(NAMESPACE_INDEX, namespaceIndex);

  const sources = pipelineSources(manager, opts, clock);
  const { credentials, readLimits, lister, fetchTree } = sources;
  // The controllers are created below; the pollers only notify once they exist.
  const late: LateControllers = {};
  const pollers = pipelinePollers(opts, sources, clock, log, enqueueChangedStacks(releases, late));

  // Provider kinds (providerRef): caches created on first use; see ./provider.ts.
  const providers = new ProviderKinds({
    manager,
    clock,
    ...(opts.namespace ? { namespace: opts.namespace } : {}),
  });
  const parts = { ...informers, clock, pollers, clusterView, providers, namespaces };
  const clusterStackController = addClusterStackController(manager, opts, parts);
  late.clusterStack = clusterStackController;

  // A Helm-chart cluster-class (csctl) is rendered in render processes and written to the fleet.
  const classes = pipelineClasses(manager, opts, clock);
  const reads = sourceReads(readLimits, clock, (k) => late.release?.enqueue(k));
  void manager.done.then(() => {
    reads.trees.stop();
    reads.listings.stop();
  });
  const releaseController = addReleaseController(manager, opts, {
    ...parts,
    credentials,
    fetchTree,
    lister,
    classes,
    reads,
  });
  watchProviderKinds(providers, clusterStacks, releases, clusterStackController, releaseController);
  watchClusterStackInputs(manager, informers, clusterStackController);
  late.release = releaseController;
  const controllers = { clusterStack: clusterStackController, release: releaseController };
  watchReleaseInputs(manager, { ...informers, namespaces }, clusterView, controllers);
  clusterView.start();
  void manager.done
    .then(() => {
      pollers.stop();
      return clusterView.stop();
    })
    .catch((err: unknown) => log.error(errorFields(err), 'stopping pollers'));

  return {
    pollers,
    clusterStackController,
    releaseController,
    clusterApiVersion,
    clusterView,
    fetchTree,
    reads,
  };
}
