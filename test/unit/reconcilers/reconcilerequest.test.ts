import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  acknowledgeReconcileRequest,
  fluxSourcesOf,
  lastHandledReconcileAt,
  reconcileRequested,
  reconcileRequestValue,
} from '../../../controller/reconcilers/reconcilerequest.ts';

const A = 'reconcile.fluxcd.io/requestedAt';
const obj = (annotation?: string, handled?: string) => ({
  metadata: annotation === undefined ? {} : { annotations: { [A]: annotation } },
  ...(handled === undefined ? {} : { status: { lastHandledReconcileAt: handled } }),
});

describe('reconcile request (reconcile.fluxcd.io/requestedAt)', () => {
  it('is requested while the annotation differs from status.lastHandledReconcileAt', () => {
    assert.equal(reconcileRequested(obj()), false);
    assert.equal(reconcileRequested(obj('')), false, 'an empty value is no request');
    assert.equal(reconcileRequested(obj('t1')), true);
    assert.equal(reconcileRequested(obj('t1', 't0')), true);
    assert.equal(reconcileRequested(obj('t1', 't1')), false);
    assert.equal(reconcileRequestValue(obj('t1')), 't1');
  });

  it('lastHandledReconcileAt takes the annotation value when handled, else keeps the status', () => {
    assert.deepEqual(lastHandledReconcileAt(obj('t1', 't0')), { lastHandledReconcileAt: 't1' });
    assert.deepEqual(lastHandledReconcileAt(obj('t1', 't0'), false), { lastHandledReconcileAt: 't0' });
    assert.deepEqual(lastHandledReconcileAt(obj(undefined, 't0')), { lastHandledReconcileAt: 't0' });
    assert.deepEqual(lastHandledReconcileAt(obj()), {});
  });

  it('acknowledgeReconcileRequest adds the value to a result status, leaves results without status', () => {
    const r = acknowledgeReconcileRequest(
      { status: { release: 'x' } as { release: string; lastHandledReconcileAt?: string } },
      obj('t2', 't1'),
    );
    assert.deepEqual(r.status, { release: 'x', lastHandledReconcileAt: 't2' });
    const none = acknowledgeReconcileRequest(
      {} as { status?: { lastHandledReconcileAt?: string } },
      obj('t2'),
    );
    assert.equal(none.status, undefined);
  });

  it('fluxSourcesOf finds the sources of Kustomizations and HelmReleases, de-duplicated', () => {
    const ks = (name: string, sourceRef: Record<string, string>) => ({
      metadata: { name, namespace: 'team' },
      spec: { sourceRef },
    });
    const sources = fluxSourcesOf([
      ks('c1-cni', { kind: 'GitRepository', name: 'stackflux-fleet' }),
      ks('c1-csi', { kind: 'GitRepository', name: 'stackflux-fleet' }),
      ks('c1-x', { kind: 'OCIRepository', name: 'oci', namespace: 'flux-system' }),
      ks('c1-y', { kind: 'NotASource', name: 'z' }),
      {
        metadata: { name: 'c1-metrics', namespace: 'team' },
        spec: {
          chart: { spec: { chart: 'metrics-server', sourceRef: { kind: 'HelmRepository', name: 'charts' } } },
        },
      },
      { metadata: { name: 'broken' } },
    ]);
    assert.deepEqual(sources, [
      {
        apiVersion: 'source.toolkit.fluxcd.io/v1',
        kind: 'GitRepository',
        name: 'stackflux-fleet',
        namespace: 'team',
      },
      {
        apiVersion: 'source.toolkit.fluxcd.io/v1',
        kind: 'HelmRepository',
        name: 'charts',
        namespace: 'team',
      },
      {
        apiVersion: 'source.toolkit.fluxcd.io/v1',
        kind: 'OCIRepository',
        name: 'oci',
        namespace: 'flux-system',
      },
    ]);
  });
});
