// Issue 6 acceptance: `render` over a snapshot exported from a live test environment produces
// exactly the objects the live controller created there, and nothing further (fixed point):
//   1. the live controller settles a scenario (a ClusterStack subscribed to two tags, a Cluster
//      using one of them, its addons rendered to its own fleet branch with its GitRepository and
//      Kustomizations; no kubeconfig Secret, so Flux reports them not ready without touching the
//      shared workload cluster);
//   2. `stackflux diff --export-snapshot` (reading the fleet's branches and tips) on the settled
//      cluster reports no changes (exit 0);
//   3. `stackflux render --check-fixed-point` over the exported snapshot writes no mutation;
//   4. with everything the controller created removed from the snapshot (releases, Flux objects,
//      status), render creates the same objects the live controller did: kinds, names, labels,
//      annotations, finalizers, owner references (by kind/name) and specs.
// Server-set fields (uid, resourceVersion, managedFields, creationTimestamp, generation) and
// status timestamps are not compared; Flux is not simulated offline, so Flux-derived status is
// compared only through the fixed point over the live snapshot.
import assert from 'node:assert/strict';
import { cpSync, existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parse, stringify } from 'yaml';
import type { ClusterAddon } from '../../controller/api/clusteraddon.ts';
import type { ClusterStack } from '../../controller/api/clusterstack.ts';
import type { ClusterStackRelease } from '../../controller/api/clusterstackrelease.ts';
import type { Kustomization } from '../../controller/api/flux.ts';
import { API_VERSION } from '../../controller/api/meta.ts';
import { renderSnapshot } from '../../controller/offline/render.ts';
import { readSnapshot, type SnapshotObject } from '../../controller/offline/snapshot.ts';
import { loadFluxTemplates } from '../../controller/releases/flux-templates.ts';
import type { KubeObject } from '../../controller/runtime/client.ts';
import { createRepo, type Endpoints } from '../../hack/lib/testenv.ts';
import {
  CAPI,
  ControllerProcess,
  cond,
  createTestNamespace,
  deleteTestNamespace,
  e2eSuite,
  ferrolTag,
  initRepo,
  releaseFerrol130,
  stackflux,
  waitFor,
} from '../support/e2e.ts';

const { env, client, ns, work, repoDir } = e2eSuite('render-vs-live');
const cacheDir = join(work, 'cache');
const snapDir = join(work, 'snapshot');
let fleetUrl = '';

/** What the controller creates (removed from the snapshot for the from-scratch render). */
const CREATED = [
  'stackflux.io/clusterstackreleases',
  'source.toolkit.fluxcd.io/gitrepositories',
  'kustomize.toolkit.fluxcd.io/kustomizations',
];

const FLUX_FINALIZER = 'finalizers.fluxcd.io';

type CSK = ClusterStack & KubeObject;
type CSKR = ClusterStackRelease & KubeObject;

/** RFC 3339 at second precision (what `--now` takes). */
function rfc3339(d: Date): string {
  return d.toISOString().replace(/\.\d+Z$/, 'Z');
}

/** Every file under dir, relative, sorted. */
function walk(dir: string, prefix = ''): string[] {
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const rel = prefix === '' ? e.name : `${prefix}/${e.name}`;
    if (e.isDirectory()) out.push(...walk(join(dir, e.name), rel));
    else out.push(rel);
  }
  return out.sort();
}

/** Whether every field of `part` is in `whole` with the same value (arrays: same length, element-wise). */
function contained(part: unknown, whole: unknown, path: string, problems: string[]): void {
  if (Array.isArray(part)) {
    if (!Array.isArray(whole) || whole.length !== part.length) {
      problems.push(`${path}: render ${JSON.stringify(part)}, live ${JSON.stringify(whole)}`);
      return;
    }
    part.forEach((p, i) => {
      contained(p, whole[i], `${path}[${i}]`, problems);
    });
    return;
  }
  if (part !== null && typeof part === 'object') {
    if (whole === null || typeof whole !== 'object' || Array.isArray(whole)) {
      problems.push(`${path}: render ${JSON.stringify(part)}, live ${JSON.stringify(whole)}`);
      return;
    }
    for (const [k, v] of Object.entries(part))
      contained(v, (whole as Record<string, unknown>)[k], `${path}.${k}`, problems);
    return;
  }
  if (part !== whole) problems.push(`${path}: render ${JSON.stringify(part)}, live ${JSON.stringify(whole)}`);
}

/** The fields the comparison looks at; owner references by kind/name (uids differ offline). */
function comparable(o: SnapshotObject): Record<string, unknown> {
  const m = o.metadata;
  return {
    apiVersion: o.apiVersion,
    kind: o.kind,
    metadata: {
      name: m.name,
      namespace: m.namespace,
      labels: m.labels ?? {},
      annotations: m.annotations ?? {},
      // Flux's own finalizer on its objects: Flux is not simulated offline.
      finalizers: (m.finalizers ?? []).filter((f) => f !== FLUX_FINALIZER).sort(),
      ownerReferences: (m.ownerReferences ?? []).map((r) => ({
        apiVersion: r.apiVersion,
        kind: r.kind,
        name: r.name,
        controller: r.controller ?? false,
        blockOwnerDeletion: (r as { blockOwnerDeletion?: boolean }).blockOwnerDeletion ?? false,
      })),
    },
    spec: o.spec,
  };
}

describe('render over a live snapshot = what the live controller did', { timeout: 15 * 60_000 }, () => {
  let controller: ControllerProcess | undefined;
  let now = '';

  before(async () => {
    await createTestNamespace(client, ns);
    const repoUrl = await createRepo(env as Endpoints, ns);
    initRepo(repoDir);
    releaseFerrol130(repoDir, repoUrl, 'v1', 'v2');
    fleetUrl = await createRepo(env as Endpoints, `${ns}-fleet`);
    controller = await ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: ns,
      cacheDir,
      extraArgs: [`--fleet-url=${fleetUrl}`, '--fleet-batch-window=1s'],
    });
    await controller.step(async () => {
      // Pinned v1 plus the latest (v2); a Cluster uses v1.
      await client.create({
        apiVersion: API_VERSION,
        kind: 'ClusterStack',
        metadata: { name: 'ferrol', namespace: ns },
        spec: {
          noProvider: true,
          provider: 'docker',
          name: 'ferrol',
          kubernetesVersion: '1.30',
          autoSubscribe: true,
          versions: ['v1'],
          source: { git: { url: repoUrl }, path: 'ferrol-1-30' },
        },
      } as CSK);
      await client.create({
        apiVersion: CAPI,
        kind: 'Cluster',
        metadata: { name: 'c1', namespace: ns },
        spec: {
          clusterNetwork: { pods: { cidrBlocks: ['10.244.0.0/16'] } },
          controlPlaneEndpoint: { host: 'c1.example.internal', port: 6443 },
          topology: { classRef: { name: ferrolTag('v1') }, version: 'v1.30.4' },
        },
      });
      for (const v of ['v1', 'v2'])
        await waitFor(`release ${v} Ready`, async () => {
          const r = await client.get<CSKR>(API_VERSION, 'ClusterStackRelease', ferrolTag(v), ns);
          return cond(r, 'Ready')?.status === 'True' ? r : undefined;
        });
      await waitFor('v1 counts its Cluster', async () =>
        (await client.get<CSKR>(API_VERSION, 'ClusterStackRelease', ferrolTag('v1'), ns))?.status
          ?.clusters === 1
          ? true
          : undefined,
      );
      // The addons are on c1's branch and Flux has reported on each of their Kustomizations (not
      // ready: there is no kubeconfig Secret).
      const caStatus = async () =>
        JSON.stringify(
          (await client.get<ClusterAddon & KubeObject>(API_VERSION, 'ClusterAddon', 'c1', ns))?.status ?? {},
        );
      await waitFor('ClusterAddon c1 settled with Flux status for its three addons', async () => {
        const ks = await client.list<Kustomization & KubeObject>(
          'kustomize.toolkit.fluxcd.io/v1',
          'Kustomization',
          { namespace: ns, labelSelector: 'stackflux.io/cluster=c1' },
        );
        const observed = ks.items.filter(
          (k) => cond(k, 'Ready')?.observedGeneration === k.metadata.generation,
        );
        if (observed.length !== 3) return undefined;
        const before = await caStatus();
        const status = JSON.parse(before) as NonNullable<ClusterAddon['status']>;
        if (status.fleetCommit === undefined || status.addons?.length !== 3) return undefined;
        await new Promise((r) => setTimeout(r, 3_000));
        return (await caStatus()) === before ? true : undefined;
      });
      await waitFor('ClusterStack Ready with latest v2 and both releases in its summary', async () => {
        const c = await client.get<CSK>(API_VERSION, 'ClusterStack', 'ferrol', ns);
        return cond(c, 'Ready')?.status === 'True' &&
          c?.status?.latestRelease === ferrolTag('v2') &&
          c.status.summary?.length === 2
          ? c
          : undefined;
      });
    });
    // Settled: stop the controller so the snapshot is not taken in the middle of a write.
    await controller.stop();
    now = rfc3339(new Date());
  });

  after(async () => {
    // Stopped already unless the setup failed half way.
    await controller?.stop();
    // The release-in-use finalizer needs the controller to go: run it again for the cleanup.
    await client.delete(CAPI, 'Cluster', 'c1', ns).catch(() => undefined);
    const cleaner = await ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: ns,
      cacheDir,
      extraArgs: [`--fleet-url=${fleetUrl}`, '--fleet-batch-window=1s'],
    }).catch(() => undefined);
    // The ClusterAddon's fleet-cleanup finalizer comes off once its branch is deleted.
    await waitFor('ClusterAddon c1 gone', async () =>
      (await client.get(API_VERSION, 'ClusterAddon', 'c1', ns)) === undefined ? true : undefined,
    ).catch((err: unknown) => process.stderr.write(`cleanup: ${String(err)}\n`));
    await deleteTestNamespace(client, ns);
    await cleaner?.stop();
    client.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('stackflux diff on the settled cluster reports no changes and exports the snapshot', () => {
    const r = stackflux([
      'diff',
      `--kubeconfig=${env.kubeconfig}`,
      `--namespace=${ns}`,
      `--cache-dir=${cacheDir}`,
      `--export-snapshot=${snapDir}`,
      `--now=${now}`,
      `--fleet-url=${fleetUrl}`,
    ]);
    assert.equal(r.status, 0, `diff found changes:\n${r.stdout}\n${r.stderr}`);
    assert.equal(r.stdout, '');
    const files = walk(snapDir);
    for (const v of ['v1', 'v2']) {
      assert.ok(files.includes(`namespaces/${ns}/stackflux.io/clusterstackreleases/${ferrolTag(v)}.yaml`), v);
      assert.ok(
        files.includes(`namespaces/${ns}/kustomize.toolkit.fluxcd.io/kustomizations/${ferrolTag(v)}.yaml`),
      );
    }
    assert.ok(files.includes(`namespaces/${ns}/cluster.x-k8s.io/clusters/c1.yaml`));
    assert.ok(files.includes(`namespaces/${ns}/source.toolkit.fluxcd.io/gitrepositories/c1-addons.yaml`));
    assert.ok(files.includes(`namespaces/${ns}/kustomize.toolkit.fluxcd.io/kustomizations/c1.cni.yaml`));
    assert.ok(files.includes(`fleet/stackflux/${ns}/c1/cni/config.yaml`), "c1's branch is in the snapshot");
    const tips = parse(readFileSync(join(snapDir, 'fleet-tips.yaml'), 'utf8')) as Record<string, string>;
    const ca = readSnapshot(snapDir).objects.get(`namespaces/${ns}/stackflux.io/clusteraddons/c1`) as
      | (SnapshotObject & { status?: { fleetCommit?: string } })
      | undefined;
    assert.equal(tips[`stackflux/${ns}/c1`], ca?.status?.fleetCommit, 'the real tip of the branch');
    assert.ok(files.some((f) => /^sources\/[^/]+\/tags\.yaml$/.test(f)));
  });

  it('render --check-fixed-point over the exported snapshot writes no mutation', () => {
    const out = join(work, 'render-live');
    const r = stackflux([
      'render',
      `--input-dir=${snapDir}`,
      `--output-dir=${out}`,
      `--now=${now}`,
      '--check-fixed-point',
    ]);
    assert.equal(r.status, 0, r.stderr);
    const mutations = walk(out).filter((f) => f !== 'results.yaml');
    assert.deepEqual(
      mutations,
      [],
      `render over the live snapshot would still write:\n${mutations.join('\n')}`,
    );
    const results = parse(readFileSync(join(out, 'results.yaml'), 'utf8')) as { mutations: number };
    assert.equal(results.mutations, 0);
  });

  it('render from scratch creates exactly the objects the live controller created', () => {
    // The snapshot without what the controller made: its objects and the ClusterStack's status.
    const scratch = join(work, 'scratch');
    cpSync(snapDir, scratch, { recursive: true });
    for (const dir of CREATED) rmSync(join(scratch, 'namespaces', ns, dir), { recursive: true, force: true });
    const cskFile = join(scratch, 'namespaces', ns, 'stackflux.io', 'clusterstacks', 'ferrol.yaml');
    const { status: _status, ...stack } = parse(readFileSync(cskFile, 'utf8')) as Record<string, unknown>;
    writeFileSync(cskFile, stringify(stack));

    // The CLI: renders, passes its own fixed-point check, and writes an apply for each object.
    const out = join(work, 'render-scratch');
    const r = stackflux([
      'render',
      `--input-dir=${scratch}`,
      `--output-dir=${out}`,
      `--now=${now}`,
      '--check-fixed-point',
    ]);
    assert.equal(r.status, 0, r.stderr);
    const created = (files: string[], suffix: string) =>
      files
        .filter((f) => CREATED.some((d) => f.startsWith(`namespaces/${ns}/${d}/`)) && f.endsWith(suffix))
        .map((f) => f.slice(0, -suffix.length))
        .sort();
    const live = readSnapshot(snapDir);
    const liveCreated = created(walk(snapDir), '.yaml');
    assert.ok(
      liveCreated.length >= 10,
      `the live controller created releases and Flux objects (also c1's GitRepository and 3 addon Kustomizations): ${liveCreated}`,
    );
    assert.deepEqual(
      created(
        walk(join(out, 'apply')).map((f) => f),
        '.body.yaml',
      ),
      liveCreated,
      'render applies exactly the objects the live controller created',
    );

    // The functions behind it: the state after render, compared field by field with the live objects.
    const output = renderSnapshot(readSnapshot(scratch), {
      now: new Date(Date.parse(now)),
      templates: loadFluxTemplates(),
    });
    const problems: string[] = [];
    for (const key of liveCreated) {
      const want = live.objects.get(key);
      const got = output.world.objects.get(key);
      assert.ok(want, key);
      if (got === undefined) {
        problems.push(`${key}: not rendered`);
        continue;
      }
      const g = comparable(got);
      const w = comparable(want);
      // Exact: identity, labels, finalizers, owner references.
      const { spec: gs, metadata: gm, ...gi } = g;
      const { spec: ws, metadata: wm, ...wi } = w;
      const { annotations: ga, ...gmeta } = gm as Record<string, unknown>;
      const { annotations: wa, ...wmeta } = wm as Record<string, unknown>;
      for (const [field, a, b] of [
        ['identity', gi, wi],
        ['metadata', gmeta, wmeta],
      ] as const)
        if (JSON.stringify(a) !== JSON.stringify(b))
          problems.push(`${key} ${field}: render ${JSON.stringify(a)}, live ${JSON.stringify(b)}`);
      // The API server adds defaults to specs (and Flux annotations): what render sets must be there.
      contained(gs, ws, `${key} spec`, problems);
      contained(ga, wa, `${key} annotations`, problems);
    }
    const extra = [...output.world.objects.keys()].filter(
      (k) => CREATED.some((d) => k.startsWith(`namespaces/${ns}/${d}/`)) && !liveCreated.includes(k),
    );
    assert.deepEqual(extra, [], 'render creates nothing the live controller did not');
    assert.deepEqual(problems, []);
  });
});
