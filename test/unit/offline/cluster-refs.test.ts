// Issue 31 F6/F10 in the offline render and preview (clusterRefsIn): a Cluster's refs resolve by
// the live controller's rule (api/clusterrefs.ts), whatever the snapshot holds: never to a Secret
// or another built-in kind, never into the namespace a ref names (v1beta1 Clusters can carry both).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { clusterRefsIn } from '../../../controller/offline/render.ts';
import { emptySnapshot, objectKey, type SnapshotObject } from '../../../controller/offline/snapshot.ts';
import { World } from '../../../controller/offline/world.ts';

function worldOf(objects: SnapshotObject[]): World {
  const s = emptySnapshot();
  for (const o of objects) s.objects.set(objectKey(o), o);
  return new World(s, new Date('2026-01-01T00:00:00Z'));
}

const cluster = (ref: Record<string, unknown>): SnapshotObject =>
  ({
    apiVersion: 'cluster.x-k8s.io/v1beta1',
    kind: 'Cluster',
    metadata: { name: 'c1', namespace: 'team-a' },
    spec: { infrastructureRef: ref },
  }) as SnapshotObject;

const secret = {
  apiVersion: 'v1',
  kind: 'Secret',
  metadata: { name: 'db-creds', namespace: 'team-a' },
  data: { password: 'U0VDUkVUUFc=' },
} as SnapshotObject;
const foreignInfra = {
  apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta1',
  kind: 'DockerCluster',
  metadata: { name: 'infra', namespace: 'team-b' },
  spec: { owner: 'team-b' },
} as SnapshotObject;
const ownInfra = {
  ...foreignInfra,
  metadata: { name: 'infra', namespace: 'team-a' },
  spec: { owner: 'team-a' },
};

describe('clusterRefsIn', () => {
  it('never hands a Secret a ref names to the templates (F6)', () => {
    const c = cluster({ apiVersion: 'v1', kind: 'Secret', name: 'db-creds' });
    const refs = clusterRefsIn(worldOf([c, secret]), c);
    assert.equal(refs.infraCluster, undefined, 'a Secret became .InfraCluster');
    assert.match(refs.refProblems.join(), /never to built-in kinds/);
  });

  it('resolves in the Cluster namespace only, whatever namespace the ref names (F10)', () => {
    const c = cluster({
      apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta1',
      kind: 'DockerCluster',
      name: 'infra',
      namespace: 'team-b',
    });
    const refs = clusterRefsIn(worldOf([c, foreignInfra, ownInfra]), c);
    assert.equal(refs.infraCluster, undefined, "another namespace's object became .InfraCluster");
    assert.match(refs.refProblems.join(), /names namespace "team-b"/);
    const plain = cluster({
      apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta1',
      kind: 'DockerCluster',
      name: 'infra',
    });
    assert.deepEqual(clusterRefsIn(worldOf([plain, foreignInfra, ownInfra]), plain).infraCluster?.spec, {
      owner: 'team-a',
    });
  });
});
