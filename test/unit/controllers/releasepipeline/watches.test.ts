// The watches: which informer feeds which controller, through which map and update predicate.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { watchProviderKinds } from '../../../../controller/controllers/releasepipeline/providerwatch.ts';
import {
  watchClusterStackInputs,
  watchReleaseInputs,
} from '../../../../controller/controllers/releasepipeline/watches.ts';
import type { KubeObject } from '../../../../controller/runtime/client.ts';
import type { Controller } from '../../../../controller/runtime/controller.ts';
import { cluster, FakeInformer, indexed, recordingController, rel, stack } from './fakes.ts';

interface Watch {
  controller: Controller;
  informer: unknown;
  map?: (o: never) => string[];
  changed?: (o: never, n: never) => boolean;
}

function recordingManager() {
  const watches: Watch[] = [];
  return {
    watches,
    manager: {
      watch: (controller: Controller, informer: unknown, map?: Watch['map'], changed?: Watch['changed']) =>
        void watches.push({ controller, informer, ...(map ? { map } : {}), ...(changed ? { changed } : {}) }),
    },
  };
}

function setup() {
  const clusterStacks = indexed([stack('a', 's1', { clusterNamespaceSelector: {} }), stack('a', 's2')]);
  const releases = indexed([
    rel('a', 'r1', { clusterStack: 's1', clusterClass: 'cc-v1' }),
    rel('a', 'r2', { clusterStack: 's2', clusterClass: 'cc-v2' }),
  ]);
  const informers = {
    clusterStacks: clusterStacks.informer,
    releases: releases.informer,
    gitRepositories: new FakeInformer().informer as never,
    kustomizations: new FakeInformer().informer as never,
    namespaces: new FakeInformer().informer,
  };
  const cs = recordingController();
  const r = recordingController();
  return { informers, cs, r };
}

describe('watchClusterStackInputs', () => {
  it('a ClusterStack: its own objects and its releases', () => {
    const { informers, cs } = setup();
    const { watches, manager } = recordingManager();
    watchClusterStackInputs(manager, informers, cs.controller);
    assert.deepEqual(
      watches.map((w) => [w.informer === informers.clusterStacks, w.informer === informers.releases]),
      [
        [true, false],
        [false, true],
      ],
    );
    assert.deepEqual(watches[1]?.map?.(rel('a', 'r9', { clusterStack: 's1' }) as never), ['a/s1']);
  });
});

describe('watchReleaseInputs', () => {
  it('Clusters by class, sharing by selector and labels, everything once the view is complete', () => {
    const { informers, cs, r } = setup();
    const { watches, manager } = recordingManager();
    let onChange: ((objs: KubeObject[]) => void) | undefined;
    let onSynced: (() => void) | undefined;
    const view = {
      onChange: (fn: (objs: KubeObject[]) => void) => {
        onChange = fn;
      },
      onSynced: (fn: () => void) => {
        onSynced = fn;
      },
    };
    watchReleaseInputs(manager, informers, view, { clusterStack: cs.controller, release: r.controller });
    assert.equal(watches.length, 6);
    assert.deepEqual(
      watches.map((w) => (w.controller === cs.controller ? 'cs' : 'rel')),
      ['rel', 'rel', 'rel', 'rel', 'cs', 'rel'],
    );

    onChange?.([cluster('a', 'c1', 'cc-v1'), cluster('a', 'c2', 'cc-v1')]);
    assert.deepEqual([cs.keys, r.keys], [['a/s1', 'a/s2'], ['a/r1']]);

    const selector = watches[3];
    assert.equal(selector?.informer, informers.clusterStacks);
    const s1 = stack('a', 's1', { clusterNamespaceSelector: { matchLabels: { x: 'y' } } });
    assert.equal(selector?.changed?.(s1 as never, s1 as never), false);
    assert.equal(selector?.changed?.(s1 as never, stack('a', 's1') as never), true);
    assert.deepEqual(selector?.map?.(s1 as never), ['a/r1']);
    assert.deepEqual(watches[4]?.map?.({} as never), ['a/s1']);
    assert.deepEqual(watches[5]?.map?.({} as never), ['a/r1']);

    cs.keys.length = 0;
    r.keys.length = 0;
    onSynced?.();
    assert.deepEqual(
      [cs.keys, r.keys],
      [
        ['a/s1', 'a/s2'],
        ['a/r1', 'a/r2'],
      ],
    );
  });
});

describe('watchProviderKinds', () => {
  it('a provider object → its release; a template → who names it; a synced kind → who uses it', () => {
    const { cs, r } = setup();
    const ref = { apiVersion: 'p/v1', kind: 'DockerTemplate', name: 't1' };
    const stacks = indexed([stack('a', 's1', { providerRef: ref } as never), stack('a', 's2')]);
    const releases = indexed([rel('a', 'r1', { providerRef: ref } as never), rel('a', 'r2', {})]);
    let onObject: ((o: KubeObject) => void) | undefined;
    let onSynced: ((apiVersion: string, kind: string) => void) | undefined;
    const providers = {
      subscribe: (fn: (o: KubeObject) => void) => {
        onObject = fn;
      },
      subscribeSynced: (fn: (a: string, k: string) => void) => {
        onSynced = fn;
      },
    };
    watchProviderKinds(providers, stacks.informer, releases.informer, cs.controller, r.controller);
    onObject?.({
      apiVersion: 'p/v1',
      kind: 'Docker',
      metadata: {
        namespace: 'a',
        name: 'o1',
        ownerReferences: [{ kind: 'ClusterStackRelease', name: 'r2', controller: true }],
      },
    } as KubeObject);
    assert.deepEqual(r.keys, ['a/r2']);
    onObject?.({
      apiVersion: 'p/v1',
      kind: 'DockerTemplate',
      metadata: { namespace: 'a', name: 't1' },
    } as KubeObject);
    assert.deepEqual([cs.keys, r.keys], [['a/s1'], ['a/r2', 'a/r1']]);
    onSynced?.('p/v1', 'Docker');
    assert.deepEqual(
      [cs.keys, r.keys],
      [
        ['a/s1', 'a/s1'],
        ['a/r2', 'a/r1', 'a/r1'],
      ],
    );
  });
});
