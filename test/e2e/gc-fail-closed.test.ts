// Issue 11 defect 2 end to end: garbage collection counts every Cluster as "in use", whatever
// its shard or namespace, and a changed kubernetesVersion never deletes a release a Cluster uses.
// `stackflux run --shard=a --namespace=<ns>` as a subprocess against the real test environment.
// (No Cluster API controllers run here: the Clusters are plain objects naming a ClusterClass,
// which is all the in-use check reads.)
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ClusterStack } from '../../controller/api/clusterstack.ts';
import { API_VERSION } from '../../controller/api/meta.ts';
import type { KubeObject } from '../../controller/runtime/client.ts';
import { SHARD_LABEL } from '../../controller/runtime/manager.ts';
import { createRepo, type Endpoints } from '../../hack/lib/testenv.ts';
import {
  CAPI,
  ControllerProcess,
  controllerSteps,
  createTestNamespace,
  cutRelease,
  deleteTestNamespace,
  e2eSuite,
  gone,
  initRepo,
  keptWhileInUse,
  pinnedFerrolStack,
  push,
  setClusterNamespaceSelector,
  waitFor,
} from '../support/e2e.ts';

const { env, client, ns, work, repoDir, cskr, releaseReady } = e2eSuite('gc-fail-closed');
const otherNs = `${ns}-other`;
const v = (k8s: string, version: string) => `docker-ferrol-${k8s}-${version}`;
let controller: ControllerProcess | undefined;

const step = controllerSteps(() => controller);

function cluster(name: string, namespace: string, className: string, shard?: string): KubeObject {
  return {
    apiVersion: CAPI,
    kind: 'Cluster',
    metadata: { name, namespace, ...(shard !== undefined ? { labels: { [SHARD_LABEL]: shard } } : {}) },
    spec: {
      topology: {
        classRef: { name: className, ...(namespace !== ns ? { namespace: ns } : {}) },
        version: 'v1.30.4',
      },
    },
  };
}

async function patchStack(spec: Partial<ClusterStack['spec']>): Promise<void> {
  await client.mergePatch(API_VERSION, 'ClusterStack', 'ferrol', ns, { spec });
}

async function stillThere(name: string): Promise<void> {
  const r = await cskr(name);
  assert.ok(r, `${name} was deleted although a Cluster uses it`);
  assert.equal(r.metadata.deletionTimestamp, undefined, `${name} is being deleted although in use`);
}

describe('garbage collection counts every Cluster, in every shard and namespace', {
  timeout: 10 * 60_000,
}, () => {
  before(async () => {
    await createTestNamespace(client, ns);
    await client.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: otherNs } });
    const repoUrl = await createRepo(env as Endpoints, ns);
    initRepo(repoDir);
    const tags = [
      cutRelease(repoDir, 'ferrol-1-30', { example: 'docker-ferrol-1-30', k8s: '1-30', version: 'v1' }),
      cutRelease(repoDir, 'ferrol-1-30', { example: 'docker-ferrol-1-30', k8s: '1-30', version: 'v2' }),
      cutRelease(repoDir, 'ferrol-1-31', { example: 'docker-ferrol-1-31', k8s: '1-31', version: 'v1' }),
    ];
    push(repoDir, repoUrl, ...tags);
    controller = await ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: ns,
      cacheDir: join(work, 'cache'),
      extraArgs: ['--shard=a'],
    });
    await client.create(pinnedFerrolStack(ns, repoUrl, ['v1'], { [SHARD_LABEL]: 'a' }));
  });

  after(async () => {
    for (const n of [ns, otherNs]) await deleteTestNamespace(client, n);
    await controller?.stop();
    client.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('1. a Cluster of another shard keeps the release it uses', () =>
    step(async () => {
      await waitFor('v1 Ready', () => releaseReady(v('1-30', 'v1')));
      await client.create(cluster('other-shard', ns, v('1-30', 'v1'), 'b'));
      await patchStack({ versions: ['v2'] });
      await waitFor('v2 Ready', () => releaseReady(v('1-30', 'v2')));
      await keptWhileInUse(client, ns, 'ferrol', v('1-30', 'v1'), v('1-30', 'v2'));
      await stillThere(v('1-30', 'v1'));
    }));

  it('2. a changed kubernetesVersion deletes the unused release and keeps the used one in the summary', () =>
    step(async () => {
      await client.mergePatch(API_VERSION, 'ClusterStack', 'ferrol', ns, {
        spec: { kubernetesVersion: '1.31', versions: ['v1'], source: { path: 'ferrol-1-31' } },
      });
      await waitFor('1.31 v1 Ready', () => releaseReady(v('1-31', 'v1')));
      await gone('the unused 1.30 v2 deleted', () => cskr(v('1-30', 'v2')));
      await keptWhileInUse(client, ns, 'ferrol', v('1-30', 'v1'), v('1-31', 'v1'));
      await stillThere(v('1-30', 'v1'));
    }));

  it('3. a Cluster of another namespace naming the class here keeps it (where the ClusterStack shares with it); without Clusters it goes', () =>
    step(async () => {
      // Issue 22: another namespace's Cluster counts only where the ClusterStack serves it.
      await waitFor('the ClusterStack shares with the other namespace', async () =>
        (await setClusterNamespaceSelector(client, ns, 'ferrol', {
          matchLabels: { 'kubernetes.io/metadata.name': otherNs },
        }))
          ? true
          : undefined,
      );
      await client.create(cluster('elsewhere', otherNs, v('1-30', 'v1')));
      await waitFor('v1 counts both Clusters', async () =>
        (await cskr(v('1-30', 'v1')))?.status?.clusters === 2 ? true : undefined,
      );
      await client.delete(CAPI, 'Cluster', 'other-shard', ns);
      await waitFor("v1 counts the other namespace's Cluster", async () =>
        (await cskr(v('1-30', 'v1')))?.status?.clusters === 1 ? true : undefined,
      );
      await keptWhileInUse(client, ns, 'ferrol', v('1-30', 'v1'), v('1-31', 'v1'));
      await stillThere(v('1-30', 'v1'));
      await client.delete(CAPI, 'Cluster', 'elsewhere', otherNs);
      await gone('v1 collected once no Cluster uses it', () => cskr(v('1-30', 'v1')));
    }));
});
