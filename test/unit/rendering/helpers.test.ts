import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { renderTemplate, TemplateError } from '../../../controller/rendering/template.ts';

const FILE = 'cluster-addon/a/h.yaml.hbs';

function render(source: string, Values: Record<string, unknown> = {}): string {
  return renderTemplate(FILE, source, { Values, Stack: { kubernetesVersion: 'v1.30.4' } });
}

function failure(source: string, Values: Record<string, unknown> = {}): string {
  try {
    render(source, Values);
  } catch (error) {
    assert.ok(error instanceof TemplateError);
    return error.message;
  }
  assert.fail('expected a failure');
}

describe('helpers', () => {
  it('toYaml: sorted keys, no trailing newline, no folding', () => {
    const long = 'x'.repeat(200);
    assert.equal(
      render('{{toYaml Values}}', { b: [1, { d: 2, c: 'a: b' }], a: true, long }),
      `a: true\nb:\n  - 1\n  - c: "a: b"\n    d: 2\nlong: ${long}`,
    );
    assert.equal(render('{{toYaml Values.s}}', { s: 'plain' }), 'plain');
  });
  it('toJson: compact with sorted keys', () => {
    assert.equal(
      render('{{toJson Values}}', { b: 1, a: { z: [1, '<&>'], y: null } }),
      '{"a":{"y":null,"z":[1,"<&>"]},"b":1}',
    );
  });
  it('indent and nindent (Sprig order: width first); empty lines stay empty', () => {
    assert.equal(render('{{indent 2 "a\nb\n\nc"}}'), '  a\n  b\n\n  c');
    assert.equal(render('x:{{nindent 4 (toYaml Values)}}', { k: { v: 1 } }), 'x:\n    k:\n      v: 1');
    assert.match(failure('{{indent "x" "a"}}'), /indent expects a non-negative integer width/);
  });
  it('default: fallback only for undefined or null (false, 0 and "" are kept)', () => {
    assert.equal(render('{{default "d" Values.missing}}'), 'd');
    assert.equal(render('{{default "d" Values.n}}', { n: null }), 'd');
    assert.equal(render('{{default true Values.f}}', { f: false }), 'false');
    assert.equal(render('{{default 5 Values.z}}', { z: 0 }), '0');
    assert.equal(render('[{{default "d" Values.e}}]', { e: '' }), '[]');
    assert.equal(render('{{default "d" Values.s}}', { s: 'set' }), 'set');
  });
  it('required: fails with the author message, file and line', () => {
    assert.equal(render('{{required "need x" Values.x}}', { x: 'ok' }), 'ok');
    assert.equal(
      failure('a\n{{required "Values.region must be set" Values.region}}'),
      `${FILE}:2:1: required: Values.region must be set`,
    );
    assert.match(failure('{{required "empty" Values.e}}', { e: '' }), /required: empty/);
  });
  it('b64enc encodes UTF-8', () => {
    assert.equal(render('{{b64enc "hello"}}'), 'aGVsbG8=');
    assert.equal(render('{{b64enc Values.s}}', { s: 'grüße' }), Buffer.from('grüße').toString('base64'));
    assert.match(failure('{{b64enc Values.o}}', { o: {} }), /b64enc expects a string, got an object/);
  });
  it('quote produces a valid YAML double-quoted scalar', () => {
    assert.equal(render('{{quote Values.s}}', { s: 'a"b\\c\nd: e' }), '"a\\"b\\\\c\\nd: e"');
    assert.equal(render('{{quote 8080}}'), '"8080"');
    assert.equal(render('{{quote Values.n}}', { n: null }), '""');
  });
  it('cidrHost, cidrPrefix, cidrNetmask, cidrNetwork', () => {
    assert.equal(
      render(
        '{{cidrHost Values.c 1}} {{cidrHost Values.c -1}} {{cidrPrefix Values.c}} {{cidrNetmask Values.c}} {{cidrNetwork "10.1.2.3/8"}}',
        { c: '10.96.0.0/12' },
      ),
      '10.96.0.1 10.111.255.255 12 255.240.0.0 10.0.0.0/8',
    );
    assert.match(
      failure('{{cidrHost "nope" 1}}'),
      /^cluster-addon\/a\/h\.yaml\.hbs:1:1: cidrHost: "nope" is not a CIDR/,
    );
  });
  it('semverCompare: npm ranges, Helm commas, v prefixes and pre-releases', () => {
    const check = (constraint: string, version: string) =>
      render(`{{semverCompare "${constraint}" "${version}"}}`);
    assert.equal(check('>=1.30.0', 'v1.30.4'), 'true');
    assert.equal(check('>=1.31.0', 'v1.30.4'), 'false');
    assert.equal(check('>=1.30.0, <1.31.0', 'v1.30.4'), 'true');
    assert.equal(check('~1.30', '1.30.9'), 'true');
    assert.equal(check('>=1.31.0-0', 'v1.31.0-rc.1'), 'true');
    assert.equal(check('1.30.x || 1.31.x', 'v1.31.2'), 'true');
    assert.equal(check('>=1.30', 'v1.30'), 'true');
    assert.equal(render('{{#if (semverCompare ">=1.30.0" Stack.kubernetesVersion)}}new{{/if}}'), 'new');
    assert.match(failure('{{semverCompare ">=1.30" "banana"}}'), /"banana" is not a version/);
    assert.match(failure('{{semverCompare "~~x" "1.0.0"}}'), /is not a version constraint/);
  });
  it('eq, ne, and, or, not', () => {
    assert.equal(render('{{eq Values.a "x"}} {{ne Values.a "x"}} {{eq 1 1}}', { a: 'x' }), 'true false true');
    assert.equal(
      render('{{and true 1 "s"}} {{and true Values.empty}} {{or false 0 "y"}} {{or false Values.empty}}', {
        empty: [],
      }),
      'true false true false',
    );
    assert.equal(render('{{not Values.x}} {{not 0}}', { x: 'v' }), 'false true');
    assert.equal(render('{{#if (eq Values.mode "vxlan")}}V{{else}}O{{/if}}', { mode: 'vxlan' }), 'V');
  });
  it('lookup reads own properties by computed key', () => {
    assert.equal(render('{{lookup Values.m Values.k}}', { m: { 'a.b': 'dot' }, k: 'a.b' }), 'dot');
    assert.equal(render('[{{lookup Values.m "missing"}}]', { m: {} }), '[]');
  });
  it('checks the number of arguments', () => {
    assert.match(failure('{{toYaml Values Values}}'), /toYaml takes 1 argument\(s\), got 2/);
    assert.match(failure('{{and}}'), /unknown helper|at least one argument/);
  });
  it('the log helper is not available (no console side effects)', () => {
    assert.match(failure('{{log "x"}}'), /unknown helper "log"/);
  });
});
