// The I/O half of Flux's reconcile request convention (reconcile.fluxcd.io/requestedAt) on
// stackflux's own objects; the pure half (status.lastHandledReconcileAt) is in
// reconcilers/reconcilerequest.ts. Used by the ClusterStack and ClusterAddon controllers:
// - a requested ClusterStack lists its source now (bypassing the poll interval) before its
//   reconcile, so the acknowledged status already reflects a tag pushed just before the request;
// - a requested ClusterAddon passes the request on to the Flux sources its Kustomizations read
//   (the same annotation value), so Flux fetches them now.
import type { ClusterStack } from '../api/clusterstack.ts';
import { RECONCILE_REQUEST_ANNOTATION } from '../api/meta.ts';
import {
  type FluxSourceRef,
  fluxSourcesOf,
  reconcileRequested,
  reconcileRequestValue,
} from '../reconcilers/reconcilerequest.ts';
import { isNotFound, type KubeClient } from '../runtime/client.ts';
import { errorFields, type Logger } from '../runtime/logging.ts';
import type { SourcePollers } from '../sources/poller.ts';

/**
 * When the ClusterStack carries an unhandled reconcile request and is active (not suspended, not
 * deleting), lists its source now and waits for that listing. Returns whether it did.
 */
export async function listSourceOnRequest(
  pollers: SourcePollers,
  key: string,
  cs: ClusterStack,
  log: Logger,
): Promise<boolean> {
  if (cs.spec.suspend === true || cs.metadata.deletionTimestamp !== undefined) return false;
  if (!reconcileRequested(cs)) return false;
  log.info({ requestedAt: reconcileRequestValue(cs) }, 'reconcile requested: listing the source now');
  await pollers.refresh(key);
  return true;
}

/**
 * Passes an unhandled reconcile request of `obj` on to the Flux sources the given Flux objects read
 * from: each gets reconcile.fluxcd.io/requestedAt = the request's value. A source that is gone is
 * skipped; other failures are logged (the request itself is still handled). Returns the sources.
 */
export async function requestFluxSourcesFetch(
  client: KubeClient,
  obj: { metadata: { annotations?: Record<string, string> }; status?: { lastHandledReconcileAt?: string } },
  fluxObjects: readonly unknown[],
  log: Logger,
  signal?: AbortSignal,
): Promise<FluxSourceRef[]> {
  const value = reconcileRequestValue(obj);
  if (value === undefined || !reconcileRequested(obj)) return [];
  const sources = fluxSourcesOf(fluxObjects);
  for (const s of sources) {
    try {
      await client.mergePatch(
        s.apiVersion,
        s.kind,
        s.name,
        s.namespace,
        { metadata: { annotations: { [RECONCILE_REQUEST_ANNOTATION]: value } } },
        signal !== undefined ? { signal } : {},
      );
    } catch (err) {
      if (!isNotFound(err))
        log.warn(
          { ...errorFields(err), source: `${s.kind}/${s.namespace}/${s.name}` },
          'requesting a fetch from Flux failed',
        );
    }
  }
  if (sources.length > 0)
    log.info(
      { requestedAt: value, sources: sources.length },
      'reconcile requested: asked Flux to fetch the sources',
    );
  return sources;
}
