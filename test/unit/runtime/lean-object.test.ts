import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { KubeObject } from '../../../controller/runtime/client.ts';
import { LAST_APPLIED_ANNOTATION, leanObject } from '../../../controller/runtime/informer.ts';

describe('leanObject (what informers keep of an object)', () => {
  it('drops managedFields and kubectl’s last-applied copy, keeps other annotations and the spec', () => {
    const obj: KubeObject = {
      apiVersion: 'cluster.x-k8s.io/v1beta2',
      kind: 'Cluster',
      metadata: {
        name: 'c1',
        managedFields: [{ manager: 'kubectl' }],
        annotations: { [LAST_APPLIED_ANNOTATION]: '{"big":true}', keep: 'me' },
      },
      spec: { topology: { classRef: { name: 'x' } } },
      status: { history: ['a Cluster field, not Flux’s: kept'] },
    };
    assert.deepEqual(leanObject(obj), {
      apiVersion: 'cluster.x-k8s.io/v1beta2',
      kind: 'Cluster',
      metadata: { name: 'c1', annotations: { keep: 'me' } },
      spec: { topology: { classRef: { name: 'x' } } },
      status: { history: ['a Cluster field, not Flux’s: kept'] },
    });
    assert.equal(obj.metadata.managedFields?.length, 1, 'the input is not changed');
  });

  it('drops Flux’s status.inventory and status.history, keeps what stackflux reads', () => {
    const status = {
      observedGeneration: 2,
      lastAppliedRevision: 'main@sha1:abc',
      lastAttemptedRevision: 'main@sha1:abc',
      conditions: [{ type: 'Ready', status: 'True' }],
      inventory: { entries: [{ id: 'kube-system_cm__ConfigMap', v: 'v1' }] },
      history: [{ digest: 'sha256:1', totalReconciliations: 9 }],
    };
    const k = leanObject({
      apiVersion: 'kustomize.toolkit.fluxcd.io/v1',
      kind: 'Kustomization',
      metadata: { name: 'c1.cni' },
      spec: { path: './x' },
      status,
    });
    assert.deepEqual(k.status, {
      observedGeneration: 2,
      lastAppliedRevision: 'main@sha1:abc',
      lastAttemptedRevision: 'main@sha1:abc',
      conditions: [{ type: 'Ready', status: 'True' }],
    });
    assert.deepEqual(k.spec, { path: './x' });
  });

  it('keeps of a HelmRelease’s history only the newest Helm release’s revision, chart and values digest', () => {
    const shown = {
      name: 'c1-inventory',
      version: 2,
      status: 'deployed',
      chartName: 'inventory',
      chartVersion: '0.2.0',
      configDigest: 'sha256:2',
    };
    const hr = leanObject({
      apiVersion: 'helm.toolkit.fluxcd.io/v2',
      kind: 'HelmRelease',
      metadata: { name: 'c1.inventory' },
      status: {
        observedGeneration: 2,
        inventory: { entries: [{ id: 'ns_c1-inventory__ConfigMap', v: 'v1' }] },
        history: [
          { ...shown, digest: 'sha256:release', firstDeployed: '2026-01-01T00:00:00Z', testHooks: {} },
          { name: 'c1-inventory', version: 1, status: 'superseded', chartVersion: '0.1.0' },
        ],
      },
    });
    assert.deepEqual(hr.status, { observedGeneration: 2, history: [shown] });
  });

  it('returns an object without anything to drop as it is', () => {
    const obj: KubeObject = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'a' }, data: {} };
    assert.equal(leanObject(obj), obj);
  });
});
