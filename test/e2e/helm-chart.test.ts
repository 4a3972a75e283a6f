// The Helm chart charts/stackflux/ installed by the REAL helm-controller (HelmRelease, chart from a
// GitRepository on the test Git server) holds in the API server the same objects as `stackflux
// install --export` with the corresponding flags (what the API server makes of install's objects is
// read with a server-side dry-run before the chart is installed).
//
// Shared management cluster: the release lives in its own namespace and sets `name` to that
// namespace, so its cluster-scoped ClusterRoles/ClusterRoleBinding are its own. The CRDs are
// already there (other tests install them): the HelmRelease says crds: Skip so this test never
// changes them, and the second test checks that the CRDs there are the chart's crds/.
import assert from 'node:assert/strict';
import { cpSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parse, parseAllDocuments } from 'yaml';
import type { KubeObject } from '../../controller/runtime/client.ts';
import { createRepo, type Endpoints } from '../../hack/lib/testenv.ts';
import {
  cond,
  createTestNamespace,
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
};
const FLAGS = [
  `--name=${name}`,
  '--replicas=2',
  '--log-level=debug',
  '--fleet-url=https://git.example/fleet.git',
  '--fleet-branch-prefix=fleet/',
  '--default-service-account=flux-applier',
  '--allowed-chart-hosts=charts.example',
  '--',
  '--concurrency=8',
];

type Obj = KubeObject & Record<string, unknown>;

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
  const out = stackflux(['install', '--export', '--skip-namespace', `--namespace=${ns}`, ...flags]);
  assert.equal(out.status, 0, out.stderr);
  return parseAllDocuments(out.stdout)
    .map((d) => d.toJS() as Obj | null)
    .filter((o): o is Obj => o !== null);
}

describe('the Helm chart installed by helm-controller', { timeout: 10 * 60_000 }, () => {
  /** install's objects (no CRDs) as the API server makes them (server-side dry-run). */
  let expected: Obj[] = [];

  before(async () => {
    await createTestNamespace(client, ns);
    const objects = installObjectsOf(FLAGS).filter((o) => o.kind !== 'CustomResourceDefinition');
    // Before the release exists, so the dry-run is a create, not a merge with the chart's objects.
    expected = [];
    for (const o of objects)
      expected.push((await client.apply(o, { dryRun: true, fieldManager: FIELD_MANAGER })) as Obj);
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
    await waitFor('HelmRelease Ready', async () => {
      const hr = await client.get<Obj & { status?: { conditions?: [] } }>(
        HELM,
        'HelmRelease',
        'stackflux',
        ns,
      );
      const ready = cond(hr, 'Ready');
      assert.notEqual(ready?.reason, 'InstallFailed', ready?.message);
      return ready?.status === 'True' ? hr : undefined;
    });
    assert.ok(expected.length >= 8, 'install printed the controller objects');
    for (const want of expected) {
      const { apiVersion, kind } = want;
      const live = await client.get<Obj>(apiVersion, kind, want.metadata.name ?? '', want.metadata.namespace);
      assert.ok(live, `${kind} ${want.metadata.name} installed by the chart`);
      assert.equal(
        live.metadata.annotations?.['meta.helm.sh/release-name'],
        name,
        `${kind} belongs to the release`,
      );
      assert.deepEqual(comparable(live), comparable(want), `${kind} ${want.metadata.name}`);
    }
  });

  it("the CRDs in the cluster are the chart's crds/ (left alone by crds: Skip)", async () => {
    const files = readdirSync(join(chart, 'crds')).filter((f) => f.endsWith('.yaml'));
    const fromInstall = installObjectsOf([]).filter((o) => o.kind === 'CustomResourceDefinition');
    assert.equal(files.length, fromInstall.length);
    for (const f of files) {
      const crd = parse(readFileSync(join(chart, 'crds', f), 'utf8')) as Obj;
      assert.deepEqual(
        fromInstall.find((o) => o.metadata.name === crd.metadata.name),
        crd,
        `${f} is install's CRD`,
      );
      const live = await client.get<Obj>(crd.apiVersion, crd.kind, crd.metadata.name ?? '');
      assert.ok(live, `${crd.metadata.name} is installed`);
      assert.equal(
        live.metadata.annotations?.['meta.helm.sh/release-name'],
        undefined,
        'not owned by the release',
      );
      // What the API server makes of the chart's CRD (defaults included) is what it holds.
      const applied = (await client.apply(crd, {
        dryRun: true,
        force: true,
        fieldManager: FIELD_MANAGER,
      })) as Obj;
      assert.deepEqual(live.spec, applied.spec, `${crd.metadata.name} spec`);
    }
  });

  it("uninstalling removes the release's objects and leaves the CRDs (Helm never deletes crds/)", async () => {
    await client.delete(HELM, 'HelmRelease', 'stackflux', ns);
    await gone('HelmRelease uninstalled', () => client.get(HELM, 'HelmRelease', 'stackflux', ns));
    for (const o of expected) {
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
