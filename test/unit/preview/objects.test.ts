// diffBranchObjects leaves out addons whose files did not change (controller/preview/objects.ts):
// the objects it reports must be those of a diff of every object, which the cases below spell out.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  diffBranchObjects,
  type ParsedFiles,
  rememberRendered,
} from '../../../controller/preview/objects.ts';
import { renderAddon } from '../../../controller/rendering/index.ts';
import { addonInput, configMap } from '../rendering/fixtures.ts';

const cm = (name: string, v: string) =>
  `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${name}\n  namespace: kube-system\ndata:\n  v: "${v}"\n`;

describe('preview object diff: unchanged addons left out', () => {
  it('reports only the changed addon when another addon is the same byte for byte', () => {
    const before = new Map([
      ['cni/cm.yaml', cm('cni', '1')],
      ['metrics/cm.yaml', cm('metrics', '1')],
    ]);
    const after = new Map([
      ['cni/cm.yaml', cm('cni', '2')],
      ['metrics/cm.yaml', cm('metrics', '1')],
    ]);
    assert.deepEqual(
      diffBranchObjects(before, after).map((c) => [c.addon, c.id, c.change]),
      [['cni', 'v1 ConfigMap kube-system/cni', 'changed']],
    );
  });

  it('an object moved to another file of its addon is no change; a file added to an unchanged-looking addon is seen', () => {
    const before = new Map([
      ['cni/a.yaml', cm('cni', '1')],
      ['metrics/cm.yaml', cm('metrics', '1')],
    ]);
    const moved = new Map([
      ['cni/b.yaml', cm('cni', '1')],
      ['metrics/cm.yaml', cm('metrics', '1')],
    ]);
    assert.deepEqual(diffBranchObjects(before, moved), []);
    // The same files plus one that redefines the object (a later duplicate wins, as kubectl applies it).
    const redefined = new Map([...before, ['metrics/z.yaml', cm('metrics', '2')]]);
    assert.deepEqual(
      diffBranchObjects(before, redefined).map((c) => [c.addon, c.id, c.change]),
      [['metrics', 'v1 ConfigMap kube-system/metrics', 'changed']],
    );
    // An addon whose only file is gone is removed.
    const removed = new Map([['cni/a.yaml', cm('cni', '1')]]);
    assert.deepEqual(
      diffBranchObjects(before, removed).map((c) => [c.addon, c.change]),
      [['metrics', 'removed']],
    );
  });
});

describe('preview object diff: the same object', () => {
  it('is the same with its keys in another order, and changed when one value differs', () => {
    const a = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: "1"\n  b: "2"\n';
    const reordered = 'kind: ConfigMap\napiVersion: v1\ndata:\n  b: "2"\n  a: "1"\nmetadata:\n  name: x\n';
    assert.deepEqual(
      diffBranchObjects(new Map([['cni/a.yaml', a]]), new Map([['cni/a.yaml', reordered]])),
      [],
    );
    const changed = reordered.replace('b: "2"', 'b: "3"');
    assert.deepEqual(
      diffBranchObjects(new Map([['cni/a.yaml', a]]), new Map([['cni/a.yaml', changed]])).map(
        (c) => c.change,
      ),
      ['changed'],
    );
  });
});

describe('preview object diff: files parsed once per preview', () => {
  it('gives with a memo shared by many Clusters what it gives without one', () => {
    const notYaml = 'a: [\n';
    const branch = (cluster: string, v: string) =>
      new Map([
        ['cni/cm.yaml', cm(cluster, v)],
        ['cni/rbac.yaml', cm('shared', '1')],
        ['cni/broken.yaml', notYaml],
        ['metrics/broken.yaml', notYaml],
      ]);
    const memo = new Map();
    for (const cluster of ['c1', 'c2', 'c1']) {
      const before = branch(cluster, '1');
      const after = new Map([...branch(cluster, '2'), ['metrics/broken.yaml', 'b: 1\n']]);
      assert.deepEqual(diffBranchObjects(before, after, memo), diffBranchObjects(before, after));
    }
    assert.ok(memo.size > 0);
  });

  it("takes a rendered file's objects from its render instead of parsing the text again, with the same diff", () => {
    const rendered = renderAddon(
      addonInput({ 'cm.yaml.hbs': configMap('  name: {{Cluster.metadata.name}}') }),
    );
    assert.ok(rendered.ok);
    const memo: ParsedFiles = new Map();
    rememberRendered(rendered, memo);
    const text = rendered.files.get('cm.yaml') ?? '';
    assert.equal(memo.get(text), rendered.fileObjects?.get('cm.yaml'), "the render's own objects");
    const before = new Map([['a/cm.yaml', text.replace(/name: (\S+)\n$/, 'name: another\n')]]);
    const after = new Map([['a/cm.yaml', text]]);
    const changes = diffBranchObjects(before, after, memo);
    assert.deepEqual(changes, diffBranchObjects(before, after));
    assert.deepEqual(
      changes.map((c) => [c.addon, c.id, c.change]),
      [['a', 'v1 ConfigMap cm', 'changed']],
    );
    // A failed render, or one without per-file objects (csctl, Helm), leaves the memo alone.
    const size = memo.size;
    rememberRendered({ ok: false, reason: 'TemplateError', message: 'x' }, memo);
    rememberRendered({ ok: true, files: new Map([['x.yaml', 'a: 1\n']]), objects: [], values: {} }, memo);
    assert.equal(memo.size, size);
  });
});
