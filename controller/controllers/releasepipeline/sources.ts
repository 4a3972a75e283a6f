// How the pipeline reads release sources: the tenants' source credentials, the kinds of source
// (Git, OCI, GitHub releases), the tag lister and tree fetcher, and the shared source pollers whose
// changed listings requeue the ClusterStacks and their releases.
import type { ClusterStackRelease } from '../../api/clusterstackrelease.ts';
import type { KubeObject } from '../../runtime/client.ts';
import type { Clock } from '../../runtime/clock.ts';
import type { Informer } from '../../runtime/informer.ts';
import type { Logger } from '../../runtime/logging.ts';
import type { Manager } from '../../runtime/manager.ts';
import type { GitCredentials } from '../../sources/git.ts';
import { GitHubReleases } from '../../sources/github.ts';
import { OciClient } from '../../sources/oci.ts';
import { SourcePollers, type TagLister } from '../../sources/poller.ts';
import {
  type ReleaseSources,
  type ReleaseTreeFetcher,
  releaseTreeFetcher,
  sourceTagLister,
} from '../../sources/releasetree.ts';
import { NAMESPACE_INDEX } from '../clusterstack.ts';
import { ownerKey, sourceSecretCredentials } from '../common.ts';
import { type SourceReadLimits, withGitHubListingDeadline, withListingDeadline } from '../sourcereads.ts';
import type { LateControllers, ReleasePipelineOptions } from './types.ts';

/** What reads the sources of releases. */
export interface PipelineSources {
  credentials: (namespace: string, name: string) => Promise<GitCredentials>;
  readLimits: Partial<SourceReadLimits>;
  lister: TagLister;
  fetchTree: ReleaseTreeFetcher;
}

export function pipelineSources(
  manager: Pick<Manager, 'client'>,
  opts: Pick<ReleasePipelineOptions, 'githubApiUrl' | 'sources' | 'sourceReads' | 'lister'>,
  clock: Clock,
): PipelineSources {
  // A tenant's secretRef: only Secrets labelled for it (stackflux sends them to a URL the tenant picks).
  const credentials = (namespace: string, name: string) =>
    sourceSecretCredentials(manager.client, namespace, name);
  const sources: ReleaseSources = {
    oci: new OciClient({ clock }),
    ...(opts.githubApiUrl !== undefined ? { githubApiUrl: opts.githubApiUrl } : {}),
    ...opts.sources,
  };
  const readLimits = opts.sourceReads ?? {};
  const lister = sourceTagLister(sources, opts.lister);
  const fetchTree = releaseTreeFetcher(sources);
  return { credentials, readLimits, lister, fetchTree };
}

/**
 * A changed listing (keys of ClusterStacks) may move a tag to another commit: the ClusterStacks and
 * the releases they own re-check theirs too.
 */
export function enqueueChangedStacks(
  releases: Pick<Informer<ClusterStackRelease & KubeObject>, 'byIndex'>,
  controllers: LateControllers,
): (keys: string[]) => void {
  return (keys) => {
    for (const k of keys) {
      controllers.clusterStack?.enqueue(k);
      const [ns, name] = k.split('/');
      if (ns === undefined || name === undefined) continue;
      for (const r of releases.byIndex(NAMESPACE_INDEX, ns)) {
        if (ownerKey(r, 'ClusterStack') === k) controllers.release?.enqueue(`${ns}/${r.metadata.name}`);
      }
    }
  };
}

/** The shared source pollers; listings under their deadlines; `onChange` gets changed ClusterStacks. */
export function pipelinePollers(
  opts: Pick<ReleasePipelineOptions, 'githubLister' | 'githubApiUrl'>,
  sources: Pick<PipelineSources, 'lister' | 'readLimits' | 'credentials'>,
  clock: Clock,
  logger: Logger,
  onChange: (keys: string[]) => void,
): SourcePollers {
  const { lister, readLimits, credentials } = sources;
  return new SourcePollers({
    // A listing that never ends would stop its source from being listed again.
    lister: withListingDeadline(lister, readLimits, clock),
    githubLister: withGitHubListingDeadline(
      opts.githubLister ??
        new GitHubReleases({ clock, ...(opts.githubApiUrl ? { baseUrl: opts.githubApiUrl } : {}) }).lister(),
      readLimits,
      clock,
    ),
    credentials,
    clock,
    logger,
    onChange,
  });
}
