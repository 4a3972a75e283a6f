// `stackflux status`: the rollout row under a ClusterStack with a Progressive rollout.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ClusterStack } from '../../../controller/api/clusterstack.ts';
import { statusRows } from '../../../controller/cli/status.ts';

function stack(rollout?: NonNullable<ClusterStack['status']>['rollout']): ClusterStack {
  return {
    apiVersion: 'stackflux.io/v1alpha1',
    kind: 'ClusterStack',
    metadata: { name: 'ferrol', namespace: 'fleet' },
    spec: {
      provider: 'docker',
      name: 'ferrol',
      kubernetesVersion: '1.30',
      source: { git: { url: 'https://x/y.git' } },
    },
    status: {
      latestRelease: 'docker-ferrol-1-30-v2',
      ...(rollout !== undefined ? { rollout } : {}),
      conditions: [
        { type: 'Ready', status: 'True', reason: 'Succeeded', message: 'ok', lastTransitionTime: 'x' },
        ...(rollout !== undefined
          ? [
              {
                type: 'Rollout',
                status: 'False' as const,
                reason: 'Stalled',
                message: 'm',
                lastTransitionTime: 'x',
              },
            ]
          : []),
      ],
    },
  };
}

describe('stackflux status: rollout', () => {
  it('shows the phase, per-wave progress and why it waits under the ClusterStack', () => {
    const rows = statusRows({
      clusterStacks: [
        stack({
          phase: 'Stalled',
          targetRelease: 'docker-ferrol-1-30-v2',
          message: '1 Cluster(s) failed: canary-0',
          waves: [
            { name: 'canary', total: 1, done: 0, inFlight: 0, pending: 0, failed: 1 },
            { name: 'rest', total: 4, done: 1, inFlight: 2, pending: 1, failed: 0 },
          ],
        }),
      ],
      releases: [],
      clusterAddons: [],
    });
    const row = rows.find((r) => r.name.trim() === 'rollout');
    assert.deepEqual(row, {
      namespace: 'fleet',
      name: '  rollout',
      revision: 'docker-ferrol-1-30-v2',
      ready: 'False',
      message: 'Stalled: canary 0/1 (1 failed), rest 1/4 (2 in flight); 1 Cluster(s) failed: canary-0',
    });
  });

  it('shows no rollout row for a Manual ClusterStack', () => {
    const rows = statusRows({ clusterStacks: [stack()], releases: [], clusterAddons: [] });
    assert.equal(
      rows.some((r) => r.name.trim() === 'rollout'),
      false,
    );
  });
});
