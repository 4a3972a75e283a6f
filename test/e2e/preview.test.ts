// Issue 25 acceptance (preview): 20 Clusters on v1 in three value groups (MTU default ×10, 1500 ×7,
// 9000 ×3). v2 changes the cni template and drops cloud-config; v3 caps the cni MTU at 1500.
//   1. `stackflux preview clusterstack ferrol --release v2` (live, read-only) predicts per Cluster
//      the objects added/changed/removed; the test then MOVES the 20 Clusters to v2, waits for the
//      live controller to write their fleet branches, and compares: the preview's object changes
//      and addons removed are exactly the difference between each branch before and after.
//   2. `--release v3` names the 3 Clusters with MTU 9000 (ValuesInvalid) and exits 1.
// No kubeconfig Secret exists, so Flux never applies anything into the shared workload cluster;
// the fleet branches are what the controller writes regardless.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { PreviewResult } from '../../controller/preview/core.ts';
import { diffBranchObjects } from '../../controller/preview/objects.ts';
import type { KubeObject } from '../../controller/runtime/client.ts';
import { createRepo, type Endpoints } from '../../hack/lib/testenv.ts';
import {
  addonCluster,
  CAPI,
  ControllerProcess,
  createTestNamespace,
  deleteClustersAndAddons,
  deleteTestNamespace,
  e2eSuite,
  ferrolClusterStack,
  ferrolTag,
  fleetCommitsAt,
  git,
  initRepo,
  releaseFerrol130,
  stackflux,
} from '../support/e2e.ts';

const { env, client, ns, work, repoDir } = e2eSuite('preview');
const cacheDir = join(work, 'cache');
const fleetDir = join(work, 'fleet.git');
let fleetUrl = '';

const CLUSTERS = Array.from({ length: 20 }, (_, i) => `c${String(i + 1).padStart(2, '0')}`);
/** Value groups: c01–c10 MTU default (1450), c11–c17 1500, c18–c20 9000. */
const mtuOf = (i: number): number | undefined => (i < 10 ? undefined : i < 17 ? 1500 : 9000);

/** The Cluster with these labels. */
const labelled = (c: KubeObject, labels: Record<string, string>): KubeObject => ({
  ...c,
  metadata: { ...c.metadata, labels },
});

/** Every Cluster's fleet branch as it is now: `<addon>/<path>` → content, by Cluster name. */
function fleetBranches(): Map<string, Map<string, string>> {
  git(fleetDir, 'fetch', '-q', '--prune', fleetUrl, '+refs/heads/*:refs/heads/*');
  const out = new Map<string, Map<string, string>>();
  for (const name of CLUSTERS) {
    const branch = `stackflux/${ns}/${name}`;
    const files = new Map<string, string>();
    for (const path of git(fleetDir, 'ls-tree', '-r', '--name-only', branch).split('\n').filter(Boolean))
      files.set(
        path,
        execFileSync('git', ['show', `${branch}:${path}`], { cwd: fleetDir, encoding: 'utf8' }),
      );
    out.set(name, files);
  }
  return out;
}

function preview(release: string | undefined, ...extra: string[]) {
  return stackflux([
    'preview',
    'clusterstack',
    'ferrol',
    '-n',
    ns,
    `--kubeconfig=${env.kubeconfig}`,
    `--fleet-url=${fleetUrl}`,
    `--cache-dir=${cacheDir}`,
    ...(release !== undefined ? [`--release=${release}`] : []),
    ...extra,
  ]);
}

const addonsAt = (release: string, previous?: Map<string, string>) =>
  fleetCommitsAt(client, ns, release, CLUSTERS.length, previous);

describe('stackflux preview: the predicted change is the change the move makes', {
  timeout: 30 * 60_000,
}, () => {
  let controller: ControllerProcess | undefined;
  let v1Commits = new Map<string, string>();
  let v2Preview: PreviewResult | undefined;

  before(async () => {
    await createTestNamespace(client, ns);
    const repoUrl = await createRepo(env as Endpoints, ns);
    fleetUrl = await createRepo(env as Endpoints, `${ns}-fleet`);
    git(work, 'init', '-q', '--bare', fleetDir);
    initRepo(repoDir);
    releaseFerrol130(
      repoDir,
      repoUrl,
      'v1',
      {
        version: 'v2',
        edit: (dir) => {
          const cni = join(dir, 'cluster-addon', 'cni', 'config.yaml.hbs');
          writeFileSync(
            cni,
            readFileSync(cni, 'utf8').replace('  LOG_LEVEL:', '  FEATURE_GATES: "fast-path"\n  LOG_LEVEL:'),
          );
          const stack = join(dir, 'stack.yaml');
          writeFileSync(
            stack,
            readFileSync(stack, 'utf8').replace(/ {2}- name: cloud-config\n(( {4}.*|\s*#.*)\n)*/, ''),
          );
        },
      },
      {
        version: 'v3',
        edit: (dir) => {
          const schema = join(dir, 'cluster-addon', 'cni', 'values.schema.json');
          writeFileSync(schema, readFileSync(schema, 'utf8').replace('"maximum": 9000', '"maximum": 1500'));
        },
      },
    );
    controller = await ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: ns,
      cacheDir,
      extraArgs: [`--fleet-url=${fleetUrl}`, '--fleet-batch-window=1s'],
    });
    await controller.step(async () => {
      await client.create(
        ferrolClusterStack(ns, 'ferrol', {
          source: { git: { url: repoUrl }, path: 'ferrol-1-30' },
          autoSubscribe: false,
          versions: ['v1', 'v2', 'v3'],
          rollout: { waves: [{ name: 'canary', selector: { matchLabels: { tier: 'canary' } } }] },
        }),
      );
      for (const [i, name] of CLUSTERS.entries()) {
        const mtu = mtuOf(i);
        await client.create(
          labelled(
            addonCluster(ns, name, {
              podCidr: `10.${i + 1}.0.0/16`,
              className: ferrolTag('v1'),
              version: 'v1.30.4',
              ...(mtu !== undefined ? { values: { cni: { mtu } } } : {}),
            }),
            i < 2 ? { tier: 'canary' } : {},
          ),
        );
      }
      v1Commits = await addonsAt(ferrolTag('v1'));
    });
  });

  after(async () => {
    await deleteClustersAndAddons(client, ns, CLUSTERS);
    await controller?.stop();
    await deleteTestNamespace(client, ns);
    client.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('previews v2 for the 20 Clusters: cni ConfigMap changed, cloud-config removed, one group, exit 0', () => {
    const r = preview(ferrolTag('v2'), '-o', 'json');
    assert.equal(r.status, 0, r.stderr);
    const result = JSON.parse(r.stdout) as PreviewResult;
    v2Preview = result;
    assert.equal(result.release, ferrolTag('v2'));
    assert.deepEqual(
      result.clusters.map((c) => [c.name, c.outcome, c.wave]),
      CLUSTERS.map((name, i) => [name, 'changed', i < 2 ? 'canary' : 'rest']),
    );
    assert.ok(result.clusters.every((c) => c.addonsRemoved.join() === 'cloud-config'));
    // The MTU is in no changed line: the 20 changes are the same change.
    assert.deepEqual(result.groups, [{ clusters: CLUSTERS.map((c) => `${ns}/${c}`) }]);
    assert.equal(result.failed, 0);
    // The human forms, kept for the README.
    const summary = preview(ferrolTag('v2'));
    const diff = preview(ferrolTag('v2'), '--diff');
    assert.equal(summary.status, 0, summary.stderr);
    assert.match(summary.stdout, new RegExp(`${ns}/c01 \\(\\+19 more\\)\\s+20\\s+canary,rest`));
    assert.match(diff.stdout, /\+ {2}FEATURE_GATES: fast-path/);
    writeFileSync(
      join(process.env.PREVIEW_OUTPUT_DIR ?? work, 'preview-v2.txt'),
      `${summary.stdout}\n${diff.stdout}`,
    );
  });

  it('names the 3 Clusters that v3 would fail to render (ValuesInvalid) and exits 1', () => {
    const r = preview(ferrolTag('v3'));
    assert.equal(r.status, 1, r.stderr);
    const json = preview(ferrolTag('v3'), '-o', 'json');
    assert.equal(json.status, 1);
    const result = JSON.parse(json.stdout) as PreviewResult;
    assert.deepEqual(
      result.clusters.filter((c) => c.outcome === 'failed').map((c) => [c.name, c.failure?.reason]),
      [
        ['c18', 'ValuesInvalid'],
        ['c19', 'ValuesInvalid'],
        ['c20', 'ValuesInvalid'],
      ],
    );
    assert.equal(result.failed, 3);
    // Without --release: the newest release the ClusterStack would take (pinned v1, v2, v3).
    const latest = preview(undefined, '-o', 'json');
    assert.equal((JSON.parse(latest.stdout) as PreviewResult).release, ferrolTag('v3'));
    assert.match(r.stdout, new RegExp(`${ns}/c18, ${ns}/c19, ${ns}/c20: ValuesInvalid: .*1500`));
    writeFileSync(join(process.env.PREVIEW_OUTPUT_DIR ?? work, 'preview-v3.txt'), r.stdout);
  });

  it('after the 20 Clusters move to v2, their fleet branches changed exactly as the preview said', async () => {
    assert.ok(v2Preview, 'the v2 preview ran');
    const beforeMove = fleetBranches();
    await controller?.step(async () => {
      for (const name of CLUSTERS)
        await client.mergePatch(CAPI, 'Cluster', name, ns, {
          spec: { topology: { classRef: { name: ferrolTag('v2') }, version: 'v1.30.4' } },
        });
      await addonsAt(ferrolTag('v2'), v1Commits);
    });
    const afterMove = fleetBranches();
    for (const c of v2Preview.clusters) {
      const was = beforeMove.get(c.name) ?? new Map();
      const now = afterMove.get(c.name) ?? new Map();
      assert.ok(was.size > 0 && now.size > 0, c.name);
      assert.deepEqual(c.objects, diffBranchObjects(was, now), `${c.name}: predicted objects = the move's`);
      const addons = (files: Map<string, string>) => new Set([...files.keys()].map((p) => p.split('/')[0]));
      assert.deepEqual(
        c.addonsRemoved,
        [...addons(was)].filter((a) => !addons(now).has(a)),
        c.name,
      );
    }
    const count = (k: string) =>
      v2Preview?.clusters.reduce((n, c) => n + c.objects.filter((o) => o.change === k).length, 0);
    assert.ok(
      (count('changed') ?? 0) >= 20 && (count('removed') ?? 0) >= 20,
      'every Cluster had a change and a removal',
    );
  });
});
