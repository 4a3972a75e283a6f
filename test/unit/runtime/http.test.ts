import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type KubeObject, withControllerReference } from '../../../controller/runtime/client.ts';
import { parseAddr } from '../../../controller/runtime/http.ts';
import { microTime } from '../../../controller/runtime/leaderelection.ts';

describe('parseAddr', () => {
  it('accepts :port, port, host:port and [v6]:port', () => {
    assert.deepEqual(parseAddr(':8080'), { host: '0.0.0.0', port: 8080 });
    assert.deepEqual(parseAddr('8080'), { host: '0.0.0.0', port: 8080 });
    assert.deepEqual(parseAddr('127.0.0.1:0'), { host: '127.0.0.1', port: 0 });
    assert.deepEqual(parseAddr('[::1]:9000'), { host: '::1', port: 9000 });
    assert.throws(() => parseAddr('nope'));
  });
});

describe('withControllerReference', () => {
  const owner = {
    apiVersion: 'stackflux.io/v1alpha1',
    kind: 'ClusterStack',
    metadata: { name: 'o', namespace: 'ns', uid: 'u1' },
  };

  it('sets controller and blockOwnerDeletion, replacing a reference to the same owner', () => {
    const obj: KubeObject = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c', namespace: 'ns' } };
    const once = withControllerReference(obj, owner);
    const twice = withControllerReference(once, owner);
    assert.deepEqual(twice.metadata.ownerReferences, [
      {
        apiVersion: 'stackflux.io/v1alpha1',
        kind: 'ClusterStack',
        name: 'o',
        uid: 'u1',
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
    assert.equal(obj.metadata.name, 'c');
    assert.equal('ownerReferences' in obj.metadata, false, 'input not modified');
  });

  it('refuses cross-namespace owners and a second controller', () => {
    assert.throws(
      () =>
        withControllerReference(
          { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c', namespace: 'other' } },
          owner,
        ),
      /cross-namespace/,
    );
    const owned = withControllerReference(
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c', namespace: 'ns' } },
      owner,
    );
    assert.throws(
      () =>
        withControllerReference(owned, { ...owner, metadata: { ...owner.metadata, name: 'p', uid: 'u2' } }),
      /already has controller/,
    );
  });
});

describe('microTime', () => {
  it('formats metav1.MicroTime with microseconds', () => {
    assert.equal(microTime(Date.UTC(2025, 0, 2, 3, 4, 5, 678)), '2025-01-02T03:04:05.678000Z');
  });
});
