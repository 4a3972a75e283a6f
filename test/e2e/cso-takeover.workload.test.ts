// Issue 24, the move from the cluster-stack-operator (CSO), walked as the README guide says:
// convert, apply, wait, scale CSO down, delete CSO's objects. Nothing of CSO runs here (its Go
// module cannot be built): the test leaves the cluster as CSO leaves it, each piece the way CSO's
// code does it —
//  - CSO's CRDs (fixtures/cso-crds.yaml), its ClusterStack, its ClusterStackRelease (finalizer,
//    owned by the ClusterStack) and ClusterAddon `cluster-addon-<cluster>` (finalizer, owned by the
//    Cluster), its Deployment with the settings in Secret cso-cluster-stack-variables (config/);
//  - the provider object CSO creates from the ClusterStack's providerRef template (no owner; the
//    test's provider stands in for CSPO and sets it ready) — stackflux adopts it, same uid;
//  - the ClusterClass and its templates: `helm template <first four dash-parts> <chart>
//    --namespace <ns>` (the real helm CLI), applied with server-side apply, field manager
//    "kubectl", force, label clusterstack.x-k8s.io/instance=owned (pkg/kube/kube.go Apply);
//  - the addons in the workload cluster: CSO's render (test/support/goengine.ts, native Go + helm
//    CLI) applied the same way into kube-system.
// CSO's releases are GitHub release assets (packaged as `csctl create` does, served by the local
// GitHub API of test/support/githubfake.ts). Then the guide: `stackflux convert --from-cluster`,
// the token Secret it names created from CSO's Secret, the output applied as is with kubectl; and
// `stackflux run --github-api-url=<local>` with real Flux takes
// over: every object keeps its uid and is present in every sample taken during the switch, the
// release and the addons become Ready, the Cluster keeps its class, and the field managers are
// kustomize-controller's (it removes the "kubectl" Apply manager; CSO's label goes with it).
// Both at once: CSO's re-apply is taken back by the next Flux apply, nothing deleted. Last, CSO
// scaled to 0 and its objects deleted (their finalizers dropped: nobody is left to remove them)
// leave everything in place. The addons' objects get names of this run (the workload cluster is
// shared).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import type { ClusterAddon } from '../../controller/api/clusteraddon.ts';
import type { ClusterStackRelease } from '../../controller/api/clusterstackrelease.ts';
import { API_VERSION, LABEL_SOURCE_CREDENTIALS } from '../../controller/api/meta.ts';
import { CSO_API_VERSION } from '../../controller/convert/cso.ts';
import type { KubeClient, KubeObject } from '../../controller/runtime/client.ts';
import { createRepo, type Endpoints } from '../../hack/lib/testenv.ts';
import { csoReleaseObjects, servedClusterClass, csoferrolTag as tag } from '../support/csctl.ts';
import { packageCsctlRelease } from '../support/csctl-assets.ts';
import {
  CAPI,
  ControllerProcess,
  cond,
  controllerSteps,
  createAddonCluster,
  createTestNamespace,
  installFixtureCrds,
  installTestProviderCrds,
  PROVIDER_API_VERSION,
  PROVIDER_OBJECT_KIND,
  PROVIDER_TEMPLATE_KIND,
  providerTemplate,
  ROOT,
  releaseAddonNamespace,
  required,
  setProviderReady,
  sleep,
  stackflux,
  waitFor,
  watchPresence,
  workloadSuite,
} from '../support/e2e.ts';
import { fakeAssets, GitHubFake } from '../support/githubfake.ts';
import { runHelm } from '../support/goengine.ts';

const { env, client, workload, ns, work } = workloadSuite('csotakeover');
const csoNs = `${ns}-cso`;
const stackDir = join(work, 'stack');
const ADDON_NS = 'kube-system';
const CSO_MANAGER = 'kubectl';
const CSO_LABEL = 'clusterstack.x-k8s.io/instance';
const KUSTOMIZE = 'kustomize.toolkit.fluxcd.io/v1';
const RELEASE = tag('v1');
const suffix = ns.replace(/^csotakeover-/, '');
/** CSO's GitHub token (GIT_ACCESS_TOKEN), which the local GitHub API insists on. */
const TOKEN = `ghp_csoTakeover${suffix.replace(/-/g, '')}`;
/** spec.template.spec of the provider template (what the provider reads, e.g. node images). */
const PROVIDER_SPEC = { nodeImages: ['ubuntu-capi-image-v1.30.4'] };

type Obj = KubeObject & Record<string, unknown>;
interface Tracked {
  where: 'management' | 'workload';
  apiVersion: string;
  kind: string;
  name: string;
  namespace: string;
}
const idOf = (t: Tracked) => `${t.where} ${t.kind} ${t.namespace}/${t.name}`;
const clientOf = (t: Tracked) => (t.where === 'management' ? client : workload);
const read = (t: Tracked) => clientOf(t).get<Obj>(t.apiVersion, t.kind, t.name, t.namespace);
const managers = (o: Obj | undefined) =>
  ((o?.metadata.managedFields ?? []) as Array<{ manager?: string; operation?: string }>)
    .map((f) => `${f.manager}/${f.operation}`)
    .sort();

/** The csoferrol stack with the addon charts unpacked and their objects named for this run. */
function uniqueAddonNames(dir: string): void {
  for (const [addon, chart] of [
    ['cni', 'cni-config'],
    ['metrics', 'metrics-config'],
  ] as const) {
    const charts = join(dir, 'cluster-addon', addon, 'charts');
    const tgz = readdirSync(charts).find((f) => f.endsWith('.tgz'));
    assert.ok(tgz);
    const r = spawnSync('tar', ['xzf', tgz, '-C', charts], { cwd: charts });
    assert.equal(r.status, 0, String(r.stderr));
    rmSync(join(charts, tgz));
    const templates = join(charts, chart, 'templates');
    for (const f of readdirSync(templates)) {
      const p = join(templates, f);
      writeFileSync(
        p,
        readFileSync(p, 'utf8').replace(/^( {2}name: )(cni-config|cni|metrics-config)$/gm, `$1$2-${suffix}`),
      );
    }
  }
  const stages = join(dir, 'clusteraddon.yaml');
  writeFileSync(
    stages,
    readFileSync(stages, 'utf8').replace('name: cni-config', `name: cni-config-${suffix}`),
  );
}

/** Applies `o` as CSO's kube.Apply does: server-side apply, manager "kubectl", force, CSO's label. */
async function applyAsCso(to: KubeClient, o: Obj): Promise<Obj> {
  const labels = { ...(o.metadata.labels ?? {}), [CSO_LABEL]: 'owned' };
  return to.apply({ ...o, metadata: { ...o.metadata, labels } }, { fieldManager: CSO_MANAGER, force: true });
}

/** applyAsCso into `where`'s `namespace`, and the object tracked with its uid. */
async function applyAsCsoAndTrack(
  where: Tracked['where'],
  o: Obj,
  namespace: string,
): Promise<{ t: Tracked; applied: Obj }> {
  const applied = await applyAsCso(where === 'management' ? client : workload, {
    ...o,
    metadata: { ...o.metadata, namespace },
  });
  const t: Tracked = {
    where,
    apiVersion: o.apiVersion,
    kind: o.kind,
    name: o.metadata.name ?? '',
    namespace,
  };
  tracked.push(t);
  uids.set(idOf(t), applied.metadata.uid ?? '');
  return { t, applied };
}

/** The cluster-class as CSO renders it: helm template with the release name CSO derives, chart version from csctl. */
function csoClusterClassObjects(): Obj[] {
  const chart = join(work, 'cso-class');
  cpSync(join(stackDir, 'cluster-class'), chart, { recursive: true });
  const chartYaml = join(chart, 'Chart.yaml');
  writeFileSync(chartYaml, readFileSync(chartYaml, 'utf8').replace(/^version: .*$/m, 'version: v1'));
  const releaseName = RELEASE.split('-').slice(0, 4).join('-');
  const helm = runHelm(['template', releaseName, 'cso-class', '--namespace', ns], work);
  assert.equal(helm.status, 0, helm.stderr);
  return parseAllDocuments(helm.stdout)
    .map((d) => d.toJS() as Obj | null)
    .filter((o): o is Obj => o !== null)
    .map((o) => ({ ...o, metadata: { ...o.metadata, namespace: ns } }));
}

/** Samples every tracked object while `during` runs: each sample in which one is absent or has another uid. */
async function sampled(
  tracked: Tracked[],
  uids: ReadonlyMap<string, string>,
  during: () => Promise<void>,
): Promise<{ violations: string[]; samples: number }> {
  const byId = new Map(tracked.map((t) => [idOf(t), t]));
  const watcher = watchPresence([...byId.keys()], (id) => read(byId.get(id) as Tracked), uids);
  try {
    await during();
  } catch (err) {
    await watcher.stop();
    throw err;
  }
  return watcher.stop();
}

const kubectl = (args: string[], input?: string) =>
  spawnSync(required('KUBECTL_BIN'), ['--kubeconfig', env.kubeconfig, ...args], {
    encoding: 'utf8',
    ...(input !== undefined ? { input } : {}),
  });

type CA = ClusterAddon & KubeObject;
type CSKR = ClusterStackRelease & KubeObject;

/** stackflux's release and the Cluster's addons Ready (again, after Flux reconciled). */
const bothReady = (when: string) =>
  waitFor(`release and c1 Ready ${when}`, async () => {
    const release = await client.get<CSKR>(API_VERSION, 'ClusterStackRelease', RELEASE, ns);
    const addon = await client.get<CA>(API_VERSION, 'ClusterAddon', 'c1', ns);
    return cond(release, 'Ready')?.status === 'True' && cond(addon, 'Ready')?.status === 'True'
      ? true
      : undefined;
  });

let controller: ControllerProcess | undefined;
const step = controllerSteps(() => controller);
let gh: GitHubFake | undefined;
const tracked: Tracked[] = [];
const uids = new Map<string, string>();
let converted = '';

describe('the move from the cluster-stack-operator: convert, apply, wait, scale CSO down, delete its objects', {
  timeout: 20 * 60_000,
}, () => {
  before(async () => {
    await createTestNamespace(client, ns);
    await client.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: csoNs } });
    await installFixtureCrds(client, 'cso-crds.yaml');
    await installFixtureCrds(client, 'capi-template-crds.yaml');
    await installTestProviderCrds(client);
    const fleetUrl = await createRepo(env as Endpoints, `${ns}-fleet`);
    cpSync(join(ROOT, 'stacks', 'docker-csoferrol-1-30'), stackDir, { recursive: true });
    servedClusterClass(stackDir);
    uniqueAddonNames(stackDir);
    gh = await GitHubFake.start();
    gh.token = TOKEN;
    gh.releases = [
      { tag: RELEASE, commit: '0'.repeat(40), assets: fakeAssets(packageCsctlRelease(stackDir, 'v1')) },
    ];
    controller = await ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: ns,
      cacheDir: join(work, 'cache'),
      extraArgs: [`--fleet-url=${fleetUrl}`, '--fleet-batch-window=1s', `--github-api-url=${gh.url}`],
    });
  });

  after(async () => {
    await controller?.stop();
    await gh?.stop();
    for (const t of tracked.filter((x) => x.where === 'workload'))
      await workload.delete(t.apiVersion, t.kind, t.name, t.namespace).catch(() => undefined);
    for (const kind of ['ClusterAddon', 'ClusterStackRelease', 'ClusterStack'])
      for (const o of (
        await client.list(CSO_API_VERSION, kind, { namespace: ns }).catch(() => ({ items: [] }))
      ).items)
        await client
          .mergePatch(CSO_API_VERSION, kind, o.metadata.name ?? '', ns, { metadata: { finalizers: null } })
          .catch(() => undefined);
    await releaseAddonNamespace(client, ns);
    await client.delete('v1', 'Namespace', csoNs).catch(() => undefined);
    client.close();
    workload.close();
    rmSync(work, { recursive: true, force: true });
  });

  it("1. the cluster as CSO leaves it: its objects, its provider object, its ClusterClass and the Cluster's addons applied as CSO applies them", async () => {
    await client.create(providerTemplate('csoprovider', ns, PROVIDER_SPEC));
    const csoStack = await client.create<Obj>({
      apiVersion: CSO_API_VERSION,
      kind: 'ClusterStack',
      metadata: { name: 'docker-csoferrol-1-30', namespace: ns },
      spec: {
        provider: 'docker',
        name: 'csoferrol',
        kubernetesVersion: '1.30',
        channel: 'stable',
        versions: ['v1'],
        autoSubscribe: false,
        providerRef: { apiVersion: PROVIDER_API_VERSION, kind: PROVIDER_TEMPLATE_KIND, name: 'csoprovider' },
      },
    });
    // CSO's ClusterStack controller creates the provider object from the template (no owner) and
    // the provider (CSPO) makes it ready; here a foreign manager applies it and the test sets ready.
    const provider = await client.apply(
      {
        apiVersion: PROVIDER_API_VERSION,
        kind: PROVIDER_OBJECT_KIND,
        metadata: { name: RELEASE, namespace: ns },
        spec: PROVIDER_SPEC,
      },
      { fieldManager: 'manager', force: true },
    );
    await setProviderReady(client, ns, RELEASE, true);
    const providerTracked: Tracked = {
      where: 'management',
      apiVersion: PROVIDER_API_VERSION,
      kind: PROVIDER_OBJECT_KIND,
      name: RELEASE,
      namespace: ns,
    };
    tracked.push(providerTracked);
    uids.set(idOf(providerTracked), provider.metadata.uid ?? '');
    const owner = (o: Obj) => ({
      apiVersion: o.apiVersion,
      kind: o.kind,
      name: o.metadata.name ?? '',
      uid: o.metadata.uid ?? '',
    });
    await client.create({
      apiVersion: CSO_API_VERSION,
      kind: 'ClusterStackRelease',
      metadata: {
        name: RELEASE,
        namespace: ns,
        finalizers: ['clusterstackrelease.clusterstack.x-k8s.io'],
        ownerReferences: [owner(csoStack)],
      },
      spec: {},
    });
    for (const o of csoClusterClassObjects()) {
      await applyAsCsoAndTrack('management', o, ns);
    }
    assert.ok(
      tracked.some((t) => t.kind === 'ClusterClass' && t.name === RELEASE),
      'CSO names the ClusterClass as the release',
    );

    await createAddonCluster(client, env.workloadKubeconfig, ns, 'c1', {
      podCidr: '10.246.0.0/16',
      className: RELEASE,
      version: 'v1.30.4',
    });
    const cluster = await client.get<Obj>(CAPI, 'Cluster', 'c1', ns);
    assert.ok(cluster);
    await client.create({
      apiVersion: CSO_API_VERSION,
      kind: 'ClusterAddon',
      metadata: {
        name: 'cluster-addon-c1',
        namespace: ns,
        finalizers: ['clusteraddon.clusterstack.x-k8s.io'],
        ownerReferences: [owner(cluster)],
      },
      spec: {
        clusterStack: RELEASE,
        clusterRef: { apiVersion: CAPI, kind: 'Cluster', name: 'c1', namespace: ns },
      },
    });
    const addons = csoReleaseObjects(
      stackDir,
      RELEASE,
      cluster as unknown as Record<string, unknown>,
    ) as Obj[];
    assert.deepEqual(addons.map((o) => `${o.kind} ${o.metadata.name}`).sort(), [
      `ConfigMap cni-config-${suffix}`,
      `ConfigMap metrics-config-${suffix}`,
      `ServiceAccount cni-${suffix}`,
    ]);
    for (const o of addons) {
      const { t, applied } = await applyAsCsoAndTrack('workload', o, ADDON_NS);
      assert.deepEqual(managers(applied), ['kubectl/Apply'], `${idOf(t)}: CSO's field manager only`);
      assert.equal(applied.metadata.labels?.['app.kubernetes.io/managed-by'], undefined, 'no Helm labels');
      assert.equal(
        applied.metadata.annotations?.['meta.helm.sh/release-name'],
        undefined,
        'no Helm annotations',
      );
    }

    // CSO's Deployment as its config/ installs it: settings from Secret cso-cluster-stack-variables.
    await client.create({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'cso-cluster-stack-variables', namespace: csoNs },
      stringData: {
        'git-provider': 'github',
        'git-org-name': 'SovereignCloudStack',
        'git-repo-name': 'cluster-stacks',
        'git-access-token': TOKEN,
      },
    });
    const fromSecret = (name: string, key: string) => ({
      name,
      valueFrom: { secretKeyRef: { name: 'cso-cluster-stack-variables', key } },
    });
    await client.create({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: {
        name: 'cso-controller-manager',
        namespace: csoNs,
        labels: { 'control-plane': 'cso-controller-manager' },
      },
      spec: {
        replicas: 1,
        selector: { matchLabels: { 'control-plane': 'cso-controller-manager' } },
        template: {
          metadata: { labels: { 'control-plane': 'cso-controller-manager' } },
          spec: {
            containers: [
              {
                name: 'manager',
                image: 'ghcr.io/sovereigncloudstack/cso:v0.2.0-alpha.1',
                command: ['/manager'],
                args: ['--leader-elect=true'],
                env: [
                  fromSecret('GIT_PROVIDER', 'git-provider'),
                  fromSecret('GIT_ORG_NAME', 'git-org-name'),
                  fromSecret('GIT_REPOSITORY_NAME', 'git-repo-name'),
                  fromSecret('GIT_ACCESS_TOKEN', 'git-access-token'),
                ],
              },
            ],
          },
        },
      },
    });
  });

  it("2. stackflux convert --from-cluster: CSO's names and releases; the GitHub token referenced, never printed", async () => {
    const args = [
      'convert',
      '--from-cluster',
      '--kubeconfig',
      env.kubeconfig,
      '-n',
      ns,
      '--cso-namespace',
      csoNs,
    ];
    const asIs = stackflux(args);
    assert.equal(asIs.status, 0, asIs.stderr);
    const [stack] = parseAllDocuments(asIs.stdout).map(
      (d) => d.toJS() as Obj & { spec: Record<string, unknown> },
    );
    assert.equal(stack?.metadata.name, 'docker-csoferrol-1-30', "CSO's ClusterStack's name");
    assert.deepEqual(stack?.spec.source, {
      github: {
        owner: 'SovereignCloudStack',
        repo: 'cluster-stacks',
        secretRef: { name: 'stackflux-release-credentials' },
      },
    });
    assert.deepEqual(stack?.spec.versions, ['v1']);
    assert.equal(stack?.spec.autoSubscribe, false);
    assert.match(asIs.stderr, new RegExp(`Secret ${csoNs}/cso-cluster-stack-variables key git-access-token`));
    assert.ok(!`${asIs.stdout}${asIs.stderr}`.includes(TOKEN), 'the token is not printed');

    const noOperator = stackflux([...args.slice(0, -1), `${csoNs}-absent`]);
    assert.equal(noOperator.status, 2, 'no Deployment of CSO: nothing guessed');
    assert.equal(noOperator.stdout, '');
    assert.match(
      noOperator.stderr,
      /no Deployment labelled control-plane=cso-controller-manager in namespace/,
    );

    // The guide's step for the token: copied from CSO's Secret into the one the output names.
    const csoSecret = await client.get<Obj & { data: Record<string, string> }>(
      'v1',
      'Secret',
      'cso-cluster-stack-variables',
      csoNs,
    );
    await client.create({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name: 'stackflux-release-credentials',
        namespace: ns,
        labels: { [LABEL_SOURCE_CREDENTIALS]: 'true' },
      },
      data: { token: csoSecret?.data['git-access-token'] ?? '' },
    });
    converted = asIs.stdout;
  });

  it('3. the output applied as is: stackflux and Flux take the ClusterClass and the addons over, nothing deleted or recreated', (ctx) =>
    step(async () => {
      const result = await sampled(tracked, uids, async () => {
        const applied = kubectl(['apply', '-f', '-'], converted);
        assert.equal(applied.status, 0, applied.stderr);
        await waitFor('release Ready, c1 Ready, every object applied by kustomize-controller', async () => {
          const release = await client.get<CSKR>(API_VERSION, 'ClusterStackRelease', RELEASE, ns);
          const addon = await client.get<CA>(API_VERSION, 'ClusterAddon', 'c1', ns);
          if (cond(release, 'Ready')?.status !== 'True' || cond(addon, 'Ready')?.status !== 'True')
            return undefined;
          for (const t of tracked) if (managers(await read(t)).includes('kubectl/Apply')) return undefined;
          return true;
        });
      });
      assert.deepEqual(result.violations, [], `over ${result.samples} samples`);
      assert.ok(result.samples > 0);
      ctx.diagnostic(`${result.samples} samples of ${tracked.length} objects during the switch`);

      const cluster = await client.get<Obj & { spec: { topology: { classRef: { name: string } } } }>(
        CAPI,
        'Cluster',
        'c1',
        ns,
      );
      assert.equal(cluster?.spec.topology.classRef.name, RELEASE, 'the Cluster kept its class');
      const addon = await client.get<CA>(API_VERSION, 'ClusterAddon', 'c1', ns);
      assert.equal(addon?.status?.release, RELEASE);
      for (const t of tracked) {
        const got = await read(t);
        assert.equal(got?.metadata.uid, uids.get(idOf(t)), `${idOf(t)} kept its uid`);
        const m = managers(got);
        ctx.diagnostic(`${idOf(t)} managers after the switch: ${m.join(', ')}`);
        // stackflux applies the provider object itself (below); Flux applies the rest.
        if (t.kind === PROVIDER_OBJECT_KIND) continue;
        assert.ok(m.includes('kustomize-controller/Apply'), `${idOf(t)}: ${m.join(', ')}`);
        assert.ok(
          !m.some((x) => x.startsWith(`${CSO_MANAGER}/`)),
          `${idOf(t)}: CSO's manager removed (${m.join(', ')})`,
        );
        assert.equal(
          got?.metadata.labels?.[CSO_LABEL],
          undefined,
          `${idOf(t)}: CSO's label went with its manager`,
        );
      }
      const read1 = await client.get<CSKR>(API_VERSION, 'ClusterStackRelease', RELEASE, ns);
      assert.match(
        read1?.status?.commit ?? '',
        /^github-assets:sha256:/,
        "read from CSO's GitHub release assets",
      );
      const adopted = await read(tracked.find((t) => t.kind === PROVIDER_OBJECT_KIND) as Tracked);
      const release = await client.get<CSKR>(API_VERSION, 'ClusterStackRelease', RELEASE, ns);
      assert.deepEqual(
        adopted?.metadata.ownerReferences?.map((r) => [r.kind, r.name, r.uid]),
        [['ClusterStackRelease', RELEASE, release?.metadata.uid]],
        "the provider object CSO created is now the stackflux release's",
      );
      assert.deepEqual(adopted?.spec, PROVIDER_SPEC);
      const cni = await workload.get<Obj & { data?: Record<string, string> }>(
        'v1',
        'ConfigMap',
        `cni-config-${suffix}`,
        ADDON_NS,
      );
      assert.deepEqual(cni?.data, { clusterName: 'c1', podCIDR: '10.246.0.0/16', mtu: '1400' });
    }));

  it('4. both at once: CSO applying again is taken back by the next Flux apply, nothing deleted', () =>
    step(async () => {
      const cni = tracked.find((t) => t.name === `cni-config-${suffix}`);
      assert.ok(cni);
      const stackObjects = csoReleaseObjects(
        stackDir,
        RELEASE,
        (await client.get(CAPI, 'Cluster', 'c1', ns)) as Record<string, unknown>,
      ) as Obj[];
      const o = stackObjects.find((x) => x.metadata.name === cni.name);
      assert.ok(o);
      const again = await applyAsCso(workload, { ...o, metadata: { ...o.metadata, namespace: ADDON_NS } });
      assert.equal(again.metadata.uid, uids.get(idOf(cni)));
      assert.ok(managers(again).includes('kubectl/Apply'), 'CSO owns its fields again');
      const ks = (
        await client.list(KUSTOMIZE, 'Kustomization', {
          namespace: ns,
          labelSelector: 'stackflux.io/cluster=c1',
        })
      ).items;
      assert.ok(ks.length > 0);
      const result = await sampled(tracked, uids, async () => {
        for (const k of ks)
          await client.mergePatch(KUSTOMIZE, 'Kustomization', k.metadata.name ?? '', ns, {
            metadata: { annotations: { 'reconcile.fluxcd.io/requestedAt': `takeover-${Date.now()}` } },
          });
        await waitFor('kustomize-controller takes the fields back', async () =>
          managers(await read(cni)).includes('kubectl/Apply') ? undefined : true,
        );
      });
      assert.deepEqual(result.violations, [], `over ${result.samples} samples`);
    }));

  it('5. CSO scaled to 0, its ClusterAddon, ClusterStackRelease and ClusterStack deleted: everything stays', () =>
    step(async () => {
      await client.mergePatch('apps/v1', 'Deployment', 'cso-controller-manager', csoNs, {
        spec: { replicas: 0 },
      });
      const result = await sampled(tracked, uids, async () => {
        for (const [kind, name] of [
          ['ClusterAddon', 'cluster-addon-c1'],
          ['ClusterStackRelease', RELEASE],
          ['ClusterStack', 'docker-csoferrol-1-30'],
        ] as const) {
          await client.delete(CSO_API_VERSION, kind, name, ns);
          // CSO is down: nobody removes its finalizers (CSO itself drops the ClusterAddon's only once the Cluster is gone).
          const held = await client.get(CSO_API_VERSION, kind, name, ns);
          if (held !== undefined)
            await client.mergePatch(CSO_API_VERSION, kind, name, ns, { metadata: { finalizers: null } });
          await waitFor(`CSO's ${kind} ${name} gone`, async () =>
            (await client.get(CSO_API_VERSION, kind, name, ns)) === undefined ? true : undefined,
          );
        }
        await sleep(3000);
      });
      assert.deepEqual(result.violations, [], `over ${result.samples} samples`);
      await bothReady('after CSO is gone');
    }));
});
