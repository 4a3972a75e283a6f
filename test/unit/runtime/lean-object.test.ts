import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { needsApply } from '../../../controller/controllers/common.ts';
import type { KubeObject } from '../../../controller/runtime/client.ts';
import { LAST_APPLIED_ANNOTATION, leanObject } from '../../../controller/runtime/informer.ts';
import { converged, desiredGitRepository, desiredKustomization } from './flux-fixtures.ts';

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

  it('keeps of a managed Flux kind’s status only what stackflux reads (inventory, lastAttempted* go)', () => {
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
      conditions: [{ type: 'Ready', status: 'True' }],
    });
    assert.deepEqual(k.spec, { path: './x' });
  });

  it('drops a GitRepository’s status.artifact (no reader), keeps its conditions, spec and metadata', () => {
    const repo = {
      apiVersion: 'source.toolkit.fluxcd.io/v1',
      kind: 'GitRepository',
      metadata: {
        name: 'prod-1-addons',
        namespace: 'team-a',
        labels: { 'app.kubernetes.io/managed-by': 'stackflux', 'stackflux.io/cluster': 'prod-1' },
        annotations: { 'reconcile.fluxcd.io/requestedAt': '2026-01-01T00:05:12Z' },
        ownerReferences: [
          { apiVersion: 'stackflux.io/v1alpha1', kind: 'ClusterAddon', name: 'prod-1', uid: 'u' },
        ],
        finalizers: ['finalizers.fluxcd.io'],
        managedFields: [{ manager: 'stackflux' }],
      },
      spec: {
        interval: '5m',
        ref: { branch: 'stackflux/team-a/prod-1' },
        url: 'https://git.example.com/fleet.git',
      },
      status: {
        artifact: {
          revision: 'stackflux/team-a/prod-1@sha1:abc',
          digest: 'sha256:1',
          url: 'http://x/a.tar.gz',
        },
        conditions: [{ type: 'Ready', status: 'True', reason: 'Succeeded', message: 'stored artifact' }],
        lastHandledReconcileAt: '2026-01-01T00:05:12Z',
        observedGeneration: 1,
      },
    };
    const lean = leanObject(structuredClone(repo));
    const { managedFields: _m, ...metadata } = repo.metadata;
    const { artifact: _a, ...status } = repo.status;
    assert.deepEqual(lean, { ...repo, metadata, status });
  });

  for (const [kind, desired] of [
    ['Kustomization', desiredKustomization],
    ['GitRepository', desiredGitRepository],
  ] as const) {
    it(`a converged ${kind}: the desired-vs-cached comparison still says equal; a kept field changed: different`, () => {
      const want = desired();
      const cached = leanObject(converged(want));
      assert.equal(needsApply(cached, want), false);
      const labels = { ...want.metadata.labels, 'stackflux.io/cluster': 'prod-2' };
      assert.equal(needsApply(cached, { ...want, metadata: { ...want.metadata, labels } }), true);
      assert.equal(needsApply(cached, { ...want, spec: { ...(want.spec as object), interval: '1m' } }), true);
    });
  }

  it('keeps of a managed Flux kind’s conditions only Ready (no reader looks at another type)', () => {
    const ready = {
      type: 'Ready',
      status: 'False',
      reason: 'DependencyNotReady',
      message: 'dependency not ready',
    };
    const k = leanObject({
      apiVersion: 'kustomize.toolkit.fluxcd.io/v1',
      kind: 'Kustomization',
      metadata: { name: 'c1.cni' },
      status: {
        conditions: [{ type: 'Reconciling', status: 'True' }, ready, { type: 'Healthy', status: 'False' }],
        observedGeneration: 1,
      },
    });
    assert.deepEqual(k.status, { conditions: [ready], observedGeneration: 1 });
  });

  it('on other Flux kinds drops only inventory and history (no reader of them is checked here)', () => {
    const status = { artifact: { revision: '1.2.3' }, inventory: { entries: [] }, observedGeneration: 1 };
    const o = leanObject({
      apiVersion: 'source.toolkit.fluxcd.io/v1',
      kind: 'HelmRepository',
      metadata: { name: 'r' },
      status,
    });
    assert.deepEqual(o.status, { artifact: { revision: '1.2.3' }, observedGeneration: 1 });
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
