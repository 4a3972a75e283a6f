// The impact preview's reads before it renders: the fleet Secret, then the live snapshot of the
// release's namespace; a failure to read them is thrown (the controller retries), not an impact.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ClusterStack } from '../../../../controller/api/clusterstack.ts';
import type { ClusterStackRelease } from '../../../../controller/api/clusterstackrelease.ts';
import { impactPreview } from '../../../../controller/controllers/impact/preview.ts';
import type { ImpactControllerOptions } from '../../../../controller/controllers/impact/types.ts';
import type { KubeClient } from '../../../../controller/runtime/client.ts';

const release = {
  metadata: { name: 'docker-ferrol-1-30-v2', namespace: 'team-a' },
  spec: {},
  status: { commit: 'c1' },
} as unknown as ClusterStackRelease;
const cs = { metadata: { name: 'docker', namespace: 'team-a' } } as unknown as ClusterStack;
const opts = {
  cacheDir: '/nonexistent',
  fleet: { url: 'https://git.example/fleet.git', branchPrefix: 'clusters/' },
  templates: {},
} as unknown as ImpactControllerOptions;

function client() {
  const calls: string[] = [];
  const c = {
    get: async (_v: string, kind: string, name: string, ns: string) => {
      calls.push(`get ${kind} ${ns}/${name}`);
      return { data: { password: Buffer.from('p').toString('base64') } };
    },
    listAll: async (_v: string, kind: string, scope: { namespace?: string }) => {
      calls.push(`list ${kind} ${scope.namespace}`);
      throw new Error('api down');
    },
  };
  return { calls, client: c as unknown as KubeClient };
}

describe('impactPreview', () => {
  it('lists the release namespace for its snapshot; an API failure is thrown, not an impact', async () => {
    const { calls, client: c } = client();
    const preview = impactPreview(c, opts);
    await assert.rejects(preview(cs, release, new Date(0), { id: 'k', wake: () => {} }), /api down/);
    assert.deepEqual(calls, ['list ClusterStack team-a']);
  });

  it('reads the fleet Secret first when there is one', async () => {
    const { calls, client: c } = client();
    const preview = impactPreview(c, { ...opts, fleetSecret: { namespace: 'stackflux', name: 'fleet' } });
    await assert.rejects(preview(cs, release, new Date(0), { id: 'k', wake: () => {} }), /api down/);
    assert.deepEqual(calls, ['get Secret stackflux/fleet', 'list ClusterStack team-a']);
  });
});
