// A Helm-chart cluster-class (csctl) is rendered in render processes and written to the fleet
// repository: the render pool (closed with the manager), the fleet writer (made once, with the
// fleet Secret's credentials; made again after a failure) and the ClusterClass versions the API
// server serves (asked at most every SERVED_VERSIONS_TTL_MS).
import type { FleetWriter } from '../../gitops/branches.ts';
import { RELEASE_BRANCH_FOLDER } from '../../reconcilers/clusterstackrelease.ts';
import { CLUSTER_CLASS_API_VERSIONS } from '../../rendering/clusterclass.ts';
import { RenderPool } from '../../rendering/index.ts';
import type { KubeClient } from '../../runtime/client.ts';
import type { Clock } from '../../runtime/clock.ts';
import type { Manager } from '../../runtime/manager.ts';
import { secretCredentials } from '../common.ts';
import { releaseClassRenderer } from '../releaseclass.ts';
import type { PipelineFleet, ReleasePipelineOptions } from './types.ts';

/** How long the ClusterClass versions the API server serves are taken as known (the README says 30 s). */
export const SERVED_VERSIONS_TTL_MS = 30_000;

/**
 * The ClusterClass versions the API server serves. Asked at most every SERVED_VERSIONS_TTL_MS, not
 * on every reconcile of a csctl release: a version the server does not serve costs a discovery
 * request each time it is asked.
 */
export function servedClassVersions(
  client: Pick<KubeClient, 'resource'>,
  clock: Clock,
): () => Promise<string[]> {
  let servedVersions: { at: number; versions: Promise<string[]> } | undefined;
  return () => {
    const now = clock.now();
    if (servedVersions === undefined || now - servedVersions.at >= SERVED_VERSIONS_TTL_MS) {
      const versions = (async () => {
        const served: string[] = [];
        for (const v of CLUSTER_CLASS_API_VERSIONS) {
          try {
            await client.resource(v, 'ClusterClass');
            served.push(v);
          } catch {}
        }
        return served;
      })();
      servedVersions = { at: now, versions };
    }
    return servedVersions.versions;
  };
}

/** The writer of the release branches of the fleet, made on first use (again after a failure). */
export function fleetClassWriter(client: KubeClient, fleet: PipelineFleet): () => Promise<FleetWriter> {
  let classWriter: Promise<FleetWriter> | undefined;
  return () => {
    classWriter ??= (async () => {
      const creds =
        fleet.secret !== undefined
          ? await secretCredentials(client, fleet.secret.namespace, fleet.secret.name)
          : undefined;
      return fleet.writer(`${fleet.branchPrefix}${RELEASE_BRANCH_FOLDER}/`, creds);
    })().catch((err: unknown) => {
      classWriter = undefined;
      throw err;
    });
    return classWriter;
  };
}

/** The renderer of the releases' Helm-chart cluster-classes (its pool closes with the manager). */
export function pipelineClasses(
  manager: Pick<Manager, 'client' | 'done'>,
  opts: Pick<ReleasePipelineOptions, 'render' | 'fleet'>,
  clock: Clock,
): ReturnType<typeof releaseClassRenderer> {
  const classPool = new RenderPool(opts.render);
  void manager.done.then(() => classPool.close());
  const fleet = opts.fleet;
  return releaseClassRenderer({
    pool: classPool,
    ...(fleet !== undefined
      ? {
          fleet: {
            url: fleet.url,
            branchPrefix: fleet.branchPrefix,
            ...(fleet.secret !== undefined ? { secretName: fleet.secret.name } : {}),
            writer: fleetClassWriter(manager.client, fleet),
          },
        }
      : {}),
    servedClassVersions: servedClassVersions(manager.client, clock),
  });
}
