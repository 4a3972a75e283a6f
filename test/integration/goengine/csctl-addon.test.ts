// The csctl addon renderer (controller/rendering/csctl.ts) against the reference pipeline CSO runs:
// the values template through native Go text/template with CSO's function map, then the real helm
// CLI (`helm template --include-crds --kube-version <k8s> cluster-addon <chart> --namespace
// kube-system -f values`) on the stack's files; the objects must be the same, in the same order.
// Plus the corners: values unwrapped from `values: |` or used whole, `<no value>` for a missing
// key, the old single-chart layout (also with csctl's placeholders, compared with the folder csctl
// packages), errors naming the file, and the render pool's limits.
// npm test: uses no test environment
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ReleaseTree } from '../../../controller/api/release.ts';
import { readReleaseDescription, releasedTree } from '../../../controller/releases/format.ts';
import { parseReleaseTag } from '../../../controller/releases/tags.ts';
import { binaryFilesOf } from '../../../controller/releases/tree.ts';
import { RenderCache, RenderPool, withBoundedRenders } from '../../../controller/rendering/bounded.ts';
import {
  type CsctlAddonInput,
  csctlAddonValues,
  type RenderResult,
  renderCsctlAddon,
} from '../../../controller/rendering/index.ts';
import { readStackDir } from '../../../hack/lib/stack-dir.ts';
import { csctlReleasedCopy, PLACEHOLDER_STACK } from '../../support/csctl-substitute.ts';
import { csoAddonReference, goEngineBuild, runNative } from '../../support/goengine.ts';

const STACKS = join(import.meta.dirname, '..', '..', '..', 'stacks');
const NEW_LAYOUT = join(STACKS, 'docker-csoferrol-1-30');
const OLD_LAYOUT = join(STACKS, 'docker-csoferrol-1-30-umbrella');
const TAG = 'docker-csoferrol-1-30-v1';

const cluster = {
  apiVersion: 'cluster.x-k8s.io/v1beta1',
  kind: 'Cluster',
  metadata: { name: 'Prod-1', namespace: 'tenant-a', uid: 'u-1' },
  spec: {
    clusterNetwork: { pods: { cidrBlocks: ['10.244.0.0/16'] } },
    controlPlaneEndpoint: { host: '172.18.0.3', port: 6443 },
  },
};

/** The csctl inputs of every addon the release describes, for `cluster`. */
function inputsOf(dir: string, c: Record<string, unknown> = cluster, release = TAG): CsctlAddonInput[] {
  // The folder as the controller reads the Git tag (csctl's placeholders replaced).
  const tree = releasedTree(readStackDir(dir), release);
  const tag = parseReleaseTag(release);
  assert.ok(tag.ok);
  const read = readReleaseDescription(tree, tag.value);
  assert.ok(read.ok, read.ok ? '' : read.errors.join('; '));
  const seen = new Set<string>();
  return read.value.addons.flatMap((a) => {
    if (seen.has(a.name)) return [];
    seen.add(a.name);
    return [
      {
        format: 'csctl' as const,
        tree,
        binary: binaryFilesOf(tree),
        addon: a.name,
        chartPath: a.path,
        ...(a.valuesTemplate !== undefined ? { valuesTemplate: a.valuesTemplate } : {}),
        kubernetesVersion: read.value.kubernetesVersion,
        cluster: c,
      },
    ];
  });
}

/** The objects of a render, in the order helm printed them (files are grouped per source). */
function objectsOf(result: RenderResult): unknown[] {
  assert.ok(result.ok, result.ok ? '' : result.message);
  return result.objects;
}

function sortById(objects: unknown[]): unknown[] {
  const id = (o: unknown) => {
    const x = o as { kind: string; metadata: { name: string; namespace?: string } };
    return `${x.kind}/${x.metadata.namespace ?? ''}/${x.metadata.name}`;
  };
  return [...objects].sort((a, b) => (id(a) < id(b) ? -1 : id(a) > id(b) ? 1 : 0));
}

function failure(result: RenderResult) {
  assert.equal(result.ok, false);
  return result as Extract<RenderResult, { ok: false }>;
}

function withTemplate(input: CsctlAddonInput, text: string): CsctlAddonInput {
  const file = input.valuesTemplate ?? `${input.chartPath}overwrite.yaml`;
  const tree: ReleaseTree = new Map([...input.tree, [file, text]]);
  return { ...input, tree, valuesTemplate: file };
}

describe('csctl addons rendered as the cluster-stack-operator renders them', () => {
  const saved = process.env.STACKFLUX_GO_ENGINE;
  before(() => {
    process.env.STACKFLUX_GO_ENGINE = join(goEngineBuild(), 'goengine.wasm');
  });
  after(() => {
    if (saved === undefined) delete process.env.STACKFLUX_GO_ENGINE;
    else process.env.STACKFLUX_GO_ENGINE = saved;
  });

  for (const [layout, dir] of [
    ['new layout (one chart per addon, overwrite.yaml)', NEW_LAYOUT],
    ['old layout (one umbrella chart, cluster-addon-values.yaml)', OLD_LAYOUT],
  ] as const) {
    it(`${layout}: the same objects as native Go + helm template`, () => {
      const inputs = inputsOf(dir);
      assert.ok(inputs.length > 0);
      for (const input of inputs) {
        const ours = objectsOf(renderCsctlAddon(input));
        assert.ok(ours.length > 0, `${input.addon} renders objects`);
        assert.deepEqual(sortById(ours), sortById(csoAddonReference(dir, input)), input.addon);
      }
    });
  }

  it('old layout with csctl placeholders: the same objects as helm on the folder csctl packages', () => {
    const { dir, tag, version } = PLACEHOLDER_STACK;
    const packaged = csctlReleasedCopy(dir, version);
    const inputs = inputsOf(dir, cluster, tag);
    assert.deepEqual(
      inputs.map((i) => i.addon),
      ['cluster-addon'],
    );
    for (const input of inputs) {
      const ours = objectsOf(renderCsctlAddon(input));
      const reference = csoAddonReference(packaged, { ...input, tree: readStackDir(packaged) });
      assert.deepEqual(sortById(ours), sortById(reference));
      assert.ok(JSON.stringify(ours).includes('"cluster-stack-version":"v2"'));
    }
  });

  it('per-Cluster values reach the objects (the Cluster name and pod CIDR of the live Cluster)', () => {
    const cni = inputsOf(NEW_LAYOUT).find((i) => i.addon === 'cni');
    assert.ok(cni);
    const result = renderCsctlAddon(cni);
    assert.ok(result.ok);
    const config = result.objects.find((o) => o.kind === 'ConfigMap') as unknown as {
      data: Record<string, string>;
    };
    assert.equal(config.data.clusterName, 'Prod-1');
    assert.equal(config.data.podCIDR, '10.244.0.0/16');
  });

  it('values: a `values:` string is unwrapped; an output without one is the values as it is', () => {
    const cni = inputsOf(NEW_LAYOUT).find((i) => i.addon === 'cni');
    assert.ok(cni);
    const wrapped = csctlAddonValues(withTemplate(cni, 'values: |\n  a: {{ .Cluster.metadata.name }}\n'));
    assert.deepEqual(wrapped, { ok: true, values: 'a: Prod-1\n' });
    const whole = csctlAddonValues(withTemplate(cni, 'a: {{ .Cluster.metadata.name }}\nb: 1\n'));
    assert.deepEqual(whole, { ok: true, values: 'a: Prod-1\nb: 1\n' });
    // A block scalar inside the values keeps its line break, as yaml.v3 keeps it.
    const nested = csctlAddonValues(withTemplate(cni, 'values: |\n  a: |\n    x\n'));
    assert.deepEqual(nested, { ok: true, values: 'a: |\n  x\n' });
    // A `values:` that is not a string is no wrapper: the whole output is the values (CSO's type check).
    const mapping = csctlAddonValues(withTemplate(cni, 'values:\n  a: 1\n'));
    assert.deepEqual(mapping, { ok: true, values: 'values:\n  a: 1\n' });
  });

  it('a missing key renders as Go does: <no value> (no ControlPlane on this Cluster)', () => {
    const cni = inputsOf(NEW_LAYOUT).find((i) => i.addon === 'cni');
    assert.ok(cni);
    const values = csctlAddonValues(
      withTemplate(cni, 'values: |\n  a: "{{ .Cluster.spec.nothing }}"\n  b: "{{ .ControlPlane }}"\n'),
    );
    const native = runNative({
      op: 'goTemplate',
      name: 'x',
      text: '{{ .Cluster.spec.nothing }}|{{ .ControlPlane }}',
      data: { Cluster: cluster },
      funcs: 'cso',
      options: [],
    });
    const [a, b] = String(native.output).split('|');
    assert.deepEqual(values, { ok: true, values: `a: "${a}"\nb: "${b}"\n` });
    assert.equal(a, '<no value>');
  });

  it('a document ending in a | block keeps its final line break, as CSO reads helm template output', () => {
    const cni = inputsOf(NEW_LAYOUT).find((i) => i.addon === 'cni');
    assert.ok(cni);
    const file = `${cni.chartPath}templates/envoy.yaml`;
    const template =
      'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: envoy\ndata:\n  bootstrap.json: |\n    {"admin": {}}\n';
    const tree: ReleaseTree = new Map([...cni.tree, [file, template]]);
    const input = { ...cni, tree };
    const ours = objectsOf(renderCsctlAddon(input));
    const envoy = ours.find((o) => (o as { metadata: { name: string } }).metadata.name === 'envoy') as {
      data: Record<string, string>;
    };
    assert.equal(envoy.data['bootstrap.json'], '{"admin": {}}\n');
    const dir = mkdtempSync(join(tmpdir(), 'csctl-block-'));
    cpSync(NEW_LAYOUT, dir, { recursive: true });
    mkdirSync(join(dir, cni.chartPath, 'templates'), { recursive: true });
    writeFileSync(join(dir, file), template);
    assert.deepEqual(sortById(ours), sortById(csoAddonReference(dir, input)));
  });

  it('errors name the file: a template that does not parse, a failing function, output that is no mapping', () => {
    const cni = inputsOf(NEW_LAYOUT).find((i) => i.addon === 'cni');
    assert.ok(cni);
    const parse = failure(renderCsctlAddon(withTemplate(cni, 'values: {{ .Cluster.metadata.name ')));
    assert.equal(parse.reason, 'TemplateError');
    assert.match(parse.message, /^cluster-addon\/cni\/overwrite\.yaml: .*unclosed action/);
    const fn = failure(renderCsctlAddon(withTemplate(cni, '{{ fail "no CIDR" }}')));
    assert.equal(fn.reason, 'TemplateError');
    assert.match(fn.message, /^cluster-addon\/cni\/overwrite\.yaml: .*no CIDR/);
    const list = failure(renderCsctlAddon(withTemplate(cni, '- a\n- b\n')));
    assert.equal(list.reason, 'InvalidValues');
    assert.match(list.message, /^cluster-addon\/cni\/overwrite\.yaml: renders to a list/);
    const chart = failure(renderCsctlAddon({ ...cni, chartPath: 'cluster-addon/missing/' }));
    assert.equal(chart.reason, 'AddonNotFound');
    assert.match(chart.message, /cluster-addon\/missing\/Chart\.yaml/);
  });

  it('the output cap holds on the csctl path', () => {
    const cni = inputsOf(NEW_LAYOUT).find((i) => i.addon === 'cni');
    assert.ok(cni);
    const result = failure(renderCsctlAddon(cni, { maxOutputBytes: 200 }));
    assert.equal(result.reason, 'LimitExceeded');
    assert.match(result.message, /--render-max-output/);
  });

  describe('in the render processes (time budget, output cap, fairness as for Handlebars)', () => {
    let pool: RenderPool;
    before(() => {
      pool = new RenderPool({ workers: 1, timeoutMs: 20_000, coolDownAfter: 100 });
    });
    after(async () => {
      await pool.close();
    });

    it('renders a csctl addon in a render process, the same as in-line', async () => {
      const metrics = inputsOf(NEW_LAYOUT).find((i) => i.addon === 'metrics');
      assert.ok(metrics);
      const pooled = await pool.render(metrics, { namespace: 'tenant-a' });
      assert.deepEqual(objectsOf(pooled), objectsOf(renderCsctlAddon(metrics)));
    });

    it('a csctl render kept in the RenderCache is not rendered again by the next reconcile; a changed Cluster is', async () => {
      const cache = new RenderCache();
      const reconcile = (c: Record<string, unknown>) =>
        withBoundedRenders(pool, (render) => inputsOf(NEW_LAYOUT, c).map(render), new Map(), {}, cache);
      const first = await reconcile(cluster);
      assert.ok(first.every((r) => r.ok));
      assert.deepEqual([cache.hits, cache.size], [0, 2]);
      // Another reconcile (its own map of renders, as each reconcile has) of the same inputs.
      assert.deepEqual(await reconcile(cluster), first);
      assert.equal(cache.hits, 2);
      const renamed = await reconcile({ ...cluster, metadata: { ...cluster.metadata, name: 'Prod-2' } });
      assert.equal(cache.hits, 2, 'a changed Cluster is rendered, not answered from the cache');
      assert.equal(cache.size, 4);
      assert.notDeepEqual(renamed.map(objectsOf), first.map(objectsOf));
      assert.deepEqual(
        renamed.map(objectsOf),
        inputsOf(NEW_LAYOUT, { ...cluster, metadata: { ...cluster.metadata, name: 'Prod-2' } }).map((i) =>
          objectsOf(renderCsctlAddon(i)),
        ),
      );
    });

    it('a values template that never ends is stopped by the time budget, naming the file', async () => {
      const quick = new RenderPool({ workers: 1, timeoutMs: 1_500 });
      try {
        const cni = inputsOf(NEW_LAYOUT).find((i) => i.addon === 'cni');
        assert.ok(cni);
        // Warm the process (the engine loads once per process), then the endless template.
        await quick.render(cni);
        // 10^10 iterations over two small lists: endless in time, constant in memory (a single
        // `until 2000000000` allocates its whole list and hits the memory cap first).
        const endless = withTemplate(
          cni,
          '{{ range until 100000 }}{{ range until 100000 }}{{ end }}{{ end }}',
        );
        const result = failure(await quick.render(endless, { namespace: 'tenant-a' }));
        assert.equal(result.reason, 'LimitExceeded');
        assert.match(result.message, /cluster-addon\/cni\/overwrite\.yaml: .*--render-timeout/);
      } finally {
        await quick.close();
      }
    });
  });
});
