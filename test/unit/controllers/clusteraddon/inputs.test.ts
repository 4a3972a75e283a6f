// What one reconcile reads: nothing left of a Cluster ends it; a requested reconcile reads the
// branch again; a failed fleet read is shown and thrown; refs are followed only for Clusters of a
// stackflux ClusterClass; a failed tree fetch is returned, not thrown.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AddonCaches } from '../../../../controller/controllers/clusteraddon/caches.ts';
import {
  AddonInputGatherer,
  type AddonInputGathererOptions,
} from '../../../../controller/controllers/clusteraddon/inputs.ts';
import type { BranchState } from '../../../../controller/gitops/branches.ts';
import type { KubeObject } from '../../../../controller/runtime/client.ts';
import { FakeClock } from '../../../../controller/runtime/clock.ts';
import { context, FakeInformer } from './fakes.ts';

/** apiVersion and kind of test objects whose kind the code under test does not read. */
const K = { apiVersion: 'test/v1', kind: 'Test' } as const;

const CLASS = 'docker-ferrol-1-30-v1';
const TIP: BranchState = { commit: 'c1', tree: 't', addons: new Map() };

const cluster = (cls = CLASS): KubeObject => ({
  apiVersion: 'cluster.x-k8s.io/v1beta2',
  kind: 'Cluster',
  metadata: { name: 'a', namespace: 'team' },
  spec: { topology: { classRef: { name: cls }, version: 'v1.30.4' } },
});
const release: KubeObject = {
  ...K,
  metadata: { name: CLASS, namespace: 'team' },
  spec: { clusterStack: 'ferrol', tag: CLASS, source: { url: 'u' } },
  status: { commit: 'abc' },
};

function gatherer(
  o: { clusters?: KubeObject[]; addons?: KubeObject[]; branchError?: Error; treeError?: Error } = {},
) {
  const log: string[] = [];
  const caches = new AddonCaches({
    clusters: new FakeInformer(o.clusters ?? []).informer,
    clusterAddons: new FakeInformer(o.addons ?? []).informer as never,
    releases: new FakeInformer([release]).informer as never,
    clusterStacks: new FakeInformer([{ ...K, metadata: { name: 'ferrol', namespace: 'team' } }])
      .informer as never,
    kustomizations: new FakeInformer().informer as never,
    gitRepositories: new FakeInformer().informer as never,
    namespaces: new FakeInformer().informer,
  });
  const opts: AddonInputGathererOptions = {
    caches,
    branches: {
      branchOf: async (key) => {
        log.push(`branchOf ${key}`);
        if (o.branchError) throw o.branchError;
        return o.clusters?.length ? TIP : undefined;
      },
      forget: (key) => log.push(`forget ${key}`),
    },
    trees: {
      treeOf: async () => {
        if (o.treeError) throw o.treeError;
        return new Map([['stack.yaml', '']]);
      },
    },
    refs: {
      read: async (_c, field) => {
        log.push(`read ${field}`);
        return field === 'infrastructureRef'
          ? { object: undefined, pending: true, problem: 'not yet' }
          : { object: { kind: 'KCP' }, pending: false };
      },
    },
    fleetFailureOf: (key) => (key === 'team/a' ? { reason: 'FleetUnreachable', message: 'm' } : undefined),
    fleetReadFailed: async (existing, err) => {
      log.push(`fleetReadFailed ${existing?.metadata.name} ${(err as Error).message}`);
    },
    fleetSettings: { url: 'u', branchPrefix: 'stackflux/' },
    fluxShards: false,
    templates: {} as never,
    clock: new FakeClock(),
  };
  return { g: new AddonInputGatherer(opts), log };
}

describe('AddonInputGatherer', () => {
  it('nothing left of the Cluster (no Cluster, ClusterAddon or branch): nothing to reconcile', async () => {
    const { g } = gatherer();
    assert.equal(await g.gather('team/a', 'team', 'a', context('team/a')), undefined);
  });

  it('gathers the Cluster, its release, ClusterStack, tree, refs, branch and fleet failure', async () => {
    const { g, log } = gatherer({ clusters: [cluster()] });
    const got = await g.gather('team/a', 'team', 'a', context('team/a'));
    assert.ok(got);
    assert.equal(got.deleting, false);
    assert.equal(got.refsPending, true);
    assert.equal(got.fetchError, undefined);
    const i = got.input;
    assert.equal(i.release?.metadata.name, CLASS);
    assert.equal(i.clusterStack?.metadata.name, 'ferrol');
    assert.equal(i.treeCommit, 'abc');
    assert.ok(i.tree);
    assert.deepEqual(i.controlPlane, { kind: 'KCP' });
    assert.deepEqual(i.refProblems, ['not yet']);
    assert.equal(i.branch, TIP);
    assert.deepEqual(i.fleetFailure, { reason: 'FleetUnreachable', message: 'm' });
    assert.equal(i.holdUnapproved, true);
    assert.deepEqual(log, ['branchOf team/a', 'read controlPlaneRef', 'read infrastructureRef']);
  });

  it('refs are not followed for a Cluster of another ClusterClass; a tree fetch error is returned', async () => {
    const other = gatherer({ clusters: [cluster('my-own-class')] });
    await other.g.gather('team/a', 'team', 'a', context('team/a'));
    assert.deepEqual(other.log, ['branchOf team/a']);
    const failing = gatherer({ clusters: [cluster()], treeError: new Error('fetch failed') });
    const got = await failing.g.gather('team/a', 'team', 'a', context('team/a'));
    assert.match(String(got?.fetchError), /fetch failed/);
    assert.equal(got?.input.tree, undefined);
  });

  it('a requested reconcile reads the branch again; a failed branch read is shown, then thrown', async () => {
    const requested: KubeObject = {
      ...K,
      metadata: { name: 'a', namespace: 'team', annotations: { 'reconcile.fluxcd.io/requestedAt': 'now' } },
      status: {},
    };
    const { g, log } = gatherer({ addons: [requested], branchError: new Error('unreachable') });
    await assert.rejects(g.gather('team/a', 'team', 'a', context('team/a')), /unreachable/);
    assert.deepEqual(log, ['forget team/a', 'branchOf team/a', 'fleetReadFailed a unreachable']);
  });
});
