// Issue 24 acceptance, part A, end to end on the test environment with real Flux. One csctl release
// (stacks/docker-csoferrol-1-30, its ClusterClass edited to the v1beta2 the test environment
// serves) published three ways: as a Git tag, as GitHub release assets (packaged as `csctl create`
// does, served by test/support/githubfake.ts) and as an OCI artifact (pushed with csctl's own
// oras-go code to a private Distribution registry over HTTPS; the controller trusts the registry's
// CA through NODE_EXTRA_CA_CERTS, as a controller in a cluster would trust a private registry's
// CA). For each source in turn one ClusterStack `csoferrol` and one Cluster `c1` in the same
// namespace: the release's fleet branch (the rendered ClusterClass), the ClusterClass Flux applied,
// c1's fleet branch (its addons) and the addon objects Flux applied INTO the workload cluster must be
// byte for byte / field for field the same for all three. The OCI release's status names the tag and
// the manifest digest.
// Then a new tag pushed to the registry: the registry notifies the controller's webhook (a bearer
// webhook secret in its endpoint headers), the new release becomes Ready although the ClusterStack
// lists its source only every hour, and c1 moves to it by the ClusterStack's Progressive rollout, as
// it does for a new Git tag (csctl-upgrade.workload.test.ts).
//
// No Cluster API controllers run here: the test plays Cluster API's topology controller
// (hack/lib/capi.ts, as csctl-upgrade.workload.test.ts): it writes v1beta2 Available and
// TopologyReconciled for each new generation of the Cluster.
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ClusterAddon } from '../../controller/api/clusteraddon.ts';
import type { ClusterStack } from '../../controller/api/clusterstack.ts';
import type { ClusterStackRelease } from '../../controller/api/clusterstackrelease.ts';
import { API_VERSION } from '../../controller/api/meta.ts';
import type { KubeObject } from '../../controller/runtime/client.ts';
import { playClusterApi } from '../../hack/lib/capi.ts';
import { createRepo, type Endpoints } from '../../hack/lib/testenv.ts';
import {
  csoferrolClusterStack,
  cutCsctlRelease,
  servedClusterClass,
  csoferrolTag as tag,
} from '../support/csctl.ts';
import { packageCsctlRelease } from '../support/csctl-assets.ts';
import {
  CAPI,
  ControllerProcess,
  cond,
  controllerSteps,
  createAddonCluster,
  createTestNamespace,
  fleetBranchFiles,
  freePort,
  git,
  gone,
  initRepo,
  installFixtureCrds,
  push,
  releaseAddonNamespace,
  waitFor,
  workloadSuite,
} from '../support/e2e.ts';
import { fakeAssets, GitHubFake } from '../support/githubfake.ts';
import {
  type PushedManifest,
  pushCsctlRelease,
  startRegistry,
  type TestRegistry,
} from '../support/registry.ts';

const { env, client, workload, ns, work, repoDir } = workloadSuite('ocisource');
type CSR = ClusterStackRelease & KubeObject;
type CA = ClusterAddon & KubeObject;
type Obj = KubeObject & { data?: Record<string, string> };
const WEBHOOK_SECRET = 'oci-source-e2e-webhook-secret';
const REPOSITORY = 'kaas/cluster-stacks';
const ADDON_NS = 'kube-system';
/** What c1's addons apply into the workload cluster (csctl-addons.workload.test.ts asserts the list). */
const ADDON_OBJECTS = [
  { apiVersion: 'v1', kind: 'ConfigMap', name: 'cni-config' },
  { apiVersion: 'v1', kind: 'ConfigMap', name: 'metrics-config' },
  { apiVersion: 'v1', kind: 'ServiceAccount', name: 'cni' },
];
/** v2's visible change: a ConfigMap of cni's chart only v2 has (unique to this run). */
const MARKER = `${ns}-v2`;
/** oras stamps the push time unless given: a fixed one keeps the digest a function of the content. */
const CREATED = { 'org.opencontainers.image.created': '2026-01-01T00:00:00Z' };

let controller: ControllerProcess | undefined;
const step = controllerSteps(() => controller);
let capi: { stop: () => Promise<void> } | undefined;
let gh: GitHubFake | undefined;
let registry: TestRegistry | undefined;
let fleetUrl = '';
let v1Pushed: PushedManifest | undefined;
let repoUrl = '';

const release = (version: string) => client.get<CSR>(API_VERSION, 'ClusterStackRelease', tag(version), ns);
const caddon = () => client.get<CA>(API_VERSION, 'ClusterAddon', 'c1', ns);

/** A copy of the stack as released at `version` (edited), for the assets and the OCI artifact. */
function stackCopy(version: string, ...edits: Array<(dir: string) => void>): string {
  const dir = join(work, `stack-${version}`);
  cpSync(join(import.meta.dirname, '..', '..', 'stacks', 'docker-csoferrol-1-30'), dir, { recursive: true });
  for (const edit of edits) edit(dir);
  return dir;
}

function withMarker(dir: string): void {
  const templates = join(dir, 'cluster-addon', 'cni', 'templates');
  mkdirSync(templates, { recursive: true });
  writeFileSync(
    join(templates, 'v2-marker.yaml'),
    `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${MARKER}\n  namespace: {{ .Release.Namespace }}\ndata:\n  cluster: {{ index .Values "cni-config" "clusterName" | quote }}\n`,
  );
}

/** Writes a release's assets (file name → bytes) into a folder, for csctl-push. */
function assetsDir(name: string, assets: ReadonlyMap<string, Uint8Array>): string {
  const dir = join(work, name);
  mkdirSync(dir, { recursive: true });
  for (const [file, bytes] of assets) writeFileSync(join(dir, file), bytes);
  return dir;
}

const branchFiles = (branch: string, label: string): Map<string, string> =>
  fleetBranchFiles(fleetUrl, branch, join(work, `fleet-${label}`));

/** An applied object without what the API server writes (uid, resourceVersion, times, managedFields). */
function asApplied(o: Obj | undefined): unknown {
  if (o === undefined) return undefined;
  const { metadata, ...rest } = o;
  const { uid, resourceVersion, creationTimestamp, managedFields, generation, ...kept } = metadata as Record<
    string,
    unknown
  >;
  const { status, ...content } = rest as Record<string, unknown>;
  return { ...content, metadata: kept };
}

interface SourceResult {
  commit: string;
  releaseFiles: Map<string, string>;
  clusterClass: unknown;
  addonFiles: Map<string, string>;
  addonObjects: unknown[];
}
const results = new Map<string, SourceResult>();

/** The ClusterStack of every phase: newest release, Progressive rollout, its source listed hourly. */
function clusterStack(source: Partial<ClusterStack['spec']>): ClusterStack & KubeObject {
  return csoferrolClusterStack(ns, repoUrl, [], {
    autoSubscribe: true,
    versions: undefined,
    interval: '1h',
    rollout: { strategy: 'Progressive', progressDeadline: '10m' },
    ...source,
  });
}

/** Creates the ClusterStack and c1, waits for v1 Ready and c1's addons Ready, and records what was applied. */
async function publishAndRecord(label: string, source: Partial<ClusterStack['spec']>): Promise<SourceResult> {
  await client.create(clusterStack(source));
  const ready = await waitFor(`${tag('v1')} Ready (${label})`, async () => {
    const r = await release('v1');
    return cond(r, 'Ready')?.status === 'True' ? r : undefined;
  });
  const clusterClass = await waitFor(`ClusterClass applied by Flux (${label})`, () =>
    client.get<Obj>(CAPI, 'ClusterClass', tag('v1'), ns),
  );
  await createAddonCluster(client, env.workloadKubeconfig, ns, 'c1', {
    podCidr: '10.243.0.0/16',
    className: tag('v1'),
    version: 'v1.30.4',
  });
  const ca = await waitFor(`c1 Ready at v1 (${label})`, async () => {
    const c = await caddon();
    return cond(c, 'Ready')?.status === 'True' && c?.status?.release === tag('v1') ? c : undefined;
  });
  const addonObjects = [];
  for (const o of ADDON_OBJECTS) {
    const got = await workload.get<Obj>(o.apiVersion, o.kind, o.name, ADDON_NS);
    assert.ok(got, `${o.kind} ${o.name} is in the workload cluster (${label})`);
    addonObjects.push(asApplied(got));
  }
  const result = {
    commit: ready.status?.commit ?? '',
    releaseFiles: branchFiles(`stackflux/_releases/${ns}/${tag('v1')}`, `${label}-release`),
    clusterClass: asApplied(clusterClass),
    addonFiles: branchFiles(ca.status?.fleetBranch ?? '', `${label}-c1`),
    addonObjects,
  };
  assert.ok(
    [...result.releaseFiles.keys()].some((p) => p.includes('clusterclass')),
    [...result.releaseFiles.keys()].join(', '),
  );
  assert.ok(result.addonFiles.size > 0, 'c1 has addon files');
  results.set(label, result);
  return result;
}

/** Removes c1, the ClusterStack and what they applied, so the next source starts from nothing. */
async function removeAll(label: string): Promise<void> {
  await client.delete(CAPI, 'Cluster', 'c1', ns);
  await client.delete('v1', 'Secret', 'c1-kubeconfig', ns).catch(() => undefined);
  await gone(`ClusterAddon c1 (${label})`, caddon);
  await client.delete(API_VERSION, 'ClusterStack', 'csoferrol', ns);
  await gone(`release ${tag('v1')} (${label})`, () => release('v1'));
  await gone(`ClusterStack csoferrol (${label})`, () =>
    client.get(API_VERSION, 'ClusterStack', 'csoferrol', ns),
  );
  await client.delete(CAPI, 'ClusterClass', tag('v1'), ns).catch(() => undefined);
  await gone(`ClusterClass ${tag('v1')} (${label})`, () => client.get(CAPI, 'ClusterClass', tag('v1'), ns));
  // The next source's fleet files must be its own writing: the branches of c1 and the release are gone.
  const heads = git(work, 'ls-remote', '--heads', fleetUrl);
  assert.ok(!heads.includes(`stackflux/${ns}/`), `no fleet branch of ${ns} is left (${label}):\n${heads}`);
  assert.ok(!heads.includes(`stackflux/_releases/${ns}/`), `no release branch of ${ns} is left (${label})`);
  // Orphaned with c1's Kustomizations: removed so the next source's Flux applies them afresh.
  for (const o of ADDON_OBJECTS)
    await workload.delete(o.apiVersion, o.kind, o.name, ADDON_NS).catch(() => undefined);
}

function assertSameFiles(got: Map<string, string>, want: Map<string, string>, what: string): void {
  assert.deepEqual([...got.keys()], [...want.keys()], `${what}: the same files`);
  for (const [path, content] of want) assert.equal(got.get(path), content, `${what}: ${path}`);
}

describe('one csctl release from a Git tag, GitHub release assets and an OCI registry: identical; a registry tag rolls out', {
  timeout: 30 * 60_000,
}, () => {
  before(async () => {
    await createTestNamespace(client, ns);
    // The ClusterClass's templates (DockerMachineTemplate, …): their CRDs, for Flux's dry run.
    await installFixtureCrds(client, 'capi-template-crds.yaml');
    repoUrl = await createRepo(env as Endpoints, `${ns}-release`);
    fleetUrl = await createRepo(env as Endpoints, `${ns}-fleet`);
    initRepo(repoDir);
    cutCsctlRelease(repoDir, 'docker-csoferrol-1-30', 'v1', servedClusterClass);
    push(repoDir, repoUrl, tag('v1'));
    const v1Assets = packageCsctlRelease(stackCopy('v1', servedClusterClass), 'v1');
    gh = await GitHubFake.start();
    gh.releases = [{ tag: tag('v1'), commit: '0'.repeat(40), assets: fakeAssets(v1Assets) }];
    // The registry's notification endpoint names the webhook's port, so it is chosen first.
    const webhookPort = await freePort();
    registry = await startRegistry({
      notifications: {
        url: `http://127.0.0.1:${webhookPort}/hooks/push`,
        headers: { Authorization: `Bearer ${WEBHOOK_SECRET}` },
      },
    });
    v1Pushed = await pushCsctlRelease({
      registry: registry.host,
      repository: REPOSITORY,
      tag: tag('v1'),
      dir: assetsDir('oci-v1', v1Assets),
      ca: registry.ca,
      annotations: CREATED,
    });
    controller = await ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: ns,
      cacheDir: join(work, 'cache'),
      extraArgs: [
        `--fleet-url=${fleetUrl}`,
        `--github-api-url=${gh.url}`,
        '--fleet-batch-window=1s',
        // The addon Kustomizations otherwise take the ClusterStack's hourly interval, and Flux retries
        // a failed build (a kustomize-controller restarted by another test) only after it.
        '--addon-interval=1m',
        `--webhook-addr=127.0.0.1:${webhookPort}`,
        `--webhook-secret=${WEBHOOK_SECRET}`,
      ],
      // The registry's self-signed CA, trusted as a private registry's CA is trusted in a cluster.
      env: { NODE_EXTRA_CA_CERTS: registry.ca },
    });
    capi = playClusterApi(client, ns);
  });

  after(async () => {
    await capi?.stop();
    await controller?.stop();
    await gh?.stop();
    await registry?.stop();
    await releaseAddonNamespace(client, ns);
    for (const o of [...ADDON_OBJECTS, { apiVersion: 'v1', kind: 'ConfigMap', name: MARKER }])
      await workload.delete(o.apiVersion, o.kind, o.name, ADDON_NS).catch(() => undefined);
    client.close();
    workload.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('1. Git tag, GitHub release assets, OCI artifact: the same ClusterClass and the same addons for c1', () =>
    step(async () => {
      const fromGit = await publishAndRecord('git', {});
      assert.match(fromGit.commit, /^[0-9a-f]{40}$/, 'a Git release is its commit');
      await removeAll('git');

      const fromAssets = await publishAndRecord('github', {
        source: { github: { owner: 'scs', repo: 'cluster-stacks' } },
      });
      assert.match(fromAssets.commit, /^github-assets:sha256:[0-9a-f]{64}$/);
      await removeAll('github');

      const fromOci = await publishAndRecord('oci', {
        source: { oci: { url: `oci://${registry?.host}/${REPOSITORY}` } },
      });
      const oci = await release('v1');
      assert.equal(oci?.status?.commit, v1Pushed?.digest, 'the release is the manifest digest');
      assert.match(oci?.status?.commit ?? '', /^sha256:[0-9a-f]{64}$/);
      assert.equal(oci?.spec.tag, tag('v1'), 'and names the tag');

      process.stdout.write(
        `# compared: ${fromGit.releaseFiles.size} release branch files, ${fromGit.addonFiles.size} files of c1's branch, ${fromGit.addonObjects.length} workload objects; OCI release ${oci?.status?.commit}\n`,
      );
      for (const [label, got] of [
        ['github', fromAssets],
        ['oci', fromOci],
      ] as const) {
        assertSameFiles(
          got.releaseFiles,
          fromGit.releaseFiles,
          `${label} vs git: the release's fleet branch`,
        );
        assert.deepEqual(got.clusterClass, fromGit.clusterClass, `${label} vs git: the applied ClusterClass`);
        assertSameFiles(got.addonFiles, fromGit.addonFiles, `${label} vs git: c1's fleet branch`);
        assert.deepEqual(
          got.addonObjects,
          fromGit.addonObjects,
          `${label} vs git: c1's objects in the workload cluster`,
        );
      }
    }));

  it('2. a new tag pushed to the registry: the notification makes it Ready at once and c1 rolls out to it', () =>
    step(async () => {
      const v2Assets = packageCsctlRelease(stackCopy('v2', servedClusterClass, withMarker), 'v2');
      const dir = assetsDir('oci-v2', v2Assets);
      const webhookBefore = controller?.logged('webhook request').length ?? 0;
      const pushStarted = Date.now();
      const pushed = await pushCsctlRelease({
        registry: registry?.host ?? '',
        repository: REPOSITORY,
        tag: tag('v2'),
        dir,
        ca: registry?.ca,
        annotations: CREATED,
      });
      const pushed_at = Date.now();
      const ready = await waitFor(`${tag('v2')} Ready`, async () => {
        const r = await release('v2');
        return cond(r, 'Ready')?.status === 'True' ? r : undefined;
      });
      const readyAt = Date.now();
      process.stdout.write(
        `# push -> Ready: ${readyAt - pushStarted} ms from the push's start, ${readyAt - pushed_at} ms after csctl-push returned\n`,
      );
      assert.equal(ready.status?.commit, pushed.digest);
      // The source is listed hourly: what listed it was the registry's notification.
      const hooks = (controller?.logged('webhook request') ?? []).slice(webhookBefore);
      assert.ok(
        hooks.some((h) => h.status === 202 && Number(h.sources) >= 1),
        `a notification listed the OCI source: ${JSON.stringify(hooks)}`,
      );
      const cs = await client.get<ClusterStack & KubeObject>(API_VERSION, 'ClusterStack', 'csoferrol', ns);
      assert.equal(cs?.spec.interval, '1h');

      const moved = await waitFor(
        'c1 rolled out to v2',
        async () => {
          const c = await client.get<KubeObject & { spec: { topology: { classRef: { name: string } } } }>(
            CAPI,
            'Cluster',
            'c1',
            ns,
          );
          const ca = await caddon();
          const r = (
            await client.get<ClusterStack & KubeObject>(API_VERSION, 'ClusterStack', 'csoferrol', ns)
          )?.status?.rollout;
          return c?.spec.topology.classRef.name === tag('v2') &&
            cond(ca, 'Ready')?.status === 'True' &&
            ca?.status?.release === tag('v2') &&
            r?.targetRelease === tag('v2') &&
            r.phase === 'Complete'
            ? ca
            : undefined;
        },
        { timeoutMs: 10 * 60_000 },
      );
      assert.equal(moved.status?.release, tag('v2'));
      const marker = await workload.get<Obj>('v1', 'ConfigMap', MARKER, ADDON_NS);
      assert.deepEqual(marker?.data, { cluster: 'c1' }, "v2's addon content is in the workload cluster");
    }));
});
