import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  addonOrder,
  checkAddonGraph,
  type RenderAddonInput,
  type RenderResult,
  renderAddon,
} from '../../../controller/rendering/index.ts';
import { parseObjects } from '../../../controller/rendering/output.ts';
import { configMap, sampleCluster, stackOf, treeOf } from './fixtures.ts';

function input(files: Record<string, string>, extra: Partial<RenderAddonInput> = {}): RenderAddonInput {
  return {
    tree: treeOf(files),
    stack: stackOf([{ name: 'a' }]),
    addon: 'a',
    cluster: sampleCluster(),
    ...extra,
  };
}

function ok(result: RenderResult) {
  if (!result.ok) assert.fail(`expected success, got ${result.reason}: ${result.message}`);
  return result;
}

function failed(result: RenderResult) {
  if (result.ok) assert.fail('expected a failure');
  return result;
}

const SHOW_VALUES = configMap('  values: {{quote (toJson Values)}}');

describe('renderAddon: files', () => {
  it('renders .hbs templates, copies other YAML, leaves inputs and non-YAML out, sorted', () => {
    const result = ok(
      renderAddon(
        input({
          'z-config.yaml.hbs': configMap('  name: {{Cluster.metadata.name}}', 'z'),
          'b.yml': '# kept as written\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: sa}\n',
          'sub/a.yaml': configMap('  k: v', 'sub'),
          'values.yaml': 'x: 1\n',
          'values.schema.json': '{"type": "object"}',
          'README.md': '# not output',
        }),
      ),
    );
    assert.deepEqual([...result.files.keys()], ['b.yml', 'sub/a.yaml', 'z-config.yaml']);
    assert.equal(
      result.files.get('b.yml'),
      '# kept as written\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: sa}\n',
    );
    assert.equal(
      result.files.get('z-config.yaml'),
      'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: z\ndata:\n  name: alpha\n',
    );
    assert.deepEqual(
      result.objects.map((o) => `${o.kind}/${o.metadata.name}`),
      ['ServiceAccount/sa', 'ConfigMap/sub', 'ConfigMap/z'],
    );
  });
  it('leaves out files that render to no document, keeps multi-document files in order', () => {
    const result = ok(
      renderAddon(
        input({
          'maybe.yaml.hbs': `{{#if Values.enabled}}\n${configMap('  a: b', 'maybe')}{{/if}}\n`,
          'many.yaml': `---\n${configMap('  a: b', 'one')}---\n---\n${configMap('  a: b', 'two')}`,
        }),
      ),
    );
    assert.deepEqual([...result.files.keys()], ['many.yaml']);
    assert.deepEqual(
      result.objects.map((o) => o.metadata.name),
      ['one', 'two'],
    );
  });
  it("gives each file's objects as parseObjects reads its text, the same objects as the flat list", () => {
    const result = ok(
      renderAddon(
        input({
          'b.yaml.hbs': `${configMap('  a: {{Cluster.metadata.name}}', 'b1')}---\n${configMap('  a: b', 'b2')}`,
          'a.yaml': configMap('  a: b', 'a'),
          'none.yaml.hbs': '{{#if false}}x: 1{{/if}}\n',
        }),
      ),
    );
    const perFile = result.fileObjects ?? new Map();
    assert.deepEqual([...perFile.keys()], [...result.files.keys()]);
    for (const [file, objects] of perFile)
      assert.deepEqual(objects, parseObjects(file, result.files.get(file) ?? ''), file);
    assert.deepEqual([...perFile.values()].flat(), result.objects);
    assert.deepEqual(
      [...perFile].map(([f, os]) => [f, os.map((o: { metadata: { name: string } }) => o.metadata.name)]),
      [
        ['a.yaml', ['a']],
        ['b.yaml', ['b1', 'b2']],
      ],
    );
  });
  it('is deterministic and does not modify its inputs', () => {
    const cluster = sampleCluster();
    const before = JSON.stringify(cluster);
    const files = { 'x.yaml.hbs': SHOW_VALUES, 'values.yaml': 'b: 1\na: {c: 2}\n' };
    const clusterValues = { a: { a: { d: 3 } } };
    const first = ok(renderAddon(input(files, { cluster, clusterValues })));
    const second = ok(renderAddon(input(files, { cluster, clusterValues })));
    assert.deepEqual([...first.files], [...second.files]);
    assert.deepEqual(first.objects, second.objects);
    assert.equal(JSON.stringify(cluster), before);
    assert.deepEqual(clusterValues, { a: { a: { d: 3 } } });
  });
  it('passes ControlPlane, InfraCluster, Stack and Addon to templates', () => {
    const result = ok(
      renderAddon(
        input(
          {
            'x.yaml.hbs': configMap(
              '  cp: "{{ControlPlane.spec.replicas}}"\n  infra: {{InfraCluster.metadata.name}}\n  stack: {{Stack.provider}}-{{Stack.name}}-{{Stack.version}}\n  addon: {{Addon.name}}\n  ns: {{Addon.targetNamespace}}\n  deps: "{{Addon.dependsOn.length}}"',
            ),
          },
          {
            stack: stackOf([{ name: 'first' }, { name: 'a', targetNamespace: 'kube-system' }]),
            controlPlane: { metadata: { name: 'alpha-cp' }, spec: { replicas: 3 } },
            infraCluster: { metadata: { name: 'alpha-infra' } },
          },
        ),
      ),
    );
    assert.deepEqual(result.objects[0]?.data, {
      cp: '3',
      infra: 'alpha-infra',
      stack: 'docker-test-v1',
      addon: 'a',
      ns: 'kube-system',
      deps: '1',
    });
  });
});

describe('renderAddon: values', () => {
  const files = {
    'x.yaml.hbs': SHOW_VALUES,
    'values.yaml': 'level: default\nkeep: default\nnested: {a: default, b: default, list: [1, 2, 3]}\n',
  };
  function values(extra: Partial<RenderAddonInput>): unknown {
    const result = ok(renderAddon(input(files, extra)));
    return JSON.parse(
      String(result.objects[0]?.data && (result.objects[0].data as Record<string, string>).values),
    );
  }
  it('addon defaults < per-cluster < central; objects merge deeply, lists are replaced', () => {
    assert.deepEqual(
      values({
        clusterValues: {
          a: { level: 'cluster', nested: { a: 'cluster', list: [9] }, clusterOnly: true },
          other: { level: 'x' },
        },
        centralValues: { a: { level: 'central', nested: { b: 'central' } } },
      }),
      {
        level: 'central',
        keep: 'default',
        nested: { a: 'cluster', b: 'central', list: [9] },
        clusterOnly: true,
      },
    );
  });
  it('works without values.yaml and without per-addon entries', () => {
    const result = ok(
      renderAddon(input({ 'x.yaml.hbs': SHOW_VALUES }, { centralValues: { other: { x: 1 } } })),
    );
    assert.deepEqual(result.values, {});
  });
  it('rejects values that are not mappings', () => {
    const bad = failed(renderAddon(input(files, { clusterValues: { a: [1] } })));
    assert.equal(bad.reason, 'InvalidValues');
    assert.match(bad.message, /per-cluster values for addon "a" must be a mapping, got a list/);
    const badYaml = failed(renderAddon(input({ ...files, 'values.yaml': 'a: [\n' })));
    assert.equal(badYaml.reason, 'InvalidValues');
    assert.match(badYaml.message, /^cluster-addon\/a\/values\.yaml: invalid YAML/);
  });
  it('validates the merged values against values.schema.json before rendering', () => {
    const schema = JSON.stringify({
      type: 'object',
      additionalProperties: false,
      required: ['mtu', 'backend'],
      properties: {
        mtu: { type: 'integer', maximum: 9000 },
        backend: { enum: ['vxlan', 'host-gw'] },
        nested: { type: 'object', properties: { list: { type: 'array', items: { type: 'string' } } } },
      },
    });
    const withSchema = {
      // The template would fail on its own; the schema error must come first.
      'x.yaml.hbs': configMap('  x: {{Values.doesNotExist}}'),
      'values.yaml': 'mtu: 1450\nbackend: vxlan\n',
      'values.schema.json': schema,
    };
    const good = renderAddon(input({ ...withSchema, 'x.yaml.hbs': SHOW_VALUES }));
    assert.equal(good.ok, true);
    const result = failed(
      renderAddon(
        input(withSchema, {
          clusterValues: { a: { mtu: 65000, typo: 1, nested: { list: ['ok', 2] } } },
          centralValues: { a: { backend: 'geneve' } },
        }),
      ),
    );
    assert.equal(result.reason, 'ValuesSchemaFailed');
    assert.match(result.message, /^values of addon "a" fail cluster-addon\/a\/values\.schema\.json: /);
    assert.match(result.message, /Values\.typo is not allowed \(unknown field\)/);
    assert.match(result.message, /Values\.mtu must be <= 9000/);
    assert.match(result.message, /Values\.backend must be one of \["vxlan","host-gw"\]/);
    assert.match(result.message, /Values\.nested\.list\[1\] must be string/);
    const missing = failed(renderAddon(input({ ...withSchema, 'values.yaml': 'mtu: 1400\n' })));
    assert.match(missing.message, /Values\.backend is required/);
  });
  it('reports an unusable schema', () => {
    const notJson = failed(renderAddon(input({ ...files, 'values.schema.json': '{nope' })));
    assert.equal(notJson.reason, 'InvalidValues');
    assert.match(notJson.message, /values\.schema\.json: not a usable JSON schema/);
    const badSchema = failed(renderAddon(input({ ...files, 'values.schema.json': '{"type": "nonsense"}' })));
    assert.match(badSchema.message, /not a usable JSON schema/);
  });
});

describe('renderAddon: failures', () => {
  it('a missing field names the template file, line and path', () => {
    const result = failed(
      renderAddon(
        input({
          'cni.yaml.hbs': configMap('  a: b\n  cidr: {{Cluster.spec.clusterNetwork.pod.cidrBlocks.[0]}}'),
        }),
      ),
    );
    assert.equal(result.reason, 'TemplateError');
    assert.equal(
      result.message,
      'cluster-addon/a/cni.yaml.hbs:7:11: Cluster.spec.clusterNetwork.pod is not defined (in Cluster.spec.clusterNetwork.pod.cidrBlocks.[0])',
    );
  });
  it('invalid YAML output names the file and the line of the rendered text', () => {
    const result = failed(
      renderAddon(
        input({
          'x.yaml.hbs': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: {{Values.v}}\n',
          'values.yaml': 'v: "[unclosed"\n',
        }),
      ),
    );
    assert.equal(result.reason, 'InvalidOutput');
    assert.match(result.message, /^cluster-addon\/a\/x\.yaml\.hbs \(rendered\):\d+: invalid YAML: /);
    const dup = failed(
      renderAddon(
        input({ 'x.yaml': 'apiVersion: v1\nkind: ConfigMap\nkind: Secret\nmetadata: {name: x}\n' }),
      ),
    );
    assert.match(dup.message, /^cluster-addon\/a\/x\.yaml:3: invalid YAML: Map keys must be unique/);
  });
  it('non-object output fails with the file and document', () => {
    const scalar = failed(renderAddon(input({ 'x.yaml.hbs': '{{Cluster.metadata.name}}\n' })));
    assert.equal(scalar.reason, 'InvalidOutput');
    assert.equal(
      scalar.message,
      'cluster-addon/a/x.yaml.hbs (rendered) (document 1): expected a Kubernetes object (a mapping), got a string',
    );
    const list = failed(renderAddon(input({ 'x.yaml': `${configMap('  a: b')}---\n- a\n- b\n` })));
    assert.match(list.message, /\(document 2\): expected a Kubernetes object \(a mapping\), got a list/);
    const noKind = failed(renderAddon(input({ 'x.yaml': 'apiVersion: v1\nmetadata: {namespace: x}\n' })));
    assert.equal(
      noKind.message,
      'cluster-addon/a/x.yaml (document 1): not a Kubernetes object, missing kind, metadata.name',
    );
  });
  it('rejects duplicate objects, clashing output names, kustomization files and non-YAML templates', () => {
    const dup = failed(
      renderAddon(
        input({ 'a.yaml': configMap('  a: b', 'same'), 'b.yaml.hbs': configMap('  a: b', 'same') }),
      ),
    );
    assert.match(dup.message, /\/ConfigMap same is also defined in cluster-addon\/a\/a\.yaml/);
    const clash = failed(
      renderAddon(input({ 'a.yaml': configMap('  a: b'), 'a.yaml.hbs': configMap('  a: b') })),
    );
    assert.match(clash.message, /both produce cluster-addon\/a\/a\.yaml/);
    const kust = failed(renderAddon(input({ 'kustomization.yaml': 'resources: []\n' })));
    assert.match(kust.message, /must not ship a kustomization file/);
    const txt = failed(renderAddon(input({ 'notes.txt.hbs': 'hi' })));
    assert.match(txt.message, /a template must render a \.yaml or \.yml file/);
  });
  it('an addon not in stack.yaml or without files is not found', () => {
    assert.equal(
      failed(renderAddon(input({ 'x.yaml': configMap('  a: b') }, { addon: 'nope' }))).reason,
      'AddonNotFound',
    );
    const empty = failed(renderAddon({ ...input({}), stack: stackOf([{ name: 'a' }]) }));
    assert.equal(empty.reason, 'AddonNotFound');
    assert.match(empty.message, /no files under cluster-addon\/a\//);
  });
  it('never throws on hostile templates', () => {
    for (const source of ['{{#each}}', '{{#if}}{{/unless}}', '{{lookup}}', '{{{{raw}}}}', '{{Values.a.[}}']) {
      const result = renderAddon(input({ 'x.yaml.hbs': source }));
      assert.equal(result.ok, false, source);
    }
  });
});

describe('addonOrder', () => {
  it('uses declared dependsOn, else the previous addon', () => {
    const stack = stackOf([
      { name: 'cni', targetNamespace: 'kube-system' },
      { name: 'csi' },
      { name: 'metrics', dependsOn: ['cni'] },
      { name: 'free', dependsOn: [] },
      { name: 'last' },
    ]);
    assert.deepEqual(addonOrder(stack), [
      { name: 'cni', targetNamespace: 'kube-system', dependsOn: [] },
      { name: 'csi', dependsOn: ['cni'] },
      { name: 'metrics', dependsOn: ['cni'] },
      { name: 'free', dependsOn: [] },
      { name: 'last', dependsOn: ['free'] },
    ]);
    assert.deepEqual(checkAddonGraph(stack), []);
  });
  it('reports duplicates, unknown and self dependencies and cycles', () => {
    const problems = checkAddonGraph(
      stackOf([
        { name: 'a', dependsOn: ['c'] },
        { name: 'b', dependsOn: ['a', 'ghost'] },
        { name: 'c', dependsOn: ['b'] },
        { name: 'd', dependsOn: ['d'] },
        { name: 'd' },
      ]),
    );
    assert.deepEqual(problems, [
      'addon "d" is listed twice',
      'addon "b" depends on unknown addon "ghost"',
      'addon "d" depends on itself',
      'addons depend on each other in a cycle: a → c → b → a',
    ]);
  });
});

describe('renderAddon: fleet file names (issue 22)', () => {
  it('an addon file under a .git folder (any case) is InvalidOutput naming it, not a fleet file', () => {
    for (const folder of ['.git', '.GIT']) {
      const result = failed(
        renderAddon(
          input({ 'ok.yaml': configMap('  k: v'), [`${folder}/config.yaml`]: configMap('  k: v', 'g') }),
        ),
      );
      assert.equal(result.reason, 'InvalidOutput');
      assert.match(
        result.message,
        new RegExp(`cluster-addon/a/${folder.replace('.', '\\.')}/config\\.yaml: cannot be a fleet file`),
      );
    }
  });
});
