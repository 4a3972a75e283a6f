// The csctl (cluster-stack-operator) release format, read as csctl and CSO read it: both addon
// layouts, stage order and actions, the tag checks, missing files, and Go-yaml leniency.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import type { ReleaseTree } from '../../../controller/api/release.ts';
import {
  parseClusterAddonConfig,
  parseCsctlConfig,
  readCsctlRelease,
} from '../../../controller/releases/csctl/index.ts';
import type { StackDescription } from '../../../controller/releases/description.ts';
import { releaseTree } from '../../../controller/releases/tree.ts';
import { releaseTag } from '../../support/release-tag.ts';

const tag = releaseTag;

const csctlYaml = (
  k8s = 'v1.30.10',
  name = 'scs',
  provider = 'docker',
) => `apiVersion: csctl.clusterstack.x-k8s.io/v1alpha1
config:
  kubernetesVersion: ${k8s}
  clusterStackName: ${name}
  provider:
    type: ${provider}
    apiVersion: docker.csctl.clusterstack.x-k8s.io/v1alpha1
    config:
      anything: goes
`;

const clusterAddonYaml = `apiVersion: clusteraddonconfig.x-k8s.io/v1alpha1
clusterAddonVersion: clusteraddons.clusterstack.x-k8s.io/v1alpha1
addonStages:
  AfterControlPlaneInitialized:
    - name: cni
      action: apply
    - name: metrics
      action: apply
      waitForPostCondition:
        objects:
          - key: deploy
            apiVersion: apps/v1
            kind: Deployment
            name: metrics-server
            namespace: kube-system
        conditions: deploy.status.readyReplicas == 1
  BeforeClusterUpgrade:
    - name: metrics
      action: delete
    - name: cni
      action: apply
`;

/** A stack of the new layout as csctl expects it, with a vendored subchart (binary). */
function stagesStack(extra: Record<string, string> = {}, drop: string[] = []): ReleaseTree {
  const text = new Map<string, string>(
    Object.entries({
      'csctl.yaml': csctlYaml(),
      'clusteraddon.yaml': clusterAddonYaml,
      'cluster-class/Chart.yaml': 'apiVersion: v2\nname: docker-scs-1-30-cluster-class\nversion: v1\n',
      'cluster-class/values.yaml': 'images: {}\n',
      'cluster-class/templates/_helpers.tpl': '{{- define "cc.name" -}}{{ .Release.Name }}{{- end -}}\n',
      'cluster-class/templates/cluster-class.yaml':
        'kind: ClusterClass\nmetadata:\n  name: {{ include "cc.name" . }}\n',
      'cluster-addon/cni/Chart.yaml':
        'apiVersion: v2\nname: cni\nversion: v1\ndependencies:\n  - name: cilium\n    version: 1.0.0\n',
      'cluster-addon/cni/values.yaml': '',
      'cluster-addon/cni/overwrite.yaml':
        'values: |\n  cilium:\n    cluster:\n      name: {{ .Cluster.metadata.name | quote }}\n',
      'cluster-addon/metrics/Chart.yaml': 'apiVersion: v2\nname: metrics\nversion: v1\n',
      ...extra,
    }).filter(([p]) => !drop.includes(p)),
  );
  return releaseTree(text, new Map([['cluster-addon/cni/charts/cilium-1.0.0.tgz', gzipSync('chart')]]));
}

function read(tree: ReleaseTree, t = 'docker-scs-1-30-v3') {
  return readCsctlRelease(tree, tag(t));
}

function errorsOf(tree: ReleaseTree, t?: string): string[] {
  const r = read(tree, t);
  assert.equal(r.ok, false, 'expected errors');
  return r.ok ? [] : r.errors;
}

function described(tree: ReleaseTree, t?: string): StackDescription {
  const r = read(tree, t);
  assert.ok(r.ok, JSON.stringify(r));
  return r.value;
}

describe('csctl release: stages layout', () => {
  it('describes provider, name, Kubernetes version from csctl.yaml and the version from the tag', () => {
    const d = described(stagesStack());
    assert.deepEqual(
      { format: d.format, provider: d.provider, name: d.name, k8s: d.kubernetesVersion, version: d.version },
      { format: 'csctl', provider: 'docker', name: 'scs', k8s: 'v1.30.10', version: 'v3' },
    );
    assert.deepEqual(d.clusterClass, { kind: 'helm-chart', path: 'cluster-class/' });
    assert.equal(d.valuesTemplating, 'go-template');
    assert.deepEqual(d.csctl, {
      layout: 'stages',
      apiVersion: 'csctl.clusterstack.x-k8s.io/v1alpha1',
      metadata: {
        apiVersion: 'metadata.clusterstack.x-k8s.io/v1alpha1',
        clusterStack: 'v3',
        kubernetes: 'v1.30.10',
        clusterAddon: 'v3',
        nodeImage: 'v3',
      },
    });
  });

  it('lists the steps in stage order, each after the previous entry of its stage, into kube-system', () => {
    const d = described(stagesStack());
    assert.deepEqual(
      d.addons.map((a) => [
        a.stage,
        a.name,
        a.action,
        a.dependsOn,
        a.targetNamespace,
        a.path,
        a.valuesTemplate,
      ]),
      [
        [
          'AfterControlPlaneInitialized',
          'cni',
          'apply',
          [],
          'kube-system',
          'cluster-addon/cni/',
          'cluster-addon/cni/overwrite.yaml',
        ],
        [
          'AfterControlPlaneInitialized',
          'metrics',
          'apply',
          ['cni'],
          'kube-system',
          'cluster-addon/metrics/',
          undefined,
        ],
        ['BeforeClusterUpgrade', 'metrics', 'delete', [], 'kube-system', 'cluster-addon/metrics/', undefined],
        [
          'BeforeClusterUpgrade',
          'cni',
          'apply',
          ['metrics'],
          'kube-system',
          'cluster-addon/cni/',
          'cluster-addon/cni/overwrite.yaml',
        ],
      ],
    );
  });

  it('carries the CEL conditions of a stage entry', () => {
    const metrics = described(stagesStack()).addons[1];
    assert.deepEqual(metrics?.waitForPostCondition, {
      objects: [
        {
          key: 'deploy',
          apiVersion: 'apps/v1',
          kind: 'Deployment',
          name: 'metrics-server',
          namespace: 'kube-system',
        },
      ],
      conditions: 'deploy.status.readyReplicas == 1',
    });
    assert.equal(metrics?.waitForPreCondition, undefined);
  });

  it('keeps the vendored charts as bytes beside the text files', () => {
    const t = stagesStack();
    assert.equal(t.has('cluster-addon/cni/charts/cilium-1.0.0.tgz'), false);
    assert.deepEqual(t.binary?.get('cluster-addon/cni/charts/cilium-1.0.0.tgz'), gzipSync('chart'));
  });

  it('uses clusteraddon.yaml, not a cluster-addon-values.yaml beside it (as CSO does)', () => {
    const d = described(stagesStack({ 'cluster-addon-values.yaml': 'values: |\n  x: 1\n' }));
    assert.equal(d.csctl?.layout, 'stages');
    assert.ok(d.addons.every((a) => a.valuesTemplate !== 'cluster-addon-values.yaml'));
  });

  it("reads SCS's next-layout stack.yaml beside csctl.yaml without looking at it", () => {
    const d = described(
      stagesStack({ 'stack.yaml': 'provider: docker\nclusterStackName: scs\naddons:\n  cni: 1.x\n' }),
    );
    assert.equal(d.addons.length, 4);
  });

  it("ignores a stack folder's metadata.yaml, as csctl create does: the release's is csctl's own", () => {
    const metadata = (v: string, k: string) =>
      `apiVersion: metadata.clusterstack.x-k8s.io/v1alpha1\nversions:\n  clusterStack: ${v}\n  kubernetes: ${k}\n  components:\n    clusterAddon: v2\n    nodeImage: v1\n`;
    for (const stale of [metadata('v2', 'v1.30.9'), 'versions: [not, a, mapping]\n', '{ unclosed']) {
      const d = described(stagesStack({ 'metadata.yaml': stale }));
      assert.deepEqual(d.csctl?.metadata, {
        apiVersion: 'metadata.clusterstack.x-k8s.io/v1alpha1',
        clusterStack: 'v3',
        kubernetes: 'v1.30.10',
        clusterAddon: 'v3',
        nodeImage: 'v3',
      });
    }
  });

  it('takes a hash-mode version from the tag, for the addon and node image too (csctl hash mode)', () => {
    const d = described(stagesStack(), 'docker-scs-1-30-v0-sha-abc1234');
    assert.equal(d.version, 'v0-sha.abc1234');
    assert.deepEqual(
      [d.csctl?.metadata?.clusterStack, d.csctl?.metadata?.clusterAddon, d.csctl?.metadata?.nodeImage],
      ['v0-sha.abc1234', 'v0-sha.abc1234', 'v0-sha.abc1234'],
    );
  });
});

describe('csctl release: old umbrella layout', () => {
  const umbrella = (drop: string[] = []): ReleaseTree =>
    new Map(
      Object.entries({
        'csctl.yaml': csctlYaml(),
        'cluster-class/Chart.yaml': 'apiVersion: v2\nname: cc\nversion: v1\n',
        'cluster-addon/Chart.yaml': 'apiVersion: v2\nname: cluster-addon\nversion: v1\n',
        'cluster-addon-values.yaml': 'values: |\n  cni:\n    name: {{ .Cluster.metadata.name }}\n',
      }).filter(([p]) => !drop.includes(p)),
    );

  it('is one chart cluster-addon/ with cluster-addon-values.yaml, into kube-system, without stages', () => {
    const d = described(umbrella());
    assert.equal(d.csctl?.layout, 'umbrella');
    assert.deepEqual(d.addons, [
      {
        name: 'cluster-addon',
        action: 'apply',
        dependsOn: [],
        targetNamespace: 'kube-system',
        path: 'cluster-addon/',
        content: 'helm-chart',
        valuesTemplate: 'cluster-addon-values.yaml',
      },
    ]);
  });

  it('names the missing umbrella chart and values file', () => {
    const errors = errorsOf(umbrella(['cluster-addon/Chart.yaml', 'cluster-addon-values.yaml']));
    assert.equal(errors.length, 2);
    assert.match(errors[0] ?? '', /^release has no cluster-addon\/Chart.yaml/);
    assert.match(errors[1] ?? '', /^release has no cluster-addon-values.yaml/);
  });
});

describe('csctl release: checks', () => {
  it('names each csctl.yaml field that does not match the tag, all at once', () => {
    const errors = errorsOf(
      new Map([...stagesStack(), ['csctl.yaml', csctlYaml('v1.31.2', 'ferrol', 'openstack')]]),
    );
    assert.deepEqual(errors, [
      'csctl.yaml: config.provider.type "openstack" does not match the tag\'s provider docker',
      'csctl.yaml: config.clusterStackName "ferrol" does not match the tag\'s name scs',
      'csctl.yaml: config.kubernetesVersion "v1.31.2" does not match the tag\'s Kubernetes 1.30',
    ]);
  });

  it("applies csctl's own checks of csctl.yaml", () => {
    const r = parseCsctlConfig('config:\n  kubernetesVersion: 1.30\n  provider:\n    type: Docker_1\n');
    assert.deepEqual(r.ok ? [] : r.errors, [
      'csctl.yaml: config.provider.type "Docker_1" must be lower-case letters, digits and "-" (at most 253)',
      'csctl.yaml: config.clusterStackName must not be empty',
      'csctl.yaml: config.kubernetesVersion "1.30" is not a full version like v1.30.10',
    ]);
  });

  it('names missing files and stage entries without a chart, all at once', () => {
    const errors = errorsOf(
      stagesStack(
        {
          'clusteraddon.yaml':
            'addonStages:\n  AfterControlPlaneInitialized:\n    - name: cni\n      action: apply\n    - name: csi\n      action: apply\n    - name: ../x\n      action: apply\n',
        },
        ['csctl.yaml', 'cluster-class/Chart.yaml'],
      ),
    );
    assert.deepEqual(errors, [
      'release has no csctl.yaml',
      "release has no cluster-class/Chart.yaml: a csctl stack's cluster-class is a Helm chart",
      'clusteraddon.yaml: addonStages.AfterControlPlaneInitialized[1].name "csi": cluster-addon/csi/Chart.yaml is missing (each stage entry names a Helm chart in cluster-addon/)',
      'clusteraddon.yaml: addonStages.AfterControlPlaneInitialized[2].name "../x" must be the name of a folder in cluster-addon/',
    ]);
  });

  it('refuses an action other than apply or delete, and a repeated entry', () => {
    const r = parseClusterAddonConfig(
      'addonStages:\n  BeforeClusterUpgrade:\n    - name: cni\n      action: Apply\n    - name: csi\n    - name: x\n      action: apply\n    - name: x\n      action: apply\n',
    );
    assert.deepEqual(r.ok ? [] : r.errors, [
      'clusteraddon.yaml: addonStages.BeforeClusterUpgrade[0].action "Apply" must be apply or delete',
      'clusteraddon.yaml: addonStages.BeforeClusterUpgrade[1].action "" must be apply or delete',
      'clusteraddon.yaml: addonStages.BeforeClusterUpgrade[3] repeats x with action apply in BeforeClusterUpgrade',
    ]);
  });
});

describe('csctl files are read as Go yaml.v3 fills structs', () => {
  it('ignores unknown fields and stages CSO does not run', () => {
    const r = parseClusterAddonConfig(
      'extra: 1\naddonStages:\n  AfterClusterUpgrade:\n    - name: later\n      action: apply\n  AfterControlPlaneInitialized:\n    - name: cni\n      action: apply\n      unknown: [1, 2]\n',
    );
    assert.ok(r.ok, JSON.stringify(r));
    assert.deepEqual(r.value.addonStages, {
      AfterControlPlaneInitialized: [{ name: 'cni', action: 'apply' }],
      BeforeClusterUpgrade: [],
    });
  });

  it('takes a scalar for a string field as written', () => {
    const r = parseCsctlConfig(
      'config:\n  kubernetesVersion: v1.30.1\n  clusterStackName: 007\n  provider:\n    type: docker\n',
    );
    assert.ok(r.ok, JSON.stringify(r));
    assert.equal(r.value.clusterStackName, '007');
  });

  it('refuses a wrong shape, a duplicate key and invalid YAML, naming the field', () => {
    const shape = parseCsctlConfig('config:\n  kubernetesVersion: [v1]\n  provider: docker\n');
    assert.deepEqual(shape.ok ? [] : shape.errors, [
      'csctl.yaml: config.provider must be a mapping',
      'csctl.yaml: config.kubernetesVersion must be a string',
    ]);
    const dup = parseCsctlConfig('config: {}\nconfig: {}\n');
    assert.match(dup.ok ? '' : (dup.errors[0] ?? ''), /^csctl\.yaml: invalid YAML: .*unique/i);
    const list = parseClusterAddonConfig('- a\n');
    assert.deepEqual(list.ok ? [] : list.errors, ['clusteraddon.yaml: the document must be a mapping']);
  });

  it('follows aliases, but not a billion of them', () => {
    const ok = parseClusterAddonConfig(
      'x: &s\n  - name: cni\n    action: apply\naddonStages:\n  AfterControlPlaneInitialized: *s\n  BeforeClusterUpgrade: *s\n',
    );
    assert.ok(ok.ok, JSON.stringify(ok));
    assert.equal(ok.value.addonStages.BeforeClusterUpgrade.length, 1);
    const entries = Array.from({ length: 200 }, () => '    - *e').join('\n');
    const bomb = parseClusterAddonConfig(
      `x: &e\n  name: cni\n  action: apply\naddonStages:\n  AfterControlPlaneInitialized:\n${entries}\n`,
    );
    assert.equal(bomb.ok, false);
    assert.ok((bomb.ok ? [] : bomb.errors).includes('clusteraddon.yaml: more than 100 alias expansions'));
  });
});
