// Issue 22 row 7 end to end: a Cluster of namespace B naming namespace A's ClusterClass
// (classRef.namespace) gets nothing of A's release or central values unless A's ClusterStack opts
// in with spec.clusterNamespaceSelector, and does not keep A's releases from being collected.
// `stackflux run --shard=<own key>` over all namespaces (the shard keeps it to this file's
// objects), with a fleet repository; no kubeconfig Secret, so Flux applies nothing: what is
// checked is the ClusterAddon, the fleet branch and the releases. (No Cluster API controllers run:
// the Clusters are plain objects naming a ClusterClass.)
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ClusterAddon } from '../../controller/api/clusteraddon.ts';
import { API_VERSION } from '../../controller/api/meta.ts';
import type { KubeObject } from '../../controller/runtime/client.ts';
import { SHARD_LABEL } from '../../controller/runtime/manager.ts';
import { createRepo, type Endpoints } from '../../hack/lib/testenv.ts';
import {
  addonCluster,
  ControllerProcess,
  cond,
  controllerSteps,
  createTestNamespace,
  e2eSuite,
  ferrolClusterStack,
  ferrolTag,
  git,
  gone,
  initRepo,
  releaseAddonNamespace,
  releaseFerrol130,
  setClusterNamespaceSelector,
  waitFor,
} from '../support/e2e.ts';

const { env, client, ns: nsA, work, repoDir, cskr, releaseReady } = e2eSuite('xns');
const nsB = `${nsA}-b`;
const shard = nsA;
const TOKEN = `central-${nsA}-token`;
const SHARE_LABEL = 'stackflux.io/e2e-shares-with';
let controller: ControllerProcess | undefined;
let fleetUrl = '';
const step = controllerSteps(() => controller);

type CA = ClusterAddon & KubeObject;
const caddon = (): Promise<CA | undefined> => client.get<CA>(API_VERSION, 'ClusterAddon', 'tenant', nsB);

/** The tip of a branch of the fleet repository, or undefined when it does not exist. */
function fleetTip(branch: string): string | undefined {
  const out = git(work, 'ls-remote', fleetUrl, `refs/heads/${branch}`).trim();
  return out === '' ? undefined : out.split(/\s+/)[0];
}

/** The text of every file of the Cluster's branch. */
function branchText(branch: string): string {
  const dir = mkdtempSync(join(work, 'fleet-'));
  git(dir, 'clone', '-q', '--branch', branch, fleetUrl, '.');
  const files = git(dir, 'ls-files')
    .split('\n')
    .filter((f) => f !== '');
  return files.map((f) => readFileSync(join(dir, f), 'utf8')).join('\n');
}

describe("a Cluster naming another namespace's ClusterClass is served only by opt-in", {
  timeout: 15 * 60_000,
}, () => {
  before(async () => {
    await createTestNamespace(client, nsA);
    await client.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: nsB } });
    const repoUrl = await createRepo(env as Endpoints, nsA);
    fleetUrl = await createRepo(env as Endpoints, `${nsA}-fleet`);
    initRepo(repoDir);
    releaseFerrol130(repoDir, repoUrl, 'v1', 'v2');
    controller = await ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: '',
      cacheDir: join(work, 'cache'),
      extraArgs: [`--shard=${shard}`, `--fleet-url=${fleetUrl}`, '--fleet-batch-window=500ms'],
    });
    const stack = ferrolClusterStack(nsA, 'ferrol', {
      autoSubscribe: false,
      versions: ['v1'],
      interval: '3s',
      values: { 'cloud-config': { region: TOKEN } },
      source: { git: { url: repoUrl }, path: 'ferrol-1-30' },
    });
    stack.metadata.labels = { [SHARD_LABEL]: shard };
    await client.create(stack);
  });

  after(async () => {
    await controller?.stop();
    for (const n of [nsB, nsA]) await releaseAddonNamespace(client, n);
    client.close();
    rmSync(work, { recursive: true, force: true });
  });

  it("1. refused: a ClusterClassNotShared condition naming the ClusterStack, no branch, nothing of A's values", () =>
    step(async () => {
      await waitFor('v1 Ready', () => releaseReady(ferrolTag('v1')));
      const cluster = addonCluster(nsB, 'tenant', {
        podCidr: '10.9.0.0/16',
        className: ferrolTag('v1'),
        version: 'v1.30.4',
      });
      cluster.metadata.labels = { [SHARD_LABEL]: shard };
      (cluster.spec as { topology: { classRef: Record<string, string> } }).topology.classRef.namespace = nsA;
      await client.create(cluster);
      const refused = await waitFor('ClusterAddon refused', async () => {
        const c = await caddon();
        return cond(c, 'Ready')?.reason === 'ClusterClassNotShared' ? c : undefined;
      });
      assert.equal(cond(refused, 'Ready')?.status, 'False');
      assert.match(
        cond(refused, 'Ready')?.message ?? '',
        new RegExp(`ClusterStack ${nsA}/ferrol .*namespace ${nsB}`),
      );
      assert.match(cond(refused, 'Ready')?.message ?? '', /spec\.clusterNamespaceSelector/);
      assert.equal(fleetTip(`stackflux/${nsB}/tenant`), undefined, 'no fleet branch for the foreign Cluster');
      assert.equal(refused.status?.fleetCommit, undefined);
      assert.ok(!JSON.stringify(refused).includes(TOKEN));
    }));

  it("2. the foreign Cluster does not keep A's old release from being collected", () =>
    step(async () => {
      await client.mergePatch(API_VERSION, 'ClusterStack', 'ferrol', nsA, { spec: { versions: ['v2'] } });
      await waitFor('v2 Ready', () => releaseReady(ferrolTag('v2')));
      await gone('v1 collected although the foreign Cluster names it', () => cskr(ferrolTag('v1')));
      assert.equal(cond(await caddon(), 'Ready')?.reason, 'ClusterClassNotShared', 'still refused, by name');
    }));

  it('3. opted in: the selector selects B, the Cluster is served and keeps its release', () =>
    step(async () => {
      await client.mergePatch('v1', 'Namespace', nsB, undefined, {
        metadata: { labels: { [SHARE_LABEL]: nsA } },
      });
      const selector = { matchLabels: { [SHARE_LABEL]: nsA } };
      await waitFor('v1 back, in use by the served Cluster', async () => {
        if (!(await setClusterNamespaceSelector(client, nsA, 'ferrol', selector))) return undefined;
        const r = await cskr(ferrolTag('v1'));
        return r?.status?.clusters === 1 ? r : undefined;
      });
      const served = await waitFor('the ClusterAddon rendered at v1', async () => {
        const c = await caddon();
        return c?.status?.release === ferrolTag('v1') && c.status.fleetCommit !== undefined ? c : undefined;
      });
      assert.notEqual(cond(served, 'Ready')?.reason, 'ClusterClassNotShared');
      const tip = fleetTip(`stackflux/${nsB}/tenant`);
      assert.equal(tip, served.status?.fleetCommit);
      assert.ok(branchText(`stackflux/${nsB}/tenant`).includes(TOKEN), "A's central values, as A agreed");
    }));
});
