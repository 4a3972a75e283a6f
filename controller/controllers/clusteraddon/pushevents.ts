// The Events of a fleet push: ONE per ClusterStack whose Clusters' branches moved (a push is one
// action of the fleet; Events per Cluster would be one more API write per Cluster in every fan-out
// and rollout, while each Cluster's record is its branch's git log and status.fleetCommit). A
// Cluster without a ClusterStack (being deleted) gets its Event on its ClusterAddon.
import type { ClusterAddon } from '../../api/clusteraddon.ts';
import type { ClusterStack } from '../../api/clusterstack.ts';
import type { BranchState } from '../../gitops/branches.ts';
import type { BranchUpdate } from '../../reconcilers/clusteraddon.ts';
import type { Recorder } from '../../runtime/events.ts';
import { nsOf, type Obj, type PendingChange } from './types.ts';

/** Events.k8s.io limits an Event's note to 1 KiB. */
const NOTE_MAX = 1024;

/**
 * The note of one push's Event for one ClusterStack: how many Clusters' branches moved, why (the
 * three most frequent reasons), and the first Clusters by name. At most 1 KiB.
 */
export function pushNote(changes: readonly { update: BranchUpdate }[]): string {
  const reasons = new Map<string, number>();
  for (const { update } of changes) {
    reasons.set(update.change.reason, (reasons.get(update.change.reason) ?? 0) + 1);
  }
  const why = [...reasons]
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
    .map(([reason, n]) => `${n} × ${reason}`);
  const shownWhy = why.slice(0, 3).join('; ') + (why.length > 3 ? `; ${why.length - 3} other reason(s)` : '');
  const names = changes.map((c) => `${c.update.change.namespace}/${c.update.change.cluster}`).sort();
  const shown = names.slice(0, 10).join(', ') + (names.length > 10 ? ` and ${names.length - 10} more` : '');
  const note = `${changes.length} Cluster fleet branch(es) moved in one push (${shownWhy}): ${shown}; each branch's git log says what changed`;
  return note.length <= NOTE_MAX ? note : `${note.slice(0, NOTE_MAX - 1)}…`;
}

/** Records the Events of one push whose branches `moved` (`tips`: the branches after it). */
export function reportPush(
  events: Pick<Recorder, 'event'>,
  clusterAddonOf: (key: string) => (ClusterAddon & Obj) | undefined,
  moved: readonly PendingChange[],
  tips: ReadonlyMap<string, BranchState | null>,
): void {
  const byStack = new Map<string, { regarding: ClusterStack & Obj; changes: PendingChange[] }>();
  for (const change of moved) {
    const { regarding, update } = change;
    if (regarding === undefined) {
      const ca = clusterAddonOf(`${update.change.namespace}/${update.change.cluster}`);
      const tip = tips.get(update.branch);
      if (ca === undefined) continue;
      void events.event(
        ca,
        'Normal',
        'FleetCommitPushed',
        'Commit',
        tip === null || tip === undefined
          ? `fleet branch ${update.branch} deleted`
          : `fleet commit ${tip.commit} pushed to ${update.branch} (${update.change.reason})`,
      );
      continue;
    }
    const stackKey = `${nsOf(regarding)}/${regarding.metadata.name ?? ''}`;
    const entry = byStack.get(stackKey) ?? { regarding, changes: [] };
    entry.changes.push(change);
    byStack.set(stackKey, entry);
  }
  for (const { regarding, changes } of byStack.values()) {
    void events.event(regarding, 'Normal', 'FleetCommitPushed', 'Commit', pushNote(changes));
  }
}
