// Issue 23 end to end, the ClusterAddon side of a cluster-stack-operator (csctl) release:
// stacks/docker-csoferrol-1-30 (addons in stages, one umbrella chart each) released as a Git tag,
// a ClusterStack, a Cluster of ClusterClass docker-csoferrol-1-30-v1. `stackflux run --fleet-url`
// renders each addon as CSO does and real Flux applies it INTO the workload cluster (the test
// environment's second kube-apiserver, through the Cluster's kubeconfig Secret): every object read
// back from the workload cluster must be what CSO renders for this Cluster (native Go + the helm
// CLI over the live Cluster, test/support/goengine.ts); metrics depends on cni; cni's
// waitForPostCondition is a Flux health check of its Kustomization. Then the layouts: v2 is the old
// layout (stacks/docker-csoferrol-1-30-umbrella, one chart for all, plus a ConfigMap only it has),
// v3 the new layout again. The Cluster moves v1 → v2 → v3: the objects both layouts apply keep
// their uids and are present in every sample taken while moving; the ConfigMap v3 dropped is
// pruned. Last, v4's cni post-condition never holds: Flux keeps cni not Ready (until the
// Kustomization's timeout, then HealthCheckFailed) and metrics waits on it. Nothing here needs
// Cluster API's status (the csctl addons apply once a Cluster uses the release), so the test
// writes none. v1beta2 ClusterClasses only: the test environment serves no v1beta1
// (test/support/csctl.ts).
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ClusterAddon } from '../../controller/api/clusteraddon.ts';
import type { Kustomization } from '../../controller/api/flux.ts';
import { API_VERSION } from '../../controller/api/meta.ts';
import { KubeClient, type KubeObject, loadKubeConfig } from '../../controller/runtime/client.ts';
import { createRepo, type Endpoints } from '../../hack/lib/testenv.ts';
import {
  csoferrolClusterStack,
  csoReleaseObjects,
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
  moveClusterTo,
  push,
  ROOT,
  releaseAddonNamespace,
  required,
  waitFor,
  watchPresence,
} from '../support/e2e.ts';
import { uniqueName } from '../support/env.ts';

const env = { ...e2eEnv(), workloadKubeconfig: required('WORKLOAD_KUBECONFIG') };
const client = new KubeClient(loadKubeConfig({ kubeconfig: env.kubeconfig }));
const workload = new KubeClient(loadKubeConfig({ kubeconfig: env.workloadKubeconfig }));
const ns = uniqueName('csctladdons');
const work = mkdtempSync(join(tmpdir(), 'stackflux-csctladdons-'));
const repoDir = join(work, 'release');
const KUSTOMIZE = 'kustomize.toolkit.fluxcd.io/v1';
const ADDON_NS = 'kube-system';
const LEGACY = 'csoferrol-legacy';

type CA = ClusterAddon & KubeObject;
type K = Kustomization & KubeObject;
type Obj = Record<string, unknown> & {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
};

/** The old layout with one more ConfigMap in its umbrella chart, which the new layout has not. */
function withLegacyObject(dir: string): void {
  mkdirSync(join(dir, 'cluster-addon', 'templates'), { recursive: true });
  writeFileSync(
    join(dir, 'cluster-addon', 'templates', 'legacy.yaml'),
    `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${LEGACY}\n  namespace: {{ .Release.Namespace }}\ndata:\n  cluster: {{ index .Values "cni-config" "clusterName" | quote }}\n`,
  );
}

/** The new layout with a post-condition on cni that never holds, and cni's MTU changed (to see it applied). */
function withFailingPostCondition(dir: string): void {
  const stages = join(dir, 'clusteraddon.yaml');
  const text = readFileSync(stages, 'utf8');
  assert.ok(text.includes('conditions: cniconfig.data.clusterName != ""'));
  writeFileSync(
    stages,
    text.replace('cniconfig.data.clusterName != ""', 'cniconfig.data.clusterName == "nobody"'),
  );
  const values = join(dir, 'cluster-addon', 'cni', 'values.yaml');
  writeFileSync(values, readFileSync(values, 'utf8').replace('mtu: 1400', 'mtu: 1300'));
}

/** The stacks of the releases, as cut (the reference renders read them). */
const STACK_DIRS: Record<string, string> = {};
function stackCopy(version: string, stack: string, ...edits: Array<(dir: string) => void>): void {
  const dir = join(work, `stack-${version}`);
  cpSync(join(ROOT, 'stacks', stack), dir, { recursive: true });
  for (const edit of edits) edit(dir);
  STACK_DIRS[version] = dir;
  cutCsctlRelease(repoDir, stack, version, (target) => {
    for (const edit of edits) edit(target);
  });
}

/** What CSO renders for `cluster` from release `version`: every addon's objects. */
function csoObjects(version: string, cluster: Record<string, unknown>): Obj[] {
  return csoReleaseObjects(STACK_DIRS[version] as string, tag(version), cluster) as Obj[];
}

const live = (o: Obj) => workload.get<Obj & KubeObject>(o.apiVersion, o.kind, o.metadata.name, ADDON_NS);
const idOf = (o: Obj) => `${o.kind} ${o.metadata.name}`;

/** Each CSO object is in the workload cluster with CSO's data and labels; their uids by id. */
async function assertAsCso(expected: Obj[]): Promise<Map<string, string>> {
  const uids = new Map<string, string>();
  for (const want of expected) {
    const got = await live(want);
    assert.ok(got, `${idOf(want)} is in the workload cluster's ${ADDON_NS}`);
    assert.deepEqual(got.data, want.data, `${idOf(want)}: data as CSO renders it`);
    for (const [k, v] of Object.entries(want.metadata.labels ?? {}))
      assert.equal(got.metadata.labels?.[k], v, `${idOf(want)}: label ${k}`);
    uids.set(idOf(want), got.metadata.uid ?? '');
  }
  return uids;
}

const caddon = (): Promise<CA | undefined> => client.get<CA>(API_VERSION, 'ClusterAddon', 'c1', ns);
const readyAt = async (version: string): Promise<CA | undefined> => {
  const c = await caddon();
  return cond(c, 'Ready')?.status === 'True' && c?.status?.release === tag(version) ? c : undefined;
};
const ownKustomizations = async (): Promise<K[]> =>
  (
    await client.list<K>(KUSTOMIZE, 'Kustomization', {
      namespace: ns,
      labelSelector: 'stackflux.io/cluster=c1',
    })
  ).items;
const liveCluster = async (): Promise<Record<string, unknown>> => {
  const c = await client.get<KubeObject>(CAPI, 'Cluster', 'c1', ns);
  assert.ok(c);
  return c as unknown as Record<string, unknown>;
};

/**
 * Samples the workload cluster while the Cluster moves: every sample in which one of `objects` is
 * missing or has another uid than `uids` says so.
 */
function watchObjects(objects: Obj[], uids: ReadonlyMap<string, string>) {
  const byId = new Map(objects.map((o) => [idOf(o), o]));
  return watchPresence([...byId.keys()], (id) => live(byId.get(id) as Obj), uids);
}

const moveTo = (version: string): Promise<void> => moveClusterTo(client, ns, 'c1', tag(version));

let controller: ControllerProcess | undefined;
const step = controllerSteps(() => controller);
/** Objects and uids the previous step left in the workload cluster. */
let before1: { objects: Obj[]; uids: Map<string, string> } = { objects: [], uids: new Map() };

describe('csctl addons applied into the workload cluster as CSO renders them; the old layout → the new one keeps them', {
  timeout: 20 * 60_000,
}, () => {
  before(async () => {
    await createTestNamespace(client, ns);
    const repoUrl = await createRepo(env as Endpoints, `${ns}-release`);
    const fleetUrl = await createRepo(env as Endpoints, `${ns}-fleet`);
    initRepo(repoDir);
    stackCopy('v1', 'docker-csoferrol-1-30', servedClusterClass);
    stackCopy('v2', 'docker-csoferrol-1-30-umbrella', servedClusterClass, withLegacyObject);
    stackCopy('v3', 'docker-csoferrol-1-30', servedClusterClass);
    stackCopy('v4', 'docker-csoferrol-1-30', servedClusterClass, withFailingPostCondition);
    push(repoDir, repoUrl, tag('v1'), tag('v2'), tag('v3'), tag('v4'));
    controller = await ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: ns,
      cacheDir: join(work, 'cache'),
      extraArgs: [`--fleet-url=${fleetUrl}`, '--fleet-batch-window=1s'],
    });
    await client.create(
      // timeout: that of the Kustomizations, how long step 4's health check runs before Flux gives up.
      csoferrolClusterStack(ns, repoUrl, ['v1', 'v2', 'v3', 'v4'], { timeout: '1m' }),
    );
  });

  after(async () => {
    await controller?.stop();
    await releaseAddonNamespace(client, ns);
    // The addons' objects are orphaned with their Kustomizations: removed from the workload cluster here.
    for (const o of [...before1.objects, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: LEGACY } }])
      await workload.delete(o.apiVersion, o.kind, o.metadata.name, ADDON_NS).catch(() => undefined);
    client.close();
    workload.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('1. v1 (stages): every addon Ready in the workload cluster with the objects and per-Cluster values CSO renders', () =>
    step(async () => {
      await createAddonCluster(client, env.workloadKubeconfig, ns, 'c1', {
        podCidr: '10.247.0.0/16',
        className: tag('v1'),
        version: 'v1.30.4',
      });
      const ca = await waitFor('c1 Ready at v1', () => readyAt('v1'));
      assert.deepEqual(
        ca.status?.addons?.map((a) => [a.name, a.ready, a.stage, a.kustomization]),
        [
          ['cni', true, 'BeforeClusterUpgrade', 'c1.cni'],
          ['metrics', true, 'BeforeClusterUpgrade', 'c1.metrics'],
        ],
      );
      const expected = csoObjects('v1', await liveCluster());
      assert.deepEqual(expected.map(idOf).sort(), [
        'ConfigMap cni-config',
        'ConfigMap metrics-config',
        'ServiceAccount cni',
      ]);
      const cni = expected.find((o) => idOf(o) === 'ConfigMap cni-config');
      assert.deepEqual(
        cni?.data,
        { clusterName: 'c1', podCIDR: '10.247.0.0/16', mtu: '1400' },
        'per-Cluster values',
      );
      const uids = await assertAsCso(expected);
      before1 = { objects: expected, uids };

      // Stages: metrics after cni; cni's waitForPostCondition held by Flux as a health check.
      const ks = new Map((await ownKustomizations()).map((k) => [k.metadata.name, k]));
      assert.deepEqual([...ks.keys()].sort(), ['c1.cni', 'c1.metrics']);
      assert.deepEqual(ks.get('c1.metrics')?.spec.dependsOn, [{ name: 'c1.cni' }]);
      assert.deepEqual(ks.get('c1.cni')?.spec.dependsOn, undefined);
      assert.deepEqual(ks.get('c1.cni')?.spec.healthCheckExprs, [
        {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          current:
            '(metadata.name == "cni-config" && metadata.namespace == "kube-system" ? (data.clusterName != "") : true)',
        },
      ]);
      assert.equal(cond(ks.get('c1.cni'), 'Ready')?.status, 'True', 'Flux evaluated it and it holds');
      assert.equal(ks.get('c1.metrics')?.spec.healthCheckExprs, undefined);
      assert.equal(
        cond(ca, 'PostConditionsChecked')?.status,
        'True',
        cond(ca, 'PostConditionsChecked')?.message,
      );
    }));

  it('2. v1 → v2 (old layout, one umbrella chart): the objects stay with their uids, the umbrella adds its own', () =>
    step(async () => {
      const watcher = watchObjects(before1.objects, before1.uids);
      await moveTo('v2');
      await waitFor('c1 Ready at v2 and the stages Kustomizations gone', async () => {
        const c = await readyAt('v2');
        const names = (await ownKustomizations()).map((k) => k.metadata.name);
        return c !== undefined && names.length === 1 ? c : undefined;
      });
      const { violations, samples } = await watcher.stop();
      assert.deepEqual(violations, [], `over ${samples} samples`);
      assert.ok(samples > 0);
      assert.deepEqual(
        (await ownKustomizations()).map((k) => k.metadata.name),
        ['c1.cluster-addon'],
      );
      const ca = await caddon();
      assert.deepEqual(
        ca?.status?.addons?.map((a) => [a.name, a.ready, a.stage ?? null]),
        [['cluster-addon', true, null]],
      );
      assert.equal(cond(ca, 'PostConditionsChecked'), undefined, 'the old layout has no post-conditions');
      const expected = csoObjects('v2', await liveCluster());
      assert.deepEqual(expected.map(idOf).sort(), [
        'ConfigMap cni-config',
        `ConfigMap ${LEGACY}`,
        'ConfigMap metrics-config',
        'ServiceAccount cni',
      ]);
      const uids = await assertAsCso(expected);
      for (const [id, uid] of before1.uids) assert.equal(uids.get(id), uid, `${id} kept its uid`);
      before1 = { objects: expected, uids };
    }));

  it('3. v2 → v3 (new layout, stages): the objects both apply stay with their uids, the dropped ConfigMap is pruned', () =>
    step(async () => {
      const kept = before1.objects.filter((o) => o.metadata.name !== LEGACY);
      const watcher = watchObjects(kept, before1.uids);
      await moveTo('v3');
      await waitFor(
        'c1 Ready at v3, the umbrella Kustomization gone, the dropped ConfigMap pruned',
        async () => {
          const c = await readyAt('v3');
          const names = (await ownKustomizations()).map((k) => k.metadata.name);
          const legacy = await workload.get('v1', 'ConfigMap', LEGACY, ADDON_NS);
          return c !== undefined && names.length === 2 && legacy === undefined ? c : undefined;
        },
      );
      const { violations, samples } = await watcher.stop();
      assert.deepEqual(violations, [], `over ${samples} samples`);
      assert.deepEqual((await ownKustomizations()).map((k) => k.metadata.name).sort(), [
        'c1.cni',
        'c1.metrics',
      ]);
      const expected = csoObjects('v3', await liveCluster());
      const uids = await assertAsCso(expected);
      for (const o of kept)
        assert.equal(uids.get(idOf(o)), before1.uids.get(idOf(o)), `${idOf(o)} kept its uid`);
      assert.equal(cond(await caddon(), 'PostConditionsChecked')?.status, 'True');
      before1 = { objects: expected, uids };
    }));

  it('4. v4: a waitForPostCondition that does not hold keeps cni not Ready in Flux, and metrics waits for it', () =>
    step(async () => {
      await moveTo('v4');
      const [cni, metrics] = await waitFor(
        'v4 applied to cni-config, cni held by its health check, metrics waiting',
        async () => {
          const config = await workload.get<Obj & KubeObject>('v1', 'ConfigMap', 'cni-config', ADDON_NS);
          const ks = new Map((await ownKustomizations()).map((k) => [k.metadata.name, k]));
          const c = ks.get('c1.cni');
          const m = ks.get('c1.metrics');
          const applied = (config?.data as Record<string, string> | undefined)?.mtu === '1300';
          return applied && cond(m, 'Ready')?.reason === 'DependencyNotReady' ? [c, m] : undefined;
        },
      );
      assert.notEqual(cond(cni, 'Ready')?.status, 'True', 'the condition does not hold: cni is not Ready');
      assert.match(
        cni?.spec.healthCheckExprs?.[0]?.current ?? '',
        /data\.clusterName == "nobody"/,
        "v4's condition is the health check",
      );
      assert.match(cond(metrics, 'Ready')?.message ?? '', /c1\.cni/);
      const ca = await caddon();
      assert.equal(ca?.status?.release, tag('v4'));
      assert.notEqual(cond(ca, 'Ready')?.status, 'True', 'the ClusterAddon is not Ready while cni is not');
      assert.equal(ca?.status?.addons?.find((a) => a.name === 'cni')?.ready, false);
    }));
});
