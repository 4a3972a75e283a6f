// Issue 31 F6/F10: the one rule for which objects a Cluster's refs lead stackflux to, shared by
// the live ClusterAddon controller and the impact/preview snapshot (offline/live.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { clusterRef } from '../../../controller/api/clusterrefs.ts';

const cluster = (ref: Record<string, unknown>) => ({
  metadata: { name: 'c1', namespace: 'team-a' },
  spec: { infrastructureRef: ref },
});

describe('clusterRef', () => {
  it('follows a provider kind (v1beta2 apiGroup or v1beta1 apiVersion) in the Cluster namespace', () => {
    assert.deepEqual(
      clusterRef(
        cluster({ apiGroup: 'infrastructure.cluster.x-k8s.io', kind: 'DockerCluster', name: 'x' }),
        'infrastructureRef',
      ),
      {
        ok: true,
        ref: {
          field: 'infrastructureRef',
          group: 'infrastructure.cluster.x-k8s.io',
          kind: 'DockerCluster',
          name: 'x',
          namespace: 'team-a',
        },
      },
    );
    const v1 = clusterRef(
      cluster({
        apiVersion: 'controlplane.cluster.x-k8s.io/v1beta1',
        kind: 'KubeadmControlPlane',
        name: 'cp',
        namespace: 'team-a',
      }),
      'infrastructureRef',
    );
    assert.equal(v1?.ok, true);
    assert.equal(v1?.ok && v1.ref.apiVersion, 'controlplane.cluster.x-k8s.io/v1beta1');
  });

  it('never follows a ref to a built-in kind: core Secrets, ConfigMaps, apps, rbac', () => {
    for (const ref of [
      { apiVersion: 'v1', kind: 'Secret', name: 'db-creds' },
      { apiGroup: '', kind: 'Secret', name: 'db-creds' },
      { kind: 'Secret', name: 'db-creds' },
      { apiVersion: 'v1', kind: 'ConfigMap', name: 'cm' },
      { apiGroup: 'apps', kind: 'Deployment', name: 'd' },
      { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'r' },
    ]) {
      const r = clusterRef(cluster(ref), 'infrastructureRef');
      assert.equal(r?.ok, false, JSON.stringify(ref));
      assert.match(r?.ok === false ? r.problem : '', /never to built-in kinds/);
    }
  });

  it('refuses a ref naming another namespace (F10), and an apiVersion outside its apiGroup', () => {
    const other = clusterRef(
      cluster({
        apiGroup: 'infrastructure.cluster.x-k8s.io',
        kind: 'DockerCluster',
        name: 'x',
        namespace: 'team-b',
      }),
      'infrastructureRef',
    );
    assert.equal(other?.ok, false);
    assert.match(other?.ok === false ? other.problem : '', /names namespace "team-b".*own namespace only/);
    const mixed = clusterRef(
      cluster({ apiGroup: 'infrastructure.cluster.x-k8s.io', apiVersion: 'v1', kind: 'Secret', name: 'x' }),
      'infrastructureRef',
    );
    assert.equal(mixed?.ok, false);
  });

  it('quotes a hostile kind or name in its problem (no raw control characters in a condition)', () => {
    const r = clusterRef(
      cluster({ apiVersion: 'v1', kind: 'Secret\u001b[2J', name: 'a\nb' }),
      'infrastructureRef',
    );
    assert.equal(r?.ok, false);
    const problem = r?.ok === false ? r.problem : '';
    assert.ok(![...problem].some((ch) => ch.charCodeAt(0) < 0x20), problem);
  });

  it('no ref, an empty name, or a ref that is not an object: nothing to follow', () => {
    assert.equal(clusterRef({ metadata: {}, spec: {} }, 'infrastructureRef'), undefined);
    assert.equal(clusterRef(cluster({ kind: 'DockerCluster', name: '' }), 'infrastructureRef'), undefined);
    assert.equal(
      clusterRef({ metadata: {}, spec: { infrastructureRef: 'x' } }, 'infrastructureRef'),
      undefined,
    );
  });
});
