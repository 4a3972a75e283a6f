// Reads of release trees and tag listings off the reconcile (through ../treefetcher.ts) and how a
// failed read shows in the release's condition and Events.
import { DeadlineError } from '../../sources/deadline.ts';
import { SourceError } from '../../sources/git.ts';
import type { BackgroundFetcher, FetchJob } from '../treefetcher.ts';

/** Look again at a release whose read runs in the background, in case its wake-up is lost. */
export const READ_PENDING_RECHECK_MS = 60_000;

/** The reason and message a failed read of a release tree shows in its condition. */
export function fetchFailureOf(err: unknown): { reason: string; message: string; hint?: string } {
  return {
    reason: err instanceof SourceError ? err.reason : 'SourceUnavailable',
    message: err instanceof Error ? err.message : String(err),
    // Stable text (the same on every try), so the condition may carry it.
    ...(err instanceof DeadlineError ? { hint: `not finished within ${err.deadline}` } : {}),
  };
}

/** What of a failed read the release's condition shows: the reason and, for a deadline, which. */
export function failureForCondition(err: unknown): { reason: string; hint?: string } {
  const { reason, hint } = fetchFailureOf(err);
  return hint !== undefined ? { reason, hint } : { reason };
}

/** A read still running in the background: the release waits (ArtifactNotReady) and is woken. */
export class ReadPending extends Error {}

/**
 * The value of a background read, or ReadPending while it runs; a failure is thrown (with its
 * back-off the fetcher keeps). Without `fetcher` the read is awaited here.
 */
export async function readOffWorker<T>(
  fetcher: Pick<BackgroundFetcher<T>, 'request'> | undefined,
  job: FetchJob<T>,
  wake: () => void,
): Promise<T> {
  if (fetcher === undefined) return job.read(new AbortController().signal);
  const got = fetcher.request(job, { id: job.key, wake });
  if (got.state === 'ready') return got.value;
  if (got.state === 'failed') throw got.error;
  throw new ReadPending(job.what);
}
