// The Events of one push: one per ClusterStack whose Clusters moved; a Cluster without a
// ClusterStack (being deleted) on its ClusterAddon.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { reportPush } from '../../../../controller/controllers/clusteraddon/pushevents.ts';
import type { PendingChange } from '../../../../controller/controllers/clusteraddon/types.ts';
import { recordingEvents } from './fakes.ts';

const change = (cluster: string, stackName?: string): PendingChange => ({
  update: {
    branch: `stackflux/team/${cluster}`,
    files: null,
    message: '',
    change: { namespace: 'team', cluster, reason: 'r', rendered: [], removed: [] },
  },
  ...(stackName !== undefined
    ? { regarding: { metadata: { name: stackName, namespace: 'team' } } as never }
    : {}),
});

describe('reportPush', () => {
  it('records one Event per ClusterStack and one per ClusterAddon without one', () => {
    const { events, recorder } = recordingEvents();
    const addon = { metadata: { name: 'c', namespace: 'team' } } as never;
    reportPush(
      recorder,
      (key) => (key === 'team/c' ? addon : undefined),
      [change('a', 'ferrol'), change('b', 'ferrol'), change('c'), change('d'), change('e', 'other')],
      new Map([['stackflux/team/c', { commit: 'abc', tree: 't', addons: new Map() }]]),
    );
    assert.deepEqual(
      events.map((e) => [e.obj.metadata.name, e.reason, e.note.split(' (')[0]]),
      [
        ['c', 'FleetCommitPushed', 'fleet commit abc pushed to stackflux/team/c'],
        ['ferrol', 'FleetCommitPushed', '2 Cluster fleet branch(es) moved in one push'],
        ['other', 'FleetCommitPushed', '1 Cluster fleet branch(es) moved in one push'],
      ],
    );
  });
});
