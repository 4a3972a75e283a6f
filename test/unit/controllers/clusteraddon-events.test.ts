// The Event of one fleet push (one per ClusterStack, not one per Cluster): its note says how many
// Clusters moved, why, and which, within the 1 KiB events.k8s.io allows.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pushNote } from '../../../controller/controllers/clusteraddon.ts';
import type { BranchUpdate } from '../../../controller/reconcilers/clusteraddon.ts';

function moved(cluster: string, reason: string): { update: BranchUpdate } {
  return {
    update: {
      branch: `stackflux/team/${cluster}`,
      files: null,
      message: '',
      change: { namespace: 'team', cluster, reason, rendered: [], removed: [] },
    },
  };
}

describe('pushNote', () => {
  it('counts the Clusters by reason, most frequent first, and names them sorted', () => {
    const note = pushNote([
      moved('b', 'release v1 → v2'),
      moved('a', 'first render'),
      moved('c', 'release v1 → v2'),
    ]);
    assert.equal(
      note,
      "3 Cluster fleet branch(es) moved in one push (2 × release v1 → v2; 1 × first render): team/a, team/b, team/c; each branch's git log says what changed",
    );
  });

  it('names ten Clusters and counts the rest; a large push stays within 1 KiB', () => {
    const changes = Array.from({ length: 10_000 }, (_, i) =>
      moved(
        `c-${String(i).padStart(5, '0')}`,
        i % 7 === 0 ? `Cluster or values changed: addon-${i}` : 'first render',
      ),
    );
    const note = pushNote(changes);
    assert.ok(note.length <= 1024, `${note.length} characters`);
    assert.match(note, /^10000 Cluster fleet branch\(es\) moved in one push \(8571 × first render; 1 × /);
    assert.match(note, /; 1427 other reason\(s\)\)/);
    assert.match(note, /team\/c-00009 and 9990 more;/);
  });
});
