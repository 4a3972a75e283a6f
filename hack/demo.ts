// `npm run demo`: the whole GitOps loop on this machine. Starts the test environment (real
// kube-apiservers, Flux, a Git server), installs stackflux's CRDs, runs the controller, cuts a
// release of stacks/docker-ferrol-1-30 as a Git tag, subscribes a ClusterStack, creates a
// Cluster API Cluster with its workload kubeconfig Secret, waits until everything is Ready,
// then cuts a second release and shows the rollout and the old release's garbage collection.
// Leaves nothing running unless --keep is given.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { createHmac, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { KubeClient, type KubeObject, loadKubeConfig } from '../controller/runtime/client.ts';
import { cutRelease } from './lib/release-repo.ts';
import { createRepo, down, envShPath, up, workloadKubeconfigSecret } from './lib/testenv.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const keep = process.argv.includes('--keep');
const stateDir =
  process.env.STACKFLUX_DEMO_DIR ?? join(tmpdir(), `stackflux-demo-${process.getuid?.() ?? 'user'}`);
const ns = 'demo';
const stackDir = join(root, 'stacks', 'docker-ferrol-1-30');
const started = Date.now();

const say = (m: string) => process.stdout.write(`\n==> ${m}\n`);
const note = (m: string) => process.stdout.write(`    ${m}\n`);
let controllerExit: string | undefined;
const elapsed = () => `${((Date.now() - started) / 1000).toFixed(0)}s`;

type Status = {
  conditions?: Array<{ type: string; status: string; reason?: string; message?: string }>;
} & Record<string, unknown>;
type Obj = KubeObject & { spec?: Record<string, unknown>; status?: Status };

function ready(o: Obj | undefined): { ok: boolean; why: string } {
  const c = o?.status?.conditions?.find((x) => x.type === 'Ready');
  if (!o) return { ok: false, why: 'not created yet' };
  if (!c) return { ok: false, why: 'no Ready condition yet' };
  return { ok: c.status === 'True', why: `${c.reason ?? ''}: ${c.message ?? ''}` };
}

/** Polls until check() returns a value, printing what it waits for every few seconds. */
async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined>,
  progress: () => Promise<string>,
  timeoutMs = 240_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastPrint = 0;
  for (;;) {
    if (controllerExit !== undefined)
      throw new Error(`the controller exited (${controllerExit}) while waiting for ${what}`);
    const v = await check().catch(() => undefined);
    if (v !== undefined) {
      note(`✔ ${what} (${elapsed()})`);
      return v;
    }
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}: ${await progress().catch(String)}`);
    if (Date.now() - lastPrint > 5000) {
      note(`… waiting for ${what}: ${await progress().catch(String)}`);
      lastPrint = Date.now();
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => resolve(typeof a === 'object' && a ? a.port : 0));
    });
  });
}

function table(rows: string[][]): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  return rows
    .map((r) =>
      r
        .map((c, i) => c.padEnd(widths[i] ?? 0))
        .join('   ')
        .trimEnd(),
    )
    .join('\n');
}

/** What `flux get kustomizations -A` shows, read from the Kustomizations' status. */
async function fluxKustomizations(client: KubeClient): Promise<string> {
  const list = await client.listAll<Obj>('kustomize.toolkit.fluxcd.io/v1', 'Kustomization');
  const rows = [['NAMESPACE', 'NAME', 'REVISION', 'SUSPENDED', 'READY', 'MESSAGE']];
  for (const k of list.items) {
    const c = k.status?.conditions?.find((x) => x.type === 'Ready');
    rows.push([
      k.metadata.namespace ?? '',
      k.metadata.name ?? '',
      String(k.status?.lastAppliedRevision ?? ''),
      String(k.spec?.suspend === true),
      c?.status ?? 'Unknown',
      (c?.message ?? '').slice(0, 70),
    ]);
  }
  return table(rows);
}

function stackfluxStatus(kubeconfig: string): string {
  try {
    return execFileSync(process.execPath, [join(root, 'bin', 'stackflux.js'), 'status', '-n', ns], {
      encoding: 'utf8',
      env: { ...process.env, KUBECONFIG: kubeconfig },
    });
  } catch (err) {
    return `stackflux status failed: ${err instanceof Error ? err.message : String(err)}`;
  }
}

async function applyCrds(client: KubeClient): Promise<void> {
  const dir = join(root, 'crds');
  for (const file of readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .sort()) {
    for (const doc of parseAllDocuments(readFileSync(join(dir, file), 'utf8'))) {
      const obj = doc.toJS() as KubeObject | null;
      if (obj) await client.apply(obj, { force: true });
    }
  }
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.yaml'))) {
    const name = file.replace(/\.yaml$/, '');
    await waitFor(
      `CRD ${name} established`,
      async () => {
        const crd = await client.get<Obj>('apiextensions.k8s.io/v1', 'CustomResourceDefinition', name);
        return crd?.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')
          ? true
          : undefined;
      },
      async () => 'pending',
      30_000,
    );
  }
}

async function main(): Promise<void> {
  say(`Starting the local environment in ${stateDir}`);
  note(
    'etcd + kube-apiserver (management and workload cluster), kube-controller-manager, Flux, a Git server',
  );
  if (existsSync(join(stateDir, 'pids'))) await down(stateDir, () => undefined);
  rmSync(stateDir, { recursive: true, force: true });
  mkdirSync(stateDir, { recursive: true });
  const env = await up(stateDir, (m) => note(m));
  const client = new KubeClient(loadKubeConfig({ kubeconfig: env.kubeconfig }));

  say('Installing the stackflux CRDs (crds/*.yaml)');
  await applyCrds(client);

  say('Creating the release repository and the fleet repository on the Git server');
  const releaseRepo = await createRepo(env, 'cluster-stacks');
  const fleetRepo = await createRepo(env, 'fleet');
  const work = join(stateDir, 'release-work');
  const v1 = cutRelease({
    repoUrl: releaseRepo,
    workdir: work,
    stackDir,
    path: 'docker-ferrol-1-30',
    version: 'v1',
  });
  note(`git tag ${v1.tag} && git push --tags   (commit ${v1.commit.slice(0, 12)})`);

  say('Running the controller: stackflux run');
  const [metrics, health, webhook] = [await freePort(), await freePort(), await freePort()];
  const webhookSecret = randomBytes(16).toString('hex');
  const logFile = join(stateDir, 'logs', 'stackflux.log');
  const controller: ChildProcess = spawn(
    process.execPath,
    [
      join(root, 'bin', 'stackflux.js'),
      'run',
      `--metrics-addr=127.0.0.1:${metrics}`,
      `--health-addr=127.0.0.1:${health}`,
      `--webhook-addr=127.0.0.1:${webhook}`,
      `--webhook-secret=${webhookSecret}`,
      `--cache-dir=${join(stateDir, 'controller-cache')}`,
      `--fleet-url=${fleetRepo}`,
      '--fleet-batch-window=1s',
    ],
    {
      env: { ...process.env, KUBECONFIG: env.kubeconfig },
      stdio: ['ignore', openSync(logFile, 'a'), openSync(logFile, 'a')],
      detached: keep,
    },
  );
  if (keep) controller.unref();
  controller.on('exit', (code, signal) => {
    controllerExit = `code ${code ?? signal}; last lines of ${logFile}:\n${readFileSync(logFile, 'utf8').trimEnd().split('\n').slice(-15).join('\n')}`;
  });
  note(`pid ${controller.pid}, logs in ${logFile}, metrics on http://127.0.0.1:${metrics}/metrics`);
  await waitFor(
    'controller ready (/readyz)',
    async () => ((await fetch(`http://127.0.0.1:${health}/readyz`)).ok ? true : undefined),
    async () => (controller.exitCode === null ? 'starting' : `exited with ${controller.exitCode}`),
    60_000,
  );

  try {
    say(`Subscribing a ClusterStack to ${releaseRepo}`);
    await client.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } }, { force: true });
    await client.apply(
      {
        apiVersion: 'stackflux.io/v1alpha1',
        kind: 'ClusterStack',
        metadata: { name: 'ferrol', namespace: ns },
        spec: {
          provider: 'docker',
          name: 'ferrol',
          kubernetesVersion: '1.30',
          channel: 'stable',
          autoSubscribe: true,
          source: { git: { url: releaseRepo }, path: 'docker-ferrol-1-30' },
          // Long on purpose: the second release arrives through the push webhook.
          interval: '10m',
        },
      },
      { force: true },
    );
    const release = (tag: string) => client.get<Obj>('stackflux.io/v1alpha1', 'ClusterStackRelease', tag, ns);
    await waitFor(
      `ClusterStackRelease ${v1.tag} Ready (Flux applied its ClusterClass)`,
      async () => (ready(await release(v1.tag)).ok ? true : undefined),
      async () => ready(await release(v1.tag)).why,
    );

    say('Creating a Cluster API Cluster that uses the release, and its kubeconfig Secret');
    await client.apply(
      workloadKubeconfigSecret(ns, 'workload', readFileSync(env.workloadKubeconfig, 'utf8')) as KubeObject,
      { force: true },
    );
    const cluster = (className: string) => ({
      apiVersion: 'cluster.x-k8s.io/v1beta2',
      kind: 'Cluster',
      metadata: { name: 'workload', namespace: ns },
      spec: {
        clusterNetwork: {
          pods: { cidrBlocks: ['192.168.0.0/16'] },
          services: { cidrBlocks: ['10.128.0.0/12'] },
        },
        controlPlaneEndpoint: { host: '172.18.0.10', port: 6443 },
        topology: { classRef: { name: className }, version: 'v1.30.4' },
      },
    });
    await client.apply(cluster(v1.tag), { force: true });
    const addon = () => client.get<Obj>('stackflux.io/v1alpha1', 'ClusterAddon', 'workload', ns);
    await waitFor(
      'ClusterAddon workload Ready (addons applied into the workload cluster)',
      async () => (ready(await addon()).ok ? true : undefined),
      async () => ready(await addon()).why,
    );
    const workload = new KubeClient(loadKubeConfig({ kubeconfig: env.workloadKubeconfig }));
    const cni = await workload.list<Obj>('v1', 'ConfigMap', { namespace: 'kube-system' });
    note(
      `in the workload cluster, kube-system ConfigMaps: ${cni.items.map((c) => c.metadata.name).join(', ')}`,
    );

    say('flux get kustomizations -A');
    process.stdout.write(`${await fluxKustomizations(client)}\n`);
    say(`stackflux status -n ${ns}`);
    process.stdout.write(stackfluxStatus(env.kubeconfig));

    const v2 = cutRelease({
      repoUrl: releaseRepo,
      workdir: work,
      stackDir,
      path: 'docker-ferrol-1-30',
      version: 'v2',
    });
    say(`Cutting a second release: git tag ${v2.tag} && git push --tags`);
    // What a Git host sends on push: the webhook re-lists the repository at once instead of
    // waiting for the ClusterStack's 10m interval.
    const body = JSON.stringify({ ref: `refs/tags/${v2.tag}`, repository: { clone_url: releaseRepo } });
    const signature = `sha256=${createHmac('sha256', webhookSecret).update(body).digest('hex')}`;
    const hook = await fetch(`http://127.0.0.1:${webhook}/hooks/push`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-github-event': 'push',
        'x-hub-signature-256': signature,
      },
      body,
    });
    note(`push webhook → HTTP ${hook.status} (signed with X-Hub-Signature-256)`);
    await waitFor(
      `ClusterStackRelease ${v2.tag} Ready`,
      async () => (ready(await release(v2.tag)).ok ? true : undefined),
      async () => ready(await release(v2.tag)).why,
    );
    note(`${v1.tag} stays while the Cluster uses it`);

    say(`Upgrading the Cluster to ${v2.tag} (spec.topology.classRef.name)`);
    await client.apply(cluster(v2.tag), { force: true });
    await waitFor(
      `ClusterAddon workload Ready at ${v2.tag}`,
      async () => {
        const a = await addon();
        return ready(a).ok && JSON.stringify(a?.status ?? {}).includes(v2.tag) ? true : undefined;
      },
      async () => ready(await addon()).why,
    );
    await waitFor(
      `old release ${v1.tag} garbage-collected (no Cluster uses it)`,
      async () => ((await release(v1.tag)) === undefined ? true : undefined),
      async () => ready(await release(v1.tag)).why,
    );

    say('flux get kustomizations -A');
    process.stdout.write(`${await fluxKustomizations(client)}\n`);
    say(`stackflux status -n ${ns}`);
    process.stdout.write(stackfluxStatus(env.kubeconfig));
    say(`The Cluster's own fleet branch: git log stackflux/${ns}/workload`);
    process.stdout.write(fleetLog(fleetRepo, `stackflux/${ns}/workload`, join(stateDir, 'fleet-log')));
    say(`Done in ${elapsed()}: two releases rolled out, the old one collected.`);
  } finally {
    if (keep) {
      say('Left running (--keep). To look around:');
      note(`source ${envShPath(stateDir)}      # KUBECONFIG, WORKLOAD_KUBECONFIG, GIT_SERVER_URL`);
      note(`node bin/stackflux.js status -n ${ns}`);
      note(`controller logs: ${logFile}`);
      note(`To stop: kill ${controller.pid} && hack/testenv down --dir ${stateDir}`);
    } else {
      controllerExit = undefined;
      controller.removeAllListeners('exit');
      controller.kill('SIGTERM');
      await down(stateDir, () => undefined);
      note('stopped everything');
    }
  }
}

/** The audit trail of one Cluster's branch: its files and `git log` (what ran, when, why). */
function fleetLog(url: string, branch: string, dir: string): string {
  rmSync(dir, { recursive: true, force: true });
  const git = (...args: string[]) => execFileSync('git', args, { encoding: 'utf8' });
  git('clone', '-q', '--branch', branch, url, dir);
  const files = git('-C', dir, 'ls-files');
  const log = git('-C', dir, 'log', '--date=iso', '--format=%h %ad%n    %B');
  rmSync(dir, { recursive: true, force: true });
  return `${files}\n${log}`;
}

try {
  await main();
} catch (err) {
  process.stderr.write(`\ndemo failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.stderr.write(`controller log: ${join(stateDir, 'logs', 'stackflux.log')}\n`);
  if (!keep) await down(stateDir, () => undefined).catch(() => undefined);
  process.exitCode = 1;
}
