// The impact summary of a release (pure): the counts of a preview that a ClusterStackRelease's
// status.impact carries, so a Progressive rollout can hold for approval on them and a person can
// see them before anything moves (`stackflux preview` gives the diffs behind the numbers).
import type { ClusterStack } from '../api/clusterstack.ts';
import {
  type ClusterStackRelease,
  MAX_IMPACT_LISTED,
  type ReleaseImpact,
} from '../api/clusterstackrelease.ts';
import { ownedBy, releaseReady } from '../reconcilers/clusterstack.ts';
import type { PreviewResult } from './core.ts';

/** The status.impact of a preview of the release at `commit`. */
export function impactSummary(result: PreviewResult, commit: string, now: Date): ReleaseImpact {
  const sum = (k: 'added' | 'changed' | 'removed') => result.clusters.reduce((n, c) => n + c.counts[k], 0);
  const failing = result.clusters.filter((c) => c.outcome === 'failed');
  return {
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
  };
}

/** The status.impact when the preview could not be made (the rollout then waits, if it must ask). */
export function impactError(commit: string, now: Date, message: string): ReleaseImpact {
  return { commit, computedAt: now.toISOString(), error: message };
}

/**
 * Whether the release needs its impact computed: it is the Ready target of a Progressive
 * ClusterStack (status.latestRelease) and status.impact is not of its commit (once per release).
 */
export function impactWanted(cs: ClusterStack, release: ClusterStackRelease): boolean {
  if (cs.spec.rollout?.strategy !== 'Progressive') return false;
  if (release.metadata.deletionTimestamp !== undefined || !ownedBy(release, cs)) return false;
  if (cs.status?.latestRelease !== release.metadata.name || !releaseReady(release)) return false;
  const commit = release.status?.commit;
  return commit !== undefined && release.status?.impact?.commit !== commit;
}
