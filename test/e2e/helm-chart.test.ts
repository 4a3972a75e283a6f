// The Helm chart charts/stackflux/ installed by the REAL helm-controller (HelmRelease, chart from a
// GitRepository on the test Git server) holds in the API server the same objects as `stackflux
// install --export` with the corresponding flags (what the API server makes of install's objects is
// read with a server-side dry-run before the chart is installed).
//
// Shared management cluster: the release lives in its own namespace and sets `name` to that
// namespace, so its cluster-scoped ClusterRoles/ClusterRoleBinding are its own. The CRDs are
// already there (other tests install them, each branch its own version): the HelmRelease says
// crds: Skip so this test never changes them, and a test checks that the release did not write them.
import assert from 'node:assert/strict';
import { cpSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parse, parseAllDocuments } from 'yaml';
import type { KubeObject } from '../../controller/runtime/client.ts';
import { createRepo, type Endpoints } from '../../hack/lib/testenv.ts';
import {
  cond,
  deleteTestNamespace,
  e2eSuite,
  git,
  gone,
  initRepo,
  push,
  ROOT,
  stackflux,
  waitFor,
} from '../support/e2e.ts';

const { env, client, ns, work, repoDir } = e2eSuite('sf-chart');
const chart = join(ROOT, 'charts', 'stackflux');
const HELM = 'helm.toolkit.fluxcd.io/v2';
const SOURCE = 'source.toolkit.fluxcd.io/v1';
/** The chart's `name` value and install's --name: the test's own cluster-scoped names. */
const name = ns;
const FIELD_MANAGER = 'stackflux-chart-test';

/** Values of the release and the install flags that say the same. */
const VALUES = {
  name,
  replicas: 2,
  logLevel: 'debug',
  fleet: { url: 'https://git.example/fleet.git', branchPrefix: 'fleet/' },
  tenancy: { defaultServiceAccount: 'flux-applier', allowedChartHosts: ['charts.example'] },
  extraArgs: ['--concurrency=8'],
  nodeSelector: { 'kubernetes.io/os': 'linux' },
  tolerations: [{ key: 'node-role.kubernetes.io/control-plane', operator: 'Exists', effect: 'NoSchedule' }],
};
const FLAGS = [
  `--name=${name}`,
  '--replicas=2',
  '--log-level=debug',
  '--fleet-url=https://git.example/fleet.git',
  '--fleet-branch-prefix=fleet/',
  '--default-service-account=flux-applier',
  '--allowed-chart-hosts=charts.example',
  '--node-selector=kubernetes.io/os=linux',
  '--tolerations=[{"key":"node-role.kubernetes.io/control-plane","operator":"Exists","effect":"NoSchedule"}]',
  '--',
  '--concurrency=8',
];

/** The upgrade: webhook and leader election off, the runtime extension on, other tenancy flags. */
const UPGRADE_VALUES = {
  name,
  leaderElection: { enabled: false },
  metrics: { port: 9090 },
  webhook: { secretName: '' },
  runtimeExtension: { certificate: 'secret', certSecretName: 'hook-cert' },
  tenancy: { insecureChartHosts: ['plain.example'] },
};
const UPGRADE_FLAGS = [
  `--name=${name}`,
  '--disable-leader-election',
  '--metrics-port=9090',
  '--webhook-secret-name=',
  '--runtime-extension=secret',
  '--runtime-extension-cert-secret=hook-cert',
  '--insecure-chart-hosts=plain.example',
];

type Obj = KubeObject & Record<string, unknown>;

/** Who wrote an object (its managedFields' managers). */
const managers = (o: KubeObject): string[] =>
  ((o.metadata.managedFields ?? []) as { manager?: string }[]).map((m) => m.manager ?? '');

/** Fields the API server, Helm or helm-controller write, which install's objects cannot have. */
function comparable(o: Obj): Obj {
  const copy = structuredClone(o);
  const { uid, resourceVersion, creationTimestamp, generation, managedFields, ...metadata } = copy.metadata;
  const strip = (m: Record<string, string> | undefined, keys: string[]) => {
    const rest = Object.fromEntries(Object.entries(m ?? {}).filter(([k]) => !keys.includes(k)));
    return Object.keys(rest).length > 0 ? rest : undefined;
  };
  const labels = strip(metadata.labels, [
    'app.kubernetes.io/managed-by',
    'helm.toolkit.fluxcd.io/name',
    'helm.toolkit.fluxcd.io/namespace',
  ]);
  const annotations = strip(metadata.annotations, [
    'meta.helm.sh/release-name',
    'meta.helm.sh/release-namespace',
    'deployment.kubernetes.io/revision',
  ]);
  const { labels: _l, annotations: _a, ...others } = metadata;
  copy.metadata = { ...others, ...(labels ? { labels } : {}), ...(annotations ? { annotations } : {}) };
  delete copy.status;
  const spec = copy.spec as Record<string, unknown> | undefined;
  // Allocated by the API server on each create, so a dry-run and the real create differ.
  if (copy.kind === 'Service' && spec) {
    delete spec.clusterIP;
    delete spec.clusterIPs;
  }
  // An aggregated ClusterRole's rules are kube-controller-manager's (install leaves them out).
  if (copy.aggregationRule !== undefined) delete copy.rules;
  return copy;
}

function installObjectsOf(flags: string[]): Obj[] {
  // Without the test environment's allow-list in the environment: `install` would pass it on as
  // --allow-source-networks (every flag reads STACKFLUX_<FLAG>), which the chart's values do not set.
  const out = stackflux(['install', '--export', '--skip-namespace', `--namespace=${ns}`, ...flags], {
    STACKFLUX_ALLOW_SOURCE_NETWORKS: undefined,
  });
  assert.equal(out.status, 0, out.stderr);
  return parseAllDocuments(out.stdout)
    .map((d) => d.toJS() as Obj | null)
    .filter((o): o is Obj => o !== null);
}

describe('the Helm chart installed by helm-controller', { timeout: 10 * 60_000 }, () => {
  /** install's objects (no CRDs) as the API server makes them, for FLAGS and UPGRADE_FLAGS. */
  let expected: Obj[] = [];
  let expectedUpgrade: Obj[] = [];
  /** Field managers of the release's objects (helm-controller's). */
  const releaseManagers = new Set<string>();

  /** A server-side dry-run of install's objects: what the API server makes of them. */
  async function serverSide(flags: string[]): Promise<Obj[]> {
    const made: Obj[] = [];
    for (const o of installObjectsOf(flags).filter((x) => x.kind !== 'CustomResourceDefinition'))
      made.push((await client.apply(o, { dryRun: true, fieldManager: FIELD_MANAGER })) as Obj);
    return made;
  }

  /** The release at `version` is Ready: helm-controller installed or upgraded it. */
  async function releasedAt(version: number): Promise<void> {
    await waitFor(`HelmRelease Ready at release version ${version}`, async () => {
      const hr = await client.get<Obj & { status?: { conditions?: []; history?: { version?: number }[] } }>(
        HELM,
        'HelmRelease',
        'stackflux',
        ns,
      );
      const ready = cond(hr, 'Ready');
      assert.ok(!/Failed$/.test(ready?.reason ?? ''), ready?.message);
      return ready?.status === 'True' &&
        ready.observedGeneration === hr?.metadata.generation &&
        hr?.status?.history?.[0]?.version === version
        ? true
        : undefined;
    });
  }

  /** Every expected object is the live one, less what the API server, Helm and Flux add. */
  async function liveEquals(want: readonly Obj[]): Promise<void> {
    assert.ok(want.length >= 8, 'install printed the controller objects');
    for (const w of want) {
      const live = await client.get<Obj>(w.apiVersion, w.kind, w.metadata.name ?? '', w.metadata.namespace);
      assert.ok(live, `${w.kind} ${w.metadata.name} installed by the chart`);
      assert.equal(
        live.metadata.annotations?.['meta.helm.sh/release-name'],
        name,
        `${w.kind} is the release's`,
      );
      assert.deepEqual(comparable(live), comparable(w), `${w.kind} ${w.metadata.name}`);
      for (const m of managers(live)) releaseManagers.add(m);
    }
  }

  before(async () => {
    // Not createTestNamespace: it applies this branch's CRDs, and the shared cluster's CRDs are
    // whichever branch applied them last; this test needs none of them.
    await client.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
    // Before the release exists, so each dry-run is a create, not a merge with the chart's objects.
    expected = await serverSide(FLAGS);
    expectedUpgrade = await serverSide(UPGRADE_FLAGS);
    const repoUrl = await createRepo(env as Endpoints, `${ns}-chart`);
    initRepo(repoDir);
    cpSync(chart, join(repoDir, 'charts', 'stackflux'), { recursive: true });
    git(repoDir, 'add', '-A');
    git(repoDir, 'commit', '-q', '-m', 'stackflux chart');
    push(repoDir, repoUrl);
    await client.create({
      apiVersion: SOURCE,
      kind: 'GitRepository',
      metadata: { name: 'charts', namespace: ns },
      spec: { url: repoUrl, interval: '10m', ref: { branch: 'main' } },
    });
  });

  after(async () => {
    await client.delete(HELM, 'HelmRelease', 'stackflux', ns).catch(() => undefined);
    await gone('HelmRelease uninstalled', () => client.get(HELM, 'HelmRelease', 'stackflux', ns)).catch(
      (err: unknown) => process.stderr.write(`cleanup: ${String(err)}\n`),
    );
    // See the uninstall test: kube-controller-manager may have re-created the aggregated role.
    for (const role of [name, `${name}-rules`])
      await client.delete('rbac.authorization.k8s.io/v1', 'ClusterRole', role).catch(() => undefined);
    await deleteTestNamespace(client, ns);
    client.close();
    rmSync(work, { recursive: true, force: true });
  });

  it("the API server holds exactly install's objects for the corresponding values", async () => {
    await client.create({
      apiVersion: HELM,
      kind: 'HelmRelease',
      metadata: { name: 'stackflux', namespace: ns },
      spec: {
        interval: '10m',
        releaseName: name,
        chart: {
          spec: { chart: './charts/stackflux', sourceRef: { kind: 'GitRepository', name: 'charts' } },
        },
        // No kubelet here: nothing becomes Ready, so helm-controller does not wait for it.
        install: { crds: 'Skip', disableWait: true },
        upgrade: { crds: 'Skip', disableWait: true },
        // The aggregated ClusterRole can come back at once (uninstall test): do not wait for it to go.
        uninstall: { disableWait: true },
        values: VALUES,
      },
    });
    await releasedAt(1);
    await liveEquals(expected);
  });

  it("changed values upgrade it to install's objects for the changed flags", async () => {
    // Replaces the values (a merge patch would merge them with the old ones).
    await client.request('PATCH', `/apis/${HELM}/namespaces/${ns}/helmreleases/stackflux`, {
      body: [{ op: 'replace', path: '/spec/values', value: UPGRADE_VALUES }],
      contentType: 'application/json-patch+json',
    });
    await releasedAt(2);
    await liveEquals(expectedUpgrade);
    assert.ok(
      expectedUpgrade.some((o) => o.kind === 'ExtensionConfig'),
      'the upgrade adds an object (the ExtensionConfig)',
    );
  });

  it("crds: Skip left the cluster's CRDs alone; the chart's crds/ are install's", async () => {
    const files = readdirSync(join(chart, 'crds')).filter((f) => f.endsWith('.yaml'));
    const fromInstall = installObjectsOf([]).filter((o) => o.kind === 'CustomResourceDefinition');
    assert.equal(files.length, fromInstall.length);
    assert.ok(releaseManagers.size > 0, 'the field managers of the release are known');
    for (const f of files) {
      const crd = parse(readFileSync(join(chart, 'crds', f), 'utf8')) as Obj;
      assert.deepEqual(
        fromInstall.find((o) => o.metadata.name === crd.metadata.name),
        crd,
        `${f} is install's CRD`,
      );
      // Which version the shared cluster holds depends on the branch that applied it last, so
      // only this: the release neither owns nor wrote it.
      const live = await client.get<Obj>(crd.apiVersion, crd.kind, crd.metadata.name ?? '');
      assert.ok(live, `${crd.metadata.name} is installed`);
      assert.equal(live.metadata.annotations?.['meta.helm.sh/release-name'], undefined, "not the release's");
      const writers = managers(live);
      assert.deepEqual(
        writers.filter((m) => releaseManagers.has(m)),
        [],
        `${crd.metadata.name} written by ${writers.join(', ')}`,
      );
    }
  });

  it("uninstalling removes the release's objects and leaves the CRDs (Helm never deletes crds/)", async () => {
    await client.delete(HELM, 'HelmRelease', 'stackflux', ns);
    await gone('HelmRelease uninstalled', () => client.get(HELM, 'HelmRelease', 'stackflux', ns));
    for (const o of expectedUpgrade) {
      const live = await client.get<Obj>(o.apiVersion, o.kind, o.metadata.name ?? '', o.metadata.namespace);
      // kube-controller-manager's ClusterRole aggregation can re-create the aggregated role it was
      // updating when Helm deleted it (an update of a ClusterRole creates a missing one): empty,
      // not Helm's (no labels), so it grants nothing. `kubectl delete -f` of install's output has
      // the same race; README says to delete it.
      if (o.aggregationRule !== undefined && live !== undefined) {
        assert.equal(live.metadata.labels?.['app.kubernetes.io/name'], undefined, "not the chart's role");
        assert.ok(!Array.isArray(live.rules) || live.rules.length === 0, 're-created without rules');
        continue;
      }
      assert.equal(live, undefined, `${o.kind} ${o.metadata.name} uninstalled`);
    }
    for (const f of readdirSync(join(chart, 'crds')))
      assert.ok(
        await client.get('apiextensions.k8s.io/v1', 'CustomResourceDefinition', f.replace(/\.yaml$/, '')),
        `${f} still installed`,
      );
  });
});
