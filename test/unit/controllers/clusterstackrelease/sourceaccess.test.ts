// A release's source as one reconcile reaches it: the poller's ref and credentials read once.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ReleaseSourceAccess } from '../../../../controller/controllers/clusterstackrelease/sourceaccess.ts';
import { release, TAG, URL } from './fakes.ts';

describe('ReleaseSourceAccess', () => {
  it('names the source for the pollers: URL, namespace, secret and insecure only when set', () => {
    const plain = new ReleaseSourceAccess({ credentials: async () => ({}) }, release());
    assert.deepEqual(plain.ref, { url: URL, namespace: 'team-a' });
    assert.equal(plain.tag, TAG);
    const full = new ReleaseSourceAccess(
      { credentials: async () => ({}) },
      release({ spec: { source: { url: URL, secretRef: { name: 's' }, insecure: true } } }),
    );
    assert.deepEqual(full.ref, { url: URL, namespace: 'team-a', secretName: 's', insecure: true });
  });

  it('reads the Secret at most once per reconcile, and not at all without a secretRef', async () => {
    const reads: string[] = [];
    const credentials = async (ns: string, name: string) => {
      reads.push(`${ns}/${name}`);
      return { username: 'u' };
    };
    const src = new ReleaseSourceAccess(
      { credentials },
      release({ spec: { source: { url: URL, secretRef: { name: 's' } } } }),
    );
    assert.deepEqual(await src.credentials(), { username: 'u' });
    assert.deepEqual(await src.credentials(), { username: 'u' });
    assert.deepEqual(reads, ['team-a/s']);
    assert.equal(await new ReleaseSourceAccess({ credentials }, release()).credentials(), undefined);
    assert.deepEqual(reads, ['team-a/s']);
  });
});
