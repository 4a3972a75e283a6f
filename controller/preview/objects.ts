// The objects of a fleet branch and their differences: a branch's files (`<addon>/<path>`) parsed
// into Kubernetes objects keyed by addon, apiVersion, kind, namespace and name, compared with
// another version of the branch. Secret data is masked before anything is shown: a masked value
// says only whether it changed, never what it is (a hash of a short secret could be guessed).
import type { BranchFiles } from '../gitops/branches.ts';
import { canonicalYaml, compareStrings, isRecord } from '../offline/yaml.ts';
import { parseObjects } from '../rendering/output.ts';
import type { RenderResult } from '../rendering/types.ts';

/** One object (or a file that holds no object, e.g. an empty kustomization.yaml) of one addon. */
export interface BranchObject {
  addon: string;
  /** `<apiVersion> <kind> <namespace>/<name>`, or `file <path>` for a file that is no object. */
  id: string;
  value: unknown;
}

export type ObjectChangeKind = 'added' | 'changed' | 'removed';

export interface ObjectChange {
  addon: string;
  id: string;
  change: ObjectChangeKind;
  /** The object before and after as canonical YAML, Secret values masked ('' when absent). */
  before: string;
  after: string;
  /** A changed HelmRelease: dotted paths of its values that differ. */
  values?: string[];
}

export const MASK = '***';
export const MASK_CHANGED = '*** (changed)';

/** Top-level folder of a branch path. */
export function addonOfPath(path: string): string {
  return path.split('/')[0] ?? path;
}

type Parsed = ReturnType<typeof parseObjects> | undefined;

/**
 * Files parsed, by text, shared by the diffs of one preview: the files an addon renders the same
 * for every Cluster (and the unchanged files of a changed addon, on both sides) are parsed once,
 * and a file the render just parsed is not parsed again (rememberRendered). Parsed objects are only
 * read, never changed. Emptied when it grows past MAX_PARSED.
 */
export type ParsedFiles = Map<string, Parsed>;
const MAX_PARSED = 10_000;

function remember(memo: ParsedFiles, text: string, objects: Parsed): void {
  if (memo.size >= MAX_PARSED) memo.clear();
  memo.set(text, objects);
}

function parseFile(path: string, text: string, memo: ParsedFiles): Parsed {
  // The path only names the file in a parse error, which the preview does not show.
  if (memo.has(text)) return memo.get(text);
  let objects: Parsed;
  try {
    objects = parseObjects(path, text);
  } catch {
    objects = undefined;
  }
  remember(memo, text, objects);
  return objects;
}

/**
 * Keeps the objects a native render parsed from each of its files (parseObjects of that text, as
 * parseFile would), so the side after the move is not parsed a second time.
 */
export function rememberRendered(result: RenderResult, memo: ParsedFiles): void {
  if (!result.ok || result.fileObjects === undefined) return;
  for (const [file, objects] of result.fileObjects) {
    const text = result.files.get(file);
    if (text !== undefined && !memo.has(text)) remember(memo, text, objects);
  }
}

/** Every object of a branch, keyed `<addon>\t<id>` (a later duplicate wins, as kubectl applies it). */
export function branchObjects(files: BranchFiles, memo: ParsedFiles = new Map()): Map<string, BranchObject> {
  const out = new Map<string, BranchObject>();
  for (const [path, text] of [...files].sort(([a], [b]) => compareStrings(a, b))) {
    const addon = addonOfPath(path);
    const objects = parseFile(path, text, memo);
    if (objects === undefined || objects.length === 0) {
      const id = `file ${path}`;
      out.set(`${addon}\t${id}`, { addon, id, value: text });
      continue;
    }
    for (const o of objects) {
      const ns = o.metadata.namespace ?? '';
      const id = `${o.apiVersion} ${o.kind} ${ns === '' ? '' : `${ns}/`}${o.metadata.name}`;
      out.set(`${addon}\t${id}`, { addon, id, value: o });
    }
  }
  return out;
}

function isSecret(v: unknown): v is Record<string, unknown> {
  return isRecord(v) && v.kind === 'Secret' && typeof v.apiVersion === 'string' && v.apiVersion === 'v1';
}

/**
 * A Secret's data/stringData values replaced by MASK; with `markChanged` (the side after the
 * change), MASK_CHANGED where `other` holds another value, so a diff shows which key changed.
 */
export function maskSecret(value: unknown, other: unknown, markChanged = false): unknown {
  if (!isSecret(value)) return value;
  const masked: Record<string, unknown> = { ...value };
  for (const field of ['data', 'stringData']) {
    const mine = value[field];
    if (!isRecord(mine)) continue;
    const theirs = isSecret(other) && isRecord(other[field]) ? other[field] : {};
    masked[field] = Object.fromEntries(
      Object.entries(mine).map(([k, v]) => [
        k,
        markChanged && theirs[k] !== undefined && theirs[k] !== v ? MASK_CHANGED : MASK,
      ]),
    );
  }
  return masked;
}

function shown(value: unknown, other: unknown, after: boolean, canonical = canonicalYaml): string {
  if (value === undefined) return '';
  if (typeof value === 'string') return value;
  return canonical(maskSecret(value, other, after));
}

/** canonicalYaml of each object once (a changed object is compared, then shown). */
function canonicalOnce(): (v: unknown) => string {
  const seen = new Map<unknown, string>();
  return (v) => {
    if (!isRecord(v)) return canonicalYaml(v);
    let text = seen.get(v);
    if (text === undefined) {
      text = canonicalYaml(v);
      seen.set(v, text);
    }
    return text;
  };
}

/**
 * Whether two parsed objects are the same object. Equal JSON is equal content (the cheap test that
 * settles most objects of a changed addon); otherwise key order may still differ, which canonical
 * YAML (keys sorted) does not see.
 */
function sameValue(a: unknown, b: unknown, canonical = canonicalYaml): boolean {
  return JSON.stringify(a) === JSON.stringify(b) || canonical(a) === canonical(b);
}

/** Addons whose files are the same, path for path and byte for byte, in both versions of a branch. */
function sameAddons(before: BranchFiles, after: BranchFiles): Set<string> {
  const differ = new Set<string>();
  for (const [path, text] of before) if (after.get(path) !== text) differ.add(addonOfPath(path));
  for (const path of after.keys()) if (!before.has(path)) differ.add(addonOfPath(path));
  return new Set([...addonsOf(before)].filter((a) => !differ.has(a)));
}

function withoutAddons(files: BranchFiles, addons: ReadonlySet<string>): BranchFiles {
  return new Map([...files].filter(([path]) => !addons.has(addonOfPath(path))));
}

/** The objects added, changed and removed between two versions of a branch, sorted. */
export function diffBranchObjects(
  before: BranchFiles,
  after: BranchFiles,
  parsed: ParsedFiles = new Map(),
): ObjectChange[] {
  // Objects are keyed by addon: an addon whose files did not change has no changed object, and
  // its files need no parsing (most of a branch, when a release changes one addon).
  const same = sameAddons(before, after);
  const a = branchObjects(withoutAddons(before, same), parsed);
  const b = branchObjects(withoutAddons(after, same), parsed);
  const canonical = canonicalOnce();
  const out: ObjectChange[] = [];
  for (const key of [...new Set([...a.keys(), ...b.keys()])].sort(compareStrings)) {
    const was = a.get(key);
    const now = b.get(key);
    const ref = (now ?? was) as BranchObject;
    if (was !== undefined && now !== undefined && sameValue(was.value, now.value, canonical)) continue;
    const values =
      was !== undefined && now !== undefined ? helmValuesChanged(was.value, now.value) : undefined;
    out.push({
      addon: ref.addon,
      id: ref.id,
      change: was === undefined ? 'added' : now === undefined ? 'removed' : 'changed',
      before: shown(was?.value, now?.value, false, canonical),
      after: shown(now?.value, was?.value, true, canonical),
      ...(values !== undefined ? { values } : {}),
    });
  }
  return out;
}

/** Addon folders of a branch. */
export function addonsOf(files: BranchFiles): Set<string> {
  return new Set([...files.keys()].map(addonOfPath));
}

/** Dotted paths of the leaves that differ between two values (arrays compared whole). */
export function changedPaths(a: unknown, b: unknown, prefix = ''): string[] {
  if (isRecord(a) && isRecord(b)) {
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort(compareStrings);
    return keys.flatMap((k) => changedPaths(a[k], b[k], prefix === '' ? k : `${prefix}.${k}`));
  }
  if (a === b || (a !== undefined && b !== undefined && canonicalYaml(a) === canonicalYaml(b))) return [];
  return [prefix === '' ? '(all)' : prefix];
}

function helmValues(v: unknown): unknown {
  return isRecord(v) && v.kind === 'HelmRelease' && isRecord(v.spec) ? (v.spec.values ?? {}) : undefined;
}

/** The values paths that differ between two versions of a HelmRelease (undefined: not one). */
function helmValuesChanged(a: unknown, b: unknown): string[] | undefined {
  const before = helmValues(a);
  const after = helmValues(b);
  if (before === undefined || after === undefined) return undefined;
  return changedPaths(before, after);
}
