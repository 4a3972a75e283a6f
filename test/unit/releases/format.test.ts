// The release-format interface: the format is chosen by content, the native format reads as
// before, and a csctl stack reads into the same description type.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ReleaseTree } from '../../../controller/api/release.ts';
import {
  nativeManifestOf,
  readReleaseDescription,
  releaseFormatOf,
} from '../../../controller/releases/format.ts';
import { readRelease } from '../../../controller/releases/stack.ts';
import { releaseTag } from '../../support/release-tag.ts';

const tag = releaseTag;

const native = `apiVersion: stackflux.io/v1alpha1
kind: Stack
provider: docker
name: ferrol
kubernetesVersion: v1.30.4
version: v2
addons:
  - name: cni
    targetNamespace: kube-system
  - name: csi
`;

const csctl = `apiVersion: csctl.clusterstack.x-k8s.io/v1alpha1
config:
  kubernetesVersion: v1.30.4
  clusterStackName: ferrol
  provider:
    type: docker
    apiVersion: docker.csctl.clusterstack.x-k8s.io/v1alpha1
`;

/** SCS's next layout: a stack.yaml of SCS's own schema beside csctl.yaml. */
const scsStackYaml = `provider: docker
clusterStackName: ferrol
kubernetesVersion: v1.30.4
addons:
  cni: 1.16.x
`;

const csctlFiles: Record<string, string> = {
  'csctl.yaml': csctl,
  'cluster-class/Chart.yaml': 'apiVersion: v2\nname: cc\nversion: v1\n',
  'cluster-addon/Chart.yaml': 'apiVersion: v2\nname: addons\nversion: v1\n',
  'cluster-addon-values.yaml': 'values: |\n  a: 1\n',
};

function tree(files: Record<string, string>): ReleaseTree {
  return new Map(Object.entries(files));
}

describe('release formats are told apart by content', () => {
  it('reads a native stack.yaml tree as before, behind the interface', () => {
    const t = tree({ 'stack.yaml': native, 'cluster-class/cc.yaml': 'kind: ClusterClass\n' });
    assert.equal(releaseFormatOf(t)?.name, 'native');
    const d = readReleaseDescription(t, tag('docker-ferrol-1-30-v2'));
    assert.ok(d.ok, JSON.stringify(d));
    assert.deepEqual(nativeManifestOf(d), readRelease(t, tag('docker-ferrol-1-30-v2')));
    assert.equal(d.value.clusterClass.kind, 'yaml-folder');
    assert.equal(d.value.valuesTemplating, 'handlebars');
    assert.deepEqual(
      d.value.addons.map((a) => [a.name, a.dependsOn, a.targetNamespace, a.stage, a.content]),
      [
        ['cni', [], 'kube-system', undefined, 'files'],
        ['csi', ['cni'], undefined, undefined, 'files'],
      ],
    );
  });

  it('keeps native errors for a broken stack.yaml without csctl.yaml', () => {
    const t = tree({ 'stack.yaml': 'kind: [', 'cluster-class/cc.yaml': '' });
    const d = readReleaseDescription(t, tag('docker-ferrol-1-30-v2'));
    assert.deepEqual(d, readRelease(t, tag('docker-ferrol-1-30-v2')));
  });

  it('reads a tree with csctl.yaml and no stack.yaml as csctl', () => {
    const t = tree(csctlFiles);
    assert.equal(releaseFormatOf(t)?.name, 'csctl');
    const d = readReleaseDescription(t, tag('docker-ferrol-1-30-v2'));
    assert.ok(d.ok, JSON.stringify(d));
    assert.equal(d.value.format, 'csctl');
    assert.equal(d.value.clusterClass.kind, 'helm-chart');
    assert.equal(d.value.valuesTemplating, 'go-template');
  });

  it("reads SCS's own stack.yaml beside csctl.yaml as csctl, not native", () => {
    const t = tree({ ...csctlFiles, 'stack.yaml': scsStackYaml });
    assert.equal(releaseFormatOf(t)?.name, 'csctl');
    const d = readReleaseDescription(t, tag('docker-ferrol-1-30-v2'));
    assert.ok(d.ok, JSON.stringify(d));
    assert.equal(d.value.format, 'csctl');
  });

  it("reads stackflux's stack.yaml beside a csctl.yaml as native", () => {
    const t = tree({ ...csctlFiles, 'stack.yaml': native, 'cluster-class/cc.yaml': '' });
    assert.equal(releaseFormatOf(t)?.name, 'native');
  });

  it('says what was expected for a tree in neither format', () => {
    const t = tree({ 'README.md': 'hello' });
    assert.equal(releaseFormatOf(t), undefined);
    const d = readReleaseDescription(t, tag('docker-ferrol-1-30-v2'));
    assert.equal(d.ok, false);
    const errors = d.ok ? [] : d.errors;
    assert.ok(errors.includes('release has no stack.yaml'), JSON.stringify(errors));
    assert.ok(
      errors.some((e) => e.includes('stackflux.io/v1alpha1') && e.includes('csctl.yaml')),
      JSON.stringify(errors),
    );
  });

  it('reports a valid csctl release as not rendered yet where a stack.yaml is needed', () => {
    const r = nativeManifestOf(readReleaseDescription(tree(csctlFiles), tag('docker-ferrol-1-30-v2')));
    assert.equal(r.ok, false);
    assert.match(r.ok ? '' : (r.errors[0] ?? ''), /csctl format .* does not render yet/);
  });
});
