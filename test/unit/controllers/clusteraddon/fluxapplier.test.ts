// Applying a reconcile's result: only what differs is applied, the ClusterAddon carries our
// finalizer from its first apply, and the reconcile runs again (at most three passes) when a pass
// wrote what it reads.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  FluxObjectApplier,
  needsApply,
} from '../../../../controller/controllers/clusteraddon/fluxapplier.ts';
import type {
  ClusterAddonInput,
  ClusterAddonResult,
} from '../../../../controller/reconcilers/clusteraddon.ts';
import type { KubeObject } from '../../../../controller/runtime/client.ts';
import { notFound, recordingClient } from './fakes.ts';

/** apiVersion and kind of test objects whose kind the code under test does not read. */
const K = { apiVersion: 'test/v1', kind: 'Test' } as const;

const signal = new AbortController().signal;
const FINALIZER = 'stackflux.io/fleet-cleanup';

const kustomization = (name: string, spec: object = { path: name }): KubeObject => ({
  apiVersion: 'kustomize.toolkit.fluxcd.io/v1',
  kind: 'Kustomization',
  metadata: { name, namespace: 'team', labels: { 'stackflux.io/cluster': 'a' } },
  spec,
});

const addonObject = (finalizers?: string[]): KubeObject => ({
  apiVersion: 'stackflux.io/v1alpha1',
  kind: 'ClusterAddon',
  metadata: { name: 'a', namespace: 'team', ...(finalizers ? { finalizers } : {}) },
  spec: { clusterName: 'a' },
});

function result(o: Partial<ClusterAddonResult> = {}): ClusterAddonResult {
  return { finalizers: [FINALIZER], status: {} as never, deleteKustomizations: [], patches: [], ...o };
}

function applier(repos: Record<string, KubeObject> = {}, answer?: Parameters<typeof recordingClient>[0]) {
  const rec = recordingClient(answer);
  const a = new FluxObjectApplier({
    client: rec.client,
    withShardLabel: (o) => ({
      ...o,
      metadata: { ...o.metadata, labels: { ...o.metadata.labels, shard: 's' } },
    }),
    withOwnShard: (o) => o,
    gitRepository: (key) => repos[key] as never,
  });
  return { a, calls: rec.calls };
}

describe('needsApply', () => {
  it('compares labels, annotations, owners and spec; not status, nor undefined members', () => {
    const have = kustomization('k');
    assert.equal(needsApply(undefined, have), true);
    assert.equal(needsApply(have, { ...have, status: { x: 1 } } as KubeObject), false);
    assert.equal(needsApply(have, { ...have, spec: { path: 'k', prune: undefined } } as KubeObject), false);
    assert.equal(needsApply(have, kustomization('k', { path: 'other' })), true);
  });
});

describe('FluxObjectApplier', () => {
  it('applies the ClusterAddon with our finalizer and its shard, then the Flux objects, and decides again on what it wrote', async () => {
    const { a, calls } = applier();
    const decided: ClusterAddonInput[] = [];
    const input = { kustomizations: [] } as unknown as ClusterAddonInput;
    const first = result({
      clusterAddon: addonObject() as never,
      kustomizations: [kustomization('cni') as never],
    });
    const out = await a.applyPasses(
      'team',
      'a',
      false,
      { input, result: first },
      async (i) => {
        decided.push(i);
        return result({
          clusterAddon: addonObject() as never,
          kustomizations: [kustomization('cni') as never],
        });
      },
      signal,
    );
    const applied = calls.filter((c) => c.verb === 'apply').map((c) => c.args[0] as KubeObject);
    assert.deepEqual(
      applied.map((o) => [o.kind, o.metadata.finalizers, o.metadata.labels?.shard]),
      [
        ['ClusterAddon', [FINALIZER], 's'],
        ['Kustomization', undefined, undefined],
      ],
    );
    assert.equal(decided.length, 1, 'decided again once on the written ClusterAddon and Kustomization');
    assert.equal(decided[0]?.kustomizations.length, 1);
    assert.equal(out.current?.metadata.resourceVersion, '2');
    assert.equal(calls.length, 2, 'the second pass has nothing left to apply');
  });

  it('stops after three passes', async () => {
    let n = 0;
    const { a } = applier();
    const decide = async () => {
      n += 1;
      return result({ clusterAddon: { ...addonObject(), spec: { n } } as never });
    };
    await a.applyPasses(
      'team',
      'a',
      false,
      { input: { kustomizations: [] } as never, result: await decide() },
      decide,
      signal,
    );
    assert.equal(n, 3, 'the first decision and two more');
  });

  it('while deleting: no ClusterAddon apply; patches first (a missing object is fine), stale GitRepository and Kustomizations deleted', async () => {
    const stale = {
      ...K,
      metadata: { name: 'old-addons', namespace: 'team', labels: { 'stackflux.io/cluster': 'a' } },
    } as KubeObject;
    const { a, calls } = applier({ 'team/old-addons': stale }, (verb) => {
      if (verb === 'mergePatch') throw notFound();
      return {};
    });
    const current = addonObject([FINALIZER]);
    const out = await a.applyPasses(
      'team',
      'a',
      true,
      {
        input: { kustomizations: [kustomization('cni')], clusterAddon: current } as never,
        result: result({
          clusterAddon: addonObject() as never,
          patches: [
            { apiVersion: 'v', kind: 'Kustomization', name: 'cni', namespace: 'team', patch: {} },
          ] as never,
          deleteGitRepository: 'old-addons',
          deleteKustomizations: ['cni'],
        }),
      },
      async () => assert.fail('nothing was written that the reconcile reads'),
      signal,
    );
    assert.deepEqual(
      calls.map((c) => [c.verb, c.args[1], c.args[2]]),
      [
        ['mergePatch', 'Kustomization', 'cni'],
        ['delete', 'GitRepository', 'old-addons'],
        ['delete', 'Kustomization', 'cni'],
      ],
    );
    assert.equal(out.current, current);
  });

  it("does not delete a GitRepository of another Cluster's name", async () => {
    const other = {
      ...K,
      metadata: { name: 'x', namespace: 'team', labels: { 'stackflux.io/cluster': 'b' } },
    } as KubeObject;
    const { a, calls } = applier({ 'team/x': other });
    await a.applyFluxObjects(
      'team',
      'a',
      result({ deleteGitRepository: 'x' }),
      { gitRepository: undefined, kustomizations: new Map() },
      signal,
    );
    assert.deepEqual(calls, []);
  });

  it('sets finalizers leased on the resourceVersion; a ClusterAddon gone meanwhile gives undefined', async () => {
    const { a, calls } = applier({}, () => {
      throw notFound();
    });
    const current = {
      ...addonObject([FINALIZER]),
      metadata: { ...addonObject().metadata, resourceVersion: '7' },
    };
    assert.equal(await a.setFinalizers(current as never, [], signal), undefined);
    assert.deepEqual(calls[0]?.args.slice(0, 5), [
      'stackflux.io/v1alpha1',
      'ClusterAddon',
      'a',
      'team',
      { metadata: { finalizers: [], resourceVersion: '7' } },
    ]);
  });
});
