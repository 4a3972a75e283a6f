// The objects a Cluster's refs point at: discovery of the group's version, an informer per kind on
// first use, why a ref cannot be read, and the back-off of a Cluster waiting for its refs.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  REF_BACKOFF,
  RefObjectReader,
  RefWaits,
  refBackoffMs,
} from '../../../../controller/controllers/clusteraddon/refobjects.ts';
import type { KubeObject } from '../../../../controller/runtime/client.ts';
import { FakeInformer } from './fakes.ts';

/** apiVersion and kind of test objects whose kind the code under test does not read. */
const K = { apiVersion: 'test/v1', kind: 'Test' } as const;

const infraRef = (extra: object = {}) => ({
  ...K,
  metadata: { name: 'a', namespace: 'team' },
  spec: {
    infrastructureRef: {
      apiGroup: 'infrastructure.cluster.x-k8s.io',
      kind: 'DockerCluster',
      name: 'dc',
      ...extra,
    },
  },
});

function reader(o: { groupVersion?: string; kindServed?: boolean; informer?: FakeInformer } = {}) {
  const requests: string[] = [];
  const created: string[] = [];
  const watched: string[] = [];
  const inf = o.informer ?? new FakeInformer();
  const r = new RefObjectReader({
    client: {
      request: (async (_m: string, path: string) => {
        requests.push(path);
        if (o.groupVersion === undefined) throw new Error('404');
        return { preferredVersion: { groupVersion: o.groupVersion } };
      }) as never,
      resource: (async () => {
        if (o.kindServed === false) throw new Error('not served');
        return {};
      }) as never,
    },
    informer: (apiVersion, kind) => {
      created.push(`${apiVersion}/${kind}`);
      return inf.informer;
    },
    watch: (_inf, kind) => watched.push(kind),
  });
  return { r, requests, created, watched, inf };
}

describe('RefObjectReader', () => {
  it('reads nothing for a Cluster without refs, and says why a refused ref is not followed', async () => {
    const { r, requests } = reader();
    assert.deepEqual(
      await r.read({ ...K, metadata: { name: 'a', namespace: 'team' }, spec: {} }, 'controlPlaneRef'),
      {
        object: undefined,
        pending: false,
      },
    );
    const secret = await r.read(infraRef({ apiGroup: '', kind: 'Secret' }), 'infrastructureRef');
    assert.equal(secret.pending, false);
    assert.match(secret.problem ?? '', /never to built-in kinds/);
    assert.deepEqual(requests, []);
  });

  it('a group that is not served is pending with a problem, and discovered again next time', async () => {
    const { r, requests } = reader();
    const first = await r.read(infraRef(), 'infrastructureRef');
    assert.equal(first.pending, true);
    assert.match(first.problem ?? '', /API group infrastructure.cluster.x-k8s.io is not served/);
    await new Promise((resolve) => setImmediate(resolve));
    await r.read(infraRef(), 'infrastructureRef');
    assert.equal(requests.length, 2, 'an unserved group is asked again');
  });

  it('a kind that is not served is pending; a served one gets one informer, watched, for every Cluster', async () => {
    const notServed = reader({ groupVersion: 'infrastructure.cluster.x-k8s.io/v1beta1', kindServed: false });
    assert.match(
      (await notServed.r.read(infraRef(), 'infrastructureRef')).problem ?? '',
      /kind DockerCluster is not served/,
    );
    assert.deepEqual(notServed.created, []);

    const dc: KubeObject = { ...K, metadata: { name: 'dc', namespace: 'team' }, spec: { x: 1 } };
    const { r, created, watched, requests } = reader({
      groupVersion: 'infrastructure.cluster.x-k8s.io/v1beta1',
      informer: new FakeInformer([dc]),
    });
    assert.deepEqual(await r.read(infraRef(), 'infrastructureRef'), { object: dc, pending: false });
    assert.deepEqual(await r.read(infraRef({ name: 'other' }), 'infrastructureRef'), {
      object: undefined,
      pending: true,
    });
    assert.deepEqual(created, ['infrastructure.cluster.x-k8s.io/v1beta1/DockerCluster']);
    assert.deepEqual(watched, ['DockerCluster']);
    assert.equal(requests.length, 1, 'the group version is discovered once');
  });

  it('an informer that cannot list says so (and how to grant it); an apiVersion on the ref skips discovery', async () => {
    const inf = new FakeInformer();
    inf.synced = false;
    const { r, requests } = reader({ informer: inf });
    const waiting = await r.read(
      infraRef({ apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta1' }),
      'infrastructureRef',
    );
    assert.deepEqual(waiting, { object: undefined, pending: true });
    inf.failure = '403 Forbidden';
    const refused = await r.read(
      infraRef({ apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta1' }),
      'infrastructureRef',
    );
    assert.match(
      refused.problem ?? '',
      /cannot list DockerCluster .*403 Forbidden .*aggregate-to-controller/,
    );
    assert.deepEqual(requests, []);
  });
});

describe('RefWaits', () => {
  it('backs off 2 s doubling to 5 min per key, and starts over once cleared', () => {
    const w = new RefWaits();
    assert.deepEqual([w.next('a'), w.next('a'), w.next('a'), w.next('b')], [2_000, 4_000, 8_000, 2_000]);
    w.clear('a');
    assert.equal(w.next('a'), 2_000);
    assert.equal(refBackoffMs(30), REF_BACKOFF.maxMs);
  });
});
