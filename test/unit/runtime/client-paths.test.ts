import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { resourceOfPath } from '../../../controller/runtime/client.ts';

describe('resourceOfPath (the resource label of request counts)', () => {
  it('names the plural and the subresource of core, grouped, namespaced and cluster-scoped paths', () => {
    const cases: Array<[string, string]> = [
      ['/api/v1/namespaces/ns/secrets/a-kubeconfig', 'secrets'],
      ['/api/v1/namespaces/ns/secrets?labelSelector=x', 'secrets'],
      ['/apis/stackflux.io/v1alpha1/namespaces/ns/clusteraddons/c1/status', 'clusteraddons/status'],
      ['/apis/stackflux.io/v1alpha1/clusteraddons', 'clusteraddons'],
      ['/api/v1/namespaces', 'namespaces'],
      ['/api/v1/namespaces/ns', 'namespaces'],
      ['/apis/apiextensions.k8s.io/v1/customresourcedefinitions/x.y', 'customresourcedefinitions'],
      ['/apis/events.k8s.io/v1/namespaces/ns/events', 'events'],
      ['/apis/stackflux.io/v1alpha1', 'other'],
      ['/metrics', 'other'],
    ];
    for (const [path, want] of cases) assert.equal(resourceOfPath(path), want, path);
  });
});
