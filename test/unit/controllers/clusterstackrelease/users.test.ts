// Who a release serves and whether it waits on a provider kind.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ClusterStack } from '../../../../controller/api/clusterstack.ts';
import {
  lookUpProvider,
  servedUsers,
  waitsOnProvider,
} from '../../../../controller/controllers/clusterstackrelease/users.ts';
import type { ReleaseProviderInput } from '../../../../controller/reconcilers/provider.ts';
import type { KubeObject } from '../../../../controller/runtime/client.ts';
import { FakeInformer, ko, release } from './fakes.ts';

type Stack = ClusterStack & KubeObject;

describe('servedUsers', () => {
  it('an incomplete view, no sharing, or only Clusters of its own namespace: as the view says', () => {
    const sharing = {
      clusterStacks: new FakeInformer<Stack>().informer,
      namespaces: new FakeInformer().informer,
    };
    assert.equal(servedUsers({ sharing }, release(), undefined), undefined);
    assert.deepEqual(servedUsers({}, release(), ['other/c1']), ['other/c1']);
    assert.deepEqual(servedUsers({ sharing }, release(), ['c1', 'c2']), ['c1', 'c2']);
  });

  it('a Cluster of another namespace counts only where the ClusterStack serves it', () => {
    const stack = ko({ metadata: { name: 'docker', namespace: 'team-a' }, spec: {} });
    const sharing = {
      clusterStacks: new FakeInformer([stack as Stack]).informer,
      namespaces: new FakeInformer([ko({ metadata: { name: 'other', labels: {} } })]).informer,
    };
    assert.deepEqual(servedUsers({ sharing }, release(), ['c1', 'other/c2']), ['c1']);
  });

  it('without its ClusterStack every Cluster counts (nothing is deleted on a guess)', () => {
    const sharing = {
      clusterStacks: new FakeInformer<Stack>().informer,
      namespaces: new FakeInformer().informer,
    };
    assert.deepEqual(servedUsers({ sharing }, release(), ['c1', 'other/c2']), ['c1', 'other/c2']);
  });
});

describe('lookUpProvider and waitsOnProvider', () => {
  it('no providerRef or no provider caches: nothing to look up, nothing to wait on', async () => {
    assert.equal(await lookUpProvider(undefined, release()), undefined);
    assert.equal(
      await lookUpProvider({ template: async () => never(), object: async () => never() }, release()),
      undefined,
    );
    assert.equal(waitsOnProvider(undefined), false);
  });

  it('waits while a kind is not served or its cache is pending', () => {
    const input = (template: string, object: string) =>
      ({ template: { state: template }, object: { state: object } }) as unknown as ReleaseProviderInput;
    assert.equal(waitsOnProvider(input('found', 'found')), false);
    assert.equal(waitsOnProvider(input('notServed', 'found')), true);
    assert.equal(waitsOnProvider(input('found', 'pending')), true);
  });
});

function never(): never {
  throw new Error('not looked up');
}
