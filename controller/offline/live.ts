// A snapshot of a live cluster (for `stackflux diff`): the objects the controllers read, listed
// from the API server, plus the release sources listed and fetched with the same git functions
// the controller uses (or taken from a snapshot directory), plus the fleet repository's files.

import { mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { clusterRef } from '../api/clusterrefs.ts';
import type { ClusterStack } from '../api/clusterstack.ts';
import { FLUX_HELM_API_VERSION, FLUX_KUSTOMIZE_API_VERSION, FLUX_SOURCE_API_VERSION } from '../api/flux.ts';
import { API_VERSION, GROUP, LABEL_CLUSTER } from '../api/meta.ts';
import { groupOf } from '../api/resources.ts';
import { sourceSecretCredentials } from '../controllers/common.ts';
import { runGit } from '../gitops/plumbing.ts';
import { clusterUse, sourceUrl } from '../reconcilers/clusterstack.ts';
import { RELEASE_BRANCH_FOLDER } from '../reconcilers/clusterstackrelease.ts';
import { providerConfig, providerObjectKind } from '../reconcilers/provider.ts';
import { MANAGED_BY_LABELS } from '../releases/flux.ts';
import { classifyTags, formatReleaseTag } from '../releases/tags.ts';
import type { TenancyPolicy } from '../releases/tenancy.ts';
import { mapTreePaths } from '../releases/tree.ts';
import type { KubeClient, KubeObject } from '../runtime/client.ts';
import { releaseTreeKey, withReleaseChartDependencies } from '../sources/chartrepo.ts';
import { type GitCredentials, gitEnv, parseCatFileBatch, type RemoteTag, scrub } from '../sources/git.ts';
import { GitHubReleases } from '../sources/github.ts';
import { OciClient } from '../sources/oci.ts';
import {
  type ReleaseSources,
  type ReleaseTreeFetcher,
  releaseTreeFetcher,
  sourceTagLister,
} from '../sources/releasetree.ts';
import { emptySnapshot, objectKey, type Snapshot, type SnapshotObject, type SourceData } from './snapshot.ts';

export interface LiveOptions {
  namespace?: string;
  cacheDir: string;
  /** Where csctl addon chart dependencies may be fetched from (the controller's flags). */
  tenancy?: TenancyPolicy;
  /** Tags whose trees are fetched besides the ones the controller would fetch (a preview's candidate). */
  extraTags?: readonly string[];
  /** Sources from a snapshot directory instead of the network. */
  sources?: SourceData[];
  /**
   * How sources are read (default: listed and fetched here, as `stackflux diff` does). The impact
   * controller reads the pollers' last listings and the release controller's trees instead.
   */
  reader?: SourceReader;
  /** --github-api-url: where spec.source.github releases are listed and their csctl assets read (default api.github.com). */
  githubApiUrl?: string;
  fleet?: {
    url: string;
    /** Each Cluster's branch is `<branchPrefix><namespace>/<cluster>`. */
    branchPrefix: string;
    secretRef?: string;
    credentials?: GitCredentials;
  };
}

/** Where a snapshot's source listings and release trees come from. */
export interface SourceReader {
  /** The tags of the ClusterStack's source (its url); throws when they are not known. */
  listTags: (cs: ClusterStack, url: string, creds: GitCredentials | undefined) => Promise<RemoteTag[]>;
  fetchTree: ReleaseTreeFetcher;
}

const CLUSTER_API_VERSIONS = ['cluster.x-k8s.io/v1beta2', 'cluster.x-k8s.io/v1beta1'];

/** An object as the snapshot keeps it (what a preview and the impact render from). */
export function clean(obj: KubeObject): SnapshotObject {
  const { managedFields: _m, resourceVersion: _rv, ...metadata } = obj.metadata;
  return { ...obj, metadata } as SnapshotObject;
}

async function preferredVersion(client: KubeClient, group: string): Promise<string | undefined> {
  try {
    const g = await client.request<{ preferredVersion?: { groupVersion?: string } }>('GET', `/apis/${group}`);
    return g.preferredVersion?.groupVersion;
  } catch {
    return undefined;
  }
}

export async function liveSnapshot(client: KubeClient, opts: LiveOptions): Promise<Snapshot> {
  const snapshot = emptySnapshot();
  const scope = opts.namespace ? { namespace: opts.namespace } : {};
  const managedBy = Object.entries(MANAGED_BY_LABELS)
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
  const add = (o: KubeObject) => {
    const obj = clean(o);
    snapshot.objects.set(objectKey(obj), obj);
  };
  for (const kind of ['ClusterStack', 'ClusterStackRelease', 'ClusterAddon'])
    for (const o of (await client.listAll(API_VERSION, kind, scope)).items) add(o);
  await addProviderKinds(client, snapshot, scope.namespace, add);
  for (const [v, kind] of [
    [FLUX_SOURCE_API_VERSION, 'GitRepository'],
    [FLUX_KUSTOMIZE_API_VERSION, 'Kustomization'],
  ] as const) {
    for (const o of (await client.listAll(v, kind, { ...scope, labelSelector: managedBy })).items) add(o);
  }
  // HelmReleases of Helm-chart addons (kustomize-controller writes them with stackflux's labels);
  // none where helm-controller's CRD is not served.
  const helmReleases = await client
    .listAll(FLUX_HELM_API_VERSION, 'HelmRelease', {
      ...scope,
      labelSelector: `${managedBy},${LABEL_CLUSTER}`,
    })
    .catch(() => undefined);
  for (const o of helmReleases?.items ?? []) add(o);
  let clusters: KubeObject[] = [];
  for (const v of CLUSTER_API_VERSIONS) {
    try {
      clusters = (await client.listAll(v, 'Cluster', scope)).items;
      break;
    } catch {}
  }
  // The labels of the Namespaces of Clusters naming another namespace's ClusterClass: a
  // ClusterStack's clusterNamespaceSelector decides whether they are served (name and labels only).
  const foreignNamespaces = new Set(
    clusters.flatMap((c) => {
      const ns = clusterUse(c)?.classNamespace;
      return ns !== undefined && ns !== c.metadata.namespace ? [c.metadata.namespace ?? ''] : [];
    }),
  );
  for (const name of [...foreignNamespaces].sort()) {
    const ns = await client.get('v1', 'Namespace', name).catch(() => undefined);
    if (ns !== undefined) {
      const labels = ns.metadata.labels;
      add({ apiVersion: 'v1', kind: 'Namespace', metadata: { name, ...(labels ? { labels } : {}) } });
    }
  }
  for (const c of clusters) {
    add(c);
    // Only what the live ClusterAddon controller would read (api/clusterrefs.ts): a provider's
    // kind in the Cluster's namespace, never a Secret or ConfigMap the tenant's ref names.
    for (const field of ['controlPlaneRef', 'infrastructureRef'] as const) {
      const followed = clusterRef(c, field);
      if (!followed?.ok) continue;
      const ref = followed.ref;
      const apiVersion = ref.apiVersion ?? (await preferredVersion(client, ref.group));
      if (apiVersion === undefined) continue;
      const got = await client.get(apiVersion, ref.kind, ref.name, ref.namespace).catch(() => undefined);
      if (got !== undefined) add({ ...got, apiVersion, kind: ref.kind });
    }
  }

  if (opts.sources !== undefined) {
    snapshot.sources = opts.sources;
  } else {
    await listSources(client, snapshot, opts);
  }
  if (opts.fleet !== undefined) {
    const { url, branchPrefix, secretRef } = opts.fleet;
    snapshot.settings.fleet = { url, branchPrefix, ...(secretRef ? { secretRef } : {}) };
    // A namespace's snapshot (a preview, the impact controller) reads only that namespace's
    // branches and release branches, not every tenant's.
    const ns = scope.namespace;
    const folders =
      ns !== undefined
        ? [`${branchPrefix}${ns}/`, `${branchPrefix}${RELEASE_BRANCH_FOLDER}/${ns}/`]
        : [branchPrefix];
    const fleet = await readFleet(url, folders, opts.fleet.credentials);
    snapshot.fleet = fleet.files;
    snapshot.fleetTips = fleet.tips;
  }
  return snapshot;
}

/**
 * The provider kinds the ClusterStacks name (templates and provider objects) with their CRDs, so the
 * renderer knows which kinds the server serves (offline/provider.ts). A kind the server does not
 * serve is left out; so is a CRD the caller may not read (then only existing objects show it served).
 */
async function addProviderKinds(
  client: KubeClient,
  snapshot: Snapshot,
  namespace: string | undefined,
  add: (o: KubeObject) => void,
): Promise<void> {
  const kinds = new Map<string, { apiVersion: string; kind: string }>();
  for (const o of snapshot.objects.values()) {
    if (o.kind !== 'ClusterStack' || groupOf(o.apiVersion) !== GROUP) continue;
    const config = providerConfig(o as unknown as ClusterStack);
    if (config.mode !== 'ref') continue;
    const { apiVersion, kind } = config.ref;
    for (const k of [kind, providerObjectKind(kind)])
      kinds.set(`${apiVersion}/${k}`, { apiVersion, kind: k });
  }
  for (const { apiVersion, kind } of kinds.values()) {
    const res = await client.resource(apiVersion, kind).catch(() => undefined);
    if (res === undefined) continue;
    const crd = await client
      .get<KubeObject>('apiextensions.k8s.io/v1', 'CustomResourceDefinition', `${res.plural}.${res.group}`)
      .catch(() => undefined);
    if (crd !== undefined)
      add({ ...crd, apiVersion: 'apiextensions.k8s.io/v1', kind: 'CustomResourceDefinition' });
    const list = await client
      .listAll(apiVersion, kind, namespace ? { namespace } : {})
      .catch(() => undefined);
    for (const o of list?.items ?? []) add({ ...o, apiVersion, kind });
  }
}

/** When the controller last listed the ClusterStack's source (its status), if it has. */
function lastListedTime(cs: ClusterStack): string | undefined {
  const t = cs.status?.source?.lastListedTime;
  return typeof t === 'string' && t !== '' ? t : undefined;
}

/** Lists every ClusterStack source and fetches the trees of the releases that exist or would be created. */
async function listSources(client: KubeClient, snapshot: Snapshot, opts: LiveOptions): Promise<void> {
  const { cacheDir, tenancy, githubApiUrl } = opts;
  const extraTags = opts.extraTags ?? [];
  const stacks = [...snapshot.objects.values()].filter(
    (o) => o.kind === 'ClusterStack',
  ) as unknown as ClusterStack[];
  const releases = [...snapshot.objects.values()].filter((o) => o.kind === 'ClusterStackRelease');
  const byUrl = new Map<string, SourceData>();
  // Read as the controller reads (controllers/releasepipeline.ts): one dispatch for Git, GitHub
  // assets and OCI sources; a GitHub source listed through the Releases API of --github-api-url.
  const sources: ReleaseSources = { oci: new OciClient(), ...(githubApiUrl ? { githubApiUrl } : {}) };
  const listTags = sourceTagLister(sources);
  const listGitHubReleases = new GitHubReleases(githubApiUrl ? { baseUrl: githubApiUrl } : {}).lister();
  const fetchTree = opts.reader?.fetchTree ?? releaseTreeFetcher(sources);
  for (const cs of stacks) {
    const url = sourceUrl(cs, githubApiUrl);
    const github = cs.spec.source.github;
    const insecure = cs.spec.source.oci?.insecure === true;
    const ns = cs.metadata.namespace ?? 'default';
    const secret =
      cs.spec.source.git?.secretRef ?? cs.spec.source.github?.secretRef ?? cs.spec.source.oci?.secretRef;
    let creds: GitCredentials | undefined;
    let source = byUrl.get(url);
    try {
      if (secret !== undefined) creds = await sourceSecretCredentials(client, ns, secret.name);
      if (source === undefined) {
        const tags =
          opts.reader !== undefined
            ? await opts.reader.listTags(cs, url, creds)
            : github !== undefined
              ? await listGitHubReleases({ owner: github.owner, repo: github.repo }, creds?.password)
              : await listTags(url, creds, insecure ? { insecure: true } : {});
        // The listing diff just did stands in for the controller's last one, and so does its time:
        // otherwise every ClusterStack's status.source.lastListedTime would show up as a change.
        const listedAt = lastListedTime(cs);
        source = {
          key: `source-${byUrl.size + 1}`,
          url,
          listing: { ok: true, tags, ...(listedAt !== undefined ? { listedAt } : {}) },
          trees: new Map(),
        };
        byUrl.set(url, source);
      }
    } catch (err) {
      byUrl.set(url, {
        key: `source-${byUrl.size + 1}`,
        url,
        listing: {
          ok: false,
          reason: 'ListFailed',
          message: err instanceof Error ? err.message : String(err),
        },
        trees: new Map(),
      });
      continue;
    }
    if (!source.listing.ok) continue;
    const channel = cs.spec.channel ?? 'stable';
    const classified = classifyTags(
      source.listing.tags.map((t) => t.tag),
      {
        provider: cs.spec.provider,
        name: cs.spec.name,
        kubernetesVersion: cs.spec.kubernetesVersion,
        channel,
      },
      new Map(source.listing.tags.flatMap((t) => (t.time !== undefined ? [[t.tag, t.time]] : []))),
    );
    // Only this ClusterStack's own tags: stacks often share one repository (and its listing), and
    // a tag of another stack read at this stack's path is a wrong tree (and a fetch per tag and
    // stack: the hostile bench's 16 stacks on one repository made ~100 reads per snapshot).
    const own = new Set(classified.releases.map((r) => r.tag));
    const wanted = new Set<string>([
      ...extraTags.filter((t) => own.has(t)),
      ...releases
        .filter(
          (r) =>
            r.metadata.namespace === ns &&
            (r.spec as { clusterStack?: unknown } | undefined)?.clusterStack === cs.metadata.name,
        )
        .map((r) => r.metadata.name),
      ...(classified.releases.at(-1) ? [classified.releases.at(-1)?.tag ?? ''] : []),
      ...(cs.spec.versions ?? []).map((v) =>
        formatReleaseTag(cs.spec.provider, cs.spec.name, cs.spec.kubernetesVersion, v),
      ),
    ]);
    const path = cs.spec.source.path ?? '';
    for (const t of source.listing.tags) {
      if (!wanted.has(t.tag) || source.trees.has(t.tag)) continue;
      try {
        const fetched = await fetchTree(
          { url, path, ...(insecure ? { insecure } : {}) },
          t.tag,
          t.commit,
          cacheDir,
          creds,
        );
        // As the controller reads it: unvendored chart dependencies fetched (or from its cache).
        const tree = await withReleaseChartDependencies(fetched, t.tag, {
          cacheDir,
          treeKey: releaseTreeKey(url, t.commit, path),
          ...(tenancy !== undefined ? { tenancy } : {}),
        }).catch(() => fetched);
        const prefix = path === '' ? '' : `${path.replace(/\/+$/, '')}/`;
        source.trees.set(
          t.tag,
          mapTreePaths(tree, (p) => `${prefix}${p}`),
        );
      } catch {
        // not fetchable: the release shows as waiting for its artifact, as the controller would
      }
    }
  }
  snapshot.sources = [...byUrl.values()];
}

/** The entries of a git tree object: mode, name, and the object's id in hex. */
export function parseTreeObject(tree: Buffer, idBytes: number): { mode: string; name: string; id: string }[] {
  const entries: { mode: string; name: string; id: string }[] = [];
  let at = 0;
  while (at < tree.length) {
    const space = tree.indexOf(0x20, at);
    const nul = tree.indexOf(0, space);
    if (space < 0 || nul < 0 || nul + 1 + idBytes > tree.length) throw new Error('malformed git tree object');
    entries.push({
      mode: tree.subarray(at, space).toString('latin1'),
      name: tree.subarray(space + 1, nul).toString('utf8'),
      id: tree.subarray(nul + 1, nul + 1 + idBytes).toString('hex'),
    });
    at = nul + 1 + idBytes;
  }
  return entries;
}

/**
 * Every blob of every branch as `git ls-tree -r` lists them (`<branch>/<path>`, in its order;
 * submodules left out), reading the trees with one `catFile` call per tree depth instead of one
 * `git ls-tree` process per branch: a preview of 1,000 Clusters reads 1,000 branches.
 */
export async function branchBlobs(
  branches: readonly string[],
  catFile: (names: string[]) => Promise<Buffer[]>,
  idBytes: number,
): Promise<{ path: string; id: string }[]> {
  const trees = new Map<string, ReturnType<typeof parseTreeObject>>();
  let wanted = [...new Set(branches.map((b) => `refs/heads/${b}^{tree}`))];
  while (wanted.length > 0) {
    const contents = await catFile(wanted);
    const next = new Set<string>();
    wanted.forEach((name, i) => {
      const entries = parseTreeObject(contents[i] ?? Buffer.alloc(0), idBytes);
      trees.set(name, entries);
      for (const e of entries) if (e.mode === '40000' && !trees.has(e.id)) next.add(e.id);
    });
    wanted = [...next];
  }
  const out: { path: string; id: string }[] = [];
  const walk = (name: string, prefix: string): void => {
    for (const e of trees.get(name) ?? []) {
      if (e.mode === '40000') walk(e.id, `${prefix}${e.name}/`);
      else if (e.mode !== '160000') out.push({ path: `${prefix}${e.name}`, id: e.id });
    }
  };
  for (const b of branches) walk(`refs/heads/${b}^{tree}`, `${b}/`);
  return out;
}

/**
 * Every branch under the given prefixes with its files, keyed `<branch>/<path on the branch>` (one
 * shallow fetch into a scratch bare repository; no checkout).
 */
export async function readFleet(
  url: string,
  prefixes: readonly string[],
  creds?: GitCredentials,
): Promise<{ files: Map<string, string>; tips: Map<string, string> }> {
  const dir = mkdtempSync(join(tmpdir(), 'stackflux-fleet-'));
  const env = gitEnv(creds, url);
  const git = async (...args: string[]): Promise<string> => {
    const run = await runGit(['--git-dir', dir, ...args], { env, timeoutMs: 300_000 });
    if (run.code !== 0)
      throw new Error(
        `reading the fleet repository: git ${args[0]} failed: ${scrub(run.stderr.trim(), creds)}`,
      );
    return run.stdout;
  };
  try {
    await git('init', '--bare', '--quiet');
    try {
      await git(
        'fetch',
        '--quiet',
        '--depth=1',
        '--no-tags',
        url,
        ...prefixes.map((p) => `+refs/heads/${p}*:refs/heads/${p}*`),
      );
    } catch (err) {
      // git fetch exits 1 without a word when no branch matches its refspecs: a namespace whose
      // Clusters have no fleet branch yet. That is an empty fleet, not a failure (the impact of a
      // first rollout was retried until some branch existed).
      // The fetch's own failure is the one to report when the listing fails too.
      const heads = await git('ls-remote', '--heads', url, ...prefixes.map((p) => `refs/heads/${p}*`)).catch(
        () => {
          throw err;
        },
      );
      if (heads.trim() !== '') throw err;
      return { files: new Map(), tips: new Map() };
    }
    const tips = new Map(
      (await git('for-each-ref', '--format=%(refname:strip=2) %(objectname)', 'refs/heads/'))
        .split('\n')
        .filter((r) => r !== '')
        .map((r) => r.split(' ') as [string, string])
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
    );
    const idBytes = (tips.values().next().value?.length ?? 40) / 2;
    // Asynchronous: the impact controller reads the fleet inside the controller process, where a
    // synchronous read of every branch would stall Lease renewal and /healthz.
    const batch = async (names: string[]): Promise<Buffer> => {
      const run = await runGit(['--git-dir', dir, 'cat-file', '--batch'], {
        env,
        input: `${names.join('\n')}\n`,
        timeoutMs: 300_000,
        binary: true,
      });
      if (run.code !== 0 || run.stdoutBuffer === undefined)
        throw new Error(
          `reading the fleet repository: git cat-file failed: ${scrub(run.stderr.trim(), creds)}`,
        );
      return run.stdoutBuffer;
    };
    const catFile = async (names: string[]): Promise<Buffer[]> =>
      parseCatFileBatch(await batch(names), names.length);
    const entries = await branchBlobs([...tips.keys()], catFile, idBytes);
    const ids = [...new Set(entries.map((e) => e.id))];
    const contents = ids.length === 0 ? [] : await catFile(ids);
    const blobs = new Map(ids.map((id, i) => [id, contents[i]?.toString('utf8') ?? '']));
    return { files: new Map(entries.map((e) => [e.path, blobs.get(e.id) ?? ''])), tips };
  } finally {
    // Off the event loop: the live snapshot runs inside the controller (the impact controller).
    await rm(dir, { recursive: true, force: true }).catch(() => undefined);
  }
}
