// The pipeline's sharded informers: its own kinds in scope, the Flux objects only as managed.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  namespaceIndex,
  pipelineInformers,
} from '../../../../controller/controllers/releasepipeline/informers.ts';
import type { KubeObject } from '../../../../controller/runtime/client.ts';
import type { Manager } from '../../../../controller/runtime/manager.ts';

function recordingManager() {
  const asked: { kind: string; scope: object }[] = [];
  const manager = {
    shardedInformer: (_apiVersion: string, kind: string, scope: object) => {
      asked.push({ kind, scope });
      return { kind };
    },
  } as unknown as Pick<Manager, 'shardedInformer'>;
  return { asked, manager };
}

describe('pipelineInformers', () => {
  it('one namespace or all; GitRepositories and Kustomizations only as managed by stackflux', () => {
    const { asked, manager } = recordingManager();
    pipelineInformers(manager, 'team-a');
    assert.deepEqual(
      asked.map((a) => a.kind),
      ['ClusterStack', 'ClusterStackRelease', 'GitRepository', 'Kustomization'],
    );
    assert.deepEqual(asked[0]?.scope, { namespace: 'team-a' });
    const flux = asked[2]?.scope as { namespace?: string; labelSelector?: string };
    assert.equal(flux.namespace, 'team-a');
    assert.match(flux.labelSelector ?? '', /=/);
    const all = recordingManager();
    pipelineInformers(all.manager, undefined);
    assert.deepEqual(all.asked[1]?.scope, {});
  });

  it('indexes objects by namespace (none for cluster-scoped ones)', () => {
    assert.deepEqual(namespaceIndex({ metadata: { name: 'x', namespace: 'a' } } as KubeObject), ['a']);
    assert.deepEqual(namespaceIndex({ metadata: { name: 'x' } } as KubeObject), []);
  });
});
