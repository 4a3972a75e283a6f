// The snapshot: the controller's world as files (see README.md in this folder).
//   cluster/<group|core>/<resource>/<name>.yaml
//   namespaces/<ns>/<group|core>/<resource>/<name>.yaml
//   sources/<repo-key>/tags.yaml            url + tag → commit list (or a listing error)
//   sources/<repo-key>/trees/<tag>/...      the repository's files at the tag
//   fleet/<branch>/<addon>/<file>           the fleet repository's branches and their files (optional)
//   fleet-tips.yaml                         branch → its tip commit, when read from a real repository (optional)
//   settings.yaml                           controller settings (fleet URL, branch prefix, ...; optional)
// Reading is strict: anything malformed or outside the layout is an error naming the file.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { ReleaseTree } from '../api/release.ts';
import { groupOf, kindInfo } from '../api/resources.ts';
import { binaryFilesOf, releaseTreeFromBytes } from '../releases/tree.ts';
import { compareStrings, isRecord, parseOneDocument } from './yaml.ts';

export interface SnapshotObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    generation?: number;
    deletionTimestamp?: string;
    finalizers?: string[];
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: { apiVersion: string; kind: string; name: string; uid: string; controller?: boolean }[];
    [key: string]: unknown;
  };
  [key: string]: unknown;
}

export interface SourceTag {
  tag: string;
  commit: string;
  /** Commit time (epoch seconds), when the listing reported it (orders custom channels). */
  time?: number;
}

export type SourceListingData =
  | { ok: true; tags: SourceTag[]; listedAt?: string }
  | { ok: false; reason: string; message: string; lastListedAt?: string };

export interface SourceData {
  /** Folder name under sources/. */
  key: string;
  url: string;
  listing: SourceListingData;
  /** tag → files at the tag, path relative to the repository root. */
  /** Tag → the repository's files at the tag (binary files in the tree's `binary`). */
  trees: Map<string, ReleaseTree>;
}

export interface FleetSettingsData {
  url: string;
  /** Each Cluster's branch is `<branchPrefix><namespace>/<cluster>`. */
  branchPrefix: string;
  secretRef?: string;
  /** Flux interval of each Cluster's GitRepository. */
  interval?: string;
  /** Flux interval of the addon Kustomizations. */
  addonInterval?: string;
  /** Flux shards (sharding.fluxcd.io/key on each Cluster's Flux objects). */
  fluxShards?: number;
}

export interface SnapshotSettings {
  fleet: FleetSettingsData;
}

/** preview.yaml: the release preview to make over the snapshot (controller/preview/). */
export interface SnapshotPreview {
  namespace: string;
  clusterStack: string;
  /** The candidate release (default: the newest the ClusterStack would take). */
  release?: string;
  /** kubectl label selector syntax. */
  selector?: string;
  wave?: string;
}

export interface Snapshot {
  /** The release preview asked for (preview.yaml); undefined: none. */
  preview?: SnapshotPreview;
  /** By objectKey(). */
  objects: Map<string, SnapshotObject>;
  sources: SourceData[];
  /** Fleet repository files of every branch: `<branch>/<path on the branch>` → content. */
  fleet: Map<string, string>;
  /** Branch → tip commit as read from the fleet repository (else the render uses content ids). */
  fleetTips: Map<string, string>;
  settings: SnapshotSettings;
}

export const DEFAULT_SETTINGS: SnapshotSettings = {
  fleet: { url: '', branchPrefix: 'stackflux/' },
};

export class SnapshotError extends Error {
  readonly file: string;
  constructor(file: string, message: string) {
    super(`${file}: ${message}`);
    this.name = 'SnapshotError';
    this.file = file;
  }
}

const NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;
const COMMIT = /^[0-9a-f]{40}$/;
/**
 * A release's identity in its source's listing (RemoteTag.commit): a Git commit, an OCI manifest
 * digest, or the identity of a GitHub release's csctl assets (sources/githubassets.ts).
 */
const RELEASE_IDENTITY = /^([0-9a-f]{40}|sha256:[0-9a-f]{64}|github-assets:sha256:[0-9a-f]{64})$/;

/** group directory name: "core" for the core group. */
export function groupDir(group: string): string {
  return group === '' ? 'core' : group;
}

/** The snapshot path of an object without ".yaml": cluster/<g>/<r>/<n> or namespaces/<ns>/<g>/<r>/<n>. */
export function objectKey(obj: {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
}): string {
  const g = groupDir(groupOf(obj.apiVersion));
  const { plural } = kindInfo(obj.apiVersion, obj.kind);
  const ns = obj.metadata.namespace;
  return ns
    ? `namespaces/${ns}/${g}/${plural}/${obj.metadata.name}`
    : `cluster/${g}/${plural}/${obj.metadata.name}`;
}

export function emptySnapshot(): Snapshot {
  return {
    objects: new Map(),
    sources: [],
    fleet: new Map(),
    fleetTips: new Map(),
    settings: structuredClone(DEFAULT_SETTINGS),
  };
}

function listDir(dir: string): string[] {
  return readdirSync(dir)
    .filter((e) => e !== '.gitkeep')
    .sort(compareStrings);
}

function isDir(p: string): boolean {
  return statSync(p).isDirectory();
}

/** Every file below dir, path relative to dir with "/" separators, sorted. */
function walkFiles(dir: string, prefix = ''): string[] {
  const out: string[] = [];
  for (const e of listDir(dir)) {
    const p = join(dir, e);
    if (isDir(p)) out.push(...walkFiles(p, `${prefix}${e}/`));
    else out.push(`${prefix}${e}`);
  }
  return out;
}

function readObjectFile(
  root: string,
  rel: string,
  expect: { namespace?: string; group: string; resource: string; name: string },
): SnapshotObject {
  let value: unknown;
  try {
    value = parseOneDocument(readFileSync(join(root, rel), 'utf8'));
  } catch (err) {
    throw new SnapshotError(rel, `invalid YAML: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (!isRecord(value)) throw new SnapshotError(rel, 'must hold one Kubernetes object (a mapping)');
  const { apiVersion, kind, metadata } = value;
  if (typeof apiVersion !== 'string' || apiVersion === '')
    throw new SnapshotError(rel, 'apiVersion is required');
  if (typeof kind !== 'string' || kind === '') throw new SnapshotError(rel, 'kind is required');
  if (!isRecord(metadata) || typeof metadata.name !== 'string')
    throw new SnapshotError(rel, 'metadata.name is required');
  if (metadata.name !== expect.name)
    throw new SnapshotError(
      rel,
      `metadata.name "${metadata.name}" does not match the file name "${expect.name}"`,
    );
  const group = groupDir(groupOf(apiVersion));
  if (group !== expect.group)
    throw new SnapshotError(
      rel,
      `apiVersion ${apiVersion} is not in group directory "${expect.group}" (expected "${group}")`,
    );
  const info = kindInfo(apiVersion, kind);
  if (info.plural !== expect.resource)
    throw new SnapshotError(
      rel,
      `kind ${kind} belongs in resource directory "${info.plural}", not "${expect.resource}"`,
    );
  const ns = metadata.namespace;
  if (expect.namespace === undefined) {
    if (ns !== undefined && ns !== '')
      throw new SnapshotError(
        rel,
        `a cluster-scoped object must not set metadata.namespace ("${String(ns)}")`,
      );
    if (info.namespaced === true)
      throw new SnapshotError(rel, `${kind} is namespaced: it belongs under namespaces/<namespace>/`);
  } else {
    if (ns !== undefined && ns !== expect.namespace)
      throw new SnapshotError(
        rel,
        `metadata.namespace "${String(ns)}" does not match the directory "${expect.namespace}"`,
      );
    if (info.namespaced === false)
      throw new SnapshotError(rel, `${kind} is cluster-scoped: it belongs under cluster/`);
  }
  const obj = value as SnapshotObject;
  if (expect.namespace !== undefined) obj.metadata.namespace = expect.namespace;
  else delete obj.metadata.namespace;
  return obj;
}

function checkName(rel: string, what: string, name: string): void {
  if (!NAME.test(name)) throw new SnapshotError(rel, `${what} "${name}" is not a valid Kubernetes name`);
}

function readObjects(root: string, snapshot: Snapshot): void {
  const add = (rel: string, obj: SnapshotObject): void => {
    const key = objectKey(obj);
    if (snapshot.objects.has(key)) throw new SnapshotError(rel, `duplicate object ${key}`);
    snapshot.objects.set(key, obj);
  };
  const readScope = (base: string, namespace: string | undefined): void => {
    const dir = join(root, base);
    for (const group of listDir(dir)) {
      const gdir = join(dir, group);
      if (!isDir(gdir)) throw new SnapshotError(`${base}/${group}`, 'expected a <group|core> directory');
      for (const resource of listDir(gdir)) {
        const rdir = join(gdir, resource);
        if (!isDir(rdir))
          throw new SnapshotError(`${base}/${group}/${resource}`, 'expected a <resource> directory');
        for (const file of listDir(rdir)) {
          const rel = `${base}/${group}/${resource}/${file}`;
          if (isDir(join(rdir, file)))
            throw new SnapshotError(rel, 'unexpected directory (expected <name>.yaml)');
          if (!file.endsWith('.yaml')) throw new SnapshotError(rel, 'objects are <name>.yaml files');
          const name = file.slice(0, -'.yaml'.length);
          checkName(rel, 'object name', name);
          add(
            rel,
            readObjectFile(root, rel, {
              group,
              resource,
              name,
              ...(namespace !== undefined ? { namespace } : {}),
            }),
          );
        }
      }
    }
  };
  if (existsSync(join(root, 'cluster'))) readScope('cluster', undefined);
  if (existsSync(join(root, 'namespaces'))) {
    for (const ns of listDir(join(root, 'namespaces'))) {
      const rel = `namespaces/${ns}`;
      if (!isDir(join(root, rel))) throw new SnapshotError(rel, 'expected a namespace directory');
      checkName(rel, 'namespace', ns);
      readScope(rel, ns);
    }
  }
}

function readTags(rel: string, value: unknown): { url: string; listing: SourceListingData } {
  if (!isRecord(value)) throw new SnapshotError(rel, 'must be a mapping with url and tags (or error)');
  for (const k of Object.keys(value)) {
    if (!['url', 'tags', 'error', 'listedAt'].includes(k))
      throw new SnapshotError(rel, `unknown field "${k}"`);
  }
  if (typeof value.url !== 'string' || value.url === '') throw new SnapshotError(rel, 'url is required');
  const listedAt = value.listedAt;
  if (listedAt !== undefined && typeof listedAt !== 'string')
    throw new SnapshotError(rel, 'listedAt must be an RFC 3339 string');
  if (value.error !== undefined) {
    const e = value.error;
    if (!isRecord(e) || typeof e.reason !== 'string' || typeof e.message !== 'string')
      throw new SnapshotError(rel, 'error must be a mapping with reason and message');
    return {
      url: value.url,
      listing: {
        ok: false,
        reason: e.reason,
        message: e.message,
        ...(listedAt !== undefined ? { lastListedAt: listedAt } : {}),
      },
    };
  }
  if (!Array.isArray(value.tags)) throw new SnapshotError(rel, 'tags must be a list of {tag, commit}');
  const seen = new Set<string>();
  const tags: SourceTag[] = value.tags.map((t: unknown, i: number) => {
    if (!isRecord(t) || typeof t.tag !== 'string' || typeof t.commit !== 'string')
      throw new SnapshotError(rel, `tags[${i}] must be a mapping with tag and commit (strings)`);
    if (!RELEASE_IDENTITY.test(t.commit))
      throw new SnapshotError(
        rel,
        `tags[${i}] (${t.tag}): commit "${t.commit}" is not a 40-character sha1, an OCI manifest digest sha256:<hex> or github-assets:sha256:<hex>`,
      );
    if (seen.has(t.tag)) throw new SnapshotError(rel, `tags[${i}]: tag "${t.tag}" is listed twice`);
    seen.add(t.tag);
    return { tag: t.tag, commit: t.commit };
  });
  return { url: value.url, listing: { ok: true, tags, ...(listedAt !== undefined ? { listedAt } : {}) } };
}

function readSources(root: string, snapshot: Snapshot): void {
  const dir = join(root, 'sources');
  if (!existsSync(dir)) return;
  const urls = new Map<string, string>();
  for (const key of listDir(dir)) {
    const rel = `sources/${key}`;
    if (!isDir(join(dir, key))) throw new SnapshotError(rel, 'expected a <repo-key> directory');
    for (const e of listDir(join(dir, key))) {
      if (e !== 'tags.yaml' && e !== 'trees')
        throw new SnapshotError(`${rel}/${e}`, 'unexpected entry (expected tags.yaml and trees/)');
    }
    const tagsFile = `${rel}/tags.yaml`;
    if (!existsSync(join(root, tagsFile)))
      throw new SnapshotError(tagsFile, 'missing (every source needs its url and tag list)');
    let value: unknown;
    try {
      value = parseOneDocument(readFileSync(join(root, tagsFile), 'utf8'));
    } catch (err) {
      throw new SnapshotError(tagsFile, `invalid YAML: ${err instanceof Error ? err.message : String(err)}`);
    }
    const { url, listing } = readTags(tagsFile, value);
    const other = urls.get(url);
    if (other !== undefined)
      throw new SnapshotError(tagsFile, `url ${url} is also the url of sources/${other}`);
    urls.set(url, key);
    const trees = new Map<string, ReleaseTree>();
    const treesDir = join(dir, key, 'trees');
    if (existsSync(treesDir)) {
      for (const tag of listDir(treesDir)) {
        const tdir = join(treesDir, tag);
        if (!isDir(tdir))
          throw new SnapshotError(`${rel}/trees/${tag}`, 'expected a directory named after a tag');
        trees.set(
          tag,
          releaseTreeFromBytes(walkFiles(tdir).map((f) => [f, readFileSync(join(tdir, f))] as const)),
        );
      }
    }
    snapshot.sources.push({ key, url, listing, trees });
  }
}

/** A top-level YAML file of the snapshot as a mapping; undefined when absent or empty. */
function readTopLevelMapping(root: string, rel: string, what: string): Record<string, unknown> | undefined {
  if (!existsSync(join(root, rel))) return undefined;
  let value: unknown;
  try {
    value = parseOneDocument(readFileSync(join(root, rel), 'utf8'));
  } catch (err) {
    throw new SnapshotError(rel, `invalid YAML: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (value === null || value === undefined) return undefined;
  if (!isRecord(value)) throw new SnapshotError(rel, `must be ${what}`);
  return value;
}

function readSettings(root: string, snapshot: Snapshot): void {
  const rel = 'settings.yaml';
  const value = readTopLevelMapping(root, rel, 'a mapping');
  if (value === undefined) return;
  for (const k of Object.keys(value)) if (k !== 'fleet') throw new SnapshotError(rel, `unknown field "${k}"`);
  const fleet = value.fleet;
  if (fleet === undefined) return;
  if (!isRecord(fleet)) throw new SnapshotError(rel, 'fleet must be a mapping');
  const fields = ['url', 'branchPrefix', 'secretRef', 'interval', 'addonInterval'] as const;
  const removed = ['branch', 'pathPrefix', 'gitRepositoryName'];
  const parsed: Partial<FleetSettingsData> = {};
  for (const [k, v] of Object.entries(fleet)) {
    if (removed.includes(k))
      throw new SnapshotError(
        rel,
        `fleet.${k} was removed: every Cluster has its own branch <branchPrefix><namespace>/<cluster> and GitRepository; set fleet.branchPrefix instead`,
      );
    if (k === 'fluxShards') {
      if (typeof v !== 'number' || !Number.isInteger(v) || v < 0)
        throw new SnapshotError(rel, 'fleet.fluxShards must be a non-negative integer');
      parsed.fluxShards = v;
      continue;
    }
    if (!(fields as readonly string[]).includes(k))
      throw new SnapshotError(rel, `fleet: unknown field "${k}"`);
    if (typeof v !== 'string') throw new SnapshotError(rel, `fleet.${k} must be a string`);
    (parsed as Record<string, string>)[k] = v;
  }
  snapshot.settings = { fleet: { ...snapshot.settings.fleet, ...parsed } };
}

const TOP_LEVEL = [
  'cluster',
  'namespaces',
  'sources',
  'fleet',
  'fleet-tips.yaml',
  'settings.yaml',
  'preview.yaml',
];

function readPreview(root: string, snapshot: Snapshot): void {
  const rel = 'preview.yaml';
  const value = readTopLevelMapping(root, rel, 'a mapping (clusterStack, release, selector, wave)');
  if (value === undefined) return;
  const fields = ['clusterStack', 'release', 'selector', 'wave'];
  for (const [k, v] of Object.entries(value)) {
    if (!fields.includes(k))
      throw new SnapshotError(rel, `unknown field "${k}" (expected ${fields.join(', ')})`);
    if (typeof v !== 'string' || v === '') throw new SnapshotError(rel, `${k} must be a non-empty string`);
  }
  const [namespace, name, ...more] = String(value.clusterStack ?? '').split('/');
  if (!namespace || !name || more.length > 0 || !NAME.test(namespace) || !NAME.test(name))
    throw new SnapshotError(rel, 'clusterStack must be NAMESPACE/NAME');
  const str = (k: string) => (typeof value[k] === 'string' ? { [k]: value[k] as string } : {});
  snapshot.preview = { namespace, clusterStack: name, ...str('release'), ...str('selector'), ...str('wave') };
}

function readFleetTips(root: string, snapshot: Snapshot): void {
  const rel = 'fleet-tips.yaml';
  const value = readTopLevelMapping(root, rel, 'a mapping of branch to commit');
  if (value === undefined) return;
  for (const [branch, commit] of Object.entries(value)) {
    if (typeof commit !== 'string' || !COMMIT.test(commit))
      throw new SnapshotError(rel, `${branch}: "${String(commit)}" is not a 40-hex commit`);
    snapshot.fleetTips.set(branch, commit);
  }
}

/** Reads a snapshot directory; throws SnapshotError naming the offending file. */
export function readSnapshot(root: string): Snapshot {
  if (!existsSync(root) || !isDir(root)) throw new SnapshotError(root, 'not a directory');
  for (const e of listDir(root)) {
    if (!TOP_LEVEL.includes(e))
      throw new SnapshotError(e, `not part of the snapshot layout (expected ${TOP_LEVEL.join(', ')})`);
    if (!e.endsWith('.yaml') && !isDir(join(root, e))) throw new SnapshotError(e, 'expected a directory');
  }
  const snapshot = emptySnapshot();
  readObjects(root, snapshot);
  readSources(root, snapshot);
  readSettings(root, snapshot);
  readFleetTips(root, snapshot);
  readPreview(root, snapshot);
  const fleetDir = join(root, 'fleet');
  if (existsSync(fleetDir)) {
    for (const f of walkFiles(fleetDir)) snapshot.fleet.set(f, readFileSync(join(fleetDir, f), 'utf8'));
  }
  return snapshot;
}

/** A snapshot as files in the layout readSnapshot reads (for `stackflux diff --export`). */
export function snapshotFiles(
  snapshot: Snapshot,
  yaml: (v: unknown) => string,
): Map<string, string | Uint8Array> {
  const files = new Map<string, string | Uint8Array>();
  for (const [key, obj] of snapshot.objects) files.set(`${key}.yaml`, yaml(obj));
  for (const s of snapshot.sources) {
    const l = s.listing;
    files.set(
      `sources/${s.key}/tags.yaml`,
      yaml(
        l.ok
          ? { url: s.url, tags: l.tags, ...(l.listedAt !== undefined ? { listedAt: l.listedAt } : {}) }
          : { url: s.url, error: { reason: l.reason, message: l.message } },
      ),
    );
    for (const [tag, tree] of s.trees)
      for (const [p, content] of [...tree, ...binaryFilesOf(tree)])
        files.set(`sources/${s.key}/trees/${tag}/${p}`, content);
  }
  for (const [p, text] of snapshot.fleet) files.set(`fleet/${p}`, text);
  if (snapshot.fleetTips.size > 0)
    files.set(
      'fleet-tips.yaml',
      yaml(Object.fromEntries([...snapshot.fleetTips].sort(([a], [b]) => compareStrings(a, b)))),
    );
  files.set('settings.yaml', yaml({ fleet: snapshot.settings.fleet }));
  const p = snapshot.preview;
  if (p !== undefined) {
    const { namespace, clusterStack, ...rest } = p;
    files.set('preview.yaml', yaml({ clusterStack: `${namespace}/${clusterStack}`, ...rest }));
  }
  return new Map([...files].sort(([a], [b]) => compareStrings(a, b)));
}
