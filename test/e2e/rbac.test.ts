// Issue 6 acceptance: the controller started with ONLY the RBAC that `stackflux install --export`
// generates (a ServiceAccount token from the TokenRequest API, not admin) passes the core of the
// release-pipeline scenario. Any 403 in its log fails the test with the log lines.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parse, parseAllDocuments, stringify } from 'yaml';
import type { ClusterStack } from '../../controller/api/clusterstack.ts';
import { API_VERSION, GROUP } from '../../controller/api/meta.ts';
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
  stackflux,
  waitFor,
} from '../support/e2e.ts';
import { eventually, uniqueName } from '../support/env.ts';

const env = e2eEnv();
const admin = new KubeClient(loadKubeConfig({ kubeconfig: env.kubeconfig }));
const ns = uniqueName('rbac');
const work = mkdtempSync(join(tmpdir(), 'stackflux-rbac-'));
const repoDir = join(work, 'repo');
const saKubeconfig = join(work, 'kubeconfig');
const FIELD_MANAGER = 'stackflux-test';
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

/** Applies the install manifests (not the Deployment: no pods run here); returns the ServiceAccount name. */
async function installGenerated(): Promise<{ serviceAccount: string; clusterScoped: KubeObject[] }> {
  const out = stackflux(['install', '--export', `--namespace=${ns}`]);
  assert.equal(out.status, 0, out.stderr);
  const objects = parseAllDocuments(out.stdout)
    .map((d) => d.toJS() as KubeObject | null)
    .filter((o): o is KubeObject => o !== null);
  const kinds = objects.map((o) => o.kind);
  for (const k of ['ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding'])
    assert.ok(kinds.includes(k), `install --export has a ${k}`);
  // The cluster-scoped RBAC objects get a per-test suffix so parallel runs do not share them; their
  // rules and subjects are exactly what install generated.
  const suffix = (name: string | undefined) => `${name}-${ns}`;
  const clusterScoped: KubeObject[] = [];
  let serviceAccount = '';
  const crds: string[] = [];
  for (const obj of objects) {
    if (obj.kind === 'Deployment') continue;
    if (obj.kind === 'ClusterRole') obj.metadata.name = suffix(obj.metadata.name);
    if (obj.kind === 'ClusterRoleBinding') {
      obj.metadata.name = suffix(obj.metadata.name);
      const ref = obj.roleRef as { name: string };
      ref.name = suffix(ref.name);
    }
    if (obj.kind === 'ServiceAccount') serviceAccount = obj.metadata.name ?? '';
    if (obj.kind === 'CustomResourceDefinition') crds.push(obj.metadata.name ?? '');
    if (obj.kind === 'ClusterRole' || obj.kind === 'ClusterRoleBinding') clusterScoped.push(obj);
    await admin.apply(obj, { force: true, fieldManager: FIELD_MANAGER });
  }
  // The bound ClusterRole is aggregated (Cluster API's pattern): kube-controller-manager fills its
  // rules from the ClusterRoles labelled stackflux.io/aggregate-to-controller=true.
  const aggregated = clusterScoped.filter((o) => o.kind === 'ClusterRole' && o.aggregationRule !== undefined);
  assert.equal(aggregated.length, 1, 'install --export has one aggregated ClusterRole');
  await aggregatedRulesInclude(aggregated[0]?.metadata.name ?? '', GROUP);
  for (const name of crds)
    await eventually(`CRD ${name} Established`, async () => {
      const got = await admin.get<
        KubeObject & { status?: { conditions?: { type: string; status: string }[] } }
      >('apiextensions.k8s.io/v1', 'CustomResourceDefinition', name);
      return got?.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')
        ? true
        : undefined;
    });
  return { serviceAccount, clusterScoped };
}

/** Waits until the aggregated ClusterRole carries a rule for apiGroup (aggregation is asynchronous). */
async function aggregatedRulesInclude(name: string, apiGroup: string): Promise<void> {
  await eventually(`aggregated ClusterRole ${name} has rules for ${apiGroup}`, async () => {
    const role = await admin.get<KubeObject & { rules?: { apiGroups?: string[] }[] }>(
      'rbac.authorization.k8s.io/v1',
      'ClusterRole',
      name,
    );
    return role?.rules?.some((r) => r.apiGroups?.includes(apiGroup)) ? true : undefined;
  });
}

/** A kubeconfig with the same server and CA as $KUBECONFIG and a token of the ServiceAccount. */
async function writeServiceAccountKubeconfig(serviceAccount: string): Promise<void> {
  const tr = await admin.request<{ status: { token: string } }>(
    'POST',
    `/api/v1/namespaces/${ns}/serviceaccounts/${serviceAccount}/token`,
    {
      body: {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: { expirationSeconds: 3600 },
      },
    },
  );
  assert.ok(tr.status.token, 'TokenRequest returned a token');
  const base = parse(readFileSync(env.kubeconfig, 'utf8')) as {
    'current-context': string;
    contexts: { name: string; context: { cluster: string } }[];
    clusters: { name: string; cluster: Record<string, unknown> }[];
  };
  const ctx = base.contexts.find((c) => c.name === base['current-context']);
  const cluster = base.clusters.find((c) => c.name === ctx?.context.cluster);
  assert.ok(cluster, 'the cluster of the current context of $KUBECONFIG');
  writeFileSync(
    saKubeconfig,
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'testenv', cluster: cluster.cluster }],
      users: [{ name: serviceAccount, user: { token: tr.status.token } }],
      contexts: [{ name: 'sa', context: { cluster: 'testenv', user: serviceAccount } }],
      'current-context': 'sa',
    }),
    { mode: 0o600 },
  );
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
    const installed = await installGenerated();
    clusterScoped = installed.clusterScoped;
    await writeServiceAccountKubeconfig(installed.serviceAccount);
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
      await aggregatedRulesInclude(bound?.metadata.name ?? '', PROVIDER_GROUP);
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
