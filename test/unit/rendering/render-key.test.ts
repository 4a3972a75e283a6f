// renderKey and slimInput (controller/rendering/bounded.ts) keep an addon's files and their digest
// per release tree object: the key must still say exactly whether two renders are the same render.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type AddonRenderInput, renderKey, slimInput } from '../../../controller/rendering/index.ts';
import { addonInput, configMap } from './fixtures.ts';

const files = { 'cm.yaml.hbs': configMap('  name: {{Cluster.metadata.name}}') };

describe('render identity with files kept per tree', () => {
  it('equal content gives equal keys whatever the tree object; any change of a file gives another key', () => {
    const a = addonInput(files);
    const b = addonInput(files); // another tree object, the same files
    assert.equal(renderKey(slimInput(a)), renderKey(slimInput(b)));
    const changed = addonInput({ 'cm.yaml.hbs': configMap('  name: x{{Cluster.metadata.name}}') });
    assert.notEqual(renderKey(slimInput(a)), renderKey(slimInput(changed)));
    const renamed = addonInput({ 'cm2.yaml.hbs': files['cm.yaml.hbs'] });
    assert.notEqual(renderKey(slimInput(a)), renderKey(slimInput(renamed)));
  });

  it('files whose paths and contents run together the same way are still different files', () => {
    // One file holding "x\0cluster-addon/a/b\0y" against two files: without lengths, one stream.
    const one = addonInput({ a: 'x\0cluster-addon/a/b\0y' });
    const two = addonInput({ a: 'x', b: 'y' });
    assert.notEqual(renderKey(slimInput(one)), renderKey(slimInput(two)));
  });

  it("shares one Map of an addon's files per tree, and filters a tree that has grown anew", () => {
    const input = addonInput(files);
    const first = slimInput(input).tree;
    assert.equal(slimInput(input).tree, first, 'the same Map for the same tree and addon');
    assert.deepEqual([...first.keys()], ['cluster-addon/a/cm.yaml.hbs']);
    const tree = input.tree as Map<string, string>;
    tree.set('cluster-addon/a/extra.yaml', configMap('  a: b', 'extra'));
    tree.set('cluster-addon/other/x.yaml', 'x: 1\n');
    const grown = slimInput(input as AddonRenderInput).tree;
    assert.deepEqual([...grown.keys()], ['cluster-addon/a/cm.yaml.hbs', 'cluster-addon/a/extra.yaml']);
    assert.notEqual(renderKey(slimInput(input)), renderKey(slimInput(addonInput(files))));
  });
});
