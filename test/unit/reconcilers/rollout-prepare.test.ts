// A Progressive rollout to a release with a BeforeClusterUpgrade stage (cluster-stack-operator
// format): Preparing first (the ClusterAddon renders the target release, the topology stays), the
// move only once that stage is Ready, the deadline and rollback over both, and the upgrade hook's
// answer afterwards. The harness plays the API server (annotations, topology, generation), Cluster
// API (its conditions) and the ClusterAddon controller: the release it renders is addonReleaseTag's
// (the function the live controller uses), and whether the stage's addons are Ready is set by the test.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ClusterAddon } from '../../../controller/api/clusteraddon.ts';
import type { ClusterStack } from '../../../controller/api/clusterstack.ts';
import type { ClusterStackRelease } from '../../../controller/api/clusterstackrelease.ts';
import { PREPARING_PHASE, ROLLOUT_ANNOTATIONS, type RolloutSpec } from '../../../controller/api/rollout.ts';
import { addonReleaseTag } from '../../../controller/reconcilers/addonrelease.ts';
import { clusterUse } from '../../../controller/reconcilers/clusterstack.ts';
import {
  clusterApplyBody,
  type RolloutCluster,
  type RolloutResult,
  reconcileRollout,
} from '../../../controller/reconcilers/rollout.ts';
import {
  decideBeforeClusterUpgrade,
  parseBeforeClusterUpgradeRequest,
  stageFromClusterAddon,
} from '../../../controller/reconcilers/upgradehook.ts';

const T0 = Date.parse('2026-11-26T10:00:00Z');
const NS = 'fleet';
const V1 = 'docker-csoferrol-1-30-v1';
const V2 = 'docker-csoferrol-1-30-v2';

function release(tag: string, stage: string[] | undefined): ClusterStackRelease {
  return {
    apiVersion: 'stackflux.io/v1alpha1',
    kind: 'ClusterStackRelease',
    metadata: { name: tag, namespace: NS, generation: 1 },
    spec: {
      clusterStack: 'csoferrol',
      tag,
      version: tag.slice(tag.lastIndexOf('-') + 1),
      clusterClass: tag,
      kubernetesVersion: '1.30',
      source: { url: 'https://git.example.com/s.git' },
    },
    status: {
      observedGeneration: 1,
      kubernetesVersion: 'v1.30.4',
      ...(stage !== undefined ? { beforeClusterUpgradeAddons: stage } : {}),
      conditions: [
        { type: 'Ready', status: 'True', reason: 'Succeeded', message: '', lastTransitionTime: 'x' },
      ],
    },
  };
}

const ready = (type: string, generation: number) => ({
  type,
  status: 'True' as const,
  reason: 'X',
  message: '',
  lastTransitionTime: 'x',
  observedGeneration: generation,
});

class World {
  cluster: RolloutCluster = {
    apiVersion: 'cluster.x-k8s.io/v1beta2',
    kind: 'Cluster',
    metadata: { name: 'c1', namespace: NS, generation: 1 },
    spec: { topology: { classRef: { name: V1 }, version: 'v1.30.4' } },
  };
  addon: ClusterAddon | undefined;
  cs: ClusterStack;
  now = T0;
  /** Whether the BeforeClusterUpgrade stage's addons become Ready in the workload cluster. */
  stageReady = false;
  /** The release the ClusterAddon rendered at each step, and the class at that step. */
  history: { addonRelease: string; className: string }[] = [];

  readonly releases: ClusterStackRelease[];

  constructor(
    rollout: Partial<RolloutSpec>,
    releases: ClusterStackRelease[] = [release(V1, undefined), release(V2, ['cni', 'metrics'])],
  ) {
    this.releases = releases;
    this.cs = {
      apiVersion: 'stackflux.io/v1alpha1',
      kind: 'ClusterStack',
      metadata: { name: 'csoferrol', namespace: NS, generation: 1 },
      spec: {
        provider: 'docker',
        name: 'csoferrol',
        kubernetesVersion: '1.30',
        noProvider: true,
        source: { git: { url: 'https://git.example.com/s.git' } },
        rollout: { strategy: 'Progressive', progressDeadline: '1m', ...rollout },
      },
      status: { latestRelease: V2 },
    };
    this.settle();
  }

  className(): string {
    return clusterUse(this.cluster)?.className ?? '';
  }

  annotation(key: string): string | undefined {
    return this.cluster.metadata.annotations?.[key];
  }

  /** Cluster API and the ClusterAddon controller catch up. */
  settle(): void {
    const generation = this.cluster.metadata.generation ?? 1;
    this.cluster.status = {
      conditions: [ready('Available', generation), ready('TopologyReconciled', generation)],
    };
    const tag = addonReleaseTag(this.cluster)?.tag ?? '';
    const staged = this.releases.find((r) => r.metadata.name === tag)?.status?.beforeClusterUpgradeAddons;
    const addonsReady = staged === undefined || this.stageReady;
    this.addon = {
      apiVersion: 'stackflux.io/v1alpha1',
      kind: 'ClusterAddon',
      metadata: { name: 'c1', namespace: NS, generation: 1 },
      spec: { cluster: 'c1', release: tag },
      status: {
        observedGeneration: 1,
        release: tag,
        addons: ['cni', 'metrics'].map((name) => ({
          name,
          release: tag,
          ready: addonsReady,
          ...(staged !== undefined ? { stage: 'BeforeClusterUpgrade' } : {}),
        })),
        conditions: [
          {
            type: 'Ready',
            status: addonsReady ? 'True' : 'False',
            reason: addonsReady ? 'Succeeded' : 'AddonsNotReady',
            message: '',
            lastTransitionTime: 'x',
          },
        ],
      },
    };
    this.history.push({ addonRelease: tag, className: this.className() });
  }

  /** One decision, its changes applied as the API server would, then everyone catches up. */
  step(tickMs = 1000): RolloutResult {
    const r = reconcileRollout({
      clusterStack: this.cs,
      releases: this.releases,
      clusters: [this.cluster],
      clusterAddons: this.addon !== undefined ? [this.addon] : [],
      now: new Date(this.now),
    });
    for (const ch of r.changes) {
      const c = this.cluster;
      const body = clusterApplyBody(c, ch) as { spec?: { topology: Record<string, unknown> } };
      const before = JSON.stringify(c.spec);
      c.metadata.annotations = { ...ch.annotations };
      // The rollout always applies a topology: leaving it out would drop a field it owned.
      assert.ok(body.spec !== undefined, `${ch.action} change without a topology`);
      c.spec = { topology: body.spec.topology };
      if (JSON.stringify(c.spec) !== before) c.metadata.generation = (c.metadata.generation ?? 1) + 1;
    }
    if (r.status !== undefined) this.cs = { ...this.cs, status: { ...this.cs.status, rollout: r.status } };
    this.settle();
    this.now += tickMs;
    return r;
  }
}

describe('progressive rollout to a release with a BeforeClusterUpgrade stage', () => {
  it('prepares first: annotations and ClusterAddon at the target, topology unchanged, ClusterPreparing', () => {
    const w = new World({});
    const r = w.step();
    assert.deepEqual(
      r.changes.map((c) => [c.name, c.topology?.className, c.annotations[ROLLOUT_ANNOTATIONS.phase]]),
      [['c1', V1, PREPARING_PHASE]],
    );
    assert.equal(w.annotation(ROLLOUT_ANNOTATIONS.from), V1);
    assert.equal(w.annotation(ROLLOUT_ANNOTATIONS.to), V2);
    assert.equal(w.className(), V1);
    assert.equal(w.cluster.metadata.generation, 1, 'the topology did not change');
    assert.equal(w.addon?.spec.release, V2, 'the ClusterAddon renders the target release');
    assert.ok(r.events.some((e) => e.reason === 'ClusterPreparing'));
    assert.equal(r.status?.phase, 'Progressing');
    assert.equal(r.status?.reason, 'Preparing');
    assert.match(r.status?.message ?? '', /c1 preparing/);
    assert.deepEqual(r.status?.inFlight, ['c1']);
  });

  it('moves the topology only once the stage is Ready, then gates and completes; the addons stay at the target', () => {
    const w = new World({});
    for (let i = 0; i < 5; i++) {
      const r = w.step();
      assert.equal(w.className(), V1, `step ${i}: moved before the stage was Ready`);
      assert.equal(r.status?.reason, 'Preparing');
      assert.match(
        r.status?.message ?? '',
        i === 0 ? /just started/ : /BeforeClusterUpgrade stage of docker-csoferrol-1-30-v2: not Ready: cni/,
      );
    }
    w.stageReady = true;
    w.settle();
    const move = w.step();
    assert.deepEqual(
      move.changes.map((c) => [c.action, c.topology?.className]),
      [['Move', V2]],
    );
    assert.equal(w.className(), V2);
    assert.equal(w.annotation(ROLLOUT_ANNOTATIONS.phase), undefined, 'the phase annotation goes');
    let last = move;
    for (let i = 0; i < 10 && last.status?.phase !== 'Complete'; i++) last = w.step();
    assert.equal(last.status?.phase, 'Complete');
    assert.equal(w.annotation(ROLLOUT_ANNOTATIONS.result), 'Done');
    // Order: every step with the class at v2 had the addons at v2 before it; never v1 after v2.
    const firstMoved = w.history.findIndex((h) => h.className === V2);
    const firstPrepared = w.history.findIndex((h) => h.addonRelease === V2);
    assert.ok(firstPrepared >= 0 && firstPrepared < firstMoved, JSON.stringify(w.history));
    assert.ok(w.history.slice(firstPrepared).every((h) => h.addonRelease === V2));
  });

  it('a paused rollout finishes a Preparing Cluster', () => {
    const w = new World({});
    w.step();
    w.cs = { ...w.cs, spec: { ...w.cs.spec, rollout: { ...w.cs.spec.rollout, paused: true } } };
    w.stageReady = true;
    w.settle();
    w.step();
    assert.equal(w.className(), V2);
  });

  it('the deadline covers Preparing: Failed, the topology never moved', () => {
    const w = new World({});
    w.step();
    w.now = T0 + 61_000;
    const r = w.step();
    assert.equal(w.annotation(ROLLOUT_ANNOTATIONS.result), 'Failed');
    assert.equal(w.className(), V1);
    assert.equal(r.status?.phase, 'Stalled');
    assert.deepEqual(r.status?.failed, ['c1']);
    assert.match(
      r.events.find((e) => e.reason === 'ClusterRolloutFailed')?.message ?? '',
      /not prepared for docker-csoferrol-1-30-v2 within 1m/,
    );
    // Stays failed (the stage becoming Ready later moves nothing).
    w.stageReady = true;
    w.settle();
    w.now += 3_600_000;
    assert.deepEqual(w.step().changes, []);
    assert.equal(w.className(), V1);
  });

  it('rollbackOnFailure: RolledBack, and the ClusterAddon goes back to the old release', () => {
    const w = new World({ rollbackOnFailure: true });
    w.step();
    assert.equal(w.addon?.spec.release, V2);
    w.now = T0 + 61_000;
    const r = w.step();
    assert.equal(w.annotation(ROLLOUT_ANNOTATIONS.result), 'RolledBack');
    assert.ok(r.events.some((e) => e.reason === 'ClusterRolledBack'));
    assert.equal(w.className(), V1);
    assert.equal(w.addon?.spec.release, V1, 'addons back at the release the class is');
    w.now += 3_600_000;
    assert.deepEqual(w.step().changes, []);
  });

  it('a release without the stage (native, old layout) moves at once: no Preparing', () => {
    const w = new World({}, [release(V1, undefined), release(V2, undefined)]);
    const r = w.step();
    assert.deepEqual(
      r.changes.map((c) => [c.action, c.topology?.className, c.annotations[ROLLOUT_ANNOTATIONS.phase]]),
      [['Move', V2, undefined]],
    );
    assert.ok(!r.events.some((e) => e.reason === 'ClusterPreparing'));
  });

  it('a Cluster moved by hand while Preparing is left alone and its addons follow its class', () => {
    const w = new World({});
    w.step();
    w.cluster.spec = { topology: { classRef: { name: 'docker-csoferrol-1-30-v3' }, version: 'v1.30.4' } };
    w.step();
    assert.equal(w.annotation(ROLLOUT_ANNOTATIONS.result), 'HandMoved');
    assert.equal(w.className(), 'docker-csoferrol-1-30-v3');
    assert.equal(addonReleaseTag(w.cluster)?.tag, 'docker-csoferrol-1-30-v3');
  });

  it('the upgrade hook then answers Success at once: the stage is already Ready', () => {
    const w = new World({});
    w.step();
    /** Cluster API's call for the Cluster as it is now, answered from its ClusterAddon. */
    const hook = () => {
      const parsed = parseBeforeClusterUpgradeRequest(
        JSON.stringify({
          cluster: w.cluster,
          fromKubernetesVersion: 'v1.30.4',
          toKubernetesVersion: 'v1.30.5',
        }),
      );
      assert.ok(parsed.ok);
      const release = parsed.value.release ?? '';
      return {
        release,
        answer: decideBeforeClusterUpgrade(parsed.value, stageFromClusterAddon(w.addon, release)),
      };
    };
    // Had someone moved the class to v2 while Preparing, the hook would wait for the stage.
    const early = decideBeforeClusterUpgrade(
      {
        namespace: NS,
        cluster: 'c1',
        className: V2,
        release: V2,
        fromKubernetesVersion: 'v1.30.4',
        toKubernetesVersion: 'v1.30.5',
      },
      stageFromClusterAddon(w.addon, V2),
    );
    assert.equal(early.retryAfterSeconds, 10, 'while Preparing, the stage is not Ready yet');
    w.stageReady = true;
    w.settle();
    w.step();
    assert.equal(w.className(), V2);
    const { release, answer } = hook();
    assert.equal(release, V2, 'the hook reads the moved class');
    assert.equal(answer.status, 'Success');
    assert.equal(answer.retryAfterSeconds, 0);
    assert.match(
      answer.message ?? '',
      /BeforeClusterUpgrade stage of release docker-csoferrol-1-30-v2 is Ready/,
    );
  });
});

describe('addonReleaseTag', () => {
  const cluster = (className: string, annotations: Record<string, string> = {}) => ({
    metadata: { name: 'c1', namespace: NS, annotations },
    spec: { topology: { classRef: { name: className }, version: 'v1.30.4' } },
  });
  const preparing = (to: string) => ({
    [ROLLOUT_ANNOTATIONS.phase]: PREPARING_PHASE,
    [ROLLOUT_ANNOTATIONS.to]: to,
  });

  it("is the class's release, and the target while Preparing", () => {
    assert.equal(addonReleaseTag(cluster(V1))?.tag, V1);
    assert.equal(addonReleaseTag(cluster(V1, preparing(V2)))?.tag, V2);
    assert.equal(addonReleaseTag(cluster(V1, { [ROLLOUT_ANNOTATIONS.to]: V2 }))?.tag, V1, 'no phase: class');
    assert.equal(addonReleaseTag(cluster('not-a-release')), undefined);
  });

  it('a target of another ClusterStack, or no release tag, is ignored: no new reach', () => {
    for (const to of [
      'docker-other-1-30-v2',
      'openstack-csoferrol-1-30-v2',
      'docker-csoferrol-1-31-v2',
      'x',
      '',
    ])
      assert.equal(addonReleaseTag(cluster(V1, preparing(to)))?.tag, V1, to);
  });

  it('RolledBack and HandMoved end it; Failed leaves the addons where they are', () => {
    const ended = (result: string) =>
      addonReleaseTag(cluster(V1, { ...preparing(V2), [ROLLOUT_ANNOTATIONS.result]: result }))?.tag;
    assert.equal(ended('RolledBack'), V1);
    assert.equal(ended('HandMoved'), V1);
    assert.equal(ended('Failed'), V2);
  });
});
