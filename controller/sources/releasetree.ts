// The one place that tells release sources apart: an oci:// URL is an OCI repository of csctl
// release artifacts (./oci.ts), anything else a Git repository (./git.ts; GitHub sources too, by
// their clone URL). Listing and reading a release tree dispatch here, so controllers call one
// function for every kind of source.
import type { ReleaseTree } from '../api/release.ts';
import { fetchReleaseTree, type GitCredentials, listTags, type RemoteTag, SourceError } from './git.ts';
import {
  type AssetsToTree,
  fetchOciReleaseTree,
  type OciClient,
  ociCredentialsOf,
  parseOciUrl,
} from './oci.ts';
import type { TagLister } from './poller.ts';

/** Where a release is read from: a ClusterStackRelease's spec.source. */
export interface ReleaseSource {
  url: string;
  /** The stack's folder in a Git repository (an OCI artifact has none). */
  path?: string;
  /** An OCI source over plain http. */
  insecure?: boolean;
}

export interface ReleaseSources {
  /** Lists OCI repositories and reads their artifacts; absent: OCI sources are refused. */
  oci?: OciClient;
  /**
   * Turns a csctl release's assets into its tree (releases/csctl/assets.ts
   * releaseTreeFromCsctlAssets); absent: OCI releases can be listed but not read.
   */
  assetsToTree?: AssetsToTree;
}

/** The tree of a release at `commit` (a Git commit, or an OCI manifest digest); cached on disk. */
export type ReleaseTreeFetcher = (
  source: ReleaseSource,
  tag: string,
  commit: string,
  cacheDir: string,
  creds: GitCredentials | undefined,
) => Promise<ReleaseTree>;

export function isOciUrl(url: string): boolean {
  return url.startsWith('oci://');
}

function unsupported(what: string): SourceError {
  return new SourceError('Unsupported', `this controller was started without ${what}`);
}

export function releaseTreeFetcher(sources: ReleaseSources = {}): ReleaseTreeFetcher {
  return (source, tag, commit, cacheDir, creds) => {
    if (!isOciUrl(source.url))
      return fetchReleaseTree(source.url, tag, commit, source.path ?? '', cacheDir, creds);
    if (sources.oci === undefined) return Promise.reject(unsupported('OCI release sources'));
    if (sources.assetsToTree === undefined)
      return Promise.reject(unsupported('reading csctl release artifacts from OCI registries'));
    return fetchOciReleaseTree(source.url, tag, commit, cacheDir, creds, {
      client: sources.oci,
      assetsToTree: sources.assetsToTree,
      ...(source.insecure === true ? { insecure: true } : {}),
    });
  };
}

/** Lists a source's tags: ls-remote for Git, tags/list plus a HEAD per release tag for OCI (the digest is the commit). */
export function sourceTagLister(sources: ReleaseSources = {}, gitLister: TagLister = listTags): TagLister {
  return (url, creds, o): Promise<RemoteTag[]> => {
    if (!isOciUrl(url)) return gitLister(url, creds);
    if (sources.oci === undefined) return Promise.reject(unsupported('OCI release sources'));
    let registry: string;
    try {
      registry = parseOciUrl(url).registry;
    } catch (err) {
      return Promise.reject(err);
    }
    return sources.oci.listTags(url, ociCredentialsOf(creds, registry), o ?? {});
  };
}
