// The pipeline's two controllers, each with the reconciler deps it reads: the ClusterStack
// controller (tags → releases, polling) and the ClusterStackRelease controller (validation, Flux
// objects, status).
import type { KubeObject } from '../../runtime/client.ts';
import type { Clock } from '../../runtime/clock.ts';
import type { Controller } from '../../runtime/controller.ts';
import type { Informer } from '../../runtime/informer.ts';
import type { Manager } from '../../runtime/manager.ts';
import type { SourcePollers } from '../../sources/poller.ts';
import { clusterStackReconciler } from '../clusterstack.ts';
import { type ClusterStackReleaseDeps, clusterStackReleaseReconciler } from '../clusterstackrelease.ts';
import type { ClusterUseView } from '../clusterview.ts';
import type { ProviderKinds } from '../provider.ts';
import type { PipelineSources } from './sources.ts';
import type { PipelineInformers, ReleasePipelineOptions } from './types.ts';

type ControllerManager = Pick<Manager, 'addController' | 'client' | 'events' | 'withShardLabel'>;

/** What both controllers read, made once by the pipeline. */
export interface PipelineParts extends PipelineInformers {
  clock: Clock;
  pollers: SourcePollers;
  clusterView: ClusterUseView;
  providers: ProviderKinds;
  namespaces: Informer<KubeObject>;
}

export function addClusterStackController(
  manager: ControllerManager,
  opts: Pick<ReleasePipelineOptions, 'concurrency' | 'githubApiUrl' | 'defaultPollIntervalMs'>,
  parts: PipelineParts,
): Controller {
  const { clock, pollers, clusterStacks, releases, clusterView, providers, namespaces } = parts;
  return manager.addController({
    name: 'clusterstack',
    kind: 'ClusterStack',
    maxConcurrentReconciles: opts.concurrency,
    reconcile: clusterStackReconciler({
      client: manager.client,
      ...(opts.githubApiUrl !== undefined ? { githubApiUrl: opts.githubApiUrl } : {}),
      clock,
      pollers,
      clusterStacks,
      releases,
      clusterView,
      defaultIntervalMs: opts.defaultPollIntervalMs,
      recorder: manager.events,
      withShardLabel: (o) => manager.withShardLabel(o),
      providers,
      namespaces,
    }),
  });
}

export function addReleaseController(
  manager: ControllerManager,
  opts: Pick<ReleasePipelineOptions, 'concurrency' | 'templates' | 'tenancy' | 'cacheDir'>,
  parts: PipelineParts &
    Pick<PipelineSources, 'credentials' | 'fetchTree' | 'lister'> &
    Required<Pick<ClusterStackReleaseDeps, 'classes' | 'reads'>>,
): Controller {
  const { clock, pollers, releases, gitRepositories, kustomizations, clusterView, providers } = parts;
  return manager.addController({
    name: 'clusterstackrelease',
    kind: 'ClusterStackRelease',
    maxConcurrentReconciles: opts.concurrency,
    reconcile: clusterStackReleaseReconciler({
      client: manager.client,
      clock,
      pollers,
      releases,
      gitRepositories,
      kustomizations,
      clusterView,
      templates: opts.templates,
      ...(opts.tenancy !== undefined ? { tenancy: opts.tenancy } : {}),
      cacheDir: opts.cacheDir,
      credentials: parts.credentials,
      fetchTree: parts.fetchTree,
      listTags: parts.lister,
      recorder: manager.events,
      withShardLabel: (o) => manager.withShardLabel(o),
      providers,
      sharing: { clusterStacks: parts.clusterStacks, namespaces: parts.namespaces },
      classes: parts.classes,
      reads: parts.reads,
    }),
  });
}
