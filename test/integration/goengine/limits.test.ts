// The Go engine binding's limits: the output cap (refused inside the engine, before copy-out),
// the memory cap written into the module (the instance stops, the process does not, and the
// next call gets a fresh instance), and a missing engine named with how to build it.
// npm test: uses no test environment
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import {
  configureGoEngine,
  goTemplate,
  locateGoEngine,
  parseGoYaml,
} from '../../../controller/rendering/goengine/index.ts';
import { goEngineBuild } from '../../support/goengine.ts';

const wasm = () => join(goEngineBuild(), 'goengine.wasm');
after(() => configureGoEngine({}));

describe('Go engine limits', () => {
  it('an output over maxOutputBytes is an output-limit failure; under it the same call succeeds', () => {
    configureGoEngine({ path: wasm() });
    const text = '{{ repeat 100000 "x" }}';
    const over = goTemplate(text, {}, { maxOutputBytes: 50_000 });
    assert.equal(over.ok, false);
    assert.equal(!over.ok && over.engine, 'output');
    assert.match(!over.ok ? over.error : '', /over the limit of 50000 bytes/);
    const under = goTemplate(text, {}, { maxOutputBytes: 200_000 });
    assert.deepEqual(under, { ok: true, output: 'x'.repeat(100_000) });
  });

  it('a template that needs more than the memory cap stops the instance, not the process', () => {
    configureGoEngine({ path: wasm(), maxMemoryMb: 256 });
    const hungry = goTemplate('{{ $s := repeat 100000000 "x" }}{{ $t := repeat 4 $s }}{{ len $t }}', {});
    assert.equal(hungry.ok, false);
    assert.equal(!hungry.ok && hungry.engine, 'memory');
    assert.match(!hungry.ok ? hungry.error : '', /memory limit of 256 MiB/);
    // A fresh instance answers the next call.
    assert.deepEqual(goTemplate('{{ add 1 2 }}', {}), { ok: true, output: '3' });
  });

  it('one instance serves many calls', () => {
    configureGoEngine({ path: wasm() });
    for (let i = 0; i < 200; i++) assert.deepEqual(goTemplate('{{ . }}', i), { ok: true, output: String(i) });
    assert.deepEqual(parseGoYaml('a: 1\n---\nb: 2\n'), { ok: true, documents: [{ a: 1 }, { b: 2 }] });
  });

  it('a missing engine says how to build it', () => {
    configureGoEngine({});
    const located = locateGoEngine({ STACKFLUX_GO_ENGINE: '/nonexistent/goengine.wasm' });
    assert.ok('error' in located);
    assert.match(located.error, /hack\/build-goengine\.sh/);
    configureGoEngine({ path: '/nonexistent/goengine.wasm' });
    const res = goTemplate('x', {});
    assert.equal(res.ok, false);
    assert.equal(!res.ok && res.engine, 'unavailable');
  });
});
