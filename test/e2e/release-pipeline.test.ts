// Issue 4 end to end: `stackflux run` as a subprocess against the real test environment (API
// server + kube-controller-manager, Flux source- and kustomize-controller, smart-HTTP Git server).
// A release repo is built from stacks/docker-ferrol-1-30 (and -1-31); tags are pushed as the
// steps need them. The steps share state and run in order (acceptance 1–7 of issue 4).
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ClusterStack } from '../../controller/api/clusterstack.ts';
import { API_VERSION, LABEL_SOURCE_CREDENTIALS } from '../../controller/api/meta.ts';
import type { KubeObject } from '../../controller/runtime/client.ts';
import { signBody } from '../../controller/sources/webhook.ts';
import { createRepo, type Endpoints } from '../../hack/lib/testenv.ts';
import {
  CAPI,
  ControllerProcess,
  type CSKR,
  cond,
  controllerSteps,
  createTestNamespace,
  cutRelease,
  deleteTestNamespace,
  e2eSuite,
  freePort,
  git,
  gone,
  initRepo,
  keptWhileInUse,
  push,
  releaseFerrol130,
  sleep,
  tagHead,
  waitFor,
} from '../support/e2e.ts';

const { env, client, ns, work, repoDir, cskr, releaseReady, clusterClass } = e2eSuite('release-pipeline');
const hookDir = join(work, 'hook');
const cacheDir = join(work, 'cache');
const WEBHOOK_SECRET = 'e2e-webhook-secret';

type CSK = ClusterStack & KubeObject;

// --- the controller subprocess ---------------------------------------------------------------
let controller: ControllerProcess | undefined;
let webhookUrl = '';

async function startController(): Promise<void> {
  controller = await ControllerProcess.start({
    kubeconfig: env.kubeconfig,
    namespace: ns,
    cacheDir,
    webhookSecret: WEBHOOK_SECRET,
  });
  webhookUrl = controller.webhookUrl;
}

/** Runs a step; on failure prints the controller's log tail. */
const step = controllerSteps(() => controller);

// --- reading state ---------------------------------------------------------------------------
async function csk(name: string): Promise<CSK | undefined> {
  return client.get<CSK>(API_VERSION, 'ClusterStack', name, ns);
}
async function releasesOf(stack: string): Promise<string[]> {
  const list = await client.list<CSKR>(API_VERSION, 'ClusterStackRelease', { namespace: ns });
  return list.items
    .filter((r) => r.spec.clusterStack === stack)
    .map((r) => r.metadata.name ?? '')
    .sort();
}

function clusterStack(
  name: string,
  spec: Partial<ClusterStack['spec']> & { source: ClusterStack['spec']['source'] },
): CSK {
  return {
    apiVersion: API_VERSION,
    kind: 'ClusterStack',
    metadata: { name, namespace: ns },
    spec: { provider: 'docker', name: 'ferrol', kubernetesVersion: '1.30', noProvider: true, ...spec },
  } as CSK;
}

async function postWebhook(body: string, signature: string): Promise<Response> {
  return fetch(webhookUrl, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-github-event': 'push',
      'x-hub-signature-256': signature,
    },
    body,
  });
}

// --- the steps -------------------------------------------------------------------------------
describe('release pipeline: ClusterStack → ClusterStackRelease → Flux', { timeout: 15 * 60_000 }, () => {
  let repoUrl = '';
  let hookUrl = '';
  const tag = (v: string) => `docker-ferrol-1-30-${v}`;

  before(async () => {
    await createTestNamespace(client, ns);
    repoUrl = await createRepo(env as Endpoints, ns);
    hookUrl = await createRepo(env as Endpoints, `${ns}-hook`);
    for (const dir of [repoDir, hookDir]) initRepo(dir);
    await startController();
  });

  after(async () => {
    // Delete the namespace while the controller still runs: it removes the release-in-use
    // finalizers (no Cluster uses the releases any more), so the namespace can go away.
    await deleteTestNamespace(client, ns);
    await controller?.stop();
    client.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('1. autoSubscribe: only the latest release (v2) exists, Flux applies its ClusterClass, malformed tags are counted', () =>
    step(async () => {
      cutRelease(repoDir, 'ferrol-1-30', { example: 'docker-ferrol-1-30', k8s: '1-30', version: 'v1' });
      cutRelease(repoDir, 'ferrol-1-31', { example: 'docker-ferrol-1-31', k8s: '1-31', version: 'v1' });
      cutRelease(repoDir, 'ferrol-1-30', { example: 'docker-ferrol-1-30', k8s: '1-30', version: 'v2' });
      cutRelease(repoDir, 'ferrol-1-31', { example: 'docker-ferrol-1-31', k8s: '1-31', version: 'v2' });
      // Another stack, an unrelated tag, and two malformed look-alikes of ours.
      tagHead(
        repoDir,
        'docker-other-1-30-v1',
        'unrelated',
        'docker-ferrol-1-30-v03',
        'docker-ferrol-1-30-v2-rc1',
      );
      git(repoDir, 'push', '-q', '--tags', repoUrl, 'main');

      await client.create(
        clusterStack('ferrol', {
          autoSubscribe: true,
          interval: '5s',
          source: { git: { url: repoUrl }, path: 'ferrol-1-30' },
        }),
      );
      const v2 = await waitFor('release v2 Ready', () => releaseReady(tag('v2')));
      assert.match(v2.status?.commit ?? '', /^[0-9a-f]{40}$/);
      assert.equal(v2.status?.kubernetesVersion, 'v1.30.4');
      assert.equal(v2.status?.lastAppliedRevision, `refs/tags/${tag('v2')}@sha1:${v2.status?.commit}`);
      assert.ok(await clusterClass(tag('v2')), 'ClusterClass docker-ferrol-1-30-v2 applied by Flux');
      assert.deepEqual(await releasesOf('ferrol'), [tag('v2')]);
      assert.equal(await cskr(tag('v1')), undefined, 'v1 is not subscribed');

      const cs = await waitFor('ClusterStack Ready with latest v2', async () => {
        const c = await csk('ferrol');
        return cond(c, 'Ready')?.status === 'True' && c?.status?.latestRelease === tag('v2') ? c : undefined;
      });
      assert.equal(cs.status?.usableVersions, 'v2');
      assert.equal(cs.status?.source?.malformed, 2);
      assert.deepEqual(cs.status?.source?.malformedTags?.map((m) => m.tag).sort(), [
        'docker-ferrol-1-30-v03',
        'docker-ferrol-1-30-v2-rc1',
      ]);
      assert.equal(cs.status?.source?.matching, 2);
      assert.equal(cond(cs, 'SourceReady')?.status, 'True');
    }));

  it('2. a new tag v3 becomes Ready; v2 is removed only after that, and Flux prunes its ClusterClass', () =>
    step(async () => {
      releaseFerrol130(repoDir, repoUrl, 'v3');
      // Observe: v2 must never be gone while v3 is not Ready (read v2 first, then v3).
      const violations: string[] = [];
      await waitFor(
        'v3 Ready and v2 deleted',
        async () => {
          const v2 = await cskr(tag('v2'));
          const v3 = await cskr(tag('v3'));
          const v3Ready = cond(v3, 'Ready')?.status === 'True';
          if (v2 === undefined && !v3Ready) violations.push('v2 gone while v3 not Ready');
          return v2 === undefined && v3Ready ? true : undefined;
        },
        { intervalMs: 200 },
      );
      assert.deepEqual(violations, []);
      assert.deepEqual(await releasesOf('ferrol'), [tag('v3')]);
      await gone('ClusterClass v2 pruned by Flux', () => clusterClass(tag('v2')));
      assert.ok(await clusterClass(tag('v3')));
      await waitFor('ClusterStack latest v3', async () =>
        (await csk('ferrol'))?.status?.latestRelease === tag('v3') ? true : undefined,
      );
    }));

  it('3. a Cluster keeps v3 while it uses its class; v4 becomes Ready; deleting the Cluster GCs v3', () =>
    step(async () => {
      await client.create({
        apiVersion: CAPI,
        kind: 'Cluster',
        metadata: { name: 'c1', namespace: ns },
        spec: { topology: { classRef: { name: tag('v3') }, version: 'v1.30.4' } },
      });
      await waitFor('v3 counts its Cluster', async () =>
        (await cskr(tag('v3')))?.status?.clusters === 1 ? true : undefined,
      );
      releaseFerrol130(repoDir, repoUrl, 'v4');
      await waitFor('v4 Ready', () => releaseReady(tag('v4')));
      // The reconcile that saw v4 Ready recorded v3 as in use and kept it.
      await keptWhileInUse(client, ns, 'ferrol', tag('v3'), tag('v4'));
      assert.ok(await clusterClass(tag('v3')));
      assert.deepEqual(await releasesOf('ferrol'), [tag('v3'), tag('v4')]);

      await client.delete(CAPI, 'Cluster', 'c1', ns);
      await gone('v3 garbage-collected', () => cskr(tag('v3')));
      await gone('ClusterClass v3 pruned', () => clusterClass(tag('v3')));
      assert.deepEqual(await releasesOf('ferrol'), [tag('v4')]);
    }));

  it('4. pinned versions [v1] with autoSubscribe false → only v1', () =>
    step(async () => {
      await client.create({
        ...clusterStack('pinned', {
          kubernetesVersion: '1.31',
          autoSubscribe: false,
          versions: ['v1'],
          interval: '5s',
          source: { git: { url: repoUrl }, path: 'ferrol-1-31' },
        }),
      });
      const v1 = await waitFor('pinned 1.31 v1 Ready', () => releaseReady('docker-ferrol-1-31-v1'));
      assert.equal(v1.status?.kubernetesVersion, 'v1.31.2');
      await waitFor('ClusterStack pinned Ready', async () =>
        cond(await csk('pinned'), 'Ready')?.status === 'True' ? true : undefined,
      );
      assert.deepEqual(await releasesOf('pinned'), ['docker-ferrol-1-31-v1']);
      assert.equal(await cskr('docker-ferrol-1-31-v2'), undefined, 'v2 exists as a tag but is not pinned');
    }));

  it('5. webhook: a signed push re-lists at once; a wrongly signed one gets 401 and changes nothing', () =>
    step(async () => {
      const hookTag = (v: string) => `docker-hook-1-30-${v}`;
      cutRelease(hookDir, 'stack', {
        example: 'docker-ferrol-1-30',
        name: 'hook',
        k8s: '1-30',
        version: 'v1',
      });
      push(hookDir, hookUrl, hookTag('v1'));
      await client.create(
        clusterStack('hook', {
          name: 'hook',
          autoSubscribe: true,
          interval: '10m', // only the webhook can explain a re-list within the test's timeouts
          source: { git: { url: hookUrl }, path: 'stack' },
        }),
      );
      await waitFor('hook v1 exists', () => cskr(hookTag('v1')));
      const listedBefore = await waitFor(
        'hook listed',
        async () => (await csk('hook'))?.status?.source?.lastListedTime,
      );

      cutRelease(hookDir, 'stack', {
        example: 'docker-ferrol-1-30',
        name: 'hook',
        k8s: '1-30',
        version: 'v2',
      });
      push(hookDir, hookUrl, hookTag('v2'));
      const payload = JSON.stringify({
        ref: `refs/tags/${hookTag('v2')}`,
        repository: {
          clone_url: hookUrl.toUpperCase().replace(/\.GIT$/, '.git'),
          html_url: hookUrl.replace(/\.git$/, ''),
        },
      });

      const bad = await postWebhook(payload, signBody('wrong-secret', payload));
      assert.equal(bad.status, 401);
      const unsigned = await fetch(webhookUrl, { method: 'POST', body: payload });
      assert.equal(unsigned.status, 401);
      await sleep(3_000);
      assert.equal(await cskr(hookTag('v2')), undefined, 'a rejected webhook changes nothing');
      assert.equal((await csk('hook'))?.status?.source?.lastListedTime, listedBefore);

      const good = await postWebhook(payload, signBody(WEBHOOK_SECRET, payload));
      assert.equal(good.status, 202);
      assert.equal(((await good.json()) as { sources?: number }).sources, 1);
      await waitFor('hook v2 created after the signed webhook', () => cskr(hookTag('v2')), {
        timeoutMs: 120_000,
      });
    }));

  it('6. an unreachable source: the condition says so and nothing is deleted; it comes back and reconciliation resumes', () =>
    step(async () => {
      // A repository behind basic auth (the same repos), credentials from a Secret.
      const authRepo = `${env.gitServerAuthUrl}/${ns}.git`;
      const secret = (password: string) => ({
        apiVersion: 'v1',
        kind: 'Secret',
        // Labelled: stackflux sends a ClusterStack's Secret only with its owner's consent (issue 22).
        metadata: { name: 'git-auth', namespace: ns, labels: { [LABEL_SOURCE_CREDENTIALS]: 'true' } },
        stringData: { username: env.gitServerUser, password },
      });
      await client.apply(secret(env.gitServerPassword), { force: true, fieldManager: 'e2e' });
      await client.create(
        clusterStack('authed', {
          kubernetesVersion: '1.31',
          autoSubscribe: true,
          interval: '3s',
          source: { git: { url: authRepo, secretRef: { name: 'git-auth' } }, path: 'ferrol-1-31' },
        }),
      );
      await waitFor('authed 1.31 v2 Ready', () => releaseReady('docker-ferrol-1-31-v2'));

      // The server refuses us now.
      await client.apply(secret('wrong-password'), { force: true, fieldManager: 'e2e' });
      const down = await waitFor('SourceReady False', async () => {
        const c = await csk('authed');
        return cond(c, 'SourceReady')?.status === 'False' ? c : undefined;
      });
      assert.equal(cond(down, 'SourceReady')?.reason, 'AuthenticationFailed');
      assert.equal(cond(down, 'Ready')?.status, 'False');
      assert.equal(cond(down, 'Ready')?.reason, 'SourceUnavailable');
      assert.doesNotMatch(JSON.stringify(down.status), /wrong-password/);
      await sleep(4_000);
      assert.ok(await releaseReady('docker-ferrol-1-31-v2'), 'the existing release is kept');
      assert.deepEqual(await releasesOf('authed'), ['docker-ferrol-1-31-v2']);

      // A host that does not answer at all (a closed port) is reported too, without releases.
      const closed = await freePort();
      await client.create(
        clusterStack('unreachable', {
          interval: '3s',
          source: { git: { url: `http://127.0.0.1:${closed}/nothing.git` }, path: 'ferrol-1-30' },
        }),
      );
      const unreachable = await waitFor('unreachable SourceReady False', async () => {
        const c = await csk('unreachable');
        return cond(c, 'SourceReady')?.status === 'False' ? c : undefined;
      });
      assert.equal(cond(unreachable, 'SourceReady')?.reason, 'SourceUnreachable');
      assert.deepEqual(await releasesOf('unreachable'), []);

      // Back: the listing succeeds again and the ClusterStack is Ready.
      await client.apply(secret(env.gitServerPassword), { force: true, fieldManager: 'e2e' });
      await waitFor('authed Ready again', async () => {
        const c = await csk('authed');
        return cond(c, 'SourceReady')?.status === 'True' && cond(c, 'Ready')?.status === 'True'
          ? c
          : undefined;
      });
      assert.deepEqual(await releasesOf('authed'), ['docker-ferrol-1-31-v2']);
    }));

  it('7. a release with an invalid stack.yaml is Ready=False with the reason; the others are unaffected', () =>
    step(async () => {
      cutRelease(repoDir, 'ferrol-1-30', {
        example: 'docker-ferrol-1-30',
        k8s: '1-30',
        version: 'v5',
        stackYamlK8s: 'v1.29.8',
      });
      push(repoDir, repoUrl, tag('v5'));
      const v5 = await waitFor('v5 Ready=False', async () => {
        const r = await cskr(tag('v5'));
        return cond(r, 'Ready')?.status === 'False' ? r : undefined;
      });
      assert.equal(cond(v5, 'Ready')?.reason, 'InvalidRelease');
      assert.match(cond(v5, 'Ready')?.message ?? '', /kubernetesVersion "v1\.29\.8" does not match/);
      assert.equal(
        await client.get('kustomize.toolkit.fluxcd.io/v1', 'Kustomization', tag('v5'), ns),
        undefined,
        'nothing of an invalid release is applied',
      );
      assert.equal(await clusterClass(tag('v5')), undefined);
      const cs = await waitFor('ClusterStack reports the bad release', async () => {
        const c = await csk('ferrol');
        return cond(c, 'Ready')?.reason === 'ReleaseNotReady' ? c : undefined;
      });
      assert.match(cond(cs, 'Ready')?.message ?? '', /docker-ferrol-1-30-v5/);
      // v4 (the last good one) stays Ready and applied; the other ClusterStacks are untouched.
      assert.ok(await releaseReady(tag('v4')));
      assert.ok(await clusterClass(tag('v4')));
      assert.deepEqual(await releasesOf('ferrol'), [tag('v4'), tag('v5')]);
      assert.ok(await releaseReady('docker-ferrol-1-31-v1'));
      assert.equal(cond(await csk('pinned'), 'Ready')?.status, 'True');
    }));
});
