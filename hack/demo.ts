// `npm run demo`: the whole GitOps loop on this machine. Starts the test environment (real
// kube-apiservers, Flux, a Git server), installs stackflux's CRDs, runs the controller, cuts a
// release of stacks/docker-ferrol-1-30 as a Git tag, subscribes a ClusterStack, creates a
// Cluster API Clusters (a canary and one more) with their workload kubeconfig Secrets, waits until
// everything is Ready, then cuts a second release and shows the Progressive rollout moving the
// canary first and the other Cluster after the canary's soak, and the old release's garbage
// collection. No Cluster API controllers run here: the demo plays Cluster API's topology
// controller (hack/lib/capi.ts) by writing the Clusters' conditions after each move.
// Once the first release's addons are Ready, beside the rollout (its output printed as one group at
// the end), the cluster-stack-operator's format: stacks/docker-csoferrol-1-30 released as csctl
// names it, a ClusterStack in its own namespace and one Cluster; it waits for the ClusterClass
// rendered from the Helm chart and for every addon Ready in the workload cluster, and shows the
// addons' stages and per-Cluster values from overwrite.yaml read back from the workload cluster.
// Leaves nothing running unless --keep is given.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { createHmac, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { readReleaseDescription } from '../controller/releases/format.ts';
import { parseReleaseTag } from '../controller/releases/tags.ts';
import { locateGoEngine } from '../controller/rendering/goengine/locate.ts';
import { KubeClient, type KubeObject, loadKubeConfig } from '../controller/runtime/client.ts';
import { csoferrolClusterStack, servedClusterClass } from '../test/support/csctl.ts';
import { addonCluster, installFixtureCrds } from '../test/support/e2e.ts';
import { playClusterApi } from './lib/capi.ts';
import { cutRelease } from './lib/release-repo.ts';
import { readStackDir } from './lib/stack-dir.ts';
import {
  createRepo,
  down,
  type Endpoints,
  envShPath,
  TESTENV_SOURCE_NETWORKS,
  up,
  workloadKubeconfigSecret,
} from './lib/testenv.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const keep = process.argv.includes('--keep');
const stateDir =
  process.env.STACKFLUX_DEMO_DIR ?? join(tmpdir(), `stackflux-demo-${process.getuid?.() ?? 'user'}`);
const ns = 'demo';
const stackDir = join(root, 'stacks', 'docker-ferrol-1-30');
const started = Date.now();

const say = (m: string) => process.stdout.write(`\n==> ${m}\n`);
const note = (m: string) => process.stdout.write(`    ${m}\n`);

/** Where a part of the demo prints: straight to stdout, or into a group printed at once. */
interface Out {
  say: (m: string) => void;
  note: (m: string) => void;
  /** "… waiting for" lines: dropped from a group printed afterwards (its ✔ lines tell the story). */
  progress: (m: string) => void;
}
const stdout: Out = { say, note, progress: note };
function groupOut(): Out & { print: () => void } {
  const lines: Array<() => void> = [];
  return {
    say: (m) => lines.push(() => say(m)),
    note: (m) => lines.push(() => note(m)),
    progress: () => undefined,
    print: () => {
      for (const line of lines.splice(0)) line();
    },
  };
}

let controllerExit: string | undefined;
/** Set when the demo stops: a part still waiting in parallel gives up instead of polling on. */
let stopping = false;
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
  out: Out = stdout,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastPrint = 0;
  for (;;) {
    if (controllerExit !== undefined)
      throw new Error(`the controller exited (${controllerExit}) while waiting for ${what}`);
    if (stopping) throw new Error(`the demo stopped while waiting for ${what}`);
    const v = await check().catch(() => undefined);
    if (v !== undefined) {
      out.note(`✔ ${what} (${elapsed()})`);
      return v;
    }
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}: ${await progress().catch(String)}`);
    if (Date.now() - lastPrint > 5000) {
      out.progress(`… waiting for ${what}: ${await progress().catch(String)}`);
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
  run(['get', 'kustomizations', '-n', ns]);
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
    // The CLI loads node:wasi (the Go engine): its ExperimentalWarning is noise here.
    const args = [
      '--disable-warning=ExperimentalWarning',
      join(root, 'bin', 'stackflux.js'),
      'status',
      '-n',
      ns,
    ];
    return execFileSync(process.execPath, args, {
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

const csoNs = 'demo-cso';
const csoCluster = 'scs-1';
/** Where the stack sits in its release repository, as in SovereignCloudStack/cluster-stacks. */
const csoPath = 'providers/docker/csoferrol';

const csoStackDir = join(root, 'stacks', 'docker-csoferrol-1-30');

/** clusteraddon.yaml's stages as stackflux reads them (the release-format interface): entries in order. */
function csctlStages(dir: string, tag: string): string[] {
  const parsed = parseReleaseTag(tag);
  if (!parsed.ok) return [`tag ${tag}: ${parsed.reason}`];
  const read = readReleaseDescription(readStackDir(dir), parsed.value);
  if (!read.ok) return read.errors;
  const stages = new Map<string, string[]>();
  for (const a of read.value.addons) {
    const entry = `${a.action} ${a.name}${a.waitForPostCondition ? ' (waitForPostCondition)' : ''}`;
    const stage = a.stage ?? '(no stage)';
    stages.set(stage, [...(stages.get(stage) ?? []), entry]);
  }
  return [...stages].map(([stage, entries]) => `${stage}: ${entries.join(', ')}`);
}

/**
 * The cluster-stack-operator's format end to end: a csctl release of stacks/docker-csoferrol-1-30
 * (new layout: Helm cluster-class, addon stages, one umbrella chart per addon with overwrite.yaml),
 * its ClusterClass rendered with Helm's engine and applied by Flux, one Cluster's addons rendered
 * with its values and applied into the workload cluster.
 */
async function csoPart(client: KubeClient, env: Endpoints, out: Out): Promise<void> {
  const wait = <T>(what: string, check: () => Promise<T | undefined>, progress: () => Promise<string>) =>
    waitFor(what, check, progress, 240_000, out);
  out.say(
    'The cluster-stack-operator (csctl) format: stacks/docker-csoferrol-1-30 (run beside the rollout above)',
  );
  // No Cluster API providers run here: their template kinds, which the chart renders, as schemaless stand-ins.
  await installFixtureCrds(client, 'capi-template-crds.yaml');
  const repoUrl = await createRepo(env, 'cso-cluster-stacks');
  const v1 = cutRelease({
    repoUrl,
    workdir: join(stateDir, 'cso-release-work'),
    stackDir: csoStackDir,
    path: csoPath,
    version: 'v1',
    // This environment serves Cluster API v1beta2 only; the stack's chart writes v1beta1, as SCS's do.
    edit: servedClusterClass,
  });
  out.note(`git tag ${v1.tag} && git push --tags   (stack at ${csoPath}/ of ${repoUrl})`);
  out.note(
    '  csctl.yaml, clusteraddon.yaml (stages), cluster-class/ (Helm chart), cluster-addon/{cni,metrics}/',
  );
  out.note(
    "  (cluster-class/ edited to a v1beta2 ClusterClass: this environment serves Cluster API's v1beta2 only)",
  );

  await client.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: csoNs } }, { force: true });
  await client.apply(
    csoferrolClusterStack(csoNs, repoUrl, ['v1'], { source: { git: { url: repoUrl }, path: csoPath } }),
    { force: true },
  );
  out.note(`ClusterStack ${csoNs}/csoferrol subscribed to ${v1.tag}`);
  const release = () => client.get<Obj>('stackflux.io/v1alpha1', 'ClusterStackRelease', v1.tag, csoNs);
  const clusterClass = await wait(
    `ClusterClass ${v1.tag} rendered from the Helm chart and applied by Flux`,
    async () => {
      const r = await release();
      const name = r?.spec?.clusterClass;
      if (!ready(r).ok || typeof name !== 'string') return undefined;
      return client.get<Obj>('cluster.x-k8s.io/v1beta2', 'ClusterClass', name, csoNs);
    },
    async () => ready(await release()).why,
  );
  out.note(`ClusterClass ${csoNs}/${clusterClass.metadata.name} on the management cluster`);
  const releaseKs = (await release())?.status?.kustomization;
  if (typeof releaseKs === 'string')
    for (const line of flux(env.binDir, env.kubeconfig, ['tree', 'kustomization', releaseKs, '-n', csoNs])
      .trimEnd()
      .split('\n'))
      out.note(`  ${line}`);

  await client.apply(
    workloadKubeconfigSecret(csoNs, csoCluster, readFileSync(env.workloadKubeconfig, 'utf8')) as KubeObject,
    { force: true },
  );
  await client.create(
    addonCluster(csoNs, csoCluster, { podCidr: '10.244.0.0/16', className: v1.tag, version: 'v1.30.4' }),
  );
  out.note(
    `Cluster ${csoNs}/${csoCluster} (ClusterClass ${v1.tag}, pods 10.244.0.0/16) and its kubeconfig Secret`,
  );
  type Addon = { name: string; ready: boolean; stage?: string; kustomization?: string };
  const addon = () => client.get<Obj>('stackflux.io/v1alpha1', 'ClusterAddon', csoCluster, csoNs);
  const addons = await wait(
    `ClusterAddon ${csoCluster} Ready: every addon applied into the workload cluster`,
    async () => {
      const a = await addon();
      const list = (a?.status?.addons ?? []) as Addon[];
      const atRelease = a?.status?.release === v1.tag;
      return ready(a).ok && atRelease && list.length > 0 && list.every((x) => x.ready) ? list : undefined;
    },
    async () => ready(await addon()).why,
  );
  const ks = await client.list<Obj>('kustomize.toolkit.fluxcd.io/v1', 'Kustomization', {
    namespace: csoNs,
    labelSelector: `stackflux.io/cluster=${csoCluster}`,
  });
  const ksByName = new Map(ks.items.map((k) => [k.metadata.name, k.spec ?? {}]));
  out.note('clusteraddon.yaml as stackflux reads it:');
  for (const line of csctlStages(csoStackDir, v1.tag)) out.note(`  ${line}`);
  out.note(
    `addons of Cluster ${csoCluster} (ClusterAddon status; stage: the one the BeforeClusterUpgrade hook waits for; one Flux Kustomization each):`,
  );
  for (const a of addons) {
    const spec = ksByName.get(a.kustomization ?? '') as
      | { dependsOn?: Array<{ name: string }>; healthCheckExprs?: unknown[] }
      | undefined;
    const after = spec?.dependsOn?.map((d) => d.name).join(', ');
    const checks = spec?.healthCheckExprs?.length ?? 0;
    out.note(
      `  ${a.name.padEnd(8)} Ready  stage ${a.stage ?? '(none)'}  Kustomization ${a.kustomization ?? '?'}` +
        (after ? `  dependsOn ${after}` : '') +
        (checks > 0 ? `  healthCheckExprs: its waitForPostCondition` : ''),
    );
  }

  const workload = new KubeClient(loadKubeConfig({ kubeconfig: env.workloadKubeconfig }));
  try {
    const cni = await workload.get<Obj & { data?: Record<string, string> }>(
      'v1',
      'ConfigMap',
      'cni-config',
      'kube-system',
    );
    const metrics = await workload.get<Obj>('v1', 'ConfigMap', 'metrics-config', 'kube-system');
    out.note(
      "per-Cluster values from the addons' overwrite.yaml (Go template + sprig over .Cluster), read back from the workload cluster:",
    );
    out.note(
      `  ConfigMap kube-system/cni-config      data.clusterName=${cni?.data?.clusterName} data.podCIDR=${cni?.data?.podCIDR}`,
    );
    const labels = metrics?.metadata.labels ?? {};
    out.note(
      `  ConfigMap kube-system/metrics-config  labels cluster=${labels.cluster} domain=${labels.domain}`,
    );
  } finally {
    workload.close();
  }
  out.say(`flux get kustomizations -n ${csoNs}`);
  out.note(
    flux(env.binDir, env.kubeconfig, ['get', 'kustomizations', '-n', csoNs])
      .trimEnd()
      .replaceAll('\n', '\n    '),
  );
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
  // up() builds the Go engine with the test binaries (hack/build-goengine.sh); the controller finds
  // it as `npm test` does. Said here rather than as a csctl release stuck not Ready later.
  const engine = locateGoEngine();
  if ('error' in engine) throw new Error(engine.error);
  note(`Go engine (Helm and Go templates of csctl releases): ${engine.path}`);
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
      `--allow-source-networks=${TESTENV_SOURCE_NETWORKS}`,
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

  const csoOut = groupOut();
  // Settles to the error, if any: awaited (and printed) after the native part.
  let csoDone: Promise<unknown> = Promise.resolve();
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
      // Created by this demo, not applied from Git: see docs/rollout.md on Clusters applied by Flux.
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
    // The csctl part from here on, beside the rollout below (mostly waits): started with the native
    // Clusters instead, its first Go-engine renders slowed theirs on two cores.
    csoDone = csoPart(client, env, csoOut).then(
      () => undefined,
      (err: unknown) => err,
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

    const csoError = await csoDone;
    csoOut.print();
    if (csoError !== undefined) throw csoError;
    say(
      `Done in ${elapsed()}: two releases rolled out in two waves, the old one collected; ` +
        'a csctl release rendered and its addons Ready.',
    );
  } finally {
    stopping = true;
    await csoDone;
    await stopCapi?.();
    if (keep) {
      say('Left running (--keep). To look around:');
      note(`source ${envShPath(stateDir)}      # KUBECONFIG, GIT_SERVER_URL, …; flux and kubectl on PATH`);
      note(
        `flux get kustomizations -A && kubectl get clusteraddons -n ${ns} && kubectl get clusteraddons -n ${csoNs}`,
      );
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
