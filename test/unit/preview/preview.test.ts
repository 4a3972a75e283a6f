// The preview core: Clusters moved in memory, rendered through reconcileClusterAddon, diffed
// against their branches. Release trees are the example stacks (stacks/) edited per release;
// each Cluster's branch "now" is what the reconcile wrote for its current release.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { ClusterStack } from '../../../controller/api/clusterstack.ts';
import type { ReleaseTree } from '../../../controller/api/release.ts';
import type { BranchFiles } from '../../../controller/gitops/branches.ts';
import {
  type PreviewClusterInput,
  type PreviewInput,
  type PreviewRelease,
  previewRelease,
} from '../../../controller/preview/core.ts';
import { impactSummary, impactWanted, recomputedImpact } from '../../../controller/preview/impact.ts';
import { diffBranchObjects, MASK, MASK_CHANGED, maskSecret } from '../../../controller/preview/objects.ts';
import { diffText, summaryText } from '../../../controller/preview/report.ts';
import { parseLabelSelector } from '../../../controller/preview/selector.ts';
import {
  FINALIZER_FLEET_CLEANUP,
  type FleetSettings,
  reconcileClusterAddon,
} from '../../../controller/reconcilers/clusteraddon.ts';
import { desiredRelease } from '../../../controller/reconcilers/clusterstack.ts';
import { loadFluxTemplates } from '../../../controller/releases/flux-templates.ts';
import { parseReleaseTag } from '../../../controller/releases/tags.ts';
import { releaseTree } from '../../../controller/releases/tree.ts';
import { readStackDir } from '../../../hack/lib/stack-dir.ts';

const templates = loadFluxTemplates();
const now = new Date('2025-01-02T03:04:05Z');
const NS = 'team';
const STACKS = join(import.meta.dirname, '..', '..', '..', 'stacks');
const fleetSettings: FleetSettings = { url: 'https://git.example.com/fleet.git', branchPrefix: 'stackflux/' };
const ferrol = (v: string) => `docker-ferrol-1-30-${v}`;
const cso = (v: string) => `docker-csoferrol-1-30-${v}`;

/** A copy of a tree with files replaced (string) or removed (null). */
function edited(tree: ReleaseTree, changes: Record<string, string | null>): ReleaseTree {
  const files = new Map(tree);
  for (const [path, text] of Object.entries(changes)) {
    if (text === null) files.delete(path);
    else files.set(path, text);
  }
  return releaseTree(new Map([...files].sort(([a], [b]) => (a < b ? -1 : 1))), tree.binary ?? new Map());
}

const WEB_ADDON = '  - name: web\n    targetNamespace: web\n';
const SECRET = (suffix: string) =>
  `apiVersion: v1\nkind: Secret\nmetadata:\n  name: cni-token\nstringData:\n  token: "{{Cluster.metadata.name}}-${suffix}"\n  fixed: "same"\n`;

/** stacks/docker-ferrol-1-30 as release `version`, plus a Helm addon "web" and a Secret in cni. */
function ferrolRelease(
  version: string,
  changes: (base: ReleaseTree) => Record<string, string | null> = () => ({}),
) {
  const base = readStackDir(join(STACKS, 'docker-ferrol-1-30'));
  const stack = (base.get('stack.yaml') ?? '').replace(/^version: v1$/m, `version: ${version}`);
  const cls = (base.get('cluster-class/cluster-class.yaml') ?? '').replaceAll(ferrol('v1'), ferrol(version));
  const v1 = edited(base, {
    'stack.yaml': `${stack}${WEB_ADDON}`,
    'cluster-class/cluster-class.yaml': cls,
    'cluster-addon/cni/secret.yaml.hbs': SECRET('v1'),
    'cluster-addon/web/Chart.yaml': 'apiVersion: v2\nname: web\nversion: 0.1.0\n',
    'cluster-addon/web/values.yaml': 'replicas: 1\nimage: web:1\n',
    'cluster-addon/web/templates/deploy.yaml': 'kind: ConfigMap\n',
  });
  return edited(v1, changes(v1));
}

const V1 = ferrolRelease('v1');
/** v2: the cni template gains a line, the Secret's token changes, cloud-config is gone, web has 2 replicas. */
const V2 = ferrolRelease('v2', (t) => ({
  'cluster-addon/cni/config.yaml.hbs': (t.get('cluster-addon/cni/config.yaml.hbs') ?? '').replace(
    '  LOG_LEVEL:',
    '  FEATURE_GATES: "fast-path"\n  LOG_LEVEL:',
  ),
  'cluster-addon/cni/secret.yaml.hbs': SECRET('v2'),
  'stack.yaml': (t.get('stack.yaml') ?? '').replace(
    '  - name: cloud-config\n    targetNamespace: kube-system\n    # no dependsOn: waits for the previous addon (cni)\n',
    '',
  ),
  'cluster-addon/web/values.yaml': 'replicas: 2\nimage: web:1\n',
}));
/** v3: the cni schema allows at most MTU 1500. */
const V3 = ferrolRelease('v3', (t) => ({
  'cluster-addon/cni/values.schema.json': (t.get('cluster-addon/cni/values.schema.json') ?? '').replace(
    '"maximum": 9000',
    '"maximum": 1500',
  ),
}));

function clusterStack(
  name: string,
  provider: string,
  spec: Partial<ClusterStack['spec']> = {},
): ClusterStack {
  return {
    apiVersion: 'stackflux.io/v1alpha1',
    kind: 'ClusterStack',
    metadata: { name, namespace: NS, uid: `uid-${name}` },
    spec: {
      provider: 'docker',
      name: provider,
      kubernetesVersion: '1.30',
      noProvider: true,
      source: { git: { url: 'https://git.example.com/stacks.git' } },
      ...spec,
    },
  } as ClusterStack;
}

function cluster(
  name: string,
  className: string,
  o: { values?: unknown; labels?: Record<string, string> } = {},
) {
  return {
    apiVersion: 'cluster.x-k8s.io/v1beta2',
    kind: 'Cluster',
    metadata: { name, namespace: NS, uid: `uid-${name}`, ...(o.labels ? { labels: o.labels } : {}) },
    spec: {
      clusterNetwork: { pods: { cidrBlocks: ['10.1.0.0/16'] } },
      controlPlaneEndpoint: { host: `${name}.example.internal`, port: 6443 },
      topology: {
        classRef: { name: className },
        version: 'v1.30.4',
        ...(o.values !== undefined ? { variables: [{ name: 'stackfluxAddonValues', value: o.values }] } : {}),
      },
    },
  };
}

function releasesOf(cs: ClusterStack, trees: Record<string, ReleaseTree>): Map<string, PreviewRelease> {
  return new Map(
    Object.entries(trees).map(([tag, tree]) => {
      const parsed = parseReleaseTag(tag);
      assert.ok(parsed.ok);
      return [tag, { release: desiredRelease(cs, parsed.value), tree }];
    }),
  );
}

/** The branch the controller writes for the Cluster as it is (the reconcile itself, no branch yet). */
function branchOf(
  cs: ClusterStack,
  c: Record<string, unknown>,
  releases: Map<string, PreviewRelease>,
): BranchFiles {
  const meta = c.metadata as { name: string };
  const className = (c.spec as { topology: { classRef: { name: string } } }).topology.classRef.name;
  const tag = parseReleaseTag(className);
  assert.ok(tag.ok);
  const r = releases.get(tag.value.tag);
  const result = reconcileClusterAddon({
    cluster: c,
    namespace: NS,
    name: meta.name,
    clusterAddon: {
      apiVersion: 'stackflux.io/v1alpha1',
      kind: 'ClusterAddon',
      metadata: { name: meta.name, namespace: NS, uid: 'u', finalizers: [FINALIZER_FLEET_CLEANUP] },
      spec: {} as never,
    },
    ...(r?.release !== undefined ? { release: r.release } : {}),
    ...(r?.tree !== undefined ? { tree: r.tree } : {}),
    clusterStack: cs,
    kustomizations: [],
    branch: undefined,
    fleetSettings,
    templates,
    now,
  });
  assert.ok(
    result?.branch?.files,
    `the branch of ${meta.name} at ${tag.value.tag}: ${JSON.stringify(result?.status)}`,
  );
  return result.branch.files;
}

function input(
  cs: ClusterStack,
  trees: Record<string, ReleaseTree>,
  candidate: string,
  clusters: Record<string, unknown>[],
  over: Partial<PreviewInput> = {},
): PreviewInput {
  const releases = releasesOf(cs, trees);
  const cis: PreviewClusterInput[] = clusters.map((c) => ({ cluster: c, branch: branchOf(cs, c, releases) }));
  return { clusterStack: cs, releases, candidate, clusters: cis, fleetSettings, templates, now, ...over };
}

/** Three value groups (MTU default, 1500, 9000); two "canary" Clusters. */
function fleet(className: string): Record<string, unknown>[] {
  return [1, 2, 3, 4, 5, 6].map((i) =>
    cluster(`c${i}`, className, {
      ...(i % 3 === 1 ? {} : { values: { cni: { mtu: i % 3 === 2 ? 1500 : 9000 } } }),
      ...(i <= 2 ? { labels: { tier: 'canary' } } : {}),
    }),
  );
}

const waves = {
  rollout: {
    strategy: 'Progressive' as const,
    waves: [{ name: 'canary', selector: { matchLabels: { tier: 'canary' } } }],
  },
};

describe('previewRelease: stackflux format, manifest and Helm addons', () => {
  const cs = clusterStack('ferrol', 'ferrol', waves);
  const trees = { [ferrol('v1')]: V1, [ferrol('v2')]: V2 };
  const clusters = fleet(ferrol('v1'));
  const result = previewRelease(input(cs, trees, ferrol('v2'), clusters));

  it('previews every Cluster of the stack with its wave, addons removed, objects and values changed', () => {
    assert.equal(result.release, ferrol('v2'));
    assert.deepEqual(
      result.clusters.map((c) => [c.name, c.wave, c.from, c.outcome]),
      [1, 2, 3, 4, 5, 6].map((i) => [`c${i}`, i <= 2 ? 'canary' : 'rest', ferrol('v1'), 'changed']),
    );
    const c1 = result.clusters[0];
    assert.ok(c1);
    assert.deepEqual(c1.addonsAdded, []);
    assert.deepEqual(c1.addonsRemoved, ['cloud-config']);
    assert.deepEqual(
      c1.objects.filter((o) => o.change !== 'removed').map((o) => `${o.change} ${o.addon} ${o.id}`),
      [
        'changed cni v1 ConfigMap ferrol-cni-config',
        'changed cni v1 Secret cni-token',
        'changed web.helm helm.toolkit.fluxcd.io/v2 HelmRelease team/c1.web',
      ],
    );
    assert.ok(c1.objects.some((o) => o.change === 'removed' && o.addon === 'cloud-config'));
    assert.equal(c1.counts.removed, c1.objects.filter((o) => o.addon === 'cloud-config').length);
    assert.deepEqual(c1.values, [{ addon: 'web.helm', paths: ['replicas'] }]);
    assert.equal(result.failed, 0);
  });

  it('is exactly what the reconcile writes once the Cluster has moved (class and version set as the rollout sets them)', () => {
    const releases = releasesOf(cs, trees);
    for (const c of clusters) {
      const moved = structuredClone(c) as ReturnType<typeof cluster>;
      moved.spec.topology.classRef.name = ferrol('v2');
      const before = branchOf(cs, c, releases);
      const after = branchOf(cs, moved, releases);
      const p = result.clusters.find((x) => x.name === (c.metadata as { name: string }).name);
      assert.deepEqual(p?.objects, diffBranchObjects(before, after), p?.name);
    }
  });

  it('groups Clusters whose change is the same: the MTU is in no changed line, so one group of 6', () => {
    assert.deepEqual(result.groups, [
      { clusters: ['team/c1', 'team/c2', 'team/c3', 'team/c4', 'team/c5', 'team/c6'] },
    ]);
    const text = summaryText(result);
    assert.match(text, /team\/c1 \(\+5 more\)\s+6\s+canary,rest/);
    assert.equal(text.split('\n').filter((l) => l.startsWith('team/')).length, 1);
  });

  it('splits groups where per-Cluster values make the change differ (web replicas pinned per Cluster)', () => {
    const mixed = clusters.map((c, i) =>
      i < 2
        ? cluster((c.metadata as { name: string }).name, ferrol('v1'), {
            values: { web: { replicas: 5 } },
            labels: { tier: 'canary' },
          })
        : c,
    );
    const r = previewRelease(input(cs, trees, ferrol('v2'), mixed));
    assert.deepEqual(
      r.groups.map((g) => g.clusters),
      [
        ['team/c1', 'team/c2'],
        ['team/c3', 'team/c4', 'team/c5', 'team/c6'],
      ],
    );
    assert.deepEqual(r.clusters[0]?.values, []);
  });

  it('masks Secret values: says which changed, never shows them', () => {
    const secret = result.clusters[0]?.objects.find((o) => o.id.includes('Secret cni-token'));
    assert.ok(secret);
    for (const text of [secret.before, secret.after, diffText(result)]) {
      assert.doesNotMatch(text, /c1-v1|c1-v2/);
    }
    assert.ok(secret.after.includes(`token: "${MASK_CHANGED}"`), secret.after);
    assert.match(secret.before, /token: "\*\*\*"/);
    assert.match(secret.after, /fixed: "\*\*\*"/);
    assert.deepEqual(maskSecret({ apiVersion: 'v1', kind: 'Secret', data: { a: 'eA==' } }, undefined), {
      apiVersion: 'v1',
      kind: 'Secret',
      data: { a: MASK },
    });
    assert.deepEqual(maskSecret({ apiVersion: 'v1', kind: 'ConfigMap', data: { a: 'x' } }, undefined), {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      data: { a: 'x' },
    });
  });

  it('selects by label selector and by wave', () => {
    const bySelector = previewRelease(
      input(cs, trees, ferrol('v2'), clusters, { selector: { matchLabels: { tier: 'canary' } } }),
    );
    assert.deepEqual(
      bySelector.clusters.map((c) => c.name),
      ['c1', 'c2'],
    );
    const byWave = previewRelease(input(cs, trees, ferrol('v2'), clusters, { wave: 'rest' }));
    assert.deepEqual(
      byWave.clusters.map((c) => c.name),
      ['c3', 'c4', 'c5', 'c6'],
    );
  });

  it('leaves out Clusters of other stacks and Clusters already on the candidate', () => {
    const other = cluster('other', 'docker-ferrol-1-31-v1');
    const onV2 = cluster('already', ferrol('v2'));
    const base = input(cs, trees, ferrol('v2'), clusters);
    const r = previewRelease({
      ...base,
      clusters: [
        ...base.clusters,
        { cluster: other, branch: new Map() },
        { cluster: onV2, branch: new Map() },
      ],
    });
    assert.deepEqual(
      r.clusters.map((c) => c.name),
      ['c1', 'c2', 'c3', 'c4', 'c5', 'c6'],
    );
  });

  it('names the Clusters that would fail to render, with the reason, and keeps them out of the diff', () => {
    const r = previewRelease(input(cs, { [ferrol('v1')]: V1, [ferrol('v3')]: V3 }, ferrol('v3'), clusters));
    assert.deepEqual(
      r.clusters.filter((c) => c.outcome === 'failed').map((c) => [c.name, c.failure?.reason]),
      [
        ['c3', 'ValuesInvalid'],
        ['c6', 'ValuesInvalid'],
      ],
    );
    assert.equal(r.failed, 2);
    assert.match(r.clusters[2]?.failure?.message ?? '', /cni.*1500/);
    assert.deepEqual(r.clusters[2]?.objects, []);
    assert.deepEqual(
      [...new Set(r.clusters.flatMap((c) => c.objects.map((o) => `${o.change} ${o.addon}`)))],
      ['changed cloud-config', 'changed web.helm'],
      'v3 changes only what names the release (the cloud-config ConfigMap, the HelmRelease)',
    );
    assert.match(summaryText(r), /team\/c3, team\/c6: ValuesInvalid: /);
  });

  it('a candidate whose files were not fetched: every Cluster fails with ReleaseNotFetched', () => {
    const base = input(cs, trees, ferrol('v2'), clusters);
    const releases = new Map(base.releases);
    releases.set(ferrol('v2'), {});
    const r = previewRelease({ ...base, releases });
    assert.ok(r.clusters.every((c) => c.failure?.reason === 'ReleaseNotFetched'));
  });

  it('diffs the ClusterClass once per release moved from (native: the cluster-class/ files)', () => {
    assert.equal(result.clusterClass.length, 1);
    const d = result.clusterClass[0];
    assert.ok(d);
    assert.deepEqual(d.objects, [], 'v2 changes nothing of the ClusterClass but its name');
    const v4 = ferrolRelease('v4', (t) => ({
      'cluster-class/cluster-class.yaml': (t.get('cluster-class/cluster-class.yaml') ?? '').replace(
        'nodeStartupTimeoutSeconds: 900',
        'nodeStartupTimeoutSeconds: 600',
      ),
    }));
    const r = previewRelease(input(cs, { [ferrol('v1')]: V1, [ferrol('v4')]: v4 }, ferrol('v4'), clusters));
    assert.equal(r.clusterClass.length, 1);
    assert.deepEqual(
      r.clusterClass[0]?.objects.map((o) => `${o.change} ${o.id}`),
      [`changed cluster.x-k8s.io/v1beta2 ClusterClass ${ferrol('v4')}`],
    );
    assert.match(diffText(r), /-\s+nodeStartupTimeoutSeconds: 900\n\+\s+nodeStartupTimeoutSeconds: 600/);
  });

  it('refuses a candidate of another stack', () => {
    assert.throws(
      () => previewRelease(input(cs, trees, 'docker-ferrol-1-31-v1', clusters)),
      /not a release of ClusterStack ferrol/,
    );
  });
});

describe('impactSummary: the counts status.impact carries', () => {
  const cs = clusterStack('ferrol', 'ferrol', waves);
  const clusters = fleet(ferrol('v1'));
  const sum = (r: ReturnType<typeof previewRelease>, k: 'added' | 'changed' | 'removed') =>
    r.clusters.reduce((n, c) => n + c.objects.filter((o) => o.change === k).length, 0);

  it('counts the Clusters affected and the objects of every Cluster of the preview', () => {
    const r = previewRelease(input(cs, { [ferrol('v1')]: V1, [ferrol('v2')]: V2 }, ferrol('v2'), clusters));
    const i = impactSummary(r, 'abc', now);
    assert.deepEqual(i, {
      commit: 'abc',
      computedAt: now.toISOString(),
      clusters: 6,
      clustersAffected: 6,
      objectsAdded: sum(r, 'added'),
      objectsChanged: sum(r, 'changed'),
      objectsRemoved: sum(r, 'removed'),
      clustersFailing: 0,
      renders: Object.fromEntries(r.clusters.map((c) => [`${c.namespace}/${c.name}`, c.render])),
      digest: i.digest,
    });
    assert.match(i.digest ?? '', /^sha256:[0-9a-f]{32}$/);
    assert.equal(Object.keys(i.renders ?? {}).length, 6, 'a render digest per Cluster');
    assert.ok((i.objectsChanged ?? 0) >= 18 && (i.objectsRemoved ?? 0) >= 6, JSON.stringify(i));
  });

  it('names the Clusters failing to render with their reason; they count as not affected', () => {
    const r = previewRelease(input(cs, { [ferrol('v1')]: V1, [ferrol('v3')]: V3 }, ferrol('v3'), clusters));
    const i = impactSummary(r, 'abc', now);
    assert.equal(i.clustersFailing, 2);
    assert.deepEqual(i.failing, ['team/c3: ValuesInvalid', 'team/c6: ValuesInvalid']);
    assert.equal(i.clustersAffected, 4);
  });

  it('lists at most 20 failing Clusters; the count is whole', () => {
    const r = previewRelease(input(cs, { [ferrol('v1')]: V1, [ferrol('v3')]: V3 }, ferrol('v3'), clusters));
    const failed = r.clusters.find((c) => c.outcome === 'failed');
    assert.ok(failed);
    const many = { ...r, clusters: Array.from({ length: 25 }, (_, k) => ({ ...failed, name: `f${k}` })) };
    const i = impactSummary(many, 'abc', now);
    assert.equal(i.clustersFailing, 25);
    assert.equal(i.failing?.length, 20);
    assert.equal(i.failing?.[19], 'team/f19: ValuesInvalid');
  });

  it('impactWanted: the Ready target of a Progressive stack, once per release commit', () => {
    const progressive = { ...cs, status: { latestRelease: ferrol('v2') } };
    const tag = parseReleaseTag(ferrol('v2'));
    assert.ok(tag.ok);
    const v2 = desiredRelease(progressive, tag.value);
    const ready = {
      ...v2,
      status: {
        commit: 'c2',
        conditions: [
          { type: 'Ready', status: 'True' as const, reason: 'X', message: '', lastTransitionTime: 'x' },
        ],
      },
    };
    assert.equal(impactWanted(progressive, ready), true);
    const computed = {
      ...ready,
      status: { ...ready.status, impact: { commit: 'c2', computedAt: 'x', digest: 'sha256:i1' } },
    };
    assert.equal(impactWanted(progressive, computed), false, 'computed for this commit');
    assert.equal(
      impactWanted(progressive, {
        ...computed,
        status: { ...computed.status, impact: { commit: 'c2', computedAt: 'x' } },
      }),
      true,
      'an impact without a digest (computed before approvals named one) is computed again',
    );
    assert.equal(
      impactWanted(progressive, computed, new Set(['sha256:i1'])),
      true,
      'a Cluster held against it',
    );
    assert.equal(
      impactWanted(progressive, computed, new Set(['sha256:i0'])),
      false,
      'held against an older one',
    );
    const again = recomputedImpact({ commit: 'c2', computedAt: 'y', clusters: 1 }, computed.status.impact);
    assert.equal(again.recomputed, 1);
    assert.notEqual(again.digest, undefined);
    let impact = again;
    for (let n = 1; n < 3; n++)
      impact = recomputedImpact({ commit: 'c2', computedAt: 'z', clusters: 1 }, impact);
    assert.equal(impact.recomputed, 3);
    const exhausted = { ...ready, status: { ...ready.status, impact } };
    assert.equal(
      impactWanted(progressive, exhausted, new Set([impact.digest ?? ''])),
      false,
      'a render that differs every time does not keep the impact controller busy for ever',
    );
    assert.equal(recomputedImpact(again, undefined), again, 'a first impact is not counted');
    const moved = { ...computed, status: { ...computed.status, commit: 'c3' } };
    assert.equal(impactWanted(progressive, moved), true, 'the tag moved: computed again');
    assert.equal(
      impactWanted({ ...progressive, spec: { ...cs.spec, rollout: { strategy: 'Manual' } } }, ready),
      false,
    );
    assert.equal(impactWanted({ ...progressive, status: { latestRelease: ferrol('v3') } }, ready), false);
    assert.equal(impactWanted(progressive, { ...ready, status: { ...ready.status, conditions: [] } }), false);
  });
});

describe('previewRelease: cluster-stack-operator (csctl) format', () => {
  const base = readStackDir(join(STACKS, 'docker-csoferrol-1-30'));
  const overwrite = base.get('cluster-addon/cni/overwrite.yaml') ?? '';
  const v2 = edited(base, {
    'cluster-addon/cni/overwrite.yaml': overwrite.replace('cni-config:\n', 'cni-config:\n    mtu: "1300"\n'),
    'cluster-class/values.yaml': (base.get('cluster-class/values.yaml') ?? '').replace(
      'image: kindest/node:v1.30.4',
      'image: kindest/node:v1.30.9',
    ),
  });
  const cs = clusterStack('csoferrol', 'csoferrol');
  const trees = { [cso('v1')]: base, [cso('v2')]: v2 };
  const clusters = [cluster('a', cso('v1')), cluster('b', cso('v1'))];
  const result = previewRelease(input(cs, trees, cso('v2'), clusters));

  it('renders the csctl addons at the candidate: the cni chart output changes, metrics does not', () => {
    assert.deepEqual(
      result.clusters.map((c) => [c.name, c.outcome, [...new Set(c.objects.map((o) => o.addon))]]),
      [
        ['a', 'changed', ['cni']],
        ['b', 'changed', ['cni']],
      ],
    );
    assert.ok(result.clusters[0]?.objects.every((o) => o.change === 'changed'));
    assert.match(diffText(result), /-\s+mtu: "1400"\n\+\s+mtu: "1300"/);
    assert.equal(result.groups.length, 1, 'the cluster name is in no changed line');
  });

  it('renders the csctl cluster-class chart of both releases (helm template) and shows what changes besides the name', () => {
    const d = result.clusterClass[0];
    assert.ok(d);
    assert.equal(d.failure, undefined, JSON.stringify(d.failure));
    assert.ok(d.objects.length > 0 && d.objects.every((o) => o.change === 'changed'));
    assert.match(
      diffText(result),
      /-\s+customImage: kindest\/node:v1\.30\.4\n\+\s+customImage: kindest\/node:v1\.30\.9/,
    );
  });
});

describe('parseLabelSelector (kubectl -l syntax)', () => {
  it('reads equality, inequality, set and existence terms', () => {
    assert.deepEqual(
      parseLabelSelector('tier=canary, env==prod,zone!=a,team in (x, y),role notin (db),gpu,!spot'),
      {
        matchLabels: { tier: 'canary', env: 'prod' },
        matchExpressions: [
          { key: 'zone', operator: 'NotIn', values: ['a'] },
          { key: 'team', operator: 'In', values: ['x', 'y'] },
          { key: 'role', operator: 'NotIn', values: ['db'] },
          { key: 'gpu', operator: 'Exists' },
          { key: 'spot', operator: 'DoesNotExist' },
        ],
      },
    );
  });

  it('refuses what is no label key or value', () => {
    assert.throws(() => parseLabelSelector('tier=can ary'), /not a valid label/);
    assert.throws(() => parseLabelSelector('-bad'), /not a valid label key/);
  });
});

describe('previewRelease: a Cluster moved to the candidate whose branch still holds another release (F4)', () => {
  const cs = clusterStack('ferrol', 'ferrol', waves);
  const trees = { [ferrol('v1')]: V1, [ferrol('v2')]: V2 };

  it('is previewed from the release on its branch, so an impact computed again renders a held Cluster', () => {
    const onV1 = fleet(ferrol('v1')).slice(0, 1);
    const base = input(cs, trees, ferrol('v2'), onV1);
    const [first] = base.clusters;
    assert.ok(first);
    // The rollout moved c1 (its class is v2's), its ClusterAddon still says v1: held or in flight.
    const moved = cluster('c1', ferrol('v2'), {});
    const heldAddon = {
      apiVersion: 'stackflux.io/v1alpha1' as const,
      kind: 'ClusterAddon' as const,
      metadata: { name: 'c1', namespace: NS },
      spec: { cluster: 'c1' },
      status: { release: ferrol('v1') },
    };
    const result = previewRelease({
      ...base,
      clusters: [{ ...first, cluster: moved, clusterAddon: heldAddon as never }],
    });
    assert.deepEqual(
      result.clusters.map((c) => [c.name, c.from, c.outcome]),
      [['c1', ferrol('v1'), 'changed']],
    );
    assert.ok(result.clusters[0]?.render, 'its render digest is recorded');
    const done = previewRelease({
      ...base,
      clusters: [
        {
          ...first,
          cluster: moved,
          clusterAddon: { ...heldAddon, status: { release: ferrol('v2') } } as never,
        },
      ],
    });
    assert.deepEqual(done.clusters, [], 'a Cluster whose branch holds the candidate is not moved again');
  });
});
