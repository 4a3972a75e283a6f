import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { renderTemplate, TemplateError } from '../../../controller/rendering/template.ts';
import { sampleCluster } from './fixtures.ts';

const FILE = 'cluster-addon/a/x.yaml.hbs';

function context(values: Record<string, unknown> = {}): Record<string, unknown> {
  return { Cluster: sampleCluster(), Values: values, Stack: { provider: 'docker', version: 'v1' } };
}

function render(source: string, values: Record<string, unknown> = {}): string {
  return renderTemplate(FILE, source, context(values));
}

function renderError(source: string, values: Record<string, unknown> = {}): TemplateError {
  try {
    render(source, values);
  } catch (error) {
    assert.ok(error instanceof TemplateError, `expected a TemplateError, got ${String(error)}`);
    return error;
  }
  assert.fail(`expected ${JSON.stringify(source)} to fail`);
}

describe('template inputs', () => {
  it('renders the Cluster API names authors know', () => {
    assert.equal(
      render(
        '{{Cluster.metadata.name}} {{Cluster.spec.clusterNetwork.pods.cidrBlocks.[0]}} {{Cluster.spec.controlPlaneEndpoint.host}}:{{Cluster.spec.controlPlaneEndpoint.port}}',
      ),
      'alpha 192.168.0.0/16 172.18.0.3:6443',
    );
  });
  it('supports each with @key/@index, ../ , @root, this and block params', () => {
    const values = { list: [{ x: 1 }, { x: 2 }], map: { a: 'A', b: 'B' } };
    assert.equal(
      render(
        '{{#each Values.list}}{{@index}}={{x}}/{{this.x}}/{{../Cluster.metadata.name}};{{/each}}',
        values,
      ),
      '0=1/1/alpha;1=2/2/alpha;',
    );
    assert.equal(render('{{#each Values.map}}{{@key}}={{this}},{{/each}}', values), 'a=A,b=B,');
    assert.equal(
      render('{{#each Values.list as |item i|}}{{i}}:{{item.x}}{{@root.Stack.version}} {{/each}}', values),
      '0:1v1 1:2v1 ',
    );
    assert.equal(render('{{#with Cluster.spec.controlPlaneEndpoint}}{{host}}{{/with}}'), '172.18.0.3');
  });
});

describe('strict mode', () => {
  it('names the file, line, column and the missing path', () => {
    const error = renderError(
      'a: 1\nb: {{Cluster.spec.clusterNetwork.pods.cidrBlocks.[0]}}\nc: {{Cluster.spec.nope.deeper.value}}\n',
    );
    assert.equal(error.file, FILE);
    assert.equal(error.line, 3);
    assert.equal(error.column, 6);
    assert.equal(
      error.message,
      `${FILE}:3:6: Cluster.spec.nope is not defined (in Cluster.spec.nope.deeper.value)`,
    );
  });
  it('fails on a missing last segment, a missing root and a missing list index', () => {
    assert.match(
      renderError('{{Cluster.metadata.labels}}').message,
      /:1:3: Cluster\.metadata\.labels is not defined$/,
    );
    assert.match(renderError('\n\n  {{Valuez.a}}').message, /:3:5: Valuez is not defined \(in Valuez\.a\)$/);
    assert.match(
      renderError('{{Cluster.spec.clusterNetwork.pods.cidrBlocks.[5]}}').message,
      /Cluster\.spec\.clusterNetwork\.pods\.cidrBlocks\.\[5\] is not defined$/,
    );
    assert.match(renderError('{{ControlPlane.spec.replicas}}').message, /ControlPlane is not defined/);
  });
  it('says when a parent is not an object', () => {
    assert.match(
      renderError('{{Cluster.metadata.name.first}}').message,
      /Cluster\.metadata\.name\.first is not defined \(Cluster\.metadata\.name is a string\)/,
    );
  });
  it('is strict inside blocks and for arguments of ordinary helpers', () => {
    assert.match(
      renderError('{{#each Values.list}}{{x}}{{y}}{{/each}}', { list: [{ x: 1 }] }).message,
      /:1:29: y is not defined$/,
    );
    assert.match(renderError('{{toYaml Values.nope}}').message, /:1:10: Values\.nope is not defined$/);
    assert.match(
      renderError('{{indent 2 (toYaml Values.a.b)}}', { a: {} }).message,
      /Values\.a\.b is not defined/,
    );
    assert.match(renderError('{{#each Values.items}}{{/each}}').message, /Values\.items is not defined/);
    assert.match(renderError('{{x}}').message, /:1:3: x is not defined$/);
  });
  it('lets presence tests see a missing field as undefined (default, if, unless, with, and, or, not)', () => {
    assert.equal(render('{{default "d" Values.a.b.c}}'), 'd');
    assert.equal(render('{{#if Values.a.b}}yes{{else}}no{{/if}}'), 'no');
    assert.equal(render('{{#unless Values.a}}none{{/unless}}'), 'none');
    assert.equal(render('{{#with Values.a.b}}x{{else}}empty{{/with}}'), 'empty');
    assert.equal(render('{{#if (or Values.a (not Values.b))}}ok{{/if}}'), 'ok');
    assert.equal(render('{{#if (and Values.a Values.b)}}x{{else}}y{{/if}}'), 'y');
  });
  it('refuses to write an object into the output', () => {
    assert.match(
      renderError('{{Cluster.spec}}').message,
      /Cluster\.spec is an object; write it with toYaml or toJson/,
    );
  });
  it('reports unknown helpers, partials and parse errors with the file', () => {
    assert.match(
      renderError('{{toYam Values}}').message,
      new RegExp(`^${FILE}:1:1: unknown helper "toYam"$`),
    );
    assert.match(renderError('{{> other}}').message, /partials are not supported/);
    const parse = renderError('a: 1\nb: {{Values.x');
    assert.equal(parse.line, 2);
    assert.match(parse.message, new RegExp(`^${FILE}:2: parse error: `));
  });
});

describe('no HTML escaping', () => {
  it('keeps <, >, &, quotes and backticks as written', () => {
    const text = `<a href="x">&amp; 'q' \`b\` =</a>`;
    assert.equal(render('{{Values.s}}', { s: text }), text);
    assert.equal(render('{{{Values.s}}}', { s: text }), text);
    assert.equal(render('{{quote Values.s}}', { s: 'a&b<c>"d"' }), '"a&b<c>\\"d\\""');
  });
});

describe('prototype access', () => {
  for (const expression of [
    'Cluster.__proto__',
    'Cluster.constructor',
    'Cluster.constructor.name',
    'Cluster.metadata.__proto__.polluted',
    'Cluster.__defineGetter__',
    'Cluster.hasOwnProperty',
    'Cluster.toString',
    'Values.fn.prototype',
    'constructor',
  ]) {
    it(`blocks {{${expression}}}`, () => {
      assert.match(renderError(`{{${expression}}}`).message, /access to "[^"]+" is not allowed/);
    });
  }
  it('blocks it in helper arguments, lenient helpers and lookup', () => {
    assert.match(renderError('{{toJson Cluster.constructor}}').message, /not allowed/);
    assert.match(renderError('{{default "x" Cluster.__proto__}}').message, /not allowed/);
    assert.match(
      renderError('{{lookup Cluster "constructor"}}').message,
      /lookup: access to "constructor" is not allowed/,
    );
    assert.match(renderError('{{#with Cluster.constructor}}{{name}}{{/with}}').message, /not allowed/);
  });
  it('only follows own properties (array methods are not fields)', () => {
    assert.match(
      renderError('{{Values.list.map}}', { list: [] }).message,
      /Values\.list\.map is not defined/,
    );
    assert.equal(render('{{Values.list.length}}', { list: [1, 2] }), '2');
    assert.equal(render('{{lookup Values.m "k"}}', { m: { k: 'v' } }), 'v');
  });
  it('does not pollute Object.prototype', () => {
    assert.throws(() => render('{{lookup (lookup Cluster "__proto__") "x"}}'));
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
  });
});
