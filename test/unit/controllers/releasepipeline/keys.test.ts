// Which keys an event of a related object concerns.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  classNamespace,
  clusterStacksOf,
  releaseOwning,
  releasesOf,
  releasesOfStack,
  sharingStacks,
  stackOfRelease,
} from '../../../../controller/controllers/releasepipeline/keys.ts';
import type { KubeObject } from '../../../../controller/runtime/client.ts';
import { cluster, indexed, rel, stack } from './fakes.ts';

describe('release pipeline keys', () => {
  it('a release → its owning ClusterStack, else spec.clusterStack of its namespace', () => {
    assert.deepEqual(stackOfRelease(rel('a', 'r1', { clusterStack: 'docker' }, 'owner')), ['a/owner']);
    assert.deepEqual(stackOfRelease(rel('a', 'r1', { clusterStack: 'docker' })), ['a/docker']);
  });

  it('a Flux object → the release owning it', () => {
    const owned = {
      metadata: {
        namespace: 'a',
        name: 'r1',
        ownerReferences: [{ kind: 'ClusterStackRelease', name: 'r1', controller: true }],
      },
    } as KubeObject;
    assert.deepEqual(releaseOwning(owned), ['a/r1']);
    assert.deepEqual(releaseOwning({ metadata: { name: 'x' } } as KubeObject), []);
  });

  it('a Cluster → the ClusterStacks and the releases of its class, in the class namespace', () => {
    const stacks = indexed([stack('a', 's1'), stack('b', 's2')]);
    const releases = indexed([
      rel('a', 'r1', { clusterClass: 'cc-v1' }),
      rel('a', 'r2', { clusterClass: 'cc-v2' }),
      rel('b', 'r3', { clusterClass: 'cc-v1' }),
    ]);
    const c = cluster('b', 'c1', 'cc-v1', 'a');
    assert.equal(classNamespace(c), 'a');
    assert.equal(classNamespace(cluster('b', 'c2', 'cc-v1')), 'b');
    assert.deepEqual(clusterStacksOf(stacks.informer)(c), ['a/s1']);
    assert.deepEqual(releasesOf(releases.informer)(c), ['a/r1']);
    const notACluster = { metadata: { name: 'x', namespace: 'a' } } as KubeObject;
    assert.deepEqual(clusterStacksOf(stacks.informer)(notACluster), []);
    assert.deepEqual(releasesOf(releases.informer)(notACluster), []);
  });

  it('a ClusterStack → its releases; the sharing ClusterStacks are those with a selector', () => {
    const releases = indexed([
      rel('a', 'r1', { clusterStack: 's1' }),
      rel('a', 'r2', { clusterStack: 's2' }),
      rel('b', 'r3', { clusterStack: 's1' }),
    ]);
    assert.deepEqual(releasesOfStack(releases.informer)(stack('a', 's1')), ['a/r1']);
    const stacks = indexed([stack('a', 's1', { clusterNamespaceSelector: {} }), stack('a', 's2')]);
    assert.deepEqual(
      sharingStacks(stacks.informer).map((s) => s.metadata.name),
      ['s1'],
    );
  });
});
