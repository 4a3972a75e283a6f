// Issue 22 row 6 end to end: the fleet host refuses one Cluster's rendered content. The fleet
// repository of this file (its own, so no other test sees the hook) gets a pre-receive hook on the
// test environment's Git server refusing any push whose new tree holds the words
// `refused-by-host` — what a host's push rules or server hooks do. Three Clusters land and are
// Ready; then all three change in one batch, one of them to content the host refuses: the other
// two land and are Ready on their new commit, the refused one gets Ready=False FleetPushRejected
// with the hook's words and keeps its previous commit; once its values are fixed it lands too,
// with the same stackflux process. Flux applies into the workload cluster (a *.workload file).
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ClusterAddon } from '../../controller/api/clusteraddon.ts';
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
} from '../support/e2e.ts';
import { eventually, uniqueName } from '../support/env.ts';

const env = { ...e2eEnv(), workloadKubeconfig: required('WORKLOAD_KUBECONFIG') };
const client = new KubeClient(loadKubeConfig({ kubeconfig: env.kubeconfig }));
const workloadKubeconfigText = readFileSync(env.workloadKubeconfig, 'utf8');
const ns = uniqueName('fleet-refused');
const work = mkdtempSync(join(tmpdir(), 'stackflux-fleet-refused-'));
const tag = 'docker-ferrol-1-30-v1';
const CLUSTERS = ['ok-a', 'ok-b', 'bad'];
type CA = ClusterAddon & KubeObject;

/** The host's rule: no pushed tree may hold the words refused-by-host (checked per ref). */
const PRE_RECEIVE = `#!/bin/sh
status=0
while read old new ref; do
  case "$new" in 0000000000000000000000000000000000000000) continue ;; esac
  if git grep -q -e refused-by-host "$new" --; then
    echo "push rule: $ref holds the words refused-by-host" >&2
    status=1
  fi
done
exit $status
`;

let controller: ControllerProcess | undefined;
let fleetUrl = '';

const branchOf = (cluster: string) => `stackflux/${ns}/${cluster}`;
const values = (region: string) => ({ 'cloud-config': { region } });

/** Branch → tip, as the fleet repository advertises it. */
function fleetTips(): Map<string, string> {
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

/** The region in a Cluster's cloud.conf on its fleet branch. */
function regionOnBranch(cluster: string): string | undefined {
  const dir = mkdtempSync(join(work, 'clone-'));
  try {
    git(dir, 'clone', '-q', '--branch', branchOf(cluster), fleetUrl, '.');
    return /region = (\S+)/.exec(git(dir, 'grep', '-h', 'region = ', 'HEAD', '--', 'cloud-config'))?.[1];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function caddon(name: string): Promise<CA | undefined> {
  return client.get<CA>(API_VERSION, 'ClusterAddon', name, ns);
}

/** The ClusterAddon once Ready on the branch's current tip (the commit Flux applied). */
async function readyOnTip(name: string): Promise<CA | undefined> {
  const ca = await caddon(name);
  const tip = fleetTips().get(branchOf(name));
  return cond(ca, 'Ready')?.status === 'True' && tip !== undefined && ca?.status?.fleetCommit === tip
    ? ca
    : undefined;
}

async function setRegion(cluster: string, region: string): Promise<void> {
  await client.mergePatch(CAPI, 'Cluster', cluster, ns, {
    spec: { topology: { variables: [{ name: 'stackfluxAddonValues', value: values(region) }] } },
  });
}

describe('the fleet host refuses one Cluster branch: the others land, the refused one waits for a fix', {
  timeout: 15 * 60_000,
}, () => {
  before(async () => {
    await createTestNamespace(client, ns);
    const repoUrl = await createRepo(env as Endpoints, `${ns}-release`);
    fleetUrl = await createRepo(env as Endpoints, `${ns}-fleet`);
    const hook = join(required('STACKFLUX_TESTENV_DIR'), 'git', `${ns}-fleet.git`, 'hooks', 'pre-receive');
    writeFileSync(hook, PRE_RECEIVE);
    chmodSync(hook, 0o755);
    const repoDir = join(work, 'release');
    initRepo(repoDir);
    cutRelease(repoDir, 'stack', { example: 'docker-ferrol-1-30', k8s: '1-30', version: 'v1' });
    push(repoDir, repoUrl, tag);
    controller = await ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: ns,
      cacheDir: join(work, 'cache'),
      concurrency: 4,
      extraArgs: [`--fleet-url=${fleetUrl}`, '--fleet-batch-window=2s'],
    });
    await client.create(
      ferrolClusterStack(ns, 'ferrol', {
        versions: ['v1'],
        autoSubscribe: false,
        interval: '2m',
        source: { git: { url: repoUrl }, path: 'stack' },
      }),
    );
    const { cskr } = releaseReaders(client, ns);
    await eventually('release resolved', async () => ((await cskr(tag))?.status?.commit ? true : undefined));
  });

  after(async () => {
    await controller?.stop();
    await releaseAddonNamespace(client, ns);
    client.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('lands the others, holds the refused branch at its previous commit, and lands it once fixed', async () => {
    const c = controller as ControllerProcess;
    await c.step(async () => {
      for (const name of CLUSTERS) {
        await client.create(workloadKubeconfigSecret(ns, name, workloadKubeconfigText) as KubeObject);
        await client.create(
          addonCluster(ns, name, {
            podCidr: '10.244.0.0/16',
            className: tag,
            version: 'v1.30.4',
            values: values('r1'),
          }),
        );
      }
      for (const name of CLUSTERS)
        await eventually(`${name} Ready on its first commit`, () => readyOnTip(name), { timeoutMs: 300_000 });
      const before = fleetTips();

      // One batch: two good changes and one the host refuses.
      await setRegion('ok-a', 'r2');
      await setRegion('bad', 'refused-by-host');
      await setRegion('ok-b', 'r2');

      const refused = await eventually(
        'bad: Ready=False FleetPushRejected',
        async () => {
          const ca = await caddon('bad');
          return cond(ca, 'Ready')?.reason === 'FleetPushRejected' ? ca : undefined;
        },
        { timeoutMs: 180_000 },
      );
      const ready = cond(refused, 'Ready');
      assert.equal(ready?.status, 'False');
      assert.match(ready?.message ?? '', new RegExp(`writing fleet branch ${branchOf('bad')} failed`));
      assert.match(
        ready?.message ?? '',
        /pre-receive hook declined: push rule: refs\/heads\/\S+ holds the words refused-by-host/,
      );
      assert.match(ready?.message ?? '', /stays at its previous commit/);

      for (const name of ['ok-a', 'ok-b']) {
        await eventually(
          `${name} Ready on its new commit`,
          async () => (regionOnBranch(name) === 'r2' ? readyOnTip(name) : undefined),
          { timeoutMs: 300_000 },
        );
      }
      const held = fleetTips();
      assert.equal(held.get(branchOf('bad')), before.get(branchOf('bad')), 'the refused branch did not move');
      assert.equal(regionOnBranch('bad'), 'r1', 'the refused Cluster keeps its last good content');
      assert.equal(held.size, CLUSTERS.length, 'no branch deleted');
      assert.equal((await caddon('bad'))?.status?.fleetCommit, before.get(branchOf('bad')));

      // The fix lands through the same process, without waiting for a restart.
      await setRegion('bad', 'r3');
      await eventually(
        'bad Ready on its fixed commit',
        async () => (regionOnBranch('bad') === 'r3' ? readyOnTip('bad') : undefined),
        { timeoutMs: 300_000 },
      );
      assert.ok(c.running, 'stackflux was not restarted');
      assert.equal(c.logged('fleet write failed; retrying with backoff').length, 0, 'no whole-fleet failure');
    });
  });
});
