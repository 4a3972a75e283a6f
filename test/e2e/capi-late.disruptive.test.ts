// Issue 11 defect 2 end to end: Cluster API is not served when stackflux starts. No release may be
// deleted then (nothing is known to be unused); once the Cluster CRD is installed the controller
// starts watching Clusters without a restart and garbage collection resumes.
// Disruptive: it deletes the cluster-scoped Cluster CRD of the shared test environment (and with it
// every Cluster) and installs it again at the end, so `npm test` runs it alone.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ClusterStack } from '../../controller/api/clusterstack.ts';
import { API_VERSION } from '../../controller/api/meta.ts';
import type { KubeObject } from '../../controller/runtime/client.ts';
import { createRepo, type Endpoints, readCrds, storageVersionOnly } from '../../hack/lib/testenv.ts';
import {
  CAPI,
  ControllerProcess,
  cond,
  controllerSteps,
  createTestNamespace,
  cutRelease,
  deleteTestNamespace,
  e2eSuite,
  ferrolTag,
  gone,
  initRepo,
  pinnedFerrolStack,
  push,
  required,
  waitFor,
} from '../support/e2e.ts';

const { env, client, ns, work, repoDir, cskr, releaseReady } = e2eSuite('capi-late');
const CRD_API = 'apiextensions.k8s.io/v1';
const CLUSTER_CRD = 'clusters.cluster.x-k8s.io';
let controller: ControllerProcess | undefined;
type CSK = ClusterStack & KubeObject;

const step = controllerSteps(() => controller);

/** Installs the Cluster CRD as hack/testenv does (storage version only) and waits until it is served. */
async function installClusterCrd(): Promise<void> {
  const [crd] = readCrds(required('CAPI_CRDS'), new Set([CLUSTER_CRD])).map(storageVersionOnly);
  if (crd === undefined) throw new Error(`${CLUSTER_CRD} not found in CAPI_CRDS`);
  await client.apply(crd as KubeObject, { force: true, fieldManager: 'stackflux-testenv' });
  await waitFor(`${CLUSTER_CRD} established`, async () => {
    const c = await client.get<KubeObject & { status?: { conditions?: { type: string; status: string }[] } }>(
      CRD_API,
      'CustomResourceDefinition',
      CLUSTER_CRD,
    );
    return c?.status?.conditions?.some((x) => x.type === 'Established' && x.status === 'True')
      ? true
      : undefined;
  });
}

describe('Cluster API appearing after start: fail-closed garbage collection', {
  timeout: 10 * 60_000,
}, () => {
  before(async () => {
    await createTestNamespace(client, ns);
    await client.delete(CRD_API, 'CustomResourceDefinition', CLUSTER_CRD);
    await gone(`${CLUSTER_CRD} deleted`, () => client.get(CRD_API, 'CustomResourceDefinition', CLUSTER_CRD));
    const repoUrl = await createRepo(env as Endpoints, ns);
    initRepo(repoDir);
    const tags = ['v1', 'v2'].map((version) =>
      cutRelease(repoDir, 'ferrol-1-30', { example: 'docker-ferrol-1-30', k8s: '1-30', version }),
    );
    push(repoDir, repoUrl, ...tags);
    controller = await ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: ns,
      cacheDir: join(work, 'cache'),
    });
    await client.create(pinnedFerrolStack(ns, repoUrl, ['v1']));
  });

  after(async () => {
    // Whatever happened, the shared environment gets its Cluster CRD back.
    if ((await client.get(CRD_API, 'CustomResourceDefinition', CLUSTER_CRD)) === undefined)
      await installClusterCrd();
    await deleteTestNamespace(client, ns);
    await controller?.stop();
    client.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('1. without Cluster API, a release that is no longer wanted is kept, and the ClusterStack says why', () =>
    step(async () => {
      await waitFor('v1 Ready', () => releaseReady(ferrolTag('v1')));
      await client.mergePatch(API_VERSION, 'ClusterStack', 'ferrol', ns, { spec: { versions: ['v2'] } });
      await waitFor('v2 Ready', () => releaseReady(ferrolTag('v2')));
      const cs = await waitFor('GarbageCollection waits for Cluster API', async () => {
        const c = await client.get<CSK>(API_VERSION, 'ClusterStack', 'ferrol', ns);
        return cond(c, 'GarbageCollection')?.reason === 'ClusterAPINotServed' ? c : undefined;
      });
      assert.equal(cond(cs, 'GarbageCollection')?.status, 'False');
      assert.match(
        cond(cs, 'GarbageCollection')?.message ?? '',
        new RegExp(`kept until then: ${ferrolTag('v1')}`),
      );
      assert.ok(
        cs.status?.summary?.some((s) => s.name === ferrolTag('v1')),
        'the kept release stays in the summary',
      );
      const v1 = await cskr(ferrolTag('v1'));
      assert.ok(v1, 'v1 is not deleted without a view of the Clusters');
      assert.equal(v1.metadata.deletionTimestamp, undefined);
    }));

  it('2. Cluster API installed later: Clusters are watched without a restart and garbage collection resumes', () =>
    step(async () => {
      await installClusterCrd();
      await client.create({
        apiVersion: CAPI,
        kind: 'Cluster',
        metadata: { name: 'late', namespace: ns },
        spec: { topology: { classRef: { name: ferrolTag('v2') }, version: 'v1.30.4' } },
      });
      await waitFor('v2 counts the Cluster created after start', async () =>
        (await cskr(ferrolTag('v2')))?.status?.clusters === 1 ? true : undefined,
      );
      await gone('v1 collected once every Cluster can be seen', () => cskr(ferrolTag('v1')));
      const cs = await waitFor('GarbageCollection condition cleared', async () => {
        const c = await client.get<CSK>(API_VERSION, 'ClusterStack', 'ferrol', ns);
        return cond(c, 'GarbageCollection') === undefined ? c : undefined;
      });
      assert.equal(cs.status?.summary?.find((s) => s.name === ferrolTag('v2'))?.inUse, true);
      assert.ok(controller?.running, 'the same controller process, no restart');
    }));
});
