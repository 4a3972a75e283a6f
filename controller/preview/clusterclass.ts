// The ClusterClass change between two releases, shown once (it is the same for every Cluster):
// stackflux's own format applies cluster-class/ as its files are; a csctl release's cluster-class
// is a Helm chart, rendered by the same renderCsctlClusterClass the release controller uses.
import type { ReleaseTree } from '../api/release.ts';
import { readReleaseDescription } from '../releases/format.ts';
import { parseReleaseTag } from '../releases/tags.ts';
import { renderCsctlClusterClass, type SyncGoEngine } from '../rendering/clusterclass.ts';
import { DEFAULT_MAX_OUTPUT_BYTES, runGoEngineCall } from '../rendering/goengine/index.ts';
import { diffBranchObjects, type ObjectChange } from './objects.ts';

export interface ClassDiff {
  from: string;
  to: string;
  /** The objects that change; `from`'s names are read as `to`'s (see renamed). */
  objects: ObjectChange[];
  /** Why a side could not be read or rendered. */
  failure?: { release: string; reason: string; message: string };
}

const FOLDER = 'cluster-class';

type ClassFiles = { ok: true; files: Map<string, string> } | { ok: false; reason: string; message: string };

/** The cluster-class objects of a release as files `cluster-class/<file>`. */
export function clusterClassFiles(
  tag: string,
  tree: ReleaseTree | undefined,
  namespace: string,
  engine: SyncGoEngine,
): ClassFiles {
  if (tree === undefined)
    return {
      ok: false,
      reason: 'ReleaseNotFetched',
      message: `the files of release ${tag} were not fetched`,
    };
  const parsed = parseReleaseTag(tag);
  if (!parsed.ok) return { ok: false, reason: 'InvalidRelease', message: parsed.reason };
  const described = readReleaseDescription(tree, parsed.value);
  if (!described.ok) return { ok: false, reason: 'InvalidRelease', message: described.errors.join('; ') };
  const source = described.value.clusterClass;
  if (source.kind === 'helm-chart') {
    const rendered = renderCsctlClusterClass(engine, { tree, description: described.value, tag, namespace });
    if (!rendered.ok) return rendered;
    return { ok: true, files: new Map([...rendered.value.files].map(([f, c]) => [`${FOLDER}/${f}`, c])) };
  }
  const root = source.path.endsWith('/') ? source.path : `${source.path}/`;
  const files = new Map<string, string>();
  for (const [path, text] of tree)
    if (path.startsWith(root) && /\.ya?ml$/.test(path))
      files.set(`${FOLDER}/${path.slice(root.length)}`, text);
  return { ok: true, files };
}

/**
 * The earlier release's files with its names (tag, ClusterClass name) read as the candidate's:
 * every object of a release is named after it, so without this each would show as removed and
 * added; with it the diff shows what changes besides the name.
 */
function renamed(files: ReadonlyMap<string, string>, from: string, to: string): Map<string, string> {
  const a = parseReleaseTag(from);
  const b = parseReleaseTag(to);
  const pairs: [string, string][] = [[from, to]];
  if (a.ok && b.ok) pairs.push([a.value.clusterClassName, b.value.clusterClassName]);
  const rename = (text: string) => pairs.reduce((t, [x, y]) => t.split(x).join(y), text);
  return new Map([...files].map(([path, text]) => [rename(path), rename(text)]));
}

export function diffClusterClass(input: {
  from: string;
  to: string;
  fromTree: ReleaseTree | undefined;
  toTree: ReleaseTree | undefined;
  namespace: string;
  goEngine?: SyncGoEngine;
}): ClassDiff {
  const engine = input.goEngine ?? ((call) => runGoEngineCall(call, DEFAULT_MAX_OUTPUT_BYTES));
  const before = clusterClassFiles(input.from, input.fromTree, input.namespace, engine);
  const after = clusterClassFiles(input.to, input.toTree, input.namespace, engine);
  const base = { from: input.from, to: input.to };
  if (!before.ok)
    return {
      ...base,
      objects: [],
      failure: { release: input.from, reason: before.reason, message: before.message },
    };
  if (!after.ok)
    return {
      ...base,
      objects: [],
      failure: { release: input.to, reason: after.reason, message: after.message },
    };
  return { ...base, objects: diffBranchObjects(renamed(before.files, input.from, input.to), after.files) };
}
