// The preview of a release (pure): what moving a ClusterStack's Clusters to a candidate release
// would change on each Cluster's fleet branch, before anything moves. Each Cluster is moved in
// memory as the rollout moves it (ClusterClass and Kubernetes version of the candidate) and handed
// to the SAME reconcileClusterAddon the controller runs, with its live values and refs and the
// state of its branch; the branch content that reconcile would write is diffed against the files
// the branch holds now. No second renderer: a render failure here is the failure the ClusterAddon
// would report, with its reason. The ClusterClass change is diffed once per release moved from.
//
// Inputs are objects the release controller has (ClusterStack, its releases with their trees, the
// Clusters, their ClusterAddons and branches), so a status summary can call this as the CLI does.
import type { ClusterAddon } from '../api/clusteraddon.ts';
import type { ClusterStack } from '../api/clusterstack.ts';
import type { ClusterStackRelease } from '../api/clusterstackrelease.ts';
import { API_VERSION } from '../api/meta.ts';
import type { ReleaseTree } from '../api/release.ts';
import { type LabelSelector, PREPARING_PHASE, ROLLOUT_ANNOTATIONS } from '../api/rollout.ts';
import type { BranchFiles, BranchState } from '../gitops/branches.ts';
import { branchTreeIds } from '../gitops/objects.ts';
import { unifiedDiff } from '../offline/unified.ts';
import { compareStrings, isRecord } from '../offline/yaml.ts';
import { clusterForAddons, sameClusterStack } from '../reconcilers/addonrelease.ts';
import {
  FINALIZER_FLEET_CLEANUP,
  type FleetSettings,
  Reason,
  reconcileClusterAddon,
} from '../reconcilers/clusteraddon.ts';
import { clusterUse, desiredRelease } from '../reconcilers/clusterstack.ts';
import { selects } from '../reconcilers/labelselector.ts';
import { ProviderReason } from '../reconcilers/provider.ts';
import { waveOf } from '../reconcilers/rollout.ts';
import type { NamespaceLabels } from '../reconcilers/sharing.ts';
import type { FluxTemplates } from '../releases/flux.ts';
import { readReleaseDescription } from '../releases/format.ts';
import { parseReleaseTag, type ReleaseTag, tagForClusterClassName } from '../releases/tags.ts';
import type { TenancyPolicy } from '../releases/tenancy.ts';
import type { SyncGoEngine } from '../rendering/clusterclass.ts';
import { type AddonRenderer, type PlainObject, renderAnyAddon } from '../rendering/index.ts';
import { type ClassDiff, diffClusterClass } from './clusterclass.ts';
import {
  addonsOf,
  diffBranchObjects,
  type ObjectChange,
  type ParsedFiles,
  rememberRendered,
} from './objects.ts';

/** One Cluster as the controller sees it. */
export interface PreviewClusterInput {
  /** The CAPI Cluster as served (v1beta2 or v1beta1). */
  cluster: Record<string, unknown>;
  controlPlane?: PlainObject;
  infraCluster?: PlainObject;
  clusterAddon?: ClusterAddon;
  /** Labels of the Cluster's Namespace when its ClusterClass is in another namespace. */
  namespaceLabels?: NamespaceLabels;
  namespaceFluxShard?: string;
  /** The files on its fleet branch now (`<addon>/<path>`); empty: no branch. */
  branch: BranchFiles;
}

/** A release of the ClusterStack: its object (if it exists yet) and its tree (if fetched). */
export interface PreviewRelease {
  release?: ClusterStackRelease;
  /** The files at the tag, relative to the stack path. */
  tree?: ReleaseTree;
}

export interface PreviewInput {
  clusterStack: ClusterStack;
  /** Releases by tag: the candidate and the ones the Clusters are on (for the ClusterClass diff). */
  releases: ReadonlyMap<string, PreviewRelease>;
  /** The candidate release tag. */
  candidate: string;
  clusters: readonly PreviewClusterInput[];
  /** Only Clusters these labels select. */
  selector?: LabelSelector;
  /** Only Clusters of this rollout wave (a name of spec.rollout.waves, or "rest"). */
  wave?: string;
  fleetSettings: FleetSettings;
  templates: FluxTemplates;
  tenancy?: TenancyPolicy;
  now: Date;
  /** Renders one addon (default: in this process; the CLI passes the bounded render pool). */
  render?: AddonRenderer;
  /** Answers Go engine calls of a csctl cluster-class (default: in this process). */
  goEngine?: SyncGoEngine;
  /** The installation's render seed key (the impact controller: the live controller's). */
  renderSeedKey?: string;
}

export interface ValuesChange {
  addon: string;
  /** Dotted paths of the HelmRelease values that differ. */
  paths: string[];
}

export interface ClusterPreview {
  namespace: string;
  name: string;
  /** The release it is on now. */
  from: string;
  /** The rollout wave it would move in. */
  wave: string;
  outcome: 'changed' | 'unchanged' | 'failed';
  /** Why it would not render (the ClusterAddon's reason and message). */
  failure?: { reason: string; message: string };
  addonsAdded: string[];
  addonsRemoved: string[];
  objects: ObjectChange[];
  counts: { added: number; changed: number; removed: number };
  values: ValuesChange[];
  /** Index into PreviewResult.groups. */
  group: number;
  /** Digest of the branch files rendered (reconcilers/approvedrender.ts renderDigest); absent: failed. */
  render?: string;
}

/** Clusters whose change is identical (same objects, same diffs, same failure). */
export interface PreviewGroup {
  /** `<namespace>/<name>`, sorted. */
  clusters: string[];
}

export interface PreviewResult {
  clusterStack: { namespace: string; name: string };
  release: string;
  clusters: ClusterPreview[];
  groups: PreviewGroup[];
  /** The ClusterClass change, once per release the Clusters move from. */
  clusterClass: ClassDiff[];
  /** Clusters that would fail to render. */
  failed: number;
}

export class PreviewError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PreviewError';
  }
}

/** Reasons of a ClusterAddon that did not render the release (its branch would stay as it is). */
const NOT_RENDERED = new Set<string>([
  Reason.Creating,
  Reason.ReleaseNotFound,
  Reason.ReleaseNotFetched,
  Reason.ClusterStackNotFound,
  Reason.InvalidRelease,
  Reason.WaitingForRefs,
  Reason.RefsNotReadable,
  Reason.RenderFailed,
  Reason.RenderCoolingDown,
  Reason.ValuesInvalid,
  Reason.NotAStackfluxClass,
  Reason.ClusterClassNotShared,
  Reason.NamespaceNotKnown,
  ProviderReason.WaitingForProvider,
]);

function metadataOf(o: Record<string, unknown>): Record<string, unknown> {
  return isRecord(o.metadata) ? o.metadata : {};
}

function stringMap(v: unknown): Record<string, string> {
  if (!isRecord(v)) return {};
  return Object.fromEntries(Object.entries(v).filter((e): e is [string, string] => typeof e[1] === 'string'));
}

/** The Cluster after the rollout moved it: the candidate's class and version, no rollout progress. */
function movedCluster(cluster: Record<string, unknown>, tag: ReleaseTag, kubernetesVersion: string) {
  const meta = metadataOf(cluster);
  const annotations = Object.fromEntries(
    Object.entries(stringMap(meta.annotations)).filter(
      ([k, v]) => !(k === ROLLOUT_ANNOTATIONS.phase && v === PREPARING_PHASE),
    ),
  );
  const plain = { ...cluster, metadata: { ...meta, annotations } };
  return clusterForAddons(plain, tag, kubernetesVersion);
}

/** The candidate as the ClusterAddon reads it: provider readiness is no question of rendering. */
function candidateRelease(input: PreviewInput, tag: ReleaseTag): ClusterStackRelease {
  const have = input.releases.get(tag.tag)?.release;
  const release = have ?? desiredRelease(input.clusterStack, tag);
  const { providerRef: _p, ...spec } = release.spec;
  const status = release.status !== undefined ? { ...release.status, conditions: [] } : undefined;
  return { ...release, spec, ...(status !== undefined ? { status } : {}) };
}

/** The ClusterAddon as the reconcile requires it to exist (uid, finalizer), status kept for messages. */
function existingAddon(namespace: string, name: string, have: ClusterAddon | undefined): ClusterAddon {
  const base: ClusterAddon = have ?? {
    apiVersion: API_VERSION,
    kind: 'ClusterAddon',
    metadata: { name, namespace },
    spec: {} as ClusterAddon['spec'],
  };
  const finalizers = [...new Set([...(base.metadata.finalizers ?? []), FINALIZER_FLEET_CLEANUP])];
  return { ...base, metadata: { ...base.metadata, uid: base.metadata.uid ?? 'preview', finalizers } };
}

/** Tree ids of the branches, hashed once (with bounded renders a preview runs once per round of renders). */
const branchStates = new WeakMap<BranchFiles, BranchState | undefined>();

function branchStateOf(files: BranchFiles): BranchState | undefined {
  if (files.size === 0) return undefined;
  if (branchStates.has(files)) return branchStates.get(files);
  const ids = branchTreeIds(files);
  const state = { commit: 'preview', tree: ids.tree, addons: ids.addons };
  branchStates.set(files, state);
  return state;
}

function readyOf(conditions: readonly { type: string; reason?: string; message?: string }[] | undefined) {
  return conditions?.find((c) => c.type === 'Ready');
}

interface Rendered {
  files?: BranchFiles;
  failure?: { reason: string; message: string };
  digest?: string;
}

/** The branch after the move, through the controller's own reconcile. */
function renderMoved(
  input: PreviewInput,
  c: PreviewClusterInput,
  moved: Record<string, unknown>,
  release: ClusterStackRelease,
  render: AddonRenderer,
): Rendered {
  const meta = metadataOf(c.cluster);
  const namespace = String(meta.namespace ?? '');
  const name = String(meta.name ?? '');
  const tree = input.releases.get(release.metadata.name)?.tree;
  const result = reconcileClusterAddon({
    cluster: moved,
    namespace,
    name,
    ...(c.controlPlane !== undefined ? { controlPlane: c.controlPlane } : {}),
    ...(c.infraCluster !== undefined ? { infraCluster: c.infraCluster } : {}),
    clusterAddon: existingAddon(namespace, name, c.clusterAddon),
    release,
    ...(tree !== undefined ? { tree } : {}),
    ...(release.status?.commit !== undefined ? { treeCommit: release.status.commit } : {}),
    clusterStack: input.clusterStack,
    ...(c.namespaceLabels !== undefined ? { namespaceLabels: c.namespaceLabels } : {}),
    ...(c.namespaceFluxShard !== undefined ? { namespaceFluxShard: c.namespaceFluxShard } : {}),
    kustomizations: [],
    helmReleases: [],
    branch: branchStateOf(c.branch),
    fleetSettings: input.fleetSettings,
    ...(input.tenancy !== undefined ? { tenancy: input.tenancy } : {}),
    templates: input.templates,
    now: input.now,
    ...(input.renderSeedKey !== undefined ? { renderSeedKey: input.renderSeedKey } : {}),
    render,
  });
  if (result === undefined)
    return { failure: { reason: Reason.NotAStackfluxClass, message: 'the Cluster is not rendered' } };
  const digest = result.renderDigest !== undefined ? { digest: result.renderDigest } : {};
  if (result.branch !== undefined) return { files: result.branch.files ?? new Map(), ...digest };
  const ready = readyOf(result.status.conditions);
  if (ready?.reason !== undefined && NOT_RENDERED.has(ready.reason))
    return { failure: { reason: ready.reason, message: ready.message ?? '' } };
  return { files: c.branch, ...digest };
}

function valuesChanges(objects: readonly ObjectChange[]): ValuesChange[] {
  return objects.flatMap((o) =>
    o.values !== undefined && o.values.length > 0 ? [{ addon: o.addon, paths: o.values }] : [],
  );
}

/** Changed lines only: a Cluster's name in an unchanged line of a changed object is no difference. */
function changedLines(o: ObjectChange): string {
  return unifiedDiff('', '', o.before, o.after, 0)
    .split('\n')
    .filter((l) => (l.startsWith('+') || l.startsWith('-')) && !l.startsWith('+++') && !l.startsWith('---'))
    .join('\n');
}

/**
 * What makes two Clusters' changes the same: the outcome and failure, the addons added and removed,
 * and per object an added object's content, a changed object's changed lines, a removed object's id.
 */
function changeSignature(p: Omit<ClusterPreview, 'group'>): string {
  // Object names made from the Cluster's name (a HelmRelease <cluster>.<addon>) name the same
  // object; the name counts only as a whole DNS label (Cluster "a" is not the a of "ConfigMap").
  const name = new RegExp(`(?<![a-z0-9-])${p.name.replaceAll('.', '\\.')}(?![a-z0-9-])`, 'g');
  const id = (o: ObjectChange) => o.id.replace(name, '\u0000');
  return JSON.stringify([
    p.from,
    p.outcome,
    p.failure ?? null,
    p.addonsAdded,
    p.addonsRemoved,
    p.values,
    p.objects.map((o) => [
      o.addon,
      id(o),
      o.change,
      o.change === 'added' ? o.after : o.change === 'changed' ? changedLines(o) : '',
    ]),
  ]);
}

/**
 * The release a Cluster moves from: its class's, or, for a Cluster the rollout moved to the
 * candidate whose branch still holds another release (in flight, or held because its live render
 * differed from the impact's: reconcilers/approvedrender.ts), the release on its branch. The impact
 * computed again must render that Cluster too.
 */
function movedFrom(
  c: PreviewClusterInput,
  byClass: ReleaseTag | undefined,
  candidate: ReleaseTag,
): ReleaseTag | undefined {
  if (byClass === undefined || byClass.tag !== candidate.tag) return byClass;
  const onBranch = c.clusterAddon?.status?.release;
  if (onBranch === undefined || onBranch === candidate.tag) return byClass;
  const parsed = parseReleaseTag(onBranch);
  return parsed.ok ? parsed.value : byClass;
}

/** Clusters of the ClusterStack (its namespace's classes of its releases), not being deleted. */
function stackClusters(input: PreviewInput, candidate: ReleaseTag) {
  const ns = input.clusterStack.metadata.namespace ?? 'default';
  return input.clusters.flatMap((c) => {
    const meta = metadataOf(c.cluster);
    if (meta.deletionTimestamp !== undefined) return [];
    const use = clusterUse(c.cluster);
    if (use === undefined) return [];
    if ((use.classNamespace ?? String(meta.namespace ?? '')) !== ns) return [];
    const from = movedFrom(c, tagForClusterClassName(use.className), candidate);
    if (from === undefined || !sameClusterStack(from, candidate) || from.tag === candidate.tag) return [];
    const labels = stringMap(meta.labels);
    if (!selects(input.selector, labels)) return [];
    const wave = waveOf(input.clusterStack.spec.rollout, labels);
    if (input.wave !== undefined && input.wave !== wave) return [];
    return [{ input: c, from: from.tag, wave, namespace: String(meta.namespace ?? ''), name: use.name }];
  });
}

/** What moving the ClusterStack's Clusters to `input.candidate` changes, per Cluster and once for the class. */
export function previewRelease(input: PreviewInput): PreviewResult {
  const parsed = parseReleaseTag(input.candidate);
  if (!parsed.ok) throw new PreviewError(`release ${input.candidate}: ${parsed.reason}`);
  const candidate = parsed.value;
  const cs = input.clusterStack;
  if (
    cs.spec.provider !== candidate.provider ||
    cs.spec.name !== candidate.name ||
    cs.spec.kubernetesVersion !== candidate.kubernetesVersion
  )
    throw new PreviewError(
      `release ${candidate.tag} is not a release of ClusterStack ${cs.metadata.name} (${cs.spec.provider}/${cs.spec.name} ${cs.spec.kubernetesVersion})`,
    );
  const release = candidateRelease(input, candidate);
  const tree = input.releases.get(candidate.tag)?.tree;
  const described = tree !== undefined ? readReleaseDescription(tree, candidate) : undefined;
  const kubernetesVersion =
    described?.ok === true ? described.value.kubernetesVersion : candidate.kubernetesVersion;

  const clusters: ClusterPreview[] = [];
  const bySignature = new Map<string, number>();
  const groups: PreviewGroup[] = [];
  const selected = stackClusters(input, candidate).sort(
    (a, b) => compareStrings(a.namespace, b.namespace) || compareStrings(a.name, b.name),
  );
  const parsedFiles: ParsedFiles = new Map();
  const renderAddon = input.render ?? ((r) => renderAnyAddon(r));
  const render: AddonRenderer = (r) => {
    const result = renderAddon(r);
    rememberRendered(result, parsedFiles);
    return result;
  };
  for (const s of selected) {
    const rendered = renderMoved(
      input,
      s.input,
      movedCluster(s.input.cluster, candidate, kubernetesVersion),
      release,
      render,
    );
    const after = rendered.files ?? s.input.branch;
    const objects =
      rendered.failure === undefined ? diffBranchObjects(s.input.branch, after, parsedFiles) : [];
    const before = addonsOf(s.input.branch);
    const now = addonsOf(after);
    const preview: Omit<ClusterPreview, 'group'> = {
      namespace: s.namespace,
      name: s.name,
      from: s.from,
      wave: s.wave,
      outcome: rendered.failure !== undefined ? 'failed' : objects.length > 0 ? 'changed' : 'unchanged',
      ...(rendered.failure !== undefined ? { failure: rendered.failure } : {}),
      addonsAdded: [...now].filter((a) => !before.has(a)).sort(compareStrings),
      addonsRemoved: [...before].filter((a) => !now.has(a)).sort(compareStrings),
      objects,
      counts: {
        added: objects.filter((o) => o.change === 'added').length,
        changed: objects.filter((o) => o.change === 'changed').length,
        removed: objects.filter((o) => o.change === 'removed').length,
      },
      values: valuesChanges(objects),
    };
    const signature = changeSignature(preview);
    if (rendered.failure === undefined && rendered.digest !== undefined) preview.render = rendered.digest;
    let group = bySignature.get(signature);
    if (group === undefined) {
      group = groups.length;
      bySignature.set(signature, group);
      groups.push({ clusters: [] });
    }
    groups[group]?.clusters.push(`${s.namespace}/${s.name}`);
    clusters.push({ ...preview, group });
  }

  const froms = [...new Set(selected.map((s) => s.from))].sort(compareStrings);
  const clusterClass = froms.map((from) =>
    diffClusterClass({
      from,
      to: candidate.tag,
      fromTree: input.releases.get(from)?.tree,
      toTree: tree,
      namespace: cs.metadata.namespace ?? 'default',
      ...(input.goEngine !== undefined ? { goEngine: input.goEngine } : {}),
    }),
  );
  return {
    clusterStack: { namespace: cs.metadata.namespace ?? 'default', name: cs.metadata.name },
    release: candidate.tag,
    clusters,
    groups,
    clusterClass,
    failed: clusters.filter((c) => c.outcome === 'failed').length,
  };
}
