import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  addonDependencies,
  chartHostAllowed,
  chartHostErrors,
  parseStackManifest,
  readRelease,
  validateReleaseTree,
  validateStackAgainstTag,
} from '../../../controller/releases/stack.ts';
import { parseReleaseTag, type ReleaseTag } from '../../../controller/releases/tags.ts';

const good = `apiVersion: stackflux.io/v1alpha1
kind: Stack
provider: docker
name: ferrol
kubernetesVersion: v1.30.4
version: v2
addons:
  - name: cni
    targetNamespace: kube-system
  - name: metrics-server
    dependsOn: [cni]
  - name: csi
`;

function tag(t: string): ReleaseTag {
  const r = parseReleaseTag(t);
  if (!r.ok) throw new Error(r.reason);
  return r.value;
}

function errorsOf(text: string): string[] {
  const r = parseStackManifest(text);
  assert.equal(r.ok, false, 'expected errors');
  return r.ok ? [] : r.errors;
}

function assertError(text: string, re: RegExp): void {
  const errors = errorsOf(text);
  assert.ok(
    errors.some((e) => re.test(e)),
    `no error matches ${re}: ${JSON.stringify(errors)}`,
  );
  for (const e of errors) assert.ok(e.startsWith('stack.yaml: '), e);
}

describe('parseStackManifest', () => {
  it('parses a valid stack.yaml', () => {
    const r = parseStackManifest(good);
    assert.ok(r.ok);
    assert.deepEqual(r.value, {
      apiVersion: 'stackflux.io/v1alpha1',
      kind: 'Stack',
      provider: 'docker',
      name: 'ferrol',
      kubernetesVersion: 'v1.30.4',
      version: 'v2',
      addons: [
        { name: 'cni', targetNamespace: 'kube-system' },
        { name: 'metrics-server', dependsOn: ['cni'] },
        { name: 'csi' },
      ],
    });
  });

  it('accepts an empty addon list and custom versions', () => {
    const r = parseStackManifest(
      good.replace(/addons:[\s\S]*$/, 'addons: []\n').replace('v2', 'v0-sha.abc1234'),
    );
    assert.ok(r.ok);
    assert.equal(r.value.version, 'v0-sha.abc1234');
    assert.deepEqual(r.value.addons, []);
  });

  const cases: [string, string, RegExp][] = [
    ['invalid YAML', 'a: [', /invalid YAML/],
    ['duplicate keys', `${good}name: other\n`, /invalid YAML/],
    ['not a mapping', '- a\n- b\n', /must be a YAML mapping/],
    ['empty', '', /must be a YAML mapping/],
    ['wrong apiVersion', good.replace('stackflux.io/v1alpha1', 'v1'), /apiVersion "v1"/],
    ['wrong kind', good.replace('kind: Stack', 'kind: Stak'), /kind "Stak"/],
    ['missing provider', good.replace('provider: docker\n', ''), /provider is required/],
    ['provider not a string', good.replace('provider: docker', 'provider: 12'), /provider must be a string/],
    ['provider with a dash', good.replace('provider: docker', 'provider: my-docker'), /provider "my-docker"/],
    [
      'partial Kubernetes version',
      good.replace('v1.30.4', 'v1.30'),
      /kubernetesVersion "v1.30" is not a full version/,
    ],
    ['Kubernetes version without v', good.replace('v1.30.4', '1.30.4'), /kubernetesVersion "1.30.4"/],
    ['bad version', good.replace('version: v2', 'version: x2'), /version "x2"/],
    ['version a number', good.replace('version: v2', 'version: 2'), /version must be a string, got 2/],
    ['unknown field', `${good}adons: []\n`, /unknown field "adons"/],
    ['missing addons', good.replace(/addons:[\s\S]*$/, ''), /addons is required/],
    ['addons not a list', good.replace(/addons:[\s\S]*$/, 'addons: {cni: {}}\n'), /addons must be a list/],
    [
      'addon not a mapping',
      good.replace(/addons:[\s\S]*$/, 'addons: [cni]\n'),
      /addons\[0\] must be a mapping/,
    ],
    [
      'addon without name',
      good.replace('  - name: csi', '  - targetNamespace: x'),
      /addons\[2\].name is required/,
    ],
    [
      'addon name not DNS-1123',
      good.replace('name: csi', 'name: CSI_driver'),
      /addons\[2\].name "CSI_driver" must be a DNS-1123 label/,
    ],
    ['addon name too long', good.replace('name: csi', `name: ${'a'.repeat(64)}`), /longer than 63/],
    ['duplicate addon', good.replace('name: csi', 'name: cni'), /addons\[2\].name "cni" is listed twice/],
    [
      'unknown addon field',
      good.replace('  - name: csi', '  - name: csi\n    namespace: x'),
      /addons\[2\]: unknown field "namespace"/,
    ],
    ['bad targetNamespace', good.replace('kube-system', 'Kube.System'), /targetNamespace "Kube.System"/],
    ['dependsOn not a list', good.replace('dependsOn: [cni]', 'dependsOn: cni'), /dependsOn must be a list/],
    [
      'dependsOn unknown',
      good.replace('dependsOn: [cni]', 'dependsOn: [nope]'),
      /dependsOn "nope" is not an addon/,
    ],
    [
      'dependsOn itself',
      good.replace('dependsOn: [cni]', 'dependsOn: [metrics-server]'),
      /names the addon itself/,
    ],
    ['dependsOn twice', good.replace('dependsOn: [cni]', 'dependsOn: [cni, cni]'), /lists "cni" twice/],
    [
      'remote chart without repository',
      good.replace('  - name: csi', '  - name: csi\n    chart: csi\n    version: 1.0.0'),
      /addons\[2\] \(csi\) names a remote chart with chart, version but lacks repository/,
    ],
    [
      'remote chart from a file URL',
      good.replace(
        '  - name: csi',
        '  - name: csi\n    chart: csi\n    version: 1.0.0\n    repository: file:///charts',
      ),
      /repository "file:\/\/\/charts" must be an https:\/\/ \(Helm repository\) or oci:\/\//,
    ],
    [
      'remote chart version not a string',
      good.replace(
        '  - name: csi',
        '  - name: csi\n    chart: csi\n    version: 1\n    repository: oci://r.example/c',
      ),
      /addons\[2\] \(csi\).version must be a non-empty string, got 1/,
    ],
    [
      'dependsOn later (cycle)',
      good.replace('targetNamespace: kube-system', 'dependsOn: [metrics-server]'),
      /is listed after it/,
    ],
  ];
  for (const [name, text, re] of cases) {
    it(`rejects: ${name}`, () => assertError(text, re));
  }

  it('reports every error at once', () => {
    const errors = errorsOf('apiVersion: v1\nkind: Stack\nname: x\nversion: v1\naddons: []\n');
    assert.deepEqual(errors, [
      'stack.yaml: apiVersion "v1" is not stackflux.io/v1alpha1',
      'stack.yaml: provider is required',
      'stack.yaml: kubernetesVersion is required',
    ]);
  });
});

describe('validateStackAgainstTag', () => {
  const parsed = parseStackManifest(good);
  assert.ok(parsed.ok);
  const manifest = parsed.value;

  it('accepts the matching tag', () => {
    assert.deepEqual(validateStackAgainstTag(manifest, tag('docker-ferrol-1-30-v2')), []);
  });

  it('names the mismatching Kubernetes version', () => {
    assert.deepEqual(
      validateStackAgainstTag({ ...manifest, kubernetesVersion: 'v1.31.2' }, tag('docker-ferrol-1-30-v2')),
      ['stack.yaml: kubernetesVersion "v1.31.2" does not match the tag\'s 1.30'],
    );
    // 1.3 vs 1.30 must not match by prefix
    assert.equal(
      validateStackAgainstTag({ ...manifest, kubernetesVersion: 'v1.3.0' }, tag('docker-ferrol-1-30-v2'))
        .length,
      1,
    );
  });

  it('names mismatching provider, name and version', () => {
    assert.deepEqual(validateStackAgainstTag(manifest, tag('openstack-scs-1-30-v3')), [
      'stack.yaml: provider "docker" does not match the tag\'s openstack',
      'stack.yaml: name "ferrol" does not match the tag\'s scs',
      'stack.yaml: version "v2" does not match the tag\'s v3',
    ]);
  });

  it('accepts both forms of a custom version', () => {
    const t = tag('docker-ferrol-1-30-v0-sha-abc1234');
    assert.deepEqual(validateStackAgainstTag({ ...manifest, version: 'v0-sha.abc1234' }, t), []);
    assert.deepEqual(validateStackAgainstTag({ ...manifest, version: 'v0-sha-abc1234' }, t), []);
    assert.equal(validateStackAgainstTag({ ...manifest, version: 'v0-sha.abc1235' }, t).length, 1);
  });
});

describe('addonDependencies', () => {
  it('defaults to the previous addon', () => {
    const parsed = parseStackManifest(good);
    assert.ok(parsed.ok);
    assert.deepEqual(
      [...addonDependencies(parsed.value)],
      [
        ['cni', []],
        ['metrics-server', ['cni']],
        ['csi', ['metrics-server']],
      ],
    );
  });
});

describe('release tree', () => {
  const tree = new Map([
    ['stack.yaml', good],
    ['cluster-class/cluster-class.yaml', 'kind: ClusterClass\n'],
    ['cluster-addon/cni/cni.yaml.hbs', ''],
  ]);

  it('accepts a complete tree', () => {
    assert.deepEqual(validateReleaseTree(tree), []);
    const r = readRelease(tree, tag('docker-ferrol-1-30-v2'));
    assert.ok(r.ok);
    assert.equal(r.value.addons.length, 3);
  });

  it('requires cluster-class YAML files and stack.yaml', () => {
    assert.deepEqual(validateReleaseTree(new Map([['cluster-class/README.md', '']])), [
      'release has no stack.yaml',
      'release has no YAML files in cluster-class/',
    ]);
    const r = readRelease(new Map([['stack.yaml', good]]), tag('docker-ferrol-1-30-v2'));
    assert.deepEqual(r, { ok: false, errors: ['release has no YAML files in cluster-class/'] });
  });

  it('combines tree, parse and tag errors', () => {
    const r = readRelease(tree, tag('docker-ferrol-1-31-v2'));
    assert.deepEqual(r, {
      ok: false,
      errors: ['stack.yaml: kubernetesVersion "v1.30.4" does not match the tag\'s 1.31'],
    });
  });
});

describe('stack.yaml: Helm charts from a repository', () => {
  it('chart, version and repository make an addon a remote chart', () => {
    const r = parseStackManifest(
      good.replace(
        '  - name: csi',
        '  - name: csi\n    chart: csi-driver\n    version: ">=1.2.0 <2"\n    repository: oci://ghcr.io/example/charts',
      ),
    );
    assert.ok(r.ok, r.ok ? '' : r.errors.join('; '));
    assert.deepEqual(r.value.addons[2], {
      name: 'csi',
      chart: { name: 'csi-driver', version: '>=1.2.0 <2', repository: 'oci://ghcr.io/example/charts' },
    });
    assert.equal(r.value.addons[0]?.chart, undefined);
  });
});

// Issue 22 row 12: chart repositories are https:// or oci:// URLs whose path no chart name or
// segment can walk, chart names are DNS labels, and --allowed-chart-hosts limits the hosts.
describe('stack.yaml: remote chart repository and name (issue 22)', () => {
  const withChart = (chart: string, repository: string) =>
    good.replace(
      '  - name: csi',
      `  - name: csi\n    chart: ${JSON.stringify(chart)}\n    version: 1.0.0\n    repository: ${JSON.stringify(repository)}`,
    );
  const repositoryError =
    /addons\[2\] \(csi\)\.repository ".*" must be an https:\/\/ \(Helm repository\) or oci:\/\//;
  const rejected: Array<[string, string, string, RegExp]> = [
    [
      'an OCI path walking out of the charts folder',
      'csi',
      'oci://registry.kube-system.svc:5000/charts/../../v2/_catalog',
      repositoryError,
    ],
    ['a plain http:// Helm repository', 'csi', 'http://charts.example.com', repositoryError],
    ['a "." segment', 'csi', 'oci://ghcr.io/./charts', repositoryError],
    ['percent escapes (an escaped ..)', 'csi', 'oci://ghcr.io/charts/%2e%2e/x', repositoryError],
    ['credentials in the URL', 'csi', 'https://user:pw@charts.example.com', repositoryError],
    ['a query', 'csi', 'https://charts.example.com/?x=1', repositoryError],
    ['a fragment', 'csi', 'https://charts.example.com/#x', repositoryError],
    [
      'a chart name with ..',
      '..',
      'oci://ghcr.io/charts',
      /addons\[2\] \(csi\)\.chart "\.\." must be a DNS-1123 label/,
    ],
    [
      'a chart name with a slash',
      '../../v2/_catalog',
      'oci://ghcr.io/charts',
      /addons\[2\] \(csi\)\.chart "\.\.\/\.\.\/v2\/_catalog" must be a DNS-1123 label/,
    ],
    ['an upper-case chart name', 'CSI', 'oci://ghcr.io/charts', /\.chart "CSI" must be a DNS-1123 label/],
  ];
  for (const [name, chart, repository, re] of rejected) {
    it(`rejects ${name}`, () => assertError(withChart(chart, repository), re));
  }

  it('accepts https:// and oci:// repositories with a port and a trailing slash', () => {
    for (const repository of ['https://helm.cilium.io', 'oci://registry.example.com:5000/charts/']) {
      const r = parseStackManifest(withChart('cilium', repository));
      assert.ok(r.ok, r.ok ? '' : r.errors.join('; '));
    }
  });

  it('--allowed-chart-hosts: exact hosts and *.domain, case-insensitive; unset allows any host', () => {
    assert.equal(chartHostAllowed('helm.cilium.io', ['helm.cilium.io']), true);
    assert.equal(chartHostAllowed('HELM.cilium.io', ['helm.cilium.io']), true);
    assert.equal(chartHostAllowed('ghcr.io', ['*.ghcr.io']), false);
    assert.equal(chartHostAllowed('eu.ghcr.io', ['*.ghcr.io']), true);
    assert.equal(chartHostAllowed('evilghcr.io', ['*.ghcr.io']), false);
    assert.equal(chartHostAllowed('registry.kube-system.svc', ['helm.cilium.io']), false);

    const parsed = parseStackManifest(withChart('csi', 'oci://registry.kube-system.svc:5000/charts'));
    assert.ok(parsed.ok);
    assert.deepEqual(chartHostErrors(parsed.value, undefined), []);
    assert.deepEqual(chartHostErrors(parsed.value, ['registry.kube-system.svc']), []);
    assert.deepEqual(chartHostErrors(parsed.value, ['helm.cilium.io', '*.ghcr.io']), [
      'stack.yaml: addons[2] (csi).repository "oci://registry.kube-system.svc:5000/charts": host registry.kube-system.svc is not in --allowed-chart-hosts (helm.cilium.io, *.ghcr.io)',
    ]);
  });
});
