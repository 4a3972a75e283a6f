// Publishes the Clusters' branch changes to the fleet repository. Changes are not written per key:
// they are collected for a batch window (from the first change waiting; later changes do not extend
// it) and written by ONE FleetWriter.write (one atomic push of every changed branch), only while
// this replica leads. After the write the per-Cluster branch state is taken from its result, the
// written keys are requeued (they now see their addons on the branch and create their
// Kustomizations), and ONLY the Clusters whose branch moved have Flux fetch them at once.
//
// Failures: a failed write backs the fleet off as a whole (FleetBranches) and is retried; a branch
// the fleet host refused (issue 22 row 6) backs off on its own: the refused content is not pushed
// again before its back-off ends, other content goes at once; the batch's other branches landed.
// Each Cluster's last failure is kept for its ClusterAddon's Ready condition until a write succeeds.
import type { ClusterAddon } from '../../api/clusteraddon.ts';
import type { ClusterStack } from '../../api/clusterstack.ts';
import type { BranchState } from '../../gitops/branches.ts';
import { branchTreeIds } from '../../gitops/objects.ts';
import type { BranchUpdate } from '../../reconcilers/clusteraddon.ts';
import type { Clock } from '../../runtime/clock.ts';
import type { Recorder } from '../../runtime/events.ts';
import { errorFields, type Logger } from '../../runtime/logging.ts';
import { SourceError } from '../../sources/git.ts';
import { FleetBatch } from '../fleetbatch.ts';
import { type FleetBranches, fleetBackoffMs, fleetFailureOf } from './fleetbranches.ts';
import { reportPush } from './pushevents.ts';
import type { FleetFailure, Obj, PendingChange } from './types.ts';

/** The fleet failure of a branch the fleet host refused (shown in its ClusterAddon's Ready). */
export function refusedBranchFailure(hostReason: string, backoffMs: number): FleetFailure {
  return {
    reason: 'FleetPushRejected',
    message: `the fleet host refused the branch (${hostReason}); it stays at its previous commit, next try in ${Math.ceil(backoffMs / 1000)}s or at once when the Cluster's rendered content changes`,
  };
}

/** What the publisher needs of the fleet's branch state. */
export type FleetBranchState = Pick<
  FleetBranches,
  'writer' | 'record' | 'forget' | 'failed' | 'succeeded' | 'blockedUntil' | 'refetch'
>;

export interface FleetPublisherOptions {
  branches: FleetBranchState;
  windowMs: number;
  clock: Clock;
  log: Logger;
  /** Whether this replica leads now (only the leader writes). */
  leading: () => boolean;
  events: Pick<Recorder, 'event'>;
  clusterAddonOf: (key: string) => (ClusterAddon & Obj) | undefined;
  /** Reconciles a written key again (it sees its branch now). */
  requeue: (key: string) => void;
  /** Reconciles a key whose write failed again, rate limited. */
  retry: (key: string) => void;
  /** Asks Flux to fetch the branches of these keys (they moved). */
  fetchMoved: (keys: readonly string[]) => Promise<void>;
}

export class FleetPublisher {
  private readonly opts: FleetPublisherOptions;
  private readonly pending: FleetBatch<PendingChange>;
  /** key → why the last fetch or write of its branch failed. */
  private readonly failures = new Map<string, FleetFailure>();
  /** Keys whose last fleet write failed: their status says the branch change is pending. */
  private readonly failedWrites = new Set<string>();
  /**
   * Keys whose branch the fleet host refused (issue 22 row 6): the refused content (its tree id)
   * is not pushed again before `until` (back-off per branch); other content goes at once.
   */
  private readonly refusals = new Map<string, { failures: number; until: number; content: string }>();

  constructor(opts: FleetPublisherOptions) {
    this.opts = opts;
    this.pending = new FleetBatch<PendingChange>({
      windowMs: opts.windowMs,
      clock: opts.clock,
      leading: opts.leading,
      write: (batch) => this.writeBatch(batch),
      // A failing fleet repository is not written again before its back-off ends.
      notBefore: () => opts.branches.blockedUntil,
      dropped: (keys) =>
        opts.log.warn({ clusters: keys.length }, 'not the leader: fleet writes dropped, not pushed'),
    });
  }

  /** Why the last fetch or write of this key's branch failed (until a write succeeds). */
  failureOf(key: string): FleetFailure | undefined {
    return this.failures.get(key);
  }

  /** Whether the last fleet write of this key failed. */
  writeFailed(key: string): boolean {
    return this.failedWrites.has(key);
  }

  /**
   * The key's branch change joins the batch (a newer result of the same key replaces an older one),
   * unless the fleet host refused this very content and its back-off has not ended. No change: the
   * key has nothing waiting. Returns how long the change is held (0: it goes with the batch).
   */
  submit(key: string, update: BranchUpdate | undefined, regarding: (ClusterStack & Obj) | undefined): number {
    const holdMs = update !== undefined ? this.refusalHoldMs(key, update) : 0;
    if (update !== undefined && holdMs > 0) {
      this.pending.delete(key);
    } else if (update !== undefined) {
      this.pending.set(key, { update, ...(regarding !== undefined ? { regarding } : {}) });
    } else {
      this.pending.delete(key);
      this.failedWrites.delete(key);
    }
    return holdMs;
  }

  /** The key's Cluster is gone: nothing of it is kept. */
  forget(key: string): void {
    this.pending.delete(key);
    this.opts.branches.forget(key);
    this.failedWrites.delete(key);
    this.refusals.delete(key);
  }

  /** Writes the pending batch now (tests, shutdown). */
  flush(): Promise<void> {
    return this.pending.flush();
  }

  stop(): void {
    this.pending.stop();
  }

  /** How long this key's change must still wait (0: push it now). */
  private refusalHoldMs(key: string, update: BranchUpdate): number {
    const { clock } = this.opts;
    const refusal = this.refusals.get(key);
    if (refusal === undefined || clock.now() >= refusal.until) return 0;
    return contentOf(update) === refusal.content ? refusal.until - clock.now() : 0;
  }

  /** The host refused these keys' branches: each backs off on its own, the batch's others landed. */
  private recordRefusals(
    batch: ReadonlyMap<string, PendingChange>,
    refused: ReadonlyMap<string, string>,
  ): void {
    const { clock, windowMs, log } = this.opts;
    for (const [key, { update }] of batch) {
      const reason = refused.get(update.branch);
      if (reason === undefined) continue;
      const failures = (this.refusals.get(key)?.failures ?? 0) + 1;
      const backoffMs = fleetBackoffMs(windowMs, failures);
      this.refusals.set(key, { failures, until: clock.now() + backoffMs, content: contentOf(update) });
      this.failures.set(key, refusedBranchFailure(reason, backoffMs));
      this.failedWrites.add(key);
      log.warn(
        { branch: update.branch, failures, reason },
        'the fleet host refused a branch; the others landed',
      );
    }
  }

  /** Takes each written Cluster's branch state from the write's result. */
  private recordWrite(
    batch: ReadonlyMap<string, PendingChange>,
    after: ReadonlyMap<string, BranchState | null>,
  ): void {
    for (const [key, { update }] of batch) this.opts.branches.record(key, after.get(update.branch));
  }

  private async writeBatch(batch: ReadonlyMap<string, PendingChange>): Promise<void> {
    const { branches, clock, log } = this.opts;
    const keys = [...batch.keys()];
    const started = clock.now();
    try {
      const res = await (await branches.writer()).write(
        [...batch.values()].map(({ update: { branch, files, message } }) => ({ branch, files, message })),
      );
      this.recordWrite(batch, res.branches);
      const refused = res.refused ?? new Map<string, string>();
      const deferred = new Set(res.deferred ?? []);
      const branchOfKey = (k: string) => batch.get(k)?.update.branch ?? '';
      for (const k of keys) {
        if (refused.has(branchOfKey(k)) || deferred.has(branchOfKey(k))) continue;
        this.failures.delete(k);
        this.failedWrites.delete(k);
        this.refusals.delete(k);
      }
      this.recordRefusals(batch, refused);
      const deferredKeys = keys.filter((k) => deferred.has(branchOfKey(k)));
      if (deferredKeys.length > 0) {
        // More refusals than one write narrows: the fleet backs off as a whole, then narrows on.
        const err = new SourceError(
          'FleetPushRejected',
          `not pushed: the fleet host refused the batch and narrowing it stopped at its push budget (${res.deferredReason ?? 'refused'})`,
        );
        for (const k of deferredKeys) {
          this.failures.set(k, fleetFailureOf(err));
          this.failedWrites.add(k);
        }
        branches.failed(err);
      } else branches.succeeded();
      const moved = new Set(res.changed);
      const movedKeys = keys.filter((k) => moved.has(batch.get(k)?.update.branch ?? ''));
      log.info(
        {
          clusters: keys.length,
          moved: movedKeys.length,
          pushed: res.pushed,
          attempts: res.attempts,
          refused: refused.size,
          deferred: deferredKeys.length,
          ms: Math.round(clock.now() - started),
        },
        res.pushed ? 'fleet branches pushed' : 'fleet branches already up to date',
      );
      reportPush(
        this.opts.events,
        this.opts.clusterAddonOf,
        movedKeys.flatMap((k) => batch.get(k) ?? []),
        res.branches,
      );
      for (const k of keys) this.opts.requeue(k);
      await this.opts.fetchMoved(movedKeys);
    } catch (err) {
      log.error({ ...errorFields(err), clusters: keys.length }, 'fleet write failed; retrying with backoff');
      for (const k of keys) this.failures.set(k, fleetFailureOf(err));
      branches.failed(err);
      // Forget what was read: the next reconciles fetch the branches again.
      for (const k of keys) {
        branches.forget(k);
        this.failedWrites.add(k);
      }
      branches.refetch();
      for (const k of keys) this.opts.retry(k);
    }
  }
}

/** What a branch change writes, as one id (its tree, or "delete"). */
function contentOf(update: BranchUpdate): string {
  return update.files === null ? 'delete' : branchTreeIds(update.files).tree;
}
