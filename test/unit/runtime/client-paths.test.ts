import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_RETRY_AFTER_MS, resourceOfPath, retryAfterMs } from '../../../controller/runtime/client.ts';

describe('resourceOfPath (the resource label of request counts)', () => {
  it('names the plural and the subresource of core, grouped, namespaced and cluster-scoped paths', () => {
    const cases: Array<[string, string]> = [
      ['/api/v1/namespaces/ns/secrets/a-kubeconfig', 'secrets'],
      ['/api/v1/namespaces/ns/secrets?labelSelector=x', 'secrets'],
      ['/apis/stackflux.io/v1alpha1/namespaces/ns/clusteraddons/c1/status', 'clusteraddons/status'],
      ['/apis/stackflux.io/v1alpha1/clusteraddons', 'clusteraddons'],
      ['/api/v1/namespaces', 'namespaces'],
      ['/api/v1/namespaces/ns', 'namespaces'],
      ['/apis/apiextensions.k8s.io/v1/customresourcedefinitions/x.y', 'customresourcedefinitions'],
      ['/apis/events.k8s.io/v1/namespaces/ns/events', 'events'],
      ['/apis/stackflux.io/v1alpha1', 'other'],
      ['/metrics', 'other'],
    ];
    for (const [path, want] of cases) assert.equal(resourceOfPath(path), want, path);
  });
});

describe('retryAfterMs (which answers the client sends again, and when)', () => {
  it('waits the seconds of Retry-After on 429 and 500–504, capped, and never 0', () => {
    assert.equal(retryAfterMs(429, '3'), 3000);
    assert.equal(retryAfterMs(503, '2'), 2000);
    assert.equal(retryAfterMs(500, ['1', '9']), 1000);
    assert.equal(retryAfterMs(429, '0'), 1000);
    assert.equal(retryAfterMs(429, '86400'), MAX_RETRY_AFTER_MS);
  });

  it('leaves every other answer to the caller', () => {
    assert.equal(retryAfterMs(429, undefined), undefined, '429 without Retry-After');
    assert.equal(retryAfterMs(429, 'Wed, 21 Oct 2026 07:28:00 GMT'), undefined, 'an HTTP date');
    assert.equal(retryAfterMs(409, '1'), undefined, 'a conflict');
    assert.equal(retryAfterMs(505, '1'), undefined);
    assert.equal(retryAfterMs(200, '1'), undefined);
  });
});
