import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { slimCluster } from '../../../controller/controllers/clusterview.ts';
import { clusterUse } from '../../../controller/reconcilers/clusterstack.ts';

describe('the in-use view keeps only what the in-use check reads', () => {
  const full = {
    apiVersion: 'cluster.x-k8s.io/v1beta2',
    kind: 'Cluster',
    metadata: {
      name: 'prod',
      namespace: 'team',
      uid: 'u1',
      resourceVersion: '42',
      labels: { big: 'x'.repeat(1000) },
      annotations: { 'kubectl.kubernetes.io/last-applied-configuration': 'x'.repeat(5000) },
      managedFields: [{ manager: 'capi' }],
    },
    spec: {
      clusterNetwork: { pods: { cidrBlocks: ['192.168.0.0/16'] } },
      topology: {
        classRef: { name: 'docker-ferrol-1-30-v3', namespace: 'stacks' },
        version: 'v1.30.4',
        variables: [{ name: 'stackfluxAddonValues', value: { cni: { mtu: 1400 } } }],
      },
    },
    status: { phase: 'Provisioned', conditions: [{ type: 'Ready', status: 'True' }] },
  };

  it('drops spec, status and metadata beyond identity, and keeps the class reference', () => {
    const slim = slimCluster(full);
    assert.deepEqual(slim, {
      apiVersion: 'cluster.x-k8s.io/v1beta2',
      kind: 'Cluster',
      metadata: { name: 'prod', namespace: 'team', uid: 'u1', resourceVersion: '42' },
      spec: { topology: { classRef: { name: 'docker-ferrol-1-30-v3', namespace: 'stacks' } } },
    });
    assert.deepEqual(clusterUse(slim), clusterUse(full));
  });

  it('keeps the v1beta1 class fields and a deletion in progress; a Cluster without topology uses nothing', () => {
    const v1beta1 = {
      ...full,
      metadata: { ...full.metadata, deletionTimestamp: '2025-01-01T00:00:00Z' },
      spec: { topology: { class: 'docker-ferrol-1-30-v2', classNamespace: 'stacks', version: 'v1.30.4' } },
    };
    const slim = slimCluster(v1beta1);
    assert.equal(
      slim.metadata.deletionTimestamp,
      '2025-01-01T00:00:00Z',
      'a Cluster being deleted still uses its class',
    );
    assert.deepEqual(clusterUse(slim), {
      name: 'prod',
      className: 'docker-ferrol-1-30-v2',
      classNamespace: 'stacks',
    });
    const plain = slimCluster({ ...full, spec: { clusterNetwork: {} } });
    assert.equal(plain.spec, undefined);
    assert.equal(clusterUse(plain), undefined);
  });
});
