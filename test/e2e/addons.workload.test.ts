// Issues 5 and 10 end to end: `stackflux run --fleet-url ...` as a subprocess against the real test
// environment. A release repo is built from stacks/docker-ferrol-1-30; Clusters (v1beta2) with
// their <name>-kubeconfig Secret point at the second kube-apiserver (the workload cluster). Each
// Cluster has its own fleet branch stackflux/<ns>/<cluster> and GitRepository <cluster>-addons;
// Flux applies the rendered addons from it INTO the workload cluster. The steps share state and
// run in order (acceptance 1, 2, 4, 5, 3, 6, 7, 8 of issue 5 and, after 6, the one-Cluster change
// of issue 10: step 3 leaves c1 on release v3, so it runs after the steps that count c1's three v1
// addons and before other Clusters share the workload cluster's objects).
import assert from 'node:assert/strict';
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ClusterAddon } from '../../controller/api/clusteraddon.ts';
import type { ClusterStackRelease } from '../../controller/api/clusterstackrelease.ts';
import type { GitRepository, Kustomization } from '../../controller/api/flux.ts';
import { API_VERSION } from '../../controller/api/meta.ts';
import { KubeClient, type KubeObject, loadKubeConfig } from '../../controller/runtime/client.ts';
import { createRepo, type Endpoints, workloadKubeconfigSecret } from '../../hack/lib/testenv.ts';
import {
  CAPI,
  ControllerProcess,
  cond,
  createTestNamespace,
  cutRelease,
  e2eEnv,
  git,
  initRepo,
  push,
  releaseAddonNamespace,
  required,
  sleep,
} from '../support/e2e.ts';
import { eventually, uniqueName } from '../support/env.ts';

const env = { ...e2eEnv(), workloadKubeconfig: required('WORKLOAD_KUBECONFIG') };
const client = new KubeClient(loadKubeConfig({ kubeconfig: env.kubeconfig }), { qps: 200, burst: 200 });
const workload = new KubeClient(loadKubeConfig({ kubeconfig: env.workloadKubeconfig }));
const workloadKubeconfigText = readFileSync(env.workloadKubeconfig, 'utf8');
const ns = uniqueName('addons');
const work = mkdtempSync(join(tmpdir(), 'stackflux-addons-'));
const repoDir = join(work, 'release');
const cacheDir = join(work, 'cache');
const KUSTOMIZE = 'kustomize.toolkit.fluxcd.io/v1';
const tag = (v: string) => `docker-ferrol-1-30-${v}`;

type CA = ClusterAddon & KubeObject;
interface ConfigMap extends KubeObject {
  data?: Record<string, string>;
}

/** Cuts release `version` of stacks/docker-ferrol-1-30 into `stack/` (optionally edited) and tags it. */
function cutAddonsRelease(version: string, edit?: (dir: string) => void): void {
  cutRelease(repoDir, 'stack', { example: 'docker-ferrol-1-30', k8s: '1-30', version, edit });
}

// --- the controller subprocess ---------------------------------------------------------------
let controller: ControllerProcess | undefined;

const crashMarker = join(work, 'crash-after-fleet-commit');

async function startController(fleetUrl: string, extraArgs: string[] = []): Promise<void> {
  controller = await ControllerProcess.start({
    kubeconfig: env.kubeconfig,
    namespace: ns,
    cacheDir,
    concurrency: 4,
    extraArgs: [`--fleet-url=${fleetUrl}`, '--fleet-batch-window=2s', ...extraArgs],
    env: { STACKFLUX_TEST_CRASH_AFTER_FLEET_COMMIT: crashMarker },
  });
}

/** Runs a step; on failure prints the controller's log tail. */
async function step(fn: () => Promise<void>): Promise<void> {
  if (controller === undefined) throw new Error('the controller did not start');
  await controller.step(fn);
}

// --- reading state ---------------------------------------------------------------------------
async function caddon(name: string): Promise<CA | undefined> {
  return client.get<CA>(API_VERSION, 'ClusterAddon', name, ns);
}
async function caddonReady(name: string): Promise<CA | undefined> {
  const c = await caddon(name);
  return cond(c, 'Ready')?.status === 'True' ? c : undefined;
}
async function workloadConfigMap(name: string): Promise<ConfigMap | undefined> {
  return workload.get<ConfigMap>('v1', 'ConfigMap', name, 'kube-system');
}
async function kustomizationsOf(cluster: string): Promise<(Kustomization & KubeObject)[]> {
  const list = await client.list<Kustomization & KubeObject>(KUSTOMIZE, 'Kustomization', {
    namespace: ns,
    labelSelector: `stackflux.io/cluster=${cluster}`,
  });
  return list.items;
}

let fleetUrl = '';
/** The fleet branch of a Cluster. */
const branchOf = (cluster: string) => `stackflux/${ns}/${cluster}`;
/** A fresh clone of a Cluster's fleet branch. */
function fleetClone(cluster: string): string {
  const dir = mkdtempSync(join(work, 'fleet-'));
  git(dir, 'clone', '-q', '--branch', branchOf(cluster), fleetUrl, '.');
  return dir;
}
/** Commits on a Cluster's branch. */
function fleetCommits(cluster: string): number {
  const dir = fleetClone(cluster);
  try {
    return Number(git(dir, 'rev-list', '--count', 'HEAD'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
/** The fleet repository's branches (name → tip). */
function fleetBranches(): Map<string, string> {
  const out = git(work, 'ls-remote', '--heads', fleetUrl);
  return new Map(
    out
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => {
        const [commit = '', ref = ''] = l.split('\t');
        return [ref.replace(/^refs\/heads\//, ''), commit];
      }),
  );
}
/** Pushes the controller logged since `since` (ms epoch) that moved at least one branch. */
function pushesSince(since: number): number {
  return (controller?.logLines ?? []).filter((line) => {
    try {
      const l = JSON.parse(line) as { msg?: string; time?: string; moved?: number };
      return l.msg === 'fleet branches pushed' && Date.parse(l.time ?? '') >= since && (l.moved ?? 0) > 0;
    } catch {
      return false;
    }
  }).length;
}
async function gitRepositories(): Promise<(GitRepository & KubeObject)[]> {
  return (
    await client.list<GitRepository & KubeObject>('source.toolkit.fluxcd.io/v1', 'GitRepository', {
      namespace: ns,
      labelSelector: 'stackflux.io/cluster',
    })
  ).items;
}

function cluster(name: string, podCidr: string): KubeObject {
  return {
    apiVersion: CAPI,
    kind: 'Cluster',
    metadata: { name, namespace: ns },
    spec: {
      clusterNetwork: { pods: { cidrBlocks: [podCidr] } },
      controlPlaneEndpoint: { host: `${name}.example.internal`, port: 6443 },
      topology: { classRef: { name: tag('v1') }, version: 'v1.30.4' },
    },
  };
}

async function createCluster(name: string, podCidr: string): Promise<void> {
  await client.create(workloadKubeconfigSecret(ns, name, workloadKubeconfigText) as KubeObject);
  await client.create(cluster(name, podCidr));
}

async function mergePatchCluster(name: string, patch: unknown): Promise<void> {
  await client.mergePatch(CAPI, 'Cluster', name, ns, patch);
}

// --- the steps -------------------------------------------------------------------------------
describe('cluster addons: Cluster → ClusterAddon → fleet commit → Flux → workload cluster', {
  timeout: 20 * 60_000,
}, () => {
  before(async () => {
    await createTestNamespace(client, ns);
    const repoUrl = await createRepo(env as Endpoints, `${ns}-release`);
    fleetUrl = await createRepo(env as Endpoints, `${ns}-fleet`);
    initRepo(repoDir);
    cutAddonsRelease('v1');
    // v2: the cni template reads a field no Cluster has.
    cutAddonsRelease('v2', (dir) => {
      const f = join(dir, 'cluster-addon', 'cni', 'config.yaml.hbs');
      writeFileSync(
        f,
        readFileSync(f, 'utf8').replace(
          '  LOG_LEVEL:',
          '  MISSING: {{quote Cluster.spec.notAField.value}}\n  LOG_LEVEL:',
        ),
      );
    });
    // v3: the cni addon no longer ships its ServiceAccount, and a new addon `dns` follows (after
    // cni only: a longer dependsOn chain slows c1's Ready while step 6's Clusters keep Flux busy).
    cutAddonsRelease('v3', (dir) => {
      rmSync(join(dir, 'cluster-addon', 'cni', 'serviceaccount.yaml'));
      mkdirSync(join(dir, 'cluster-addon', 'dns'));
      writeFileSync(join(dir, 'cluster-addon', 'dns', 'values.yaml'), 'clusterDomain: cluster.local\n');
      writeFileSync(
        join(dir, 'cluster-addon', 'dns', 'config.yaml.hbs'),
        [
          'apiVersion: v1',
          'kind: ConfigMap',
          'metadata:',
          '  name: ferrol-dns',
          'data:',
          '  clusterName: {{quote Cluster.metadata.name}}',
          '  clusterDomain: {{quote Values.clusterDomain}}',
          '',
        ].join('\n'),
      );
      appendFileSync(
        join(dir, 'stack.yaml'),
        '  - name: dns\n    targetNamespace: kube-system\n    dependsOn: [cni]\n',
      );
    });
    push(repoDir, repoUrl, tag('v1'), tag('v2'), tag('v3'));
    await startController(fleetUrl);
    await client.create({
      apiVersion: API_VERSION,
      kind: 'ClusterStack',
      metadata: { name: 'ferrol', namespace: ns },
      spec: {
        noProvider: true,
        provider: 'docker',
        name: 'ferrol',
        kubernetesVersion: '1.30',
        autoSubscribe: false,
        versions: ['v1', 'v2', 'v3'],
        // Also the Flux interval of the addon Kustomizations: with many Clusters a short one keeps
        // some of them "Reconciliation in progress" at any moment.
        interval: '2m',
        source: { git: { url: repoUrl }, path: 'stack' },
      },
    });
    for (const v of ['v1', 'v2', 'v3']) {
      await eventually(`release ${tag(v)} resolved`, async () => {
        const r = await client.get<ClusterStackRelease & KubeObject>(
          API_VERSION,
          'ClusterStackRelease',
          tag(v),
          ns,
        );
        return r?.status?.commit !== undefined ? r : undefined;
      });
    }
  });

  after(async () => {
    await controller?.stop();
    await releaseAddonNamespace(client, ns);
    client.close();
    workload.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('1. a Cluster gets its addons rendered with its values and applied into the workload cluster; ClusterAddon Ready', () =>
    step(async () => {
      await createCluster('c1', '10.244.0.0/16');
      const ca = await eventually('ClusterAddon c1 Ready', () => caddonReady('c1'), { timeoutMs: 240_000 });
      assert.equal(ca.status?.release, tag('v1'));
      assert.match(ca.status?.fleetCommit ?? '', /^[0-9a-f]{40}$/);
      assert.deepEqual(
        ca.status?.addons?.map((a) => [a.name, a.ready]),
        [
          ['cloud-config', true],
          ['cni', true],
          ['metrics-server', true],
        ],
      );
      assert.equal(ca.metadata.ownerReferences?.[0]?.kind, 'Cluster');

      const cni = await workloadConfigMap('ferrol-cni-config');
      assert.equal(cni?.data?.clusterName, 'c1');
      assert.equal(cni?.data?.podCIDR, '10.244.0.0/16');
      assert.equal(cni?.data?.podGateway, '10.244.0.1');
      assert.equal(cni?.data?.KUBERNETES_SERVICE_HOST, 'c1.example.internal');
      assert.equal(cni?.data?.KUBERNETES_SERVICE_PORT, '6443');
      const info = await workloadConfigMap('cluster-info-ferrol');
      assert.match(info?.data?.['cloud.conf'] ?? '', /api-server-endpoint = c1\.example\.internal:6443/);
      assert.ok(await workload.get('v1', 'Service', 'metrics-server', 'kube-system'));
      assert.equal(
        await client.get('v1', 'ConfigMap', 'ferrol-cni-config', ns),
        undefined,
        'addons go to the workload cluster, not the management cluster',
      );

      // Dependency order: cloud-config after cni (previous addon), metrics-server after cni.
      const ks = new Map((await kustomizationsOf('c1')).map((k) => [k.metadata.name, k]));
      assert.deepEqual([...ks.keys()].sort(), ['c1.cloud-config', 'c1.cni', 'c1.metrics-server']);
      assert.equal(ks.get('c1.cni')?.spec.dependsOn, undefined);
      assert.deepEqual(ks.get('c1.cloud-config')?.spec.dependsOn, [{ name: 'c1.cni' }]);
      assert.deepEqual(ks.get('c1.metrics-server')?.spec.dependsOn, [{ name: 'c1.cni' }]);
      assert.deepEqual(ks.get('c1.cni')?.spec.kubeConfig, {
        secretRef: { name: 'c1-kubeconfig', key: 'value' },
      });
      assert.equal(ks.get('c1.cni')?.metadata.ownerReferences?.[0]?.kind, 'ClusterAddon');

      assert.equal(ks.get('c1.cni')?.spec.path, './cni');
      assert.deepEqual(ks.get('c1.cni')?.spec.sourceRef, { kind: 'GitRepository', name: 'c1-addons' });
      const repo = (await gitRepositories()).find((g) => g.metadata.name === 'c1-addons');
      assert.equal(repo?.spec.ref?.branch, branchOf('c1'));
      assert.equal(repo?.metadata.ownerReferences?.[0]?.kind, 'ClusterAddon');
      assert.equal(ca.status?.fleetBranch, branchOf('c1'));

      const dir = fleetClone('c1');
      assert.ok(existsSync(join(dir, 'cni', 'config.yaml')), 'the addon folders are at the branch root');
      assert.match(
        git(dir, 'log', '-1', '--format=%B'),
        new RegExp(`${ns}/c1: release ${tag('v1')} \\(first render\\)`),
      );
    }));

  it('2. changing the pod CIDR makes one new commit on the Cluster branch and updates the workload object', () =>
    step(async () => {
      const before = fleetCommits('c1');
      const previous = (await caddon('c1'))?.status?.fleetCommit;
      await mergePatchCluster('c1', {
        spec: { clusterNetwork: { pods: { cidrBlocks: ['10.250.0.0/16'] } } },
      });
      await eventually('workload podCIDR updated', async () =>
        (await workloadConfigMap('ferrol-cni-config'))?.data?.podCIDR === '10.250.0.0/16' ? true : undefined,
      );
      const ca = await eventually('ClusterAddon c1 Ready at a new commit', async () => {
        const c = await caddonReady('c1');
        return c?.status?.fleetCommit !== previous ? c : undefined;
      });
      assert.equal(fleetCommits('c1'), before + 1, 'exactly one new fleet commit');
      assert.equal(ca.status?.fleetCommit, fleetBranches().get(branchOf('c1')));
      assert.match(
        git(fleetClone('c1'), 'log', '-1', '--format=%B'),
        /\(Cluster or values changed: cni\)/,
        'the commit says why',
      );
    }));

  it('4. disabling an addon for the Cluster prunes its objects; enabling brings them back', () =>
    step(async () => {
      await mergePatchCluster('c1', {
        metadata: { annotations: { 'stackflux.io/disabled-addons': 'metrics-server' } },
      });
      await eventually('metrics-server pruned from the workload cluster', async () =>
        (await workload.get('v1', 'Service', 'metrics-server', 'kube-system')) === undefined
          ? true
          : undefined,
      );
      await eventually('Kustomization c1.metrics-server gone', async () =>
        (await kustomizationsOf('c1')).some((k) => k.metadata.name === 'c1.metrics-server')
          ? undefined
          : true,
      );
      const ca = await eventually('ClusterAddon Ready with two addons', async () => {
        const c = await caddonReady('c1');
        return c?.status?.addons?.length === 2 ? c : undefined;
      });
      assert.deepEqual(
        ca.status?.addons?.map((a) => a.name),
        ['cloud-config', 'cni'],
      );
      assert.ok(await workloadConfigMap('ferrol-cni-config'), 'the other addons stay');

      await mergePatchCluster('c1', { metadata: { annotations: { 'stackflux.io/disabled-addons': null } } });
      await eventually('metrics-server back in the workload cluster', () =>
        workload.get('v1', 'Service', 'metrics-server', 'kube-system'),
      );
      await eventually('ClusterAddon Ready with three addons', async () => {
        const c = await caddonReady('c1');
        return c?.status?.addons?.length === 3 ? c : undefined;
      });
    }));

  it('5. a release whose template reads a missing field: Ready=False naming file and field; what ran stays', () =>
    step(async () => {
      const before = fleetCommits('c1');
      await mergePatchCluster('c1', { spec: { topology: { classRef: { name: tag('v2') } } } });
      const ca = await eventually('ClusterAddon c1 Ready=False', async () => {
        const c = await caddon('c1');
        return cond(c, 'Ready')?.status === 'False' ? c : undefined;
      });
      const ready = cond(ca, 'Ready');
      assert.equal(ready?.reason, 'RenderFailed');
      assert.match(ready?.message ?? '', /config\.yaml\.hbs/);
      assert.match(ready?.message ?? '', /notAField/);
      assert.equal(fleetCommits('c1'), before, 'nothing was committed');
      assert.equal((await workloadConfigMap('ferrol-cni-config'))?.data?.podCIDR, '10.250.0.0/16');
      assert.equal((await kustomizationsOf('c1')).length, 3, 'the Kustomizations stay');

      // Back to the good release.
      await mergePatchCluster('c1', { spec: { topology: { classRef: { name: tag('v1') } } } });
      await eventually('ClusterAddon c1 Ready again', () => caddonReady('c1'));
    }));

  it('3. a release where cni drops an object and a new addon appears: dropped object pruned, new one applied', () =>
    step(async () => {
      const serviceAccount = () => workload.get('v1', 'ServiceAccount', 'ferrol-cni', 'kube-system');
      assert.ok(await serviceAccount(), 'v1 applied the cni ServiceAccount');
      // A previous run against the same test environment leaves its (orphaned) objects behind.
      await workload.delete('v1', 'ConfigMap', 'ferrol-dns', 'kube-system').catch(() => undefined);
      await eventually('no dns ConfigMap before the move', async () =>
        (await workloadConfigMap('ferrol-dns')) === undefined ? true : undefined,
      );

      await mergePatchCluster('c1', { spec: { topology: { classRef: { name: tag('v3') } } } });
      await eventually('cni ServiceAccount pruned from the workload cluster', async () =>
        (await serviceAccount()) === undefined ? true : undefined,
      );
      const dns = await eventually('dns ConfigMap in the workload cluster', () =>
        workloadConfigMap('ferrol-dns'),
      );
      assert.equal(dns.data?.clusterName, 'c1');
      assert.equal(dns.data?.clusterDomain, 'cluster.local');
      assert.ok(
        await workload.get('rbac.authorization.k8s.io/v1', 'ClusterRole', 'ferrol-cni'),
        'cni keeps the rest',
      );

      const ca = await eventually('ClusterAddon c1 Ready on v3 with four addons', async () => {
        const c = await caddonReady('c1');
        return c?.status?.release === tag('v3') && c.status.addons?.length === 4 ? c : undefined;
      });
      assert.deepEqual(
        ca.status?.addons?.map((a) => [a.name, a.ready, a.release]),
        [
          ['cloud-config', true, tag('v3')],
          ['cni', true, tag('v3')],
          ['dns', true, tag('v3')],
          ['metrics-server', true, tag('v3')],
        ],
      );

      const ks = new Map((await kustomizationsOf('c1')).map((k) => [k.metadata.name, k]));
      assert.deepEqual([...ks.keys()].sort(), ['c1.cloud-config', 'c1.cni', 'c1.dns', 'c1.metrics-server']);
      const dnsK = ks.get('c1.dns');
      assert.equal(dnsK?.metadata.labels?.['stackflux.io/addon'], 'dns');
      assert.deepEqual(dnsK?.spec.dependsOn, [{ name: 'c1.cni' }]);
      // The release is the branch's revision: no Kustomization names it (a move re-applies none).
      for (const k of ks.values()) assert.equal(k.metadata.labels?.['stackflux.io/release'], undefined);

      const dir = fleetClone('c1');
      assert.equal(existsSync(join(dir, 'cni', 'serviceaccount.yaml')), false);
      assert.ok(existsSync(join(dir, 'dns', 'config.yaml')));
      assert.match(
        git(dir, 'log', '-1', '--format=%B'),
        new RegExp(`${ns}/c1: release ${tag('v3')} \\(release ${tag('v1')} → ${tag('v3')}\\)`),
      );
    }));

  it('6. many Clusters at once: one branch each, far fewer pushes than Clusters, all Ready', () =>
    step(async () => {
      const n = 25;
      const since = Date.now();
      const names = Array.from({ length: n }, (_, i) => `s${i}`);
      await Promise.all(names.map((name, i) => createCluster(name, `10.${100 + i}.0.0/16`)));
      await eventually(
        `all ${n} ClusterAddons Ready`,
        async () => {
          const list = await client.list<CA>(API_VERSION, 'ClusterAddon', { namespace: ns });
          const ready = list.items.filter(
            (c) => names.includes(c.metadata.name ?? '') && cond(c, 'Ready')?.status === 'True',
          );
          return ready.length === n ? true : undefined;
        },
        { timeoutMs: 600_000, intervalMs: 2_000 },
      );
      const pushes = pushesSince(since);
      assert.ok(pushes >= 1, 'the new Clusters were pushed');
      assert.ok(pushes <= n / 5, `${pushes} fleet pushes for ${n} Clusters`);
      const branches = fleetBranches();
      for (const name of names) {
        assert.ok(branches.has(branchOf(name)), `branch of ${name}`);
        assert.equal(fleetCommits(name), 1, `one commit on the branch of ${name}`);
      }
      const repos = new Set((await gitRepositories()).map((g) => g.metadata.name));
      for (const name of names) assert.ok(repos.has(`${name}-addons`), `GitRepository of ${name}`);
    }));

  it("6b. one Cluster's pod CIDR changes: only its GitRepository and Kustomizations get a new revision", () =>
    step(async () => {
      // Every Cluster converged (step 6 waited for all Ready): what Flux has applied, per object.
      const applied = async () =>
        new Map(
          (
            await client.list<Kustomization & KubeObject>(KUSTOMIZE, 'Kustomization', {
              namespace: ns,
              labelSelector: 'stackflux.io/addon',
            })
          ).items.map((k) => [k.metadata.name ?? '', k.status?.lastAppliedRevision]),
        );
      const artifacts = async () =>
        new Map((await gitRepositories()).map((g) => [g.metadata.name ?? '', g.status?.artifact?.revision]));
      const kBefore = await applied();
      const gBefore = await artifacts();
      const tipsBefore = fleetBranches();
      assert.ok(kBefore.size >= 3 * 26, `${kBefore.size} addon Kustomizations before the change`);
      const previous = (await caddon('s3'))?.status?.fleetCommit;

      await mergePatchCluster('s3', {
        spec: { clusterNetwork: { pods: { cidrBlocks: ['10.203.0.0/16'] } } },
      });
      const ca = await eventually(
        'ClusterAddon s3 Ready at a new commit',
        async () => {
          const c = await caddonReady('s3');
          return c?.status?.fleetCommit !== undefined && c.status.fleetCommit !== previous ? c : undefined;
        },
        { timeoutMs: 240_000 },
      );
      const revision = `${branchOf('s3')}@sha1:${ca.status?.fleetCommit}`;
      // Give Flux a moment in which any wrongly triggered re-apply would show.
      await sleep(5_000);
      const kAfter = await applied();
      const gAfter = await artifacts();
      const moved = [...kAfter].filter(([name, rev]) => kBefore.get(name) !== rev).map(([n]) => n);
      assert.deepEqual(
        moved.sort(),
        ['s3.cloud-config', 's3.cni', 's3.metrics-server'],
        "exactly the changed Cluster's Kustomizations got a new revision",
      );
      for (const k of ['s3.cloud-config', 's3.cni', 's3.metrics-server'])
        assert.equal(kAfter.get(k), revision);
      const movedRepos = [...gAfter].filter(([name, rev]) => gBefore.get(name) !== rev).map(([n]) => n);
      assert.deepEqual(movedRepos, ['s3-addons'], 'only its GitRepository has a new artifact');
      const tipsAfter = fleetBranches();
      const movedBranches = [...tipsAfter].filter(([b, tip]) => tipsBefore.get(b) !== tip).map(([b]) => b);
      assert.deepEqual(movedBranches, [branchOf('s3')], 'only its branch moved');

      const log = git(fleetClone('s3'), 'log', '--format=%B');
      assert.match(
        log,
        new RegExp(`^stackflux: ${ns}/s3: release ${tag('v1')} \\(Cluster or values changed: cni\\)`),
      );
      assert.match(log, /\(first render\)/, 'the branch keeps its history');
    }));

  it('7. deleting a Cluster and its Secret leaves no Kustomization behind and removes its fleet branch', () =>
    step(async () => {
      await client.delete(CAPI, 'Cluster', 's0', ns);
      await client.delete('v1', 'Secret', 's0-kubeconfig', ns);
      await eventually(
        'no Kustomization of s0',
        async () => ((await kustomizationsOf('s0')).length === 0 ? true : undefined),
        { timeoutMs: 180_000 },
      );
      await eventually('ClusterAddon s0 gone', async () =>
        (await caddon('s0')) === undefined ? true : undefined,
      );
      const branches = fleetBranches();
      assert.equal(branches.has(branchOf('s0')), false, 'fleet branch removed');
      assert.ok(branches.has(branchOf('s1')), 'the other clusters stay');
      // Owned by the ClusterAddon: kube-controller-manager's garbage collector removes it, asynchronously.
      await eventually('its GitRepository is garbage collected', async () =>
        (await gitRepositories()).some((g) => g.metadata.name === 's0-addons') ? undefined : true,
      );
    }));

  it('8. killed between fleet commit and push: after a restart the push happens, nothing duplicated or lost', () =>
    step(async () => {
      const before = fleetCommits('c1');
      writeFileSync(crashMarker, 'crash once\n');
      const exited = controller?.exited();
      await mergePatchCluster('c1', {
        spec: { clusterNetwork: { pods: { cidrBlocks: ['10.251.0.0/16'] } } },
      });
      assert.equal(await exited, 3, 'the controller exits at the fault point');
      assert.equal(fleetCommits('c1'), before, 'the commit was not pushed');
      assert.equal(existsSync(crashMarker), false);

      await startController(fleetUrl);
      await eventually('the change pushed after the restart', async () =>
        fleetCommits('c1') === before + 1 ? true : undefined,
      );
      const tip = git(fleetClone('c1'), 'rev-parse', 'HEAD');
      // (The workload ConfigMap is shared by every Cluster of step 6, so the Flux side is checked
      // through c1's own Kustomizations: Ready at the new commit.)
      await eventually('ClusterAddon c1 Ready at the pushed commit', async () => {
        const c = await caddonReady('c1');
        return c?.status?.fleetCommit === tip ? c : undefined;
      });
      await sleep(3_000);
      assert.equal(fleetCommits('c1'), before + 1, 'exactly one commit for the change');
      const dir = fleetClone('c1');
      assert.match(readFileSync(join(dir, 'cni', 'config.yaml'), 'utf8'), /10\.251\.0\.0\/16/);
      const branches = fleetBranches();
      for (const name of ['s1', 's2', 's24']) assert.ok(branches.has(branchOf(name)), name);
    }));

  it("9. --flux-shards 3: each Cluster's GitRepository and Kustomizations share one Flux shard; all stay Ready", () =>
    step(async () => {
      await controller?.stop();
      await startController(fleetUrl, ['--flux-shards=3', '--addon-interval=7m']);
    }).then(() =>
      step(async () => {
        const names = ['c1', ...Array.from({ length: 24 }, (_, i) => `s${i + 1}`)];
        const shardOf = (o: KubeObject) => o.metadata.labels?.['sharding.fluxcd.io/key'];
        const shards = await eventually(
          "every Cluster's Flux objects labelled with its shard",
          async () => {
            const repos = await gitRepositories();
            const ks = (
              await client.list<Kustomization & KubeObject>(KUSTOMIZE, 'Kustomization', {
                namespace: ns,
                labelSelector: 'stackflux.io/addon',
              })
            ).items;
            const byCluster = new Map<string, string | undefined>();
            for (const name of names) {
              const repo = repos.find((g) => g.metadata.name === `${name}-addons`);
              const own = ks.filter((k) => k.metadata.labels?.['stackflux.io/cluster'] === name);
              const shard = repo === undefined ? undefined : shardOf(repo);
              // c1 runs release v3 (four addons, step 3), the others v1 (three).
              if (shard === undefined || own.length !== (name === 'c1' ? 4 : 3)) return undefined;
              if (own.some((k) => shardOf(k) !== shard || k.spec.interval !== '7m')) return undefined;
              byCluster.set(name, shard);
            }
            return byCluster;
          },
          { timeoutMs: 180_000, intervalMs: 2_000 },
        );
        for (const shard of shards.values()) assert.match(shard ?? '', /^shard[0-2]$/);
        assert.ok(new Set(shards.values()).size > 1, 'the Clusters spread over more than one shard');
        // The controller still sees its Flux objects (now outside its own shard selector): Ready.
        await eventually(
          'all ClusterAddons Ready with the shard labels',
          async () => {
            const list = await client.list<CA>(API_VERSION, 'ClusterAddon', { namespace: ns });
            const ready = list.items.filter(
              (c) => names.includes(c.metadata.name ?? '') && cond(c, 'Ready')?.status === 'True',
            );
            return ready.length === names.length ? true : undefined;
          },
          { timeoutMs: 300_000, intervalMs: 2_000 },
        );
      }),
    ));
});
