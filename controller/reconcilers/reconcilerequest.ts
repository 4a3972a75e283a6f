// Flux's reconcile request convention (fluxcd/pkg apis/meta), as pure functions shared by the
// reconcilers: the `reconcile.fluxcd.io/requestedAt` annotation carries a token (`flux reconcile`
// writes the time); a value different from status.lastHandledReconcileAt is a request not yet
// handled. A reconcile that handled it records the value in status.lastHandledReconcileAt, which is
// what `flux reconcile`, `stackflux reconcile` and Flux's tooling wait for.
import { type ObjectMeta, RECONCILE_REQUEST_ANNOTATION } from '../api/meta.ts';

interface WithReconcileRequest {
  metadata: Pick<ObjectMeta, 'annotations'>;
  status?: { lastHandledReconcileAt?: string };
}

/** The value of the reconcile request annotation; undefined when absent or empty. */
export function reconcileRequestValue(obj: {
  metadata: Pick<ObjectMeta, 'annotations'>;
}): string | undefined {
  const v = obj.metadata.annotations?.[RECONCILE_REQUEST_ANNOTATION];
  return v === undefined || v === '' ? undefined : v;
}

/** Whether the object carries a reconcile request its status has not acknowledged yet. */
export function reconcileRequested(obj: WithReconcileRequest): boolean {
  const v = reconcileRequestValue(obj);
  return v !== undefined && v !== obj.status?.lastHandledReconcileAt;
}

/**
 * status.lastHandledReconcileAt after a reconcile of obj: the annotation's value when this reconcile
 * handled it, else what the status held. As a spread-able record (empty when there is nothing).
 */
export function lastHandledReconcileAt(
  obj: WithReconcileRequest,
  handled = true,
): { lastHandledReconcileAt?: string } {
  const v = handled
    ? (reconcileRequestValue(obj) ?? obj.status?.lastHandledReconcileAt)
    : obj.status?.lastHandledReconcileAt;
  return v === undefined ? {} : { lastHandledReconcileAt: v };
}

/** The result of a reconcile with the request on `obj` acknowledged in its status (if it has one). */
export function acknowledgeReconcileRequest<R extends { status?: { lastHandledReconcileAt?: string } }>(
  result: R,
  obj: WithReconcileRequest | undefined,
): R {
  if (result.status === undefined || obj === undefined) return result;
  return { ...result, status: { ...result.status, ...lastHandledReconcileAt(obj) } };
}

/** A Flux source object (source.toolkit.fluxcd.io) a Flux Kustomization or HelmRelease reads from. */
export interface FluxSourceRef {
  apiVersion: string;
  kind: string;
  name: string;
  namespace: string;
}

const SOURCE_KINDS: Readonly<Record<string, string>> = {
  GitRepository: 'source.toolkit.fluxcd.io/v1',
  OCIRepository: 'source.toolkit.fluxcd.io/v1',
  Bucket: 'source.toolkit.fluxcd.io/v1',
  HelmRepository: 'source.toolkit.fluxcd.io/v1',
  HelmChart: 'source.toolkit.fluxcd.io/v1',
  ExternalArtifact: 'source.toolkit.fluxcd.io/v1',
};

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * The Flux sources the given Kustomizations (spec.sourceRef) and HelmReleases (spec.chartRef,
 * spec.chart.spec.sourceRef) read from, de-duplicated and sorted; unknown kinds are left out.
 */
export function fluxSourcesOf(objects: readonly unknown[]): FluxSourceRef[] {
  const found = new Map<string, FluxSourceRef>();
  for (const o of objects) {
    if (!isRecord(o) || !isRecord(o.metadata) || !isRecord(o.spec)) continue;
    const ns = typeof o.metadata.namespace === 'string' ? o.metadata.namespace : '';
    const chart =
      isRecord(o.spec.chart) && isRecord(o.spec.chart.spec) ? o.spec.chart.spec.sourceRef : undefined;
    for (const ref of [o.spec.sourceRef, o.spec.chartRef, chart]) {
      if (!isRecord(ref) || typeof ref.kind !== 'string' || typeof ref.name !== 'string') continue;
      const apiVersion = SOURCE_KINDS[ref.kind];
      if (apiVersion === undefined || ref.name === '') continue;
      const namespace = typeof ref.namespace === 'string' && ref.namespace !== '' ? ref.namespace : ns;
      found.set(`${ref.kind}/${namespace}/${ref.name}`, {
        apiVersion,
        kind: ref.kind,
        name: ref.name,
        namespace,
      });
    }
  }
  return [...found.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, v]) => v);
}
