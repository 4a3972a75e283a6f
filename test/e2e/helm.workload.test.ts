// Issue 13 end to end: Helm-chart addons delivered by Flux's helm-controller. A release repo is cut
// from stacks/docker-ferrol-1-31 with its in-tree chart `inventory` and, before it, a manifest addon
// `gate` that can be held not-Ready through a per-cluster value (a Deployment never becomes ready:
// the workload cluster has no kubelet). Both go into a namespace of the workload cluster that only
// this file uses. Clusters c1 and c2 (v1beta2, kubeconfig Secrets pointing at the workload
// cluster) get a HelmRelease each (on their fleet branch, applied by their `inventory`
// Kustomization); helm-controller installs `<cluster>-inventory` into the workload cluster. The
// Helm release Secrets `sh.helm.release.v1.<release>.v<revision>` there are read and decoded
// (base64 → gzip → JSON) to check the values each revision ran with. The steps share state and run
// in order.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { parse as parseYaml } from 'yaml';
import type { ClusterAddon } from '../../controller/api/clusteraddon.ts';
import type { HelmRelease, Kustomization } from '../../controller/api/flux.ts';
import { API_VERSION } from '../../controller/api/meta.ts';
import { KubeClient, type KubeObject, loadKubeConfig } from '../../controller/runtime/client.ts';
import { createRepo, type Endpoints, workloadKubeconfigSecret } from '../../hack/lib/testenv.ts';
import {
  addonCluster,
  CAPI,
  ControllerProcess,
  cond,
  createTestNamespace,
  cutRelease,
  e2eEnv,
  ferrolClusterStack,
  git,
  initRepo,
  push,
  releaseAddonNamespace,
  releaseReaders,
  required,
  stackflux,
  waitFor,
} from '../support/e2e.ts';
import { uniqueName } from '../support/env.ts';

const env = { ...e2eEnv(), workloadKubeconfig: required('WORKLOAD_KUBECONFIG') };
const client = new KubeClient(loadKubeConfig({ kubeconfig: env.kubeconfig }));
const workload = new KubeClient(loadKubeConfig({ kubeconfig: env.workloadKubeconfig }));
const workloadKubeconfigText = readFileSync(env.workloadKubeconfig, 'utf8');
const ns = uniqueName('helm');
const work = mkdtempSync(join(tmpdir(), 'stackflux-helm-'));
const repoDir = join(work, 'release');
const HELM = 'helm.toolkit.fluxcd.io/v2';
const KUSTOMIZE = 'kustomize.toolkit.fluxcd.io/v1';
const tag = (v: string) => `docker-ferrol-1-31-${v}`;

type CA = ClusterAddon & KubeObject;
interface ConfigMap extends KubeObject {
  data?: Record<string, string>;
}
interface Secret extends KubeObject {
  data?: Record<string, string>;
}

/**
 * Release `version` of docker-ferrol-1-31 reduced to `gate` and (unless dropped) `inventory` at
 * chart version `chart`, both into this file's own namespace of the workload cluster.
 */
function cutHelmRelease(version: string, o: { chart?: string; drop?: boolean } = {}): void {
  cutRelease(repoDir, 'stack', {
    example: 'docker-ferrol-1-31',
    k8s: '1-31',
    version,
    edit: (dir) => {
      for (const addon of ['cni', 'cloud-config', 'csi', 'metrics-server']) {
        rmSync(join(dir, 'cluster-addon', addon), { recursive: true });
      }
      if (o.drop === true) rmSync(join(dir, 'cluster-addon', 'inventory'), { recursive: true });
      mkdirSync(join(dir, 'cluster-addon', 'gate'));
      writeFileSync(
        join(dir, 'cluster-addon', 'gate', 'values.yaml'),
        '# block: true adds a Deployment that never becomes ready (no kubelet)\nblock: false\n',
        { flag: 'wx' },
      );
      writeFileSync(
        join(dir, 'cluster-addon', 'gate', 'gate.yaml.hbs'),
        [
          'apiVersion: v1',
          'kind: ConfigMap',
          'metadata:',
          '  name: {{Cluster.metadata.name}}-gate',
          'data:',
          '  cluster: {{quote Cluster.metadata.name}}',
          '{{#if Values.block}}',
          '---',
          'apiVersion: apps/v1',
          'kind: Deployment',
          'metadata:',
          '  name: {{Cluster.metadata.name}}-gate',
          'spec:',
          '  selector: {matchLabels: {app: gate}}',
          '  template:',
          '    metadata: {labels: {app: gate}}',
          '    spec: {containers: [{name: gate, image: registry.invalid/gate:1}]}',
          '{{/if}}',
          '',
        ].join('\n'),
      );
      const chartFile = join(dir, 'cluster-addon', 'inventory', 'Chart.yaml');
      if (o.chart !== undefined && o.drop !== true) {
        writeFileSync(
          chartFile,
          readFileSync(chartFile, 'utf8').replace(/^version: .*$/m, `version: ${o.chart}`),
        );
      }
      const stack = readFileSync(join(dir, 'stack.yaml'), 'utf8').replace(/^addons:[\s\S]*$/m, '');
      const addons = [`  - name: gate\n    targetNamespace: ${ns}\n`];
      if (o.drop !== true)
        addons.push(`  - name: inventory\n    targetNamespace: ${ns}\n    dependsOn: [gate]\n`);
      writeFileSync(join(dir, 'stack.yaml'), `${stack}addons:\n${addons.join('')}`);
    },
  });
}

// --- the controller subprocess ---------------------------------------------------------------
let controller: ControllerProcess | undefined;
async function step(fn: () => Promise<void>): Promise<void> {
  if (controller === undefined) throw new Error('the controller did not start');
  await controller.step(fn);
}

// --- reading state ---------------------------------------------------------------------------
async function caddon(name: string): Promise<CA | undefined> {
  return client.get<CA>(API_VERSION, 'ClusterAddon', name, ns);
}
/** The ClusterAddon once Ready on `release` with its inventory addon at Helm revision `revision`. */
async function readyAt(name: string, release: string, revision?: number): Promise<CA | undefined> {
  const c = await caddon(name);
  if (cond(c, 'Ready')?.status !== 'True' || c?.status?.release !== release) return undefined;
  if (revision === undefined) return c;
  return c.status?.addons?.find((a) => a.name === 'inventory')?.helmRevision === revision ? c : undefined;
}
async function helmRelease(name: string): Promise<(HelmRelease & KubeObject) | undefined> {
  return client.get<HelmRelease & KubeObject>(HELM, 'HelmRelease', name, ns);
}
/** Revisions of a Helm release in the workload cluster (from its release Secrets), ascending. */
async function revisions(release: string): Promise<number[]> {
  const list = await workload.list<Secret>('v1', 'Secret', {
    namespace: ns,
    labelSelector: `owner=helm,name=${release}`,
  });
  return list.items.map((s) => Number(s.metadata.labels?.version)).sort((a, b) => a - b);
}
/** What Helm recorded for one revision: the release Secret decoded (base64 → gzip → JSON). */
async function recorded(
  release: string,
  revision: number,
): Promise<{
  config?: Record<string, unknown>;
  chart?: { metadata?: { version?: string } };
  info?: { status?: string };
}> {
  const secret = await workload.get<Secret>('v1', 'Secret', `sh.helm.release.v1.${release}.v${revision}`, ns);
  const payload = secret?.data?.release;
  assert.ok(payload, `no Helm release Secret for ${release} revision ${revision}`);
  const helmText = Buffer.from(payload, 'base64').toString('utf8');
  return JSON.parse(gunzipSync(Buffer.from(helmText, 'base64')).toString('utf8'));
}
async function inventoryConfigMap(release: string): Promise<ConfigMap | undefined> {
  return workload.get<ConfigMap>('v1', 'ConfigMap', release, ns);
}

async function createCluster(name: string, podCidr: string, values: Record<string, unknown>): Promise<void> {
  await client.create(workloadKubeconfigSecret(ns, name, workloadKubeconfigText) as KubeObject);
  await client.create(addonCluster(ns, name, { podCidr, className: tag('v1'), version: 'v1.31.2', values }));
}
/** Merges `topology` into the Cluster's spec.topology (its values variable, its class). */
async function patchTopology(name: string, topology: Record<string, unknown>): Promise<void> {
  const c = await client.get<KubeObject & { spec: { topology: Record<string, unknown> } }>(
    CAPI,
    'Cluster',
    name,
    ns,
  );
  assert.ok(c);
  await client.mergePatch(CAPI, 'Cluster', name, ns, {
    spec: { topology: { ...c.spec.topology, ...topology } },
  });
}
const setValues = (name: string, values: Record<string, unknown>) =>
  patchTopology(name, { variables: [{ name: 'stackfluxAddonValues', value: values }] });
const moveTo = (name: string, version: string) => patchTopology(name, { classRef: { name: tag(version) } });

let fleetUrl = '';

// --- the steps -------------------------------------------------------------------------------
describe('Helm-chart addons: Cluster → HelmRelease on its fleet branch → helm-controller → workload cluster', {
  timeout: 25 * 60_000,
}, () => {
  before(async () => {
    await createTestNamespace(client, ns);
    await workload.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
    const repoUrl = await createRepo(env as Endpoints, `${ns}-release`);
    fleetUrl = await createRepo(env as Endpoints, `${ns}-fleet`);
    initRepo(repoDir);
    cutHelmRelease('v1');
    cutHelmRelease('v2', { chart: '0.2.0' });
    cutHelmRelease('v3', { drop: true });
    push(repoDir, repoUrl, tag('v1'), tag('v2'), tag('v3'));
    controller = await ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: ns,
      cacheDir: join(work, 'cache'),
      concurrency: 4,
      extraArgs: [`--fleet-url=${fleetUrl}`, '--fleet-batch-window=1s'],
    });
    await client.create(
      ferrolClusterStack(ns, 'ferrol', {
        kubernetesVersion: '1.31',
        autoSubscribe: false,
        versions: ['v1', 'v2', 'v3'],
        interval: '1m',
        // Also the addon Kustomizations' (and HelmReleases') timeout: a blocked gate fails its
        // health check after 30 s and then picks up the next revision.
        timeout: '30s',
        source: { git: { url: repoUrl }, path: 'stack' },
      }),
    );
    const { releaseReady } = releaseReaders(client, ns);
    for (const v of ['v1', 'v2', 'v3']) await waitFor(`release ${tag(v)} Ready`, () => releaseReady(tag(v)));
  });

  after(async () => {
    await controller?.stop();
    await releaseAddonNamespace(client, ns);
    await workload.delete('v1', 'Namespace', ns).catch(() => undefined);
    client.close();
    workload.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('1. the Helm addon waits for the Kustomization addon it depends on: no HelmRelease while gate is not Ready', () =>
    step(async () => {
      await createCluster('c1', '10.244.0.0/16', { gate: { block: true }, inventory: { owner: 'team-a' } });
      const blocked = await waitFor('c1.inventory.helm waits for c1.gate', async () => {
        const k = await client.get<Kustomization & KubeObject>(
          KUSTOMIZE,
          'Kustomization',
          'c1.inventory.helm',
          ns,
        );
        const ready = cond(k, 'Ready');
        return ready?.status === 'False' && ready.reason === 'DependencyNotReady' ? k : undefined;
      });
      assert.deepEqual(blocked.spec.dependsOn, [{ name: 'c1.gate' }]);
      assert.equal(
        blocked.spec.kubeConfig,
        undefined,
        'the HelmRelease is applied to the management cluster',
      );
      const gate = await client.get<Kustomization & KubeObject>(KUSTOMIZE, 'Kustomization', 'c1.gate', ns);
      assert.notEqual(
        cond(gate, 'Ready')?.status,
        'True',
        'gate holds a Deployment that never becomes ready',
      );
      assert.equal(
        await helmRelease('c1.inventory'),
        undefined,
        'no HelmRelease before its dependency is Ready',
      );
      assert.deepEqual(
        await revisions('c1-inventory'),
        [],
        'nothing installed before its dependency is Ready',
      );
    }));

  it("2. installed into the workload cluster with each Cluster's values; the release Secret records them", () =>
    step(async () => {
      await setValues('c1', { inventory: { owner: 'team-a' } });
      await createCluster('c2', '10.245.0.0/16', {});
      const c1 = await waitFor('c1 Ready with inventory at revision 1', () => readyAt('c1', tag('v1'), 1));
      await waitFor('c2 Ready with inventory at revision 1', () => readyAt('c2', tag('v1'), 1));

      assert.deepEqual((await recorded('c1-inventory', 1)).config, {
        clusterName: 'c1',
        podCIDR: '10.244.0.0/16',
        owner: 'team-a',
        tier: 'standard',
      });
      assert.deepEqual((await recorded('c2-inventory', 1)).config, {
        clusterName: 'c2',
        podCIDR: '10.245.0.0/16',
        owner: 'platform',
        tier: 'standard',
      });
      const cm = await inventoryConfigMap('c1-inventory');
      assert.equal(cm?.data?.owner, 'team-a');
      assert.equal(cm?.data?.chartVersion, '0.1.0');

      const inv = c1.status?.addons?.find((a) => a.name === 'inventory');
      assert.equal(inv?.ready, true);
      assert.equal(inv?.helmRelease, 'c1.inventory');
      assert.equal(inv?.chartVersion, '0.1.0');
      assert.match(inv?.valuesDigest ?? '', /^sha256:[0-9a-f]{64}$/);

      const hr = await helmRelease('c1.inventory');
      assert.deepEqual(hr?.spec.kubeConfig, { secretRef: { name: 'c1-kubeconfig', key: 'value' } });
      assert.equal(hr?.spec.targetNamespace, ns);

      // The fleet branch records the values the Cluster runs (the audit trail).
      const dir = mkdtempSync(join(work, 'fleet-'));
      git(dir, 'clone', '-q', '--branch', `stackflux/${ns}/c1`, fleetUrl, '.');
      const onBranch = parseYaml(readFileSync(join(dir, 'inventory.helm', 'helmrelease.yaml'), 'utf8'));
      assert.deepEqual(onBranch.spec.values, (await recorded('c1-inventory', 1)).config);

      // `stackflux status` shows the Helm addon's chart version, values digest and Helm revision.
      const status = stackflux(['status', '-n', ns], { KUBECONFIG: env.kubeconfig });
      assert.equal(status.status, 0, status.stderr);
      const rows = status.stdout.split('\n').filter((l) => l.includes('addon/inventory'));
      const want = `chart 0.1.0 values ${inv?.valuesDigest?.slice(0, 19)} (Helm revision 1)`;
      assert.ok(
        rows.some((l) => l.includes(want)),
        `no addon/inventory row with "${want}":\n${status.stdout}`,
      );
    }));

  it("3. a per-cluster value change upgrades only that Cluster's release (revision 2)", () =>
    step(async () => {
      await setValues('c1', { inventory: { owner: 'team-a', tier: 'premium' } });
      const c1 = await waitFor('c1 at revision 2', () => readyAt('c1', tag('v1'), 2));
      assert.equal((await recorded('c1-inventory', 2)).config?.tier, 'premium');
      assert.equal((await inventoryConfigMap('c1-inventory'))?.data?.tier, 'premium');
      assert.deepEqual(await revisions('c1-inventory'), [1, 2]);
      assert.deepEqual(await revisions('c2-inventory'), [1], "c2's release is untouched");
      const before = c1.status?.addons?.find((a) => a.name === 'inventory')?.valuesDigest;
      assert.ok(before);
    }));

  it('4. values failing the schema keep the previous Helm release and report ValuesInvalid', () =>
    step(async () => {
      await setValues('c1', { inventory: { owner: 'team-a', tier: 'gold' } });
      const bad = await waitFor('c1 ValuesInvalid', async () => {
        const c = await caddon('c1');
        return cond(c, 'Ready')?.reason === 'ValuesInvalid' ? c : undefined;
      });
      assert.equal(cond(bad, 'Ready')?.status, 'False');
      assert.match(cond(bad, 'Ready')?.message ?? '', /addon inventory: .*tier/);
      assert.deepEqual(await revisions('c1-inventory'), [1, 2], 'no new Helm revision');
      assert.equal(
        (await inventoryConfigMap('c1-inventory'))?.data?.tier,
        'premium',
        'the previous release runs',
      );
      assert.equal((await recorded('c1-inventory', 2)).info?.status, 'deployed');
      // Back to valid values: the same as revision 2, so no upgrade.
      await setValues('c1', { inventory: { owner: 'team-a', tier: 'premium' } });
      await waitFor('c1 Ready again at revision 2', () => readyAt('c1', tag('v1'), 2));
    }));

  it('5. a release with a new chart version upgrades the release', () =>
    step(async () => {
      await moveTo('c1', 'v2');
      const c1 = await waitFor('c1 on v2 at revision 3', () => readyAt('c1', tag('v2'), 3));
      assert.equal(c1.status?.addons?.find((a) => a.name === 'inventory')?.chartVersion, '0.2.0');
      assert.equal((await recorded('c1-inventory', 3)).chart?.metadata?.version, '0.2.0');
      assert.equal((await inventoryConfigMap('c1-inventory'))?.data?.chartVersion, '0.2.0');
      assert.deepEqual(await revisions('c2-inventory'), [1], "c2's release is untouched");
    }));

  it('6. a release dropping the addon uninstalls it', () =>
    step(async () => {
      await moveTo('c1', 'v3');
      await waitFor('c1 on v3 Ready', () => readyAt('c1', tag('v3')));
      await waitFor('HelmRelease c1.inventory gone', async () =>
        (await helmRelease('c1.inventory')) === undefined ? true : undefined,
      );
      await waitFor('Helm release c1-inventory uninstalled', async () =>
        (await revisions('c1-inventory')).length === 0 ? true : undefined,
      );
      assert.equal(await inventoryConfigMap('c1-inventory'), undefined, "the chart's objects are gone");
      assert.deepEqual(await revisions('c2-inventory'), [1], "c2's release is untouched");
      assert.ok(await inventoryConfigMap('c2-inventory'));
    }));

  it('7. deleting a Cluster removes its HelmRelease without uninstalling from the workload cluster (as Orphan does for manifests)', () =>
    step(async () => {
      await client.delete(CAPI, 'Cluster', 'c2', ns);
      await waitFor('ClusterAddon c2 gone', async () =>
        (await caddon('c2')) === undefined ? true : undefined,
      );
      await waitFor('HelmRelease c2.inventory gone', async () =>
        (await helmRelease('c2.inventory')) === undefined ? true : undefined,
      );
      assert.deepEqual(
        await revisions('c2-inventory'),
        [1],
        'the Helm release stays in the workload cluster',
      );
      assert.equal((await inventoryConfigMap('c2-inventory'))?.data?.clusterName, 'c2');
    }));
});
