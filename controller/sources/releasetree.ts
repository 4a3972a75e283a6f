// The one place that tells release sources apart: an oci:// URL is an OCI repository of csctl
// release artifacts (./oci.ts); a release whose identity is a GitHub assets identity is read from
// its GitHub release's csctl assets (./githubassets.ts); anything else is a Git tree (./git.ts;
// GitHub sources too, by their clone URL). Listing and reading a release tree dispatch here, so
// controllers call one function for every kind of source.
import { LABEL_ALLOW_PLAIN_HTTP } from '../api/meta.ts';
import type { ReleaseTree } from '../api/release.ts';
import { releaseTreeFromCsctlAssets } from '../releases/csctl/assets.ts';
import { releasedTree } from '../releases/format.ts';
import { DEFAULT_GITHUB_API_URL, parseGithubCloneUrl } from '../releases/githuburl.ts';
import { fetchReleaseTree, type GitCredentials, listTags, type RemoteTag, SourceError } from './git.ts';
import { GitHubReleaseAssets, isGitHubAssetsIdentity } from './githubassets.ts';
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
  /** Turns a csctl release's assets into its tree (default releaseTreeFromCsctlAssets). */
  assetsToTree?: AssetsToTree;
  /** --github-api-url: the GitHub whose release assets are read (default api.github.com). */
  githubApiUrl?: string;
  /** Reads GitHub release assets (default: a client of githubApiUrl). */
  githubAssets?: GitHubReleaseAssets;
  /** Reads a Git tag's files below the stack path (default fetchReleaseTree). */
  gitTree?: typeof fetchReleaseTree;
}

/**
 * The tree of a release at `commit` (a Git commit, or an OCI manifest digest) as released at `tag`
 * (format.ts releasedTree); cached on disk as fetched.
 * `signal` ends the read (its total deadline: ./deadline.ts): git is killed, requests cancelled.
 */
export type ReleaseTreeFetcher = (
  source: ReleaseSource,
  tag: string,
  commit: string,
  cacheDir: string,
  creds: GitCredentials | undefined,
  signal?: AbortSignal,
) => Promise<ReleaseTree>;

export function isOciUrl(url: string): boolean {
  return url.startsWith('oci://');
}

/**
 * Why a tenant's credentials may not go to an OCI source over plain http (`insecure: true`): only
 * a Secret labelled stackflux.io/allow-plain-http: "true" may (issue 31 F12). Credentials the
 * platform passes without a Secret of a tenant (no `secret`) are the platform's choice.
 */
export function plainHttpRefusal(
  creds: GitCredentials | undefined,
  insecure: boolean | undefined,
): SourceError | undefined {
  if (insecure !== true || creds?.secret === undefined || creds.allowPlainHttp === true) return undefined;
  const [ns = '', name = ''] = creds.secret.split('/');
  return new SourceError(
    'PlainHttpNotAllowed',
    `Secret ${creds.secret} is not labelled ${LABEL_ALLOW_PLAIN_HTTP}: "true"; with spec.source.oci.insecure its credentials would go over plain http, which stackflux does only when the Secret's owner allows it (kubectl label secret -n ${ns} ${name} ${LABEL_ALLOW_PLAIN_HTTP}=true), or serve the registry over https`,
  );
}

function unsupported(what: string): SourceError {
  return new SourceError('Unsupported', `this controller was started without ${what}`);
}

export function releaseTreeFetcher(sources: ReleaseSources = {}): ReleaseTreeFetcher {
  const { githubApiUrl } = sources;
  const githubAssets =
    sources.githubAssets ??
    new GitHubReleaseAssets(githubApiUrl !== undefined ? { baseUrl: githubApiUrl } : {});
  const gitTree = sources.gitTree ?? fetchReleaseTree;
  return (source, tag, commit, cacheDir, creds, signal) => {
    if (isOciUrl(source.url)) {
      if (sources.oci === undefined) return Promise.reject(unsupported('OCI release sources'));
      const refused = plainHttpRefusal(creds, source.insecure);
      if (refused !== undefined) return Promise.reject(refused);
      return fetchOciReleaseTree(source.url, tag, commit, cacheDir, creds, {
        client: sources.oci,
        assetsToTree: sources.assetsToTree ?? ((assets) => releaseTreeFromCsctlAssets(assets)),
        ...(source.insecure === true ? { insecure: true } : {}),
        signal,
      });
    }
    if (isGitHubAssetsIdentity(commit)) {
      // The assets are the stack: the stack path does not apply.
      const repo = parseGithubCloneUrl(source.url, githubApiUrl);
      if (repo === undefined)
        return Promise.reject(
          new SourceError(
            'InvalidURL',
            `${source.url} is not a repository of the GitHub at ${githubApiUrl ?? DEFAULT_GITHUB_API_URL}`,
          ),
        );
      return githubAssets.fetchTree(repo, tag, commit, creds?.password, cacheDir, undefined, signal);
    }
    // A Git tag holds the stack's sources: read as its tool releases them (csctl create's
    // placeholders). OCI artifacts and release assets are that tool's output already.
    return gitTree(source.url, tag, commit, source.path ?? '', cacheDir, creds, undefined, signal).then(
      (tree) => releasedTree(tree, tag),
    );
  };
}

/** Lists a source's tags: ls-remote for Git, tags/list plus a HEAD per release tag for OCI (the digest is the commit). */
export function sourceTagLister(sources: ReleaseSources = {}, gitLister: TagLister = listTags): TagLister {
  return (url, creds, o): Promise<RemoteTag[]> => {
    if (!isOciUrl(url)) return gitLister(url, creds, o?.signal !== undefined ? { signal: o.signal } : {});
    if (sources.oci === undefined) return Promise.reject(unsupported('OCI release sources'));
    const refused = plainHttpRefusal(creds, o?.insecure);
    if (refused !== undefined) return Promise.reject(refused);
    let registry: string;
    try {
      registry = parseOciUrl(url).registry;
    } catch (err) {
      return Promise.reject(err);
    }
    return sources.oci.listTags(url, ociCredentialsOf(creds, registry), o ?? {});
  };
}
