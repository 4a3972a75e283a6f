// Issue 14: Progressive rollout against the real test environment. `stackflux run` (with the
// addon controller) moves 12 Clusters in 3 waves when a new release tag is pushed; Flux applies
// each Cluster's one addon (a ConfigMap named after the Cluster, so no two Clusters share an
// object) into the workload cluster, and the ClusterAddon's readiness is part of the health gate.
//
// No Cluster API controllers run here: this test plays Cluster API's topology controller
// (hack/lib/capi.ts): whenever a Cluster's generation is newer than its conditions, it writes v1beta2
// Available and TopologyReconciled (True, observedGeneration = generation), as Cluster API would
// once the topology rollout is done.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ClusterAddon } from '../../controller/api/clusteraddon.ts';
import type { ClusterStack } from '../../controller/api/clusterstack.ts';
import { API_VERSION } from '../../controller/api/meta.ts';
import { ROLLOUT_ANNOTATIONS, ROLLOUT_FIELD_MANAGER } from '../../controller/api/rollout.ts';
import { KubeClient, type KubeObject, loadKubeConfig } from '../../controller/runtime/client.ts';
import { playClusterApi } from '../../hack/lib/capi.ts';
import { createRepo, type Endpoints, workloadKubeconfigSecret } from '../../hack/lib/testenv.ts';
import {
  CAPI,
  ControllerProcess,
  cond,
  createTestNamespace,
  cutRelease,
  e2eEnv,
  ferrolClusterStack,
  initRepo,
  push,
  releaseControllerHolds,
  required,
  stackflux,
  waitFor,
} from '../support/e2e.ts';
import { uniqueName } from '../support/env.ts';

const env = { ...e2eEnv(), workloadKubeconfig: required('WORKLOAD_KUBECONFIG') };
const client = new KubeClient(loadKubeConfig({ kubeconfig: env.kubeconfig }), { qps: 200, burst: 200 });
const ns = uniqueName('rollout');
const work = mkdtempSync(join(tmpdir(), 'stackflux-rollout-'));
const repoDir = join(work, 'release');
const tagOf = (v: string) => `docker-ferrol-1-30-${v}`;

type Cluster = KubeObject & {
  metadata: { generation?: number; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec: { topology: { classRef: { name: string }; version: string } };
  status?: { conditions?: Array<{ type: string; observedGeneration?: number }> };
};
type CSK = ClusterStack & KubeObject;

const CANARY = ['canary-0'];
const EARLY = ['early-1', 'early-2', 'early-3', 'early-4', 'early-5'];
const REST = ['rest-1', 'rest-2', 'rest-3', 'rest-4', 'rest-5', 'rest-6'];
const ALL = [...CANARY, ...EARLY, ...REST];
const waveOf = (name: string): string =>
  name.startsWith('canary') ? 'canary' : name.startsWith('early') ? 'early' : 'rest';
const LIMIT: Record<string, number> = { canary: 1, early: 2, rest: 3 };

/** Cuts release `version` whose one addon is a ConfigMap per Cluster (`broken`: plus an object Flux cannot apply). */
function release(version: string, broken = false): string {
  return cutRelease(repoDir, 'stack', {
    example: 'docker-ferrol-1-30',
    k8s: '1-30',
    version,
    edit: (dir) => {
      rmSync(join(dir, 'cluster-addon'), { recursive: true });
      const addon = join(dir, 'cluster-addon', 'marker');
      const stackFile = join(dir, 'stack.yaml');
      writeFileSync(
        stackFile,
        readFileSync(stackFile, 'utf8').replace(
          /^addons:[\s\S]*$/m,
          'addons:\n  - name: marker\n    targetNamespace: default\n',
        ),
      );
      mkdirSync(addon, { recursive: true });
      writeFileSync(
        join(addon, 'marker.yaml.hbs'),
        [
          'apiVersion: v1',
          'kind: ConfigMap',
          'metadata:',
          '  name: {{Cluster.metadata.namespace}}-{{Cluster.metadata.name}}',
          'data:',
          '  release: "{{Stack.version}}"',
          ...(broken
            ? [
                '---',
                'apiVersion: rollout.example.invalid/v1',
                'kind: DoesNotExist',
                'metadata:',
                '  name: broken',
              ]
            : []),
          '',
        ].join('\n'),
      );
    },
  });
}

/** Plays Cluster API (hack/lib/capi.ts) and samples the moves and what is in flight per wave. */
class CapiPlayer {
  maxInFlight: Record<string, number> = {};
  moves: Array<{ cluster: string; to: string }> = [];
  private seen = new Map<string, string>();
  private player: { stop: () => Promise<void> } | undefined;

  start(): void {
    this.player = playClusterApi(client, ns, (items) => this.sample(items as Cluster[]));
  }

  async stop(): Promise<void> {
    await this.player?.stop();
  }

  private sample(items: Cluster[]): void {
    const inFlight: Record<string, number> = {};
    for (const c of items) {
      const name = c.metadata.name ?? '';
      const cls = c.spec.topology.classRef.name;
      if (this.seen.get(name) !== cls) {
        if (this.seen.has(name)) this.moves.push({ cluster: name, to: cls });
        this.seen.set(name, cls);
      }
      const a = c.metadata.annotations ?? {};
      if (a[ROLLOUT_ANNOTATIONS.to] !== undefined && a[ROLLOUT_ANNOTATIONS.result] === undefined)
        inFlight[waveOf(name)] = (inFlight[waveOf(name)] ?? 0) + 1;
    }
    for (const [w, n] of Object.entries(inFlight))
      this.maxInFlight[w] = Math.max(this.maxInFlight[w] ?? 0, n);
  }
}

async function rolloutStatus(): Promise<CSK['status']> {
  return (await client.get<CSK>(API_VERSION, 'ClusterStack', 'ferrol', ns))?.status;
}

async function classOf(name: string): Promise<string | undefined> {
  return (await client.get<Cluster>(CAPI, 'Cluster', name, ns))?.spec.topology.classRef.name;
}

async function addonsReadyAt(names: string[], tag: string): Promise<void> {
  for (const name of names) {
    await waitFor(
      `ClusterAddon ${name} Ready at ${tag}`,
      async () => {
        const ca = await client.get<ClusterAddon & KubeObject>(API_VERSION, 'ClusterAddon', name, ns);
        return ca?.status?.release === tag && cond(ca, 'Ready')?.status === 'True' ? true : undefined;
      },
      { timeoutMs: 600_000 },
    );
  }
}

describe('progressive rollout (issue 14)', { timeout: 40 * 60_000 }, () => {
  let controller: ControllerProcess | undefined;
  const capi = new CapiPlayer();

  before(async () => {
    await createTestNamespace(client, ns);
    const repoUrl = await createRepo(env as Endpoints, `${ns}-release`);
    const fleetUrl = await createRepo(env as Endpoints, `${ns}-fleet`);
    initRepo(repoDir);
    push(repoDir, repoUrl, release('v1'));
    controller = await ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: ns,
      cacheDir: join(work, 'cache'),
      concurrency: 4,
      extraArgs: [`--fleet-url=${fleetUrl}`, '--fleet-batch-window=1s'],
    });
    const stack = ferrolClusterStack(ns, 'ferrol', {
      autoSubscribe: true,
      interval: '3s',
      source: { git: { url: repoUrl }, path: 'stack' },
      rollout: {
        strategy: 'Progressive',
        waves: [
          { name: 'canary', selector: { matchLabels: { tier: 'canary' } }, maxConcurrent: 1 },
          { name: 'early', selector: { matchLabels: { tier: 'early' } }, maxConcurrent: 2 },
        ],
        maxConcurrent: '50%',
        minSuccessTime: '5s',
        progressDeadline: '5m',
      },
    });
    await client.create(stack);
    const kubeconfig = readFileSync(env.workloadKubeconfig, 'utf8');
    for (const [i, name] of ALL.entries()) {
      await client.create(workloadKubeconfigSecret(ns, name, kubeconfig) as KubeObject);
      await client.create({
        apiVersion: CAPI,
        kind: 'Cluster',
        metadata: { name, namespace: ns, labels: { tier: waveOf(name) } },
        spec: {
          clusterNetwork: { pods: { cidrBlocks: [`10.${200 + i}.0.0/16`] } },
          controlPlaneEndpoint: { host: `${name}.example.internal`, port: 6443 },
          topology: { classRef: { name: tagOf('v1') }, version: 'v1.30.4' },
        },
      });
    }
    capi.start();
    (globalThis as { repoUrl?: string }).repoUrl = repoUrl;
  });

  after(async () => {
    await capi.stop();
    await controller?.stop();
    await releaseControllerHolds(client, ns);
    await client.delete('v1', 'Namespace', ns).catch(() => undefined);
    client.close();
    rmSync(work, { recursive: true, force: true });
  });

  const repoUrl = (): string => (globalThis as { repoUrl?: string }).repoUrl ?? '';

  it('a tag push moves 12 Clusters wave by wave, within maxConcurrent, each wave after its soak', async () => {
    const c = controller;
    assert.ok(c);
    await c.step(async () => {
      await addonsReadyAt(ALL, tagOf('v1'));
      const s = await rolloutStatus();
      assert.equal(s?.rollout?.phase, 'Complete', 'nothing to do while every Cluster is at the latest');
      push(repoDir, repoUrl(), release('v2'));
      await waitFor(
        'rollout to v2 Complete',
        async () => {
          const r = (await rolloutStatus())?.rollout;
          return r?.targetRelease === tagOf('v2') && r.phase === 'Complete' ? r : undefined;
        },
        { timeoutMs: 20 * 60_000 },
      );
      for (const name of ALL) assert.equal(await classOf(name), tagOf('v2'), name);
      await addonsReadyAt(ALL, tagOf('v2'));

      const order = capi.moves.filter((m) => m.to === tagOf('v2')).map((m) => m.cluster);
      assert.deepEqual([...order].sort(), [...ALL].sort(), 'each Cluster moved once');
      const waves = order.map((n) => ['canary', 'early', 'rest'].indexOf(waveOf(n)));
      assert.deepEqual(waves, [...waves].sort(), `moved in wave order: ${order.join(', ')}`);
      for (const [w, n] of Object.entries(capi.maxInFlight))
        assert.ok(n <= (LIMIT[w] ?? 0), `wave ${w}: ${n} in flight at once, limit ${LIMIT[w]}`);

      // Each wave started after every Cluster of the waves before it had soaked 5 s.
      const clusters = await client.listAll<Cluster>(CAPI, 'Cluster', { namespace: ns });
      const ann = (n: string, k: string) =>
        Date.parse(clusters.items.find((x) => x.metadata.name === n)?.metadata.annotations?.[k] ?? '');
      for (const n of ALL)
        for (const m of ALL)
          if (['canary', 'early', 'rest'].indexOf(waveOf(m)) > ['canary', 'early', 'rest'].indexOf(waveOf(n)))
            assert.ok(
              ann(m, ROLLOUT_ANNOTATIONS.started) >= ann(n, ROLLOUT_ANNOTATIONS.healthySince) + 5000,
              `${m} started before ${n} finished its soak`,
            );

      // The moved fields are owned by stackflux's rollout field manager (server-side apply).
      const canary = await client.get<KubeObject>(CAPI, 'Cluster', 'canary-0', ns);
      const managed = (
        (canary?.metadata ?? {}) as { managedFields?: Array<{ manager?: string; fieldsV1?: unknown }> }
      ).managedFields;
      const owned = JSON.stringify(managed?.find((f) => f.manager === ROLLOUT_FIELD_MANAGER)?.fieldsV1);
      assert.match(owned, /"f:classRef":\{"f:name":\{\}\}/);
      assert.match(owned, /"f:version":\{\}/);
      assert.doesNotMatch(
        owned,
        /clusterNetwork|controlPlaneEndpoint/,
        'only the topology class and version',
      );
    });
  });

  it('pause holds new Clusters; resume goes on; a hand-moved Cluster is left alone; a newer release supersedes', async () => {
    const c = controller;
    assert.ok(c);
    await c.step(async () => {
      const paused = stackflux(['rollout', 'pause', 'ferrol', '-n', ns], { KUBECONFIG: env.kubeconfig });
      assert.equal(paused.status, 0, paused.stderr);
      push(repoDir, repoUrl(), release('v3'));
      await waitFor('rollout Paused at v3', async () => {
        const r = (await rolloutStatus())?.rollout;
        return r?.targetRelease === tagOf('v3') && r.phase === 'Paused' ? r : undefined;
      });
      for (const name of ALL)
        assert.equal(await classOf(name), tagOf('v2'), `${name} not moved while paused`);

      const resumed = stackflux(['rollout', 'resume', 'ferrol', '-n', ns], { KUBECONFIG: env.kubeconfig });
      assert.equal(resumed.status, 0, resumed.stderr);
      await waitFor('the canary moves to v3 after resume', async () =>
        (await classOf('canary-0')) === tagOf('v3') ? true : undefined,
      );
      // An operator moves the canary back by hand (kubectl edit: a plain update, another manager).
      await client.mergePatch(CAPI, 'Cluster', 'canary-0', ns, {
        spec: { topology: { classRef: { name: tagOf('v2') } } },
      });
      // A newer release arrives mid-rollout.
      push(repoDir, repoUrl(), release('v4'));
      await waitFor(
        'rollout to v4 Complete',
        async () => {
          const r = (await rolloutStatus())?.rollout;
          return r?.targetRelease === tagOf('v4') && r.phase === 'Complete' ? r : undefined;
        },
        { timeoutMs: 20 * 60_000 },
      );
      const canary = await client.get<Cluster>(CAPI, 'Cluster', 'canary-0', ns);
      assert.equal(
        canary?.spec.topology.classRef.name,
        tagOf('v2'),
        'the hand-moved canary is never overwritten',
      );
      assert.equal(canary?.metadata.annotations?.[ROLLOUT_ANNOTATIONS.result], 'HandMoved');
      for (const name of [...EARLY, ...REST]) assert.equal(await classOf(name), tagOf('v4'), name);
      const v3Moves = capi.moves.filter((m) => m.to === tagOf('v3')).map((m) => m.cluster);
      assert.ok(
        v3Moves.length < ALL.length - 1,
        `v4 superseded v3 from the next Cluster on (v3 moves: ${v3Moves.join(', ')})`,
      );
      // Hand the canary back to the rollout (drop its rollout annotations) for the next test.
      await client.mergePatch(CAPI, 'Cluster', 'canary-0', ns, {
        metadata: {
          annotations: Object.fromEntries(Object.values(ROLLOUT_ANNOTATIONS).map((k) => [k, null])),
        },
        spec: { topology: { classRef: { name: tagOf('v4') } } },
      });
    });
  });

  it('a release whose addon fails on the canary stalls the rollout; rollbackOnFailure moves it back', async () => {
    const c = controller;
    assert.ok(c);
    await c.step(async () => {
      await addonsReadyAt(ALL, tagOf('v4'));
      await client.mergePatch(API_VERSION, 'ClusterStack', 'ferrol', ns, {
        spec: { rollout: { progressDeadline: '45s', rollbackOnFailure: true } },
      });
      const moved = capi.moves.length;
      push(repoDir, repoUrl(), release('v5', true));
      const stalled = await waitFor(
        'rollout Stalled at v5',
        async () => {
          const s = await rolloutStatus();
          return s?.rollout?.targetRelease === tagOf('v5') && s.rollout.phase === 'Stalled' ? s : undefined;
        },
        { timeoutMs: 10 * 60_000 },
      );
      const condition = stalled?.conditions?.find((x) => x.type === 'Rollout');
      assert.equal(condition?.status, 'False');
      assert.equal(condition?.reason, 'Stalled');
      assert.match(condition?.message ?? '', /canary-0/);
      assert.deepEqual(stalled?.rollout?.failed, ['canary-0']);
      // The Cluster API player samples every 300 ms: let it see the move back before comparing.
      await waitFor(
        'the canary seen back at v4',
        async () =>
          capi.moves.slice(moved).some((m) => m.cluster === 'canary-0' && m.to === tagOf('v4'))
            ? true
            : undefined,
        { timeoutMs: 60_000 },
      );
      const after = capi.moves.slice(moved);
      assert.deepEqual(
        after.map((m) => `${m.cluster}→${m.to}`),
        [`canary-0→${tagOf('v5')}`, `canary-0→${tagOf('v4')}`],
        'nothing moved beyond the canary, which went back',
      );
      // The canary's addons are applied again from the v4 rendering.
      await addonsReadyAt(['canary-0'], tagOf('v4'));
      for (const name of [...EARLY, ...REST]) assert.equal(await classOf(name), tagOf('v4'), name);
      // Every transition left an Event on the ClusterStack (kubectl describe csk ferrol).
      const events = await waitFor('rollout Events on the ClusterStack', async () => {
        const list = await client.listAll<KubeObject & { reason?: string; regarding?: { name?: string } }>(
          'events.k8s.io/v1',
          'Event',
          { namespace: ns },
        );
        const reasons = new Set(
          list.items.filter((e) => e.regarding?.name === 'ferrol').map((e) => e.reason),
        );
        return [
          'ClusterMoved',
          'ClusterRolledOut',
          'ClusterHandMoved',
          'ClusterRolledBack',
          'RolloutStalled',
        ].every((r) => reasons.has(r))
          ? reasons
          : undefined;
      });
      assert.ok(events.has('RolloutComplete'));
      const status = stackflux(['status', '-n', ns], { KUBECONFIG: env.kubeconfig });
      assert.equal(status.status, 0, status.stderr);
      assert.match(status.stdout, /rollout.*Stalled/i);
    });
  });
});
