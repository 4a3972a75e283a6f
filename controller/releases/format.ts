// The one interface between a release tree and everything after it: read a release (its files at
// a tag) into a stack description, whatever format it is in. Reconcilers, fleet, rollout and GC
// see only the description (and, per format, the renderers), never the format's files.
//
// Formats, told apart by CONTENT (not by file name alone):
// - native (controller/releases/native.ts): stackflux's stack.yaml (apiVersion stackflux.io/…,
//   kind Stack) + a plain YAML cluster-class/ + Handlebars values.
// - csctl (controller/releases/csctl/): the cluster-stack-operator's layout, csctl.yaml + a Helm
//   chart as cluster-class/ + Go-template values. SCS's next layout puts a stack.yaml of ITS OWN
//   schema beside csctl.yaml, so a stack.yaml that is not stackflux's does not make a tree native.
import type { ReleaseTree, StackManifest } from '../api/release.ts';
import { csctlFormat } from './csctl/index.ts';
import type { ReleaseFormatName, StackDescription } from './description.ts';
import { nativeFormat } from './native.ts';
import type { ValidationResult } from './stack.ts';
import type { ReleaseTag } from './tags.ts';

export type {
  AddonStage,
  ClusterClassSource,
  ConditionObject,
  CsctlMetadata,
  DescribedAddon,
  ReleaseFormatName,
  StackDescription,
  WaitForCondition,
} from './description.ts';
export { ADDON_STAGES } from './description.ts';

/** One release format: whether a tree is in it (by content), and how to read it. */
export interface ReleaseFormat {
  name: ReleaseFormatName;
  /** True when the tree is in this format; checked in RELEASE_FORMATS order. */
  claims(tree: ReleaseTree): boolean;
  /** Reads and validates the release against its tag; all errors at once, each naming file and field. */
  read(tree: ReleaseTree, tag: ReleaseTag): ValidationResult<StackDescription>;
}

/** Native first: a stackflux stack.yaml wins even beside a csctl.yaml. */
export const RELEASE_FORMATS: readonly ReleaseFormat[] = [nativeFormat, csctlFormat];

/** The format of a tree, or undefined when it is in none. */
export function releaseFormatOf(tree: ReleaseTree): ReleaseFormat | undefined {
  return RELEASE_FORMATS.find((f) => f.claims(tree));
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

// Renderer seams, wired by the rendering layer (the Go engine: controller/rendering/goengine).

/** Renders a release's cluster-class/ for the management cluster into the YAML of its objects. */
export type ClusterClassRenderer = (input: {
  tree: ReleaseTree;
  description: StackDescription;
  /** Helm release name: the first four dash-parts of the tag, e.g. docker-scs-1-30 (csctl). */
  releaseName: string;
  /** The ClusterStack's namespace (Helm's .Release.Namespace). */
  namespace: string;
}) => Promise<ValidationResult<string>>;

/**
 * Renders the values of one addon step for one Cluster: the addon's valuesTemplate over the live
 * objects (undefined when the Cluster does not reference one), giving the values YAML.
 */
export type AddonValuesRenderer = (input: {
  template: string;
  cluster: Record<string, unknown>;
  controlPlane?: Record<string, unknown>;
  infraCluster?: Record<string, unknown>;
}) => Promise<ValidationResult<string>>;
