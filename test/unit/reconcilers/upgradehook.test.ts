import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { AddonStatus, ClusterAddon } from '../../../controller/api/clusteraddon.ts';
import {
  BEFORE_CLUSTER_UPGRADE_PATH,
  DISCOVERY_PATH,
  hookPath,
} from '../../../controller/api/runtimehooks.ts';
import {
  decideBeforeClusterUpgrade,
  discoveryResponse,
  MAX_MESSAGE,
  parseBeforeClusterUpgradeRequest,
  stageFromClusterAddon,
  type UpgradeTarget,
} from '../../../controller/reconcilers/upgradehook.ts';

const RELEASE = 'docker-ferrol-1-31-v2';

function target(over: Partial<UpgradeTarget> = {}): UpgradeTarget {
  return {
    namespace: 'team-a',
    cluster: 'c1',
    className: RELEASE,
    release: RELEASE,
    fromKubernetesVersion: 'v1.30.4',
    toKubernetesVersion: 'v1.31.2',
    ...over,
  };
}

/** A BeforeClusterUpgradeRequest as Cluster API (v1beta2 Cluster in the request) sends it. */
function requestBody(over: Record<string, unknown> = {}, topology: Record<string, unknown> = {}): string {
  return JSON.stringify({
    apiVersion: 'hooks.runtime.cluster.x-k8s.io/v1alpha1',
    kind: 'BeforeClusterUpgradeRequest',
    cluster: {
      metadata: { name: 'c1', namespace: 'team-a' },
      spec: { topology: { classRef: { name: RELEASE }, version: 'v1.31.2', ...topology } },
    },
    fromKubernetesVersion: 'v1.30.4',
    toKubernetesVersion: 'v1.31.2',
    ...over,
  });
}

function addon(name: string, o: Partial<AddonStatus> = {}): AddonStatus {
  return { name, ready: true, release: RELEASE, ...o };
}

function clusterAddon(o: {
  specRelease?: string;
  statusRelease?: string;
  generation?: number;
  observedGeneration?: number;
  addons?: AddonStatus[];
  stalled?: { reason: string; message: string };
}): ClusterAddon {
  const now = '2026-01-01T00:00:00Z';
  return {
    apiVersion: 'stackflux.io/v1alpha1',
    kind: 'ClusterAddon',
    metadata: { name: 'c1', namespace: 'team-a', generation: o.generation ?? 2 },
    spec: { cluster: 'c1', release: o.specRelease ?? RELEASE },
    status: {
      observedGeneration: o.observedGeneration ?? 2,
      release: o.statusRelease ?? RELEASE,
      addons: o.addons ?? [],
      conditions: o.stalled
        ? [
            { type: 'Ready', status: 'False', lastTransitionTime: now, ...o.stalled },
            { type: 'Stalled', status: 'True', lastTransitionTime: now, ...o.stalled },
          ]
        : [
            {
              type: 'Ready',
              status: 'True',
              reason: 'Succeeded',
              message: 'applied',
              lastTransitionTime: now,
            },
          ],
    },
  } as ClusterAddon;
}

describe('hook paths', () => {
  it('are built as Cluster API’s catalog.GVHToPath builds them', () => {
    assert.equal(DISCOVERY_PATH, '/hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery');
    assert.equal(
      BEFORE_CLUSTER_UPGRADE_PATH,
      '/hooks.runtime.cluster.x-k8s.io/v1alpha1/beforeclusterupgrade/before-cluster-upgrade',
    );
    assert.equal(
      hookPath('BeforeClusterUpgrade', 'My-Handler'),
      `${hookPath('BeforeClusterUpgrade')}/my-handler`,
    );
  });

  it('discovery names the one handler with a DNS-1123 name, timeout ≤ 30 s and failurePolicy Fail', () => {
    const d = discoveryResponse();
    assert.equal(d.status, 'Success');
    assert.deepEqual(
      d.handlers?.map((h) => [h.name, h.requestHook.hook, h.requestHook.apiVersion, h.failurePolicy]),
      [['before-cluster-upgrade', 'BeforeClusterUpgrade', 'hooks.runtime.cluster.x-k8s.io/v1alpha1', 'Fail']],
    );
    assert.ok((d.handlers?.[0]?.timeoutSeconds ?? 0) <= 30);
  });
});

describe('parseBeforeClusterUpgradeRequest', () => {
  it('reads a v1beta2 Cluster (classRef) and a v1beta1 one (class), mapping the class to its release', () => {
    const v2 = parseBeforeClusterUpgradeRequest(requestBody());
    assert.deepEqual(v2, { ok: true, value: target() });
    const v1 = parseBeforeClusterUpgradeRequest(
      requestBody({}, { classRef: undefined, class: 'docker-ferrol-1-30-v3', classNamespace: 'shared' }),
    );
    assert.ok(v1.ok);
    assert.equal(v1.value.className, 'docker-ferrol-1-30-v3');
    assert.equal(v1.value.release, 'docker-ferrol-1-30-v3');
  });

  it('a class that is no release: release undefined; no topology: no class', () => {
    const other = parseBeforeClusterUpgradeRequest(requestBody({}, { classRef: { name: 'my-own-class' } }));
    assert.ok(other.ok);
    assert.equal(other.value.release, undefined);
    const none = parseBeforeClusterUpgradeRequest(
      requestBody({ cluster: { metadata: { name: 'c1', namespace: 'team-a' } } }),
    );
    assert.ok(none.ok);
    assert.equal(none.value.className, undefined);
  });

  it('ignores unknown fields and accepts no apiVersion/kind (as Cluster API’s Go server does)', () => {
    const r = parseBeforeClusterUpgradeRequest(
      requestBody({ apiVersion: undefined, kind: undefined, settings: { a: 'b' }, extra: [1, 2] }),
    );
    assert.ok(r.ok);
  });

  const bad: Array<[string, string, RegExp]> = [
    ['not JSON', '{"cluster":', /^error unmarshalling request: /],
    ['a JSON array', '[]', /not a JSON object/],
    ['another hook’s kind', requestBody({ kind: 'AfterClusterUpgradeRequest' }), /kind must be/],
    [
      'another API version',
      requestBody({ apiVersion: 'hooks.runtime.cluster.x-k8s.io/v2' }),
      /apiVersion must be/,
    ],
    ['no cluster', requestBody({ cluster: undefined }), /no cluster\.metadata/],
    [
      'a name with a path in it',
      requestBody({ cluster: { metadata: { name: '../../etc', namespace: 'team-a' } } }),
      /metadata\.name/,
    ],
    [
      'a namespace that is no label',
      requestBody({ cluster: { metadata: { name: 'c1', namespace: 'a.b' } } }),
      /metadata\.namespace/,
    ],
    ['no toKubernetesVersion', requestBody({ toKubernetesVersion: undefined }), /toKubernetesVersion/],
    [
      'a version with a newline',
      requestBody({ fromKubernetesVersion: 'v1\nForged: yes' }),
      /fromKubernetesVersion/,
    ],
    ['a 1 MB version', requestBody({ toKubernetesVersion: 'v'.repeat(1 << 20) }), /toKubernetesVersion/],
  ];
  for (const [name, body, message] of bad) {
    it(`refuses ${name}`, () => {
      const r = parseBeforeClusterUpgradeRequest(body);
      assert.equal(r.ok, false);
      if (!r.ok) assert.match(r.message, message);
    });
  }
});

describe('decideBeforeClusterUpgrade', () => {
  it('Success without retry when the class is no release or the Cluster has none', () => {
    for (const t of [
      target({ release: undefined, className: 'my-own-class' }),
      target({ release: undefined, className: undefined }),
    ]) {
      const r = decideBeforeClusterUpgrade(t, undefined);
      assert.equal(r.status, 'Success');
      assert.equal(r.retryAfterSeconds, 0);
      assert.match(r.message ?? '', /nothing to wait for/);
    }
  });

  it('Success when the versions are equal, whatever the stage', () => {
    const r = decideBeforeClusterUpgrade(target({ fromKubernetesVersion: 'v1.31.2' }), {
      kind: 'Pending',
      why: 'x',
    });
    assert.deepEqual([r.status, r.retryAfterSeconds], ['Success', 0]);
  });

  it('Success when the stage is Ready or the release has none', () => {
    for (const stage of [{ kind: 'Ready' } as const, { kind: 'NotApplicable', why: 'no stages' } as const]) {
      const r = decideBeforeClusterUpgrade(target(), stage);
      assert.deepEqual([r.status, r.retryAfterSeconds], ['Success', 0]);
    }
  });

  it('retry in 10 s, saying what is waited for, while the stage is pending, not Ready or unreadable', () => {
    const pending = decideBeforeClusterUpgrade(target(), { kind: 'Pending', why: 'ClusterAddon is at v1' });
    assert.deepEqual([pending.status, pending.retryAfterSeconds], ['Success', 10]);
    assert.match(
      pending.message ?? '',
      /BeforeClusterUpgrade stage of release docker-ferrol-1-31-v2 to be applied to Cluster team-a\/c1: ClusterAddon is at v1/,
    );
    const applied = decideBeforeClusterUpgrade(target(), {
      kind: 'Applied',
      notReady: ['cni (Progressing)', 'csi'],
    });
    assert.deepEqual([applied.status, applied.retryAfterSeconds], ['Success', 10]);
    assert.match(
      applied.message ?? '',
      /to be Ready in Cluster team-a\/c1: not Ready: cni \(Progressing\), csi$/,
    );
    const unknown = decideBeforeClusterUpgrade(target(), { kind: 'Unknown', why: 'connection refused' });
    assert.deepEqual([unknown.status, unknown.retryAfterSeconds], ['Success', 10]);
    assert.match(unknown.message ?? '', /could not be read: connection refused/);
  });

  it('Failure with the reason (only) when the stage cannot become Ready', () => {
    const r = decideBeforeClusterUpgrade(target(), {
      kind: 'Failed',
      reason: 'RenderFailed',
      message: 'addon cni: values: token=s3cr3t',
    });
    assert.deepEqual([r.status, r.retryAfterSeconds], ['Failure', 0]);
    assert.equal(
      r.message,
      "the BeforeClusterUpgrade stage of release docker-ferrol-1-31-v2 cannot become Ready in Cluster team-a/c1: RenderFailed (the ClusterAddon's Stalled condition says why)",
    );
  });

  it('cuts a long message to MAX_MESSAGE characters', () => {
    const r = decideBeforeClusterUpgrade(target(), {
      kind: 'Failed',
      reason: 'x'.repeat(100_000),
      message: '',
    });
    assert.equal(r.message?.length, MAX_MESSAGE);
  });
});

describe('stageFromClusterAddon', () => {
  const stage = (name: string, o: Partial<AddonStatus> = {}) =>
    addon(name, { stage: 'BeforeClusterUpgrade', ...o });
  const early = (name: string, o: Partial<AddonStatus> = {}) =>
    addon(name, { stage: 'AfterControlPlaneInitialized', ...o });

  it('Pending while there is no ClusterAddon, it is at another release, or not reconciled', () => {
    assert.equal(stageFromClusterAddon(undefined, RELEASE).kind, 'Pending');
    const older = stageFromClusterAddon(clusterAddon({ specRelease: 'docker-ferrol-1-30-v3' }), RELEASE);
    assert.deepEqual(older, {
      kind: 'Pending',
      why: 'ClusterAddon team-a/c1 is still at release docker-ferrol-1-30-v3',
    });
    assert.equal(
      stageFromClusterAddon(clusterAddon({ generation: 3, observedGeneration: 2 }), RELEASE).kind,
      'Pending',
    );
    const uncommitted = stageFromClusterAddon(
      clusterAddon({ statusRelease: 'docker-ferrol-1-30-v3' }),
      RELEASE,
    );
    assert.equal(uncommitted.kind, 'Pending');
    // A Ready message (a render error may quote a release's values) is not repeated, its reason is.
    const failing = clusterAddon({ statusRelease: 'docker-ferrol-1-30-v3' });
    const ready = failing.status?.conditions?.[0];
    if (ready !== undefined)
      Object.assign(ready, { reason: 'RenderFailed', message: 'values: token=SECRET' });
    assert.deepEqual(stageFromClusterAddon(failing, RELEASE), {
      kind: 'Pending',
      why: `the addons of release ${RELEASE} are not committed yet (RenderFailed)`,
    });
  });

  it('Failed with the Stalled condition’s reason and message (the rollout status shows it; the hook does not)', () => {
    const s = stageFromClusterAddon(
      clusterAddon({
        statusRelease: 'docker-ferrol-1-30-v3',
        stalled: { reason: 'InvalidRelease', message: 'csctl.yaml: bad' },
      }),
      RELEASE,
    );
    assert.deepEqual(s, { kind: 'Failed', reason: 'InvalidRelease', message: 'csctl.yaml: bad' });
  });

  it('NotApplicable for a release without stages or without a BeforeClusterUpgrade stage', () => {
    assert.equal(
      stageFromClusterAddon(clusterAddon({ addons: [addon('cni'), addon('csi')] }), RELEASE).kind,
      'NotApplicable',
    );
    assert.equal(
      stageFromClusterAddon(clusterAddon({ addons: [early('cni')] }), RELEASE).kind,
      'NotApplicable',
    );
  });

  it('only the BeforeClusterUpgrade stage counts: Ready though an earlier-stage addon is not', () => {
    const s = stageFromClusterAddon(
      clusterAddon({
        addons: [early('ccm', { ready: false, reason: 'Progressing' }), stage('cni'), stage('csi')],
      }),
      RELEASE,
    );
    assert.deepEqual(s, { kind: 'Ready' });
  });

  it('Applied with the stage’s addons that are not Ready or still at the old release', () => {
    const s = stageFromClusterAddon(
      clusterAddon({
        addons: [
          stage('cni', { ready: false, reason: 'Progressing' }),
          stage('csi', { release: 'docker-ferrol-1-30-v3' }),
          stage('dns'),
        ],
      }),
      RELEASE,
    );
    assert.deepEqual(s, { kind: 'Applied', notReady: ['cni (Progressing)', 'csi (not applied yet)'] });
  });

  it('Pending when none of the stage’s addons is at the release yet', () => {
    const s = stageFromClusterAddon(
      clusterAddon({ addons: [stage('cni', { release: 'docker-ferrol-1-30-v3', ready: true })] }),
      RELEASE,
    );
    assert.deepEqual(s, { kind: 'Pending', why: 'not applied yet: cni' });
  });
});
