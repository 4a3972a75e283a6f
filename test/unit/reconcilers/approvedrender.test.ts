// Issue 31, F4: what rolls out is what was previewed. Pure parts:
// - the one template input of live and preview renders (rendering/templateinput.ts), through the
//   ClusterAddon reconcile both run: a Cluster as the live informer keeps it and as the preview's
//   snapshot keeps it render the same files, even for a template that branches on the fields the
//   two readers keep differently (resourceVersion, kubectl's last-applied annotation);
// - the render digest and the hold of a live render that differs from the approved impact's
//   (reconcilers/approvedrender.ts), and the reconcile that writes nothing while held.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ClusterAddon } from '../../../controller/api/clusteraddon.ts';
import type { ClusterStack } from '../../../controller/api/clusterstack.ts';
import type { ClusterStackRelease, ReleaseImpact } from '../../../controller/api/clusterstackrelease.ts';
import type { ReleaseTree } from '../../../controller/api/release.ts';
import { APPROVED_ANNOTATION, APPROVED_IMPACT_ANNOTATION } from '../../../controller/api/rollout.ts';
import { branchTreeIds } from '../../../controller/gitops/objects.ts';
import { clean } from '../../../controller/offline/live.ts';
import {
  impactDigest,
  RENDER_APPROVED_CONDITION,
  RENDER_DIFFERS_REASON,
  renderDigest,
  renderHold,
} from '../../../controller/reconcilers/approvedrender.ts';
import {
  type ClusterAddonInput,
  FINALIZER_FLEET_CLEANUP,
  reconcileClusterAddon,
} from '../../../controller/reconcilers/clusteraddon.ts';
import { loadFluxTemplates } from '../../../controller/releases/flux-templates.ts';
import { templateInputOf, templateObject } from '../../../controller/rendering/templateinput.ts';
import type { KubeObject } from '../../../controller/runtime/client.ts';
import { LAST_APPLIED_ANNOTATION, leanObject } from '../../../controller/runtime/informer.ts';

const templates = loadFluxTemplates();
const now = new Date('2026-11-29T00:00:00Z');
const NS = 'team';
const V1 = 'docker-ferrol-1-30-v1';
const V2 = 'docker-ferrol-1-30-v2';

/** The divergent-preview release: a ClusterRoleBinding only where the Cluster shows a resourceVersion, or no last-applied annotation. */
const BOMB = `{{#if Cluster.metadata.resourceVersion}}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: tenant-is-admin
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: Group, name: "system:authenticated", apiGroup: rbac.authorization.k8s.io}]
{{/if}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: probe
data:
  lastApplied: {{#if (lookup Cluster.metadata.annotations "kubectl.kubernetes.io/last-applied-configuration")}}"present"{{else}}"absent"{{/if}}
  generation: {{#if Cluster.metadata.generation}}"set"{{else}}"unset"{{/if}}
`;

function stackYaml(version: string): string {
  return `apiVersion: stackflux.io/v1alpha1
kind: Stack
provider: docker
name: ferrol
kubernetesVersion: v1.30.4
version: ${version}
addons:
  - name: probe
`;
}

function tree(version: string, template: string): ReleaseTree {
  return new Map([
    ['cluster-addon/probe/objects.yaml.hbs', template],
    ['cluster-class/cluster-class.yaml', 'apiVersion: cluster.x-k8s.io/v1beta2\nkind: ClusterClass\n'],
    ['stack.yaml', stackYaml(version)],
  ]);
}

const PLAIN =
  'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: probe\ndata:\n  a: "{{Cluster.metadata.name}}"\n';
const PLAIN_V2 = `${PLAIN}  version: "2"\n`;

/** A Cluster as the API server returns it: managedFields, resourceVersion, generation, kubectl's annotation. */
function servedCluster(release: string): KubeObject {
  return {
    apiVersion: 'cluster.x-k8s.io/v1beta2',
    kind: 'Cluster',
    metadata: {
      name: 'alpha',
      namespace: NS,
      uid: 'uid-alpha',
      resourceVersion: '48213',
      generation: 3,
      annotations: { [LAST_APPLIED_ANNOTATION]: '{"kind":"Cluster"}', 'team.example/owner': 'ops' },
      managedFields: [{ manager: 'kubectl', operation: 'Apply' }],
    },
    spec: { topology: { classRef: { name: release }, version: 'v1.30.4' } },
  } as KubeObject;
}

function release(tag: string, extra: Partial<ClusterStackRelease> = {}): ClusterStackRelease {
  return {
    apiVersion: 'stackflux.io/v1alpha1',
    kind: 'ClusterStackRelease',
    metadata: { name: tag, namespace: NS, uid: `uid-${tag}`, creationTimestamp: '2026-11-01T00:00:00Z' },
    spec: {
      clusterStack: 'ferrol',
      tag,
      version: tag.slice(tag.lastIndexOf('-') + 1),
      clusterClass: tag,
      kubernetesVersion: '1.30',
      source: { url: 'https://git.example.com/stacks.git' },
    },
    status: { commit: `commit-${tag}` },
    ...extra,
  };
}

function stack(rollout?: ClusterStack['spec']['rollout'], latest = V2): ClusterStack {
  return {
    apiVersion: 'stackflux.io/v1alpha1',
    kind: 'ClusterStack',
    metadata: { name: 'ferrol', namespace: NS, uid: 'uid-csk' },
    spec: {
      provider: 'docker',
      name: 'ferrol',
      kubernetesVersion: '1.30',
      source: { git: { url: 'https://git.example.com/stacks.git' } },
      ...(rollout !== undefined ? { rollout } : {}),
    },
    status: { latestRelease: latest },
  };
}

function clusterAddon(onRelease: string): ClusterAddon {
  return {
    apiVersion: 'stackflux.io/v1alpha1',
    kind: 'ClusterAddon',
    metadata: {
      name: 'alpha',
      namespace: NS,
      uid: 'ca-alpha',
      generation: 1,
      finalizers: [FINALIZER_FLEET_CLEANUP],
    },
    spec: { cluster: 'alpha', release: onRelease },
    status: { release: onRelease },
  };
}

function input(over: Partial<ClusterAddonInput> & { cluster: unknown }): ClusterAddonInput {
  return {
    namespace: NS,
    name: 'alpha',
    clusterAddon: clusterAddon(V1),
    release: release(V1),
    tree: tree('v1', BOMB),
    treeCommit: `commit-${V1}`,
    clusterStack: stack(),
    kustomizations: [],
    branch: undefined,
    fleetSettings: { url: 'https://git.example.com/fleet.git', branchPrefix: 'stackflux/' },
    templates,
    now,
    ...over,
  };
}

function rendered(i: ClusterAddonInput): ReadonlyMap<string, string> {
  const r = reconcileClusterAddon(i);
  assert.ok(r?.branch?.files, JSON.stringify(r?.status.conditions));
  return r.branch.files;
}

describe('the one template input of live and preview renders (F4)', () => {
  it('a Cluster as the live informer keeps it and as the preview snapshot keeps it render the same files', () => {
    const served = servedCluster(V1);
    const live = rendered(input({ cluster: leanObject(served) }));
    const preview = rendered(input({ cluster: clean(served) }));
    assert.deepEqual([...preview], [...live], 'the preview shows what the live render writes');
    const text = [...live.values()].join('\n');
    assert.doesNotMatch(text, /ClusterRoleBinding/, 'resourceVersion is no template input');
    assert.match(text, /lastApplied: "absent"/, "kubectl's last-applied annotation is no template input");
    assert.match(text, /generation: "unset"/, 'generation (bumped by the rollout move) is no template input');
  });

  it('templateObject drops what the server and tools keep about the object, and keeps what it says', () => {
    const served = servedCluster(V1) as unknown as Record<string, unknown>;
    const withRollout = {
      ...served,
      metadata: {
        ...(served.metadata as object),
        annotations: {
          ...((served.metadata as { annotations: object }).annotations ?? {}),
          'rollout.stackflux.io/to': V2,
        },
      },
    };
    const seen = templateObject(withRollout);
    assert.deepEqual(seen.metadata, {
      name: 'alpha',
      namespace: NS,
      uid: 'uid-alpha',
      annotations: { 'team.example/owner': 'ops' },
    });
    assert.deepEqual(seen.spec, served.spec);
    assert.ok((served.metadata as { managedFields?: unknown }).managedFields, 'the input is not changed');
    const only = templateObject({
      metadata: { name: 'x', annotations: { [LAST_APPLIED_ANNOTATION]: '{}' } },
    });
    assert.deepEqual(only.metadata, { name: 'x' }, 'no empty annotations map is left');
    const refs = templateInputOf({ cluster: withRollout, infraCluster: clean(servedCluster(V1)) });
    assert.equal(refs.controlPlane, undefined);
    assert.deepEqual(
      Object.keys(refs.infraCluster?.metadata as object).sort(),
      ['annotations', 'name', 'namespace', 'uid'],
      'refs are cut the same way',
    );
  });
});

describe('render digests', () => {
  it('names the files and their content, whatever their order', () => {
    const a = renderDigest(
      new Map([
        ['x/a.yaml', '1'],
        ['x/b.yaml', '2'],
      ]),
    );
    assert.equal(
      a,
      renderDigest(
        new Map([
          ['x/b.yaml', '2'],
          ['x/a.yaml', '1'],
        ]),
      ),
    );
    assert.notEqual(
      a,
      renderDigest(
        new Map([
          ['x/a.yaml', '1'],
          ['x/b.yaml', '3'],
        ]),
      ),
    );
    assert.notEqual(
      renderDigest(new Map([['a', 'bc']])),
      renderDigest(new Map([['ab', 'c']])),
      'path and content are not one stream',
    );
    assert.match(a, /^sha256:[0-9a-f]{64}$/);
  });

  it('an impact digest covers the renders and counts, not the time it was computed', () => {
    const base: ReleaseImpact = {
      commit: 'c',
      computedAt: 't1',
      clusters: 1,
      renders: { 'team/alpha': 'sha256:1' },
    };
    assert.equal(impactDigest(base), impactDigest({ ...base, computedAt: 't2' }));
    assert.notEqual(impactDigest(base), impactDigest({ ...base, renders: { 'team/alpha': 'sha256:2' } }));
    assert.notEqual(impactDigest(base), impactDigest({ ...base, clusters: 2 }));
  });
});

const GATED = { strategy: 'Progressive' as const, requireApproval: { maxClustersAffected: 0 } };

function v2With(impact: ReleaseImpact | undefined, approved?: string): ClusterStackRelease {
  const r = release(V2);
  return {
    ...r,
    metadata: {
      ...r.metadata,
      ...(approved !== undefined
        ? { annotations: { [APPROVED_ANNOTATION]: V2, [APPROVED_IMPACT_ANNOTATION]: approved } }
        : {}),
    },
    status: { commit: `commit-${V2}`, ...(impact !== undefined ? { impact } : {}) },
  };
}

function impactOf(renders: Record<string, string>): ReleaseImpact {
  const i: ReleaseImpact = {
    commit: `commit-${V2}`,
    computedAt: 't',
    clusters: 1,
    clustersAffected: 1,
    objectsAdded: 1,
    objectsChanged: 0,
    objectsRemoved: 0,
    clustersFailing: 0,
    renders,
  };
  return { ...i, digest: impactDigest(i) };
}

describe('renderHold: a move to the rollout target is bound to its approved impact', () => {
  const hold = (cs: ClusterStack, r: ClusterStackRelease, digest: string, from: string | null = V1) =>
    renderHold({ clusterStack: cs, release: r, cluster: `${NS}/alpha`, from: from ?? undefined, digest });

  it('the approved render rolls out; another render is held naming both digests', () => {
    const impact = impactOf({ [`${NS}/alpha`]: 'sha256:previewed' });
    const approved = v2With(impact, impact.digest);
    assert.equal(hold(stack(GATED), approved, 'sha256:previewed'), undefined);
    const held = hold(stack(GATED), approved, 'sha256:other');
    assert.equal(held?.reason, RENDER_DIFFERS_REASON);
    assert.equal(held?.impact, impact.digest);
    assert.match(held?.message ?? '', /sha256:other/);
    assert.match(held?.message ?? '', /sha256:previewed/);
    const missing = hold(stack(GATED), v2With(impactOf({}), impactOf({}).digest), 'sha256:x');
    assert.equal(missing?.reason, RENDER_DIFFERS_REASON, 'a Cluster the impact did not render is held');
    const i = { ...impactOf({ [`${NS}/alpha`]: 'sha256:previewed' }), recomputed: 3 };
    const last = { ...i, digest: impactDigest(i) };
    assert.match(
      hold(stack(GATED), v2With(last, last.digest), 'sha256:other')?.message ?? '',
      /computed again 3 times and the render still differs: the release's templates do not render reproducibly/,
    );
  });

  it('an approval of an older impact does not approve the newer one', () => {
    const older = impactOf({ [`${NS}/alpha`]: 'sha256:first' });
    const newer = impactOf({ [`${NS}/alpha`]: 'sha256:second' });
    const held = hold(stack(GATED), v2With(newer, older.digest), 'sha256:second');
    assert.equal(held?.reason, 'WaitingForApproval');
    assert.equal(hold(stack(GATED), v2With(newer, newer.digest), 'sha256:second'), undefined);
  });

  it('only moves to the target of a Progressive stack requiring approval are bound', () => {
    const impact = impactOf({ [`${NS}/alpha`]: 'sha256:previewed' });
    const r = v2With(impact, impact.digest);
    assert.equal(hold(stack(undefined), r, 'sha256:x'), undefined, 'no rollout');
    assert.equal(hold(stack({ strategy: 'Progressive' }), r, 'sha256:x'), undefined, 'no approval asked');
    assert.equal(hold(stack(GATED, V1), r, 'sha256:x'), undefined, 'not the rollout target (a rollback)');
    assert.equal(hold(stack(GATED), r, 'sha256:x', null), undefined, 'a first render');
    assert.equal(hold(stack(GATED), r, 'sha256:x', V2), undefined, 'already on the release');
  });

  it('an approved impact that could not be computed binds nothing more', () => {
    const i: ReleaseImpact = { commit: `commit-${V2}`, computedAt: 't', error: 'boom' };
    const errored = { ...i, digest: impactDigest(i) };
    assert.equal(hold(stack(GATED), v2With(errored, errored.digest), 'sha256:x'), undefined);
    assert.equal(hold(stack(GATED), v2With(errored), 'sha256:x')?.reason, 'WaitingForApproval');
  });
});

describe('the live ClusterAddon reconcile holds a render that differs from the approved impact', () => {
  /** alpha on v1 (branch at its v1 render), moved to v2 whose impact recorded `recorded`. */
  function moved(recorded: string, templateV2: string): ClusterAddonInput {
    const v1 = rendered(input({ cluster: servedCluster(V1), tree: tree('v1', PLAIN) }));
    const ids = branchTreeIds(v1);
    const impact = impactOf({ [`${NS}/alpha`]: recorded });
    return input({
      cluster: leanObject(servedCluster(V2)),
      release: v2With(impact, impact.digest),
      tree: tree('v2', templateV2),
      treeCommit: `commit-${V2}`,
      clusterStack: stack(GATED),
      branch: { commit: 'c1', tree: ids.tree, addons: ids.addons },
      holdUnapproved: true,
    });
  }

  it('writes the previewed render and holds another, with a condition naming it', () => {
    const preview = reconcileClusterAddon({ ...moved('sha256:unused', PLAIN_V2), holdUnapproved: false });
    const digest = preview?.renderDigest;
    assert.ok(digest, 'the reconcile reports its render digest');
    const ok = reconcileClusterAddon(moved(digest, PLAIN_V2));
    assert.ok(ok?.branch, 'the approved render is written');
    assert.equal(
      ok.status.conditions?.find((c) => c.type === RENDER_APPROVED_CONDITION),
      undefined,
    );

    const held = reconcileClusterAddon(moved(digest, `${PLAIN_V2}  b: "changed since the preview"\n`));
    assert.ok(held);
    assert.equal(held.branch, undefined, 'nothing is written to the branch');
    const c = held.status.conditions?.find((x) => x.type === RENDER_APPROVED_CONDITION);
    assert.equal(c?.status, 'False');
    assert.equal(c?.reason, RENDER_DIFFERS_REASON);
    assert.equal(held.status.conditions?.find((x) => x.type === 'Ready')?.reason, RENDER_DIFFERS_REASON);
    assert.equal(held.status.release, V1, 'the Cluster stays on what it runs');
    assert.equal(held.status.heldRender?.release, V2);
    assert.equal(held.status.heldRender?.digest, held.renderDigest);
    assert.notEqual(held.renderDigest, digest);
    assert.equal(held.kustomizations, undefined, 'the Flux objects are left as they are');
  });
});
