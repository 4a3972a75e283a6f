import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import type { ClusterAddon } from '../../../controller/api/clusteraddon.ts';
import type { ClusterStack, ClusterStackSpec } from '../../../controller/api/clusterstack.ts';
import type { ClusterStackRelease } from '../../../controller/api/clusterstackrelease.ts';
import { allCrds, kinds, objectSchema, renderCrdFiles } from '../../../controller/api/crds.ts';
import { INPUT_RESOURCES, OUTPUT_RESOURCES } from '../../../controller/api/resources.ts';
import type { JSONSchemaProps } from '../../../controller/api/schema.ts';
import { providerConfig, providerObjectKind } from '../../../controller/reconcilers/provider.ts';
import { kubernetesAjv } from '../../support/crd-schema.ts';

// Reads crds/ (the generated files are what is checked here).
const crdDir = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'crds');

function validator(kind: string) {
  const def = kinds.find((k) => k.kind === kind);
  assert.ok(def);
  return kubernetesAjv().compile(objectSchema(def));
}

describe('CRDs', () => {
  it('crds/ is up to date (run: node hack/gen-crds.ts)', () => {
    const expected = renderCrdFiles();
    const actual = readdirSync(crdDir)
      .filter((f) => f.endsWith('.yaml'))
      .sort();
    assert.deepEqual(actual, [...expected.keys()]);
    for (const [name, text] of expected) {
      assert.ok(
        readFileSync(join(crdDir, name), 'utf8') === text,
        `crds/${name} is out of date: run node hack/gen-crds.ts`,
      );
    }
  });

  it('defines the three kinds, namespaced, with status subresource and short names', () => {
    const crds = allCrds();
    assert.deepEqual(
      crds.map((c) => c.metadata.name),
      ['clusterstacks.stackflux.io', 'clusterstackreleases.stackflux.io', 'clusteraddons.stackflux.io'],
    );
    assert.deepEqual(
      kinds.map((k) => k.shortNames),
      [['csk'], ['cskr'], ['caddon']],
    );
    for (const c of crds) {
      assert.equal(c.spec.scope, 'Namespaced');
      assert.equal(c.spec.group, 'stackflux.io');
      const [v] = c.spec.versions as { name: string; subresources: unknown }[];
      assert.equal(v?.name, 'v1alpha1');
      assert.deepEqual(v?.subresources, { status: {} });
    }
  });

  it('ClusterStack has the printer columns of issues 4 and 12 (Suspended from spec.suspend)', () => {
    const def = kinds.find((k) => k.kind === 'ClusterStack');
    assert.deepEqual(
      def?.printerColumns.map((c) => c.name),
      [
        'Provider',
        'Stack',
        'K8s',
        'Channel',
        'Latest',
        'Usable',
        'Rollout',
        'Suspended',
        'Ready',
        'Reason',
        'Age',
      ],
    );
    assert.equal(def?.printerColumns.find((c) => c.name === 'Suspended')?.jsonPath, '.spec.suspend');
  });

  it('schemas are structural: every node has a type (or preserves unknown fields, or is int-or-string)', () => {
    const walk = (s: JSONSchemaProps, path: string): void => {
      assert.ok(
        s.type !== undefined ||
          s['x-kubernetes-preserve-unknown-fields'] === true ||
          s['x-kubernetes-int-or-string'] === true,
        `${path} has no type`,
      );
      for (const [k, v] of Object.entries(s.properties ?? {})) walk(v, `${path}.${k}`);
      if (s.items) walk(s.items, `${path}[]`);
      for (const r of s.required ?? []) assert.ok(s.properties?.[r], `${path} requires unknown ${r}`);
      for (const k of s['x-kubernetes-list-map-keys'] ?? []) {
        assert.ok(s.items?.required?.includes(k), `${path}: list-map key ${k} must be required`);
      }
    };
    for (const def of kinds) walk(objectSchema(def), def.kind);
  });
});

describe('schemas and TypeScript types agree', () => {
  // Objects typed with the derived types must pass the schema: compile-time + run-time check.
  const spec: ClusterStackSpec = {
    provider: 'docker',
    name: 'ferrol',
    kubernetesVersion: '1.30',
    channel: 'custom',
    versions: ['v0-sha.abc1234', 'v2'],
    autoSubscribe: false,
    noProvider: true,
    providerRef: { apiVersion: 'v1', kind: 'X', name: 'p', namespace: 'n' },
    source: {
      git: { url: 'https://git.example.com/s.git', secretRef: { name: 'c' } },
      path: 'stacks/ferrol',
    },
    interval: '1m30s',
    timeout: '10m',
    suspend: false,
    addons: [{ name: 'cni', enabled: false }],
    values: { cni: { mtu: 1400 } },
    rollout: { strategy: 'Manual' },
  };
  const csk: ClusterStack = {
    apiVersion: 'stackflux.io/v1alpha1',
    kind: 'ClusterStack',
    metadata: { name: 'ferrol', namespace: 'team' },
    spec,
    status: {
      observedGeneration: 1,
      latestRelease: 'docker-ferrol-1-30-v2',
      usableVersions: 'v1, v2',
      summary: [{ name: 'docker-ferrol-1-30-v2', version: 'v2', ready: true, latest: true, clusters: 0 }],
      source: {
        url: 'u',
        tags: 3,
        matching: 1,
        ignored: 1,
        malformed: 1,
        malformedTags: [{ tag: 't', reason: 'r' }],
      },
      conditions: [
        {
          type: 'Ready',
          status: 'True',
          reason: 'Succeeded',
          message: '',
          lastTransitionTime: '2025-01-01T00:00:00Z',
        },
      ],
    },
  };
  const cskr: ClusterStackRelease = {
    apiVersion: 'stackflux.io/v1alpha1',
    kind: 'ClusterStackRelease',
    metadata: { name: 'docker-ferrol-1-30-v2' },
    spec: {
      clusterStack: 'ferrol',
      tag: 'docker-ferrol-1-30-v2',
      version: 'v2',
      clusterClass: 'docker-ferrol-1-30-v2',
      kubernetesVersion: '1.30',
      source: { url: 'https://git.example/stacks.git', secretRef: { name: 's' }, path: 'p' },
    },
    status: {
      commit: 'a',
      kubernetesVersion: 'v1.30.4',
      gitRepository: 'g',
      kustomization: 'k',
      clusters: 1,
    },
  };
  const caddon: ClusterAddon = {
    apiVersion: 'stackflux.io/v1alpha1',
    kind: 'ClusterAddon',
    metadata: { name: 'prod' },
    spec: {
      cluster: 'prod',
      release: 'docker-ferrol-1-30-v2',
    },
    status: {
      release: 'r',
      fleetCommit: 'c',
      addons: [{ name: 'cni', ready: true, lastAppliedRevision: 'x' }],
    },
  };

  it('valid typed objects pass their schema', () => {
    for (const [kind, obj] of [
      ['ClusterStack', csk],
      ['ClusterStackRelease', cskr],
      ['ClusterAddon', caddon],
    ] as const) {
      const v = validator(kind);
      assert.ok(v(obj), `${kind}: ${JSON.stringify(v.errors)}`);
    }
  });

  const invalid: [string, (s: Record<string, unknown>) => void][] = [
    ['provider with a dash', (s) => Object.assign(s, { provider: 'my-docker' })],
    ['kubernetesVersion with patch', (s) => Object.assign(s, { kubernetesVersion: '1.30.1' })],
    ['unknown channel', (s) => Object.assign(s, { channel: 'beta' })],
    ['bad version', (s) => Object.assign(s, { versions: ['2'] })],
    ['bad interval', (s) => Object.assign(s, { interval: '5 minutes' })],
    ['credentials in a URL', (s) => Object.assign(s, { source: { git: { url: 'https://u:p@host/r.git' } } })],
    ['file URL', (s) => Object.assign(s, { source: { git: { url: 'file:///tmp/r' } } })],
    // Issue 11 defect 7: a user or host starting with "-" would reach git (and ssh) as an option.
    [
      'ssh host starting with -',
      (s) => Object.assign(s, { source: { git: { url: 'ssh://-oProxyCommand=x/r' } } }),
    ],
    ['ssh user starting with -', (s) => Object.assign(s, { source: { git: { url: 'ssh://-u@h/r' } } })],
    ['https host starting with -', (s) => Object.assign(s, { source: { git: { url: 'https://-h/r.git' } } })],
    ['scp-style URL starting with -', (s) => Object.assign(s, { source: { git: { url: '-u@h:r' } } })],
    ['path with ..', (s) => Object.assign(s, { source: { git: { url: 'https://h/r' }, path: '../x' } })],
    ['missing source', (s) => delete s.source],
  ];
  for (const [name, mutate] of invalid) {
    it(`ClusterStack schema rejects ${name}`, () => {
      const copy = structuredClone(csk) as unknown as { spec: Record<string, unknown> };
      mutate(copy.spec);
      assert.equal(validator('ClusterStack')(copy), false);
    });
  }

  it('ClusterStackRelease schema rejects a source URL whose host starts with -', () => {
    const copy = structuredClone(cskr);
    copy.spec.source = { url: 'ssh://-oProxyCommand=touch$IFS/tmp/x/r' };
    assert.equal(validator('ClusterStackRelease')(copy), false);
  });

  it('ssh URLs with a user are accepted', () => {
    const copy = structuredClone(csk);
    copy.spec.source = { git: { url: 'ssh://git@git.example.com:2222/stacks.git' } };
    assert.equal(validator('ClusterStack')(copy), true);
  });
});

describe('docs/migration.md migration example (issue 15)', () => {
  // docs/migration.md claims a cluster-stack-operator ClusterStack with providerRef moves over by
  // changing apiVersion and adding source: the two documents of its migration section are checked here.
  const guide = readFileSync(join(crdDir, '..', 'docs', 'migration.md'), 'utf8');
  const start = guide.indexOf('## Migrating a ClusterStack');
  assert.ok(start >= 0, 'docs/migration.md has the section "Migrating a ClusterStack"');
  const section = guide.slice(start);
  const docs = [...section.matchAll(/```yaml\n([\s\S]*?)```/g)]
    .slice(0, 2)
    .map((m) => parse(m[1] ?? '') as ClusterStack);

  it("differs from the operator's ClusterStack only in apiVersion and source", () => {
    const [cso, ours] = docs;
    assert.ok(cso && ours, 'two YAML documents in the migration section');
    assert.equal((cso as { apiVersion: string }).apiVersion, 'clusterstack.x-k8s.io/v1alpha1');
    const strip = (d: ClusterStack) => {
      const { apiVersion: _a, ...rest } = structuredClone(d);
      const { source: _s, ...spec } = rest.spec;
      return { ...rest, spec };
    };
    assert.deepEqual(strip(ours), strip(cso));
  });

  it('is a valid stackflux ClusterStack whose providerRef is used', () => {
    const ours = docs[1];
    assert.ok(ours);
    const validate = validator('ClusterStack');
    assert.ok(validate(ours), JSON.stringify(validate.errors));
    const config = providerConfig(ours);
    assert.equal(config.mode, 'ref');
    assert.equal(
      config.mode === 'ref' ? providerObjectKind(config.ref.kind) : '',
      'OpenStackClusterStackRelease',
    );
    assert.ok(
      INPUT_RESOURCES.some((r) => r.group === 'infrastructure.clusterstack.x-k8s.io') &&
        OUTPUT_RESOURCES.some(
          (r) => r.group === 'infrastructure.clusterstack.x-k8s.io' && r.verbs.includes('create'),
        ),
      "the operator providers' group is in the generated RBAC",
    );
  });
});
