// Issue 23 part 3: the Go engine (goengine.wasm, run by controller/rendering/goengine) gives the
// reference tools' results byte for byte. Go templates: the wasm build against the native build of
// the same pinned Go code (test/fixtures/goengine/go-templates.yaml). Helm: the wasm build against
// the real `helm template` CLI at the same pin, for charts this test writes and for the project's
// csctl-layout stack (cluster-class, addons with vendored subcharts) as CSO renders them, and for a
// stack with csctl's `<< .ClusterClassVersion >>` placeholders read as csctl packages it.
// npm test: uses no test environment
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { before, describe, it } from 'node:test';
import { parse } from 'yaml';
import { releasedTree } from '../../../controller/releases/format.ts';
import { chartFiles as releaseChartFiles } from '../../../controller/rendering/clusterclass.ts';
import {
  configureGoEngine,
  goTemplate,
  helmTemplate,
  parseGoYaml,
} from '../../../controller/rendering/goengine/index.ts';
import { readStackDir } from '../../../hack/lib/stack-dir.ts';
import { csctlReleasedCopy, PLACEHOLDER_STACK } from '../../support/csctl-substitute.ts';
import { goEngineBuild, runHelm, runNative } from '../../support/goengine.ts';

const repoRoot = join(import.meta.dirname, '..', '..', '..');
// The project's own stack in the csctl layout (a published SCS stack is checked by `npm run
// conformance`, not by the suite: it is reference material outside the repository).
const CSO_STACK = join(repoRoot, 'stacks', 'docker-csoferrol-1-30');

interface TemplateCase {
  name: string;
  text: string;
  data?: unknown;
  funcs?: 'cso' | 'sprig';
  options?: string[];
  templateName?: string;
}
const corpus = parse(readFileSync(join(repoRoot, 'test/fixtures/goengine/go-templates.yaml'), 'utf8')) as {
  defaultData: unknown;
  cases: TemplateCase[];
};

before(() => {
  configureGoEngine({ path: join(goEngineBuild(), 'goengine.wasm') });
});

describe('goTemplate: wasm == native Go, byte for byte', () => {
  for (const c of corpus.cases) {
    it(c.name, () => {
      const data = 'data' in c ? c.data : corpus.defaultData;
      const name = c.templateName ?? 'cluster-addon-values-prod-1';
      const wasm = goTemplate(c.text, data, { name, funcs: c.funcs ?? 'cso', options: c.options ?? [] });
      const native = runNative({
        op: 'goTemplate',
        name,
        text: c.text,
        data,
        funcs: c.funcs ?? 'cso',
        options: c.options ?? [],
      });
      if (native.ok === true) assert.deepEqual(wasm, { ok: true, output: native.output ?? '' });
      else assert.deepEqual(wasm, { ok: false, error: native.error });
    });
  }

  it('the cluster-addon-values.yaml of the old-layout example stack', () => {
    const text = readFileSync(`${CSO_STACK}-umbrella/cluster-addon-values.yaml`, 'utf8');
    const data = corpus.defaultData as { Cluster: { spec: Record<string, unknown> } };
    const withEndpoint = {
      ...data,
      Cluster: {
        ...data.Cluster,
        spec: { ...data.Cluster.spec, controlPlaneEndpoint: { host: '10.0.0.1', port: 6443 } },
      },
    };
    const wasm = goTemplate(text, withEndpoint, { name: 'cluster-addon-values-prod-1' });
    const native = runNative({
      op: 'goTemplate',
      name: 'cluster-addon-values-prod-1',
      text,
      data: withEndpoint,
    });
    assert.equal(native.ok, true);
    assert.deepEqual(wasm, { ok: true, output: native.output });
  });
});

describe('parseGoYaml: wasm == native Go', () => {
  const streams = {
    'multi-document with comments and empty documents':
      'a: 1\n---\n# only a comment\n---\n\n---\nb: [1, 2]\n...\n',
    'quoted scalar continued in column 0':
      'spec:\n  script: "first line\nsecond line\n  third"\n  n: 012\n  big: 12345678901234567890\n',
    'anchors, merge keys, tags':
      'base: &b {x: 1, y: two}\nuse:\n  <<: *b\n  y: 3\nt: !!str 123\nyes: yes\non: off\n',
    'invalid YAML': 'a: [1, 2\nb: c\n',
    'duplicate keys': 'a: 1\na: 2\n',
  };
  for (const [name, text] of Object.entries(streams)) {
    it(name, () => {
      const wasm = parseGoYaml(text);
      const native = runNative({ op: 'parseYaml', text });
      if (native.ok === true) assert.deepEqual(wasm, { ok: true, documents: native.documents ?? [] });
      else assert.deepEqual(wasm, { ok: false, error: native.error });
    });
  }
});

/** Every file under dir (path relative to dir, '/'-separated) -> bytes. */
function chartFiles(dir: string): Map<string, Uint8Array> {
  const files = new Map<string, Uint8Array>();
  const walk = (d: string) => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      const full = join(d, entry.name);
      if (entry.isDirectory()) walk(full);
      else files.set(relative(dir, full).split('\\').join('/'), readFileSync(full));
    }
  };
  walk(dir);
  return files;
}

function write(root: string, files: Record<string, string>): void {
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(root, path, '..'), { recursive: true });
    writeFileSync(join(root, path), text);
  }
}

interface HelmCase {
  /** Whether helm renders the chart or fails (both sides must agree either way). */
  expect: 'ok' | 'error';
  /** The chart generates keys and certificates (sprig genCA...): compare with those masked. */
  generatesSecrets?: boolean;
  release: string;
  namespace: string;
  kubeVersion?: string;
  includeCrds?: boolean;
  values?: string[];
}

/** `helm template` of chartDir against the engine on the same files; stdout (or the error) equal. */
function assertSameAsHelm(chartDir: string, c: HelmCase): void {
  const work = mkdtempSync(join(tmpdir(), 'goengine-values-'));
  const valueArgs = (c.values ?? []).flatMap((v, i) => {
    const file = join(work, `values-${i}.yaml`);
    writeFileSync(file, v);
    return ['-f', file];
  });
  const args = [
    'template',
    ...(c.includeCrds ? ['--include-crds'] : []),
    ...(c.kubeVersion ? ['--kube-version', c.kubeVersion] : []),
    c.release,
    chartDir,
    '--namespace',
    c.namespace,
    ...valueArgs,
  ];
  const cli = runHelm(args, work);
  const wasm = helmTemplate({
    files: chartFiles(chartDir),
    releaseName: c.release,
    namespace: c.namespace,
    ...(c.kubeVersion ? { kubeVersion: c.kubeVersion } : {}),
    includeCrds: c.includeCrds ?? false,
    values: c.values ?? [],
  });
  assert.equal(cli.status === 0 ? 'ok' : 'error', c.expect, cli.stderr);
  if (cli.status === 0) {
    assert.ok(wasm.ok, `helm succeeded, the engine failed: ${wasm.ok ? '' : wasm.error}`);
    const joined = wasm.manifests.map((m) => `---\n# Source: ${m.path}\n${m.content}\n`).join('');
    if (c.generatesSecrets) {
      assert.notEqual(wasm.stdout, cli.stdout, 'random material differs between two renders');
      assert.equal(maskGenerated(wasm.stdout), maskGenerated(cli.stdout));
      assert.equal(maskGenerated(joined), maskGenerated(cli.stdout));
    } else {
      assert.equal(wasm.stdout, cli.stdout);
      assert.equal(joined, cli.stdout);
    }
  } else {
    assert.ok(!wasm.ok, `helm failed (${cli.stderr}), the engine succeeded`);
    assert.equal(`Error: ${wasm.error}\n`, cli.stderr);
  }
}

/** Base64 of generated keys and certificates (long runs) replaced by a marker. */
function maskGenerated(text: string): string {
  return text.replace(/[A-Za-z0-9+/]{200,}={0,2}/g, '<generated>');
}

const SUBCHART = {
  'Chart.yaml': 'apiVersion: v2\nname: sub\nversion: 0.2.0\nappVersion: "9.9"\n',
  'values.yaml': 'image: sub:1\nreplicas: 1\n',
  'templates/deploy.yaml':
    'apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}-sub\n  labels: {{- include "sub.labels" . | nindent 4 }}\nspec:\n  replicas: {{ .Values.replicas }}\n  template:\n    spec:\n      containers:\n        - name: c\n          image: {{ .Values.image }}\n          env: [{name: G, value: {{ .Values.global.domain | quote }}}]\n',
  'templates/_helpers.tpl':
    '{{- define "sub.labels" -}}\napp: {{ .Chart.Name }}\nversion: {{ .Chart.AppVersion | quote }}\n{{- end }}\n',
};

const PARENT = {
  'Chart.yaml':
    'apiVersion: v2\nname: parent\nversion: v1\ndependencies:\n  - name: sub\n    version: 0.2.0\n    repository: https://charts.example.invalid\n',
  '.helmignore': 'ignored/\n*.bak\n',
  'ignored/secret.yaml': 'should not load\n',
  'templates/old.yaml.bak': 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bak}\n',
  'values.yaml':
    'global:\n  domain: example.org\nname: demo\nlabels:\n  team: blue\nsub:\n  replicas: 2\nextra: "{{ .Release.Name }}-{{ .Values.name }}"\nlist: [b, a]\n',
  'templates/_helpers.tpl':
    '{{- define "parent.fullname" -}}\n{{ .Release.Name }}-{{ .Chart.Version }}-{{ .Values.name | trunc 63 | trimSuffix "-" }}\n{{- end }}\n{{- define "parent.labels" -}}\n{{ toYaml .Values.labels }}\nchart: {{ .Chart.Name }}-{{ .Chart.Version | replace "+" "_" }}\n{{- end }}\n',
  'templates/cm.yaml':
    'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ include "parent.fullname" . }}\n  namespace: {{ .Release.Namespace }}\n  labels:\n{{ include "parent.labels" . | indent 4 }}\ndata:\n  tpl: {{ tpl .Values.extra . | quote }}\n  kube: {{ .Capabilities.KubeVersion.Version | quote }}\n  minor: {{ .Capabilities.KubeVersion.Minor | quote }}\n  helm: {{ .Capabilities.HelmVersion.Version | quote }}\n  hasApi: {{ .Capabilities.APIVersions.Has "apps/v1" | quote }}\n  sorted: {{ .Values.list | sortAlpha | join "," | quote }}\n  semver: {{ semverCompare ">=1.30.0-0" .Capabilities.KubeVersion.Version | quote }}\n  install: {{ .Release.IsInstall | quote }}\n  files: {{ .Files.Get "files/data.txt" | b64enc | quote }}\n  lookup: {{ lookup "v1" "Namespace" "" "kube-system" | toJson | quote }}\n',
  'templates/multi.yaml':
    '{{- range $i, $n := until 3 }}\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: svc-{{ $n }}\n{{- end }}\n---\n# just a comment\n',
  'templates/empty.yaml': '{{- if false }}\nnever: here\n{{- end }}\n',
  'templates/ns.yaml': 'apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {{ .Release.Namespace }}-extra\n',
  'templates/secret.yaml':
    'apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\nstringData:\n  pw: {{ required "pw is required" .Values.pw | quote }}\n',
  'templates/hook.yaml':
    'apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: pre\n  annotations:\n    "helm.sh/hook": pre-install\n    "helm.sh/hook-weight": "-5"\nspec: {}\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: test\n  annotations:\n    "helm.sh/hook": test\n',
  'templates/NOTES.txt': 'Installed {{ .Release.Name }}\n',
  'crds/widgets.yaml':
    'apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.org\n---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: gadgets.example.org\n',
  'files/data.txt': 'some data\n',
};

describe('helmTemplate: wasm == real `helm template` CLI, byte for byte', () => {
  let parent: string;
  before(() => {
    const root = mkdtempSync(join(tmpdir(), 'goengine-charts-'));
    write(join(root, 'sub'), SUBCHART);
    parent = join(root, 'parent');
    write(parent, PARENT);
    mkdirSync(join(parent, 'charts'));
    const packaged = runHelm(['package', join(root, 'sub'), '-d', join(parent, 'charts')], root);
    assert.equal(packaged.status, 0, packaged.stderr);
  });

  it('helpers, include, tpl, subchart .tgz, hooks, CRDs, .helmignore, Capabilities, values files', () => {
    assertSameAsHelm(parent, {
      expect: 'ok',
      release: 'r1',
      namespace: 'tenant-a',
      includeCrds: true,
      kubeVersion: 'v1.34.3',
      values: ['pw: s3cret\nlabels:\n  extra: "true"\n', '{"sub": {"image": "other:2"}, "list": ["z", "y"]}'],
    });
  });

  it('without --include-crds and without --kube-version (Helm defaults)', () => {
    assertSameAsHelm(parent, { expect: 'ok', release: 'r2', namespace: 'default', values: ['pw: x\n'] });
  });

  it('required failing', () => {
    assertSameAsHelm(parent, { expect: 'error', release: 'r3', namespace: 'default' });
  });

  it('rendered YAML that does not parse', () => {
    const dir = mkdtempSync(join(tmpdir(), 'goengine-bad-'));
    write(dir, {
      'Chart.yaml': 'apiVersion: v2\nname: bad\nversion: 1.0.0\n',
      'templates/x.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [unclosed\n',
    });
    assertSameAsHelm(dir, { expect: 'error', release: 'r', namespace: 'default' });
  });

  it('template parse error, kubeVersion constraint, missing dependency', () => {
    const dir = mkdtempSync(join(tmpdir(), 'goengine-errs-'));
    write(join(dir, 'parse'), {
      'Chart.yaml': 'apiVersion: v2\nname: parse\nversion: 1.0.0\n',
      'templates/x.yaml': '{{ .Values.x \n',
    });
    write(join(dir, 'kube'), {
      'Chart.yaml': 'apiVersion: v2\nname: kube\nversion: 1.0.0\nkubeVersion: ">=1.35.0"\n',
      'templates/x.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n',
    });
    write(join(dir, 'deps'), {
      'Chart.yaml':
        'apiVersion: v2\nname: deps\nversion: 1.0.0\ndependencies: [{name: gone, version: 1.0.0, repository: "https://x.invalid"}]\n',
    });
    assertSameAsHelm(join(dir, 'parse'), { expect: 'error', release: 'r', namespace: 'default' });
    assertSameAsHelm(join(dir, 'kube'), {
      expect: 'error',
      release: 'r',
      namespace: 'default',
      kubeVersion: 'v1.34.0',
    });
    assertSameAsHelm(join(dir, 'deps'), { expect: 'error', release: 'r', namespace: 'default' });
  });

  it('chartVersion override == Chart.yaml rewritten as csctl does', () => {
    const dir = mkdtempSync(join(tmpdir(), 'goengine-version-'));
    cpSync(parent, dir, { recursive: true });
    const chartYaml = join(dir, 'Chart.yaml');
    writeFileSync(chartYaml, readFileSync(chartYaml, 'utf8').replace('version: v1\n', 'version: v7\n'));
    const cli = runHelm(['template', 'r', dir, '--namespace', 'ns', '--set', 'pw=x'], dir);
    assert.equal(cli.status, 0, cli.stderr);
    const wasm = helmTemplate({
      files: chartFiles(parent),
      releaseName: 'r',
      namespace: 'ns',
      values: ['pw: x\n'],
      chartVersion: 'v7',
    });
    assert.ok(wasm.ok);
    assert.equal(wasm.stdout, cli.stdout);
  });
});

describe('helmTemplate on a stack in the csctl layout, as CSO runs helm', () => {
  it('cluster-class: helm template <release> <chart> --namespace <ns>, version set by csctl', () => {
    const dir = mkdtempSync(join(tmpdir(), 'goengine-scs-cc-'));
    cpSync(join(CSO_STACK, 'cluster-class'), dir, { recursive: true });
    const chartYaml = join(dir, 'Chart.yaml');
    writeFileSync(chartYaml, readFileSync(chartYaml, 'utf8').replace('version: v1\n', 'version: v2\n'));
    const cli = runHelm(['template', 'docker-scs-1-30', dir, '--namespace', 'tenant-a'], dir);
    assert.equal(cli.status, 0, cli.stderr);
    const wasm = helmTemplate({
      files: chartFiles(join(CSO_STACK, 'cluster-class')),
      releaseName: 'docker-scs-1-30',
      namespace: 'tenant-a',
      chartVersion: 'v2',
    });
    assert.ok(wasm.ok, wasm.ok ? '' : wasm.error);
    assert.equal(wasm.stdout, cli.stdout);
    assert.ok(wasm.manifests.some((m) => m.content.includes('kind: ClusterClass')));
  });

  for (const [addon, generatesSecrets] of [
    ['cni', false],
    ['metrics', false],
  ] as const) {
    it(`addon ${addon}: helm template --include-crds --kube-version cluster-addon <chart> --namespace kube-system`, () => {
      assertSameAsHelm(join(CSO_STACK, 'cluster-addon', addon), {
        expect: 'ok',
        generatesSecrets,
        release: 'cluster-addon',
        namespace: 'kube-system',
        includeCrds: true,
        kubeVersion: 'v1.30.10',
        values: ['clusterName: alpha\n'],
      });
    });
  }
});

// Issue 32: the older cluster-stacks layout writes csctl's placeholders into Chart.yaml. The helm
// CLI runs on the folder as csctl create packages it (placeholders replaced by the test's own plain
// replacement); the engine on the tree as the controller reads the Git tag (releasedTree).
describe('helmTemplate on a stack with csctl placeholders, as csctl packages it and CSO runs helm', () => {
  const { dir, tag, version, releaseName, kubernetesVersion } = PLACEHOLDER_STACK;
  let packaged: string;
  let released: ReturnType<typeof releasedTree>;
  before(() => {
    packaged = csctlReleasedCopy(dir, version);
    released = releasedTree(readStackDir(dir), tag);
  });

  it('the folder as committed: helm and the engine refuse the placeholder version alike', () => {
    assertSameAsHelm(join(dir, 'cluster-class'), {
      expect: 'error',
      release: releaseName,
      namespace: 'tenant-a',
    });
    assertSameAsHelm(join(dir, 'cluster-addon'), {
      expect: 'error',
      release: 'cluster-addon',
      namespace: 'kube-system',
    });
  });

  it('cluster-class: helm template <release> <chart> --namespace <ns>, byte for byte', () => {
    const cli = runHelm(
      ['template', releaseName, join(packaged, 'cluster-class'), '--namespace', 'tenant-a'],
      packaged,
    );
    assert.equal(cli.status, 0, cli.stderr);
    const wasm = helmTemplate({
      files: releaseChartFiles(released, 'cluster-class/'),
      releaseName,
      namespace: 'tenant-a',
      chartVersion: version,
    });
    assert.ok(wasm.ok, wasm.ok ? '' : wasm.error);
    assert.equal(wasm.stdout, cli.stdout);
    assert.match(cli.stdout, new RegExp(`name: ${tag}\n`));
  });

  it('umbrella addon: helm template --include-crds --kube-version cluster-addon <chart> --namespace kube-system -f values', () => {
    // The values as the packaged cluster-addon-values.yaml gives them (its Go template, by native Go).
    const template = readFileSync(join(packaged, 'cluster-addon-values.yaml'), 'utf8');
    assert.equal(released.get('cluster-addon-values.yaml'), template);
    const native = runNative({
      op: 'goTemplate',
      name: 'cluster-addon-values-prod-1',
      text: template,
      data: { Cluster: { metadata: { name: 'prod-1' }, spec: {} } },
    });
    assert.equal(native.ok, true, String(native.error));
    const values = (parse(String(native.output)) as { values: string }).values;
    assert.match(values, /cluster-stack-version: v2\n/);
    const work = mkdtempSync(join(tmpdir(), 'goengine-placeholder-values-'));
    writeFileSync(join(work, 'values.yaml'), values);
    const cli = runHelm(
      [
        'template',
        '--include-crds',
        '--kube-version',
        kubernetesVersion,
        'cluster-addon',
        join(packaged, 'cluster-addon'),
        '--namespace',
        'kube-system',
        '-f',
        join(work, 'values.yaml'),
      ],
      work,
    );
    assert.equal(cli.status, 0, cli.stderr);
    const wasm = helmTemplate({
      files: releaseChartFiles(released, 'cluster-addon/'),
      releaseName: 'cluster-addon',
      namespace: 'kube-system',
      kubeVersion: kubernetesVersion,
      includeCrds: true,
      values: [values],
    });
    assert.ok(wasm.ok, wasm.ok ? '' : wasm.error);
    assert.equal(wasm.stdout, cli.stdout);
  });
});
