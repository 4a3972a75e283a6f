// Asks Flux to fetch the GitRepositories of Clusters whose fleet branch moved (the
// reconcile.fluxcd.io/requestedAt annotation), a few patches at a time. A Cluster whose
// GitRepository does not exist yet gets it on its requeued reconcile (Flux fetches a new
// GitRepository at once).
import { FLUX_SOURCE_API_VERSION, type GitRepository } from '../../api/flux.ts';
import { RECONCILE_REQUEST_ANNOTATION } from '../../api/meta.ts';
import { clusterGitRepositoryName } from '../../releases/flux.ts';
import { isNotFound, type KubeClient } from '../../runtime/client.ts';
import type { Clock } from '../../runtime/clock.ts';
import { formatTime } from '../../runtime/conditions.ts';
import { errorFields, type Logger } from '../../runtime/logging.ts';
import type { Obj } from './types.ts';

/** Concurrent requestedAt patches after a write. */
export const FETCH_REQUEST_CONCURRENCY = 8;

export interface FleetFetchRequestOptions {
  client: Pick<KubeClient, 'mergePatch'>;
  /** The cached GitRepository "namespace/name", if any. */
  gitRepository: (key: string) => (GitRepository & Obj) | undefined;
  clock: Clock;
  log: Logger;
}

/** Asks Flux to fetch the GitRepositories of these Clusters ("namespace/name") now. */
export async function requestFleetFetch(
  opts: FleetFetchRequestOptions,
  keys: readonly string[],
): Promise<void> {
  const { client, clock, log } = opts;
  const at = formatTime(new Date(clock.now()));
  const queue = keys.flatMap((k) => {
    const [namespace = '', name = ''] = k.split('/');
    const repo = clusterGitRepositoryName(name);
    return opts.gitRepository(`${namespace}/${repo}`) !== undefined ? [{ namespace, repo }] : [];
  });
  const worker = async (): Promise<void> => {
    for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
      try {
        await client.mergePatch(FLUX_SOURCE_API_VERSION, 'GitRepository', next.repo, next.namespace, {
          metadata: { annotations: { [RECONCILE_REQUEST_ANNOTATION]: at } },
        });
      } catch (err) {
        if (!isNotFound(err)) log.warn(errorFields(err), 'requesting a fleet fetch from Flux failed');
      }
    }
  };
  await Promise.all(Array.from({ length: FETCH_REQUEST_CONCURRENCY }, worker));
}
