// Issue 22 row 4: everything a render sends back counts against --render-max-output inside the
// render process, before it is parsed or sent: a Helm addon's rendered values.yaml.hbs (text and
// parsed values), the merged values, and the texts a failure carries.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import {
  type RenderAddonInput,
  RenderPool,
  type RenderResult,
  renderAddon,
} from '../../../controller/rendering/index.ts';
import { configMap, sampleCluster, stackOf, treeOf } from './fixtures.ts';

const CHART = 'apiVersion: v2\nname: inventory\nversion: 1.0.0\n';
const MiB = 1024 * 1024;

function helmInput(valuesTemplate: string, values?: Record<string, unknown>): RenderAddonInput {
  return {
    tree: treeOf({ 'Chart.yaml': CHART, 'values.yaml.hbs': valuesTemplate }),
    stack: stackOf([{ name: 'a' }]),
    addon: 'a',
    cluster: sampleCluster(),
    ...(values !== undefined ? { centralValues: { a: values } } : {}),
  };
}

function failed(result: RenderResult) {
  if (result.ok) assert.fail('expected a failure');
  return result;
}

describe('output cap over a Helm addon values and the merged values', () => {
  it('a values.yaml.hbs rendering a scalar over the cap fails on the cap, naming the file and the flag', () => {
    const template = 'big: "{{#each Values.items}}{{@root.Values.chunk}}{{/each}}"\n';
    const values = { items: [1, 2, 3, 4], chunk: 'x'.repeat(256 * 1024) };
    const result = failed(renderAddon(helmInput(template, values), { maxOutputBytes: MiB }));
    assert.equal(result.reason, 'LimitExceeded');
    assert.equal(
      result.message,
      "cluster-addon/a/values.yaml.hbs (rendered): the addon's output exceeds the limit of 1 MiB (--render-max-output)",
    );
    // Within the cap it renders.
    const fits = renderAddon(helmInput(template, { ...values, items: [1, 2] }), { maxOutputBytes: MiB });
    assert.equal(fits.ok, true);
  });

  it('rendered values whose YAML aliases expand past the cap fail on the cap after parsing', () => {
    const aliases = Array.from({ length: 90 }, () => '*s').join(', ');
    const template = `s: &s "{{Values.chunk}}"\nmany: [${aliases}]\n`;
    const result = failed(
      renderAddon(helmInput(template, { chunk: 'y'.repeat(16 * 1024) }), { maxOutputBytes: MiB }),
    );
    assert.equal(result.reason, 'LimitExceeded');
    assert.equal(
      result.message,
      "cluster-addon/a/values.yaml.hbs (rendered): the addon's output exceeds the limit of 1 MiB (--render-max-output)",
    );
  });

  it('a file whose YAML aliases repeat a scalar past the cap fails on the cap (its objects are returned too)', () => {
    const keys = Array.from({ length: 90 }, (_, i) => `  k${i}: *s`).join('\n');
    const file = configMap(`  s: &s "{{Values.chunk}}"\n${keys}`, 'aliases');
    const result = failed(
      renderAddon(
        {
          tree: treeOf({ 'aliases.yaml.hbs': file }),
          stack: stackOf([{ name: 'a' }]),
          addon: 'a',
          cluster: sampleCluster(),
          centralValues: { a: { chunk: 'y'.repeat(16 * 1024) } },
        },
        { maxOutputBytes: MiB },
      ),
    );
    assert.equal(result.reason, 'LimitExceeded');
    assert.equal(
      result.message,
      "cluster-addon/a/aliases.yaml.hbs (rendered): its objects: the addon's output exceeds the limit of 1 MiB (--render-max-output)",
    );
  });

  it('merged values over the cap fail on the cap (they are sent back with every result)', () => {
    const result = failed(
      renderAddon(
        {
          tree: treeOf({ 'cm.yaml': configMap('  a: b') }),
          stack: stackOf([{ name: 'a' }]),
          addon: 'a',
          cluster: sampleCluster(),
          centralValues: { a: { blob: 'z'.repeat(2 * MiB) } },
        },
        { maxOutputBytes: MiB },
      ),
    );
    assert.equal(result.reason, 'LimitExceeded');
    assert.equal(
      result.message,
      `merged values of addon "a": the addon's output exceeds the limit of 1 MiB (--render-max-output)`,
    );
  });
});

describe('output cap in the render pool', () => {
  const pool = new RenderPool({ workers: 1 });
  after(() => pool.close());

  it('a values.yaml.hbs rendering a 343 MB scalar is stopped on the cap inside the render process', async () => {
    // 86 copies of a value just under the helper limit: the review's 343 MB scalar, which reached
    // this thread and took its RSS to 1.9 GB (or aborted it, heap exhausted in the worker thread).
    const chunk = 'x'.repeat(4 * MiB - 16);
    const items = Array.from({ length: 86 }, (_, i) => i);
    const result = failed(
      await pool.render(
        helmInput('big: "{{#each Values.items}}{{@root.Values.chunk}}{{/each}}"\n', { items, chunk }),
      ),
    );
    assert.equal(result.reason, 'LimitExceeded');
    assert.equal(
      result.message,
      "cluster-addon/a/values.yaml.hbs (rendered): the addon's output exceeds the limit of 8 MiB (--render-max-output)",
    );
  });

  it("a failure's message is cut before it is sent back", async () => {
    const template = configMap('  x: {{required Values.huge Values.missing}}');
    const result = failed(
      await pool.render({
        tree: treeOf({ 'r.yaml.hbs': template }),
        stack: stackOf([{ name: 'a' }]),
        addon: 'a',
        cluster: sampleCluster(),
        centralValues: { a: { huge: 'm'.repeat(3 * MiB) } },
      }),
    );
    assert.equal(result.reason, 'TemplateError');
    assert.match(
      result.message,
      /^cluster-addon\/a\/r\.yaml\.hbs:6:\d+: required: m+… \(\d+ more characters cut\)$/,
    );
    assert.ok(result.message.length < 8 * 1024, `a message of ${result.message.length} characters was sent`);
  });
});
