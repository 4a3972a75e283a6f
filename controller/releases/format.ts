// The registry of release formats, and the one way from a release tree to everything after it: read
// a release (its files at a tag) into a stack description, whatever format it is in. Reconcilers,
// fleet, rollout and GC see only the description (and, per format, the renderers), never the
// format's files. The interface and the shared types are in controller/releases/description.ts,
// which imports no format; each format implements it without knowing the other; only this module
// knows them all, and it picks the one a tree is in.
//
// Formats, told apart by CONTENT (not by file name alone):
// - native (controller/releases/native.ts): stackflux's stack.yaml (apiVersion stackflux.io/…,
//   kind Stack) + a plain YAML cluster-class/ + Handlebars values.
// - csctl (controller/releases/csctl/): the cluster-stack-operator's layout, csctl.yaml + a Helm
//   chart as cluster-class/ + Go-template values. SCS's next layout puts a stack.yaml of ITS OWN
//   schema beside csctl.yaml, so a stack.yaml that is not stackflux's does not make a tree native.
import type { ReleaseTree, StackManifest } from '../api/release.ts';
import { csctlFormat } from './csctl/index.ts';
import type { ReleaseFormat, StackDescription, ValidationResult } from './description.ts';
import { nativeFormat } from './native.ts';
import { parseReleaseTag, type ReleaseTag } from './tags.ts';

// What callers imported from here before the interface moved down to description.ts.
export type {
  AddonStage,
  AddonValuesRenderer,
  ClusterClassRenderer,
  ClusterClassSource,
  ConditionObject,
  CsctlMetadata,
  DescribedAddon,
  FormatClaim,
  ReleaseFormat,
  ReleaseFormatName,
  StackDescription,
  WaitForCondition,
} from './description.ts';
export { ADDON_STAGES } from './description.ts';

/**
 * Native first: a stackflux stack.yaml wins even beside a csctl.yaml (both certain), and so does
 * any stack.yaml beside a packaged release's metadata.yaml (both possible).
 */
export const RELEASE_FORMATS: readonly ReleaseFormat[] = [nativeFormat, csctlFormat];

/**
 * The format of a tree, or undefined when it is in none: the first in RELEASE_FORMATS certain of
 * it, else the first for which it is possible. So a tree without a csctl.yaml is read as native
 * whenever it has a stack.yaml, and one with a csctl.yaml is csctl unless its stack.yaml is stackflux's.
 */
export function releaseFormatOf(tree: ReleaseTree): ReleaseFormat | undefined {
  let possible: ReleaseFormat | undefined;
  for (const format of RELEASE_FORMATS) {
    const claim = format.claims(tree);
    if (claim === 'certain') return format;
    if (claim === 'possible') possible ??= format;
  }
  return possible;
}

/**
 * The tree at `tag` as its format's tool releases it: a csctl stack folder with the placeholders
 * csctl create substitutes (csctl/placeholders.ts); the same tree object when the tool changes
 * nothing. Every reader of a release tree (the release sources, the offline snapshot) takes it from
 * here, so the controller, preview and offline render all see what csctl would have released.
 */
export function releasedTree(tree: ReleaseTree, tag: string): ReleaseTree {
  const parsed = parseReleaseTag(tag);
  // A tag outside the grammar: the release is refused for its tag, whatever its files say.
  if (!parsed.ok) return tree;
  return releaseFormatOf(tree)?.asReleased?.(tree, parsed.value) ?? tree;
}

/**
 * Reads a release in whichever format it is. A tree in no format gets the native format's errors
 * (what stackflux's own layout expects) plus what a cluster-stack-operator stack would need.
 */
export function readReleaseDescription(
  tree: ReleaseTree,
  tag: ReleaseTag,
): ValidationResult<StackDescription> {
  // Every Cluster's reconcile reads its release: a tree (read-only once fetched) is read once per
  // tag (a preview of 1,000 Clusters parsed stack.yaml 1,000 times). Callers share the one read,
  // frozen, so none can change it for the next (a copy per call cost a preview 0.35 s per 1,000).
  let byTag = descriptions.get(tree);
  if (byTag === undefined) {
    byTag = new Map();
    descriptions.set(tree, byTag);
  }
  let read = byTag.get(tag.tag);
  if (read === undefined) {
    read = deepFreeze(describe(tree, tag));
    byTag.set(tag.tag, read);
  }
  return read;
}

/** Freezes a plain-data value and everything it holds. */
function deepFreeze<T>(value: T): T {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return value;
  Object.freeze(value);
  for (const v of Object.values(value)) deepFreeze(v);
  return value;
}

const descriptions = new WeakMap<ReleaseTree, Map<string, ValidationResult<StackDescription>>>();

function describe(tree: ReleaseTree, tag: ReleaseTag): ValidationResult<StackDescription> {
  const format = releaseFormatOf(tree);
  if (format !== undefined) return format.read(tree, tag);
  const native = nativeFormat.read(tree, tag);
  if (native.ok) return native;
  return {
    ok: false,
    errors: [
      ...native.errors,
      "expected stackflux's stack.yaml (apiVersion: stackflux.io/v1alpha1, kind: Stack) or, for a cluster-stack-operator stack, csctl.yaml at the root of the stack path",
    ],
  };
}

/**
 * The stack.yaml of a release for the renderers that take one (the native path). A release in
 * another format is reported, not guessed at, until its renderers are wired through this seam.
 */
export function nativeManifestOf(read: ValidationResult<StackDescription>): ValidationResult<StackManifest> {
  if (!read.ok) return read;
  if (read.value.manifest !== undefined) return { ok: true, value: read.value.manifest };
  return {
    ok: false,
    errors: [
      `the release is in the ${read.value.format} format (${read.value.format === 'csctl' ? 'csctl.yaml, a Helm chart as cluster-class/, Go-template values' : read.value.format}), which this version of stackflux reads but does not render yet`,
    ],
  };
}
