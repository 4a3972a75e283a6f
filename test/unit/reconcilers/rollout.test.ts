// The Progressive rollout decision (controller/reconcilers/rollout.ts), stepped through time over a
// simulated fleet: the harness applies each decision's Cluster changes the way the API server
// would (generation bumps on a spec change) and plays Cluster API and the ClusterAddon controller
// by writing their status for Clusters it is told are healthy.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ClusterAddon } from '../../../controller/api/clusteraddon.ts';
import type { ClusterStack } from '../../../controller/api/clusterstack.ts';
import type { ClusterStackRelease } from '../../../controller/api/clusterstackrelease.ts';
import {
  APPROVED_ANNOTATION,
  APPROVED_IMPACT_ANNOTATION,
  ROLLOUT_ANNOTATIONS,
  type RolloutSpec,
} from '../../../controller/api/rollout.ts';
import {
  approvalGate,
  clusterApiReady,
  clusterApplyBody,
  type RolloutCluster,
  type RolloutResult,
  reconcileRollout,
  resolveCount,
  windowState,
} from '../../../controller/reconcilers/rollout.ts';
import { nestedAll } from '../../support/cel.ts';

const T0 = Date.parse('2026-11-23T10:00:00Z');
const NS = 'fleet';

function release(version: string, ready = true): ClusterStackRelease {
  const tag = `docker-ferrol-1-30-${version}`;
  return {
    apiVersion: 'stackflux.io/v1alpha1',
    kind: 'ClusterStackRelease',
    metadata: { name: tag, namespace: NS, generation: 1 },
    spec: {
      clusterStack: 'ferrol',
      tag,
      version,
      clusterClass: tag,
      kubernetesVersion: '1.30',
      source: { url: 'https://git.example.com/s.git' },
    },
    status: {
      observedGeneration: 1,
      kubernetesVersion: 'v1.30.4',
      conditions: [
        {
          type: 'Ready',
          status: ready ? 'True' : 'False',
          reason: 'X',
          message: '',
          lastTransitionTime: 'x',
        },
      ],
    },
  };
}

function stack(rollout: RolloutSpec, latest: string): ClusterStack {
  return {
    apiVersion: 'stackflux.io/v1alpha1',
    kind: 'ClusterStack',
    metadata: { name: 'ferrol', namespace: NS, generation: 1 },
    spec: {
      provider: 'docker',
      name: 'ferrol',
      kubernetesVersion: '1.30',
      noProvider: true,
      source: { git: { url: 'https://git.example.com/s.git' } },
      rollout,
    },
    status: { latestRelease: latest },
  };
}

function classOfCluster(c: RolloutCluster): string {
  const t = c.spec?.topology as { classRef?: { name?: string } } | undefined;
  return t?.classRef?.name ?? '';
}

/** A fleet: Clusters, their ClusterAddons, and which release each Cluster's addons can reach. */
class Fleet {
  clusters = new Map<string, RolloutCluster>();
  addons = new Map<string, ClusterAddon>();
  /** Releases whose addons fail to apply. */
  broken = new Set<string>();
  now = T0;
  cs: ClusterStack;
  releases: ClusterStackRelease[];
  maxInFlight = new Map<string, number>();
  moveOrder: string[] = [];

  constructor(rollout: RolloutSpec, releases: ClusterStackRelease[], latest: string) {
    this.cs = stack(rollout, latest);
    this.releases = releases;
  }

  add(name: string, labels: Record<string, string>, version = 'v1'): void {
    this.clusters.set(name, {
      apiVersion: 'cluster.x-k8s.io/v1beta2',
      kind: 'Cluster',
      metadata: { name, namespace: NS, generation: 1, labels },
      spec: { topology: { classRef: { name: `docker-ferrol-1-30-${version}` }, version: 'v1.30.4' } },
    });
    this.settle();
  }

  /** Cluster API and the ClusterAddon controller catch up with every Cluster's spec. */
  settle(): void {
    for (const c of this.clusters.values()) {
      const gen = c.metadata.generation ?? 1;
      const cond = (type: string) => ({
        type,
        status: 'True' as const,
        reason: 'X',
        message: '',
        lastTransitionTime: 'x',
        observedGeneration: gen,
      });
      c.status = { conditions: [cond('Available'), cond('TopologyReconciled')] };
      const cls = classOfCluster(c);
      const ok = !this.broken.has(cls);
      this.addons.set(c.metadata.name, {
        apiVersion: 'stackflux.io/v1alpha1',
        kind: 'ClusterAddon',
        metadata: { name: c.metadata.name, namespace: NS },
        spec: { cluster: c.metadata.name },
        status: {
          release: cls,
          conditions: [
            {
              type: 'Ready',
              status: ok ? 'True' : 'False',
              reason: ok ? 'Succeeded' : 'AddonsNotReady',
              message: ok ? '' : 'cni: apply failed',
              lastTransitionTime: 'x',
            },
          ],
        },
      });
    }
  }

  /** One reconcile at `now`; its changes are applied as the API server would. */
  step(): RolloutResult {
    const r = reconcileRollout({
      clusterStack: this.cs,
      releases: this.releases,
      clusters: [...this.clusters.values()],
      clusterAddons: [...this.addons.values()],
      now: new Date(this.now),
    });
    for (const ch of r.changes) {
      const c = this.clusters.get(ch.name);
      assert.ok(c);
      const body = clusterApplyBody(c, ch) as { spec?: { topology: Record<string, unknown> } };
      const before = JSON.stringify(c.spec);
      const others = Object.fromEntries(
        Object.entries(c.metadata.annotations ?? {}).filter(
          ([k]) => !(Object.values(ROLLOUT_ANNOTATIONS) as string[]).includes(k),
        ),
      );
      c.metadata.annotations = { ...others, ...ch.annotations };
      if (body.spec !== undefined)
        c.spec = { topology: { ...(c.spec?.topology as Record<string, unknown>), ...body.spec.topology } };
      if (JSON.stringify(c.spec) !== before) c.metadata.generation = (c.metadata.generation ?? 1) + 1;
      if (ch.action === 'Move') this.moveOrder.push(ch.name);
    }
    if (r.status !== undefined) this.cs = { ...this.cs, status: { ...this.cs.status, rollout: r.status } };
    for (const w of r.status?.waves ?? [])
      this.maxInFlight.set(w.name, Math.max(this.maxInFlight.get(w.name) ?? 0, w.inFlight));
    return r;
  }

  classOf(name: string): string {
    const c = this.clusters.get(name);
    assert.ok(c);
    return classOfCluster(c);
  }

  /** Steps (settling between) until the phase is one of `phases`, advancing time by `tickMs`. */
  runUntil(phases: string[], tickMs = 1000, maxSteps = 500): RolloutResult {
    for (let i = 0; i < maxSteps; i++) {
      const r = this.step();
      if (phases.includes(r.status?.phase ?? '')) return r;
      this.settle();
      this.now += tickMs;
    }
    throw new Error(
      `not ${phases.join('|')} after ${maxSteps} steps: ${JSON.stringify(this.cs.status?.rollout)}`,
    );
  }
}

const WAVES: RolloutSpec = {
  strategy: 'Progressive',
  waves: [
    { name: 'canary', selector: { matchLabels: { tier: 'canary' } }, maxConcurrent: 1 },
    { name: 'early', selector: { matchLabels: { tier: 'early' } }, maxConcurrent: 2 },
  ],
  maxConcurrent: '50%',
  minSuccessTime: '5s',
  progressDeadline: '1m',
};

function twelve(spec: RolloutSpec = WAVES, releases = [release('v1'), release('v2')]): Fleet {
  const f = new Fleet(spec, releases, 'docker-ferrol-1-30-v2');
  f.add('c00', { tier: 'canary' });
  for (let i = 1; i <= 5; i++) f.add(`e0${i}`, { tier: 'early' });
  for (let i = 1; i <= 6; i++) f.add(`r0${i}`, {});
  return f;
}

describe('progressive rollout', () => {
  it('Manual (the default) decides nothing', () => {
    const f = twelve({});
    const r = f.step();
    assert.equal(r.status, undefined);
    assert.deepEqual(r.changes, []);
  });

  it('moves 12 Clusters in 3 waves, in order, within maxConcurrent, each after the soak', () => {
    const f = twelve();
    const first = f.step();
    assert.deepEqual(
      first.changes.map((c) => [c.name, c.action, c.topology?.className]),
      [['c00', 'Move', 'docker-ferrol-1-30-v2']],
    );
    assert.equal(first.status?.phase, 'Progressing');
    const done = f.runUntil(['Complete']);
    assert.equal(done.condition?.reason, 'Complete');
    for (const name of f.clusters.keys()) assert.equal(f.classOf(name), 'docker-ferrol-1-30-v2', name);
    const wave = (n: string) => (n.startsWith('c') ? 0 : n.startsWith('e') ? 1 : 2);
    const waves = f.moveOrder.map(wave);
    assert.deepEqual(waves, [...waves].sort(), `moved in wave order: ${f.moveOrder.join(',')}`);
    assert.deepEqual(Object.fromEntries(f.maxInFlight), { canary: 1, early: 2, rest: 3 });
    // Each wave's first Cluster started only after every Cluster before it soaked 5 s.
    const ann = (n: string, k: string) => Date.parse(f.clusters.get(n)?.metadata.annotations?.[k] ?? '');
    const started = (n: string) => ann(n, ROLLOUT_ANNOTATIONS.started);
    const soaked = (n: string) => ann(n, ROLLOUT_ANNOTATIONS.healthySince) + 5000;
    const names = [...f.clusters.keys()];
    for (const n of names)
      for (const m of names)
        if (wave(m) > wave(n)) assert.ok(started(m) >= soaked(n), `${m} started before ${n} soaked`);
  });

  it('a release whose addon fails on the canary stalls with nothing moved beyond it', () => {
    const f = twelve();
    f.broken.add('docker-ferrol-1-30-v2');
    const r = f.runUntil(['Stalled'], 5000);
    assert.equal(r.condition?.status, 'False');
    assert.match(r.condition?.message ?? '', /c00/);
    assert.deepEqual(r.status?.failed, ['c00']);
    assert.deepEqual(f.moveOrder, ['c00']);
    assert.equal(f.classOf('c00'), 'docker-ferrol-1-30-v2', 'no rollback unless asked');
    // Nothing more happens.
    f.now += 3_600_000;
    assert.deepEqual(f.step().changes, []);
  });

  it('rollbackOnFailure moves the failed canary back to the release it came from', () => {
    const f = twelve({ ...WAVES, rollbackOnFailure: true });
    f.broken.add('docker-ferrol-1-30-v2');
    const r = f.runUntil(['Stalled'], 5000);
    assert.equal(f.classOf('c00'), 'docker-ferrol-1-30-v1');
    assert.equal(f.clusters.get('c00')?.metadata.annotations?.[ROLLOUT_ANNOTATIONS.result], 'RolledBack');
    assert.ok(r.events.some((e) => e.reason === 'ClusterRolledBack'));
    assert.deepEqual(f.moveOrder, ['c00']);
    f.settle();
    f.now += 60_000;
    assert.deepEqual(f.step().changes, [], 'a fixed point once rolled back');
  });

  it('maxFailures tolerates failures before stalling', () => {
    const f = twelve({ ...WAVES, maxFailures: 1 });
    f.broken.add('docker-ferrol-1-30-v2');
    const r = f.runUntil(['Stalled'], 5000);
    // The canary's failure is tolerated; the early wave's first two (in flight together) exceed it.
    assert.deepEqual(r.status?.failed, ['c00', 'e01', 'e02']);
    assert.deepEqual(f.moveOrder, ['c00', 'e01', 'e02']);
  });

  it('paused starts nothing new, in-flight ones finish; resume goes on', () => {
    const f = twelve();
    f.step(); // canary moved
    f.cs = { ...f.cs, spec: { ...f.cs.spec, rollout: { ...WAVES, paused: true } } };
    const r = f.runUntil(['Paused']);
    assert.equal(r.condition?.reason, 'Paused');
    for (let i = 0; i < 20; i++) {
      f.settle();
      f.now += 1000;
      assert.deepEqual(
        f.step().changes.filter((c) => c.action === 'Move'),
        [],
      );
    }
    assert.equal(f.clusters.get('c00')?.metadata.annotations?.[ROLLOUT_ANNOTATIONS.result], 'Done');
    f.cs = { ...f.cs, spec: { ...f.cs.spec, rollout: WAVES } };
    f.runUntil(['Complete']);
  });

  it('starts Clusters only inside a maintenance window and says when the next opens', () => {
    // Saturdays 02:00-04:00 Berlin time; T0 is Monday.
    const windows = [{ schedule: '0 2 * * 6', duration: '2h', timeZone: 'Europe/Berlin' }];
    const f = twelve({ ...WAVES, maintenanceWindows: windows });
    const r = f.step();
    assert.equal(r.status?.phase, 'Waiting');
    assert.equal(r.status?.reason, 'MaintenanceWindow');
    assert.equal(r.status?.nextWindow, '2026-11-28T01:00:00.000Z');
    assert.deepEqual(r.changes, []);
    assert.equal(r.requeueAfterMs, Date.parse('2026-11-28T01:00:00Z') - T0);
    f.now = Date.parse('2026-11-28T01:30:00Z');
    assert.deepEqual(
      f.step().changes.map((c) => c.name),
      ['c00'],
    );
    f.now = Date.parse('2026-11-28T03:00:01Z'); // window closed: canary soaked but nothing new starts
    f.settle();
    f.step();
    f.now += 10_000;
    const closed = f.step();
    assert.equal(closed.status?.phase, 'Waiting');
    assert.deepEqual(
      closed.changes.filter((c) => c.action === 'Move'),
      [],
    );
  });

  it('a superseding release takes over from the next Cluster on', () => {
    const f = twelve();
    f.runUntil(['Progressing']);
    // Run until the early wave is in flight, then v3 is Ready and latest.
    while (!f.moveOrder.some((n) => n.startsWith('e'))) {
      f.settle();
      f.now += 1000;
      f.step();
    }
    f.releases = [...f.releases, release('v3')];
    f.cs = { ...f.cs, status: { ...f.cs.status, latestRelease: 'docker-ferrol-1-30-v3' } };
    const before = f.moveOrder.length;
    const r = f.runUntil(['Complete']);
    assert.equal(r.status?.targetRelease, 'docker-ferrol-1-30-v3');
    for (const name of f.clusters.keys()) assert.equal(f.classOf(name), 'docker-ferrol-1-30-v3', name);
    const after = f.moveOrder.slice(before);
    assert.ok(
      !after.slice(0, 3).includes('c00') || after.includes('e05'),
      'later Clusters go straight to v3',
    );
    const e05 = f.clusters.get('e05')?.metadata.annotations;
    assert.equal(e05?.[ROLLOUT_ANNOTATIONS.from], 'docker-ferrol-1-30-v1', 'e05 went straight from v1 to v3');
  });

  it('a Cluster moved by hand is left alone', () => {
    const f = twelve();
    f.step(); // canary → v2
    const c00 = f.clusters.get('c00');
    assert.ok(c00);
    c00.spec = { topology: { classRef: { name: 'docker-ferrol-1-30-v1' }, version: 'v1.30.4' } };
    c00.metadata.generation = (c00.metadata.generation ?? 1) + 1;
    const r = f.step();
    assert.deepEqual(
      r.changes
        .filter((c) => c.name === 'c00')
        .map((c) => [c.name, c.annotations[ROLLOUT_ANNOTATIONS.result], c.topology?.className]),
      [['c00', 'HandMoved', 'docker-ferrol-1-30-v1']],
    );
    assert.ok(r.events.some((e) => e.reason === 'ClusterHandMoved'));
    f.runUntil(['Complete']);
    assert.equal(f.classOf('c00'), 'docker-ferrol-1-30-v1', 'never overwritten');
  });

  it('the decision is a fixed point: deciding again over its own changes writes nothing', () => {
    const f = twelve();
    f.step();
    const again = reconcileRollout({
      clusterStack: f.cs,
      releases: f.releases,
      clusters: [...f.clusters.values()],
      clusterAddons: [...f.addons.values()],
      now: new Date(f.now),
    });
    assert.deepEqual(again.changes, []);
  });

  it('the CEL health check gates a moved Cluster; a syntax error is reported', () => {
    const freeze = '!("freeze" in cluster.metadata.labels)';
    const f = twelve({ ...WAVES, healthCheck: { expression: freeze } });
    const canary = f.clusters.get('c00');
    assert.ok(canary);
    canary.metadata.labels = { tier: 'canary', freeze: 'yes' };
    f.step();
    f.settle();
    f.now += 20_000;
    const r = f.step();
    assert.equal(r.status?.reason, 'HealthGate');
    assert.match(r.status?.message ?? '', /healthCheck.expression is false/);
    assert.deepEqual(f.moveOrder, ['c00'], 'nothing beyond the canary while its check fails');
    const bad = twelve({ ...WAVES, healthCheck: { expression: 'cluster.' } }).step();
    assert.equal(bad.condition?.reason, 'InvalidHealthCheck');
    assert.match(bad.condition?.message ?? '', /healthCheck.expression/);
  });

  it('a health check over the cost limit holds the rollout before any Cluster moves (celhook)', () => {
    // Six nested .all over a 20-item list: 64 million steps if it were evaluated.
    const costly = nestedAll(6);
    const f = twelve({ ...WAVES, healthCheck: { expression: costly } });
    const r = f.step();
    assert.equal(r.condition?.status, 'False');
    assert.equal(r.condition?.reason, 'HealthCheckTooCostly');
    assert.match(r.condition?.message ?? '', /healthCheck\.expression .*more than the limit of 1000000/);
    assert.equal(r.status?.phase, 'Stalled');
    assert.deepEqual(r.changes, [], 'no Cluster moves');
    assert.deepEqual(f.moveOrder, []);
  });

  it('a health check too costly for a moved Cluster holds the rollout and keeps its state (celhook)', () => {
    // Cheap over maps of 20 keys; over the Cluster's 2,000 annotations it is 4 million steps.
    const expression = 'cluster.metadata.annotations.all(a, cluster.metadata.annotations.exists(b, a == b))';
    const f = twelve({ ...WAVES, healthCheck: { expression }, rollbackOnFailure: true });
    for (const c of f.clusters.values())
      c.metadata.annotations = Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [`a${i}`, 'x']));
    const first = f.step();
    assert.deepEqual(f.moveOrder, ['c00'], 'the canary moves (no health check runs before a move)');
    assert.equal(first.status?.phase, 'Progressing');
    f.settle();
    const annotations = structuredClone(f.clusters.get('c00')?.metadata.annotations);
    f.now += 20_000;
    const held = f.step();
    assert.equal(held.condition?.reason, 'HealthCheckTooCostly');
    assert.match(held.condition?.message ?? '', /Cluster c00: .*lists up to 20\d\d items/);
    assert.equal(held.status?.phase, 'Stalled');
    assert.equal(held.status?.targetRelease, 'docker-ferrol-1-30-v2', 'the last status is kept');
    assert.deepEqual(held.changes, []);
    // Past the progress deadline the Cluster is neither failed nor rolled back by a refused check.
    f.now += 120_000;
    const later = f.step();
    assert.equal(later.condition?.reason, 'HealthCheckTooCostly');
    assert.deepEqual(later.changes, []);
    assert.deepEqual(f.clusters.get('c00')?.metadata.annotations, annotations);
    assert.equal(f.classOf('c00'), 'docker-ferrol-1-30-v2');
  });

  it('a health check with matches() or over the length limit is refused (celhook)', () => {
    const regex = twelve({
      ...WAVES,
      healthCheck: { expression: 'cluster.metadata.name.matches("(a+)+$")' },
    });
    const r = regex.step();
    assert.equal(r.condition?.reason, 'InvalidHealthCheck');
    assert.match(r.condition?.message ?? '', /matches\(\) is not allowed/);
    const long = twelve({ ...WAVES, healthCheck: { expression: `${'true && '.repeat(128)}true` } });
    const l = long.step();
    assert.equal(l.condition?.reason, 'InvalidHealthCheck');
    assert.match(l.condition?.message ?? '', /more than the limit of 1024/);
    assert.deepEqual([...r.changes, ...l.changes], []);
  });

  it('an invalid schedule is reported, naming the field', () => {
    const f = twelve({ ...WAVES, maintenanceWindows: [{ schedule: '61 * * * *', duration: '1h' }] });
    const r = f.step();
    assert.equal(r.condition?.reason, 'InvalidSpec');
    assert.match(r.condition?.message ?? '', /maintenanceWindows\[0\]/);
    assert.deepEqual(r.changes, []);
  });
});

describe('rollout helpers', () => {
  it('resolveCount reads counts and percentages (rounded up, at least 1)', () => {
    assert.equal(resolveCount('50%', 6, 1), 3);
    assert.equal(resolveCount('50%', 5, 1), 3);
    assert.equal(resolveCount('10%', 3, 1), 1);
    assert.equal(resolveCount(2, 6, 1), 2);
    assert.equal(resolveCount('4', 6, 1), 4);
    assert.equal(resolveCount(undefined, 6, 1), 1);
  });

  it('windowState: open inside a window, closed after it', () => {
    const w = [{ schedule: '30 9 * * *', duration: '1h', timeZone: 'UTC' }];
    assert.deepEqual(windowState(w, new Date('2026-11-23T09:30:00Z')), {
      open: true,
      closesAt: new Date('2026-11-23T10:30:00Z'),
    });
    assert.deepEqual(windowState(w, new Date('2026-11-23T10:30:00Z')), {
      open: false,
      nextOpen: new Date('2026-11-24T09:30:00Z'),
    });
  });

  it('clusterApiReady needs v1beta2 conditions for the current generation; v1beta1 has its own', () => {
    const c = (apiVersion: string, status: Record<string, unknown>): RolloutCluster => ({
      apiVersion,
      kind: 'Cluster',
      metadata: { name: 'x', generation: 3 },
      status,
    });
    const cond = (type: string, og?: number) => ({ type, status: 'True', observedGeneration: og });
    assert.equal(
      clusterApiReady(
        c('cluster.x-k8s.io/v1beta2', { conditions: [cond('Available', 3), cond('TopologyReconciled', 3)] }),
      ).ok,
      true,
    );
    const stale = clusterApiReady(
      c('cluster.x-k8s.io/v1beta2', { conditions: [cond('Available', 2), cond('TopologyReconciled', 3)] }),
    );
    assert.equal(stale.ok, false);
    assert.match(stale.message, /generation 2, not 3/);
    assert.equal(
      clusterApiReady(
        c('cluster.x-k8s.io/v1beta1', {
          observedGeneration: 3,
          conditions: [cond('Ready'), cond('TopologyReconciled')],
        }),
      ).ok,
      true,
    );
    assert.equal(
      clusterApiReady(
        c('cluster.x-k8s.io/v1beta1', {
          observedGeneration: 2,
          conditions: [cond('Ready'), cond('TopologyReconciled')],
        }),
      ).ok,
      false,
    );
  });
});

describe('approval gate (spec.rollout.requireApproval)', () => {
  const V2 = 'docker-ferrol-1-30-v2';
  /** v1 and v2, v2 at commit c2 with the given status.impact. */
  function withImpact(
    spec: RolloutSpec,
    impact?: NonNullable<ClusterStackRelease['status']>['impact'],
  ): Fleet {
    const v2 = release('v2');
    v2.status = { ...v2.status, commit: 'c2', ...(impact !== undefined ? { impact } : {}) };
    return twelve({ ...WAVES, ...spec }, [release('v1'), v2]);
  }
  const impact = (n: {
    failing?: number;
    affected?: number;
    added?: number;
    changed?: number;
    removed?: number;
  }) => ({
    commit: 'c2',
    computedAt: '2026-11-23T09:00:00Z',
    clusters: 12,
    clustersAffected: n.affected ?? 0,
    objectsAdded: n.added ?? 0,
    objectsChanged: n.changed ?? 0,
    objectsRemoved: n.removed ?? 0,
    clustersFailing: n.failing ?? 0,
    ...(n.failing
      ? { failing: Array.from({ length: n.failing }, (_, i) => `fleet/r0${i + 1}: RenderFailed`) }
      : {}),
    digest: 'sha256:impact-1',
  });
  /** Approves `value` and the impact named `digest` (default: v2 and its current impact). */
  const approve = (f: Fleet, value = V2, digest?: string) => {
    const v2 = f.releases.find((r) => r.metadata.name === V2);
    assert.ok(v2);
    v2.metadata.annotations = {
      [APPROVED_ANNOTATION]: value,
      [APPROVED_IMPACT_ANNOTATION]: digest ?? v2.status?.impact?.digest ?? '',
    };
  };

  it('holds a release whose impact crosses a threshold until it is approved, and says why', () => {
    const f = withImpact(
      { requireApproval: { maxClustersFailing: 0 } },
      impact({ failing: 3, affected: 9, changed: 9 }),
    );
    const held = f.step();
    assert.deepEqual(held.changes, []);
    assert.equal(held.status?.phase, 'Waiting');
    assert.equal(held.status?.reason, 'WaitingForApproval');
    assert.equal(held.condition?.reason, 'WaitingForApproval');
    const message = held.status?.message ?? '';
    assert.match(message, /3 > maxClustersFailing 0/);
    assert.match(message, /9 of 12 Cluster\(s\) affected, 3 failing to render, objects \+0 ~9 -0/);
    assert.match(message, /fleet\/r01: RenderFailed, fleet\/r02: RenderFailed, fleet\/r03: RenderFailed/);
    assert.match(message, /stackflux rollout approve ferrol -n fleet/);
    f.now += 3_600_000;
    assert.deepEqual(f.step().changes, [], 'time alone does not approve');
    approve(f, 'docker-ferrol-1-30-v1');
    assert.deepEqual(f.step().changes, [], 'an approval of another release does not count');
    approve(f, V2, 'sha256:an-older-impact');
    assert.deepEqual(f.step().changes, [], 'an approval of another impact of the release does not count');
    const v2 = f.releases.find((r) => r.metadata.name === V2);
    assert.ok(v2);
    v2.metadata.annotations = { [APPROVED_ANNOTATION]: V2 };
    assert.deepEqual(f.step().changes, [], 'an approval naming no impact does not count');
    approve(f);
    const moved = f.step();
    assert.deepEqual(
      moved.changes.map((c) => [c.name, c.action]),
      [['c00', 'Move']],
    );
    assert.equal(moved.status?.phase, 'Progressing');
  });

  it('an impact within every threshold starts at once', () => {
    const f = withImpact(
      { requireApproval: { maxClustersFailing: 0, maxObjectsChanged: 12, maxClustersAffected: 12 } },
      impact({ affected: 12, added: 4, changed: 4, removed: 4 }),
    );
    assert.deepEqual(
      f.step().changes.map((c) => c.name),
      ['c00'],
    );
  });

  it('maxObjectsChanged counts objects added, changed and removed together', () => {
    const f = withImpact(
      { requireApproval: { maxObjectsChanged: 11 } },
      impact({ added: 4, changed: 4, removed: 4 }),
    );
    const r = f.step();
    assert.deepEqual(r.changes, []);
    assert.match(r.status?.message ?? '', /12 > maxObjectsChanged 11/);
  });

  it('waits while the impact is not computed, is of another commit or has no digest', () => {
    const { digest: _d, ...undigested } = impact({});
    for (const f of [
      withImpact({ requireApproval: { maxClustersFailing: 0 } }),
      withImpact({ requireApproval: { maxClustersFailing: 0 } }, { ...impact({}), commit: 'c1' }),
      withImpact({ requireApproval: { maxClustersFailing: 0 } }, undigested),
    ]) {
      const r = f.step();
      assert.deepEqual(r.changes, []);
      assert.equal(r.status?.reason, 'ImpactPending');
    }
  });

  it('an impact that could not be computed waits for approval, naming the error', () => {
    const f = withImpact(
      { requireApproval: { maxClustersFailing: 0 } },
      {
        commit: 'c2',
        computedAt: '2026-11-23T09:00:00Z',
        error: 'release x is not a tag',
        digest: 'sha256:e',
      },
    );
    const r = f.step();
    assert.equal(r.status?.reason, 'WaitingForApproval');
    assert.match(r.status?.message ?? '', /could not be computed \(release x is not a tag\)/);
  });

  it('requireApproval without thresholds asks for every release; without requireApproval nothing waits', () => {
    const gated = withImpact({ requireApproval: {} }, impact({}));
    assert.equal(gated.step().status?.reason, 'WaitingForApproval');
    const v2 = release('v2');
    assert.equal(approvalGate(WAVES, v2, 'ferrol'), undefined);
    assert.deepEqual(
      withImpact({})
        .step()
        .changes.map((c) => c.name),
      ['c00'],
    );
  });
});
