// Where the impact controller's snapshot reads release sources: the source pollers' last listing
// of each ClusterStack (never a listing of its own) and the release controller's background tree
// reads (./treefetcher.ts: a total deadline, slots shared fairly between namespaces, the release
// cache on disk). Nothing here waits on the network: a tree still being read marks the snapshot
// pending, and the impact is computed again once the read wakes it.
import type { ClusterStack } from '../api/clusterstack.ts';
import type { ReleaseTree } from '../api/release.ts';
import type { SourceReader } from '../offline/live.ts';
import { SourceError } from '../sources/contract.ts';
import type { RemoteTag } from '../sources/git.ts';
import type { SourcePollers } from '../sources/poller.ts';
import type { ReleaseTreeFetcher } from '../sources/releasetree.ts';
import { sourceRefOf } from './clusterstack.ts';
import type { BackgroundFetcher } from './treefetcher.ts';

export interface ImpactSources {
  pollers: Pick<SourcePollers, 'listing' | 'commitOf'>;
  trees: BackgroundFetcher<ReleaseTree>;
  /** The release pipeline's tree reader and its cache folder (the trees it validated are there). */
  fetchTree: ReleaseTreeFetcher;
  cacheDir: string;
  githubApiUrl?: string;
}

/** A snapshot's reader for one impact computation; `pending()`: some tree is still being read. */
export function impactSourceReader(
  sources: ImpactSources,
  namespace: string,
  /** The impact asking (its release's key) and how to wake it. */
  waiter: { id: string; wake: () => void },
): SourceReader & { pending: () => boolean } {
  let pending = false;
  const listTags = async (cs: ClusterStack): Promise<RemoteTag[]> => {
    const key = `${cs.metadata.namespace ?? 'default'}/${cs.metadata.name}`;
    const listing = sources.pollers.listing(key);
    if (listing === undefined)
      throw new SourceError('NotListedYet', `the source of ClusterStack ${key} has not been listed yet`);
    if (!listing.ok) throw new SourceError(listing.reason, listing.message);
    const ref = sourceRefOf(cs, sources.githubApiUrl);
    return listing.tags.flatMap((tag) => {
      const commit = sources.pollers.commitOf(ref, tag) ?? '';
      const time = listing.times?.[tag];
      return [time !== undefined ? { tag, commit, time } : { tag, commit }];
    });
  };
  const fetchTree: ReleaseTreeFetcher = async (source, tag, commit, _cacheDir, creds) => {
    const got = sources.trees.request(
      {
        key: `impact\n${source.url}\n${commit}\n${source.path ?? ''}\n${tag}\n${namespace}`,
        namespace,
        what: `reading tag ${tag} of ${source.url}`,
        read: (signal) => sources.fetchTree(source, tag, commit, sources.cacheDir, creds, signal),
      },
      { id: `impact\n${waiter.id}`, wake: waiter.wake },
      { keep: true },
    );
    if (got.state === 'ready') return got.value;
    if (got.state === 'failed') throw got.error;
    pending = true;
    throw new SourceError('ArtifactNotReady', `tag ${tag} of ${source.url} is still being read`);
  };
  return { listTags, fetchTree, pending: () => pending };
}
