// Issue 23, csctl waitForPreCondition on real Flux: stacks/docker-csoferrol-1-30 copied into the
// test's release repository with a pre-condition on its metrics addon (a ConfigMap of the workload
// cluster that nobody applies must say ready: "yes") and the addons' objects renamed after the
// test namespace (the workload cluster and its kube-system are shared by the suites). The
// ClusterAddon's gate Kustomization c1.metrics.pre holds metrics back — its objects absent from the
// workload cluster — while the object is missing (kustomize-controller reports NotFound) and while
// the condition is false (InProgress); once the test writes ready: "yes" Flux applies metrics and
// the ClusterAddon is Ready. Nothing here needs Cluster API's status (csctl addons apply once a
// Cluster uses the release), so the test writes none.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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
  cutCsctlRelease,
  servedClusterClass,
  csoferrolTag as tag,
} from '../support/csctl.ts';
import {
  ControllerProcess,
  cond,
  controllerSteps,
  createAddonCluster,
  createTestNamespace,
  deleteTestNamespace,
  e2eEnv,
  initRepo,
  push,
  releaseAddonNamespace,
  required,
  waitFor,
} from '../support/e2e.ts';
import { uniqueName } from '../support/env.ts';

const env = { ...e2eEnv(), workloadKubeconfig: required('WORKLOAD_KUBECONFIG') };
const client = new KubeClient(loadKubeConfig({ kubeconfig: env.kubeconfig }));
const workload = new KubeClient(loadKubeConfig({ kubeconfig: env.workloadKubeconfig }));
const ns = uniqueName('csctlpre');
const work = mkdtempSync(join(tmpdir(), 'stackflux-csctlpre-'));
const repoDir = join(work, 'release');
const KUSTOMIZE = 'kustomize.toolkit.fluxcd.io/v1';
const ADDON_NS = 'kube-system';
/** The workload cluster's objects of this test: both addons' and the one the pre-condition reads. */
const NAMES = { cni: `${ns}-cni`, metrics: `${ns}-metrics`, gate: `${ns}-gate` };

type CA = ClusterAddon & KubeObject;
type K = Kustomization & KubeObject;
type ConfigMap = KubeObject & { data?: Record<string, string> };

/** One addon's umbrella chart with its own ConfigMap (named for this test) instead of the vendored subchart. */
function ownChart(dir: string, addon: 'cni' | 'metrics', data: string): void {
  const chart = join(dir, 'cluster-addon', addon);
  rmSync(join(chart, 'charts'), { recursive: true, force: true });
  const meta = readFileSync(join(chart, 'Chart.yaml'), 'utf8');
  assert.ok(meta.includes('dependencies:'));
  writeFileSync(join(chart, 'Chart.yaml'), meta.slice(0, meta.indexOf('dependencies:')));
  mkdirSync(join(chart, 'templates'), { recursive: true });
  writeFileSync(
    join(chart, 'templates', 'configmap.yaml'),
    `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${NAMES[addon]}\n  namespace: {{ .Release.Namespace }}\ndata:\n${data}`,
  );
}

/**
 * The example stack with metrics waiting for the gate ConfigMap (waitForPreCondition) and cni's
 * post-condition on cni's own ConfigMap of this test; the per-Cluster values (overwrite.yaml) stay.
 */
function withPreCondition(dir: string): void {
  ownChart(dir, 'cni', '  clusterName: {{ index .Values "cni-config" "clusterName" | quote }}\n');
  ownChart(
    dir,
    'metrics',
    '  cluster: {{ index .Values "metrics-config" "commonLabels" "cluster" | quote }}\n',
  );
  const stages = join(dir, 'clusteraddon.yaml');
  const text = readFileSync(stages, 'utf8');
  const metrics = '    - name: metrics\n      action: apply\n';
  assert.ok(text.includes(metrics) && text.includes('name: cni-config'));
  const pre = [
    '      waitForPreCondition:',
    '        objects:',
    '          - key: gate',
    '            apiVersion: v1',
    '            kind: ConfigMap',
    `            name: ${NAMES.gate}`,
    `            namespace: ${ADDON_NS}`,
    '        conditions: gate.data.ready == "yes"',
    '',
  ].join('\n');
  writeFileSync(
    stages,
    text
      .replace(metrics, `${metrics}${pre}`)
      .replace('name: cni-config', `name: ${NAMES.cni}`)
      .replace('cniconfig.data.clusterName != ""', 'cniconfig.data.clusterName == "c1"'),
  );
}

const caddon = (): Promise<CA | undefined> => client.get<CA>(API_VERSION, 'ClusterAddon', 'c1', ns);
const kustomization = (name: string): Promise<K | undefined> =>
  client.get<K>(KUSTOMIZE, 'Kustomization', name, ns);
const workloadConfigMap = (name: string): Promise<ConfigMap | undefined> =>
  workload.get<ConfigMap>('v1', 'ConfigMap', name, ADDON_NS);
/** `flux reconcile kustomization`: the gate checks again now instead of after its retry interval. */
const reconcileNow = (name: string): Promise<unknown> =>
  client.mergePatch(KUSTOMIZE, 'Kustomization', name, ns, {
    metadata: { annotations: { 'reconcile.fluxcd.io/requestedAt': new Date().toISOString() } },
  });

/**
 * The gate's last health check names the gate ConfigMap with kstatus `status` (not Ready), and the
 * ClusterAddon's status of metrics passes that on.
 */
async function gateReports(status: string): Promise<K | undefined> {
  const gate = await kustomization('c1.metrics.pre');
  const healthy = cond(gate, 'Healthy');
  const says = `ConfigMap/${ADDON_NS}/${NAMES.gate} status: '${status}'`;
  const metrics = (await caddon())?.status?.addons?.find((a) => a.name === 'metrics');
  return healthy?.status === 'False' &&
    healthy.message?.includes(says) === true &&
    metrics?.reason === 'WaitingForPreCondition' &&
    metrics.message?.includes(says) === true
    ? gate
    : undefined;
}

/** metrics is held back: its Kustomization waits on the gate, its ConfigMap is not in the workload cluster. */
async function assertMetricsHeldBack(): Promise<void> {
  const metrics = await kustomization('c1.metrics');
  assert.equal(cond(metrics, 'Ready')?.reason, 'DependencyNotReady', cond(metrics, 'Ready')?.message);
  assert.match(cond(metrics, 'Ready')?.message ?? '', /c1\.metrics\.pre/);
  assert.equal(metrics?.status?.lastAppliedRevision, undefined, 'Flux never applied metrics');
  assert.equal(await workloadConfigMap(NAMES.metrics), undefined, 'metrics is not in the workload cluster');
  const ca = await caddon();
  assert.notEqual(cond(ca, 'Ready')?.status, 'True', 'the ClusterAddon is not Ready while metrics waits');
  assert.equal(ca?.status?.addons?.find((a) => a.name === 'metrics')?.ready, false);
}

let controller: ControllerProcess | undefined;
const step = controllerSteps(() => controller);

describe('csctl waitForPreCondition: a Flux gate holds the addon back until the object of the workload cluster says so', {
  timeout: 15 * 60_000,
}, () => {
  before(async () => {
    await createTestNamespace(client, ns);
    const repoUrl = await createRepo(env as Endpoints, `${ns}-release`);
    const fleetUrl = await createRepo(env as Endpoints, `${ns}-fleet`);
    initRepo(repoDir);
    cutCsctlRelease(repoDir, 'docker-csoferrol-1-30', 'v1', (dir) => {
      servedClusterClass(dir);
      withPreCondition(dir);
    });
    push(repoDir, repoUrl, tag('v1'));
    controller = await ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: ns,
      cacheDir: join(work, 'cache'),
      extraArgs: [`--fleet-url=${fleetUrl}`, '--fleet-batch-window=1s'],
    });
    // timeout: how long one health check of the gate runs before Flux reports it failed and retries.
    await client.create(csoferrolClusterStack(ns, repoUrl, ['v1'], { timeout: '30s' }));
  });

  after(async () => {
    await controller?.stop();
    await releaseAddonNamespace(client, ns);
    // The addons' objects are orphaned with their Kustomizations (the kubeconfig Secret goes with the
    // namespace): removed from the workload cluster here, once no Kustomization can apply them again.
    await deleteTestNamespace(client, ns);
    for (const name of Object.values(NAMES))
      await workload.delete('v1', 'ConfigMap', name, ADDON_NS).catch(() => undefined);
    client.close();
    workload.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('1. the object is missing: cni applied, the gate reports NotFound, metrics absent from the workload cluster', () =>
    step(async () => {
      await createAddonCluster(client, env.workloadKubeconfig, ns, 'c1', {
        podCidr: '10.246.0.0/16',
        className: tag('v1'),
        version: 'v1.30.4',
      });
      const gate = await waitFor('the gate reports the missing ConfigMap', () => gateReports('NotFound'));
      assert.equal(gate.spec.wait, false);
      assert.deepEqual(gate.spec.healthChecks, [
        { apiVersion: 'v1', kind: 'ConfigMap', name: NAMES.gate, namespace: ADDON_NS },
      ]);
      assert.deepEqual(gate.spec.healthCheckExprs, [
        {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          current: `(metadata.name == "${NAMES.gate}" && metadata.namespace == "${ADDON_NS}" ? (data.ready == "yes") : true)`,
        },
      ]);
      const inventory = (gate.status as { inventory?: { entries?: unknown[] } } | undefined)?.inventory;
      assert.deepEqual(inventory?.entries ?? [], [], 'the gate applies nothing');
      const cni = await waitFor('cni Ready', async () => {
        const k = await kustomization('c1.cni');
        return cond(k, 'Ready')?.status === 'True' ? k : undefined;
      });
      assert.deepEqual(cni.spec.dependsOn, undefined, 'cni has no pre-condition');
      assert.equal((await workloadConfigMap(NAMES.cni))?.data?.clusterName, 'c1');
      assert.deepEqual((await kustomization('c1.metrics'))?.spec.dependsOn, [
        { name: 'c1.metrics.pre' },
        { name: 'c1.cni' },
      ]);
      await assertMetricsHeldBack();
      const ca = await caddon();
      assert.equal(
        cond(ca, 'PreConditionsChecked')?.status,
        'True',
        cond(ca, 'PreConditionsChecked')?.message,
      );
      assert.equal(
        cond(ca, 'PostConditionsChecked')?.status,
        'True',
        cond(ca, 'PostConditionsChecked')?.message,
      );
    }));

  it('2. the object exists but the condition is false: the gate reports InProgress, metrics still absent', () =>
    step(async () => {
      await workload.create({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: NAMES.gate, namespace: ADDON_NS },
        data: { ready: 'no' },
      });
      await reconcileNow('c1.metrics.pre');
      await waitFor('the gate evaluates the condition over the ConfigMap', () => gateReports('InProgress'));
      await assertMetricsHeldBack();
    }));

  it('3. the condition holds: the gate is Ready, Flux applies metrics with its per-Cluster values, the ClusterAddon is Ready', () =>
    step(async () => {
      await workload.mergePatch('v1', 'ConfigMap', NAMES.gate, ADDON_NS, { data: { ready: 'yes' } });
      await reconcileNow('c1.metrics.pre');
      const ca = await waitFor('c1 Ready', async () => {
        const c = await caddon();
        return cond(c, 'Ready')?.status === 'True' ? c : undefined;
      });
      assert.deepEqual(
        ca.status?.addons?.map((a) => [a.name, a.ready]),
        [
          ['cni', true],
          ['metrics', true],
        ],
      );
      assert.equal(cond(await kustomization('c1.metrics.pre'), 'Ready')?.status, 'True');
      assert.equal((await workloadConfigMap(NAMES.metrics))?.data?.cluster, 'c1');
    }));
});
