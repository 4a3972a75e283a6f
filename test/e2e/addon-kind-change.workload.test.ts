// Issue 22 row 2 end to end: an addon that changes kind between releases. In v1 the addon
// `inventory` is plain manifests (a marker ConfigMap, applied INTO the workload cluster); in v2 it
// is a Helm chart (its HelmRelease is applied to the MANAGEMENT cluster). With a long fleet batch
// window the branch change waits while the Cluster moves, and a watcher samples the Kustomizations
// the whole time: no Kustomization may ever point at the management cluster while reading the
// folder that holds the manifests, no object keeps its uid across a change of target, and the
// marker never appears in the management cluster. Then back from Helm to manifests, the same.
// Both clusters are the test environment's (kubeconfig Secret → the workload cluster).
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ClusterAddon } from '../../controller/api/clusteraddon.ts';
import type { Kustomization } from '../../controller/api/flux.ts';
import { API_VERSION } from '../../controller/api/meta.ts';
import { KubeClient, type KubeObject, loadKubeConfig } from '../../controller/runtime/client.ts';
import { createRepo, type Endpoints, workloadKubeconfigSecret } from '../../hack/lib/testenv.ts';
import {
  addonCluster,
  ControllerProcess,
  cond,
  controllerSteps,
  createTestNamespace,
  cutRelease,
  e2eEnv,
  ferrolClusterStack,
  git,
  initRepo,
  moveClusterTo,
  push,
  releaseAddonNamespace,
  releaseReaders,
  required,
  sleep,
  waitFor,
} from '../support/e2e.ts';
import { uniqueName } from '../support/env.ts';

const env = { ...e2eEnv(), workloadKubeconfig: required('WORKLOAD_KUBECONFIG') };
const client = new KubeClient(loadKubeConfig({ kubeconfig: env.kubeconfig }));
const workload = new KubeClient(loadKubeConfig({ kubeconfig: env.workloadKubeconfig }));
const ns = uniqueName('kindchange');
const work = mkdtempSync(join(tmpdir(), 'stackflux-kindchange-'));
const repoDir = join(work, 'release');
const KUSTOMIZE = 'kustomize.toolkit.fluxcd.io/v1';
const tag = (v: string) => `docker-ferrol-1-31-${v}`;
const MARKER = 'inventory-from-manifests';
const BRANCH = `stackflux/${ns}/c1`;

let controller: ControllerProcess | undefined;
let fleetUrl = '';
const step = controllerSteps(() => controller);

/** docker-ferrol-1-31 reduced to `inventory`: plain manifests (`helm` false) or its Helm chart. */
function cutInventoryRelease(version: string, helm: boolean): void {
  cutRelease(repoDir, 'stack', {
    example: 'docker-ferrol-1-31',
    k8s: '1-31',
    version,
    edit: (dir) => {
      for (const addon of ['cni', 'cloud-config', 'csi', 'metrics-server']) {
        rmSync(join(dir, 'cluster-addon', addon), { recursive: true });
      }
      if (!helm) {
        const inventory = join(dir, 'cluster-addon', 'inventory');
        rmSync(inventory, { recursive: true });
        mkdirSync(inventory);
        writeFileSync(
          join(inventory, 'marker.yaml'),
          `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${MARKER}\n  namespace: ${ns}\ndata:\n  from: manifests\n`,
        );
      }
      const stack = readFileSync(join(dir, 'stack.yaml'), 'utf8').replace(/^addons:[\s\S]*$/m, '');
      writeFileSync(
        join(dir, 'stack.yaml'),
        `${stack}addons:\n  - name: inventory\n    targetNamespace: ${ns}\n`,
      );
    },
  });
}

type CA = ClusterAddon & KubeObject;
type K = Kustomization & KubeObject;
const caddon = (): Promise<CA | undefined> => client.get<CA>(API_VERSION, 'ClusterAddon', 'c1', ns);
const readyAt = async (release: string): Promise<CA | undefined> => {
  const c = await caddon();
  return cond(c, 'Ready')?.status === 'True' && c?.status?.release === release ? c : undefined;
};
const marker = (c: KubeClient) => c.get('v1', 'ConfigMap', MARKER, ns);
const fleetTip = (): string =>
  git(work, 'ls-remote', fleetUrl, `refs/heads/${BRANCH}`).trim().split(/\s+/)[0] ?? '';
const target = (k: K): string => JSON.stringify(k.spec.kubeConfig ?? 'management');

/**
 * Samples the Cluster's Kustomizations and the management cluster until stopped. Records every
 * violation: a Kustomization applying to the management cluster from the manifests folder, one
 * whose target changed under the same uid, the marker in the management cluster; and how many
 * samples were taken while the branch still had its old tip (the pending window).
 */
function watchMove(oldTip: string) {
  const violations: string[] = [];
  const targets = new Map<string, string>();
  let pendingSamples = 0;
  let stop = false;
  const done = (async () => {
    while (!stop) {
      const ks = await client.list<K>(KUSTOMIZE, 'Kustomization', {
        namespace: ns,
        labelSelector: 'stackflux.io/cluster=c1',
      });
      for (const k of ks.items) {
        const uid = k.metadata.uid ?? '';
        const was = targets.get(uid);
        if (was !== undefined && was !== target(k))
          violations.push(`${k.metadata.name} re-pointed from ${was} to ${target(k)}`);
        targets.set(uid, target(k));
        if (k.spec.kubeConfig === undefined && k.spec.path === './inventory')
          violations.push(`${k.metadata.name} applies ./inventory (the manifests) to the management cluster`);
      }
      if ((await marker(client)) !== undefined)
        violations.push(`ConfigMap ${MARKER} in the management cluster`);
      if (fleetTip() === oldTip) pendingSamples++;
      await sleep(250);
    }
  })();
  return {
    /** Whether anything was seen already (then waiting for the end state is pointless). */
    violated: (): boolean => violations.length > 0,
    async stop(): Promise<{ violations: string[]; pendingSamples: number }> {
      stop = true;
      await done;
      return { violations: [...new Set(violations)], pendingSamples };
    },
  };
}

const moveTo = (version: string): Promise<void> => moveClusterTo(client, ns, 'c1', tag(version));

describe('an addon that changes kind between releases never applies old content to the management cluster', {
  timeout: 20 * 60_000,
}, () => {
  before(async () => {
    await createTestNamespace(client, ns);
    await workload.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
    const repoUrl = await createRepo(env as Endpoints, `${ns}-release`);
    fleetUrl = await createRepo(env as Endpoints, `${ns}-fleet`);
    initRepo(repoDir);
    cutInventoryRelease('v1', false);
    cutInventoryRelease('v2', true);
    push(repoDir, repoUrl, tag('v1'), tag('v2'));
    controller = await ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: ns,
      cacheDir: join(work, 'cache'),
      // A long window: each branch change waits about this long for its push.
      extraArgs: [`--fleet-url=${fleetUrl}`, '--fleet-batch-window=8s'],
    });
    await client.create(
      ferrolClusterStack(ns, 'ferrol', {
        kubernetesVersion: '1.31',
        autoSubscribe: false,
        versions: ['v1', 'v2'],
        interval: '1m',
        timeout: '1m',
        source: { git: { url: repoUrl }, path: 'stack' },
      }),
    );
    const { releaseReady } = releaseReaders(client, ns);
    for (const v of ['v1', 'v2']) await waitFor(`release ${tag(v)} Ready`, () => releaseReady(tag(v)));
  });

  after(async () => {
    await controller?.stop();
    await releaseAddonNamespace(client, ns);
    await workload.delete('v1', 'Namespace', ns).catch(() => undefined);
    client.close();
    workload.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('1. v1: the manifests are applied into the workload cluster only', () =>
    step(async () => {
      const text = readFileSync(env.workloadKubeconfig, 'utf8');
      await client.create(workloadKubeconfigSecret(ns, 'c1', text) as KubeObject);
      await client.create(
        addonCluster(ns, 'c1', { podCidr: '10.246.0.0/16', className: tag('v1'), version: 'v1.31.2' }),
      );
      await waitFor('c1 Ready at v1', () => readyAt(tag('v1')));
      assert.ok(await marker(workload), 'the marker is in the workload cluster');
      assert.equal(await marker(client), undefined, 'and not in the management cluster');
    }));

  it('2. manifests → Helm chart: while the branch change waits, nothing reads the manifests into the management cluster', () =>
    step(async () => {
      const watcher = watchMove(fleetTip());
      await moveTo('v2');
      const c1 = await waitFor('c1 Ready at v2 with the Helm release installed', async () => {
        if (watcher.violated()) return 'violated';
        const c = await readyAt(tag('v2'));
        return c?.status?.addons?.find((a) => a.name === 'inventory')?.helmRevision === 1 ? c : undefined;
      });
      const { violations, pendingSamples } = await watcher.stop();
      assert.deepEqual(violations, []);
      assert.ok(typeof c1 !== 'string');
      assert.ok(pendingSamples > 0, 'the watcher saw the time the branch change was waiting');
      assert.ok(c1.status?.addons?.find((a) => a.name === 'inventory')?.helmRelease);
      await waitFor('the manifests pruned from the workload cluster', async () =>
        (await marker(workload)) === undefined ? true : undefined,
      );
      assert.equal(await marker(client), undefined);
      const ks = await client.list<K>(KUSTOMIZE, 'Kustomization', {
        namespace: ns,
        labelSelector: 'stackflux.io/cluster=c1',
      });
      assert.deepEqual(
        ks.items.map((k) => [k.metadata.name, k.spec.path, k.spec.kubeConfig ?? null]),
        [['c1.inventory.helm', './inventory.helm', null]],
      );
    }));

  it('3. Helm chart → manifests: the same, the other way round', () =>
    step(async () => {
      const watcher = watchMove(fleetTip());
      await moveTo('v1');
      await waitFor('c1 Ready at v1 again and the marker back in the workload cluster', async () =>
        watcher.violated() ? 'violated' : (await readyAt(tag('v1'))) && (await marker(workload)),
      );
      const { violations, pendingSamples } = await watcher.stop();
      assert.deepEqual(violations, []);
      assert.ok(pendingSamples > 0, 'the watcher saw the time the branch change was waiting');
      assert.equal(await marker(client), undefined);
      const ks = await client.list<K>(KUSTOMIZE, 'Kustomization', {
        namespace: ns,
        labelSelector: 'stackflux.io/cluster=c1',
      });
      assert.deepEqual(
        ks.items.map((k) => [k.metadata.name, k.spec.path, k.spec.kubeConfig?.secretRef.name ?? null]),
        [['c1.inventory', './inventory', 'c1-kubeconfig']],
      );
    }));
});
