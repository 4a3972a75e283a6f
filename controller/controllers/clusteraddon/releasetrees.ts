// Release trees of the ClusterStackReleases the Clusters' addons come from: on disk by commit (the
// fetcher's cache), parsed copies kept in memory (at most MAX_TREES, oldest first out), with the
// chart dependencies the release controller fetched when it validated the release.
import type { ClusterStackRelease } from '../../api/clusterstackrelease.ts';
import type { ReleaseTree } from '../../api/release.ts';
import type { TenancyPolicy } from '../../releases/tenancy.ts';
import type { KubeClient } from '../../runtime/client.ts';
import { releaseTreeKey, withReleaseChartDependencies } from '../../sources/chartrepo.ts';
import { type ReleaseTreeFetcher, releaseTreeFetcher } from '../../sources/releasetree.ts';
import { sourceSecretCredentials } from '../common.ts';

/** Parsed release trees kept in memory. */
export const MAX_TREES = 64;

export interface ReleaseTreeStoreOptions {
  /** Reads the source's Secret when the release names one. */
  client: KubeClient;
  cacheDir: string;
  /** Reads release trees (default: releaseTreeFetcher without an OCI client). */
  fetchTree?: ReleaseTreeFetcher;
  /** --github-api-url: where releases read from GitHub release assets are downloaded. */
  githubApiUrl?: string;
  tenancy?: TenancyPolicy;
}

export class ReleaseTreeStore {
  private readonly trees = new Map<string, ReleaseTree>();
  private readonly fetchTree: ReleaseTreeFetcher;
  private readonly opts: ReleaseTreeStoreOptions;

  constructor(opts: ReleaseTreeStoreOptions) {
    this.opts = opts;
    this.fetchTree =
      opts.fetchTree ??
      releaseTreeFetcher(opts.githubApiUrl !== undefined ? { githubApiUrl: opts.githubApiUrl } : {});
  }

  /** The tree of the release at its commit (undefined while the release has no commit). */
  async treeOf(release: ClusterStackRelease): Promise<ReleaseTree | undefined> {
    const { client, cacheDir, tenancy } = this.opts;
    const commit = release.status?.commit;
    if (commit === undefined) return undefined;
    const src = release.spec.source;
    // The tag too: a tree is read as released at its tag (csctl's placeholders take its version).
    const key = `${src.url}\n${commit}\n${src.path ?? ''}\n${release.spec.tag}`;
    const cached = this.trees.get(key);
    if (cached !== undefined) return cached;
    const creds =
      src.secretRef !== undefined
        ? await sourceSecretCredentials(client, release.metadata.namespace ?? '', src.secretRef.name)
        : undefined;
    const fetched = await this.fetchTree(src, release.spec.tag, commit, cacheDir, creds);
    // Chart dependencies the release controller fetched when it validated the release (on disk).
    const tree = await withReleaseChartDependencies(fetched, release.spec.tag, {
      cacheDir,
      treeKey: releaseTreeKey(src.url, commit, src.path ?? ''),
      ...(tenancy !== undefined ? { tenancy } : {}),
      cacheOnly: true,
    });
    if (this.trees.size >= MAX_TREES) {
      const first = this.trees.keys().next().value;
      if (first !== undefined) this.trees.delete(first);
    }
    this.trees.set(key, tree);
    return tree;
  }
}
