// The parts of the objects the ClusterAddon reconcile reads, for the caches to tell a change that
// needs a reconcile from one that does not (controllers/clusteraddon/caches.ts).
import type { ClusterAddon } from '../../api/clusteraddon.ts';
import type { ClusterStack } from '../../api/clusterstack.ts';
import type { ClusterStackRelease } from '../../api/clusterstackrelease.ts';
import { ConditionType } from '../../api/meta.ts';
import { APPROVED_ANNOTATION, APPROVED_IMPACT_ANNOTATION } from '../../api/rollout.ts';
import { findCondition } from '../../runtime/conditions.ts';
import { Reason } from './types.ts';

/**
 * The part of a ClusterStack the addon reconcile reads: its name, existence and spec (addons
 * switched off, central values). Its status is not read: an update that changes only the status
 * (release summaries, rollout progress) must not re-render every Cluster of the namespace.
 */
export function clusterStackAddonInputs(cs: ClusterStack): unknown {
  // status.latestRelease: the rollout target whose moves are bound to its impact (approvedrender.ts).
  return [cs.metadata.name, cs.metadata.deletionTimestamp, cs.spec, cs.status?.latestRelease];
}

/**
 * The part of a ClusterStackRelease the addon reconcile reads: its spec, the commit its tree is
 * fetched at and whether its provider object is ready. Not the rest of its status (how many
 * Clusters use it, what Flux applied to the management cluster), which changes as Clusters move.
 */
export function releaseAddonInputs(r: ClusterStackRelease): unknown {
  const provider = findCondition(r.status?.conditions, ConditionType.ProviderReady);
  return [
    r.metadata.name,
    r.metadata.deletionTimestamp,
    r.spec,
    r.status?.commit,
    // The approval gate of a Cluster's move (reconcilers/approvedrender.ts): a new impact or approval.
    r.status?.impact?.digest,
    r.metadata.annotations?.[APPROVED_ANNOTATION],
    r.metadata.annotations?.[APPROVED_IMPACT_ANNOTATION],
    provider?.status,
    provider?.message,
    releaseInvalidMessage(r),
  ];
}

/**
 * The release controller's InvalidRelease message of a release, if it found the release invalid.
 * Such a release has no validated commit, so its tree is never fetched for the Cluster: without this
 * its ClusterAddons would wait for the tree instead of saying what is wrong with the release.
 */
export function releaseInvalidMessage(r: ClusterStackRelease): string | undefined {
  const ready = findCondition(r.status?.conditions, ConditionType.Ready);
  return ready?.status === 'False' && ready.reason === Reason.InvalidRelease ? ready.message : undefined;
}

/**
 * The part of a ClusterAddon whose change needs a reconcile: all of it but its status and
 * resourceVersion. The status is this reconcile's own output, computed from inputs that did not
 * change, so the event of a status write would only render the Cluster's addons again (at 10,000
 * Clusters, a release move writes 10,000 statuses). Metadata (finalizers, deletion, the
 * reconcile-request annotation) and spec still requeue.
 */
export function clusterAddonReconcileInputs(ca: ClusterAddon): unknown {
  const { resourceVersion: _rv, ...metadata } = ca.metadata;
  return [metadata, ca.spec];
}
