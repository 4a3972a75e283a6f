// Issue 15: providerRef as the cluster-stack-operator honours it — the pure decisions.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ClusterStack } from '../../../controller/api/clusterstack.ts';
import type { ClusterStackRelease } from '../../../controller/api/clusterstackrelease.ts';
import type { Kustomization } from '../../../controller/api/flux.ts';
import type { StackManifest } from '../../../controller/api/release.ts';
import { reconcileClusterStack } from '../../../controller/reconcilers/clusterstack.ts';
import { reconcileClusterStackRelease } from '../../../controller/reconcilers/clusterstackrelease.ts';
import {
  desiredProviderObject,
  type ProviderLookup,
  type ProviderObject,
  type ProviderTemplate,
  providerConfig,
  providerObjectKind,
  providerObjectReady,
  releaseProviderBlock,
} from '../../../controller/reconcilers/provider.ts';
import { loadFluxTemplates } from '../../../controller/releases/flux-templates.ts';

const templates = loadFluxTemplates();
const now = new Date('2025-01-02T03:04:05Z');
const AV = 'infrastructure.clusterstack.x-k8s.io/v1alpha1';
const TAG = 'docker-ferrol-1-30-v3';
const COMMIT = 'c'.repeat(40);
const URL = 'https://git.example.com/stacks.git';
const REF = { apiVersion: AV, kind: 'DockerClusterStackReleaseTemplate', name: 'ferrol' };

const template: ProviderTemplate = {
  apiVersion: AV,
  kind: 'DockerClusterStackReleaseTemplate',
  metadata: { name: 'ferrol', namespace: 'team' },
  spec: { template: { spec: { nodeImages: ['ubuntu-2404'] } } },
};

function clusterStack(spec: Partial<ClusterStack['spec']>, meta: Partial<ClusterStack['metadata']> = {}) {
  return {
    apiVersion: 'stackflux.io/v1alpha1',
    kind: 'ClusterStack',
    metadata: { name: 'ferrol', namespace: 'team', uid: 'csk-uid', generation: 1, ...meta },
    spec: {
      provider: 'docker',
      name: 'ferrol',
      kubernetesVersion: '1.30',
      source: { git: { url: URL }, path: 'stacks/ferrol' },
      ...spec,
    },
  } satisfies ClusterStack;
}

function release(withProvider: boolean, tag = TAG): ClusterStackRelease {
  return {
    apiVersion: 'stackflux.io/v1alpha1',
    kind: 'ClusterStackRelease',
    metadata: {
      name: tag,
      namespace: 'team',
      uid: `uid-${tag}`,
      generation: 1,
      ownerReferences: [
        {
          apiVersion: 'stackflux.io/v1alpha1',
          kind: 'ClusterStack',
          name: 'ferrol',
          uid: 'csk-uid',
          controller: true,
        },
      ],
    },
    spec: {
      clusterStack: 'ferrol',
      tag,
      version: tag.slice(tag.lastIndexOf('-') + 1),
      clusterClass: tag,
      kubernetesVersion: '1.30',
      source: { url: URL, path: 'stacks/ferrol' },
      ...(withProvider ? { providerRef: REF } : {}),
    },
  };
}

const manifest: StackManifest = {
  apiVersion: 'stackflux.io/v1alpha1',
  kind: 'Stack',
  provider: 'docker',
  name: 'ferrol',
  kubernetesVersion: 'v1.30.4',
  version: 'v3',
  addons: [],
};

function providerObject(status: ProviderObject['status'], generation = 1): ProviderObject {
  return {
    apiVersion: AV,
    kind: 'DockerClusterStackRelease',
    metadata: { name: TAG, namespace: 'team', generation },
    ...(status !== undefined ? { status } : {}),
  };
}

const found = <T>(object: T): ProviderLookup<T> => ({ state: 'found', object });

function reconcileRelease(o: {
  object: ProviderLookup<ProviderObject>;
  templateLookup?: ProviderLookup<ProviderTemplate>;
  kustomization?: Kustomization;
}) {
  return reconcileClusterStackRelease({
    release: release(true),
    stack: { ok: true, value: manifest },
    commit: COMMIT,
    clusters: [],
    provider: { template: o.templateLookup ?? found(template), object: o.object },
    ...(o.kustomization !== undefined ? { kustomization: o.kustomization } : {}),
    templates,
    now,
  });
}
const cond = (conditions: { type: string }[] | undefined, type: string) =>
  conditions?.find((c) => c.type === type) as { status: string; reason: string; message: string } | undefined;

describe('providerConfig', () => {
  it('noProvider wins over providerRef (as in the cluster-stack-operator)', () => {
    assert.deepEqual(providerConfig(clusterStack({ noProvider: true, providerRef: REF })), { mode: 'none' });
  });
  it('neither field is a configuration error that names both fields', () => {
    const c = providerConfig(clusterStack({}));
    assert.equal(c.mode, 'invalid');
    assert.ok(c.mode === 'invalid' && c.reason === 'ProviderNotConfigured');
    assert.match(c.mode === 'invalid' ? c.message : '', /providerRef.*noProvider/);
  });
  it('a kind that is not a ...Template kind is refused', () => {
    const c = providerConfig(clusterStack({ providerRef: { ...REF, kind: 'DockerClusterStackRelease' } }));
    assert.ok(c.mode === 'invalid' && c.reason === 'InvalidProviderRef');
  });
  it('a full ref is used', () => {
    assert.deepEqual(providerConfig(clusterStack({ providerRef: REF })), { mode: 'ref', ref: REF });
  });
});

describe('desiredProviderObject', () => {
  it('is the template kind without "Template", named after the release, with the template spec, owned and annotated', () => {
    const o = desiredProviderObject(template, release(true), COMMIT);
    assert.equal(providerObjectKind('OpenStackClusterStackReleaseTemplate'), 'OpenStackClusterStackRelease');
    assert.equal(o.kind, 'DockerClusterStackRelease');
    assert.equal(o.apiVersion, AV);
    assert.equal(o.metadata.name, TAG);
    assert.equal(o.metadata.namespace, 'team');
    assert.deepEqual(o.spec, { nodeImages: ['ubuntu-2404'] });
    assert.deepEqual(o.metadata.annotations, {
      'stackflux.io/commit': COMMIT,
      'stackflux.io/source-path': 'stacks/ferrol',
      'stackflux.io/source-url': URL,
      'stackflux.io/tag': TAG,
    });
    assert.deepEqual(o.metadata.ownerReferences, [
      {
        apiVersion: 'stackflux.io/v1alpha1',
        kind: 'ClusterStackRelease',
        name: TAG,
        uid: `uid-${TAG}`,
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
    // A copy: changing the object does not change the template.
    (o.spec as { nodeImages: string[] }).nodeImages.push('x');
    assert.deepEqual(template.spec?.template?.spec, { nodeImages: ['ubuntu-2404'] });
  });
});

describe('providerObjectReady', () => {
  it('status.ready true or a Ready condition True; not while the status is of an older generation', () => {
    assert.equal(providerObjectReady(providerObject({ ready: true })).ready, true);
    assert.equal(providerObjectReady(providerObject({ ready: false })).ready, false);
    assert.equal(providerObjectReady(providerObject(undefined)).ready, false);
    const cond = (status: string) => ({
      conditions: [
        { type: 'Ready', status, reason: 'R', message: 'm', lastTransitionTime: '2025-01-01T00:00:00Z' },
      ],
    });
    assert.equal(providerObjectReady(providerObject(cond('True'))).ready, true);
    assert.equal(providerObjectReady(providerObject(cond('False'))).ready, false);
    assert.equal(providerObjectReady(providerObject({ ready: true, observedGeneration: 1 }, 2)).ready, false);
  });
});

describe('reconcileClusterStackRelease with a providerRef', () => {
  it('creates the provider object and no Kustomization until the provider is ready; Ready=False names the object', () => {
    const r = reconcileRelease({ object: { state: 'notFound' } });
    assert.equal(r.kustomization, undefined);
    assert.equal(r.providerObject?.kind, 'DockerClusterStackRelease');
    assert.equal(r.providerObject?.metadata.annotations?.['stackflux.io/commit'], COMMIT);
    const ready = cond(r.status.conditions, 'Ready');
    assert.equal(ready?.status, 'False');
    assert.equal(ready?.reason, 'WaitingForProvider');
    assert.match(ready?.message ?? '', /DockerClusterStackRelease team\/docker-ferrol-1-30-v3/);
    assert.equal(cond(r.status.conditions, 'Reconciling')?.status, 'True');
    assert.equal(cond(r.status.conditions, 'ProviderReady')?.status, 'False');
    assert.equal(r.status.provider?.ready, false);

    const notYet = reconcileRelease({ object: found(providerObject({ ready: false })) });
    assert.equal(notYet.kustomization, undefined);
    assert.match(cond(notYet.status.conditions, 'Ready')?.message ?? '', /status\.ready is not true yet/);
  });

  it('creates the Kustomization once the provider object is ready', () => {
    const r = reconcileRelease({ object: found(providerObject({ ready: true })) });
    assert.equal(r.kustomization?.metadata.name, TAG);
    assert.equal(cond(r.status.conditions, 'ProviderReady')?.status, 'True');
    assert.equal(r.status.provider?.ready, true);
    assert.equal(cond(r.status.conditions, 'Ready')?.reason, 'Progressing');
  });

  it('a provider object that goes unready later is reported; the applied Kustomization is left as it is', () => {
    const applied: Kustomization = {
      apiVersion: 'kustomize.toolkit.fluxcd.io/v1',
      kind: 'Kustomization',
      metadata: { name: TAG, namespace: 'team', generation: 1 },
      spec: { interval: '5m', prune: true, sourceRef: { kind: 'GitRepository', name: TAG } },
      status: { observedGeneration: 1, lastAppliedRevision: `${TAG}@sha1:${COMMIT}` },
    };
    const r = reconcileRelease({ object: found(providerObject({ ready: false })), kustomization: applied });
    assert.equal(r.kustomization, undefined, 'not re-applied (and the controller never deletes it)');
    const ready = cond(r.status.conditions, 'Ready');
    assert.equal(ready?.status, 'False');
    assert.equal(ready?.reason, 'ProviderNotReady');
    assert.match(ready?.message ?? '', /keeps running/);
    assert.equal(cond(r.status.conditions, 'Reconciling'), undefined);
  });

  it('a missing template or unserved kind: no object, a condition saying what to fix', () => {
    const missing = reconcileRelease({
      object: { state: 'notFound' },
      templateLookup: { state: 'notFound' },
    });
    assert.equal(missing.providerObject, undefined);
    assert.equal(missing.kustomization, undefined);
    assert.equal(cond(missing.status.conditions, 'Ready')?.reason, 'ProviderTemplateNotFound');
    const unserved = reconcileRelease({
      object: { state: 'notServed', apiVersion: AV, kind: 'DockerClusterStackRelease' },
    });
    assert.equal(unserved.providerObject, undefined);
    assert.equal(cond(unserved.status.conditions, 'Ready')?.reason, 'ProviderKindNotServed');
    // The template gone, the object still there and ready: it keeps being used (not re-applied).
    const kept = reconcileRelease({
      object: found(providerObject({ ready: true })),
      templateLookup: { state: 'notFound' },
    });
    assert.equal(kept.providerObject, undefined);
    assert.ok(kept.kustomization !== undefined);
  });

  it('caches not synced yet (e.g. after a restart): a release that was provider-ready stays Ready', () => {
    const pending = { state: 'pending', message: 'waiting for the cache' } as const;
    const first = reconcileRelease({ object: found(providerObject({ ready: true })) });
    const again = reconcileClusterStackRelease({
      release: { ...release(true), status: first.status },
      stack: { ok: true, value: manifest },
      commit: COMMIT,
      clusters: [],
      provider: { template: pending, object: pending },
      templates,
      now,
    });
    assert.ok(again.kustomization !== undefined, 'the Kustomization is still applied');
    assert.equal(again.providerObject, undefined, 'nothing written while its state is unknown');
    assert.deepEqual(again.status.conditions, first.status.conditions);
    // Never provider-ready before: it waits.
    const fresh = reconcileRelease({ object: pending, templateLookup: pending });
    assert.equal(fresh.kustomization, undefined);
    assert.equal(cond(fresh.status.conditions, 'Ready')?.reason, 'ProviderPending');
  });

  it('without providerRef nothing changes: no object, no ProviderReady condition', () => {
    const r = reconcileClusterStackRelease({
      release: release(false),
      stack: { ok: true, value: manifest },
      commit: COMMIT,
      clusters: [],
      templates,
      now,
    });
    assert.equal(r.providerObject, undefined);
    assert.ok(r.kustomization !== undefined);
    assert.equal(cond(r.status.conditions, 'ProviderReady'), undefined);
    assert.equal(r.status.provider, undefined);
  });
});

describe('reconcileClusterStack with a providerRef', () => {
  const tags = ['docker-ferrol-1-30-v1', 'docker-ferrol-1-30-v3'];
  const listing = { ok: true as const, tags, listedAt: '2025-01-01T00:00:00Z' };
  const old = release(false, 'docker-ferrol-1-30-v1');
  const run = (cs: ClusterStack, providerTemplate?: ProviderLookup<ProviderTemplate>) =>
    reconcileClusterStack({
      clusterStack: cs,
      listing,
      releases: [old],
      clusters: [],
      ...(providerTemplate !== undefined ? { providerTemplate } : {}),
      now,
    });

  it('found: releases carry the template ref; the unused old release is collected as usual', () => {
    const r = run(clusterStack({ providerRef: REF }), found(template));
    assert.deepEqual(
      r.apply.map((a) => [a.metadata.name, a.spec.providerRef]),
      [[TAG, REF]],
    );
    assert.deepEqual(r.delete, ['docker-ferrol-1-30-v1']);
    assert.equal(cond(r.status.conditions, 'ProviderTemplateReady')?.status, 'True');
  });

  for (const [what, cs, lookup, reason] of [
    [
      'template missing',
      clusterStack({ providerRef: REF }),
      { state: 'notFound' },
      'ProviderTemplateNotFound',
    ],
    [
      'kind not served',
      clusterStack({ providerRef: REF }),
      { state: 'notServed', apiVersion: AV, kind: 'DockerClusterStackReleaseTemplate' },
      'ProviderKindNotServed',
    ],
    ['neither field', clusterStack({}), undefined, 'ProviderNotConfigured'],
  ] as const) {
    it(`${what}: Ready=False ${reason}, nothing created and nothing deleted`, () => {
      const r = run(cs, lookup as ProviderLookup<ProviderTemplate> | undefined);
      assert.deepEqual(r.apply, []);
      assert.deepEqual(r.delete, []);
      const ready = cond(r.status.conditions, 'Ready');
      assert.equal(ready?.status, 'False');
      assert.equal(ready?.reason, reason);
      assert.equal(cond(r.status.conditions, 'ProviderTemplateReady')?.reason, reason);
    });
  }

  it('template not known yet (cache syncing): Reconciling, nothing deleted', () => {
    const r = run(clusterStack({ providerRef: REF }), { state: 'pending', message: 'waiting for the cache' });
    assert.deepEqual(r.delete, []);
    assert.deepEqual(r.apply, []);
    assert.equal(cond(r.status.conditions, 'Reconciling')?.status, 'True');
  });

  it('a template found before and not known yet (cache syncing) does not flap: releases go on', () => {
    const first = run(clusterStack({ providerRef: REF }), found(template));
    const cs = { ...clusterStack({ providerRef: REF }), status: first.status };
    const r = run(cs, { state: 'pending', message: 'waiting for the cache' });
    assert.deepEqual(r.apply, first.apply);
    assert.deepEqual(r.delete, first.delete);
    assert.deepEqual(
      cond(r.status.conditions, 'ProviderTemplateReady'),
      cond(first.status.conditions, 'ProviderTemplateReady'),
    );
    // A different ref found before does not count.
    const other = { ...clusterStack({ providerRef: { ...REF, name: 'other' } }), status: first.status };
    assert.deepEqual(run(other, { state: 'pending', message: 'x' }).apply, []);
  });

  it('a ClusterStack being deleted still deletes its unused releases despite a provider problem', () => {
    const r = run(clusterStack({}, { deletionTimestamp: '2025-01-01T00:00:00Z' }));
    assert.deepEqual(r.delete, ['docker-ferrol-1-30-v1']);
  });
});

describe('releaseProviderBlock (ClusterAddons)', () => {
  it('blocks a release with providerRef until ProviderReady is True; never one without', () => {
    assert.equal(releaseProviderBlock(release(false)), undefined);
    const waiting = release(true);
    assert.match(releaseProviderBlock(waiting) ?? '', /not usable yet/);
    const ready = release(true);
    ready.status = {
      conditions: [
        {
          type: 'ProviderReady',
          status: 'True',
          reason: 'ProviderReady',
          message: 'ok',
          lastTransitionTime: '2025-01-01T00:00:00Z',
        },
      ],
    };
    assert.equal(releaseProviderBlock(ready), undefined);
  });
});
