// A release whose cluster-class stackflux renders (csctl: a Helm chart): the reconcile applies the
// rendered objects from the fleet branch they were written to, pinned to that commit, and keeps
// the last good state when a render fails.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { ClusterStackRelease } from '../../../controller/api/clusterstackrelease.ts';
import type { Kustomization } from '../../../controller/api/flux.ts';
import {
  type ClusterStackReleaseInput,
  reconcileClusterStackRelease,
} from '../../../controller/reconcilers/clusterstackrelease.ts';
import type { StackDescription } from '../../../controller/releases/description.ts';
import { loadFluxTemplates } from '../../../controller/releases/flux-templates.ts';
import { readReleaseDescription } from '../../../controller/releases/format.ts';
import { parseReleaseTag } from '../../../controller/releases/tags.ts';
import { readStackDir } from '../../../hack/lib/stack-dir.ts';

const templates = loadFluxTemplates();
const now = new Date('2026-01-02T03:04:05Z');
const TAG = 'docker-csoferrol-1-30-v1';
const COMMIT = 'a'.repeat(40);
const FLEET_COMMIT = 'f'.repeat(40);
const BRANCH = `stackflux/_releases/team/${TAG}`;
const release: ClusterStackRelease = {
  apiVersion: 'stackflux.io/v1alpha1',
  kind: 'ClusterStackRelease',
  metadata: { name: TAG, namespace: 'team', uid: 'uid', generation: 1 },
  spec: {
    clusterStack: 'csoferrol',
    tag: TAG,
    version: 'v1',
    clusterClass: TAG,
    kubernetesVersion: '1.30',
    source: { url: 'https://git.example.com/stacks.git', path: 'stacks/csoferrol' },
  },
};
const description: StackDescription = {
  format: 'csctl',
  provider: 'docker',
  name: 'csoferrol',
  kubernetesVersion: 'v1.30.4',
  version: 'v1',
  addons: [],
  clusterClass: { kind: 'helm-chart', path: 'cluster-class/' },
  valuesTemplating: 'go-template',
};
const written = {
  ok: true as const,
  url: 'https://git.example.com/fleet.git',
  branch: BRANCH,
  commit: FLEET_COMMIT,
  secretName: 'fleet',
};
const input = (o: Partial<ClusterStackReleaseInput> = {}): ClusterStackReleaseInput => ({
  release,
  stack: { ok: true, value: description },
  commit: COMMIT,
  clusters: [],
  templates,
  now,
  ...o,
});
function appliedKs(revision: string): Kustomization {
  return {
    apiVersion: 'kustomize.toolkit.fluxcd.io/v1',
    kind: 'Kustomization',
    metadata: { name: TAG, namespace: 'team', generation: 1 },
    spec: { interval: '5m', prune: true, sourceRef: { kind: 'GitRepository', name: TAG } },
    status: {
      observedGeneration: 1,
      lastAppliedRevision: revision,
      conditions: [
        {
          type: 'Ready',
          status: 'True',
          reason: 'ReconciliationSucceeded',
          message: '',
          lastTransitionTime: '',
        },
      ],
    },
  };
}
const ready = (r: ReturnType<typeof reconcileClusterStackRelease>) =>
  r.status.conditions?.find((c) => c.type === 'Ready');

describe('ClusterStackRelease with a rendered cluster-class', () => {
  it('applies nothing until the rendered objects are written', () => {
    const r = reconcileClusterStackRelease(input());
    assert.equal(r.gitRepository, undefined);
    assert.equal(r.kustomization, undefined);
    assert.equal(ready(r)?.reason, 'ArtifactNotReady');
  });

  it('points Flux at the release branch pinned to the written commit, applying its root', () => {
    const r = reconcileClusterStackRelease(input({ renderedClass: written }));
    assert.equal(r.gitRepository?.spec.url, written.url);
    assert.deepEqual(r.gitRepository?.spec.ref, { branch: BRANCH, commit: FLEET_COMMIT });
    assert.deepEqual(r.gitRepository?.spec.secretRef, { name: 'fleet' });
    assert.equal(r.gitRepository?.spec.ignore, undefined);
    assert.equal(r.kustomization?.spec.path, './');
    assert.equal(r.kustomization?.spec.targetNamespace, 'team');
    assert.equal(r.status.revision, `${BRANCH}@sha1:${FLEET_COMMIT}`);
    assert.equal(r.status.commit, COMMIT);
  });

  it('is Ready once Flux applied the written commit of the release branch', () => {
    const r = reconcileClusterStackRelease(
      input({
        renderedClass: written,
        kustomization: appliedKs(`${BRANCH}@sha1:${FLEET_COMMIT}`),
      }),
    );
    assert.equal(ready(r)?.status, 'True');
    const stale = reconcileClusterStackRelease(
      input({
        renderedClass: written,
        kustomization: appliedKs(`refs/heads/${BRANCH}@sha1:${'e'.repeat(40)}`),
      }),
    );
    assert.equal(ready(stale)?.reason, 'RevisionMismatch');
  });

  it('a failed render says why and keeps what was applied', () => {
    const r = reconcileClusterStackRelease(
      input({
        renderedClass: { ok: false, reason: 'RenderFailed', message: 'cluster-class/templates/a.yaml: bad' },
        kustomization: appliedKs(`${BRANCH}@sha1:${FLEET_COMMIT}`),
      }),
    );
    assert.equal(r.gitRepository, undefined);
    assert.equal(r.kustomization, undefined);
    assert.equal(ready(r)?.status, 'False');
    assert.equal(ready(r)?.reason, 'RenderFailed');
    assert.match(ready(r)?.message ?? '', /previously applied state is kept.*templates\/a\.yaml: bad/);
  });
});

describe('ClusterStackRelease status.beforeClusterUpgradeAddons', () => {
  const described = (stack: string) => {
    const tag = parseReleaseTag(TAG);
    assert.ok(tag.ok);
    const read = readReleaseDescription(
      readStackDir(join(import.meta.dirname, '..', '..', '..', 'stacks', stack)),
      tag.value,
    );
    assert.ok(read.ok, read.ok ? '' : JSON.stringify(read));
    return read;
  };

  it("names the addons of the release's BeforeClusterUpgrade stage (csctl stages)", () => {
    const r = reconcileClusterStackRelease(input({ stack: described('docker-csoferrol-1-30') }));
    assert.deepEqual(r.status.beforeClusterUpgradeAddons, ['cni', 'metrics']);
  });

  it('is absent for the old umbrella layout and a release without stages', () => {
    for (const stack of [
      described('docker-csoferrol-1-30-umbrella'),
      { ok: true as const, value: description },
    ])
      assert.equal(
        reconcileClusterStackRelease(input({ stack })).status.beforeClusterUpgradeAddons,
        undefined,
      );
  });

  it('keeps what it recorded while the tree is not read', () => {
    const recorded = { ...release, status: { beforeClusterUpgradeAddons: ['cni'] } };
    const r = reconcileClusterStackRelease(input({ release: recorded, stack: undefined }));
    assert.deepEqual(r.status.beforeClusterUpgradeAddons, ['cni']);
  });
});
