import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ClusterStackRelease } from '../../../controller/api/clusterstackrelease.ts';
import type { GitRepository, Kustomization } from '../../../controller/api/flux.ts';
import type { Condition } from '../../../controller/api/meta.ts';
import type { StackManifest } from '../../../controller/api/release.ts';
import {
  type ClusterStackReleaseInput,
  commitOfRevision,
  reconcileClusterStackRelease,
} from '../../../controller/reconcilers/clusterstackrelease.ts';
import type { FluxTemplates } from '../../../controller/releases/flux.ts';
import { loadFluxTemplates } from '../../../controller/releases/flux-templates.ts';
import type { ValidationResult } from '../../../controller/releases/stack.ts';

// The templates are the product under test; reading them is the one fixture read here.
const templates: FluxTemplates = loadFluxTemplates();
const now = new Date('2025-01-02T03:04:05Z');
const T = '2025-01-01T00:00:00Z';
const TAG = 'docker-ferrol-1-30-v3';
const C1 = 'a'.repeat(40);
const C2 = 'b'.repeat(40);

const release: ClusterStackRelease = {
  apiVersion: 'stackflux.io/v1alpha1',
  kind: 'ClusterStackRelease',
  metadata: { name: TAG, namespace: 'team', uid: 'cskr-uid', generation: 2 },
  spec: {
    clusterStack: 'ferrol',
    tag: TAG,
    version: 'v3',
    clusterClass: TAG,
    kubernetesVersion: '1.30',
    source: { url: 'https://git.example.com/stacks.git', path: 'stacks/ferrol' },
    interval: '1m',
    timeout: '3m',
  },
};

const manifest: StackManifest = {
  apiVersion: 'stackflux.io/v1alpha1',
  kind: 'Stack',
  provider: 'docker',
  name: 'ferrol',
  kubernetesVersion: 'v1.30.4',
  version: 'v3',
  addons: [],
};
const valid: ValidationResult<StackManifest> = { ok: true, value: manifest };

function gitRepo(revision: string | undefined): GitRepository {
  return {
    apiVersion: 'source.toolkit.fluxcd.io/v1',
    kind: 'GitRepository',
    metadata: { name: TAG, namespace: 'team' },
    spec: { interval: '1m', url: 'x' },
    ...(revision !== undefined ? { status: { artifact: { revision } } } : {}),
  };
}

function ks(
  ready: Condition['status'] | undefined,
  applied?: string,
  extra: Partial<Condition> = {},
): Kustomization {
  return {
    apiVersion: 'kustomize.toolkit.fluxcd.io/v1',
    kind: 'Kustomization',
    metadata: { name: TAG, namespace: 'team', generation: 1 },
    spec: { interval: '1m', prune: true, sourceRef: { kind: 'GitRepository', name: TAG } },
    status: {
      observedGeneration: 1,
      ...(applied !== undefined ? { lastAppliedRevision: applied } : {}),
      conditions:
        ready === undefined
          ? []
          : [
              {
                type: 'Ready',
                status: ready,
                reason: 'ReconciliationSucceeded',
                message: 'ok',
                lastTransitionTime: T,
                ...extra,
              },
            ],
    },
  };
}

function run(p: Partial<ClusterStackReleaseInput>) {
  return reconcileClusterStackRelease({ release, clusters: [], templates, now, ...p });
}
const cond = (r: ReturnType<typeof run>, type: string) => r.status.conditions?.find((c) => c.type === type);

describe('reconcileClusterStackRelease', () => {
  it('emits the GitRepository and Kustomization from the templates, owned and labelled', () => {
    const r = run({ stack: valid, commit: C1, gitRepository: gitRepo(`${TAG}@sha1:${C1}`) });
    assert.ok(r.gitRepository);
    assert.deepEqual(r.gitRepository.spec, {
      interval: '1m',
      url: 'https://git.example.com/stacks.git',
      ref: { name: `refs/tags/${TAG}`, commit: C1 },
      ignore: '/*\n!/stacks/\n/stacks/*\n!/stacks/ferrol/\n',
    });
    assert.ok(r.kustomization);
    assert.deepEqual(r.kustomization.spec, {
      interval: '1m',
      timeout: '3m',
      path: './stacks/ferrol/cluster-class',
      prune: true,
      wait: true,
      targetNamespace: 'team',
      sourceRef: { kind: 'GitRepository', name: TAG },
    });
    for (const o of [r.gitRepository, r.kustomization] as const) {
      assert.deepEqual(o.metadata.labels, {
        'app.kubernetes.io/managed-by': 'stackflux',
        'stackflux.io/clusterstack': 'ferrol',
        'stackflux.io/release': TAG,
      });
      assert.deepEqual(o.metadata.ownerReferences, [
        {
          apiVersion: 'stackflux.io/v1alpha1',
          kind: 'ClusterStackRelease',
          name: TAG,
          uid: 'cskr-uid',
          controller: true,
          blockOwnerDeletion: true,
        },
      ]);
    }
    assert.equal(r.status.gitRepository, TAG);
    assert.equal(r.status.kustomization, TAG);
    assert.equal(r.status.commit, C1);
    assert.equal(r.status.kubernetesVersion, 'v1.30.4');
    assert.equal(r.status.revision, `${TAG}@sha1:${C1}`);
  });

  it('waits for the artifact before applying anything', () => {
    const r = run({ stack: undefined });
    assert.equal(r.kustomization, undefined);
    assert.equal(cond(r, 'Ready')?.status, 'Unknown');
    assert.equal(cond(r, 'Reconciling')?.reason, 'ArtifactNotReady');
  });

  it('a failed read names its reason and the commit (no verdict: Ready Unknown), nothing applied', () => {
    const digest = `sha256:${'a'.repeat(64)}`;
    const r = run({ stack: undefined, commit: digest, fetchFailure: { reason: 'DigestMismatch' } });
    assert.equal(r.kustomization, undefined);
    for (const type of ['Ready', 'Reconciling']) {
      const c = cond(r, type);
      assert.equal(c?.reason, 'DigestMismatch', type);
      assert.ok(c?.message?.includes(`at ${digest} failed (DigestMismatch)`), `${type}: ${c?.message}`);
    }
    assert.equal(cond(r, 'Ready')?.status, 'Unknown');
  });

  it('acceptance 7: an invalid stack.yaml → Ready=False with the reason, no Kustomization', () => {
    const r = run({
      stack: {
        ok: false,
        errors: ['stack.yaml: kubernetesVersion "v1.31.2" does not match the tag\'s 1.30'],
      },
    });
    assert.equal(r.kustomization, undefined);
    assert.equal(cond(r, 'Ready')?.status, 'False');
    assert.equal(cond(r, 'Ready')?.reason, 'InvalidRelease');
    assert.match(
      cond(r, 'Ready')?.message ?? '',
      /kubernetesVersion "v1.31.2" does not match the tag's 1.30/,
    );
    assert.equal(cond(r, 'Ready')?.observedGeneration, 2);
  });

  it('is Ready only when the Kustomization is Ready at this tag’s revision', () => {
    const git = gitRepo(`${TAG}@sha1:${C2}`);
    const stale = run({
      stack: valid,
      commit: C2,
      gitRepository: git,
      kustomization: ks('True', `${TAG}@sha1:${C1}`),
    });
    assert.equal(cond(stale, 'Ready')?.status, 'Unknown');
    assert.equal(cond(stale, 'Reconciling')?.reason, 'RevisionMismatch');

    const other = run({
      stack: valid,
      commit: C2,
      gitRepository: git,
      kustomization: ks('True', `docker-ferrol-1-30-v2@sha1:${C2}`),
    });
    assert.equal(cond(other, 'Ready')?.status, 'Unknown');

    const ready = run({
      stack: valid,
      commit: C2,
      gitRepository: git,
      kustomization: ks('True', `${TAG}@sha1:${C2}`),
    });
    assert.equal(cond(ready, 'Ready')?.status, 'True');
    assert.equal(cond(ready, 'Reconciling'), undefined);
    assert.equal(ready.status.lastAppliedRevision, `${TAG}@sha1:${C2}`);
  });

  it('stays Ready while Flux re-verifies the applied revision (Ready=Unknown), not before it was Ready', () => {
    const git = gitRepo(`${TAG}@sha1:${C2}`);
    const ready = run({
      stack: valid,
      commit: C2,
      gitRepository: git,
      kustomization: ks('True', `${TAG}@sha1:${C2}`),
    });
    assert.equal(cond(ready, 'Ready')?.status, 'True');
    const wasReady = { ...release, status: ready.status };
    const reverifying = ks('Unknown', `${TAG}@sha1:${C2}`, {
      reason: 'Progressing',
      message: 'Reconciliation in progress',
    });
    const again = run({
      release: wasReady,
      stack: valid,
      commit: C2,
      gitRepository: git,
      kustomization: reverifying,
    });
    assert.equal(cond(again, 'Ready')?.status, 'True', 'no flap, so the ClusterStack sees no gap');
    const never = run({ stack: valid, commit: C2, gitRepository: git, kustomization: reverifying });
    assert.notEqual(cond(never, 'Ready')?.status, 'True');
  });

  it('is Ready at the validated commit in either revision form Flux writes', () => {
    for (const applied of [`${TAG}@sha1:${C1}`, `refs/tags/${TAG}@sha1:${C1}`]) {
      const r = run({ stack: valid, commit: C1, kustomization: ks('True', applied) });
      assert.equal(cond(r, 'Ready')?.status, 'True', applied);
    }
  });

  // Issue 11 defect 4: a moved tag must never be applied unvalidated.
  it('pins the GitRepository to the validated commit, and has none before a commit validated', () => {
    const none = run({ stack: undefined });
    assert.equal(none.gitRepository, undefined, 'nothing for Flux to fetch before validation');
    const invalid = run({ stack: { ok: false, errors: ['bad'] }, commit: C1 });
    assert.equal(invalid.gitRepository, undefined, 'an invalid commit is not pinned');
    assert.equal(invalid.status.commit, undefined);
    const pinned = run({ stack: valid, commit: C1 });
    assert.deepEqual(pinned.gitRepository?.spec.ref, { name: `refs/tags/${TAG}`, commit: C1 });
    assert.equal(pinned.status.commit, C1);
  });

  it('a moved tag: keeps applying the validated commit and reports TagMoved', () => {
    const applied = { ...release, status: { commit: C1 } };
    const r = run({
      release: applied,
      stack: valid,
      commit: C1,
      listedCommit: C2,
      kustomization: ks('True', `refs/tags/${TAG}@sha1:${C1}`),
    });
    assert.deepEqual(r.gitRepository?.spec.ref, { name: `refs/tags/${TAG}`, commit: C1 });
    assert.ok(r.kustomization, 'the validated ClusterClass stays applied');
    assert.equal(r.status.commit, C1);
    assert.equal(cond(r, 'Ready')?.status, 'False');
    assert.equal(cond(r, 'Ready')?.reason, 'TagMoved');
    assert.match(
      cond(r, 'Ready')?.message ?? '',
      new RegExp(`now points at ${C2}, not at the validated commit ${C1}`),
    );
    // The tag moved back: Ready again.
    const back = run({
      release: { ...applied, status: r.status },
      stack: valid,
      commit: C1,
      listedCommit: C1,
      kustomization: ks('True', `refs/tags/${TAG}@sha1:${C1}`),
    });
    assert.equal(cond(back, 'Ready')?.status, 'True');
  });

  it('an invalid release keeps the pin it has (what runs stays)', () => {
    const pinned = { ...release, status: { commit: C1 } };
    const r = run({ release: pinned, stack: { ok: false, errors: ['bad'] }, commit: C2, listedCommit: C2 });
    assert.equal(r.status.commit, C1);
    assert.deepEqual(r.gitRepository?.spec.ref, { name: `refs/tags/${TAG}`, commit: C1 });
    assert.equal(r.kustomization, undefined);
    assert.equal(cond(r, 'Ready')?.reason, 'InvalidRelease');
  });

  it('mirrors a failing Kustomization', () => {
    const r = run({
      stack: valid,
      commit: C1,
      gitRepository: gitRepo(`${TAG}@sha1:${C1}`),
      kustomization: ks('False', undefined, {
        reason: 'HealthCheckFailed',
        message: 'timeout waiting for ClusterClass',
      }),
    });
    assert.equal(cond(r, 'Ready')?.status, 'False');
    assert.equal(cond(r, 'Ready')?.reason, 'KustomizationNotReady');
    assert.match(cond(r, 'Ready')?.message ?? '', /HealthCheckFailed.*timeout waiting/);
  });

  it('does not trust a Kustomization status of an older generation', () => {
    const k = ks('True', `${TAG}@sha1:${C1}`);
    k.metadata.generation = 2;
    const r = run({
      stack: valid,
      commit: C1,
      gitRepository: gitRepo(`${TAG}@sha1:${C1}`),
      kustomization: k,
    });
    assert.equal(cond(r, 'Ready')?.status, 'Unknown');
  });

  it('keeps the in-use finalizer, also while being deleted; releases it when unused', () => {
    assert.deepEqual(run({ stack: valid }).finalizers, ['stackflux.io/release-in-use']);
    const deleting = {
      ...release,
      metadata: { ...release.metadata, deletionTimestamp: T, finalizers: ['stackflux.io/release-in-use'] },
    };
    const used = run({ release: deleting, stack: valid, clusters: ['prod', 'dev'] });
    assert.deepEqual(used.finalizers, ['stackflux.io/release-in-use']);
    assert.ok(used.kustomization, 'the ClusterClass stays applied while in use');
    assert.equal(cond(used, 'Deleting')?.reason, 'InUse');
    assert.match(cond(used, 'Deleting')?.message ?? '', /dev, prod/);
    assert.equal(used.status.clusters, 2);
    const unused = run({ release: deleting, stack: valid, clusters: [] });
    assert.deepEqual(unused.finalizers, []);
    assert.equal(cond(unused, 'Deleting'), undefined);
  });

  // Issue 11 defect 2: the finalizer comes off only when every Cluster can be seen.
  it('keeps the in-use finalizer while not every Cluster can be seen', () => {
    const deleting = {
      ...release,
      metadata: { ...release.metadata, deletionTimestamp: T, finalizers: ['stackflux.io/release-in-use'] },
      status: { clusters: 2 },
    };
    const r = run({
      release: deleting,
      stack: valid,
      clusters: [],
      clustersUnknown: { reason: 'ClustersNotSynced', message: 'the first list has not completed' },
    });
    assert.deepEqual(r.finalizers, ['stackflux.io/release-in-use']);
    assert.equal(cond(r, 'Deleting')?.reason, 'ClustersNotSynced');
    assert.equal(r.status.clusters, 2, 'the last known count stays');
  });

  it("applies cluster-class/ as the release's ServiceAccount when it names one (least privilege)", () => {
    const withSa = { ...release, spec: { ...release.spec, serviceAccountName: 'release-applier' } };
    assert.equal(
      run({ release: withSa, stack: valid, commit: C1 }).kustomization?.spec.serviceAccountName,
      'release-applier',
    );
    assert.equal(run({ stack: valid, commit: C1 }).kustomization?.spec.serviceAccountName, undefined);
  });

  it('surfaces a failure of the current generation before any success (Flux stamps the condition, not status.observedGeneration)', () => {
    const k = ks('False', undefined, {
      reason: 'ReconciliationFailed',
      message: 'ClusterRoleBinding/x dry-run failed (Forbidden)',
      observedGeneration: 1,
    });
    k.status = { ...k.status, observedGeneration: -1 };
    const r = run({ stack: valid, commit: C1, kustomization: k });
    assert.equal(cond(r, 'Ready')?.reason, 'KustomizationNotReady');
    assert.match(cond(r, 'Ready')?.message ?? '', /Forbidden/);
  });

  it('is a fixed point over its own status', () => {
    const input = {
      stack: valid,
      commit: C1,
      gitRepository: gitRepo(`${TAG}@sha1:${C1}`),
      kustomization: ks('True', `${TAG}@sha1:${C1}`),
    };
    const first = run(input);
    const second = run({
      ...input,
      release: { ...release, status: first.status },
      now: new Date('2031-01-01T00:00:00Z'),
    });
    assert.deepEqual(second, first);
  });
});

describe('commitOfRevision', () => {
  it('extracts the commit of this tag only', () => {
    assert.equal(commitOfRevision(`${TAG}@sha1:${C1}`, TAG), C1);
    assert.equal(commitOfRevision(`refs/tags/${TAG}@sha1:${C1}`, TAG), C1);
    assert.equal(commitOfRevision(`refs/tags/${TAG}-x@sha1:${C1}`, TAG), undefined);
    assert.equal(commitOfRevision(`${TAG}-x@sha1:${C1}`, TAG), undefined);
    assert.equal(commitOfRevision(`main@sha1:${C1}`, TAG), undefined);
    assert.equal(commitOfRevision(`${TAG}@sha1:abc`, TAG), undefined);
    assert.equal(commitOfRevision(undefined, TAG), undefined);
  });
});

// Issue 22 row 3 and 12: the tenancy policy (controller flags) is an input of the reconcile.
describe('reconcileClusterStackRelease: tenancy policy (issue 22)', () => {
  const chartManifest: StackManifest = {
    ...manifest,
    addons: [
      { name: 'csi', chart: { name: 'csi', version: '1.0.0', repository: 'oci://registry.internal/c' } },
    ],
  };

  it('--default-service-account: the Kustomization impersonates it when the ClusterStack names none', () => {
    const tenancy = { defaultServiceAccount: 'tenant-applier' };
    assert.equal(
      run({ stack: valid, commit: C1, tenancy }).kustomization?.spec.serviceAccountName,
      'tenant-applier',
    );
    const withSa = { ...release, spec: { ...release.spec, serviceAccountName: 'release-applier' } };
    assert.equal(
      run({ release: withSa, stack: valid, commit: C1, tenancy }).kustomization?.spec.serviceAccountName,
      'release-applier',
      "the ClusterStack's own serviceAccountName wins",
    );
  });

  it('--allowed-chart-hosts: a chart from another host makes the release InvalidRelease naming the field; nothing applied', () => {
    const stack: ValidationResult<StackManifest> = { ok: true, value: chartManifest };
    const r = run({ stack, commit: C1, tenancy: { allowedChartHosts: ['ghcr.io'] } });
    assert.equal(r.kustomization, undefined);
    const ready = cond(r, 'Ready');
    assert.equal(ready?.status, 'False');
    assert.equal(ready?.reason, 'InvalidRelease');
    assert.match(
      ready?.message ?? '',
      /addons\[0\] \(csi\)\.repository "oci:\/\/registry\.internal\/c": host registry\.internal is not in --allowed-chart-hosts \(ghcr\.io\)/,
    );
    assert.ok(
      run({ stack, commit: C1, tenancy: { allowedChartHosts: ['registry.internal'] } }).kustomization,
    );
    assert.ok(run({ stack, commit: C1 }).kustomization, 'no allowlist: any host');
  });
});
