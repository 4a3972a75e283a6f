// Issue 23 point 4, end to end: a csctl release whose addon chart does NOT vendor its dependency
// (as the real scs2 stacks: Chart.yaml names a chart repository, charts/ is empty).
// stacks/docker-csoferrol-1-30 with cni's subchart cni-config taken out of charts/ and named by a
// version constraint in a Helm HTTP chart repository served by this test (a static file server:
// hack/stack-charts/cni-config packaged by `helm package`, indexed by `helm repo index`). `stackflux
// run` fetches it once when it validates the release (--allowed-chart-hosts / --insecure-chart-hosts
// let the test's plain-http 127.0.0.1 in); the release becomes Ready; the Cluster's addons become
// Ready in the workload cluster with exactly the objects CSO renders — the reference here is the
// real helm CLI after `helm dependency update` of the same stack. Release v2 names a repository on a
// host the policy does not allow: InvalidRelease naming the dependency, nothing fetched. Nothing
// here needs Cluster API's status, so the test writes none.
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ClusterAddon } from '../../controller/api/clusteraddon.ts';
import type { ClusterStackRelease } from '../../controller/api/clusterstackrelease.ts';
import { API_VERSION } from '../../controller/api/meta.ts';
import { KubeClient, type KubeObject, loadKubeConfig } from '../../controller/runtime/client.ts';
import { createRepo, type Endpoints } from '../../hack/lib/testenv.ts';
import { type ChartRepository, serveChartRepository } from '../support/chartrepo.ts';
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
  freePort,
  initRepo,
  installFixtureCrds,
  push,
  ROOT,
  releaseAddonNamespace,
  required,
  waitFor,
} from '../support/e2e.ts';
import { uniqueName } from '../support/env.ts';
import { runHelm } from '../support/goengine.ts';

const env = { ...e2eEnv(), workloadKubeconfig: required('WORKLOAD_KUBECONFIG') };
const client = new KubeClient(loadKubeConfig({ kubeconfig: env.kubeconfig }));
const workload = new KubeClient(loadKubeConfig({ kubeconfig: env.workloadKubeconfig }));
const ns = uniqueName('csctldeps');
const work = mkdtempSync(join(tmpdir(), 'stackflux-csctldeps-'));
const repoDir = join(work, 'release');
const ADDON_NS = 'kube-system';

type CA = ClusterAddon & KubeObject;
type CSKR = ClusterStackRelease & KubeObject;
type Obj = Record<string, unknown> & { apiVersion: string; kind: string; metadata: { name: string } };

let charts: ChartRepository;
/** Where v3's repository will be served once the test starts it (nothing listens there before). */
let laterPort = 0;
let later: ChartRepository | undefined;
let controller: ControllerProcess | undefined;
const step = controllerSteps(() => controller);
let applied: Obj[] = [];

/** cni's subchart no longer vendored: named in `repository` with a constraint, charts/ emptied. */
function unvendored(repository: string) {
  return (dir: string): void => {
    const chart = join(dir, 'cluster-addon', 'cni');
    rmSync(join(chart, 'charts'), { recursive: true, force: true });
    const file = join(chart, 'Chart.yaml');
    const text = readFileSync(file, 'utf8');
    assert.ok(text.includes('  - name: cni-config\n    version: 0.1.0\n'));
    writeFileSync(
      file,
      text.replace(
        '  - name: cni-config\n    version: 0.1.0\n',
        `  - name: cni-config\n    version: "~0.1"\n    repository: ${repository}\n`,
      ),
    );
  };
}

/** What CSO renders for `cluster` from the stack in `dir` after `helm dependency update`. */
function csoObjects(dir: string, cluster: Record<string, unknown>): Obj[] {
  const update = runHelm(['dependency', 'update', 'cluster-addon/cni'], dir);
  assert.equal(update.status, 0, update.stderr);
  return csoReleaseObjects(dir, tag('v1'), cluster) as Obj[];
}

const release = (v: string) => client.get<CSKR>(API_VERSION, 'ClusterStackRelease', tag(v), ns);

describe('a csctl addon chart whose dependency is fetched from a chart repository: Ready, rendered as CSO', {
  timeout: 15 * 60_000,
}, () => {
  before(async () => {
    charts = await serveChartRepository({}, [join(ROOT, 'hack', 'stack-charts', 'cni-config')]);
    await createTestNamespace(client, ns);
    // The release's ClusterClass templates (Flux applies them): this file must not depend on
    // another test having installed them first.
    await installFixtureCrds(client, 'capi-template-crds.yaml');
    const repoUrl = await createRepo(env as Endpoints, `${ns}-release`);
    const fleetUrl = await createRepo(env as Endpoints, `${ns}-fleet`);
    initRepo(repoDir);
    cutCsctlRelease(repoDir, 'docker-csoferrol-1-30', 'v1', (dir) => {
      servedClusterClass(dir);
      unvendored(charts.url)(dir);
    });
    cutCsctlRelease(repoDir, 'docker-csoferrol-1-30', 'v2', (dir) => {
      servedClusterClass(dir);
      unvendored('https://charts.example.com/stable')(dir);
    });
    laterPort = await freePort();
    cutCsctlRelease(repoDir, 'docker-csoferrol-1-30', 'v3', (dir) => {
      servedClusterClass(dir);
      unvendored(`http://127.0.0.1:${laterPort}/charts`)(dir);
    });
    push(repoDir, repoUrl, tag('v1'), tag('v2'), tag('v3'));
    controller = await ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: ns,
      cacheDir: join(work, 'cache'),
      extraArgs: [
        `--fleet-url=${fleetUrl}`,
        '--fleet-batch-window=1s',
        '--allowed-chart-hosts=127.0.0.1',
        '--insecure-chart-hosts=127.0.0.1',
      ],
    });
    await client.create(csoferrolClusterStack(ns, repoUrl, ['v1', 'v2', 'v3']));
  });

  after(async () => {
    await controller?.stop();
    await releaseAddonNamespace(client, ns);
    for (const o of applied)
      await workload.delete(o.apiVersion, o.kind, o.metadata.name, ADDON_NS).catch(() => undefined);
    await charts?.close();
    await later?.close();
    client.close();
    workload.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('v1 is Ready: its dependency fetched once from the chart repository', () =>
    step(async () => {
      const r = await waitFor('release v1 Ready', async () => {
        const got = await release('v1');
        return cond(got, 'Ready')?.status === 'True' ? got : undefined;
      });
      assert.equal(cond(r, 'Ready')?.status, 'True');
      const fetched = charts.requests().filter((p) => p.endsWith('.tgz'));
      assert.deepEqual(fetched, ['/charts/cni-config-0.1.0.tgz']);
    }));

  it('v2 names a host --allowed-chart-hosts does not list: InvalidRelease naming the dependency', () =>
    step(async () => {
      const r = await waitFor('release v2 InvalidRelease', async () => {
        const got = await release('v2');
        return cond(got, 'Ready')?.reason === 'InvalidRelease' ? got : undefined;
      });
      assert.match(
        cond(r, 'Ready')?.message ?? '',
        /cluster-addon\/cni\/Chart\.yaml: dependency cni-config: repository https:\/\/charts\.example\.com\/stable host charts\.example\.com is not in --allowed-chart-hosts/,
      );
    }));

  it('v3 names a repository not reachable yet: not Ready and retried; Ready once it is served', () =>
    step(async () => {
      const r = await waitFor('release v3 says its repository is unreachable', async () => {
        const got = await release('v3');
        return /unreachable/.test(cond(got, 'Ready')?.message ?? '') ? got : undefined;
      });
      assert.equal(cond(r, 'Ready')?.status, 'False');
      assert.match(
        cond(r, 'Ready')?.message ?? '',
        new RegExp(
          `dependency cni-config \\(version "~0\\.1"\\) from the chart repository index http://127\\.0\\.0\\.1:${laterPort}/charts/index\\.yaml: unreachable \\(ECONNREFUSED\\) \\(tried again in 60 s\\)`,
        ),
      );
      later = await serveChartRepository({}, [join(ROOT, 'hack', 'stack-charts', 'cni-config')], laterPort);
      await waitFor('release v3 Ready', async () => {
        const got = await release('v3');
        return cond(got, 'Ready')?.status === 'True' ? got : undefined;
      });
    }));

  it('a Cluster of v1: every addon Ready in the workload cluster with the objects CSO renders', () =>
    step(async () => {
      await createAddonCluster(client, env.workloadKubeconfig, ns, 'c1', {
        podCidr: '10.246.0.0/16',
        className: tag('v1'),
        version: 'v1.30.4',
      });
      const ca = await waitFor('c1 Ready at v1', async () => {
        const c = await client.get<CA>(API_VERSION, 'ClusterAddon', 'c1', ns);
        return cond(c, 'Ready')?.status === 'True' && c?.status?.release === tag('v1') ? c : undefined;
      });
      assert.deepEqual(
        ca.status?.addons?.map((a) => [a.name, a.ready]),
        [
          ['cni', true],
          ['metrics', true],
        ],
      );
      // The reference: the same stack as released, its dependency updated by the helm CLI.
      const ref = join(work, 'reference');
      cpSync(join(ROOT, 'stacks', 'docker-csoferrol-1-30'), ref, { recursive: true });
      servedClusterClass(ref);
      unvendored(charts.url)(ref);
      const cluster = await client.get<KubeObject>(CAPI, 'Cluster', 'c1', ns);
      assert.ok(cluster);
      const expected = csoObjects(ref, cluster as unknown as Record<string, unknown>);
      applied = expected;
      const cni = expected.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'cni-config');
      assert.deepEqual(
        cni?.data,
        { clusterName: 'c1', podCIDR: '10.246.0.0/16', mtu: '1400' },
        'the subchart rendered',
      );
      for (const want of expected) {
        const got = await workload.get<Obj & KubeObject>(
          want.apiVersion,
          want.kind,
          want.metadata.name,
          ADDON_NS,
        );
        assert.ok(got, `${want.kind} ${want.metadata.name} is in the workload cluster`);
        assert.deepEqual(got.data, want.data, `${want.kind} ${want.metadata.name}: data as CSO renders it`);
      }
      // Rendered from the release's resolution: the Cluster's render fetched nothing again (the
      // helm CLI's own `dependency update` above is the one other download).
      assert.equal(charts.requests().filter((p) => p.endsWith('.tgz')).length, 2);
    }));
});
