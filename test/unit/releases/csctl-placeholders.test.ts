// csctl's placeholders as `csctl create` substitutes them (csctl pkg/template/template.go visitFile,
// fasttemplate v1.2.2 with "<< " and " >>"): the three tags and their versions, the delimiters as
// written, left-to-right scanning, which files of a stack folder are released templated, and the
// errors for what csctl would blank or fail on.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ReleaseTree } from '../../../controller/api/release.ts';
import {
  csctlTreeAsReleased,
  readCsctlRelease,
  releasedByCsctl,
} from '../../../controller/releases/csctl/index.ts';
import {
  csctlPlaceholderErrors,
  substituteCsctlPlaceholders,
  substituteCsctlTree,
} from '../../../controller/releases/csctl/placeholders.ts';
import { releasedTree } from '../../../controller/releases/format.ts';
import { binaryFilesOf, releaseTree } from '../../../controller/releases/tree.ts';
import { releaseTag } from '../../support/release-tag.ts';

const versions = { clusterStack: 'v3', clusterAddon: 'v2', nodeImage: 'v1' };
const sub = (text: string) => substituteCsctlPlaceholders(text, versions);

describe('csctl placeholders: one text', () => {
  it('replaces the three tags with the stack, addon and node image versions', () => {
    assert.deepEqual(
      sub('cc: << .ClusterClassVersion >>\nca: << .ClusterAddonVersion >>\nni: << .NodeImageVersion >>\n'),
      { text: 'cc: v3\nca: v2\nni: v1\n', unknown: [] },
    );
  });

  it('takes the delimiters with their spaces and the tag as written', () => {
    assert.deepEqual(sub('<<.ClusterClassVersion>>'), { text: '<<.ClusterClassVersion>>', unknown: [] });
    assert.deepEqual(sub('<<  .ClusterClassVersion >>'), {
      text: '<<  .ClusterClassVersion >>',
      unknown: [' .ClusterClassVersion'],
    });
    assert.deepEqual(sub('<< .clusterClassVersion >>').unknown, ['.clusterClassVersion']);
  });

  it('ends a placeholder at the first " >>" after its "<< ": they do not nest or overlap', () => {
    assert.deepEqual(sub('<< << .ClusterClassVersion >> >>'), {
      text: '<< << .ClusterClassVersion >> >>',
      unknown: ['<< .ClusterClassVersion'],
    });
    // The space of "<< " is not the space of " >>".
    assert.equal(sub('<< >>').unterminatedAt, 0);
    assert.deepEqual(sub('<< .ClusterClassVersion>> << .NodeImageVersion >>').unknown, [
      '.ClusterClassVersion>> << .NodeImageVersion',
    ]);
  });

  it('names each unknown tag once, in order, and leaves it as written', () => {
    const scan = sub('<< .B >> << .ClusterClassVersion >> << .A >> << .B >>');
    assert.deepEqual(scan, { text: '<< .B >> v3 << .A >> << .B >>', unknown: ['.B', '.A'] });
  });

  it('reports a "<< " with no " >>" after it, where csctl fails', () => {
    const scan = sub('v: << .ClusterClassVersion >>\ncat << EOF\n');
    assert.equal(scan.unterminatedAt, 34);
    assert.equal(scan.text, 'v: v3\ncat << EOF\n');
  });

  it('only scans without versions, and returns a text without "<< " as it is', () => {
    assert.deepEqual(substituteCsctlPlaceholders('x: << .ClusterClassVersion >>'), {
      text: 'x: << .ClusterClassVersion >>',
      unknown: [],
    });
    assert.deepEqual(sub('a <<b>> c >> d'), { text: 'a <<b>> c >> d', unknown: [] });
  });
});

/** A stack folder shaped like cluster-stacks' openstack-alpha-1-29-v3 (old layout, placeholders). */
function umbrellaSource(extra: Record<string, string> = {}): ReleaseTree {
  return new Map(
    Object.entries({
      'csctl.yaml':
        'apiVersion: csctl.clusterstack.x-k8s.io/v1alpha1\nconfig:\n  kubernetesVersion: v1.30.10\n  clusterStackName: scs\n  provider:\n    type: docker\n',
      'cluster-class/Chart.yaml': 'apiVersion: v2\nname: cc\nversion: << .ClusterClassVersion >>\n',
      'cluster-addon/Chart.yaml': 'apiVersion: v2\nname: ca\nversion: << .ClusterAddonVersion >>\n',
      'cluster-addon-values.yaml': 'values: |\n  image: node-<< .NodeImageVersion >>\n',
      'metadata.yaml': 'clusterStack: << .ClusterClassVersion >>\n',
      'README.md': 'see << .Docs >>\n',
      ...extra,
    }),
  );
}

describe('csctl placeholders: a stack folder as csctl create releases it', () => {
  const tag = releaseTag('docker-scs-1-30-v3');

  it('substitutes in cluster-class/, cluster-addon/ and the old layout cluster-addon-values.yaml only', () => {
    const released = csctlTreeAsReleased(umbrellaSource(), tag);
    assert.equal(released.get('cluster-class/Chart.yaml'), 'apiVersion: v2\nname: cc\nversion: v3\n');
    assert.equal(released.get('cluster-addon/Chart.yaml'), 'apiVersion: v2\nname: ca\nversion: v3\n');
    assert.equal(released.get('cluster-addon-values.yaml'), 'values: |\n  image: node-v3\n');
    // Not released (csctl writes its own metadata.yaml), or not templated.
    assert.equal(released.get('metadata.yaml'), 'clusterStack: << .ClusterClassVersion >>\n');
    assert.equal(released.get('README.md'), 'see << .Docs >>\n');
  });

  it('leaves clusteraddon.yaml as written (csctl copies it untemplated) and the stages layout values file', () => {
    const stages = umbrellaSource({
      'clusteraddon.yaml': 'clusterAddonVersion: << .ClusterAddonVersion >>\naddonStages: {}\n',
      'cluster-addon/cni/Chart.yaml': 'apiVersion: v2\nname: cni\nversion: << .ClusterAddonVersion >>\n',
    });
    const released = csctlTreeAsReleased(stages, tag);
    assert.equal(released.get('clusteraddon.yaml'), stages.get('clusteraddon.yaml'));
    assert.equal(released.get('cluster-addon-values.yaml'), stages.get('cluster-addon-values.yaml'));
    assert.equal(released.get('cluster-addon/cni/Chart.yaml'), 'apiVersion: v2\nname: cni\nversion: v3\n');
    assert.equal(releasedByCsctl(stages)('cluster-addon-values.yaml'), false);
    assert.equal(releasedByCsctl(umbrellaSource())('cluster-addon-values.yaml'), true);
  });

  it('gives the addon and node image the hash-mode version of a custom channel tag (dot form)', () => {
    const released = csctlTreeAsReleased(umbrellaSource(), releaseTag('docker-scs-1-30-v0-sha-b08777e'));
    assert.equal(
      released.get('cluster-class/Chart.yaml'),
      'apiVersion: v2\nname: cc\nversion: v0-sha.b08777e\n',
    );
    assert.equal(released.get('cluster-addon-values.yaml'), 'values: |\n  image: node-v0-sha.b08777e\n');
  });

  it('substitutes in binary files byte for byte, and keeps the same objects where nothing changes', () => {
    const archive = Buffer.concat([
      Buffer.from([0x1f, 0x8b, 0xff]),
      Buffer.from('<< .ClusterClassVersion >>'),
      Buffer.from([0xfe]),
    ]);
    const plain = Buffer.from([0x1f, 0x8b, 0xff, 0x00]);
    const tree = releaseTree(
      umbrellaSource(),
      new Map([
        ['cluster-addon/charts/a.tgz', archive],
        ['cluster-addon/charts/b.tgz', plain],
        ['node-images/x.bin', archive],
      ]),
    );
    const binary = binaryFilesOf(csctlTreeAsReleased(tree, tag));
    assert.deepEqual(
      binary.get('cluster-addon/charts/a.tgz'),
      Buffer.from([0x1f, 0x8b, 0xff, 0x76, 0x33, 0xfe]),
    );
    assert.equal(binary.get('cluster-addon/charts/b.tgz'), plain);
    assert.equal(binary.get('node-images/x.bin'), archive);

    const nothingToDo = new Map(
      [...umbrellaSource()].filter(
        ([p]) => p !== 'cluster-class/Chart.yaml' && !p.startsWith('cluster-addon'),
      ),
    );
    assert.equal(csctlTreeAsReleased(nothingToDo, tag), nothingToDo);
    const unknownOnly = new Map([
      ['a.yaml', 'see << .Docs >>'],
      ['b.yaml', 'plain'],
    ]);
    assert.equal(
      substituteCsctlTree(unknownOnly, versions, () => true),
      unknownOnly,
    );
  });

  it('leaves a packaged release (no csctl.yaml) and a native stack as they are', () => {
    const packaged = new Map([...umbrellaSource()].filter(([p]) => p !== 'csctl.yaml'));
    assert.equal(csctlTreeAsReleased(packaged, tag), packaged);
    const native = umbrellaSource({
      'stack.yaml':
        'apiVersion: stackflux.io/v1alpha1\nkind: Stack\nprovider: docker\nname: scs\nkubernetesVersion: v1.30.10\nversion: v3\naddons: []\n',
    });
    assert.equal(releasedTree(native, 'docker-scs-1-30-v3'), native);
    const source = umbrellaSource();
    assert.equal(releasedTree(source, 'not-a-release-tag'), source);
    assert.notEqual(releasedTree(source, 'docker-scs-1-30-v3'), source);
  });
});

describe('csctl placeholders: what csctl would blank or fail on is refused', () => {
  const tag = releaseTag('docker-scs-1-30-v3');
  const errorsOf = (tree: ReleaseTree): string[] => {
    const r = readCsctlRelease(csctlTreeAsReleased(tree, tag), tag);
    assert.equal(r.ok, false, 'expected errors');
    return r.ok ? [] : r.errors;
  };

  it('reads the released folder of a placeholder stack without errors', () => {
    const r = readCsctlRelease(csctlTreeAsReleased(umbrellaSource(), tag), tag);
    assert.ok(r.ok, JSON.stringify(r));
  });

  it('names the file and the placeholder csctl does not know, in the files it releases', () => {
    assert.deepEqual(
      errorsOf(
        umbrellaSource({ 'cluster-class/templates/x.yaml': 'v: << .ClusterStackVersion >> << .X >>\n' }),
      ),
      [
        'cluster-class/templates/x.yaml: placeholders "<< .ClusterStackVersion >>", "<< .X >>" are not ones csctl substitutes (<< .ClusterClassVersion >>, << .ClusterAddonVersion >>, << .NodeImageVersion >>); csctl would write nothing in their place',
      ],
    );
    assert.deepEqual(errorsOf(umbrellaSource({ 'cluster-addon-values.yaml': 'values: << .Values >>\n' })), [
      'cluster-addon-values.yaml: placeholder "<< .Values >>" is not one csctl substitutes (<< .ClusterClassVersion >>, << .ClusterAddonVersion >>, << .NodeImageVersion >>); csctl would write nothing in its place',
    ]);
  });

  it('names a "<< " without " >>" in any file of the folder: csctl create fails on it', () => {
    assert.deepEqual(errorsOf(umbrellaSource({ 'node-images/build.sh': 'cat << EOF\nx\nEOF\n' })), [
      'node-images/build.sh: "<< " with no " >>" after it (offset 4): csctl\'s placeholder templating fails on it, so csctl cannot package this stack',
    ]);
  });

  it('names an unknown tag in a released binary file with its bytes escaped', () => {
    const tree = releaseTree(
      umbrellaSource(),
      new Map([
        ['cluster-addon/charts/a.tgz', Buffer.from([0xff, 0x3c, 0x3c, 0x20, 0x01, 0xe9, 0x20, 0x3e, 0x3e])],
      ]),
    );
    const errors = errorsOf(tree);
    assert.equal(errors.length, 1);
    assert.match(
      errors[0] ?? '',
      /^cluster-addon\/charts\/a\.tgz: placeholder "<< \\u0001\\u00e9 >>" is not one csctl substitutes/,
    );
  });

  it('does not look at placeholders of a packaged release: csctl already substituted what it knew', () => {
    const packaged = new Map(
      [...csctlTreeAsReleased(umbrellaSource(), tag)].filter(([p]) => p !== 'csctl.yaml'),
    );
    packaged.set(
      'metadata.yaml',
      'apiVersion: metadata.clusterstack.x-k8s.io/v1alpha1\nversions:\n  clusterStack: v3\n  kubernetes: v1.30.10\n  components:\n    clusterAddon: v3\n',
    );
    packaged.set('cluster-class/templates/x.yaml', 'v: << .X >> << oops\n');
    const r = readCsctlRelease(packaged, tag);
    assert.ok(r.ok, JSON.stringify(r));
    assert.deepEqual(
      csctlPlaceholderErrors(new Map([['README.md', 'see << .X >>']]), () => false),
      [],
    );
  });
});
