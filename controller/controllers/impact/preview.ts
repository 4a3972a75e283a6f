// The preview behind a release's impact, as `stackflux preview clusterstack CS -n NS --release R`
// makes it: the live snapshot of the release's namespace (release trees through the pollers'
// listings and the background reads when given; the fleet branches' files from the fleet
// repository), previewRelease in a render pool that lives only while the preview runs, and its
// summary. A preview that cannot be made of these objects is an answer (impactError).
import { join } from 'node:path';
import type { ClusterStack } from '../../api/clusterstack.ts';
import type { ClusterStackRelease, ReleaseImpact } from '../../api/clusterstackrelease.ts';
import { liveSnapshot } from '../../offline/live.ts';
import { PreviewError, previewRelease } from '../../preview/core.ts';
import { impactError, impactSummary } from '../../preview/impact.ts';
import { previewInputOf } from '../../preview/snapshot.ts';
import { RenderPool, withPooledRendering } from '../../rendering/index.ts';
import type { KubeClient } from '../../runtime/client.ts';
import { secretCredentials } from '../common.ts';
import { impactSourceReader } from '../impactsources.ts';
import type { ImpactControllerOptions } from './types.ts';

/** Some release tree the preview needs is still being read in the background. */
export class TreesPending extends Error {}

/** Previews a release for its impact; `waiter` is woken when a pending tree read settles. */
export type ImpactPreview = (
  cs: ClusterStack,
  release: ClusterStackRelease,
  now: Date,
  waiter: { id: string; wake: () => void },
) => Promise<ReleaseImpact>;

/** The preview of a release as `stackflux preview clusterstack CS -n NS --release R` makes it. */
export function impactPreview(
  client: KubeClient,
  opts: Omit<ImpactControllerOptions, 'namespace' | 'clock'>,
): ImpactPreview {
  return async (cs, release, now, waiter) => {
    const namespace = release.metadata.namespace ?? 'default';
    const reader =
      opts.sources !== undefined ? impactSourceReader(opts.sources, namespace, waiter) : undefined;
    const commit = release.status?.commit ?? '';
    const credentials =
      opts.fleetSecret !== undefined
        ? await secretCredentials(client, opts.fleetSecret.namespace, opts.fleetSecret.name)
        : undefined;
    const snapshot = await liveSnapshot(client, {
      namespace,
      // A cache of its own: the release pipeline's git caches are not shared across code paths.
      cacheDir: join(opts.cacheDir, 'impact'),
      ...(opts.tenancy !== undefined ? { tenancy: opts.tenancy } : {}),
      extraTags: [release.metadata.name],
      ...(reader !== undefined ? { reader } : {}),
      fleet: {
        url: opts.fleet.url,
        branchPrefix: opts.fleet.branchPrefix,
        ...(credentials !== undefined ? { credentials } : {}),
      },
    });
    // A preview without a tree it needs would be wrong, not merely late: wait for the read.
    if (reader?.pending() === true) throw new TreesPending();
    snapshot.settings.fleet = { ...snapshot.settings.fleet, ...opts.fleet };
    try {
      const input = previewInputOf(
        snapshot,
        { namespace, clusterStack: cs.metadata.name, release: release.metadata.name },
        { now, templates: opts.templates, ...(opts.tenancy !== undefined ? { tenancy: opts.tenancy } : {}) },
      );
      const pool = new RenderPool(opts.render);
      try {
        const result = await withPooledRendering(pool, (render, goEngine) =>
          previewRelease({
            ...input,
            render,
            goEngine,
            ...(opts.renderSeedKey !== undefined ? { renderSeedKey: opts.renderSeedKey } : {}),
          }),
        );
        return impactSummary(result, commit, now);
      } finally {
        await pool.close();
      }
    } catch (err) {
      // A preview that cannot be made of these objects is an answer (the rollout asks a person);
      // anything else (the API server, the fleet host) is retried with backoff.
      if (err instanceof PreviewError) return impactError(commit, now, err.message);
      throw err;
    }
  };
}
