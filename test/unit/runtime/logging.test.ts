import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { keyOf, newLogger, objectLogger, splitKey } from '../../../controller/runtime/logging.ts';

describe('logging', () => {
  it('object loggers write JSON lines carrying kind, namespace, name and reconcileID', () => {
    const chunks: string[] = [];
    const stream = new Writable({
      write(chunk: Buffer, _enc, cb) {
        chunks.push(chunk.toString());
        cb();
      },
    });
    const log = newLogger({ destination: stream, base: { controller: 'csk' } });
    objectLogger(log, { kind: 'ClusterStack', namespace: 'ns', name: 'x' }, 'rid-1').info(
      { tag: 'v1' },
      'hello',
    );
    const line = JSON.parse(chunks.join('').trim()) as Record<string, unknown>;
    assert.equal(line.level, 'info');
    assert.equal(line.msg, 'hello');
    assert.equal(line.controller, 'csk');
    assert.equal(line.kind, 'ClusterStack');
    assert.equal(line.namespace, 'ns');
    assert.equal(line.name, 'x');
    assert.equal(line.reconcileID, 'rid-1');
    assert.equal(line.tag, 'v1');
    assert.equal(typeof line.time, 'string');
  });

  it('keys round-trip for namespaced and cluster-scoped objects', () => {
    assert.equal(keyOf({ namespace: 'ns', name: 'a' }), 'ns/a');
    assert.equal(keyOf({ name: 'a' }), 'a');
    assert.deepEqual(splitKey('ns/a'), { namespace: 'ns', name: 'a' });
    assert.deepEqual(splitKey('a'), { name: 'a' });
  });
});
