// Shared helpers of the end-to-end tests: `stackflux run` as a subprocess, release repositories
// cut from stacks/<example>, and polling with room for a busy shared test environment.
import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import type { ClusterAddon } from '../../controller/api/clusteraddon.ts';
import type { ClusterStack } from '../../controller/api/clusterstack.ts';
import type { ClusterStackRelease } from '../../controller/api/clusterstackrelease.ts';
import { API_VERSION } from '../../controller/api/meta.ts';
import { KubeClient, type KubeObject, loadKubeConfig } from '../../controller/runtime/client.ts';
import { installCrds } from '../../hack/lib/crds.ts';
import { workloadKubeconfigSecret } from '../../hack/lib/testenv.ts';
import { eventually, uniqueName } from './env.ts';

export const ROOT = join(import.meta.dirname, '..', '..');
export const NODE = join(ROOT, 'node_modules', '.bin', 'node');
export const STACKFLUX = join(ROOT, 'bin', 'stackflux.js');
export const CAPI = 'cluster.x-k8s.io/v1beta2';
const KUSTOMIZE_API = 'kustomize.toolkit.fluxcd.io/v1';

/** The endpoints an e2e test of the release pipeline needs (not every variable testEnv() insists on). */
export interface E2eEnv {
  kubeconfig: string;
  gitServerUrl: string;
  gitServerAuthUrl: string;
  gitServerUser: string;
  gitServerPassword: string;
}

export function required(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: source the env.sh of a running hack/testenv`);
  return v;
}

export function e2eEnv(): E2eEnv {
  return {
    kubeconfig: required('KUBECONFIG'),
    gitServerUrl: required('GIT_SERVER_URL'),
    gitServerAuthUrl: required('GIT_SERVER_AUTH_URL'),
    gitServerUser: required('GIT_SERVER_USER'),
    gitServerPassword: required('GIT_SERVER_PASSWORD'),
  };
}

/** A release tag of stacks/docker-ferrol-1-30. */
export const ferrolTag = (version: string): string => `docker-ferrol-1-30-${version}`;

/**
 * What an e2e file starts from: the environment, an admin client, a namespace and a work folder
 * of its own (`repoDir` for its release repository), and readers of its releases.
 */
export function e2eSuite(name: string) {
  const env = e2eEnv();
  const client = new KubeClient(loadKubeConfig({ kubeconfig: env.kubeconfig }));
  const ns = uniqueName(name);
  const work = mkdtempSync(join(tmpdir(), `stackflux-${name}-`));
  return { env, client, ns, work, repoDir: join(work, 'repo'), ...releaseReaders(client, ns) };
}

/** e2eSuite() for tests that also reach into the workload cluster ($WORKLOAD_KUBECONFIG): its client too. */
export function workloadSuite(name: string) {
  const suite = e2eSuite(name);
  const workloadKubeconfig = required('WORKLOAD_KUBECONFIG');
  return {
    ...suite,
    env: { ...suite.env, workloadKubeconfig },
    workload: new KubeClient(loadKubeConfig({ kubeconfig: workloadKubeconfig })),
  };
}

/** Steps run against the controller a file currently holds; a failing step prints its log tail. */
export function controllerSteps(current: () => ControllerProcess | undefined) {
  return async (fn: () => Promise<void>): Promise<void> => {
    const controller = current();
    if (controller === undefined) throw new Error('the controller did not start');
    await controller.step(fn);
  };
}

/** eventually() with room for a busy shared test environment (Flux intervals, other suites). */
export function waitFor<T>(
  what: string,
  fn: () => Promise<T | undefined>,
  o: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  return eventually(what, fn, { timeoutMs: 300_000, ...o });
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export interface Cond {
  type: string;
  status: string;
  reason?: string;
  message?: string;
  observedGeneration?: number;
}

export const cond = (o: { status?: { conditions?: Cond[] } } | undefined, type: string): Cond | undefined =>
  o?.status?.conditions?.find((c) => c.type === type);

/** Sets a ClusterStack's clusterNamespaceSelector; true once it reads back with it. */
export async function setClusterNamespaceSelector(
  client: KubeClient,
  ns: string,
  name: string,
  selector: Record<string, unknown>,
): Promise<boolean> {
  await client.mergePatch(API_VERSION, 'ClusterStack', name, ns, {
    spec: { clusterNamespaceSelector: selector },
  });
  const cs = await client.get<ClusterStack & KubeObject>(API_VERSION, 'ClusterStack', name, ns);
  return cs?.spec.clusterNamespaceSelector !== undefined;
}

// --- the test namespace ------------------------------------------------------------------------
/** Installs the CRDs and creates the test's namespace. */
export async function createTestNamespace(client: KubeClient, ns: string): Promise<void> {
  await installCrds(client);
  await client.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
}

/** Deletes the test's namespace and waits (2 min) for it to go; a timeout is only reported. */
export async function deleteTestNamespace(client: KubeClient, ns: string): Promise<void> {
  await client.delete('v1', 'Namespace', ns).catch(() => undefined);
  await eventually(
    'test namespace deleted',
    async () => ((await client.get('v1', 'Namespace', ns)) === undefined ? true : undefined),
    { timeoutMs: 120_000 },
  ).catch((err: unknown) => process.stderr.write(`cleanup: ${String(err)}\n`));
}

/**
 * Deletes a namespace with ClusterAddons after the controller stopped: nobody removes the
 * fleet-cleanup and release in-use finalizers any more, so they are dropped; addon Kustomizations
 * are orphaned so Flux does not prune through kubeconfig Secrets that go away with the namespace.
 */
export async function releaseAddonNamespace(client: KubeClient, ns: string): Promise<void> {
  await releaseControllerHolds(client, ns);
  await client.delete('v1', 'Namespace', ns).catch(() => undefined);
}

// --- a TEST provider (issue 15): the CRD pair of test/e2e/fixtures/provider-crds.yaml ------------
export const PROVIDER_GROUP = 'infrastructure.clusterstack.test.stackflux.io';
export const PROVIDER_API_VERSION = `${PROVIDER_GROUP}/v1alpha1`;
export const PROVIDER_TEMPLATE_KIND = 'DockerClusterStackReleaseTemplate';
export const PROVIDER_OBJECT_KIND = 'DockerClusterStackRelease';

/** Installs (idempotently) the test provider's CRDs and waits until they are Established. */
export async function installTestProviderCrds(client: KubeClient): Promise<void> {
  await installFixtureCrds(client, 'provider-crds.yaml');
}

/** Installs (idempotently) the CRDs of test/e2e/fixtures/<file> and waits until they are Established. */
export async function installFixtureCrds(client: KubeClient, file: string): Promise<void> {
  const text = readFileSync(join(ROOT, 'test', 'e2e', 'fixtures', file), 'utf8');
  const crds = parseAllDocuments(text).map((d) => d.toJS() as KubeObject);
  for (const crd of crds) await client.apply(crd, { force: true, fieldManager: 'stackflux-test' });
  for (const crd of crds)
    await eventually(`CRD ${crd.metadata.name} Established`, async () => {
      const got = await client.get<KubeObject & { status?: { conditions?: Cond[] } }>(
        'apiextensions.k8s.io/v1',
        'CustomResourceDefinition',
        crd.metadata.name ?? '',
      );
      return cond(got, 'Established')?.status === 'True' ? true : undefined;
    });
}

/** A template of the test provider: spec.template.spec is the provider object's spec. */
export function providerTemplate(name: string, ns: string, spec: Record<string, unknown>): KubeObject {
  return {
    apiVersion: PROVIDER_API_VERSION,
    kind: PROVIDER_TEMPLATE_KIND,
    metadata: { name, namespace: ns },
    spec: { template: { spec } },
  };
}

/**
 * Plays the provider's controller (none runs here): sets status.ready of a provider object, as
 * the provider would once it prepared the release (e.g. uploaded node images).
 */
export async function setProviderReady(
  client: KubeClient,
  ns: string,
  name: string,
  ready: boolean,
): Promise<void> {
  await client.mergePatch(
    PROVIDER_API_VERSION,
    PROVIDER_OBJECT_KIND,
    name,
    ns,
    { status: { ready } },
    {
      subresource: 'status',
    },
  );
}

/**
 * A ClusterStack of stacks/docker-ferrol-1-30 (folder ferrol-1-30) in `repoUrl`, pinned to
 * `versions` without autoSubscribe, listed every 3 s.
 */
export function pinnedFerrolStack(
  ns: string,
  repoUrl: string,
  versions: string[],
  labels?: Record<string, string>,
): ClusterStack & KubeObject {
  const stack = ferrolClusterStack(ns, 'ferrol', {
    autoSubscribe: false,
    versions,
    interval: '3s',
    source: { git: { url: repoUrl }, path: 'ferrol-1-30' },
  });
  if (labels !== undefined) stack.metadata.labels = labels;
  return stack;
}

/**
 * Cleanup without a running controller: drops stackflux's finalizers (nobody else removes them)
 * and orphans the Kustomizations so Flux does not prune through kubeconfig Secrets that go away
 * with the namespace.
 */
export async function releaseControllerHolds(client: KubeClient, ns: string, parallel = 16): Promise<void> {
  const each = async (items: KubeObject[], fn: (o: KubeObject) => Promise<unknown>): Promise<void> => {
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < items.length) await fn(items[next++] as KubeObject).catch(() => undefined);
    };
    await Promise.all(Array.from({ length: parallel }, worker));
  };
  for (const kind of ['ClusterAddon', 'ClusterStackRelease']) {
    const left = await client.listAll(API_VERSION, kind, { namespace: ns }).catch(() => undefined);
    await each(left?.items ?? [], (o) =>
      client.mergePatch(API_VERSION, kind, o.metadata.name ?? '', ns, { metadata: { finalizers: null } }),
    );
  }
  const ks = await client.listAll(KUSTOMIZE_API, 'Kustomization', { namespace: ns }).catch(() => undefined);
  await each(ks?.items ?? [], (k) =>
    client.mergePatch(KUSTOMIZE_API, 'Kustomization', k.metadata.name ?? '', ns, {
      spec: { deletionPolicy: 'Orphan' },
    }),
  );
}

/** The ferrol ClusterStack (stacks/docker-ferrol-1-30 releases) at a repository path, as the converged test and the bench create it. */
export function ferrolStackAt(
  ns: string,
  url: string,
  o: { path: string; versions: string[]; interval?: string; autoSubscribe?: boolean },
): KubeObject {
  return ferrolClusterStack(ns, 'ferrol', {
    autoSubscribe: o.autoSubscribe ?? false,
    versions: o.versions,
    ...(o.interval !== undefined ? { interval: o.interval } : {}),
    source: { git: { url }, path: o.path },
  });
}

// --- reading releases --------------------------------------------------------------------------
export type CSKR = ClusterStackRelease & KubeObject;

/** Readers of the ClusterStackReleases and ClusterClasses in namespace ns. */
export function releaseReaders(client: KubeClient, ns: string) {
  const cskr = (name: string): Promise<CSKR | undefined> =>
    client.get<CSKR>(API_VERSION, 'ClusterStackRelease', name, ns);
  return {
    cskr,
    async releaseReady(name: string): Promise<CSKR | undefined> {
      const r = await cskr(name);
      return cond(r, 'Ready')?.status === 'True' ? r : undefined;
    },
    clusterClass: (name: string): Promise<KubeObject | undefined> =>
      client.get(CAPI, 'ClusterClass', name, ns),
  };
}

/** Waits on a ClusterStack's SourceReady condition (the fault tests: a fault named, then gone). */
export function sourceReadiness(get: () => Promise<{ status?: { conditions?: Cond[] } } | undefined>) {
  return {
    /** Resolves with the message once SourceReady is False with `reason`. */
    failed: (reason: string): Promise<string> =>
      waitFor(`SourceReady=False ${reason}`, async () => {
        const c = cond(await get(), 'SourceReady');
        return c?.status === 'False' && c.reason === reason ? (c.message ?? '') : undefined;
      }),
    recovered: async (): Promise<void> => {
      await waitFor('SourceReady=True again', async () =>
        cond(await get(), 'SourceReady')?.status === 'True' ? true : undefined,
      );
    },
  };
}

/**
 * Waits until the ClusterStack's status records a reconcile that saw `latest` Ready and kept
 * `inUse` because a Cluster uses it (the same reconcile would have deleted it otherwise), then
 * checks the in-use release still exists and is not being deleted.
 */
export async function keptWhileInUse(
  client: KubeClient,
  ns: string,
  clusterStack: string,
  inUse: string,
  latest: string,
): Promise<CSKR> {
  await waitFor(
    `ClusterStack ${clusterStack} reconciled with ${latest} Ready and ${inUse} in use`,
    async () => {
      const c = await client.get<ClusterStack & KubeObject>(API_VERSION, 'ClusterStack', clusterStack, ns);
      const summary = c?.status?.summary ?? [];
      const kept = summary.find((s) => s.name === inUse)?.inUse === true;
      const latestReady = summary.find((s) => s.name === latest)?.ready === true;
      return c?.status?.latestRelease === latest && kept && latestReady ? true : undefined;
    },
  );
  const release = await client.get<CSKR>(API_VERSION, 'ClusterStackRelease', inUse, ns);
  if (release === undefined) throw new Error(`${inUse} was deleted although a Cluster uses it`);
  if (release.metadata.deletionTimestamp !== undefined)
    throw new Error(`${inUse} is being deleted although in use`);
  return release;
}

/** A ClusterStack of the docker/ferrol stack for Kubernetes 1.30 (spec fields override). */
export function ferrolClusterStack(
  ns: string,
  name: string,
  spec: Partial<ClusterStack['spec']> & { source: ClusterStack['spec']['source'] },
): ClusterStack & KubeObject {
  return {
    apiVersion: API_VERSION,
    kind: 'ClusterStack',
    metadata: { name, namespace: ns },
    spec: { provider: 'docker', name: 'ferrol', kubernetesVersion: '1.30', noProvider: true, ...spec },
  };
}

/**
 * A Cluster API Cluster (v1beta2) with a pod network, an endpoint `<name>.example.internal:6443`
 * and a topology naming `className`, with per-cluster addon values when given.
 */
export function addonCluster(
  ns: string,
  name: string,
  o: { podCidr: string; className: string; version: string; values?: Record<string, unknown> },
): KubeObject {
  return {
    apiVersion: CAPI,
    kind: 'Cluster',
    metadata: { name, namespace: ns },
    spec: {
      clusterNetwork: { pods: { cidrBlocks: [o.podCidr] } },
      controlPlaneEndpoint: { host: `${name}.example.internal`, port: 6443 },
      topology: {
        classRef: { name: o.className },
        version: o.version,
        ...(o.values !== undefined ? { variables: [{ name: 'stackfluxAddonValues', value: o.values }] } : {}),
      },
    },
  };
}

/**
 * Waits until `count` ClusterAddons of `ns` are rendered from `release` with a fleet commit other
 * than the one in `previous`; their fleet commits by ClusterAddon name.
 */
export async function fleetCommitsAt(
  client: KubeClient,
  ns: string,
  release: string,
  count: number,
  previous?: ReadonlyMap<string, string>,
): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  await waitFor(
    `${count} ClusterAddons rendered from ${release}`,
    async () => {
      const list = await client.list<ClusterAddon & KubeObject>(API_VERSION, 'ClusterAddon', {
        namespace: ns,
      });
      for (const ca of list.items) {
        const commit = ca.status?.fleetCommit;
        if (
          ca.status?.release === release &&
          commit !== undefined &&
          commit !== previous?.get(ca.metadata.name)
        )
          out.set(ca.metadata.name, commit);
      }
      return out.size === count ? true : undefined;
    },
    { timeoutMs: 600_000 },
  );
  return out;
}

/** Deletes the Clusters and waits (reporting, not failing) until their ClusterAddons are gone. */
export async function deleteClustersAndAddons(client: KubeClient, ns: string, names: readonly string[]) {
  for (const name of names) await client.delete(CAPI, 'Cluster', name, ns).catch(() => undefined);
  await waitFor('ClusterAddons gone', async () =>
    (await client.list(API_VERSION, 'ClusterAddon', { namespace: ns })).items.length === 0 ? true : undefined,
  ).catch((err: unknown) => process.stderr.write(`cleanup: ${String(err)}\n`));
}

/** Creates a Cluster's `<name>-kubeconfig` Secret (the workload cluster's kubeconfig), then the Cluster. */
export async function createAddonCluster(
  client: KubeClient,
  workloadKubeconfig: string,
  ns: string,
  name: string,
  o: Parameters<typeof addonCluster>[2],
): Promise<void> {
  await client.create(
    workloadKubeconfigSecret(ns, name, readFileSync(workloadKubeconfig, 'utf8')) as KubeObject,
  );
  await client.create(addonCluster(ns, name, o));
}

/** Moves a Cluster to another ClusterClass: a merge patch of spec.topology.classRef.name only. */
export async function moveClusterTo(
  client: KubeClient,
  ns: string,
  cluster: string,
  className: string,
): Promise<void> {
  await client.mergePatch(CAPI, 'Cluster', cluster, ns, {
    spec: { topology: { classRef: { name: className } } },
  });
}

/**
 * Samples objects (by id) every 200 ms until stop(): every sample in which one of them is absent
 * or has another uid than `uids` says so ("<id> absent" / "<id> recreated", each once).
 */
export function watchPresence(
  ids: readonly string[],
  read: (id: string) => Promise<{ metadata: { uid?: string } } | undefined>,
  uids: ReadonlyMap<string, string>,
) {
  const violations: string[] = [];
  let samples = 0;
  let stop = false;
  const done = (async () => {
    while (!stop) {
      for (const id of ids) {
        const got = await read(id);
        if (got === undefined) violations.push(`${id} absent`);
        else if (got.metadata.uid !== uids.get(id)) violations.push(`${id} recreated`);
      }
      samples++;
      await sleep(200);
    }
  })();
  return {
    async stop(): Promise<{ violations: string[]; samples: number }> {
      stop = true;
      await done;
      return { violations: [...new Set(violations)], samples };
    },
  };
}

/** The files (path → content) of `branch` of the fleet repository at its tip, cloned into `dir`. */
export function fleetBranchFiles(fleetUrl: string, branch: string, dir: string): Map<string, string> {
  rmSync(dir, { recursive: true, force: true });
  git(tmpdir(), 'clone', '-q', '--depth=1', '--branch', branch, fleetUrl, dir);
  const files = new Map<string, string>();
  for (const p of readdirSync(dir, { recursive: true, encoding: 'utf8' }).sort()) {
    if (p === '.git' || p.startsWith('.git/')) continue;
    try {
      files.set(p, readFileSync(join(dir, p), 'utf8'));
    } catch {
      // a folder
    }
  }
  return files;
}

/** Waits until get() returns undefined. */
export async function gone(what: string, get: () => Promise<unknown>, timeoutMs = 300_000): Promise<void> {
  await waitFor(what, async () => ((await get()) === undefined ? true : undefined), { timeoutMs });
}

// --- git ---------------------------------------------------------------------------------------
export function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', args, {
    cwd,
    encoding: 'utf8',
    env: {
      ...process.env,
      GIT_AUTHOR_NAME: 'test',
      GIT_AUTHOR_EMAIL: 't@e.st',
      GIT_COMMITTER_NAME: 'test',
      GIT_COMMITTER_EMAIL: 't@e.st',
    },
  }).trim();
}

/** An empty repository with branch main. */
export function initRepo(dir: string): void {
  mkdirSync(dir, { recursive: true });
  git(dir, 'init', '-q', '-b', 'main');
}

/** Rewrites the stack folder `folder` (copied from stacks/<example>) for a release and tags it. */
export function cutRelease(
  dir: string,
  folder: string,
  o: {
    example: string;
    name?: string;
    k8s: string;
    version: string;
    stackYamlK8s?: string;
    /** Edits the release's files (in the stack folder) before the commit. */
    edit?: (dir: string) => void;
  },
): string {
  const target = join(dir, folder);
  rmSync(target, { recursive: true, force: true });
  cpSync(join(ROOT, 'stacks', o.example), target, { recursive: true });
  const name = o.name ?? 'ferrol';
  const exampleClass = `docker-ferrol-${o.k8s}-v1`;
  const className = `docker-${name}-${o.k8s}-${o.version}`;
  const stackFile = join(target, 'stack.yaml');
  let stack = readFileSync(stackFile, 'utf8')
    .replace(/^version: v1$/m, `version: ${o.version}`)
    .replace(/^name: ferrol$/m, `name: ${name}`);
  if (o.stackYamlK8s !== undefined)
    stack = stack.replace(/^kubernetesVersion: .*$/m, `kubernetesVersion: ${o.stackYamlK8s}`);
  writeFileSync(stackFile, stack);
  const classFile = join(target, 'cluster-class', 'cluster-class.yaml');
  writeFileSync(classFile, readFileSync(classFile, 'utf8').replaceAll(exampleClass, className));
  o.edit?.(target);
  git(dir, 'add', '-A');
  git(dir, 'commit', '-q', '--allow-empty', '-m', className);
  const tag = className;
  git(dir, 'tag', tag);
  return tag;
}

export function push(dir: string, url: string, ...tags: string[]): void {
  git(dir, 'push', '-q', url, 'main', ...tags);
}

/** Cuts releases `versions` of stacks/docker-ferrol-1-30 into folder ferrol-1-30, then pushes their tags. */
export function releaseFerrol130(
  dir: string,
  url: string,
  ...versions: (string | { version: string; edit: (dir: string) => void })[]
): void {
  const tags = versions.map((v) =>
    cutRelease(dir, 'ferrol-1-30', {
      example: 'docker-ferrol-1-30',
      k8s: '1-30',
      ...(typeof v === 'string' ? { version: v } : v),
    }),
  );
  push(dir, url, ...tags);
}

/** A lightweight tag at HEAD (look-alikes and other stacks' tags that need no content). */
export function tagHead(dir: string, ...tags: string[]): void {
  for (const t of tags) git(dir, 'tag', t);
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
      s.close(() => resolve(port));
    });
  });
}

// --- the stackflux CLI -------------------------------------------------------------------------
export interface CliResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `stackflux ARGS` to completion (env: the test's, with overrides; undefined removes a variable). */
export function stackflux(args: string[], env: Record<string, string | undefined> = {}): CliResult {
  const merged: Record<string, string> = {};
  for (const [k, v] of Object.entries({ ...process.env, ...env })) if (v !== undefined) merged[k] = v;
  const r = spawnSync(NODE, [STACKFLUX, ...args], {
    cwd: ROOT,
    env: merged,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

// --- the real flux CLI ($FLUX_BIN, built by hack/build-testenv.sh) -------------------------------
/** Runs `flux ARGS` against the cluster of `kubeconfig`; throws with its stderr if it fails. */
export function flux(args: string[], kubeconfig: string): string {
  const r = spawnSync(required('FLUX_BIN'), args, {
    env: { ...process.env, KUBECONFIG: kubeconfig },
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  if (r.error) throw r.error;
  if (r.status !== 0) throw new Error(`flux ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  return r.stdout;
}

/** The rows of a `flux get` table (cells are tab-separated and space-padded), keyed by header. */
export function fluxTable(stdout: string): Array<Record<string, string>> {
  const [header, ...lines] = stdout.split('\n').filter((l) => l.trim() !== '');
  const keys = (header ?? '').split('\t').map((h) => h.trim());
  return lines.map((line) => {
    const cells = line.split('\t').map((c) => c.trim());
    return Object.fromEntries(keys.map((k, i) => [k, cells[i] ?? '']));
  });
}

/** `flux tree` output: its root line and every object below it (`Kind/namespace/name`), in order. */
export function fluxTree(stdout: string): { root: string; children: string[] } {
  const [root = '', ...rest] = stdout.split('\n').filter((l) => l.trim() !== '');
  return { root: root.trim(), children: rest.map((l) => l.replace(/^[\s│├└─]+/u, '').trim()) };
}

/** How the flux CLI shows a revision or message: hex digests (40–128 chars) cut to 8. */
export function truncateHex(s: string): string {
  return s.replace(/\b[a-f0-9]{40,128}\b/g, (h) => h.slice(0, 8));
}

// --- the controller subprocess -----------------------------------------------------------------
export interface ControllerOptions {
  /** The only kubeconfig the controller gets ($KUBECONFIG is set to it too). */
  kubeconfig: string;
  namespace: string;
  cacheDir: string;
  /** Enables the push webhook with this secret. */
  webhookSecret?: string;
  /** --concurrency (default 2). */
  concurrency?: number;
  extraArgs?: string[];
  /** Environment overrides (undefined removes a variable). */
  env?: Record<string, string | undefined>;
}

/** `stackflux run` as a subprocess; its log lines are kept for assertions and failure output. */
export class ControllerProcess {
  readonly logLines: string[] = [];
  webhookUrl = '';
  /** The controller's /readyz. */
  readyzUrl = '';
  /** Its /metrics (Prometheus text). */
  metricsUrl = '';
  private child: ChildProcess | undefined;

  static async start(o: ControllerOptions): Promise<ControllerProcess> {
    const c = new ControllerProcess();
    await c.run(o);
    return c;
  }

  private async run(o: ControllerOptions): Promise<void> {
    const [metrics, health, webhook] = await Promise.all([freePort(), freePort(), freePort()]);
    this.metricsUrl = `http://127.0.0.1:${metrics}/metrics`;
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries({ ...process.env, KUBECONFIG: o.kubeconfig, ...o.env }))
      if (v !== undefined) env[k] = v;
    const args = [
      STACKFLUX,
      'run',
      `--kubeconfig=${o.kubeconfig}`,
      `--namespace=${o.namespace}`,
      `--metrics-addr=127.0.0.1:${metrics}`,
      `--health-addr=127.0.0.1:${health}`,
      `--cache-dir=${o.cacheDir}`,
      '--poll-interval=10m',
      `--concurrency=${o.concurrency ?? 2}`,
      '--log-level=debug',
    ];
    if (o.webhookSecret !== undefined) {
      this.webhookUrl = `http://127.0.0.1:${webhook}/hooks/push`;
      args.push(`--webhook-addr=127.0.0.1:${webhook}`, `--webhook-secret=${o.webhookSecret}`);
    }
    args.push(...(o.extraArgs ?? []));
    const child = spawn(NODE, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    this.child = child;
    const collect = (chunk: Buffer): void => {
      for (const line of chunk.toString('utf8').split('\n')) if (line.trim() !== '') this.logLines.push(line);
      if (this.logLines.length > 20_000) this.logLines.splice(0, this.logLines.length - 20_000);
    };
    child.stdout?.on('data', collect);
    child.stderr?.on('data', collect);
    this.readyzUrl = `http://127.0.0.1:${health}/readyz`;
    await eventually('controller /readyz', async () => {
      if (child.exitCode !== null) throw new Error(`controller exited: ${this.logTail(20)}`);
      const res = await fetch(this.readyzUrl).catch(() => undefined);
      return res?.ok ? true : undefined;
    });
  }

  /** Sum of the samples of metric `name` whose labels include all of `labels`. */
  async metric(name: string, labels: Record<string, string> = {}): Promise<number> {
    const found = await this.samples(name, (have) => Object.entries(labels).every(([k, v]) => have[k] === v));
    return found.reduce((sum, s) => sum + s.value, 0);
  }

  /** The samples of metric `name` (with their labels) that `keep` accepts. */
  async samples(
    name: string,
    keep: (labels: Record<string, string>) => boolean = () => true,
  ): Promise<Array<{ labels: Record<string, string>; value: number }>> {
    const text = await (await fetch(this.metricsUrl)).text();
    const out: Array<{ labels: Record<string, string>; value: number }> = [];
    for (const m of text.matchAll(/^(\w+)(?:\{([^}]*)\})? (\S+)$/gm)) {
      if (m[1] !== name) continue;
      const labels = Object.fromEntries(
        [...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1], l[2]]),
      );
      if (keep(labels)) out.push({ labels, value: Number(m[3]) });
    }
    return out;
  }

  /** Resolves with the exit code when the process exits (register before causing the exit). */
  exited(): Promise<number | null> {
    const child = this.child;
    return new Promise((r) => {
      if (child === undefined || !this.running) r(child?.exitCode ?? null);
      else child.once('exit', (code) => r(code));
    });
  }

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** The controller's pid (NODE is the node binary itself, so this is the stackflux process). */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  logTail(n = 80): string {
    return this.logLines.slice(-n).join('\n');
  }

  /** Runs a test step; on failure prints the controller's log tail. */
  async step(fn: () => Promise<void>): Promise<void> {
    try {
      await fn();
    } catch (err) {
      // The whole log stays in a file for a look; the tail goes with the failure.
      const file = join(mkdtempSync(join(tmpdir(), 'stackflux-e2e-log-')), 'stackflux.log');
      writeFileSync(file, `${this.logLines.join('\n')}\n`);
      process.stderr.write(
        `\n--- stackflux log tail (whole log: ${file}) ---\n${this.logTail()}\n--- end ---\n`,
      );
      throw err;
    }
  }

  /** SIGKILL (a crash: no shutdown, no lease release); resolves once the process is gone. */
  async kill(): Promise<void> {
    const child = this.child;
    if (child === undefined || !this.running) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
  }

  /** The JSON log records whose message is `msg`, in order, with `at` = their time in ms since the epoch. */
  logged(msg: string): Array<Record<string, unknown> & { at: number }> {
    const out: Array<Record<string, unknown> & { at: number }> = [];
    const needle = `"msg":${JSON.stringify(msg)}`;
    for (const line of this.logLines) {
      if (!line.includes(needle)) continue;
      try {
        const record = JSON.parse(line) as Record<string, unknown>;
        out.push({ ...record, at: Date.parse(String(record.time)) });
      } catch {}
    }
    return out;
  }

  /** SIGTERM, then SIGKILL if it has not exited within graceMs. */
  async stop(graceMs = 35_000): Promise<void> {
    const child = this.child;
    if (child === undefined || !this.running) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await Promise.race([exited, sleep(graceMs)]);
    if (this.running) child.kill('SIGKILL');
  }
}

// --- least privilege (issue 11 defect 5, issue 22) ---------------------------------------------
/** A ServiceAccount of `ns` that may manage only ClusterClasses there (a Role, not a ClusterRole). */
export async function createClusterClassOnlyServiceAccount(
  client: KubeClient,
  ns: string,
  name: string,
): Promise<void> {
  await client.create({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name, namespace: ns } });
  await client.create({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: { name, namespace: ns },
    rules: [{ apiGroups: ['cluster.x-k8s.io'], resources: ['clusterclasses'], verbs: ['*'] }],
  });
  await client.create({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name, namespace: ns },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
    subjects: [{ kind: 'ServiceAccount', name, namespace: ns }],
  });
}

/**
 * Cuts a release of stacks/docker-ferrol-1-30 into `folder` whose cluster-class/ also binds
 * ServiceAccount `ns/subject` to cluster-admin with ClusterRoleBinding `binding`; returns the tag.
 */
export function cutEscalatingRelease(
  dir: string,
  folder: string,
  o: { name?: string; version: string; binding: string; ns: string; subject: string },
): string {
  return cutRelease(dir, folder, {
    example: 'docker-ferrol-1-30',
    ...(o.name !== undefined ? { name: o.name } : {}),
    k8s: '1-30',
    version: o.version,
    edit: (d) =>
      writeFileSync(
        join(d, 'cluster-class', 'escalate.yaml'),
        [
          'apiVersion: rbac.authorization.k8s.io/v1',
          'kind: ClusterRoleBinding',
          `metadata: {name: ${o.binding}}`,
          'roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}',
          `subjects: [{kind: ServiceAccount, name: ${o.subject}, namespace: ${o.ns}}]`,
          '',
        ].join('\n'),
      ),
  });
}

/**
 * Waits until release `tag` reports Flux's forbidden error for the ClusterRoleBinding its
 * cluster-class/ holds, applied as ServiceAccount `ns/sa`, and checks that its Kustomization names
 * `sa` and that ClusterRoleBinding `binding` does not exist.
 */
export async function assertEscalationForbidden(
  client: KubeClient,
  ns: string,
  o: { tag: string; sa: string; binding: string },
): Promise<void> {
  const { cskr } = releaseReaders(client, ns);
  const failed = await waitFor(
    `release ${o.tag} reports the forbidden ClusterRoleBinding`,
    async () => {
      const r = await cskr(o.tag);
      const ready = cond(r, 'Ready');
      return ready?.status === 'False' &&
        ready.reason === 'KustomizationNotReady' &&
        /ClusterRoleBinding/.test(ready.message ?? '')
        ? r
        : undefined;
    },
    { timeoutMs: 180_000 },
  );
  const message = cond(failed, 'Ready')?.message ?? '';
  assert.match(message, /forbidden/i);
  assert.match(message, new RegExp(`system:serviceaccount:${ns}:${o.sa}`));
  const ks = await client.get<KubeObject & { spec: { serviceAccountName?: string } }>(
    KUSTOMIZE_API,
    'Kustomization',
    o.tag,
    ns,
  );
  assert.equal(ks?.spec.serviceAccountName, o.sa, 'the Kustomization names the ServiceAccount');
  assert.equal(
    await client.get('rbac.authorization.k8s.io/v1', 'ClusterRoleBinding', o.binding),
    undefined,
    'no ClusterRoleBinding was created',
  );
}
