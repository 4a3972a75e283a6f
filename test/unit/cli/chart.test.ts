// The Helm chart charts/stackflux/ is generated from the install definition: it is up to date, and
// the REAL helm CLI renders it (with --include-crds) into exactly the objects `stackflux install
// --export --skip-namespace` prints with the flags that correspond to the values.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments, stringify } from 'yaml';
import {
  CHART_NAME,
  chartFiles,
  mergedInstallTree,
  placeholderOptions,
  scalarText,
  TOGGLES,
  valueWith,
} from '../../../controller/cli/chart.ts';
import { installObjects } from '../../../controller/cli/install.ts';
import { main } from '../../../controller/cli/main.ts';
import { captureIO } from '../../support/cli.ts';
import { runHelm } from '../../support/goengine.ts';

const chartDir = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'charts', CHART_NAME);
const NAMESPACE = 'stackflux-system';

type Obj = Record<string, unknown> & { kind: string; metadata: { name: string } };

function documents(text: string): Obj[] {
  return parseAllDocuments(text)
    .map((d) => d.toJS() as Obj | null)
    .filter((o): o is Obj => o !== null);
}

/** Objects in one order (helm prints them by kind, install in its own order). */
const sorted = (objects: Obj[]) =>
  [...objects].sort((a, b) => `${a.kind}/${a.metadata.name}`.localeCompare(`${b.kind}/${b.metadata.name}`));

async function install(flags: string[]): Promise<Obj[]> {
  const c = captureIO();
  const code = await main(
    ['install', '--export', '--skip-namespace', `--namespace=${NAMESPACE}`, ...flags],
    c.io,
  );
  assert.equal(code, 0, c.err());
  return documents(c.out());
}

function helmTemplate(values: Record<string, unknown>): { status: number; stdout: string; stderr: string } {
  const work = mkdtempSync(join(tmpdir(), 'stackflux-chart-'));
  writeFileSync(join(work, 'values.yaml'), stringify(values));
  return runHelm(
    ['template', 'sf', chartDir, '--include-crds', '--namespace', NAMESPACE, '-f', join(work, 'values.yaml')],
    work,
  );
}

const CASES: { name: string; values: Record<string, unknown>; flags: string[] }[] = [
  { name: 'default values = default flags', values: {}, flags: [] },
  {
    name: 'every value set (webhook, cert-manager extension, fleet, tenancy, extra args)',
    values: {
      name: 'sf-two',
      image: {
        repository: 'registry.example/stackflux',
        tag: 'v9.8.7',
        pullPolicy: 'Always',
        pullSecrets: [{ name: 'pull-a' }, { name: 'pull-b' }],
      },
      nodeSelector: { 'kubernetes.io/os': 'linux', 'node-role.kubernetes.io/control-plane': '' },
      tolerations: [
        { key: 'node-role.kubernetes.io/control-plane', operator: 'Exists', effect: 'NoSchedule' },
      ],
      affinity: {
        podAntiAffinity: {
          preferredDuringSchedulingIgnoredDuringExecution: [
            {
              weight: 100,
              podAffinityTerm: {
                topologyKey: 'kubernetes.io/hostname',
                labelSelector: { matchLabels: { 'app.kubernetes.io/name': 'stackflux' } },
              },
            },
          ],
        },
      },
      priorityClassName: 'system-cluster-critical',
      replicas: 3,
      resources: { requests: { cpu: '250m', memory: '256Mi' }, limits: { cpu: '2', memory: '2Gi' } },
      logLevel: 'debug',
      metrics: { port: 9090 },
      fleet: {
        url: 'https://git.example/fleet.git',
        secret: 'flux-system/fleet-auth',
        branchPrefix: 'fleet/',
      },
      webhook: { secretName: 'push-hook' },
      runtimeExtension: { certificate: 'cert-manager', certSecretName: 'hook-cert' },
      tenancy: {
        defaultServiceAccount: 'flux-applier',
        allowedChartHosts: ['charts.example', '*.registry.example'],
        insecureChartHosts: ['plain.example'],
      },
      extraArgs: ['--concurrency=8', '--poll-interval=1m', '--github-api-url=https://ghe.example/api/v3'],
      networkPolicy: {
        webhook: {
          from: [
            { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-a' } } },
            { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-b' } } },
          ],
        },
        runtimeExtension: { from: [{ namespaceSelector: {} }] },
        metrics: {
          from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'prometheus' } } }],
        },
        egress: { to: [{ ipBlock: { cidr: '10.0.0.0/8' } }, { ipBlock: { cidr: '2001:db8::/32' } }] },
      },
    },
    flags: [
      '--name=sf-two',
      '--image=registry.example/stackflux:v9.8.7',
      '--image-pull-policy=Always',
      '--image-pull-secrets=pull-a,pull-b',
      '--node-selector=kubernetes.io/os=linux,node-role.kubernetes.io/control-plane=',
      '--tolerations=[{"key":"node-role.kubernetes.io/control-plane","operator":"Exists","effect":"NoSchedule"}]',
      '--affinity={"podAntiAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":100,"podAffinityTerm":{"topologyKey":"kubernetes.io/hostname","labelSelector":{"matchLabels":{"app.kubernetes.io/name":"stackflux"}}}}]}}',
      '--priority-class-name=system-cluster-critical',
      '--replicas=3',
      '--cpu-request=250m',
      '--memory-request=256Mi',
      '--cpu-limit=2',
      '--memory-limit=2Gi',
      '--log-level=debug',
      '--metrics-port=9090',
      '--fleet-url=https://git.example/fleet.git',
      '--fleet-secret=flux-system/fleet-auth',
      '--fleet-branch-prefix=fleet/',
      '--webhook-secret-name=push-hook',
      '--runtime-extension=cert-manager',
      '--runtime-extension-cert-secret=hook-cert',
      '--default-service-account=flux-applier',
      '--allowed-chart-hosts=charts.example,*.registry.example',
      '--insecure-chart-hosts=plain.example',
      '--network-policy-webhook-namespaces=ingress-a,ingress-b',
      '--network-policy-runtime-extension-namespaces=*',
      '--network-policy-metrics-namespaces=prometheus',
      '--network-policy-egress-cidrs=10.0.0.0/8,2001:db8::/32',
      '--',
      '--concurrency=8',
      '--poll-interval=1m',
      '--github-api-url=https://ghe.example/api/v3',
    ],
  },
  {
    name: 'no webhook, no leader election, extension with a given Secret, no resources, one fleet flag',
    values: {
      replicas: 0,
      // Helm merges a map of values into the default one: null removes a default key.
      resources: { requests: null, limits: null },
      leaderElection: { enabled: false },
      webhook: { secretName: '' },
      runtimeExtension: { certificate: 'secret' },
      fleet: { url: 'ssh://git@git.example/fleet.git' },
      tenancy: { allowedChartHosts: ['charts.example'] },
    },
    flags: [
      '--replicas=0',
      '--cpu-request=',
      '--memory-request=',
      '--memory-limit=',
      '--disable-leader-election',
      '--webhook-secret-name=',
      '--runtime-extension=secret',
      '--fleet-url=ssh://git@git.example/fleet.git',
      '--allowed-chart-hosts=charts.example',
    ],
  },
  {
    name: 'only the tenancy ServiceAccount and a branch prefix, strings YAML would misread',
    values: {
      logLevel: 'warn',
      tenancy: { defaultServiceAccount: 'true' },
      fleet: { secret: 'ns/on', branchPrefix: 'no/' },
      extraArgs: ['--shard', 'null'],
      networkPolicy: { enabled: false },
    },
    flags: [
      '--disable-network-policy',
      '--log-level=warn',
      '--default-service-account=true',
      '--fleet-secret=ns/on',
      '--fleet-branch-prefix=no/',
      '--',
      '--shard',
      'null',
    ],
  },
];

describe('the Helm chart of stackflux', () => {
  it(`charts/${CHART_NAME} is up to date (run: node hack/gen-chart.ts)`, () => {
    const expected = chartFiles();
    const actual = readdirSync(chartDir, { recursive: true, encoding: 'utf8' })
      .filter((f) => /\.(yaml|json)$/.test(f))
      .sort();
    assert.deepEqual(actual, [...expected.keys()].sort());
    for (const [name, text] of expected)
      assert.ok(
        readFileSync(join(chartDir, name), 'utf8') === text,
        `charts/${CHART_NAME}/${name} is out of date`,
      );
  });

  it('the merged template tree gives installObjects() for combinations of toggles', () => {
    const tree = mergedInstallTree();
    const names = TOGGLES.map((t) => t.name);
    const all = 2 ** names.length - 1;
    // Every toggle alone, every pair, all but one, all, and a fixed pseudo-random sample (all
    // combinations take half a minute).
    const masks = new Set<number>([0, all]);
    for (let i = 0; i < names.length; i++) {
      masks.add(all & ~(1 << i));
      for (let j = i; j < names.length; j++) masks.add((1 << i) | (1 << j));
    }
    let seed = 24;
    for (let k = 0; k < 400; k++) {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      masks.add((seed >>> 10) & all); // the high bits: the low ones of this generator repeat soon
    }
    let checked = 0;
    for (const mask of masks) {
      const on = new Set(names.filter((_, i) => (mask >> i) & 1));
      // A toggle whose prerequisite is off is the same as off (its Helm condition implies the other).
      for (const t of TOGGLES) if (t.requires !== undefined && !on.has(t.requires)) on.delete(t.name);
      assert.deepEqual(valueWith(tree, on), installObjects(placeholderOptions(on)), [...on].join(','));
      checked++;
    }
    assert.ok(checked > 450, `${checked} combinations`);
  });

  for (const c of CASES)
    it(`helm template gives stackflux install's objects: ${c.name}`, async () => {
      const helm = helmTemplate(c.values);
      assert.equal(helm.status, 0, helm.stderr);
      const rendered = documents(helm.stdout);
      const expected = await install(c.flags);
      assert.ok(expected.some((o) => o.kind === 'CustomResourceDefinition'));
      assert.deepEqual(sorted(rendered), sorted(expected));
    });

  it('a literal reads back as itself through helm: YAML words, numbers, braces, quotes', () => {
    const literals = [
      'on',
      'No',
      'null',
      '8080',
      '1Gi',
      'a {{ .Values.x }} b',
      '}}',
      'say "hi"\n',
      'x: y',
      7,
      true,
    ];
    const work = mkdtempSync(join(tmpdir(), 'stackflux-chart-literals-'));
    writeFileSync(join(work, 'Chart.yaml'), 'apiVersion: v2\nname: literals\nversion: 0.0.1\n');
    mkdirSync(join(work, 'templates'));
    const data = literals.map((l, i) => `  k${i}: ${scalarText(l)}`).join('\n');
    writeFileSync(join(work, 'templates', 'cm.yaml'), `kind: Literals\ndata:\n${data}\n`);
    const helm = runHelm(['template', 'x', work], work);
    assert.equal(helm.status, 0, helm.stderr);
    const [doc] = documents(helm.stdout) as unknown as { data: Record<string, unknown> }[];
    assert.deepEqual(Object.values(doc?.data ?? {}), literals);
  });

  it('helm lint --strict passes', () => {
    const lint = runHelm(['lint', '--strict', chartDir], chartDir);
    assert.equal(lint.status, 0, lint.stdout + lint.stderr);
  });

  for (const [what, values, field] of [
    [
      'a runtime extension mode install refuses',
      { runtimeExtension: { certificate: 'self-signed' } },
      '/runtimeExtension/certificate',
    ],
    ['a log level run refuses', { logLevel: 'verbose' }, '/logLevel'],
    ['a misspelt value', { replica: 2 }, 'replica'],
    ['replicas that are not a number', { replicas: 'two' }, '/replicas'],
    [
      'two replicas without leader election',
      { replicas: 2, leaderElection: { enabled: false } },
      '/replicas',
    ],
    [
      'a port open to no peers (NetworkPolicy: from anywhere)',
      { networkPolicy: { metrics: { from: [] } } },
      '/networkPolicy/metrics/from',
    ],
  ] as const)
    it(`values.schema.json: helm refuses ${what}, naming it`, () => {
      const helm = helmTemplate(values);
      assert.notEqual(helm.status, 0);
      assert.match(helm.stderr, /schema/);
      assert.ok(helm.stderr.includes(field), helm.stderr);
    });
});

describe('stackflux install: the NetworkPolicy of the controller pod (issue 31 F9)', () => {
  const policyOf = async (flags: string[]) => (await install(flags)).find((o) => o.kind === 'NetworkPolicy');
  type Rule = { from: unknown[]; ports: { port: unknown }[] };
  const ingress = (np: Obj | undefined) =>
    (((np?.spec ?? {}) as { ingress?: Rule[] }).ingress ?? []).map((r) => [
      r.ports.map((p) => p.port).join(','),
      r.from,
    ]);
  const ns = (n: string) => ({ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': n } } });

  it('by default: the webhook from the ingress controller, /metrics from monitoring; egress unrestricted', async () => {
    const np = await policyOf([]);
    assert.ok(np, 'install --export has a NetworkPolicy');
    assert.deepEqual((np.spec as { podSelector: unknown }).podSelector, {
      matchLabels: { 'app.kubernetes.io/name': 'stackflux', 'app.kubernetes.io/part-of': 'stackflux' },
    });
    assert.deepEqual((np.spec as { policyTypes: string[] }).policyTypes, ['Ingress']);
    assert.deepEqual(ingress(np), [
      ['http-webhook', [ns('ingress-nginx')]],
      ['http-metrics', [ns('monitoring')]],
    ]);
  });

  it('the runtime extension port only from Cluster API; no rule for a port that is not served', async () => {
    const np = await policyOf(['--runtime-extension=secret', '--webhook-secret-name=']);
    assert.deepEqual(ingress(np), [
      ['https-hooks', [ns('capi-system')]],
      ['http-metrics', [ns('monitoring')]],
    ]);
  });

  it('an egress allow-list: DNS, the API server endpoint port and the CIDRs, nothing else', async () => {
    const np = await policyOf(['--network-policy-egress-cidrs=10.0.0.0/8']);
    const spec = np?.spec as { policyTypes: string[]; egress: unknown[] };
    assert.deepEqual(spec.policyTypes, ['Ingress', 'Egress']);
    assert.deepEqual(spec.egress, [
      {
        ports: [
          { protocol: 'UDP', port: 53 },
          { protocol: 'TCP', port: 53 },
        ],
      },
      { ports: [{ protocol: 'TCP', port: 6443 }] },
      { to: [{ ipBlock: { cidr: '10.0.0.0/8' } }] },
    ]);
  });

  it('--disable-network-policy leaves it out', async () => {
    assert.equal(await policyOf(['--disable-network-policy']), undefined);
  });
});

describe('stackflux install: the flags the chart mirrors refuse bad values, naming the flag', () => {
  for (const [flags, message] of [
    [['--name=Not_A_Label'], /--name "Not_A_Label" is not a DNS label/],
    [['--replicas=-1'], /--replicas must be an integer of at least 0/],
    [['--replicas=1.5'], /--replicas must be an integer of at least 0/],
    [['--metrics-port=8081'], /--metrics-port must be a port other than 8081/],
    [['--metrics-port=70000'], /--metrics-port must be a port/],
    [['--log-level=verbose'], /--log-level must be debug, info, warn, error/],
    [['--node-selector=linux'], /--node-selector: "linux" is not KEY=VALUE/],
    [['--tolerations={"key":"a"}'], /--tolerations must be a JSON list of objects/],
    [['--affinity=nodeAffinity'], /--affinity: not JSON/],
    [['--replicas=2', '--disable-leader-election'], /--replicas above 1 needs leader election/],
    [
      ['--network-policy-metrics-namespaces='],
      /--network-policy-metrics-namespaces must name at least one namespace/,
    ],
    [['--network-policy-webhook-namespaces=Bad_NS'], /"Bad_NS" is not a namespace name/],
    [['--network-policy-egress-cidrs=10.0.0.1'], /"10.0.0.1" is not a CIDR/],
  ] as const)
    it(flags.join(' '), async () => {
      const c = captureIO();
      assert.equal(await main(['install', '--export', ...flags], c.io), 2);
      assert.match(c.err(), message);
    });
});
