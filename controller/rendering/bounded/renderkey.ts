// The identity of a render (renderKey: equal keys render equally) and of a template for its
// cool-down (templateKeys), computed from a slim input: the addon's own files only.
import { createHash } from 'node:crypto';
import { ADDON_ROOT } from '../render.ts';
import { type AddonRenderInput, isCsctlAddonInput } from '../types.ts';
import type { TemplateKeys } from './types.ts';

/**
 * A release tree is read-only once fetched (chart dependencies make a new tree), yet every render
 * of it took the addon's files out of it and hashed them again (6,000 times in a preview of 1,000
 * Clusters): per tree object, each addon's files are kept, so its renders share one Map and one
 * digest. A tree whose size changed anyway is filtered anew rather than trusted.
 */
const ownFiles = new WeakMap<ReadonlyMap<string, unknown>, { size: number; byKey: Map<string, unknown> }>();

function filesOf<T>(
  tree: ReadonlyMap<string, T>,
  key: string,
  wanted: (path: string) => boolean,
): Map<string, T> {
  let memo = ownFiles.get(tree);
  if (memo === undefined || memo.size !== tree.size) {
    memo = { size: tree.size, byKey: new Map() };
    ownFiles.set(tree, memo);
  }
  let files = memo.byKey.get(key) as Map<string, T> | undefined;
  if (files === undefined) {
    files = new Map([...tree].filter(([path]) => wanted(path)));
    memo.byKey.set(key, files);
  }
  return files;
}

/** The input with only the addon's own files: all a render reads, and cheap to post to a worker. */
export function slimInput(input: AddonRenderInput): AddonRenderInput {
  if (isCsctlAddonInput(input)) {
    const wanted = (path: string) => path.startsWith(input.chartPath) || path === input.valuesTemplate;
    const key = `${input.chartPath}\0${input.valuesTemplate ?? ''}`;
    return {
      ...input,
      tree: filesOf(input.tree, key, wanted),
      binary: filesOf(input.binary, key, wanted),
    };
  }
  const prefix = `${ADDON_ROOT}/${input.addon}/`;
  const tree = filesOf(input.tree, prefix, (path) => path.startsWith(prefix));
  const clusterValues = input.clusterValues?.[input.addon];
  const centralValues = input.centralValues?.[input.addon];
  return {
    tree,
    stack: input.stack,
    addon: input.addon,
    cluster: input.cluster,
    ...(input.controlPlane !== undefined ? { controlPlane: input.controlPlane } : {}),
    ...(input.infraCluster !== undefined ? { infraCluster: input.infraCluster } : {}),
    ...(clusterValues !== undefined ? { clusterValues: { [input.addon]: clusterValues } } : {}),
    ...(centralValues !== undefined ? { centralValues: { [input.addon]: centralValues } } : {}),
  };
}

/** Digests of objects only read (a slim input's files, a release's stack.yaml), each computed once. */
const digests = new WeakMap<object, string>();

function digestOnce(o: unknown, compute: () => string): string {
  if (typeof o !== 'object' || o === null) return compute();
  let d = digests.get(o);
  if (d === undefined) {
    d = compute();
    digests.set(o, d);
  }
  return d;
}

/** A digest of a slim input's files, text and binary. */
function filesKey(slim: AddonRenderInput): string {
  const text = digestOnce(slim.tree, () => filesDigest(slim.tree, new Map()));
  if (!isCsctlAddonInput(slim)) return text;
  return `${text}:${digestOnce(slim.binary, () => filesDigest(new Map(), slim.binary))}`;
}

/** Identity of a render: equal keys render equally (renderAddon is pure). */
export function renderKey(slim: AddonRenderInput): string {
  if (isCsctlAddonInput(slim)) {
    return JSON.stringify([
      slim.format,
      slim.addon,
      slim.chartPath,
      slim.valuesTemplate ?? null,
      slim.kubernetesVersion,
      filesKey(slim),
      slim.cluster,
      slim.controlPlane ?? null,
      slim.infraCluster ?? null,
      slim.fixed ?? null,
    ]);
  }
  return JSON.stringify([
    slim.addon,
    digestOnce(slim.stack, () => createHash('sha256').update(JSON.stringify(slim.stack)).digest('hex')),
    filesKey(slim),
    slim.cluster,
    slim.controlPlane ?? null,
    slim.infraCluster ?? null,
    slim.clusterValues ?? null,
    slim.centralValues ?? null,
  ]);
}

/**
 * Identity of a template for its cool-down: the tenant, the addon, the addon's files and the values
 * it renders with. Not the Cluster object, which changes with every status update; with the values,
 * one Cluster's hostile per-cluster values cool down that Cluster's renders, not its neighbours'.
 */
export function templateKeys(namespace: string, slim: AddonRenderInput): TemplateKeys {
  // A csctl addon's values come from the Cluster itself: its name stands for them (the object
  // changes with every status update).
  const values = createHash('sha256')
    .update(
      JSON.stringify(
        isCsctlAddonInput(slim)
          ? clusterIdOf(slim.cluster)
          : [slim.clusterValues ?? null, slim.centralValues ?? null],
      ),
    )
    .digest('hex');
  const template = `${namespace}/${slim.addon}/${filesKey(slim)}`;
  return { template, withValues: `${template}/${values}` };
}

/** A Cluster's namespace and name. */
function clusterIdOf(cluster: Record<string, unknown>): unknown[] {
  const meta = (cluster.metadata ?? {}) as { namespace?: unknown; name?: unknown };
  return [meta.namespace ?? null, meta.name ?? null];
}

/** A digest of files by path and content, text and binary. */
function filesDigest(text: ReadonlyMap<string, string>, binary: ReadonlyMap<string, Uint8Array>): string {
  // Every part behind its length: no two sets of files hash as one stream (content may hold NUL).
  const files = createHash('sha256');
  const part = (bytes: Uint8Array) => {
    files.update(`${bytes.byteLength}:`);
    files.update(bytes);
  };
  for (const [path, content] of text) {
    part(Buffer.from(path));
    part(Buffer.from(content));
  }
  files.update('binary:');
  for (const [path, content] of binary) {
    part(Buffer.from(path));
    part(content);
  }
  return files.digest('hex');
}
