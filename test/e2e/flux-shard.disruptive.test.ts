// Issue 22, the benign tenant's change queued in kustomize-controller behind another tenant's
// churn: a platform gives a tenant its own Flux controllers. Namespace A is labelled
// stackflux.io/flux-shard=<key>; the environment's Flux is sharded as Flux's sharding guide does it
// (its own controllers restarted with `--watch-label-selector=sharding.fluxcd.io/key notin (<key>)`, a second
// source-/kustomize-controller pair watching `sharding.fluxcd.io/key=<key>`). stackflux runs with
// --flux-shards=1 (one stackflux per namespace here, each with --namespace). A's Cluster's Flux
// objects carry the key, B's none; with A's shard kustomize-controller stopped, B's change is
// applied and A's waits; once started again A's lands. Disruptive: it restarts the environment's
// Flux controllers (and restores them at the end).
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ClusterAddon } from '../../controller/api/clusteraddon.ts';
import type { GitRepository, Kustomization } from '../../controller/api/flux.ts';
import { API_VERSION } from '../../controller/api/meta.ts';
import { KubeClient, type KubeObject, loadKubeConfig } from '../../controller/runtime/client.ts';
import { type ShardedFlux, shardFlux } from '../../hack/lib/fluxshard.ts';
import {
  createRepo,
  type Endpoints,
  startComponent,
  stopComponent,
  workloadKubeconfigSecret,
} from '../../hack/lib/testenv.ts';
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
  sleep,
} from '../support/e2e.ts';
import { eventually, uniqueName } from '../support/env.ts';

const env = { ...e2eEnv(), workloadKubeconfig: required('WORKLOAD_KUBECONFIG') };
const stateDir = required('STACKFLUX_TESTENV_DIR');
const client = new KubeClient(loadKubeConfig({ kubeconfig: env.kubeconfig }));
const workloadKubeconfigText = readFileSync(env.workloadKubeconfig, 'utf8');
const nsA = uniqueName('fshard-a');
const nsB = uniqueName('fshard-b');
const SHARD = uniqueName('tenant').slice(0, 40);
const work = mkdtempSync(join(tmpdir(), 'stackflux-flux-shard-'));
const tag = 'docker-ferrol-1-30-v1';
const SHARD_LABEL = 'sharding.fluxcd.io/key';
type CA = ClusterAddon & KubeObject;

const controllers: ControllerProcess[] = [];
let sharded: ShardedFlux | undefined;
const fleetUrls = new Map<string, string>();

const values = (region: string) => ({ 'cloud-config': { region } });

/** The tip of a Cluster's fleet branch, as the fleet repository advertises it. */
function tipOf(ns: string, cluster: string): string | undefined {
  const out = git(work, 'ls-remote', '--heads', fleetUrls.get(ns) ?? '', `stackflux/${ns}/${cluster}`);
  return out.split('\t')[0] || undefined;
}

/** The ClusterAddon once Ready on its branch's current tip (Flux applied that commit). */
async function readyOnTip(ns: string, name: string): Promise<CA | undefined> {
  const ca = await client.get<CA>(API_VERSION, 'ClusterAddon', name, ns);
  const tip = tipOf(ns, name);
  return cond(ca, 'Ready')?.status === 'True' && tip !== undefined && ca?.status?.fleetCommit === tip
    ? ca
    : undefined;
}

async function kustomizations(ns: string): Promise<(Kustomization & KubeObject)[]> {
  return (
    await client.list<Kustomization & KubeObject>('kustomize.toolkit.fluxcd.io/v1', 'Kustomization', {
      namespace: ns,
      labelSelector: 'stackflux.io/addon',
    })
  ).items;
}

async function setRegion(ns: string, region: string): Promise<void> {
  await client.mergePatch(CAPI, 'Cluster', 'c1', ns, {
    spec: { topology: { variables: [{ name: 'stackfluxAddonValues', value: values(region) }] } },
  });
}

describe('a tenant on its own Flux shard (stackflux.io/flux-shard): its changes never wait for the shared Flux', {
  timeout: 20 * 60_000,
}, () => {
  before(async () => {
    for (const ns of [nsA, nsB]) {
      await createTestNamespace(client, ns);
      const repoUrl = await createRepo(env as Endpoints, `${ns}-release`);
      fleetUrls.set(ns, await createRepo(env as Endpoints, `${ns}-fleet`));
      const repoDir = join(work, `release-${ns}`);
      initRepo(repoDir);
      cutRelease(repoDir, 'stack', { example: 'docker-ferrol-1-30', k8s: '1-30', version: 'v1' });
      push(repoDir, repoUrl, tag);
      await client.create(
        ferrolClusterStack(ns, 'ferrol', {
          versions: ['v1'],
          autoSubscribe: false,
          interval: '2m',
          source: { git: { url: repoUrl }, path: 'stack' },
        }),
      );
    }
    await client.mergePatch('v1', 'Namespace', nsA, undefined, {
      metadata: { labels: { 'stackflux.io/flux-shard': SHARD } },
    });
    sharded = await shardFlux(stateDir, [SHARD]);
    for (const ns of [nsA, nsB]) {
      controllers.push(
        await ControllerProcess.start({
          kubeconfig: env.kubeconfig,
          namespace: ns,
          cacheDir: join(work, `cache-${ns}`),
          concurrency: 4,
          extraArgs: [`--fleet-url=${fleetUrls.get(ns)}`, '--fleet-batch-window=2s', '--flux-shards=1'],
        }),
      );
      const { cskr } = releaseReaders(client, ns);
      await eventually(`${ns}: release resolved`, async () =>
        (await cskr(tag))?.status?.commit ? true : undefined,
      );
    }
  });

  after(async () => {
    for (const c of controllers) await c.stop();
    await sharded?.restore();
    for (const ns of [nsA, nsB]) await releaseAddonNamespace(client, ns);
    client.close();
    rmSync(work, { recursive: true, force: true });
  });

  it("labels A's Flux objects with its shard, applies them by the shard's controllers only, and never holds B behind A", async () => {
    const shardKc = sharded?.shards[0]?.components.find((n) => n.startsWith('kustomize-controller-')) ?? '';
    assert.ok(shardKc !== '', "the shard's kustomize-controller was started");
    await controllers[0]?.step(async () => {
      for (const ns of [nsA, nsB]) {
        await client.create(workloadKubeconfigSecret(ns, 'c1', workloadKubeconfigText) as KubeObject);
        await client.create(
          addonCluster(ns, 'c1', {
            podCidr: '10.244.0.0/16',
            className: tag,
            version: 'v1.30.4',
            values: values('r1'),
          }),
        );
      }
      for (const ns of [nsA, nsB])
        await eventually(`${ns}: Ready on its first commit`, () => readyOnTip(ns, 'c1'), {
          timeoutMs: 300_000,
        });

      // The labels: A's GitRepository and every Kustomization on the shard, B's on none.
      const repoA = await client.get<GitRepository & KubeObject>(
        'source.toolkit.fluxcd.io/v1',
        'GitRepository',
        'c1-addons',
        nsA,
      );
      assert.equal(repoA?.metadata.labels?.[SHARD_LABEL], SHARD);
      const ksA = await kustomizations(nsA);
      assert.ok(ksA.length > 0);
      for (const k of ksA) assert.equal(k.metadata.labels?.[SHARD_LABEL], SHARD, k.metadata.name);
      for (const k of await kustomizations(nsB)) assert.equal(k.metadata.labels?.[SHARD_LABEL], undefined);

      // Only the shard's kustomize-controller applies A: stopped, A's change waits and B's lands.
      const tipBefore = tipOf(nsA, 'c1');
      await stopComponent(stateDir, shardKc);
      try {
        await setRegion(nsA, 'r2');
        await setRegion(nsB, 'r2');
        await eventually(
          'B Ready on its new commit',
          async () => {
            const ca = await readyOnTip(nsB, 'c1');
            return ca !== undefined && (await kustomizations(nsB)).length > 0 ? ca : undefined;
          },
          { timeoutMs: 300_000 },
        );
        const tipA = await eventually('A: the change is on its branch', async () => {
          const ca = await client.get<CA>(API_VERSION, 'ClusterAddon', 'c1', nsA);
          const tip = tipOf(nsA, 'c1');
          return tip !== tipBefore && ca?.status?.fleetCommit === tip ? tip : undefined;
        });
        // Long enough for the unsharded kustomize-controller to have taken A, had it watched A.
        await sleep(15_000);
        for (const k of await kustomizations(nsA)) {
          assert.ok(
            !(k.status?.lastAttemptedRevision ?? '').endsWith(tipA),
            `${k.metadata.name}: nothing but the shard's kustomize-controller reconciles it`,
          );
        }
      } finally {
        await startComponent(stateDir, shardKc);
      }
      await eventually('A Ready on its new commit once its shard runs', () => readyOnTip(nsA, 'c1'), {
        timeoutMs: 300_000,
      });
    });
  });
});
