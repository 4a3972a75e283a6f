// Issue 6 acceptance: the controller started with ONLY the RBAC that `stackflux install --export`
// generates (a ServiceAccount token from the TokenRequest API, not admin) passes the core of the
// release-pipeline scenario. Any 403 in its log fails the test with the log lines.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ClusterStack } from '../../controller/api/clusterstack.ts';
import { API_VERSION } from '../../controller/api/meta.ts';
import { KubeClient, type KubeObject, loadKubeConfig } from '../../controller/runtime/client.ts';
import { createRepo, type Endpoints } from '../../hack/lib/testenv.ts';
import {
  CAPI,
  ControllerProcess,
  type CSKR,
  cond,
  cutRelease,
  deleteTestNamespace,
  e2eEnv,
  gone,
  initRepo,
  installTestProviderCrds,
  keptWhileInUse,
  PROVIDER_API_VERSION,
  PROVIDER_GROUP,
  PROVIDER_OBJECT_KIND,
  PROVIDER_TEMPLATE_KIND,
  providerTemplate,
  push,
  releaseFerrol130,
  releaseReaders,
  setProviderReady,
  waitFor,
} from '../support/e2e.ts';
import { eventually, uniqueName } from '../support/env.ts';
import { aggregatedRulesInclude, installGenerated, writeServiceAccountKubeconfig } from '../support/rbac.ts';

const env = e2eEnv();
const admin = new KubeClient(loadKubeConfig({ kubeconfig: env.kubeconfig }));
const ns = uniqueName('rbac');
const work = mkdtempSync(join(tmpdir(), 'stackflux-rbac-'));
const repoDir = join(work, 'repo');
const saKubeconfig = join(work, 'kubeconfig');
const tag = (v: string) => `docker-ferrol-1-30-${v}`;

/** Log lines that show the API server refusing the controller. */
function forbidden(lines: readonly string[]): string[] {
  return lines.filter((l) => /\b403\b|forbidden/i.test(l));
}

const { cskr, releaseReady, clusterClass } = releaseReaders(admin, ns);
async function releases(): Promise<string[]> {
  const list = await admin.list<CSKR>(API_VERSION, 'ClusterStackRelease', { namespace: ns });
  return list.items.map((r) => r.metadata.name ?? '').sort();
}

describe('the controller with only the generated RBAC', { timeout: 15 * 60_000 }, () => {
  let controller: ControllerProcess | undefined;
  let clusterScoped: KubeObject[] = [];
  let repoUrl = '';

  /** A step: on failure the log tail; afterwards no 403 may be in the log. */
  async function step(fn: () => Promise<void>): Promise<void> {
    assert.ok(controller, 'the controller started');
    await controller.step(fn);
    assert.deepEqual(forbidden(controller.logLines), [], 'the controller was refused by the API server');
  }

  before(async () => {
    const installed = await installGenerated(admin, ns);
    clusterScoped = installed.clusterScoped;
    await writeServiceAccountKubeconfig(admin, ns, installed.serviceAccount, env.kubeconfig, saKubeconfig);
    // The token is not admin: it may not, for example, list Secrets.
    const sa = new KubeClient(loadKubeConfig({ kubeconfig: saKubeconfig }));
    await assert.rejects(sa.list('v1', 'Secret', { namespace: ns }), /403|forbidden/i);
    sa.close();
    repoUrl = await createRepo(env as Endpoints, ns);
    initRepo(repoDir);
    controller = await ControllerProcess.start({
      kubeconfig: saKubeconfig,
      namespace: ns,
      cacheDir: join(work, 'cache'),
      // Leader election on a Lease in the controller's namespace (the generated Role).
      extraArgs: ['--leader-elect', `--leader-election-namespace=${ns}`],
      env: { KUBECONFIG: saKubeconfig },
    });
  });

  after(async () => {
    // The controller (still running) removes the release-in-use finalizers; then the namespace goes.
    await deleteTestNamespace(admin, ns);
    await controller?.stop();
    for (const obj of clusterScoped)
      await admin.delete(obj.apiVersion, obj.kind, obj.metadata.name ?? '').catch(() => undefined);
    admin.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('autoSubscribe: the latest release becomes Ready and Flux applies its ClusterClass', () =>
    step(async () => {
      releaseFerrol130(repoDir, repoUrl, 'v1', 'v2');
      await admin.create({
        apiVersion: API_VERSION,
        kind: 'ClusterStack',
        metadata: { name: 'ferrol', namespace: ns },
        spec: {
          noProvider: true,
          provider: 'docker',
          name: 'ferrol',
          kubernetesVersion: '1.30',
          autoSubscribe: true,
          interval: '5s',
          source: { git: { url: repoUrl }, path: 'ferrol-1-30' },
        },
      } as ClusterStack & KubeObject);
      const v2 = await waitFor('release v2 Ready', () => releaseReady(tag('v2')));
      assert.equal(v2.status?.lastAppliedRevision, `refs/tags/${tag('v2')}@sha1:${v2.status?.commit}`);
      assert.ok(await clusterClass(tag('v2')), 'ClusterClass v2 applied by Flux');
      assert.deepEqual(await releases(), [tag('v2')]);
      await waitFor('ClusterStack Ready with latest v2', async () => {
        const c = await admin.get<ClusterStack & KubeObject>(API_VERSION, 'ClusterStack', 'ferrol', ns);
        return cond(c, 'Ready')?.status === 'True' && c?.status?.latestRelease === tag('v2') ? c : undefined;
      });
      const lease = await admin.get('coordination.k8s.io/v1', 'Lease', 'stackflux-controller', ns);
      assert.ok(lease, 'the leader election Lease was taken with the generated Role');
    }));

  it('a new tag v3 becomes Ready and v2 is garbage-collected', () =>
    step(async () => {
      releaseFerrol130(repoDir, repoUrl, 'v3');
      await waitFor('v3 Ready', () => releaseReady(tag('v3')));
      await gone('v2 garbage-collected', () => cskr(tag('v2')));
      assert.deepEqual(await releases(), [tag('v3')]);
      await gone('ClusterClass v2 pruned by Flux', () => clusterClass(tag('v2')));
    }));

  it('a Cluster keeps v3 while v4 becomes Ready; deleting it GCs v3', () =>
    step(async () => {
      await admin.create({
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
      await keptWhileInUse(admin, ns, 'ferrol', tag('v3'), tag('v4'));
      assert.deepEqual(await releases(), [tag('v3'), tag('v4')]);

      await admin.delete(CAPI, 'Cluster', 'c1', ns);
      await gone('v3 garbage-collected', () => cskr(tag('v3')));
      assert.deepEqual(await releases(), [tag('v4')]);
    }));

  it('a provider ClusterRole labelled for aggregation grants the provider kinds (issue 15)', () =>
    step(async () => {
      await installTestProviderCrds(admin);
      // What a provider's install adds: a ClusterRole for its kinds, labelled for aggregation.
      const providerRole: KubeObject = {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRole',
        metadata: { name: `test-provider-${ns}`, labels: { 'stackflux.io/aggregate-to-controller': 'true' } },
        rules: [
          {
            apiGroups: [PROVIDER_GROUP],
            resources: ['dockerclusterstackreleasetemplates', 'dockerclusterstackreleases'],
            verbs: ['get', 'list', 'watch', 'create', 'patch'],
          },
        ],
      };
      await admin.create(providerRole);
      clusterScoped.push(providerRole);
      const bound = clusterScoped.find((o) => o.kind === 'ClusterRole' && o.aggregationRule !== undefined);
      await aggregatedRulesInclude(admin, bound?.metadata.name ?? '', PROVIDER_GROUP);
      const sa = new KubeClient(loadKubeConfig({ kubeconfig: saKubeconfig }));
      await eventually('the ServiceAccount may list the provider templates', async () =>
        (await sa
          .list(PROVIDER_API_VERSION, PROVIDER_TEMPLATE_KIND, { namespace: ns })
          .catch(() => undefined))
          ? true
          : undefined,
      );
      sa.close();

      await admin.create(providerTemplate('provided', ns, { nodeImages: ['ubuntu-2404'] }));
      const providedTag = cutRelease(repoDir, 'provided-1-30', {
        example: 'docker-ferrol-1-30',
        name: 'provided',
        k8s: '1-30',
        version: 'v1',
      });
      push(repoDir, repoUrl, providedTag);
      await admin.create({
        apiVersion: API_VERSION,
        kind: 'ClusterStack',
        metadata: { name: 'provided', namespace: ns },
        spec: {
          provider: 'docker',
          name: 'provided',
          kubernetesVersion: '1.30',
          interval: '5s',
          providerRef: { apiVersion: PROVIDER_API_VERSION, kind: PROVIDER_TEMPLATE_KIND, name: 'provided' },
          source: { git: { url: repoUrl }, path: 'provided-1-30' },
        },
      } as ClusterStack & KubeObject);
      await waitFor('the provider object created under the generated RBAC', () =>
        admin.get(PROVIDER_API_VERSION, PROVIDER_OBJECT_KIND, providedTag, ns),
      );
      // Playing the provider's controller (none runs here): the release is prepared.
      await setProviderReady(admin, ns, providedTag, true);
      await waitFor('release provided v1 Ready', () => releaseReady(providedTag));
      assert.ok(await clusterClass(providedTag), 'its ClusterClass applied by Flux');
    }));
});
