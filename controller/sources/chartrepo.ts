// Chart dependencies of a release fetched as `helm dependency update` fetches them, once per
// release (the release controller's I/O side), so per-Cluster renders stay pure: the fetched
// archives become binary files `charts/<name>-<version>.tgz` of the release tree. What to fetch and
// which version is decided by releases/chartdeps.ts; this file only talks HTTP and keeps the
// cache. The release author names the URLs, so every hop is checked: the tenancy policy's
// allowed hosts, https unless the host is allowed plain http, bounded redirects, sizes and time,
// the archive checked against the index's sha256 digest. URLs are logged and reported without
// user info.
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ReleaseTree } from '../api/release.ts';
import {
  chartArchiveUrl,
  chartFile,
  chartIndexUrl,
  type DependencyUpdate,
  dependencyUpdateOf,
  type IndexPick,
  type RemoteDependency,
} from '../releases/chartdeps.ts';
import { readReleaseDescription, type StackDescription } from '../releases/format.ts';
import { pathProblem } from '../releases/paths.ts';
import { chartHostAllowed } from '../releases/stack.ts';
import { parseReleaseTag } from '../releases/tags.ts';
import type { TenancyPolicy } from '../releases/tenancy.ts';
import { binaryFilesOf, releaseTree } from '../releases/tree.ts';
import { pickFromIndex } from './chartindex.ts';
import { egressFetch, egressRefusal } from './egress.ts';
import { SourceError } from './git.ts';

export interface ChartFetchLimits {
  maxIndexBytes: number;
  maxChartBytes: number;
  /** All archives of one release together, and how many dependencies it may fetch. */
  maxTotalBytes: number;
  maxDependencies: number;
  /** Per request (each redirect hop counts as one). */
  timeoutMs: number;
  maxRedirects: number;
  /**
   * All requests of one release together: a repository that answers slowly to every request must
   * not hold a release controller worker for dependencies × hops × timeoutMs.
   */
  maxTotalMs: number;
}

/** The limits of one resolution, with the moment its time is up (ms epoch). */
type FetchBudget = ChartFetchLimits & { deadline: number };

/** Time left for one request: the per-request timeout, cut to what the release has left. */
function requestTimeoutMs(budget: FetchBudget): number {
  const left = budget.deadline - Date.now();
  if (left <= 0)
    throw new ChartDependencyError(
      `not fetched: the release's chart dependencies took more than ${budget.maxTotalMs / 1000} s in all`,
      true,
    );
  return Math.min(budget.timeoutMs, left);
}

export const CHART_FETCH_LIMITS: ChartFetchLimits = {
  // helm.cilium.io's index.yaml is a few MiB; 32 MiB leaves room without inviting abuse.
  maxIndexBytes: 32 * 1024 * 1024,
  maxChartBytes: 20 * 1024 * 1024,
  maxTotalBytes: 100 * 1024 * 1024,
  maxDependencies: 64,
  timeoutMs: 30_000,
  maxRedirects: 5,
  maxTotalMs: 120_000,
};

/**
 * A dependency that could not be fetched. `transient`: the repository could not be reached or
 * answered with a server error (try again later); otherwise the release must change (or the
 * policy), and the message says what.
 */
export class ChartDependencyError extends SourceError {
  readonly transient: boolean;
  constructor(message: string, transient: boolean) {
    super(transient ? 'ChartRepositoryUnavailable' : 'InvalidRelease', message);
    this.transient = transient;
  }
}

export interface ChartDependencyOptions {
  cacheDir: string;
  /** Identifies the release tree (source URL, commit, path): a resolution holds for it forever. */
  treeKey: string;
  tenancy?: TenancyPolicy;
  limits?: ChartFetchLimits;
  /**
   * Only what is cached: no request (the ClusterAddon controller: the release controller fetches
   * when it validates the release; a Cluster's reconcile never goes to the network).
   */
  cacheOnly?: boolean;
}

/** A URL without user info, for messages and logs. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    u.username = '';
    u.password = '';
    return u.toString();
  } catch {
    return '<unparsable URL>';
  }
}

/** Why the policy refuses `url` (undefined: allowed). */
function urlRefusal(url: string, tenancy: TenancyPolicy | undefined): string | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return 'is not a URL';
  }
  if (u.username !== '' || u.password !== '')
    return 'carries credentials in the URL, which stackflux does not send';
  const host = u.hostname.toLowerCase();
  if (tenancy?.allowedChartHosts !== undefined && !chartHostAllowed(host, tenancy.allowedChartHosts))
    return `host ${host} is not in --allowed-chart-hosts (${tenancy.allowedChartHosts.join(', ')})`;
  if (u.protocol === 'https:') return undefined;
  if (u.protocol === 'http:') {
    const insecure = tenancy?.insecureChartHosts;
    return insecure !== undefined && chartHostAllowed(host, insecure)
      ? undefined
      : `uses plain http and host ${host} is not in --insecure-chart-hosts`;
  }
  return `scheme ${u.protocol} is not http(s)`;
}

function getOnce(url: string, budget: FetchBudget): Promise<Response> {
  // Through the outbound policy (egress.ts): every hop's host is checked when it connects.
  return egressFetch(url, {
    redirect: 'manual',
    signal: AbortSignal.timeout(requestTimeoutMs(budget)),
    headers: { accept: '*/*', 'user-agent': 'stackflux' },
  });
}

/** GET with the policy checked on every hop, redirects bounded, the body capped. */
async function download(
  url: string,
  maxBytes: number,
  what: string,
  tenancy: TenancyPolicy | undefined,
  limits: FetchBudget,
): Promise<Uint8Array> {
  let at = url;
  for (let hop = 0; ; hop++) {
    const refusal = urlRefusal(at, tenancy);
    if (refusal !== undefined) throw new ChartDependencyError(`${what} ${redactUrl(at)} ${refusal}`, false);
    let res: Response;
    try {
      res = await getOnce(at, limits).catch((err: unknown) => {
        // A kept-alive connection the server closed meanwhile fails at once: one more try (a GET).
        if (err instanceof ChartDependencyError) throw err;
        if (err instanceof Error && err.name === 'TimeoutError') throw err;
        if (egressRefusal(err) !== undefined) throw err;
        return getOnce(at, limits);
      });
    } catch (err) {
      if (err instanceof ChartDependencyError)
        throw new ChartDependencyError(`${what} ${redactUrl(at)}: ${err.message}`, true);
      // The platform's verdict on where requests go, not a passing failure.
      const refused = egressRefusal(err);
      if (refused !== undefined)
        throw new ChartDependencyError(`${what} ${redactUrl(at)}: ${refused.message}`, false);
      // The system's error code (ENOTFOUND, ECONNREFUSED, ...) says what to look at; never the
      // whole error, which may carry the URL.
      const code = (err as { cause?: { code?: unknown } }).cause?.code;
      const cause =
        err instanceof Error && err.name === 'TimeoutError'
          ? `no answer within ${limits.timeoutMs / 1000} s`
          : `unreachable${typeof code === 'string' && /^[A-Z_]+$/.test(code) ? ` (${code})` : ''}`;
      throw new ChartDependencyError(`${what} ${redactUrl(at)}: ${cause}`, true);
    }
    if (res.status >= 300 && res.status < 400 && res.headers.get('location') !== null) {
      await res.body?.cancel();
      // A redirect that came over plain http may have been written by anyone on the path.
      if (new URL(at).protocol === 'http:')
        throw new ChartDependencyError(
          `${what} ${redactUrl(at)} redirects over plain http; not following it (plain http follows no redirect)`,
          false,
        );
      if (hop >= limits.maxRedirects)
        throw new ChartDependencyError(
          `${what} ${redactUrl(url)}: more than ${limits.maxRedirects} redirects`,
          false,
        );
      at = new URL(res.headers.get('location') ?? '', at).toString();
      continue;
    }
    if (!res.ok) {
      await res.body?.cancel();
      throw new ChartDependencyError(
        `${what} ${redactUrl(at)}: HTTP ${res.status}`,
        res.status >= 500 || res.status === 429,
      );
    }
    const declared = Number(res.headers.get('content-length') ?? '0');
    if (declared > maxBytes) {
      await res.body?.cancel();
      throw new ChartDependencyError(`${what} ${redactUrl(at)} is larger than ${maxBytes} bytes`, false);
    }
    const chunks: Uint8Array[] = [];
    let size = 0;
    const reader = res.body?.getReader();
    try {
      for (;;) {
        const next = await reader?.read();
        if (next === undefined || next.done) break;
        size += next.value.byteLength;
        if (size > maxBytes) {
          await reader?.cancel();
          throw new ChartDependencyError(`${what} ${redactUrl(at)} is larger than ${maxBytes} bytes`, false);
        }
        chunks.push(next.value);
      }
    } catch (err) {
      if (err instanceof ChartDependencyError) throw err;
      throw new ChartDependencyError(`${what} ${redactUrl(at)}: the download broke off`, true);
    }
    return Buffer.concat(chunks);
  }
}

const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

/** One dependency fetched: the archive's file name in charts/ and its bytes. */
async function fetchDependency(
  chartDir: string,
  dep: RemoteDependency,
  indexes: Map<string, Promise<IndexPick[]>>,
  wanted: ReadonlyMap<string, { name: string; version: string }[]>,
  tenancy: TenancyPolicy | undefined,
  limits: FetchBudget,
): Promise<{ file: string; bytes: Uint8Array }> {
  const what = `${chartFile(chartDir, 'Chart.yaml')}: dependency ${dep.name} (version "${dep.version}") from`;
  const indexUrl = chartIndexUrl(dep.repository);
  const asked = wanted.get(indexUrl) ?? [dep];
  let index = indexes.get(indexUrl);
  if (index === undefined) {
    // Shared by the dependencies of one repository (fetched and read once): its message names none.
    index = download(indexUrl, limits.maxIndexBytes, 'the chart repository index', tenancy, limits).then(
      (bytes) => pickFromIndex(bytes, asked, requestTimeoutMs(limits)),
    );
    index.catch(() => undefined);
    indexes.set(indexUrl, index);
  }
  let picks: IndexPick[];
  try {
    picks = await index;
  } catch (err) {
    if (!(err instanceof ChartDependencyError)) throw err;
    throw new ChartDependencyError(`${what} ${err.message}`, err.transient);
  }
  const at = asked.findIndex((w) => w.name === dep.name && w.version === dep.version);
  const picked = picks[at] ?? { ok: false as const, reason: 'not in the index answer' };
  if (!picked.ok)
    throw new ChartDependencyError(
      `${what} ${redactUrl(dep.repository)}: ${picked.reason}; fix the version or the repository`,
      false,
    );
  const { entry } = picked;
  const file = `${dep.name}-${entry.version}.tgz`;
  const problem = dep.name.includes('/')
    ? 'the name contains "/"'
    : pathProblem(chartFile(chartDir, `charts/${file}`));
  if (problem !== undefined)
    throw new ChartDependencyError(`${what}: cannot be stored as charts/${file}: ${problem}`, false);
  const first = entry.urls[0];
  if (first === undefined)
    throw new ChartDependencyError(
      `${what} ${redactUrl(dep.repository)}: version ${entry.version} has no download URL`,
      false,
    );
  if (!/^[0-9a-f]{64}$/i.test(entry.digest))
    throw new ChartDependencyError(
      `${what} ${redactUrl(dep.repository)}: version ${entry.version} has no sha256 digest in index.yaml to check the archive against`,
      false,
    );
  let archiveUrl: string;
  try {
    archiveUrl = chartArchiveUrl(dep.repository, first);
  } catch {
    throw new ChartDependencyError(
      `${what} ${redactUrl(dep.repository)}: version ${entry.version} has an invalid URL`,
      false,
    );
  }
  const bytes = await download(archiveUrl, limits.maxChartBytes, `${what} archive`, tenancy, limits);
  if (sha256(bytes) !== entry.digest.toLowerCase())
    throw new ChartDependencyError(
      `${what} ${redactUrl(archiveUrl)}: the archive does not match the digest in index.yaml`,
      false,
    );
  return { file, bytes };
}

/** The charts whose dependencies Helm would update, or the errors naming each one that cannot be. */
export function dependencyUpdates(tree: ReleaseTree, chartDirs: readonly string[]): DependencyUpdate[] {
  const updates: DependencyUpdate[] = [];
  const errors: string[] = [];
  for (const dir of chartDirs) {
    const update = dependencyUpdateOf(tree, dir);
    if (!update.ok) errors.push(...update.errors);
    else if (update.value !== undefined) updates.push(update.value);
  }
  if (errors.length > 0) throw new ChartDependencyError(errors.join('; '), false);
  return updates;
}

interface CachedResolution {
  charts: { chartDir: string; files: { file: string; sha256: string }[] }[];
}

function readCached(
  dir: string,
  key: string,
): Map<string, { file: string; bytes: Uint8Array }[]> | undefined {
  try {
    const lock = JSON.parse(readFileSync(join(dir, `${key}.json`), 'utf8')) as CachedResolution;
    const out = new Map<string, { file: string; bytes: Uint8Array }[]>();
    for (const chart of lock.charts) {
      out.set(
        chart.chartDir,
        chart.files.map((f) => {
          const bytes = readFileSync(join(dir, 'blobs', `${f.sha256}.tgz`));
          if (sha256(bytes) !== f.sha256) throw new Error('cache entry corrupt');
          return { file: f.file, bytes };
        }),
      );
    }
    return out;
  } catch {
    return undefined;
  }
}

function writeCached(
  dir: string,
  key: string,
  fetched: Map<string, { file: string; bytes: Uint8Array }[]>,
): void {
  mkdirSync(join(dir, 'blobs'), { recursive: true });
  const lock: CachedResolution = { charts: [] };
  for (const [chartDir, files] of fetched) {
    lock.charts.push({
      chartDir,
      files: files.map(({ file, bytes }) => {
        const digest = sha256(bytes);
        const blob = join(dir, 'blobs', `${digest}.tgz`);
        writeFileSync(`${blob}.tmp-${process.pid}`, bytes);
        renameSync(`${blob}.tmp-${process.pid}`, blob);
        return { file, sha256: digest };
      }),
    });
  }
  const lockFile = join(dir, `${key}.json`);
  writeFileSync(`${lockFile}.tmp-${process.pid}`, JSON.stringify(lock));
  renameSync(`${lockFile}.tmp-${process.pid}`, lockFile);
}

/**
 * `tree` with the dependencies of the charts at `chartDirs` fetched as `helm dependency update`
 * would (the tree itself when none needs it). A resolution is kept on disk per release tree, so
 * it happens once and a restart does not need the repositories again. Throws
 * ChartDependencyError naming the dependency.
 */
export async function withChartDependencies(
  tree: ReleaseTree,
  chartDirs: readonly string[],
  opts: ChartDependencyOptions,
): Promise<ReleaseTree> {
  const updates = dependencyUpdates(tree, chartDirs);
  if (updates.length === 0) return tree;
  const limits = opts.limits ?? CHART_FETCH_LIMITS;
  // The policy is checked on every call, also when the archives come from the cache.
  for (const u of updates)
    for (const dep of u.fetch) {
      const refusal = urlRefusal(dep.repository, opts.tenancy);
      if (refusal !== undefined)
        throw new ChartDependencyError(
          `${chartFile(u.chartDir, 'Chart.yaml')}: dependency ${dep.name}: repository ${redactUrl(dep.repository)} ${refusal}`,
          false,
        );
    }
  const dir = join(opts.cacheDir, 'chartdeps');
  const key = sha256(Buffer.from(JSON.stringify([opts.treeKey, updates]))).slice(0, 32);
  let fetched = readCached(dir, key);
  if (fetched === undefined && opts.cacheOnly === true)
    throw new ChartDependencyError(
      'the chart dependencies are not fetched yet (the release controller fetches them when it validates the release)',
      true,
    );
  if (fetched === undefined) {
    const deadline = Date.now() + limits.maxTotalMs;
    const indexes = new Map<string, Promise<IndexPick[]>>();
    const wanted = new Map<string, { name: string; version: string }[]>();
    for (const u of updates)
      for (const dep of u.fetch) {
        const list = wanted.get(chartIndexUrl(dep.repository)) ?? [];
        list.push({ name: dep.name, version: dep.version });
        wanted.set(chartIndexUrl(dep.repository), list);
      }
    const resolved = new Map<string, { file: string; bytes: Uint8Array }[]>();
    const failures: ChartDependencyError[] = [];
    const count = updates.reduce((n, u) => n + u.fetch.length, 0);
    if (count > limits.maxDependencies)
      throw new ChartDependencyError(
        `the addon charts name ${count} dependencies to fetch, more than ${limits.maxDependencies}: vendor some in charts/`,
        false,
      );
    // One at a time, each within what is left of the release's budget: memory stays bounded.
    let left = limits.maxTotalBytes;
    for (const u of updates) {
      const files: { file: string; bytes: Uint8Array }[] = [];
      for (const dep of u.fetch) {
        try {
          const got = await fetchDependency(u.chartDir, dep, indexes, wanted, opts.tenancy, {
            ...limits,
            maxChartBytes: Math.min(limits.maxChartBytes, left),
            deadline,
          });
          left -= got.bytes.byteLength;
          files.push(got);
        } catch (err) {
          if (!(err instanceof ChartDependencyError)) throw err;
          failures.push(err);
        }
      }
      resolved.set(u.chartDir, files);
    }
    // Every dependency that failed, named: a release author fixes them all at once.
    if (failures.length > 0)
      throw new ChartDependencyError(
        failures.map((f) => f.message).join('; '),
        failures.every((f) => f.transient),
      );
    writeCached(dir, key, resolved);
    fetched = resolved;
  }
  const binary = new Map(binaryFilesOf(tree));
  const text = new Map(tree);
  for (const u of updates) {
    for (const path of u.drop) {
      binary.delete(path);
      text.delete(path);
    }
    for (const { file, bytes } of fetched.get(u.chartDir) ?? [])
      binary.set(chartFile(u.chartDir, `charts/${file}`), bytes);
  }
  return releaseTree(text, binary);
}

/** The addon charts of a release whose dependencies Helm would update (csctl: CSO renders them so). */
export function dependencyChartDirs(description: StackDescription): string[] {
  if (description.format !== 'csctl') return [];
  return [...new Set(description.addons.filter((a) => a.content === 'helm-chart').map((a) => a.path))];
}

/** The key of a release tree's dependency resolution: the same for every controller reading it. */
export function releaseTreeKey(url: string, commit: string, path: string): string {
  return `${url}\n${commit}\n${path}`;
}

/**
 * The release tree of `tag` with its addon charts' dependencies fetched (from the cache the
 * release controller filled when it validated the release); an invalid release as it is.
 */
export async function withReleaseChartDependencies(
  tree: ReleaseTree,
  tag: string,
  opts: ChartDependencyOptions,
): Promise<ReleaseTree> {
  const parsed = parseReleaseTag(tag);
  if (!parsed.ok) return tree;
  const description = readReleaseDescription(tree, parsed.value);
  if (!description.ok) return tree;
  return withChartDependencies(tree, dependencyChartDirs(description.value), opts);
}
