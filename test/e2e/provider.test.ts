// Issue 15 end to end: a ClusterStack's providerRef as the cluster-stack-operator honours it, with
// `stackflux run` against the real test environment (API server + kube-controller-manager GC, Flux,
// Git server). A TEST provider CRD pair (test/e2e/fixtures/provider-crds.yaml) is installed; no
// provider controller runs here, so THIS TEST PLAYS THE PROVIDER: it sets status.ready on the
// DockerClusterStackRelease objects stackflux creates, as the provider would once it prepared the
// release. The steps share state and run in order.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ClusterStack } from '../../controller/api/clusterstack.ts';
import { FLUX_KUSTOMIZE_API_VERSION } from '../../controller/api/flux.ts';
import { API_VERSION } from '../../controller/api/meta.ts';
import type { KubeObject } from '../../controller/runtime/client.ts';
import { createRepo, type Endpoints } from '../../hack/lib/testenv.ts';
import {
  ControllerProcess,
  type CSKR,
  cond,
  createTestNamespace,
  deleteTestNamespace,
  e2eSuite,
  ferrolTag,
  gone,
  initRepo,
  installTestProviderCrds,
  PROVIDER_API_VERSION,
  PROVIDER_OBJECT_KIND,
  PROVIDER_TEMPLATE_KIND,
  providerTemplate,
  releaseFerrol130,
  setProviderReady,
  stackflux,
  waitFor,
} from '../support/e2e.ts';

const { env, client, ns, work, repoDir, cskr, releaseReady, clusterClass } = e2eSuite('provider');
const TEMPLATE_SPEC = { nodeImages: ['ubuntu-capi-image-v1.30.4'], imageRegistry: 'registry.example.com' };

type CSK = ClusterStack & KubeObject;
type ProviderObject = KubeObject & {
  spec?: Record<string, unknown>;
  status?: { ready?: boolean };
};

const csk = (name: string) => client.get<CSK>(API_VERSION, 'ClusterStack', name, ns);
const providerObject = (name: string) =>
  client.get<ProviderObject>(PROVIDER_API_VERSION, PROVIDER_OBJECT_KIND, name, ns);
const kustomization = (name: string) => client.get(FLUX_KUSTOMIZE_API_VERSION, 'Kustomization', name, ns);
async function releases(): Promise<string[]> {
  const list = await client.list<CSKR>(API_VERSION, 'ClusterStackRelease', { namespace: ns });
  return list.items
    .filter((r) => r.spec.clusterStack === 'ferrol')
    .map((r) => r.metadata.name ?? '')
    .sort();
}

/** The ClusterStack's condition once its status is of its current generation. */
async function stackCondition(name: string, type: string, reason: string) {
  return waitFor(`ClusterStack ${name} ${type} reason ${reason}`, async () => {
    const c = await csk(name);
    const found = cond(c, type);
    return c?.status?.observedGeneration === c?.metadata.generation && found?.reason === reason
      ? found
      : undefined;
  });
}

/** The release's Ready condition with the given reason (of its current generation). */
async function releaseWaiting(name: string, reason: string, message: RegExp): Promise<CSKR> {
  return waitFor(`release ${name} Ready=False ${reason}`, async () => {
    const r = await cskr(name);
    const ready = cond(r, 'Ready');
    return r?.status?.observedGeneration === r?.metadata.generation &&
      ready?.status === 'False' &&
      ready.reason === reason &&
      message.test(ready.message ?? '')
      ? r
      : undefined;
  });
}

describe('providerRef: provider objects gate a release (issue 15)', { timeout: 15 * 60_000 }, () => {
  let controller: ControllerProcess | undefined;
  let repoUrl = '';
  const step = async (fn: () => Promise<void>) => {
    assert.ok(controller, 'the controller started');
    await controller.step(fn);
  };

  before(async () => {
    await createTestNamespace(client, ns);
    await installTestProviderCrds(client);
    repoUrl = await createRepo(env as Endpoints, ns);
    initRepo(repoDir);
    controller = await ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: ns,
      cacheDir: join(work, 'cache'),
    });
  });

  after(async () => {
    await deleteTestNamespace(client, ns);
    await controller?.stop();
    client.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('a new tag creates the provider object; the release waits (no Kustomization) until the provider is ready', () =>
    step(async () => {
      await client.create(providerTemplate('ferrol', ns, TEMPLATE_SPEC));
      releaseFerrol130(repoDir, repoUrl, 'v1');
      await client.create({
        apiVersion: API_VERSION,
        kind: 'ClusterStack',
        metadata: { name: 'ferrol', namespace: ns },
        spec: {
          provider: 'docker',
          name: 'ferrol',
          kubernetesVersion: '1.30',
          autoSubscribe: true,
          interval: '5s',
          providerRef: { apiVersion: PROVIDER_API_VERSION, kind: PROVIDER_TEMPLATE_KIND, name: 'ferrol' },
          source: { git: { url: repoUrl }, path: 'ferrol-1-30' },
        },
      } as CSK);

      const obj = await waitFor('DockerClusterStackRelease v1 created', () =>
        providerObject(ferrolTag('v1')),
      );
      const release = await cskr(ferrolTag('v1'));
      assert.ok(release, 'release v1 exists');
      assert.deepEqual(obj.spec, TEMPLATE_SPEC, "the template's spec.template.spec");
      assert.deepEqual(
        obj.metadata.ownerReferences?.map((o) => [o.kind, o.name, o.uid, o.controller]),
        [['ClusterStackRelease', ferrolTag('v1'), release.metadata.uid, true]],
      );
      const annotations = obj.metadata.annotations ?? {};
      assert.equal(annotations['stackflux.io/tag'], ferrolTag('v1'));
      assert.equal(annotations['stackflux.io/source-url'], repoUrl);
      assert.equal(annotations['stackflux.io/source-path'], 'ferrol-1-30');
      assert.match(annotations['stackflux.io/commit'] ?? '', /^[0-9a-f]{40}$/);

      // The controller has seen the object (not ready) and decided: no Kustomization, not Ready.
      const waiting = await releaseWaiting(
        ferrolTag('v1'),
        'WaitingForProvider',
        new RegExp(`${PROVIDER_OBJECT_KIND} ${ns}/${ferrolTag('v1')} ready: status\\.ready is not true yet`),
      );
      assert.equal(annotations['stackflux.io/commit'], waiting.status?.commit, 'the validated commit');
      assert.equal(cond(waiting, 'ProviderReady')?.status, 'False');
      assert.equal(
        await kustomization(ferrolTag('v1')),
        undefined,
        'no Kustomization while the provider works',
      );
      assert.equal(await clusterClass(ferrolTag('v1')), undefined, 'no ClusterClass applied');
      assert.equal((await csk('ferrol'))?.status?.usableVersions, undefined, 'v1 is not usable');
      const status = stackflux(['status', '-n', ns], { KUBECONFIG: env.kubeconfig });
      assert.equal(status.status, 0, status.stderr);
      assert.match(
        status.stdout,
        new RegExp(`provider/${PROVIDER_OBJECT_KIND}/${ferrolTag('v1')}\\s+False\\s+WaitingForProvider`),
      );
    }));

  it('the provider sets status.ready: the ClusterClass is applied and the release becomes Ready', () =>
    step(async () => {
      // Playing the provider's controller: it prepared the release and says so.
      await setProviderReady(client, ns, ferrolTag('v1'), true);
      const v1 = await waitFor('release v1 Ready', () => releaseReady(ferrolTag('v1')));
      assert.equal(cond(v1, 'ProviderReady')?.status, 'True');
      assert.equal(v1.status?.provider?.ready, true);
      assert.ok(await kustomization(ferrolTag('v1')), 'Kustomization created');
      assert.ok(await clusterClass(ferrolTag('v1')), 'ClusterClass applied by Flux');
    }));

  it('a provider object that goes unready is reported; the applied ClusterClass keeps running', () =>
    step(async () => {
      await setProviderReady(client, ns, ferrolTag('v1'), false);
      await releaseWaiting(ferrolTag('v1'), 'ProviderNotReady', /keeps running/);
      assert.ok(await kustomization(ferrolTag('v1')), 'the Kustomization is kept');
      assert.ok(await clusterClass(ferrolTag('v1')), 'the ClusterClass is kept');
      await setProviderReady(client, ns, ferrolTag('v1'), true);
      await waitFor('release v1 Ready again', () => releaseReady(ferrolTag('v1')));
    }));

  it('a missing template: a clear condition, no release created or deleted; back once it exists', () =>
    step(async () => {
      await client.delete(PROVIDER_API_VERSION, PROVIDER_TEMPLATE_KIND, 'ferrol', ns);
      await stackCondition('ferrol', 'Ready', 'ProviderTemplateNotFound');
      releaseFerrol130(repoDir, repoUrl, 'v2');
      // The ClusterStack listed v2 (2 releases of the stack) while the template was missing ...
      await waitFor('v2 listed', async () => {
        const c = await csk('ferrol');
        return c?.status?.source?.matching === 2 && cond(c, 'Ready')?.reason === 'ProviderTemplateNotFound'
          ? c
          : undefined;
      });
      // ... and neither created v2 nor deleted v1.
      assert.deepEqual(await releases(), [ferrolTag('v1')]);
      assert.ok(await providerObject(ferrolTag('v1')), 'the existing provider object stays');

      await client.create(providerTemplate('ferrol', ns, TEMPLATE_SPEC));
      await waitFor('DockerClusterStackRelease v2 created', () => providerObject(ferrolTag('v2')));
      await releaseWaiting(ferrolTag('v2'), 'WaitingForProvider', /status\.ready is not true yet/);
      assert.deepEqual(
        await releases(),
        [ferrolTag('v1'), ferrolTag('v2')],
        'v1 stays while v2 is not Ready (no gap)',
      );
    }));

  it('deleting a release removes its provider object (owner reference → garbage collection)', () =>
    step(async () => {
      const v1obj = await providerObject(ferrolTag('v1'));
      assert.ok(v1obj, 'v1 provider object exists');
      await setProviderReady(client, ns, ferrolTag('v2'), true);
      await waitFor('release v2 Ready', () => releaseReady(ferrolTag('v2')));
      // v2 Ready: v1 (not pinned, not in use) is garbage-collected, and with it its provider object.
      await gone('release v1 deleted', () => cskr(ferrolTag('v1')));
      await gone('provider object v1 removed by GC', () => providerObject(ferrolTag('v1')));
      assert.ok(await providerObject(ferrolTag('v2')), 'v2 provider object stays');
    }));

  it('neither providerRef nor noProvider, or a kind the server does not serve: conditions, /readyz stays OK', () =>
    step(async () => {
      const base = {
        provider: 'docker',
        kubernetesVersion: '1.30',
        interval: '5s',
        source: { git: { url: repoUrl }, path: 'ferrol-1-30' },
      };
      await client.create({
        apiVersion: API_VERSION,
        kind: 'ClusterStack',
        metadata: { name: 'neither', namespace: ns },
        spec: { ...base, name: 'neither' },
      } as CSK);
      await client.create({
        apiVersion: API_VERSION,
        kind: 'ClusterStack',
        metadata: { name: 'unserved', namespace: ns },
        spec: {
          ...base,
          name: 'unserved',
          providerRef: {
            apiVersion: PROVIDER_API_VERSION,
            kind: 'NotInstalledClusterStackReleaseTemplate',
            name: 'x',
          },
        },
      } as CSK);
      const neither = await stackCondition('neither', 'Ready', 'ProviderNotConfigured');
      assert.equal(neither.status, 'False');
      assert.match(neither.message ?? '', /providerRef.*noProvider/);
      const unserved = await stackCondition('unserved', 'Ready', 'ProviderKindNotServed');
      assert.match(unserved.message ?? '', /NotInstalledClusterStackReleaseTemplate/);
      const res = await fetch(controller?.readyzUrl ?? '');
      assert.equal(res.status, 200, 'an unserved provider kind does not make the controller unready');
      assert.deepEqual(await releases(), [ferrolTag('v2')], 'the other stacks did not touch ferrol');
      // Gone again before the diff step: ClusterStacks sharing one repository URL record listing times
      // of their own, and a snapshot holds one listing per URL.
      for (const name of ['neither', 'unserved']) {
        await client.delete(API_VERSION, 'ClusterStack', name, ns);
        await gone(`ClusterStack ${name} deleted`, () => csk(name));
      }
    }));

  it('stackflux diff on the settled namespace reports no changes (provider kinds are in the live snapshot)', async () => {
    // Settled: stop the controller so the snapshot is not taken in the middle of a write; a new one
    // starts afterwards for the cleanup (release finalizers).
    await controller?.stop();
    const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    const snapDir = join(work, 'snapshot');
    const r = stackflux([
      'diff',
      `--kubeconfig=${env.kubeconfig}`,
      `--namespace=${ns}`,
      `--cache-dir=${join(work, 'cache')}`,
      `--export-snapshot=${snapDir}`,
      `--now=${now}`,
    ]);
    controller = await ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: ns,
      cacheDir: join(work, 'cache'),
    });
    assert.equal(r.status, 0, `diff found changes:\n${r.stdout}\n${r.stderr}`);
    assert.equal(r.stdout, '');
  });
});
