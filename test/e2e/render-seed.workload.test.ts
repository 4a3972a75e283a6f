// Issue 32 end to end, "generated secrets rotate on every restart": a csctl release whose cni chart
// makes a CA with sprig's genCA (as cilium makes its hubble certificates) renders, real Flux applies
// it into the workload cluster, and then the controller restarts with a NEW, empty cache folder (a
// Pod's emptyDir after a restart or a leader change). Its render seed key was the cache folder's,
// so the restarted controller rendered a new CA and committed it to every Cluster's branch; now it
// reads the key from the Secret it created on its first start: the branch gets no commit and the
// workload cluster's Secret keeps its resourceVersion. `stackflux diff` reads that key too, and two
// offline renders given it with --render-seed-key-file write the controller's certificate. Deleting
// the Secret rotates (the next start makes a new key, a new commit, a new CA in the workload
// cluster); a Secret without a key stops the start naming it. The controller keeps its key in this
// test's namespace (--render-seed-secret), not in the shared flux-system.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ClusterAddon } from '../../controller/api/clusteraddon.ts';
import { API_VERSION } from '../../controller/api/meta.ts';
import { KubeClient, type KubeObject, loadKubeConfig } from '../../controller/runtime/client.ts';
import { createRepo, type Endpoints } from '../../hack/lib/testenv.ts';
import {
  csoferrolClusterStack,
  cutCsctlRelease,
  servedClusterClass,
  csoferrolTag as tag,
} from '../support/csctl.ts';
import {
  ControllerProcess,
  cond,
  controllerSteps,
  createAddonCluster,
  createTestNamespace,
  e2eEnv,
  fleetBranchFiles,
  git,
  initRepo,
  NODE,
  push,
  ROOT,
  releaseAddonNamespace,
  required,
  STACKFLUX,
  sleep,
  stackflux,
  waitFor,
} from '../support/e2e.ts';
import { uniqueName } from '../support/env.ts';

const env = { ...e2eEnv(), workloadKubeconfig: required('WORKLOAD_KUBECONFIG') };
const client = new KubeClient(loadKubeConfig({ kubeconfig: env.kubeconfig }));
const workload = new KubeClient(loadKubeConfig({ kubeconfig: env.workloadKubeconfig }));
const ns = uniqueName('renderseed');
const work = mkdtempSync(join(tmpdir(), 'stackflux-renderseed-'));
const repoDir = join(work, 'release');
const ADDON_NS = 'kube-system';
const SEED_SECRET = 'render-seed';
const BRANCH = `stackflux/${ns}/c1`;
/** The generated Secret (unique to this run: the workload cluster is shared). */
const CA_SECRET = `${ns}-hubble-ca`;
/** What the addons apply into the workload cluster (removed after the test). */
const APPLIED = [
  { apiVersion: 'v1', kind: 'Secret', name: CA_SECRET },
  { apiVersion: 'v1', kind: 'ConfigMap', name: 'cni-config' },
  { apiVersion: 'v1', kind: 'ConfigMap', name: 'metrics-config' },
  { apiVersion: 'v1', kind: 'ServiceAccount', name: 'cni' },
];

/** cni's umbrella chart makes a CA per render, as cilium's chart makes the hubble certificates. */
function withGeneratedCa(dir: string): void {
  mkdirSync(join(dir, 'cluster-addon', 'cni', 'templates'), { recursive: true });
  writeFileSync(
    join(dir, 'cluster-addon', 'cni', 'templates', 'hubble-ca.yaml'),
    `{{- $ca := genCA "hubble-ca.cilium.io" 1095 }}
apiVersion: v1
kind: Secret
metadata:
  name: ${CA_SECRET}
  namespace: {{ .Release.Namespace }}
type: Opaque
data:
  ca.crt: {{ $ca.Cert | b64enc }}
  ca.key: {{ $ca.Key | b64enc }}
`,
  );
}

type CA = ClusterAddon & KubeObject;
type SecretObject = KubeObject & { data?: Record<string, string>; immutable?: boolean };

/** genCA makes an RSA key in the Go engine: on a busy machine that takes longer than the default 5 s. */
const RENDER_TIMEOUT = '--render-timeout=60s';
const seedArgs = (fleetUrl: string) => [
  `--fleet-url=${fleetUrl}`,
  '--fleet-batch-window=1s',
  `--render-seed-secret=${ns}/${SEED_SECRET}`,
  RENDER_TIMEOUT,
];
const seedSecret = () => client.get<SecretObject>('v1', 'Secret', SEED_SECRET, ns);
const seedKeyOf = (s: SecretObject | undefined) => Buffer.from(s?.data?.key ?? '', 'base64').toString();
const workloadCa = () => workload.get<SecretObject>('v1', 'Secret', CA_SECRET, ADDON_NS);
const caddon = () => client.get<CA>(API_VERSION, 'ClusterAddon', 'c1', ns);
const branchTip = () => git(work, 'ls-remote', fleetUrl, `refs/heads/${BRANCH}`).split(/\s+/)[0] ?? '';

/** The branch's file holding the generated Secret, and that file's text. */
function caFile(files: ReadonlyMap<string, string>): [string, string] {
  const found = [...files].filter(([, text]) => text.includes(`name: ${CA_SECRET}`));
  assert.equal(found.length, 1, `one file of the branch holds Secret ${CA_SECRET}: ${[...files.keys()]}`);
  return found[0] as [string, string];
}
/** The CA certificate (PEM) in a file or object text. */
function caCertOf(text: string): string {
  const b64 = /ca\.crt: "?([A-Za-z0-9+/=]+)"?/.exec(text)?.[1];
  assert.ok(b64, `a ca.crt in:\n${text}`);
  const pem = Buffer.from(b64, 'base64').toString();
  assert.match(pem, /^-----BEGIN CERTIFICATE-----/);
  return pem;
}

/** Every file under `dir`, relative, sorted. */
function walk(dir: string, prefix = ''): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((e) =>
      e.isDirectory() ? walk(join(dir, e.name), `${prefix}${e.name}/`) : [`${prefix}${e.name}`],
    )
    .sort();
}

let fleetUrl = '';
let controller: ControllerProcess | undefined;
const step = controllerSteps(() => controller);
/** What step 1 left: the fleet commit and tip, the CA file, the workload Secret. */
let first: { commit: string; tip: string; path: string; file: string; workload: SecretObject; key: string };

/** Starts the controller with an empty cache folder of its own; the previous one is stopped first. */
async function restart(cacheName: string): Promise<ControllerProcess> {
  await controller?.stop();
  const cacheDir = join(work, cacheName);
  assert.equal(existsSync(cacheDir), false, 'a new, empty cache folder');
  controller = await ControllerProcess.start({
    kubeconfig: env.kubeconfig,
    namespace: ns,
    cacheDir,
    extraArgs: seedArgs(fleetUrl),
  });
  return controller;
}

/** Waits until `c` has reconciled Cluster c1 (rendered its addons and compared them with the branch). */
async function reconciledC1(c: ControllerProcess): Promise<void> {
  await waitFor('the restarted controller reconciled c1', async () =>
    c
      .logged('reconciled')
      .concat(c.logged('reconciled; requeue after delay'))
      .some((r) => r.controller === 'clusteraddon' && r.namespace === ns && r.name === 'c1')
      ? true
      : undefined,
  );
}

describe('generated secrets keep their values across restarts (the render seed key in a Secret)', {
  timeout: 20 * 60_000,
}, () => {
  before(async () => {
    await createTestNamespace(client, ns);
    const repoUrl = await createRepo(env as Endpoints, `${ns}-release`);
    fleetUrl = await createRepo(env as Endpoints, `${ns}-fleet`);
    initRepo(repoDir);
    cutCsctlRelease(repoDir, 'docker-csoferrol-1-30', 'v1', (dir) => {
      servedClusterClass(dir);
      withGeneratedCa(dir);
    });
    push(repoDir, repoUrl, tag('v1'));
    await restart('cache-1');
    await client.create(csoferrolClusterStack(ns, repoUrl, ['v1']));
  });

  after(async () => {
    await controller?.stop();
    await releaseAddonNamespace(client, ns);
    // The addons' objects are orphaned with their Kustomizations: removed from the workload cluster here.
    for (const o of APPLIED)
      await workload.delete(o.apiVersion, o.kind, o.name, ADDON_NS).catch(() => undefined);
    client.close();
    workload.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('1. a csctl addon using genCA renders; the CA is on the branch and in the workload cluster; the key Secret was made', () =>
    step(async () => {
      await createAddonCluster(client, env.workloadKubeconfig, ns, 'c1', {
        podCidr: '10.246.0.0/16',
        className: tag('v1'),
        version: 'v1.30.4',
      });
      const ca = await waitFor('c1 Ready at v1', async () => {
        const c = await caddon();
        return cond(c, 'Ready')?.status === 'True' && c?.status?.release === tag('v1') ? c : undefined;
      });
      const seed = await seedSecret();
      assert.ok(seed, `the controller created Secret ${ns}/${SEED_SECRET}`);
      assert.equal(seed.immutable, true);
      assert.match(seedKeyOf(seed), /^[0-9a-f]{64}$/);
      const [path, file] = caFile(fleetBranchFiles(fleetUrl, BRANCH, join(work, 'branch-1')));
      const live = await waitFor('the CA Secret in the workload cluster', async () => {
        const s = await workloadCa();
        return s?.data?.['ca.crt'] !== undefined ? s : undefined;
      });
      assert.equal(
        caCertOf(`ca.crt: ${live.data?.['ca.crt']}`),
        caCertOf(file),
        'Flux applied the branch’s CA',
      );
      first = {
        commit: ca.status?.fleetCommit ?? '',
        tip: branchTip(),
        path,
        file,
        workload: live,
        key: seedKeyOf(seed),
      };
      assert.equal(first.tip, first.commit, 'the ClusterAddon names the branch tip');
      assert.deepEqual(
        (controller as ControllerProcess).logged('render seed key loaded').map((r) => r.origin),
        ['created'],
      );
    }));

  it('2. restarted with a new empty cache folder: no commit, the same CA, the workload Secret untouched', () =>
    step(async () => {
      const c = await restart('cache-2');
      assert.deepEqual(
        c.logged('render seed key loaded').map((r) => [r.secret, r.origin]),
        [[`${ns}/${SEED_SECRET}`, 'read']],
      );
      await reconciledC1(c);
      // A changed render would be pushed within the batch window (1 s) of that reconcile.
      await sleep(5_000);
      assert.deepEqual(c.logged('fleet branches pushed'), [], 'the restarted controller pushed nothing');
      assert.equal(branchTip(), first.tip, 'the branch has no new commit');
      assert.equal((await caddon())?.status?.fleetCommit, first.commit);
      const files = fleetBranchFiles(fleetUrl, BRANCH, join(work, 'branch-2'));
      assert.equal(files.get(first.path), first.file, 'the same CA on the branch');
      const live = await workloadCa();
      assert.equal(live?.metadata.resourceVersion, first.workload.metadata.resourceVersion);
      assert.deepEqual(live?.data, first.workload.data);
      assert.equal(seedKeyOf(await seedSecret()), first.key);
    }));

  it('3. stackflux diff reads the installation’s key: no change; offline renders given it write the controller’s CA', () =>
    step(async () => {
      // The addon controller only: the ClusterClass renders are not what this is about (and cost).
      const snap = join(work, 'snapshot');
      const diff = stackflux([
        'diff',
        `--kubeconfig=${env.kubeconfig}`,
        `--namespace=${ns}`,
        '--controllers=clusteraddon',
        `--cache-dir=${join(work, 'cli-cache')}`,
        `--fleet-url=${fleetUrl}`,
        `--render-seed-secret=${ns}/${SEED_SECRET}`,
        `--export-snapshot=${snap}`,
        RENDER_TIMEOUT,
      ]);
      // With a key of its own (the CLI before) c1's CA would differ: the diff would show its file.
      assert.equal(diff.status, 0, `diff found changes:\n${diff.stdout}\n${diff.stderr}`);
      assert.match(
        diff.stderr,
        new RegExp(`using the installation's render seed key \\(Secret ${ns}/${SEED_SECRET}\\)`),
      );

      // Offline, from the exported snapshot without c1's branch: the render writes the branch anew.
      rmSync(join(snap, 'fleet', ...BRANCH.split('/')), { recursive: true, force: true });
      rmSync(join(snap, 'fleet-tips.yaml'), { force: true });
      const keyFile = join(work, 'seed.key');
      writeFileSync(keyFile, `${first.key}\n`, { mode: 0o600 });
      /** The fleet output of a `stackflux render` process given the key: path → content. */
      const render = (out: string): Map<string, string> => {
        const r = stackflux([
          'render',
          `--input-dir=${snap}`,
          `--output-dir=${join(work, out)}`,
          '--controllers=clusteraddon',
          `--render-seed-key-file=${keyFile}`,
          RENDER_TIMEOUT,
        ]);
        assert.equal(r.status, 0, r.stderr);
        const fleet = join(work, out, 'fleet');
        return new Map(walk(fleet).map((f) => [f, readFileSync(join(fleet, f), 'utf8')]));
      };
      const a = render('render-a');
      const b = render('render-b');
      assert.deepEqual(a, b, 'two processes given the key write the same fleet files');
      const file = a.get(['branches', BRANCH, first.path].join('/'));
      assert.ok(file, `the render wrote c1's CA file: ${[...a.keys()]}`);
      // Only the installation's key makes a process's CA the controller's.
      assert.equal(caCertOf(file), caCertOf(first.file), 'the controller’s CA');
    }));

  it('4. deleting the Secret rotates: a new key, a new commit and a new CA in the workload cluster', () =>
    step(async () => {
      await controller?.stop();
      await client.delete('v1', 'Secret', SEED_SECRET, ns);
      const c = await restart('cache-3');
      assert.deepEqual(
        c.logged('render seed key loaded').map((r) => r.origin),
        ['created'],
      );
      const key = seedKeyOf(await seedSecret());
      assert.notEqual(key, first.key);
      const ca = await waitFor('c1 on a new fleet commit', async () => {
        const got = await caddon();
        const commit = got?.status?.fleetCommit;
        return commit !== undefined && commit !== first.commit && cond(got, 'Ready')?.status === 'True'
          ? got
          : undefined;
      });
      const files = fleetBranchFiles(fleetUrl, BRANCH, join(work, 'branch-4'));
      const rotated = files.get(first.path) ?? '';
      assert.notEqual(caCertOf(rotated), caCertOf(first.file), 'a new CA on the branch');
      assert.equal(branchTip(), ca.status?.fleetCommit);
      await waitFor('the new CA in the workload cluster', async () => {
        const s = await workloadCa();
        return s?.data?.['ca.crt'] !== undefined &&
          caCertOf(`ca.crt: ${s.data['ca.crt']}`) === caCertOf(rotated)
          ? true
          : undefined;
      });
    }));

  it('5. a Secret without a usable key stops the start with a message naming it, and stays as it was', async () => {
    await controller?.stop();
    controller = undefined;
    await client.delete('v1', 'Secret', SEED_SECRET, ns);
    await client.create({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: SEED_SECRET, namespace: ns },
      stringData: { key: 'restored-from-the-wrong-backup' },
    });
    const before = await seedSecret();
    const r = spawnSync(
      NODE,
      [
        STACKFLUX,
        'run',
        `--kubeconfig=${env.kubeconfig}`,
        `--namespace=${ns}`,
        '--metrics-addr=',
        '--health-addr=',
        `--cache-dir=${join(work, 'cache-5')}`,
        ...seedArgs(fleetUrl),
      ],
      { cwd: ROOT, encoding: 'utf8', timeout: 120_000 },
    );
    assert.equal(r.signal, null, `it ends by itself, not at the test's timeout:\n${r.stderr}`);
    assert.equal(r.status, 1, r.stderr);
    assert.match(
      r.stderr,
      new RegExp(
        `render seed Secret ${ns}/${SEED_SECRET} holds no usable key: its data.key is not 64 hex digits`,
      ),
    );
    assert.doesNotMatch(r.stderr, /restored-from-the-wrong-backup/, 'the value is never shown');
    const afterRefusal = await seedSecret();
    assert.equal(afterRefusal?.metadata.resourceVersion, before?.metadata.resourceVersion, 'not replaced');
  });
});
