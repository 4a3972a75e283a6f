// A fan-out of N Cluster API Clusters of one stack release, for the fault matrix (issue 11) and
// the fleet bench: the Clusters (with the status a Cluster API controller would write; no CAPI
// controllers run here) and their kubeconfig Secrets, a release repository with v1, the
// ClusterStack, a fleet repository per run; the end state of a run as comparable data; and a
// reset that removes what stackflux wrote so the next run is a first render again.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { API_VERSION, LABEL_ADDON, LABEL_CLUSTER } from '../../controller/api/meta.ts';
import { ApiError, type KubeClient, type KubeObject } from '../../controller/runtime/client.ts';
import { installCrds } from '../../hack/lib/crds.ts';
import { createRepo, type Endpoints, workloadKubeconfigSecret } from '../../hack/lib/testenv.ts';
import { CAPI, type ControllerOptions, cutRelease, ferrolStackAt, initRepo, push, waitFor } from './e2e.ts';

export const KUSTOMIZE_API = 'kustomize.toolkit.fluxcd.io/v1';
export const SOURCE_API = 'source.toolkit.fluxcd.io/v1';
/** Addons of stacks/docker-ferrol-1-30 (one Kustomization each per Cluster). */
export const FERROL_ADDONS = 3;

export const fanoutTag = (v: string): string => `docker-ferrol-1-30-${v}`;
export const clusterName = (i: number): string => `c-${String(i).padStart(5, '0')}`;
export const podCidr = (i: number): string => `10.${(i >> 8) & 255}.${i & 255}.0/24`;

/** Runs fn over items with `workers` at a time. */
export async function pool<T>(items: T[], workers: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(workers, items.length) }, async () => {
      while (next < items.length) {
        const item = items[next++] as T;
        await fn(item);
      }
    }),
  );
}

/** A Cluster as a platform team writes it for a ClusterClass (Cluster API v1beta2). */
export function clusterObject(ns: string, i: number, classTag: string): KubeObject {
  const name = clusterName(i);
  return {
    apiVersion: CAPI,
    kind: 'Cluster',
    metadata: {
      name,
      namespace: ns,
      labels: { 'cluster.x-k8s.io/cluster-name': name, 'example.com/team': `team-${i % 20}`, env: 'bench' },
      annotations: { 'example.com/owner': `platform-team-${i % 20}@example.com` },
    },
    spec: {
      clusterNetwork: {
        pods: { cidrBlocks: [podCidr(i)] },
        services: { cidrBlocks: ['10.96.0.0/12'] },
        serviceDomain: 'cluster.local',
      },
      controlPlaneEndpoint: { host: `${name}.bench.example.internal`, port: 6443 },
      topology: {
        classRef: { name: classTag },
        version: 'v1.30.4',
        controlPlane: { replicas: 3 },
        workers: { machineDeployments: [{ class: 'default-worker', name: 'md-0', replicas: 3 }] },
      },
    },
  };
}

/** The status a Cluster API controller would write for a provisioned Cluster (no CAPI here). */
export function clusterStatus(ns: string, i: number): KubeObject {
  const t = '2026-01-01T00:00:00Z';
  const condition = (type: string, reason: string) => ({
    type,
    status: 'True',
    reason,
    message: '',
    lastTransitionTime: t,
    observedGeneration: 1,
  });
  const replicas = {
    desiredReplicas: 3,
    replicas: 3,
    readyReplicas: 3,
    availableReplicas: 3,
    upToDateReplicas: 3,
  };
  return {
    apiVersion: CAPI,
    kind: 'Cluster',
    metadata: { name: clusterName(i), namespace: ns },
    status: {
      phase: 'Provisioned',
      observedGeneration: 1,
      initialization: { infrastructureProvisioned: true, controlPlaneInitialized: true },
      controlPlane: replicas,
      workers: replicas,
      conditions: [
        condition('Available', 'Available'),
        condition('InfrastructureReady', 'Ready'),
        condition('ControlPlaneInitialized', 'Initialized'),
        condition('ControlPlaneAvailable', 'Available'),
        condition('WorkersAvailable', 'Available'),
        condition('RemoteConnectionProbe', 'ProbeSucceeded'),
        condition('TopologyReconciled', 'ReconcileSucceeded'),
        condition('RollingOut', 'NotRollingOut'),
        condition('ScalingUp', 'NotScalingUp'),
        condition('ScalingDown', 'NotScalingDown'),
      ],
    },
  };
}

/**
 * Creates Clusters first..first+n-1 (default 0..n-1) of class `classTag` in ns, their status and
 * kubeconfig Secrets; `labels` are added to each Cluster's (a shard key, say).
 */
export async function createClusters(
  client: KubeClient,
  ns: string,
  n: number,
  classTag: string,
  workloadKubeconfig: string,
  o: { first?: number; labels?: Record<string, string> } = {},
): Promise<void> {
  const first = o.first ?? 0;
  await pool(
    Array.from({ length: n }, (_, i) => first + i),
    32,
    async (i) => {
      await created(() =>
        client.create(workloadKubeconfigSecret(ns, clusterName(i), workloadKubeconfig) as KubeObject),
      );
      const cluster = clusterObject(ns, i, classTag);
      cluster.metadata.labels = { ...cluster.metadata.labels, ...o.labels };
      await created(() => client.create(cluster));
      await created(() =>
        client.applyStatus(clusterStatus(ns, i), { fieldManager: 'capi-controller', force: true }),
      );
    },
  );
}

/**
 * A fixture write that survives a dropped connection: sent again (at most 3 times) when no HTTP
 * answer came (a keep-alive socket the API server closed: "socket hang up"); a create that did land
 * the first time then answers AlreadyExists, which is success. HTTP errors fail at once.
 */
async function created(write: () => Promise<unknown>): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await write();
      return;
    } catch (err) {
      if (err instanceof ApiError && err.status === 409 && attempt > 1) return;
      if (err instanceof ApiError || attempt >= 3) throw err;
      await new Promise((r) => setTimeout(r, 200 * attempt));
    }
  }
}

// --- one fan-out fixture ------------------------------------------------------------------------
export interface Fanout {
  e: Endpoints;
  ns: string;
  n: number;
  work: string;
  releaseUrl: string;
}

/**
 * Namespace ns with release v1 of stacks/docker-ferrol-1-30 (its ClusterStack lists the source
 * every 10 min: nothing but the fan-out happens) and n Clusters of its ClusterClass.
 */
export async function setupFanout(
  client: KubeClient,
  e: Endpoints,
  ns: string,
  n: number,
  workloadKubeconfig: string,
): Promise<Fanout> {
  const work = mkdtempSync(join(tmpdir(), `stackflux-${ns}-`));
  await installCrds(client);
  await client.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
  const releaseUrl = await createRepo(e, `${ns}-release`);
  const repoDir = join(work, 'release');
  initRepo(repoDir);
  cutRelease(repoDir, 'stack', { example: 'docker-ferrol-1-30', k8s: '1-30', version: 'v1' });
  push(repoDir, releaseUrl, fanoutTag('v1'));
  await client.create(ferrolStackAt(ns, releaseUrl, { path: 'stack', versions: ['v1'], interval: '10m' }));
  await createClusters(client, ns, n, fanoutTag('v1'), workloadKubeconfig);
  return { e, ns, n, work, releaseUrl };
}

/** `stackflux run` options for a fan-out into fleetUrl (the caller adds kubeconfig/cache/extra args). */
export function fanoutController(
  f: Fanout,
  fleetUrl: string,
  cacheDir: string,
  extraArgs: string[] = [],
): ControllerOptions {
  return {
    kubeconfig: f.e.kubeconfig,
    namespace: f.ns,
    cacheDir,
    concurrency: 4,
    extraArgs: [`--fleet-url=${fleetUrl}`, '--fleet-batch-window=2s', ...extraArgs],
  };
}

type Obj = KubeObject & { spec?: Record<string, unknown>; status?: Record<string, unknown> };

/** What a fan-out run produced, without what differs between equal runs (times, uids, commit ids). */
export interface EndState {
  /** ClusterAddon → release, conditions (type/status/reason) and addons (name/ready/reason). */
  addons: Record<string, unknown>;
  /** Fleet GitRepository → labels and spec (the run's fleet URL as FLEET). */
  gitRepositories: Record<string, unknown>;
  /** Addon Kustomization → labels and spec. */
  kustomizations: Record<string, unknown>;
  /** Fleet branch → tree id of its tip. */
  trees: Record<string, string>;
}

/** The fleet as a bare mirror fetched now: per branch its tip's tree, its commit count, and paths. */
export class FleetMirror {
  private readonly dir: string;
  private readonly url: string;

  constructor(url: string) {
    this.url = url;
    this.dir = mkdtempSync(join(tmpdir(), 'stackflux-fleet-mirror-'));
    execFileSync('git', ['init', '-q', '--bare', this.dir]);
  }

  private git(...args: string[]): string {
    return execFileSync('git', args, {
      cwd: this.dir,
      encoding: 'utf8',
      maxBuffer: 256 * 1024 * 1024,
    }).trim();
  }

  fetch(): void {
    try {
      this.git('fetch', '-q', '--prune', this.url, '+refs/heads/*:refs/heads/*');
    } catch {
      // no branch yet
    }
  }

  /** Branch → tree id of its tip. */
  trees(): Record<string, string> {
    const out = this.git('for-each-ref', '--format=%(refname:strip=2) %(objectname)^{tree}', 'refs/heads/');
    if (out === '') return {};
    const lines = out.split('\n').map((l) => l.split(' ') as [string, string]);
    const ids = execFileSync('git', ['cat-file', '--batch-check=%(objectname)'], {
      cwd: this.dir,
      input: `${lines.map(([, spec]) => spec).join('\n')}\n`,
      encoding: 'utf8',
    })
      .trim()
      .split('\n');
    return Object.fromEntries(lines.map(([branch], i) => [branch, ids[i] ?? '']));
  }

  /** Number of commits on branch. */
  commits(branch: string): number {
    return Number(this.git('rev-list', '--count', `refs/heads/${branch}`));
  }

  /** The top-level entries of the tip of branch. */
  topLevel(branch: string): string[] {
    return this.git('ls-tree', '--name-only', `refs/heads/${branch}`)
      .split('\n')
      .filter((l) => l !== '');
  }

  /** The subject and body of every commit on branch (oldest last). */
  messages(branch: string): string[] {
    return this.git('log', '--format=%an <%ae>%n%B%x00', `refs/heads/${branch}`)
      .split('\0')
      .map((m) => m.trim())
      .filter((m) => m !== '');
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

async function listIn(
  client: KubeClient,
  apiVersion: string,
  kind: string,
  ns: string,
  labelSelector?: string,
) {
  return (
    await client.listAll<Obj>(apiVersion, kind, {
      namespace: ns,
      ...(labelSelector ? { labelSelector } : {}),
    })
  ).items;
}

const byName = (items: Obj[], view: (o: Obj) => unknown): Record<string, unknown> =>
  Object.fromEntries(
    items.map((o) => [o.metadata.name ?? '', view(o)]).sort(([a], [b]) => String(a).localeCompare(String(b))),
  );

/** The end state of the fan-out in f.ns into fleetUrl. */
export async function endState(
  client: KubeClient,
  f: Fanout,
  fleetUrl: string,
  fleet: FleetMirror,
): Promise<EndState> {
  const [addons, repos, ks] = await Promise.all([
    listIn(client, API_VERSION, 'ClusterAddon', f.ns),
    listIn(client, SOURCE_API, 'GitRepository', f.ns, LABEL_CLUSTER),
    listIn(client, KUSTOMIZE_API, 'Kustomization', f.ns, LABEL_ADDON),
  ]);
  fleet.fetch();
  const conditions = (o: Obj) =>
    ((o.status?.conditions as Array<{ type: string; status: string; reason?: string }> | undefined) ?? [])
      .map((c) => `${c.type}=${c.status}/${c.reason ?? ''}`)
      .sort();
  return {
    addons: byName(addons, (a) => ({
      release: a.status?.release,
      conditions: conditions(a),
      addons: (
        (a.status?.addons as Array<{ name: string; ready: boolean; reason?: string }> | undefined) ?? []
      ).map((x) => `${x.name}:${x.ready}:${x.reason ?? ''}`),
    })),
    gitRepositories: byName(repos, (g) => ({
      labels: g.metadata.labels,
      spec: JSON.parse(JSON.stringify(g.spec ?? {}).replaceAll(fleetUrl, 'FLEET')),
    })),
    kustomizations: byName(ks, (k) => ({ labels: k.metadata.labels, spec: k.spec })),
    trees: fleet.trees(),
  };
}

/**
 * Whether the fan-out is complete: n ClusterAddons reporting the release and a Ready condition
 * of the current generation, their Kustomizations and GitRepositories, and a fleet branch per
 * Cluster whose tip holds every addon folder.
 */
export function complete(s: EndState, f: Fanout): boolean {
  const addons = Object.values(s.addons) as Array<{
    release?: string;
    conditions: string[];
    addons: string[];
  }>;
  return (
    addons.length === f.n &&
    addons.every((a) => a.release === fanoutTag('v1') && a.addons.length === FERROL_ADDONS) &&
    Object.keys(s.gitRepositories).length === f.n &&
    Object.keys(s.kustomizations).length === f.n * FERROL_ADDONS &&
    Object.keys(s.trees).length === f.n
  );
}

/** Waits until the fan-out is complete and its end state is the same twice, `settleMs` apart. */
export async function settledEndState(
  client: KubeClient,
  f: Fanout,
  fleetUrl: string,
  fleet: FleetMirror,
  o: { timeoutMs?: number; settleMs?: number; until?: (s: EndState) => boolean } = {},
): Promise<EndState> {
  let last = '';
  return waitFor(
    `fan-out of ${f.n} Clusters in ${f.ns} complete and settled`,
    async () => {
      const s = await endState(client, f, fleetUrl, fleet);
      if (!complete(s, f) || !(o.until?.(s) ?? true)) return undefined;
      const text = JSON.stringify(s);
      const same = text === last;
      last = text;
      return same ? s : undefined;
    },
    { timeoutMs: o.timeoutMs ?? 900_000, intervalMs: o.settleMs ?? 5_000 },
  );
}

/**
 * What is wrong with the fleet of a first render: a branch with other than one commit (a
 * duplicate), or whose tip lacks the folder of one of its Cluster's addon Kustomizations (a
 * partial commit), or a Kustomization whose branch does not exist.
 */
export function fleetProblems(fleet: FleetMirror, s: EndState): string[] {
  const problems: string[] = [];
  const folders = new Map<string, Set<string>>();
  for (const [name, k] of Object.entries(s.kustomizations)) {
    const spec = (k as { spec?: { sourceRef?: { name?: string }; path?: string } }).spec;
    const repo = s.gitRepositories[spec?.sourceRef?.name ?? ''] as
      | { spec?: { ref?: { branch?: string } } }
      | undefined;
    const branch = repo?.spec?.ref?.branch;
    const folder = (spec?.path ?? '').replace(/^\.?\/+/, '').split('/')[0] ?? '';
    if (branch === undefined) problems.push(`Kustomization ${name}: no fleet branch`);
    else folders.set(branch, (folders.get(branch) ?? new Set()).add(folder));
  }
  for (const [branch, want] of folders) {
    if (s.trees[branch] === undefined) {
      problems.push(`${branch}: missing`);
      continue;
    }
    const commits = fleet.commits(branch);
    if (commits !== 1) problems.push(`${branch}: ${commits} commits for a first render`);
    const have = new Set(fleet.topLevel(branch));
    const missing = [...want].filter((a) => !have.has(a));
    if (missing.length > 0) problems.push(`${branch}: tip lacks ${missing.join(', ')}`);
  }
  return problems;
}

/**
 * Removes what stackflux wrote for the fan-out (its controller stopped): ClusterAddons (their
 * finalizers dropped: nobody else removes them), addon Kustomizations and fleet GitRepositories,
 * so the next run into a new fleet repository is a first render again.
 */
export async function resetFanout(client: KubeClient, f: Fanout): Promise<void> {
  const addons = await listIn(client, API_VERSION, 'ClusterAddon', f.ns);
  await pool(addons, 16, async (a) => {
    const name = a.metadata.name ?? '';
    await client
      .mergePatch(API_VERSION, 'ClusterAddon', name, f.ns, { metadata: { finalizers: null } })
      .catch(() => undefined);
    await client.delete(API_VERSION, 'ClusterAddon', name, f.ns);
  });
  for (const [apiVersion, kind, selector] of [
    [KUSTOMIZE_API, 'Kustomization', LABEL_ADDON],
    [SOURCE_API, 'GitRepository', LABEL_CLUSTER],
  ] as const) {
    const items = await listIn(client, apiVersion, kind, f.ns, selector);
    await pool(items, 16, async (o) => {
      await client.delete(apiVersion, kind, o.metadata.name ?? '', f.ns);
    });
  }
  await waitFor(`stackflux's objects in ${f.ns} gone`, async () => {
    const left = await Promise.all([
      listIn(client, API_VERSION, 'ClusterAddon', f.ns),
      listIn(client, KUSTOMIZE_API, 'Kustomization', f.ns, LABEL_ADDON),
      listIn(client, SOURCE_API, 'GitRepository', f.ns, LABEL_CLUSTER),
    ]);
    return left.every((l) => l.length === 0) ? true : undefined;
  });
}
