// The impact summary of a release (pure): the counts of a preview that a ClusterStackRelease's
// status.impact carries, so a Progressive rollout can hold for approval on them and a person can
// see them before anything moves (`stackflux preview` gives the diffs behind the numbers).
import type { ClusterAddon } from '../api/clusteraddon.ts';
import type { ClusterStack } from '../api/clusterstack.ts';
import {
  type ClusterStackRelease,
  MAX_IMPACT_LISTED,
  MAX_IMPACT_RECOMPUTES,
  type ReleaseImpact,
} from '../api/clusterstackrelease.ts';
import {
  impactDigest,
  RENDER_APPROVED_CONDITION,
  RENDER_DIFFERS_REASON,
} from '../reconcilers/approvedrender.ts';
import { ownedBy, releaseReady } from '../reconcilers/clusterstack.ts';
import type { PreviewResult } from './core.ts';

/** The status.impact of a preview of the release at `commit`. */
export function impactSummary(result: PreviewResult, commit: string, now: Date): ReleaseImpact {
  const sum = (k: 'added' | 'changed' | 'removed') => result.clusters.reduce((n, c) => n + c.counts[k], 0);
  const failing = result.clusters.filter((c) => c.outcome === 'failed');
  const renders = Object.fromEntries(
    result.clusters.flatMap((c) => (c.render !== undefined ? [[`${c.namespace}/${c.name}`, c.render]] : [])),
  );
  const impact: ReleaseImpact = {
    commit,
    computedAt: now.toISOString(),
    clusters: result.clusters.length,
    clustersAffected: result.clusters.filter((c) => c.outcome === 'changed').length,
    objectsAdded: sum('added'),
    objectsChanged: sum('changed'),
    objectsRemoved: sum('removed'),
    clustersFailing: failing.length,
    ...(failing.length > 0
      ? {
          failing: failing
            .slice(0, MAX_IMPACT_LISTED)
            .map((c) => `${c.namespace}/${c.name}: ${c.failure?.reason ?? 'RenderFailed'}`),
        }
      : {}),
    renders,
  };
  return { ...impact, digest: impactDigest(impact) };
}

/** The status.impact when the preview could not be made (the rollout then waits, if it must ask). */
export function impactError(commit: string, now: Date, message: string): ReleaseImpact {
  const impact = { commit, computedAt: now.toISOString(), error: message };
  return { ...impact, digest: impactDigest(impact) };
}

/**
 * Whether the release needs its impact computed: it is the Ready target of a Progressive
 * ClusterStack (status.latestRelease) and status.impact is not of its commit (once per release).
 */
export function impactWanted(
  cs: ClusterStack,
  release: ClusterStackRelease,
  heldAgainst: ReadonlySet<string> = new Set(),
): boolean {
  if (cs.spec.rollout?.strategy !== 'Progressive') return false;
  if (release.metadata.deletionTimestamp !== undefined || !ownedBy(release, cs)) return false;
  if (cs.status?.latestRelease !== release.metadata.name || !releaseReady(release)) return false;
  const commit = release.status?.commit;
  const impact = release.status?.impact;
  if (commit === undefined) return false;
  if (impact?.commit !== commit || impact.digest === undefined) return true;
  // A Cluster's live render differed from the one this impact recorded: compute it again, a few times.
  return heldAgainst.has(impact.digest) && (impact.recomputed ?? 0) < MAX_IMPACT_RECOMPUTES;
}

/** `impact` computed again for the commit of `previous`: counted, with its digest over the count. */
export function recomputedImpact(impact: ReleaseImpact, previous: ReleaseImpact | undefined): ReleaseImpact {
  if (previous === undefined || previous.commit !== impact.commit || previous.digest === undefined)
    return impact;
  const { digest: _d, ...rest } = impact;
  const counted = { ...rest, recomputed: (previous.recomputed ?? 0) + 1 };
  return { ...counted, digest: impactDigest(counted) };
}

/**
 * The impact digests the ClusterAddons of a namespace were held against for `release` (status.heldRender
 * with RenderApproved=False, reason RenderDiffersFromApproved).
 */
export function heldImpacts(addons: readonly ClusterAddon[], release: string): Set<string> {
  const out = new Set<string>();
  for (const a of addons) {
    const held = a.status?.heldRender;
    const c = a.status?.conditions?.find((x) => x.type === RENDER_APPROVED_CONDITION);
    if (held?.release === release && held.impact !== undefined && c?.reason === RENDER_DIFFERS_REASON)
      out.add(held.impact);
  }
  return out;
}
