// Issue 12 (item 1) end to end: the REAL `flux` CLI (built by hack/build-testenv.sh from the
// pinned flux2 module, $FLUX_BIN) reads what stackflux emits for a release and for a Cluster's
// addons. `stackflux run` as a subprocess; a release of stacks/docker-ferrol-1-30 is cut as a Git
// tag; a Cluster API Cluster (v1beta2) points at the test environment's workload cluster. The
// assertions are written against what stackflux reports (the ClusterStackRelease's and the
// ClusterAddon's status: Kustomization names and lastAppliedRevision), not against a particular
// fleet layout.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ClusterAddon } from '../../controller/api/clusteraddon.ts';
import { API_VERSION } from '../../controller/api/meta.ts';
import { KubeClient, type KubeObject, loadKubeConfig } from '../../controller/runtime/client.ts';
import { createRepo, type Endpoints, workloadKubeconfigSecret } from '../../hack/lib/testenv.ts';
import {
  CAPI,
  ControllerProcess,
  type CSKR,
  cond,
  createTestNamespace,
  cutRelease,
  e2eEnv,
  flux,
  fluxTable,
  fluxTree,
  initRepo,
  push,
  releaseAddonNamespace,
  releaseReaders,
  required,
  truncateHex,
  waitFor,
} from '../support/e2e.ts';
import { uniqueName } from '../support/env.ts';

const env = { ...e2eEnv(), workloadKubeconfig: required('WORKLOAD_KUBECONFIG') };
const client = new KubeClient(loadKubeConfig({ kubeconfig: env.kubeconfig }));
const workload = new KubeClient(loadKubeConfig({ kubeconfig: env.workloadKubeconfig }));
const ns = uniqueName('flux-cli');
const work = mkdtempSync(join(tmpdir(), 'stackflux-flux-cli-'));
const repoDir = join(work, 'release');
const tag = 'docker-ferrol-1-30-v1';

type CA = ClusterAddon & KubeObject;

let controller: ControllerProcess | undefined;
async function step(fn: () => Promise<void>): Promise<void> {
  if (controller === undefined) throw new Error('the controller did not start');
  await controller.step(fn);
}

const { releaseReady } = releaseReaders(client, ns);

/** The ClusterAddon once Ready with every addon reporting a Kustomization and a lastAppliedRevision. */
async function addonsApplied(): Promise<CA | undefined> {
  const ca = await client.get<CA>(API_VERSION, 'ClusterAddon', 'c1', ns);
  const addons = ca?.status?.addons ?? [];
  const complete = addons.length > 0 && addons.every((a) => a.kustomization && a.lastAppliedRevision);
  return cond(ca, 'Ready')?.status === 'True' && complete ? ca : undefined;
}

describe('the real flux CLI on what stackflux emits', { timeout: 15 * 60_000 }, () => {
  let release: CSKR | undefined;
  let addon: CA | undefined;

  before(async () => {
    await createTestNamespace(client, ns);
    const repoUrl = await createRepo(env as Endpoints, `${ns}-release`);
    const fleetUrl = await createRepo(env as Endpoints, `${ns}-fleet`);
    initRepo(repoDir);
    cutRelease(repoDir, 'stack', { example: 'docker-ferrol-1-30', k8s: '1-30', version: 'v1' });
    push(repoDir, repoUrl, tag);
    controller = await ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: ns,
      cacheDir: join(work, 'cache'),
      extraArgs: [`--fleet-url=${fleetUrl}`, '--fleet-batch-window=1s'],
    });
    await client.create({
      apiVersion: API_VERSION,
      kind: 'ClusterStack',
      metadata: { name: 'ferrol', namespace: ns },
      spec: {
        provider: 'docker',
        name: 'ferrol',
        kubernetesVersion: '1.30',
        noProvider: true,
        autoSubscribe: false,
        versions: ['v1'],
        source: { git: { url: repoUrl }, path: 'stack' },
      },
    });
    await controller.step(async () => {
      release = await waitFor(`release ${tag} Ready`, () => releaseReady(tag));
    });
    await client.create(
      workloadKubeconfigSecret(ns, 'c1', readFileSync(env.workloadKubeconfig, 'utf8')) as KubeObject,
    );
    await client.create({
      apiVersion: CAPI,
      kind: 'Cluster',
      metadata: { name: 'c1', namespace: ns },
      spec: {
        clusterNetwork: { pods: { cidrBlocks: ['10.244.0.0/16'] } },
        controlPlaneEndpoint: { host: 'c1.example.internal', port: 6443 },
        topology: { classRef: { name: tag }, version: 'v1.30.4' },
      },
    });
    await controller.step(async () => {
      addon = await waitFor('ClusterAddon c1 Ready with its addons applied', addonsApplied);
    });
  });

  after(async () => {
    await controller?.stop();
    await releaseAddonNamespace(client, ns);
    client.close();
    workload.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('flux get kustomizations -A: the release and every addon of the Cluster are Ready at the revision stackflux reports', () =>
    step(async () => {
      const addons = addon?.status?.addons ?? [];
      const kustomization = release?.status?.kustomization;
      const releaseRevision = release?.status?.lastAppliedRevision;
      assert.ok(kustomization && releaseRevision, 'the release reports its Kustomization and revision');
      const rows = fluxTable(flux(['get', 'kustomizations', '-A'], env.kubeconfig)).filter(
        (r) => r.NAMESPACE === ns,
      );
      const expected = [
        { name: kustomization, revision: releaseRevision },
        ...addons.map((a) => ({ name: a.kustomization ?? '', revision: a.lastAppliedRevision ?? '' })),
      ];
      for (const { name, revision } of expected) {
        const row = rows.find((r) => r.NAME === name);
        assert.ok(row, `flux lists Kustomization ${ns}/${name}; rows: ${JSON.stringify(rows)}`);
        assert.equal(row.READY, 'True', `${name} Ready`);
        assert.equal(row.SUSPENDED, 'False', `${name} not suspended`);
        assert.equal(row.REVISION, truncateHex(revision), `${name} at the revision stackflux reports`);
        assert.equal(row.MESSAGE, `Applied revision: ${truncateHex(revision)}`);
      }
      // The fleet revision the Cluster's addons run at is the one stackflux committed.
      const fleetCommit = addon?.status?.fleetCommit ?? '';
      for (const a of addons) assert.ok(a.lastAppliedRevision?.endsWith(`sha1:${fleetCommit}`), a.name);
    }));

  it('flux tree kustomization: the release applies its ClusterClass; the addons their objects in the workload cluster', () =>
    step(async () => {
      const releaseKs = release?.status?.kustomization ?? '';
      const releaseTree = fluxTree(flux(['tree', 'kustomization', releaseKs, '-n', ns], env.kubeconfig));
      assert.equal(releaseTree.root, `Kustomization/${ns}/${releaseKs}`);
      assert.ok(
        releaseTree.children.includes(`ClusterClass/${ns}/${tag}`),
        `ClusterClass in the tree: ${releaseTree.children.join(', ')}`,
      );

      const names = [...new Set((addon?.status?.addons ?? []).map((a) => a.kustomization ?? ''))];
      let configMaps = 0;
      for (const name of names) {
        const tree = fluxTree(flux(['tree', 'kustomization', name, '-n', ns], env.kubeconfig));
        assert.equal(tree.root, `Kustomization/${ns}/${name}`);
        assert.ok(tree.children.length > 0, `${name} has applied objects`);
        // Its inventory names objects of the workload cluster (kubeConfig.secretRef): they exist there.
        for (const child of tree.children) {
          const [kind, namespace, objName] = child.split('/');
          if (kind !== 'ConfigMap' && kind !== 'ServiceAccount') continue;
          configMaps += kind === 'ConfigMap' ? 1 : 0;
          const found = await workload.get('v1', kind, objName ?? '', namespace);
          assert.ok(found, `${child} (from flux tree ${name}) exists in the workload cluster`);
        }
      }
      assert.ok(configMaps > 0, 'the addons applied ConfigMaps into the workload cluster');
    }));
});
