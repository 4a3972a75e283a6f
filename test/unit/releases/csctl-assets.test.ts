// csctl release assets as hostile input: releaseTreeFromCsctlAssets (and the tar reader under it)
// refuses links, devices, escaping paths, gzip bombs, too many entries, unknown or missing assets
// and archive names that do not carry metadata.yaml's versions, naming the asset each time; and a
// packaged release is read by the csctl format from its metadata.yaml, checked against the tag.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { gunzipSync, gzipSync } from 'node:zlib';
import { isCsctlAssetSet, releaseTreeFromCsctlAssets } from '../../../controller/releases/csctl/assets.ts';
import { readReleaseDescription } from '../../../controller/releases/format.ts';
import { readTarGz, TarError } from '../../../controller/releases/tarball.ts';
import { SourceError } from '../../../controller/sources/contract.ts';
import { header } from '../../../hack/build-stack-charts.ts';
import { releaseTag } from '../../support/release-tag.ts';

type Entry = { path: string; content?: string; type?: string; link?: string };

function tgz(entries: Entry[], trailer = true): Buffer {
  const blocks: Buffer[] = [];
  for (const e of entries) {
    const body = Buffer.from(e.content ?? '');
    blocks.push(header(e.path, body.length, e.type ?? '0', e.link ?? ''), body);
    blocks.push(Buffer.alloc((512 - (body.length % 512)) % 512));
  }
  if (trailer) blocks.push(Buffer.alloc(1024));
  return gzipSync(Buffer.concat(blocks));
}

const METADATA = [
  'apiVersion: metadata.clusterstack.x-k8s.io/v1alpha1',
  'versions:',
  '  clusterStack: v2',
  '  kubernetes: v1.30.4',
  '  components:',
  '    clusterAddon: v1',
  '    nodeImage: v2',
  '',
].join('\n');
const CLASS = 'docker-ferrol-1-30-cluster-class-v2.tgz';
const ADDON = 'docker-ferrol-1-30-cluster-addon-v1.tgz';
const classChart = (extra: Entry[] = []) =>
  tgz([
    {
      path: 'docker-ferrol-1-30-cluster-class/Chart.yaml',
      content: 'apiVersion: v2\nname: x\nversion: v2\n',
    },
    { path: 'docker-ferrol-1-30-cluster-class/templates/a.yaml', content: 'kind: ConfigMap\n' },
    ...extra,
  ]);
const addonTar = (extra: Entry[] = []) =>
  tgz([
    { path: 'cni', type: '5' },
    { path: 'cni/Chart.yaml', content: 'apiVersion: v2\nname: cni\nversion: v1\n' },
    ...extra,
  ]);

function assets(over: Record<string, Buffer | undefined> = {}): Map<string, Uint8Array> {
  const all: Record<string, Buffer | undefined> = {
    'metadata.yaml': Buffer.from(METADATA),
    'hashes.json': Buffer.from('{}'),
    'clusteraddon.yaml': Buffer.from('apiVersion: x\naddonStages: {}\n'),
    [CLASS]: classChart(),
    [ADDON]: addonTar(),
    ...over,
  };
  return new Map(Object.entries(all).filter((e): e is [string, Buffer] => e[1] !== undefined));
}

function refused(
  a: Map<string, Uint8Array>,
  pattern: RegExp,
  limits?: { maxFiles: number; maxBytes: number },
) {
  assert.throws(
    () => releaseTreeFromCsctlAssets(a, limits),
    (err: unknown) => {
      assert.ok(err instanceof SourceError, String(err));
      assert.equal(err.reason, 'InvalidRelease');
      assert.match(err.message, pattern);
      return true;
    },
  );
}

describe('releaseTreeFromCsctlAssets', () => {
  it('lays the assets out as the stack source: cluster-class/, cluster-addon/, files at the root', () => {
    const tree = releaseTreeFromCsctlAssets(assets());
    assert.deepEqual([...tree.keys()].sort(), [
      'cluster-addon/cni/Chart.yaml',
      'cluster-class/Chart.yaml',
      'cluster-class/templates/a.yaml',
      'clusteraddon.yaml',
      'hashes.json',
      'metadata.yaml',
    ]);
  });

  it('the old layout: the cluster-addon archive is a Helm package, its top folder dropped', () => {
    const umbrella = tgz([{ path: 'docker-ferrol-1-30-cluster-addon/Chart.yaml', content: 'name: u\n' }]);
    const tree = releaseTreeFromCsctlAssets(
      assets({
        'clusteraddon.yaml': undefined,
        'cluster-addon-values.yaml': Buffer.from('values: ""\n'),
        [ADDON]: umbrella,
      }),
    );
    assert.equal(tree.get('cluster-addon/Chart.yaml'), 'name: u\n');
    assert.ok(tree.has('cluster-addon-values.yaml'));
  });

  it('refuses symbolic links, hard links and devices, naming the asset and the entry', () => {
    refused(
      assets({ [ADDON]: addonTar([{ path: 'cni/evil', type: '2', link: '/etc/passwd' }]) }),
      new RegExp(`${ADDON}: entry "cni/evil" is a symbolic link`),
    );
    refused(
      assets({ [ADDON]: addonTar([{ path: 'cni/hard', type: '1', link: 'cni/Chart.yaml' }]) }),
      /is a hard link/,
    );
    refused(
      assets({ [CLASS]: classChart([{ path: 'docker-ferrol-1-30-cluster-class/dev', type: '3' }]) }),
      new RegExp(`${CLASS}: entry "docker-ferrol-1-30-cluster-class/dev" is a character device`),
    );
  });

  it('refuses paths that escape or are not plain, and an entry given twice', () => {
    refused(
      assets({ [ADDON]: addonTar([{ path: '../escape.yaml', content: 'x' }]) }),
      new RegExp(`${ADDON}: entry path "../escape.yaml" has a ".." component`),
    );
    refused(assets({ [ADDON]: addonTar([{ path: '/etc/x', content: 'x' }]) }), /is absolute/);
    refused(assets({ [ADDON]: addonTar([{ path: 'cni/.git/config', content: 'x' }]) }), /".git" component/);
    refused(
      assets({ [ADDON]: addonTar([{ path: 'cni/Chart.yaml', content: 'again' }]) }),
      /"cni\/Chart.yaml" appears twice/,
    );
    refused(
      assets({ [ADDON]: addonTar([{ path: 'cni/Chart.yaml/x', content: 'x' }]) }),
      /below "cni\/Chart.yaml", which is a file/,
    );
    refused(assets({ [ADDON]: addonTar([{ path: 'cni', content: 'x' }]) }), /"cni" is a file and a folder/);
  });

  it('stops inflating a gzip bomb at the cap and refuses more entries than allowed', () => {
    const bomb = gzipSync(
      Buffer.concat([header('cni/big', 64 * 1024 * 1024), Buffer.alloc(64 * 1024 * 1024)]),
    );
    assert.ok(bomb.length < 200 * 1024, 'a small archive that inflates to 64 MiB');
    refused(assets({ [ADDON]: bomb }), new RegExp(`${ADDON}: it unpacks to more than \\d+ bytes`), {
      maxFiles: 10,
      maxBytes: 1024 * 1024,
    });
    const many = addonTar(Array.from({ length: 40 }, (_, i) => ({ path: `cni/f${i}`, content: 'x' })));
    refused(assets({ [ADDON]: many }), /more than \d+ entries|unpacks to \d+ files/, {
      maxFiles: 10,
      maxBytes: 1024 * 1024,
    });
  });

  it('refuses data that is not gzip, a truncated archive and a bad header checksum', () => {
    refused(assets({ [CLASS]: Buffer.from('not gzip') }), new RegExp(`${CLASS}: it is not a gzip stream`));
    const whole = addonTar([{ path: 'cni/values.yaml', content: 'a: 1\n'.repeat(300) }]);
    const cut = gzipSync(gunzipSync(whole).subarray(0, 1024 + 512 + 100));
    refused(assets({ [ADDON]: cut }), /is cut off/);
    const raw = Buffer.from(gunzipSync(addonTar()));
    raw[0] = 'x'.charCodeAt(0);
    refused(assets({ [ADDON]: gzipSync(raw) }), /wrong checksum/);
  });

  it('refuses unknown and missing assets, and archive names without metadata.yaml versions', () => {
    refused(
      assets({ 'install.sh': Buffer.from('rm -rf /') }),
      /release asset install.sh is not one csctl publishes/,
    );
    refused(assets({ 'metadata.yaml': undefined }), /lacks the asset metadata.yaml/);
    refused(
      assets({ 'clusteraddon.yaml': undefined }),
      /lacks the asset clusteraddon.yaml or cluster-addon-values.yaml/,
    );
    refused(
      assets({ [CLASS]: undefined, 'docker-ferrol-1-30-cluster-class-v3.tgz': classChart() }),
      /cluster-class-v3.tgz: its version is not metadata.yaml versions.clusterStack "v2"/,
    );
    refused(
      assets({
        [CLASS]: undefined,
        [ADDON]: undefined,
        'docker-ferrol-1-31-cluster-class-v2.tgz': classChart(),
        'docker-ferrol-1-31-cluster-addon-v1.tgz': addonTar(),
      }),
      /its stack is not for metadata.yaml versions.kubernetes "v1.30.4"/,
    );
    refused(
      assets({
        [CLASS]: tgz([
          { path: 'a/Chart.yaml', content: 'x' },
          { path: 'b/x', content: 'y' },
        ]),
      }),
      /expected a Helm package .* 2 top-level entries/,
    );
  });

  it('ignores the provider plugin node image assets and tells csctl asset sets apart', () => {
    const tree = releaseTreeFromCsctlAssets(assets({ 'node-images.yaml': Buffer.from('x: 1\n') }));
    assert.ok(!tree.has('node-images.yaml'));
    assert.ok(isCsctlAssetSet(assets().keys()));
    assert.ok(!isCsctlAssetSet(['metadata.yaml', 'README.md']));
    assert.ok(!isCsctlAssetSet([CLASS]));
  });
});

describe('readTarGz', () => {
  it('reads PAX and GNU long names, as Go and GNU tar write paths over 100 bytes', () => {
    const long = `chart/${'d'.repeat(120)}/values.yaml`;
    const pax = `${long.length + 12} path=${long}\n`;
    // the length prefix counts itself: find the fixed point
    let record = pax;
    for (let n = record.length; ; n = record.length) {
      record = `${n} path=${long}\n`;
      if (record.length === n) break;
    }
    const files = readTarGz(
      tgz([
        { path: 'PaxHeader', type: 'x', content: record },
        { path: 'short-name', content: 'pax' },
        { path: '././@LongLink', type: 'L', content: `${long}2\0` },
        { path: 'short-2', content: 'gnu' },
      ]),
      { maxEntries: 10, maxUnpackedBytes: 1 << 20 },
    );
    assert.deepEqual(
      files.map((f) => [f.path, Buffer.from(f.data).toString()]),
      [
        [long, 'pax'],
        [`${long}2`, 'gnu'],
      ],
    );
  });

  it('is a TarError for anything it refuses', () => {
    assert.throws(() => readTarGz(Buffer.from('x'), { maxEntries: 1, maxUnpackedBytes: 10 }), TarError);
  });
});

describe('the csctl format reads a packaged release', () => {
  it('provider and name from the tag, Kubernetes from metadata.yaml, versions checked against the tag', () => {
    const tree = releaseTreeFromCsctlAssets(assets());
    const read = readReleaseDescription(tree, releaseTag('docker-ferrol-1-30-v2'));
    assert.ok(read.ok, read.ok ? '' : read.errors.join('; '));
    assert.deepEqual(
      [
        read.value.format,
        read.value.provider,
        read.value.name,
        read.value.kubernetesVersion,
        read.value.csctl?.layout,
      ],
      ['csctl', 'docker', 'ferrol', 'v1.30.4', 'stages'],
    );
    const wrong = readReleaseDescription(tree, releaseTag('docker-ferrol-1-30-v3'));
    assert.ok(!wrong.ok);
    assert.match(
      wrong.errors.join('; '),
      /metadata.yaml: versions.clusterStack "v2" does not match the tag's version v3/,
    );
    const otherMinor = readReleaseDescription(tree, releaseTag('docker-ferrol-1-31-v2'));
    assert.ok(!otherMinor.ok);
    assert.match(otherMinor.errors.join('; '), /does not match the tag's Kubernetes 1.31/);
  });
});
