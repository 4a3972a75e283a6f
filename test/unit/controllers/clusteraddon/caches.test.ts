// The ClusterAddon controller's caches: the indexes that map a changed object to the Clusters
// whose reconcile reads it, and the watches that requeue them.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  AddonCaches,
  addonClusterKeys,
  CLUSTER_INDEX,
  clusterClassKeys,
  clusterRefKeys,
  foreignClassNamespace,
  watchAddonInputs,
} from '../../../../controller/controllers/clusteraddon/caches.ts';
import type { KubeObject } from '../../../../controller/runtime/client.ts';
import type { Controller } from '../../../../controller/runtime/controller.ts';
import { FakeInformer } from './fakes.ts';

/** apiVersion and kind of test objects whose kind the code under test does not read. */
const K = { apiVersion: 'test/v1', kind: 'Test' } as const;

const V1 = 'docker-ferrol-1-30-v1';
const V2 = 'docker-ferrol-1-30-v2';

function cluster(
  name: string,
  ns: string,
  o: { classNs?: string; cls?: string; annotations?: Record<string, string>; spec?: object } = {},
): KubeObject {
  return {
    apiVersion: 'cluster.x-k8s.io/v1beta2',
    kind: 'Cluster',
    metadata: { name, namespace: ns, ...(o.annotations ? { annotations: o.annotations } : {}) },
    spec: {
      topology: {
        classRef: { name: o.cls ?? V1, ...(o.classNs ? { namespace: o.classNs } : {}) },
        version: 'v1.30.4',
      },
      ...o.spec,
    },
  };
}

function caches(
  clusters: KubeObject[],
  extra: { kustomizations?: KubeObject[]; stacks?: KubeObject[] } = {},
) {
  const inf = {
    clusters: new FakeInformer(clusters),
    clusterAddons: new FakeInformer(),
    releases: new FakeInformer(),
    clusterStacks: new FakeInformer(extra.stacks ?? []),
    kustomizations: new FakeInformer(extra.kustomizations ?? []),
    gitRepositories: new FakeInformer(),
    namespaces: new FakeInformer(),
    helmReleases: new FakeInformer(),
  };
  const c = new AddonCaches({
    clusters: inf.clusters.informer,
    clusterAddons: inf.clusterAddons.informer as never,
    releases: inf.releases.informer as never,
    clusterStacks: inf.clusterStacks.informer as never,
    kustomizations: inf.kustomizations.informer as never,
    gitRepositories: inf.gitRepositories.informer as never,
    namespaces: inf.namespaces.informer,
    helmReleases: inf.helmReleases.informer as never,
  });
  return { c, inf };
}

describe('the ClusterAddon caches', () => {
  it('index a Cluster by its class, and while a rollout prepares it also by the target release', () => {
    assert.deepEqual(clusterClassKeys(cluster('a', 'team')), [`team/${V1}`]);
    assert.deepEqual(clusterClassKeys(cluster('a', 'team', { classNs: 'stacks' })), [`stacks/${V1}`]);
    const preparing = cluster('a', 'team', {
      annotations: { 'rollout.stackflux.io/phase': 'Preparing', 'rollout.stackflux.io/to': V2 },
    });
    assert.deepEqual(clusterClassKeys(preparing), [`team/${V1}`, `team/${V2}`]);
    assert.deepEqual(clusterClassKeys({ ...K, metadata: { name: 'x', namespace: 'team' }, spec: {} }), []);
  });

  it('tell a class of another namespace, and index refs only when the shared rule allows them', () => {
    assert.equal(foreignClassNamespace(cluster('a', 'team', { classNs: 'stacks' })), 'stacks');
    assert.equal(foreignClassNamespace(cluster('a', 'team', { classNs: 'team' })), undefined);
    const withRefs = cluster('a', 'team', {
      spec: {
        infrastructureRef: { apiGroup: 'infrastructure.cluster.x-k8s.io', kind: 'DockerCluster', name: 'a' },
        controlPlaneRef: { apiGroup: '', kind: 'Secret', name: 'a' },
      },
    });
    assert.deepEqual(clusterRefKeys(withRefs), ['team/DockerCluster/a']);
  });

  it('map addon Flux objects to their Cluster only when they carry both labels', () => {
    const labelled = (labels: Record<string, string>): KubeObject => ({
      ...K,
      metadata: { name: 'k', namespace: 'team', labels },
    });
    assert.deepEqual(
      addonClusterKeys(labelled({ 'stackflux.io/cluster': 'a', 'stackflux.io/addon': 'cni' })),
      ['team/a'],
    );
    assert.deepEqual(addonClusterKeys(labelled({ 'stackflux.io/cluster': 'a' })), []);
  });

  it('look up the Clusters of a release, a ClusterStack, a namespace and a referred object', () => {
    const { c, inf } = caches([
      cluster('a', 'team'),
      cluster('b', 'team', { cls: V2 }),
      cluster('c', 'tenant', { classNs: 'team' }),
      cluster('d', 'tenant', {
        spec: {
          infrastructureRef: {
            apiGroup: 'infrastructure.cluster.x-k8s.io',
            kind: 'DockerCluster',
            name: 'dc',
          },
        },
      }),
    ]);
    const release = { ...K, metadata: { name: V1, namespace: 'team' }, spec: { clusterClass: V1 } } as never;
    assert.deepEqual(c.clustersOfRelease(release), ['team/a', 'tenant/c']);
    const stack = { ...K, metadata: { name: 'ferrol', namespace: 'team' }, spec: {} } as never;
    assert.deepEqual(c.clustersOfClusterStack(stack).sort(), ['team/a', 'team/b', 'tenant/c']);
    assert.deepEqual(c.foreignClustersIn('tenant'), ['tenant/c']);
    assert.deepEqual(c.clustersIn('tenant'), ['tenant/c', 'tenant/d']);
    assert.deepEqual(
      c.clustersReferring({ ...K, metadata: { name: 'dc', namespace: 'tenant' } }, 'DockerCluster'),
      ['tenant/d'],
    );
    assert.ok(inf.kustomizations.indexers.has(CLUSTER_INDEX));
    assert.ok(inf.helmReleases.indexers.has(CLUSTER_INDEX));
  });

  it('list the addon Kustomizations of a Cluster and the ClusterStacks of a namespace', () => {
    const k = (name: string, clusterName: string): KubeObject => ({
      ...K,
      metadata: {
        name,
        namespace: 'team',
        labels: { 'stackflux.io/cluster': clusterName, 'stackflux.io/addon': name },
      },
    });
    const { c } = caches([], {
      kustomizations: [k('a-cni', 'a'), k('b-cni', 'b')],
      stacks: [{ ...K, metadata: { name: 'ferrol', namespace: 'team' } }],
    });
    assert.deepEqual(
      c.kustomizationsOf('team/a').map((o) => o.metadata.name),
      ['a-cni'],
    );
    assert.deepEqual(c.helmReleasesOf('team/a'), []);
    assert.deepEqual(
      c.clusterStacksIn('team').map((o) => o.metadata.name),
      ['ferrol'],
    );
  });

  it('watch: a ClusterAddon requeues only when what the reconcile reads of it changes, a Namespace only by its labels', () => {
    const { c } = caches([cluster('c', 'tenant', { classNs: 'team' })]);
    const watches: {
      informer: unknown;
      map?: (o: never) => string[];
      changed?: (o: never, n: never) => boolean;
    }[] = [];
    const manager = {
      watch: (
        _c: Controller,
        informer: unknown,
        map?: (o: never) => string[],
        changed?: (o: never, n: never) => boolean,
      ) => watches.push({ informer, ...(map ? { map } : {}), ...(changed ? { changed } : {}) }),
    };
    watchAddonInputs(manager as never, {} as Controller, c, false);
    assert.equal(
      watches.length,
      7,
      'Clusters, ClusterAddons, Kustomizations, HelmReleases, releases, ClusterStacks, Namespaces',
    );
    watchAddonInputs(manager as never, {} as Controller, c, true);
    assert.equal(watches.length, 7 + 8, 'with Flux shards a Namespace also requeues its own Clusters');
    const addonWatch = watches[1];
    const ca = (status: object, spec: object = {}) =>
      ({ ...K, metadata: { name: 'c', namespace: 'tenant' }, spec, status }) as never;
    assert.equal(addonWatch?.changed?.(ca({ a: 1 }), ca({ a: 2 })), false, 'a status write does not requeue');
    const nsWatch = watches[6];
    const ns = (labels: Record<string, string>) => ({ ...K, metadata: { name: 'tenant', labels } }) as never;
    assert.equal(nsWatch?.changed?.(ns({ a: '1' }), ns({ a: '1' })), false);
    assert.equal(nsWatch?.changed?.(ns({ a: '1' }), ns({ a: '2' })), true);
    assert.deepEqual(nsWatch?.map?.(ns({})), ['tenant/c']);
  });
});
