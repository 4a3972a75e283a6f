// Issue 23 point 5 end to end: a Progressive rollout of a cluster-stack-operator (csctl) stack applies
// the new release's BeforeClusterUpgrade stage to the workload cluster BEFORE it moves the Cluster's
// topology, as CSO applies it while Cluster API's BeforeClusterUpgrade hook holds the upgrade.
// stacks/docker-csoferrol-1-30 released as v1, then as v2 with a visible change in cni (an addon of
// its BeforeClusterUpgrade stage): one more ConfigMap, named after this test's namespace. Real Flux
// applies the addons into the workload cluster (the test environment's second kube-apiserver). A
// sampler reads, in this order, the Cluster, its ClusterAddon and the workload cluster: it must see
// v2's ConfigMap in the workload cluster while the Cluster's class is still v1 (Preparing), and never
// the class at v2 without it. Then the move and the rollout Complete.
//
// No Cluster API controllers run here: the test plays Cluster API's topology controller
// (hack/lib/capi.ts, as rollout.workload.test.ts): it writes v1beta2 Available and
// TopologyReconciled for each new generation of the Cluster.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ClusterAddon } from '../../controller/api/clusteraddon.ts';
import type { ClusterStack } from '../../controller/api/clusterstack.ts';
import type { ClusterStackRelease } from '../../controller/api/clusterstackrelease.ts';
import { API_VERSION, RECONCILE_REQUEST_ANNOTATION } from '../../controller/api/meta.ts';
import { PREPARING_PHASE, ROLLOUT_ANNOTATIONS } from '../../controller/api/rollout.ts';
import { KubeClient, type KubeObject, loadKubeConfig } from '../../controller/runtime/client.ts';
import { playClusterApi } from '../../hack/lib/capi.ts';
import { installCrds } from '../../hack/lib/crds.ts';
import { createRepo, type Endpoints } from '../../hack/lib/testenv.ts';
import {
  csoferrolClusterStack,
  cutCsctlRelease,
  servedClusterClass,
  csoferrolTag as tag,
} from '../support/csctl.ts';
import {
  CAPI,
  ControllerProcess,
  cond,
  controllerSteps,
  createAddonCluster,
  createTestNamespace,
  e2eEnv,
  initRepo,
  push,
  releaseAddonNamespace,
  required,
  sleep,
  waitFor,
} from '../support/e2e.ts';
import { uniqueName } from '../support/env.ts';

const env = { ...e2eEnv(), workloadKubeconfig: required('WORKLOAD_KUBECONFIG') };
const client = new KubeClient(loadKubeConfig({ kubeconfig: env.kubeconfig }));
const workload = new KubeClient(loadKubeConfig({ kubeconfig: env.workloadKubeconfig }));
const ns = uniqueName('csctlupgrade');
const work = mkdtempSync(join(tmpdir(), 'stackflux-csctlupgrade-'));
const repoDir = join(work, 'release');
const ADDON_NS = 'kube-system';
/** v2's visible change: a ConfigMap of cni's umbrella chart only v2 has (unique to this run). */
const MARKER = `${ns}-before-upgrade`;

type CA = ClusterAddon & KubeObject;
type CSK = ClusterStack & KubeObject;
type Cluster = KubeObject & {
  metadata: { annotations?: Record<string, string> };
  spec: { topology: { classRef: { name: string }; version: string } };
};

/**
 * cni (in both stages, so in BeforeClusterUpgrade) gets one more object in its umbrella chart, with
 * the class the Cluster's topology names in its values (overwrite.yaml over the live Cluster).
 */
function withMarker(dir: string): void {
  const templates = join(dir, 'cluster-addon', 'cni', 'templates');
  mkdirSync(templates, { recursive: true });
  writeFileSync(
    join(templates, 'before-upgrade.yaml'),
    `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${MARKER}\n  namespace: {{ .Release.Namespace }}\ndata:\n  cluster: {{ index .Values "cni-config" "clusterName" | quote }}\n  class: {{ .Values.prepared.class | quote }}\n`,
  );
  const overwrite = join(dir, 'cluster-addon', 'cni', 'overwrite.yaml');
  writeFileSync(
    overwrite,
    `${readFileSync(overwrite, 'utf8')}  prepared:\n    class: {{ .Cluster.spec.topology.classRef.name | quote }}\n`,
  );
  const stages = readFileSync(join(dir, 'clusteraddon.yaml'), 'utf8');
  assert.match(stages, /BeforeClusterUpgrade:\n\s+- name: cni/, 'cni is in the BeforeClusterUpgrade stage');
}

interface Sample {
  className: string;
  phase: string | undefined;
  result: string | undefined;
  addonRelease: string | undefined;
  rolloutReason: string | undefined;
  marker: string | undefined;
  /** The ClusterAddon's fleet commit (the rendered files of its release). */
  fleetCommit: string | undefined;
}

/** Samples Cluster, ClusterAddon, ClusterStack, then the workload cluster, in that order, until stopped. */
function sampler() {
  const samples: Sample[] = [];
  let stop = false;
  const done = (async () => {
    while (!stop) {
      const c = await client.get<Cluster>(CAPI, 'Cluster', 'c1', ns).catch(() => undefined);
      const ca = await client.get<CA>(API_VERSION, 'ClusterAddon', 'c1', ns).catch(() => undefined);
      const cs = await client.get<CSK>(API_VERSION, 'ClusterStack', 'csoferrol', ns).catch(() => undefined);
      const m = await workload.get<KubeObject>('v1', 'ConfigMap', MARKER, ADDON_NS).catch(() => undefined);
      if (c !== undefined)
        samples.push({
          className: c.spec.topology.classRef.name,
          phase: c.metadata.annotations?.[ROLLOUT_ANNOTATIONS.phase],
          result: c.metadata.annotations?.[ROLLOUT_ANNOTATIONS.result],
          addonRelease: ca?.spec.release,
          rolloutReason: cs?.status?.rollout?.reason,
          marker: m?.metadata.uid,
          fleetCommit: ca?.status?.fleetCommit,
        });
      await sleep(250);
    }
  })();
  return {
    async stop(): Promise<Sample[]> {
      stop = true;
      await done;
      return samples;
    },
  };
}

const rollout = async () =>
  (await client.get<CSK>(API_VERSION, 'ClusterStack', 'csoferrol', ns))?.status?.rollout;
const cluster = async (): Promise<Cluster> => {
  const c = await client.get<Cluster>(CAPI, 'Cluster', 'c1', ns);
  assert.ok(c);
  return c;
};

let controller: ControllerProcess | undefined;
let capi: { stop: () => Promise<void> } | undefined;
let repoUrl = '';
const step = controllerSteps(() => controller);

describe('csctl v1 → v2 with a Progressive rollout: the BeforeClusterUpgrade stage first, then the move', {
  timeout: 20 * 60_000,
}, () => {
  before(async () => {
    await createTestNamespace(client, ns);
    repoUrl = await createRepo(env as Endpoints, `${ns}-release`);
    const fleetUrl = await createRepo(env as Endpoints, `${ns}-fleet`);
    initRepo(repoDir);
    cutCsctlRelease(repoDir, 'docker-csoferrol-1-30', 'v1', servedClusterClass);
    push(repoDir, repoUrl, tag('v1'));
    controller = await ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: ns,
      cacheDir: join(work, 'cache'),
      extraArgs: [`--fleet-url=${fleetUrl}`, '--fleet-batch-window=1s'],
    });
    await client.create(
      csoferrolClusterStack(ns, repoUrl, [], {
        autoSubscribe: true,
        versions: undefined,
        interval: '3s',
        rollout: { strategy: 'Progressive', progressDeadline: '10m' },
      }),
    );
    capi = playClusterApi(client, ns);
  });

  after(async () => {
    await capi?.stop();
    await controller?.stop();
    await releaseAddonNamespace(client, ns);
    // Only this run's object: cni's and metrics' fixed-name objects are shared with the other csctl
    // tests of the workload cluster, which may run at the same time.
    await workload.delete('v1', 'ConfigMap', MARKER, ADDON_NS).catch(() => undefined);
    client.close();
    workload.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('1. v1: the Cluster runs v1 with every addon Ready; the rollout is Complete', () =>
    step(async () => {
      await createAddonCluster(client, env.workloadKubeconfig, ns, 'c1', {
        podCidr: '10.246.0.0/16',
        className: tag('v1'),
        version: 'v1.30.4',
      });
      await waitFor('c1 Ready at v1 and the rollout Complete', async () => {
        const ca = await client.get<CA>(API_VERSION, 'ClusterAddon', 'c1', ns);
        const r = await rollout();
        return cond(ca, 'Ready')?.status === 'True' &&
          ca?.status?.release === tag('v1') &&
          r?.phase === 'Complete'
          ? true
          : undefined;
      });
      assert.equal(await workload.get('v1', 'ConfigMap', MARKER, ADDON_NS), undefined, 'v1 has no marker');
    }));

  it('2. v2: its BeforeClusterUpgrade stage is applied and Ready in the workload cluster before the class moves', () =>
    step(async () => {
      // The shared test environment holds the CRDs of whichever branch installed them last: this
      // step needs this branch's (status.beforeClusterUpgradeAddons), so they are applied again.
      await installCrds(client);
      const watch = sampler();
      cutCsctlRelease(repoDir, 'docker-csoferrol-1-30', 'v2', (dir) => {
        servedClusterClass(dir);
        withMarker(dir);
      });
      push(repoDir, repoUrl, tag('v2'));
      const release = await waitFor('release v2 records its BeforeClusterUpgrade stage', async () => {
        const r = await client.get<ClusterStackRelease & KubeObject>(
          API_VERSION,
          'ClusterStackRelease',
          tag('v2'),
          ns,
        );
        return r?.status?.beforeClusterUpgradeAddons !== undefined ? r : undefined;
      });
      assert.deepEqual(release.status?.beforeClusterUpgradeAddons, ['cni', 'metrics']);
      await waitFor(
        'rollout to v2 Complete',
        async () => {
          const r = await rollout();
          return r?.targetRelease === tag('v2') && r.phase === 'Complete' ? r : undefined;
        },
        { timeoutMs: 10 * 60_000 },
      );
      const samples = await watch.stop();
      const shown = samples.map((s) => JSON.stringify(s)).join('\n');

      // Preparing observed: class still v1, addons at v2, v2's stage content in the workload cluster.
      const prepared = samples.filter(
        (s) =>
          s.className === tag('v1') &&
          s.phase === PREPARING_PHASE &&
          s.addonRelease === tag('v2') &&
          s.marker !== undefined,
      );
      assert.ok(prepared.length > 0, `v2's stage in the workload cluster while the class was v1:\n${shown}`);
      assert.ok(
        samples.some((s) => s.rolloutReason === 'Preparing'),
        `status.rollout said Preparing:\n${shown}`,
      );
      // Never the other order: the class (read first) at v2 while the content (read after) was absent.
      const reversed = samples.filter((s) => s.className === tag('v2') && s.marker === undefined);
      assert.deepEqual(reversed, [], 'the class moved before the stage was applied');
      // The addons stayed at v2 from Preparing on (nothing went back to v1 at the move).
      const first = samples.findIndex((s) => s.addonRelease === tag('v2'));
      assert.ok(
        samples.slice(first).every((s) => s.addonRelease === tag('v2')),
        shown,
      );

      // Then the move, and the rollout done.
      const c = await cluster();
      assert.equal(c.spec.topology.classRef.name, tag('v2'));
      assert.equal(
        c.metadata.annotations?.[ROLLOUT_ANNOTATIONS.phase],
        undefined,
        'the phase annotation is gone',
      );
      assert.equal(c.metadata.annotations?.[ROLLOUT_ANNOTATIONS.result], 'Done');
      const ca = await waitFor('c1 Ready at v2', async () => {
        const x = await client.get<CA>(API_VERSION, 'ClusterAddon', 'c1', ns);
        return cond(x, 'Ready')?.status === 'True' && x?.status?.release === tag('v2') ? x : undefined;
      });
      assert.deepEqual(
        ca.status?.addons?.map((a) => [a.name, a.ready, a.stage, a.release]),
        [
          ['cni', true, 'BeforeClusterUpgrade', tag('v2')],
          ['metrics', true, 'BeforeClusterUpgrade', tag('v2')],
        ],
      );
      const marker = await workload.get<KubeObject & { data?: Record<string, string> }>(
        'v1',
        'ConfigMap',
        MARKER,
        ADDON_NS,
      );
      // Rendered as CSO renders the stage: over the Cluster with the topology it is moving to.
      assert.deepEqual(marker?.data, { cluster: 'c1', class: tag('v2') });
      assert.equal(marker?.metadata.uid, prepared[0]?.marker, 'applied once, while Preparing; not recreated');
      // The move re-rendered nothing: a reconcile of the ClusterAddon over the moved Cluster (requested,
      // and waited for) keeps the fleet commit Flux applied while Preparing, though cni's values
      // read the topology's class: they saw the Cluster with the topology it was about to get.
      const requestedAt = new Date().toISOString();
      await client.mergePatch(API_VERSION, 'ClusterAddon', 'c1', ns, {
        metadata: { annotations: { [RECONCILE_REQUEST_ANNOTATION]: requestedAt } },
      });
      const again = await waitFor('the ClusterAddon reconciled over the moved Cluster', async () => {
        const x = await client.get<CA>(API_VERSION, 'ClusterAddon', 'c1', ns);
        return x?.status?.lastHandledReconcileAt === requestedAt ? x : undefined;
      });
      const preparedCommit = prepared.at(-1)?.fleetCommit;
      assert.ok(preparedCommit !== undefined);
      assert.equal(again.status?.fleetCommit, preparedCommit, 'no new fleet commit after the move');

      const events = await waitFor(
        'ClusterPreparing and ClusterMoved Events on the ClusterStack',
        async () => {
          const list = await client.listAll<KubeObject & { reason?: string; regarding?: { name?: string } }>(
            'events.k8s.io/v1',
            'Event',
            { namespace: ns },
          );
          const reasons = new Set(
            list.items.filter((e) => e.regarding?.name === 'csoferrol').map((e) => e.reason),
          );
          return reasons.has('ClusterPreparing') && reasons.has('ClusterMoved') ? reasons : undefined;
        },
      );
      assert.ok(events.has('ClusterRolledOut'));
    }));
});
