// What `helm dependency update` would fetch for a chart of a release tree, decided without I/O.
// The cluster-stack-operator renders addons with `helm template --dependency-update`: Helm updates
// only when a Chart.yaml dependency has no chart of that name in charts/ (action.CheckDependencies),
// and then fetches EVERY remote dependency, replaces the archives in charts/ (keeping only those of
// dependencies without a repository) and picks each version from the repository's index.yaml as
// repo.IndexFile.Get does (exact string first, else the highest version the constraint allows).
import { parse as parseYaml } from 'yaml';
import { MAX_YAML_ALIASES, type ReleaseTree } from '../api/release.ts';
import {
  compareHelmVersions,
  type HelmVersion,
  helmConstraintAllows,
  parseHelmConstraint,
  parseHelmVersion,
} from './helmsemver.ts';
import type { ValidationResult } from './stack.ts';
import { readTarGz, type TarFile } from './tarball.ts';
import { binaryFilesOf } from './tree.ts';

/** The path of `file` in the chart at `chartDir` ("" is the stack root). */
export function chartFile(chartDir: string, file: string): string {
  return chartDir === '' ? file : `${chartDir}/${file}`;
}

/** A Chart.yaml `dependencies` entry Helm must fetch from a chart repository. */
export interface RemoteDependency {
  name: string;
  version: string;
  /** The repository URL as written (http(s)://; other kinds are refused before this). */
  repository: string;
}

/** For one chart: what to fetch, and which archives of its charts/ Helm would delete. */
export interface DependencyUpdate {
  /** The chart's folder in the tree, without a trailing "/". */
  chartDir: string;
  fetch: RemoteDependency[];
  drop: string[];
}

/** Bytes a subchart archive may unpack to while its Chart.yaml is looked for. */
const MAX_ARCHIVE_UNPACKED = 64 * 1024 * 1024;
/** Entries a subchart archive may hold. */
const MAX_ARCHIVE_ENTRIES = 10_000;

function str(v: unknown): string {
  return typeof v === 'string' ? v : typeof v === 'number' || typeof v === 'boolean' ? String(v) : '';
}

function readYaml(text: string): unknown {
  return parseYaml(text, { maxAliasCount: MAX_YAML_ALIASES, prettyErrors: false });
}

function chartName(chartYaml: string | undefined): string | undefined {
  if (chartYaml === undefined) return undefined;
  try {
    const doc = readYaml(chartYaml) as { name?: unknown } | null;
    return doc !== null && typeof doc === 'object' ? str(doc.name) : undefined;
  } catch {
    return undefined;
  }
}

/** The `name` in the Chart.yaml of a chart archive (.tgz), or undefined when it has none. */
export function archiveChartName(bytes: Uint8Array): string | undefined {
  let files: TarFile[];
  try {
    files = readTarGz(bytes, { maxEntries: MAX_ARCHIVE_ENTRIES, maxUnpackedBytes: MAX_ARCHIVE_UNPACKED });
  } catch {
    return undefined;
  }
  const chartYaml = files.find((f) => /^[^/]+\/Chart\.yaml$/.test(f.path));
  return chartYaml === undefined ? undefined : chartName(Buffer.from(chartYaml.data).toString('utf8'));
}

/**
 * What `helm template --dependency-update` would do to the chart at `chartDir` of `tree`:
 * undefined when every dependency is in charts/ (Helm fetches nothing), else the update, or the
 * errors naming each dependency stackflux cannot fetch and what to do about it.
 */
export function dependencyUpdateOf(
  tree: ReleaseTree,
  chartPath: string,
): ValidationResult<DependencyUpdate | undefined> {
  const chartDir = chartPath.replace(/\/+$/, '');
  const file = chartFile(chartDir, 'Chart.yaml');
  const text = tree.get(file);
  if (text === undefined) return { ok: true, value: undefined };
  let doc: unknown;
  try {
    doc = readYaml(text);
  } catch (err) {
    return { ok: false, errors: [`${file}: invalid YAML: ${(err as Error).message.split('\n')[0]}`] };
  }
  const deps = (doc as { dependencies?: unknown } | null)?.dependencies;
  if (!Array.isArray(deps) || deps.length === 0) return { ok: true, value: undefined };

  // The charts Helm's loader finds in charts/: a folder per chart, any other file an archive.
  const prefix = chartFile(chartDir, 'charts/');
  const present = new Set<string>();
  const archives = new Map<string, string | undefined>();
  for (const [path, bytes] of binaryFilesOf(tree)) {
    const rest = path.startsWith(prefix) ? path.slice(prefix.length) : undefined;
    if (rest === undefined || rest.includes('/') || rest.endsWith('.prov')) continue;
    const name = archiveChartName(bytes);
    archives.set(path, name);
    if (name !== undefined) present.add(name);
  }
  for (const [path, content] of tree) {
    const rest = path.startsWith(prefix) ? path.slice(prefix.length) : undefined;
    if (rest === undefined) continue;
    if (/^[^/]+\/Chart\.yaml$/.test(rest)) {
      const name = chartName(content);
      if (name !== undefined) present.add(name);
    } else if (!rest.includes('/') && !rest.endsWith('.prov')) archives.set(path, undefined);
  }

  const entries = deps.map((d) =>
    d !== null && typeof d === 'object' ? (d as Record<string, unknown>) : {},
  );
  if (entries.every((d) => present.has(str(d.name)))) return { ok: true, value: undefined };

  const errors: string[] = [];
  const fetch: RemoteDependency[] = [];
  const local = new Set<string>();
  entries.forEach((d, i) => {
    const name = str(d.name);
    const version = str(d.version);
    const repository = str(d.repository);
    const where = `${file}: dependencies[${i}] (${name})`;
    const constraint = parseHelmConstraint(version);
    if (!constraint.ok) {
      errors.push(`${where}: version "${version}" is not a Helm version constraint (${constraint.reason})`);
      return;
    }
    if (repository === '') {
      local.add(name);
      if (!present.has(name))
        errors.push(`${where}: no repository and no chart ${name} in charts/: vendor it there`);
    } else if (repository.startsWith('oci://')) {
      errors.push(
        `${where}: OCI repository ${repository}: OCI dependencies are not resolved yet; vendor the chart as charts/${name}-<version>.tgz`,
      );
    } else if (repository.startsWith('file://')) {
      errors.push(
        `${where}: ${repository}: file:// dependencies are not resolved; vendor the chart in charts/`,
      );
    } else if (!/^https?:\/\//i.test(repository)) {
      errors.push(
        `${where}: repository "${repository}" is not an http(s):// chart repository URL (named repositories are not configured here)`,
      );
    } else fetch.push({ name, version, repository });
  });
  if (errors.length > 0) return { ok: false, errors };
  const drop = [...archives]
    .filter(([, name]) => name === undefined || !local.has(name))
    .map(([path]) => path);
  return { ok: true, value: { chartDir, fetch, drop } };
}

/** A chart version of an index.yaml, as far as fetching it goes. */
export interface IndexEntry {
  version: string;
  urls: string[];
  digest: string;
}

/** An index entry picked, or why there is none. */
export type IndexPick = { ok: true; entry: IndexEntry } | { ok: false; reason: string };

/**
 * The entries `helm dependency update` picks for each of `wanted` (chart name and constraint)
 * from one index.yaml (repo.LoadIndexFile + IndexFile.Get), the index parsed once.
 */
export function pickIndexEntries(
  indexText: string,
  wanted: readonly { name: string; version: string }[],
): IndexPick[] {
  let doc: unknown;
  try {
    doc = readYaml(indexText);
  } catch (err) {
    const reason = `index.yaml is not YAML: ${(err as Error).message.split('\n')[0]}`;
    return wanted.map(() => ({ ok: false, reason }));
  }
  const index = doc !== null && typeof doc === 'object' ? (doc as Record<string, unknown>) : {};
  if (str(index.apiVersion) === '')
    return wanted.map(() => ({
      ok: false,
      reason: 'index.yaml has no apiVersion: not a chart repository index',
    }));
  return wanted.map(({ name, version }) => pickFrom(index, name, version));
}

/** The entry picked for `name` and the constraint `version` from one index.yaml. */
export function pickIndexEntry(indexText: string, name: string, version: string): IndexPick {
  return pickIndexEntries(indexText, [{ name, version }])[0] ?? { ok: false, reason: 'nothing picked' };
}

function pickFrom(index: Record<string, unknown>, name: string, version: string): IndexPick {
  const raw = (index.entries as Record<string, unknown> | undefined)?.[name];
  if (!Array.isArray(raw) || raw.length === 0)
    return { ok: false, reason: `no chart ${name} in the repository` };
  // LoadIndexFile drops entries without a valid version and sorts the rest highest first.
  const entries = raw
    .filter((e): e is Record<string, unknown> => e !== null && typeof e === 'object')
    .map((e) => ({
      version: str(e.version),
      urls: Array.isArray(e.urls) ? e.urls.map(str) : [],
      digest: str(e.digest),
      parsed: parseHelmVersion(str(e.version)),
    }))
    .filter((e): e is IndexEntry & { parsed: HelmVersion } => e.parsed !== undefined && e.version !== '')
    .sort((a, b) => compareHelmVersions(b.parsed, a.parsed));
  const constraint = parseHelmConstraint(version === '' ? '*' : version);
  if (!constraint.ok) return { ok: false, reason: constraint.reason };
  const found =
    (version !== '' ? entries.find((e) => e.version === version) : undefined) ??
    entries.find((e) => helmConstraintAllows(constraint.value, e.parsed));
  if (found === undefined) return { ok: false, reason: `no version of ${name} matches "${version}"` };
  const { parsed: _parsed, ...entry } = found;
  return { ok: true, entry };
}

/**
 * The URL of a chart entry's archive: Helm resolves `urls[0]` against the repository URL with a
 * trailing slash (repo.ResolveReferenceURL).
 */
export function chartArchiveUrl(repository: string, entryUrl: string): string {
  if (/^[A-Za-z][A-Za-z0-9+.-]*:/.test(entryUrl)) return entryUrl;
  const base = new URL(repository);
  base.pathname = `${base.pathname.replace(/\/$/, '')}/`;
  const resolved = new URL(entryUrl, base);
  resolved.search = base.search;
  return resolved.toString();
}

/** The index.yaml URL of a chart repository (Helm: the URL without trailing slashes + /index.yaml). */
export function chartIndexUrl(repository: string): string {
  return `${repository.replace(/\/$/, '')}/index.yaml`;
}
