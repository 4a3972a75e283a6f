// The diff phase alone: when a Cluster's fleet branch changes, and the reason its commit gives.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { BranchState } from '../../../../controller/gitops/branches.ts';
import { branchTreeIds } from '../../../../controller/gitops/objects.ts';
import { branchUpdate } from '../../../../controller/reconcilers/clusteraddon/branchchange.ts';
import { contextOf } from '../../../../controller/reconcilers/clusteraddon/context.ts';
import type { Selection, Target } from '../../../../controller/reconcilers/clusteraddon/types.ts';
import type { FluxTemplates } from '../../../../controller/releases/flux.ts';

const files = (entries: Record<string, string>) => new Map(Object.entries(entries));

/** The branch as the fleet writer reports it after writing `content`. */
function branchOf(content: Map<string, string>): BranchState {
  return { commit: 'c0ffee', ...branchTreeIds(content) };
}

function context(branch: BranchState | undefined, previousRelease?: string) {
  return contextOf({
    cluster: {},
    namespace: 'team',
    name: 'alpha',
    kustomizations: [],
    branch,
    fleetSettings: { url: 'https://git.example.com/fleet.git', branchPrefix: 'stackflux/' },
    // The diff phase builds no Flux object.
    templates: {} as FluxTemplates,
    now: new Date('2025-01-02T03:04:05Z'),
    ...(previousRelease !== undefined
      ? {
          clusterAddon: {
            apiVersion: 'stackflux.io/v1alpha1',
            kind: 'ClusterAddon',
            metadata: { name: 'alpha', namespace: 'team' },
            spec: { cluster: 'alpha', release: previousRelease },
            status: { release: previousRelease },
          },
        }
      : {}),
  });
}

const target = (releaseName: string) => ({ releaseName }) as Target;

function selection(disabled: string[] = []): Selection {
  return { order: [], dependencies: new Map(), disabled: new Set(disabled), clusterValues: undefined };
}

const v1 = files({
  'cni/a.yaml': 'a: 1\n',
  'csi/b.yaml': 'b: 1\n',
  'dns/c.yaml': 'c: 1\n',
  'x.helm/h.yaml': 'h\n',
});

describe('branchUpdate', () => {
  it('writes no branch for a Cluster with no addon enabled, and none when the tree is the same', () => {
    assert.equal(branchUpdate(context(undefined), target('v1'), selection(), new Map()), undefined);
    assert.equal(branchUpdate(context(branchOf(v1), 'v1'), target('v1'), selection(), v1), undefined);
  });

  it('a first render writes every folder on the Cluster branch', () => {
    const u = branchUpdate(context(undefined), target('v1'), selection(), v1);
    assert.equal(u?.branch, 'stackflux/team/alpha');
    assert.equal(u?.files, v1);
    assert.deepEqual(u?.change, {
      namespace: 'team',
      cluster: 'alpha',
      release: 'v1',
      reason: 'first render',
      rendered: ['cni', 'csi', 'dns', 'x.helm'],
      removed: [],
    });
    assert.equal(
      u?.message,
      'stackflux: team/alpha: release v1 (first render)\n\nrendered: cni, csi, dns, x.helm\n',
    );
  });

  it('within one release, names each kind of folder change, disabled first', () => {
    const next = files({ 'cni/a.yaml': 'a: 2\n', 'dns/c.yaml': 'c: 1\n', 'mon/d.yaml': 'd: 1\n' });
    // x is disabled (its Helm folder goes), csi is no longer rendered, mon is new, cni changed.
    const u = branchUpdate(context(branchOf(v1), 'v1'), target('v1'), selection(['x']), next);
    assert.equal(
      u?.change.reason,
      'disabled x.helm; enabled mon; no longer rendered: csi; Cluster or values changed: cni',
    );
    assert.deepEqual(u?.change.rendered, ['cni', 'mon']);
    assert.deepEqual(u?.change.removed, ['csi', 'x.helm']);
  });

  it('a release move is the reason, whatever the folders did; with nothing left the branch goes', () => {
    const moved = branchUpdate(
      context(branchOf(v1), 'v1'),
      target('v2'),
      selection(),
      files({ 'cni/a.yaml': 'a: 2\n' }),
    );
    assert.equal(moved?.change.reason, 'release v1 → v2');
    const emptied = branchUpdate(
      context(branchOf(v1), 'v1'),
      target('v1'),
      selection(['cni', 'csi', 'dns', 'x']),
      new Map(),
    );
    assert.equal(emptied?.files, null);
    assert.equal(emptied?.change.reason, 'disabled cni, csi, dns, x.helm');
  });

  it('a tree that differs outside the addon folders is still written, as a change of the rendered files', () => {
    const branch = { ...branchOf(v1), tree: 'another-root-tree' };
    const u = branchUpdate(context(branch, 'v1'), target('v1'), selection(), v1);
    assert.equal(u?.change.reason, 'rendered files changed');
    assert.deepEqual([u?.change.rendered, u?.change.removed], [[], []]);
  });
});
