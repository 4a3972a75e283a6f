// Types shared by the release pipeline's collaborators (this folder) and its composition
// (../releasepipeline.ts). The lowest layer of the pipeline: it imports no collaborator.
import type { ClusterStack } from '../../api/clusterstack.ts';
import type { ClusterStackRelease } from '../../api/clusterstackrelease.ts';
import type { GitRepository, Kustomization } from '../../api/flux.ts';
import type { FleetWriter } from '../../gitops/branches.ts';
import type { FluxTemplates } from '../../releases/flux.ts';
import type { TenancyPolicy } from '../../releases/tenancy.ts';
import type { RenderPoolOptions } from '../../rendering/index.ts';
import type { KubeObject } from '../../runtime/client.ts';
import type { Clock } from '../../runtime/clock.ts';
import type { Controller } from '../../runtime/controller.ts';
import type { Informer } from '../../runtime/informer.ts';
import type { GitCredentials } from '../../sources/git.ts';
import type { GitHubTagLister } from '../../sources/github.ts';
import type { TagLister } from '../../sources/poller.ts';
import type { ReleaseSources } from '../../sources/releasetree.ts';
import type { ReleaseFleet } from '../releaseclass.ts';
import type { SourceReadLimits } from '../sourcereads.ts';

export interface ReleasePipelineOptions {
  /** Watch only this namespace (default: all). */
  namespace?: string;
  cacheDir: string;
  templates: FluxTemplates;
  defaultPollIntervalMs: number;
  concurrency: number;
  clock?: Clock;
  /** Injected for tests; default: git ls-remote (OCI sources: ./releasetree.ts dispatches). */
  lister?: TagLister;
  /** How releases are read (default: an OciClient, csctl assets → tree, GitHub assets at githubApiUrl). */
  sources?: ReleaseSources;
  /** Root of the GitHub REST API (default https://api.github.com). */
  githubApiUrl?: string;
  /** Injected for tests; default: the GitHub Releases API (ETag-cached, rate-limit aware). */
  githubLister?: GitHubTagLister;
  /** --default-service-account and --allowed-chart-hosts (default: neither). */
  tenancy?: TenancyPolicy;
  /** Limits of the render processes a Helm-chart cluster-class (csctl) renders in. */
  render?: RenderPoolOptions;
  /** Total deadlines of source reads and the background reads' slots (default: ./sourcereads.ts). */
  sourceReads?: Partial<SourceReadLimits>;
  /**
   * The fleet repository (--fleet-url): a rendered cluster-class is written to a branch of it.
   * `writer` makes a writer for branches under `prefix` (credentials from the fleet Secret).
   */
  fleet?: PipelineFleet;
}

/** The fleet repository of ReleasePipelineOptions. */
export type PipelineFleet = Omit<ReleaseFleet, 'writer' | 'secretName'> & {
  secret?: { namespace: string; name: string };
  writer: (prefix: string, credentials: GitCredentials | undefined) => FleetWriter;
};

/** The informers of the pipeline's own kinds and the Flux objects it manages (sharded). */
export interface PipelineInformers {
  clusterStacks: Informer<ClusterStack & KubeObject>;
  releases: Informer<ClusterStackRelease & KubeObject>;
  gitRepositories: Informer<GitRepository & KubeObject>;
  kustomizations: Informer<Kustomization & KubeObject>;
}

/** The pipeline's two controllers. */
export interface PipelineControllers {
  clusterStack: Controller;
  release: Controller;
}

/**
 * The controllers as callbacks created before them see them: set once each exists; until then
 * what would be enqueued is dropped (nothing is started before both exist).
 */
export type LateControllers = Partial<PipelineControllers>;
