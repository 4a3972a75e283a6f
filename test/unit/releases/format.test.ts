// The release-format interface: the format is chosen by content, the native format reads as
// before, and a csctl stack reads into the same description type.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { ReleaseTree } from '../../../controller/api/release.ts';
import { csctlFormat } from '../../../controller/releases/csctl/index.ts';
import {
  nativeManifestOf,
  RELEASE_FORMATS,
  readReleaseDescription,
  releaseFormatOf,
} from '../../../controller/releases/format.ts';
import { nativeFormat } from '../../../controller/releases/native.ts';
import { readRelease } from '../../../controller/releases/stack.ts';
import { readImportGraph } from '../../../hack/lib/importcycles.ts';
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

/** A release csctl packaged (assets): metadata.yaml and the cluster-class chart, no csctl.yaml. */
const packagedFiles: Record<string, string> = {
  'metadata.yaml': [
    'apiVersion: metadata.clusterstack.x-k8s.io/v1alpha1',
    'versions:',
    '  clusterStack: v2',
    '  kubernetes: v1.30.4',
    '  components:',
    '    clusterAddon: v1',
    '    nodeImage: v2',
    '',
  ].join('\n'),
  'cluster-class/Chart.yaml': 'apiVersion: v2\nname: cc\nversion: v2\n',
  'cluster-addon/Chart.yaml': 'apiVersion: v2\nname: addons\nversion: v1\n',
  'cluster-addon-values.yaml': 'values: |\n  a: 1\n',
};

describe('the registry picks the format; each format looks at its own files only', () => {
  it('lists native first, then csctl', () => {
    assert.deepEqual(
      RELEASE_FORMATS.map((f) => f.name),
      ['native', 'csctl'],
    );
  });

  it('has each format claim a tree by its own files, certain or possible', () => {
    const claims = (files: Record<string, string>) => [
      nativeFormat.claims(tree(files)),
      csctlFormat.claims(tree(files)),
    ];
    assert.deepEqual(claims({ 'stack.yaml': native }), ['certain', undefined]);
    assert.deepEqual(claims({ 'stack.yaml': 'kind: [' }), ['possible', undefined]);
    assert.deepEqual(claims(csctlFiles), [undefined, 'certain']);
    assert.deepEqual(claims({ ...csctlFiles, 'stack.yaml': scsStackYaml }), ['possible', 'certain']);
    assert.deepEqual(claims({ ...csctlFiles, 'stack.yaml': native }), ['certain', 'certain']);
    assert.deepEqual(claims(packagedFiles), [undefined, 'possible']);
    assert.deepEqual(claims({ ...packagedFiles, 'stack.yaml': scsStackYaml }), ['possible', 'possible']);
    assert.deepEqual(claims({ 'README.md': 'hello' }), [undefined, undefined]);
  });

  it('picks the format as when native knew of csctl.yaml: a stack.yaml without csctl.yaml is native', () => {
    const formatOf = (files: Record<string, string>) => releaseFormatOf(tree(files))?.name;
    assert.equal(formatOf(packagedFiles), 'csctl');
    const packaged = readReleaseDescription(tree(packagedFiles), tag('docker-ferrol-1-30-v2'));
    assert.ok(packaged.ok, JSON.stringify(packaged));
    assert.equal(packaged.value.format, 'csctl');
    // Beside a packaged release's metadata.yaml, any stack.yaml is read as native, as it was.
    assert.equal(formatOf({ ...packagedFiles, 'stack.yaml': scsStackYaml }), 'native');
    assert.equal(formatOf({ ...packagedFiles, 'stack.yaml': native }), 'native');
    assert.equal(formatOf({ 'stack.yaml': scsStackYaml }), 'native');
  });

  it('keeps the interface below the formats, and neither format reaching the other or the registry', () => {
    const releases = join(import.meta.dirname, '..', '..', '..', 'controller', 'releases');
    const graph = readImportGraph(releases);
    // Followed through files outside releases/ too (csctl/assets.ts imports sources/contract.ts).
    const reachable = (...from: string[]): string[] => {
      const seen = new Set<string>();
      const pending = from.map((f) => join(releases, f));
      for (let file = pending.pop(); file !== undefined; file = pending.pop())
        for (const to of graph.get(file) ?? [])
          if (!seen.has(to)) {
            seen.add(to);
            pending.push(to);
          }
      return [...seen]
        .filter((f) => f.startsWith(`${releases}/`))
        .map((f) => f.slice(releases.length + 1))
        .sort();
    };
    assert.deepEqual(reachable('description.ts'), ['tags.ts']);
    assert.deepEqual(
      reachable('native.ts').filter((f) => f === 'format.ts' || f.startsWith('csctl/')),
      [],
    );
    assert.deepEqual(
      reachable('csctl/index.ts', 'csctl/assets.ts').filter((f) =>
        ['format.ts', 'native.ts', 'stack.ts'].includes(f),
      ),
      [],
    );
  });
});
