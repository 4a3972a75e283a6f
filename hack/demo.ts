// `npm run demo`: the whole GitOps loop on this machine. Starts the test environment (real
// kube-apiservers, Flux, a Git server), installs stackflux's CRDs, runs the controller, cuts a
// release of stacks/docker-ferrol-1-30 as a Git tag, subscribes a ClusterStack, creates a
// Cluster API Clusters (a canary and one more) with their workload kubeconfig Secrets, waits until
// everything is Ready, then cuts a second release and shows the Progressive rollout moving the
// canary first and the other Cluster after the canary's soak, and the old release's garbage
// collection. No Cluster API controllers run here: the demo plays Cluster API's topology
// controller (hack/lib/capi.ts) by writing the Clusters' conditions after each move.
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
import { playClusterApi } from './lib/capi.ts';
import { cutRelease } from './lib/release-repo.ts';
import { createRepo, down, type Endpoints, envShPath, up, workloadKubeconfigSecret } from './lib/testenv.ts';

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
let stopCapi: (() => Promise<void>) | undefined;
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

/** Runs the real `flux` CLI of the test environment (hack/build-testenv.sh builds it). */
function flux(binDir: string | undefined, kubeconfig: string, args: string[]): string {
  if (!binDir) return 'flux: the test environment has no bin directory\n';
  try {
    return execFileSync(join(binDir, 'flux'), args, {
      encoding: 'utf8',
      env: { ...process.env, KUBECONFIG: kubeconfig },
    });
  } catch (err) {
    return `flux ${args.join(' ')} failed: ${err instanceof Error ? err.message : String(err)}\n`;
  }
}

/** `flux get kustomizations -A`, then `flux tree` of the release's and the Cluster's addon Kustomizations. */
async function showFlux(client: KubeClient, env: Endpoints, releaseTag: string): Promise<void> {
  const run = (args: string[]) => {
    say(`flux ${args.join(' ')}`);
    process.stdout.write(flux(env.binDir, env.kubeconfig, args));
  };
  run(['get', 'kustomizations', '-A']);
  const release = await client.get<Obj>('stackflux.io/v1alpha1', 'ClusterStackRelease', releaseTag, ns);
  const releaseKs = release?.status?.kustomization;
  if (typeof releaseKs === 'string') run(['tree', 'kustomization', releaseKs, '-n', ns]);
  const addon = await client.get<Obj>('stackflux.io/v1alpha1', 'ClusterAddon', 'workload', ns);
  const addons = (addon?.status?.addons ?? []) as Array<{ kustomization?: string }>;
  for (const name of new Set(addons.map((a) => a.kustomization).filter((k) => k !== undefined)))
    run(['tree', 'kustomization', name, '-n', ns]);
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
          noProvider: true,
          provider: 'docker',
          name: 'ferrol',
          kubernetesVersion: '1.30',
          channel: 'stable',
          autoSubscribe: true,
          source: { git: { url: releaseRepo }, path: 'docker-ferrol-1-30' },
          // Long on purpose: the second release arrives through the push webhook.
          interval: '10m',
          // A new release rolls out by itself: the canary first, then the rest after a 5 s soak.
          rollout: {
            strategy: 'Progressive',
            waves: [{ name: 'canary', selector: { matchLabels: { tier: 'canary' } }, maxConcurrent: 1 }],
            maxConcurrent: 1,
            minSuccessTime: '5s',
            progressDeadline: '10m',
          },
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

    say(
      'Creating two Cluster API Clusters that use the release (canary, workload) and their kubeconfig Secrets',
    );
    const capi = playClusterApi(client, ns);
    stopCapi = capi.stop;
    const cluster = (name: string, className: string) => ({
      apiVersion: 'cluster.x-k8s.io/v1beta2',
      kind: 'Cluster',
      metadata: { name, namespace: ns, labels: { tier: name === 'canary' ? 'canary' : 'rest' } },
      spec: {
        clusterNetwork: {
          pods: { cidrBlocks: ['192.168.0.0/16'] },
          services: { cidrBlocks: ['10.128.0.0/12'] },
        },
        controlPlaneEndpoint: { host: '172.18.0.10', port: 6443 },
        topology: { classRef: { name: className }, version: 'v1.30.4' },
      },
    });
    for (const name of ['canary', 'workload']) {
      await client.apply(
        workloadKubeconfigSecret(ns, name, readFileSync(env.workloadKubeconfig, 'utf8')) as KubeObject,
        { force: true },
      );
      // Created by this demo, not applied from Git: see the README on Clusters Flux applies.
      await client.create(cluster(name, v1.tag));
    }
    const addon = (name = 'workload') => client.get<Obj>('stackflux.io/v1alpha1', 'ClusterAddon', name, ns);
    const addonAt = async (name: string, tag: string) => {
      const a = await addon(name);
      return ready(a).ok && (a?.status as { release?: string } | undefined)?.release === tag;
    };
    for (const name of ['canary', 'workload'])
      await waitFor(
        `ClusterAddon ${name} Ready (addons applied into the workload cluster)`,
        async () => ((await addonAt(name, v1.tag)) ? true : undefined),
        async () => ready(await addon(name)).why,
      );
    const workload = new KubeClient(loadKubeConfig({ kubeconfig: env.workloadKubeconfig }));
    const cni = await workload.list<Obj>('v1', 'ConfigMap', { namespace: 'kube-system' });
    note(
      `in the workload cluster, kube-system ConfigMaps: ${cni.items.map((c) => c.metadata.name).join(', ')}`,
    );

    await showFlux(client, env, v1.tag);
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

    say(`Rolling ${v2.tag} out (spec.rollout Progressive): wave canary, then wave rest`);
    const classOf = async (name: string) =>
      (
        (await client.get<Obj>('cluster.x-k8s.io/v1beta2', 'Cluster', name, ns))?.spec?.topology as
          | { classRef?: { name?: string } }
          | undefined
      )?.classRef?.name;
    const rolloutLine = () =>
      stackfluxStatus(env.kubeconfig)
        .split('\n')
        .filter((l) => /^\s*rollout\b/.test(l))
        .join('\n');
    await waitFor(
      `canary moved to ${v2.tag} and its addons Ready there`,
      async () => ((await addonAt('canary', v2.tag)) ? true : undefined),
      async () => `canary at ${await classOf('canary')}, workload at ${await classOf('workload')}`,
    );
    note(`canary at ${await classOf('canary')}, workload at ${await classOf('workload')}`);
    note(rolloutLine());
    await waitFor(
      `workload moved to ${v2.tag} after the canary's soak, addons Ready`,
      async () => ((await addonAt('workload', v2.tag)) ? true : undefined),
      async () => `workload at ${await classOf('workload')}; ${rolloutLine()}`,
    );
    const rolloutDone = async () =>
      (
        (await client.get<Obj>('stackflux.io/v1alpha1', 'ClusterStack', 'ferrol', ns))?.status?.rollout as
          | { phase?: string }
          | undefined
      )?.phase === 'Complete';
    await waitFor(
      'rollout Complete',
      async () => ((await rolloutDone()) ? true : undefined),
      async () => rolloutLine(),
    );
    note(rolloutLine());
    await waitFor(
      `old release ${v1.tag} garbage-collected (no Cluster uses it)`,
      async () => ((await release(v1.tag)) === undefined ? true : undefined),
      async () => ready(await release(v1.tag)).why,
    );

    await showFlux(client, env, v2.tag);
    say(`stackflux status -n ${ns}`);
    process.stdout.write(stackfluxStatus(env.kubeconfig));
    say(`The Cluster's own fleet branch: git log stackflux/${ns}/workload`);
    process.stdout.write(fleetLog(fleetRepo, `stackflux/${ns}/workload`, join(stateDir, 'fleet-log')));
    say(`Done in ${elapsed()}: two releases rolled out in two waves, the old one collected.`);
  } finally {
    await stopCapi?.();
    if (keep) {
      say('Left running (--keep). To look around:');
      note(`source ${envShPath(stateDir)}      # KUBECONFIG, GIT_SERVER_URL, …; flux and kubectl on PATH`);
      note(`flux get kustomizations -A && kubectl get clusteraddons -n ${ns}`);
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
  const log = git('-C', dir, 'log', '--date=iso', '--format=%h %ad%n%w(0,4,4)%B');
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
