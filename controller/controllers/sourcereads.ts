// The total deadlines of reading release sources and the slots of the background reads
// (`stackflux run --source-read-timeout`, `--source-list-timeout`, `--source-reads`): a release
// tree is at most 2,000 files and 20 MiB, so minutes are plenty; a listing is smaller still.
import type { ReleaseTree } from '../api/release.ts';
import type { Clock } from '../runtime/clock.ts';
import { withDeadline } from '../sources/deadline.ts';
import type { RemoteTag } from '../sources/git.ts';
import type { GitHubTagLister } from '../sources/github.ts';
import type { TagLister } from '../sources/poller.ts';
import { BackgroundFetcher } from './treefetcher.ts';

/**
 * Where the release controller reads sources: in the background (./treefetcher.ts), so a
 * reconcile never waits on a network read; `wake` enqueues a release whose read settled.
 */
export interface ReleaseReads {
  trees: BackgroundFetcher<ReleaseTree>;
  listings: BackgroundFetcher<RemoteTag[]>;
  wake: (key: string) => void;
}

export interface SourceReadLimits {
  /** Total time to read one release tree (all its requests, layers, git processes). */
  treeTimeoutMs: number;
  /** Total time of one listing of a source. */
  listTimeoutMs: number;
  /** Background reads in flight at once (each kind); one namespace gets at most half. */
  maxConcurrent: number;
}

export const SOURCE_READ_DEFAULTS: Readonly<SourceReadLimits> = {
  treeTimeoutMs: 5 * 60_000,
  listTimeoutMs: 2 * 60_000,
  maxConcurrent: 8,
};

export const TREE_DEADLINE_FLAG = 'source-read-timeout';
export const LIST_DEADLINE_FLAG = 'source-list-timeout';

/** The release controller's background reads of trees and listings. */
export function sourceReads(
  limits: Partial<SourceReadLimits>,
  clock: Clock,
  wake: (key: string) => void,
): ReleaseReads {
  const l = { ...SOURCE_READ_DEFAULTS, ...limits };
  return {
    trees: new BackgroundFetcher<ReleaseTree>({
      deadline: { ms: l.treeTimeoutMs, flag: TREE_DEADLINE_FLAG },
      maxConcurrent: l.maxConcurrent,
      clock,
    }),
    listings: new BackgroundFetcher<RemoteTag[]>({
      deadline: { ms: l.listTimeoutMs, flag: LIST_DEADLINE_FLAG },
      maxConcurrent: l.maxConcurrent,
      clock,
    }),
    wake,
  };
}

/** `lister` with the listing deadline: a listing that has not ended by then fails (SourceTimeout). */
export function withListingDeadline(
  lister: TagLister,
  limits: Partial<SourceReadLimits>,
  clock: Clock,
): TagLister {
  const ms = limits.listTimeoutMs ?? SOURCE_READ_DEFAULTS.listTimeoutMs;
  return (url, creds, o) =>
    withDeadline(
      { ms, flag: LIST_DEADLINE_FLAG },
      `listing the tags of ${url}`,
      (signal) => lister(url, creds, { ...o, signal }),
      { clock },
    );
}

/**
 * A GitHub Releases lister with the listing deadline. Its requests take no signal (each has its
 * own timeout and the pages are bounded): the listing fails at the deadline all the same, so the
 * poller lists the source again.
 */
export function withGitHubListingDeadline(
  lister: GitHubTagLister,
  limits: Partial<SourceReadLimits>,
  clock: Clock,
): GitHubTagLister {
  const ms = limits.listTimeoutMs ?? SOURCE_READ_DEFAULTS.listTimeoutMs;
  return (repo, token) =>
    withDeadline(
      { ms, flag: LIST_DEADLINE_FLAG },
      `listing the releases of ${repo.owner}/${repo.repo}`,
      () => lister(repo, token),
      { clock },
    );
}
