// The fleet repository as the ClusterAddon controller knows it: the writer (built once the fleet
// credentials are read), the state of each Cluster's branch (git ids only, never file contents;
// fetched once at start and again after a failed write), and the back-off of the repository as a
// whole: after a failed fetch or write no network attempt is made before blockedUntil (the batch
// window doubled per failure in a row, at most FLEET_MAX_BACKOFF_MS); reconciles in between see the
// last error without asking the remote.
import type { BranchState, FleetWriter } from '../../gitops/branches.ts';
import { fleetBranchName } from '../../reconcilers/clusteraddon.ts';
import type { Clock } from '../../runtime/clock.ts';
import type { Logger } from '../../runtime/logging.ts';
import type { GitCredentials } from '../../sources/git.ts';
import type { FleetFailure } from './types.ts';

/** The fleet back-off after `failures` failed fetches or writes in a row. */
export const FLEET_MAX_BACKOFF_MS = 5 * 60_000;
export function fleetBackoffMs(windowMs: number, failures: number): number {
  if (failures <= 0) return 0;
  return Math.min(FLEET_MAX_BACKOFF_MS, Math.max(windowMs, 1_000) * 2 ** Math.min(failures - 1, 16));
}

/** The failure a Cluster's ClusterAddon shows for an error of the fleet (its reason, else FleetUnreachable). */
export function fleetFailureOf(err: unknown): FleetFailure {
  return {
    reason:
      err instanceof Error && typeof (err as { reason?: unknown }).reason === 'string'
        ? String((err as { reason?: unknown }).reason)
        : 'FleetUnreachable',
    message: err instanceof Error ? err.message : String(err),
  };
}

export interface FleetBranchesOptions {
  /** The fleet credentials (read when the writer is first built; undefined: none). */
  credentials: () => Promise<GitCredentials | undefined>;
  /** Builds the fleet writer once the fleet credentials are read. */
  writer: (credentials: GitCredentials | undefined) => FleetWriter;
  branchPrefix: string;
  /** The batch window: the first back-off step. */
  windowMs: number;
  clock: Clock;
  log: Logger;
}

export class FleetBranches {
  private readonly opts: FleetBranchesOptions;
  private writerPromise: Promise<FleetWriter> | undefined;
  private failuresInRow = 0;
  private blocked = 0;
  private lastError: unknown;
  private refreshed: Promise<void> | undefined;
  /** key → its branch as last read or written (null: known absent). */
  private readonly branches = new Map<string, BranchState | null>();

  constructor(opts: FleetBranchesOptions) {
    this.opts = opts;
  }

  /** The fleet writer (built once; a failure to build it is retried on the next call). */
  writer(): Promise<FleetWriter> {
    this.writerPromise ??= (async () => this.opts.writer(await this.opts.credentials()))().catch(
      (err: unknown) => {
        this.writerPromise = undefined;
        throw err;
      },
    );
    return this.writerPromise;
  }

  /** No network attempt before this time (ms epoch) after failures. */
  get blockedUntil(): number {
    return this.blocked;
  }

  /** A fetch or write of the fleet failed: the back-off grows. */
  failed(err: unknown): void {
    this.failuresInRow += 1;
    this.lastError = err;
    this.blocked = this.opts.clock.now() + fleetBackoffMs(this.opts.windowMs, this.failuresInRow);
  }

  /** A write succeeded: the back-off ends. */
  succeeded(): void {
    this.failuresInRow = 0;
    this.blocked = 0;
    this.lastError = undefined;
  }

  /** One fetch of every branch under the prefix: at start and after a failed write. */
  refreshOnce(): Promise<void> {
    const { clock, log } = this.opts;
    if (this.refreshed === undefined && this.lastError !== undefined && clock.now() < this.blocked)
      return Promise.reject(this.lastError);
    this.refreshed ??= (async () => {
      const started = clock.now();
      await (await this.writer()).refresh();
      log.info({ ms: Math.round(clock.now() - started) }, 'fleet branches fetched');
    })().catch((err: unknown) => {
      this.refreshed = undefined;
      this.failed(err);
      throw err;
    });
    return this.refreshed;
  }

  /** The next branch read fetches every branch again (after a failed write). */
  refetch(): void {
    this.refreshed = undefined;
  }

  /** The Cluster's branch as last read or written; read from Git the first time. */
  async branchOf(key: string, namespace: string, name: string): Promise<BranchState | undefined> {
    const known = this.branches.get(key);
    if (known !== undefined) return known ?? undefined;
    await this.refreshOnce();
    const state = await (await this.writer()).branch(
      fleetBranchName(this.opts.branchPrefix, namespace, name),
    );
    this.branches.set(key, state ?? null);
    return state;
  }

  /** The branch of `key` after a write (null: deleted; undefined: not known, read it again). */
  record(key: string, state: BranchState | null | undefined): void {
    if (state === undefined) this.branches.delete(key);
    else this.branches.set(key, state);
  }

  /** Forgets the branch of `key`: the next reconcile reads it again. */
  forget(key: string): void {
    this.branches.delete(key);
  }
}
