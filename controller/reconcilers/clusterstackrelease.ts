// The ClusterStackRelease reconcile (pure): release + its GitRepository/Kustomization as they are
// + the stack.yaml validation of the release tree + Clusters using its ClusterClass + now →
// desired Flux objects, finalizers and status.
//
// - The release is pinned to the commit stackflux validated (status.commit): the GitRepository
//   names the tag AND that commit, so Flux fetches exactly the validated content; before any
//   commit validated there is no GitRepository at all. A tag that moves afterwards (the listing
//   shows another commit) changes nothing that is applied: the release reports TagMoved.
// - The Kustomization (cluster-class/ → management cluster) is desired only once stack.yaml is
//   valid: a bad release never gets half-applied. If a release that was applied turns invalid,
//   the existing Kustomization is left exactly as it is (last good state; nothing is pruned).
// - Ready only when the Kustomization is Ready at THIS tag's validated commit.
// - The tenancy policy (controller flags) is input: the Kustomization impersonates the
//   ClusterStack's serviceAccountName, else --default-service-account; a remote chart from a host
//   not in --allowed-chart-hosts makes the release InvalidRelease.
// - The finalizer stackflux.io/release-in-use is kept while any Cluster uses the ClusterClass,
//   also when the release is being deleted (by GC or by hand).
// - A release whose cluster-class stackflux renders (csctl: a Helm chart) is applied from where
//   the controller wrote the rendered objects (`renderedClass`: a fleet branch pinned to a commit);
//   until they are written nothing is applied, and a render that fails keeps the last good state.

import type { ClusterStackRelease, ClusterStackReleaseStatus } from '../api/clusterstackrelease.ts';
import type { GitRepository, Kustomization } from '../api/flux.ts';
import { type Condition, ConditionType, FINALIZER_RELEASE_IN_USE } from '../api/meta.ts';
import type { StackManifest } from '../api/release.ts';
import type { StackDescription } from '../releases/description.ts';
import { type FluxTemplates, type RenderedClassSource, releaseFluxObjects } from '../releases/flux.ts';
import type { ValidationResult } from '../releases/stack.ts';
import { type TenancyPolicy, withChartPolicy } from '../releases/tenancy.ts';
import {
  findCondition,
  markNotReady,
  markReady,
  markReconciling,
  removeCondition,
  setCondition,
} from '../runtime/conditions.ts';
import { csctlAddonPlan } from './clusteraddon.ts';
import {
  type ProviderGate,
  type ProviderObject,
  providerGate,
  providerObjectKind,
  type ReleaseProviderInput,
} from './provider.ts';

export interface ClusterStackReleaseInput {
  release: ClusterStackRelease;
  /** The owned GitRepository as it is in the cluster (for the resolved commit). */
  gitRepository?: GitRepository;
  /** The owned Kustomization as it is in the cluster (for readiness). */
  kustomization?: Kustomization;
  /**
   * readRelease() of the release tree at `commit`; undefined while the tree is not available
   * (not fetched yet).
   */
  stack?: ValidationResult<StackManifest | StackDescription>;
  /**
   * A release whose cluster-class stackflux renders (a description with clusterClass.kind
   * helm-chart): where the rendered objects are, or why they are not (undefined: not yet).
   */
  renderedClass?: RenderedClass;
  /**
   * Why the release tree could not be read this time (unreachable, refused, rate limited, bytes not
   * matching their digest): no verdict, it is read again with back-off; the condition names the
   * reason, the Warning event of that reason has the details.
   */
  fetchFailure?: {
    reason: string;
    /** Stable words on the failure (the same on every try), e.g. which deadline passed. */
    hint?: string;
  };
  /** The commit `stack` is the validation of (the release's pinned commit, or the listed one before a pin). */
  commit?: string;
  /** The commit the tag points at in the latest listing, if known (to detect a moved tag). */
  listedCommit?: string;
  /** Names of Clusters whose topology names this release's ClusterClass. */
  clusters: readonly string[];
  /** The template and provider object (read only when the release has spec.providerRef). */
  provider?: ReleaseProviderInput;
  /**
   * Set while `clusters` may be incomplete (Cluster API not served, Clusters not listed yet):
   * the in-use finalizer stays (fail closed) and a deletion waits, with this message.
   */
  clustersUnknown?: { reason: string; message: string };
  /** --default-service-account and --allowed-chart-hosts (default: neither). */
  tenancy?: TenancyPolicy;
  templates: FluxTemplates;
  now: Date;
}

/** The rendered cluster-class of a release: written to a fleet branch, or why not. */
export type RenderedClass =
  | ({ ok: true } & RenderedClassSource)
  | {
      ok: false;
      /** RenderFailed, LimitExceeded, InvalidRelease, ClusterClassVersionNotServed, FleetNotConfigured, FleetWriteFailed. */
      reason: string;
      message: string;
    };

/**
 * The ref folder of release branches under the fleet prefix: a namespace never starts with "_", so
 * no release branch shares a ref path with a Cluster's `<prefix><namespace>/<cluster>` (git cannot
 * hold refs a/b and a/b/c at once).
 */
export const RELEASE_BRANCH_FOLDER = '_releases';

/** The fleet branch holding one release's rendered cluster-class. */
export function releaseClassBranch(prefix: string, namespace: string, release: string): string {
  return `${prefix}${RELEASE_BRANCH_FOLDER}/${namespace}/${release}`;
}

/** Whether a release's cluster-class is rendered by stackflux (not applied as the files are). */
export function rendersClusterClass(stack: StackManifest | StackDescription): stack is StackDescription {
  return 'clusterClass' in stack && stack.clusterClass.kind === 'helm-chart';
}

/**
 * The addons a csctl release's BeforeClusterUpgrade stage applies, as the ClusterAddon plans them
 * (csctlAddonPlan: the stage the upgrade hook and a Progressive rollout wait for); empty for
 * stackflux's own format and csctl's old umbrella layout, which have no stages.
 */
export function beforeClusterUpgradeAddonsOf(stack: StackManifest | StackDescription): string[] {
  if (!('clusterClass' in stack) || stack.format !== 'csctl' || stack.csctl?.layout !== 'stages') return [];
  return csctlAddonPlan(stack)
    .filter((a) => a.stage === 'BeforeClusterUpgrade')
    .map((a) => a.name);
}

/** The stack.yaml the chart policy reads (a csctl release has no remote chart: vendored only). */
function policyStack(
  stack: ValidationResult<StackManifest | StackDescription>,
  tenancy: TenancyPolicy | undefined,
): ValidationResult<StackManifest | StackDescription> {
  if (!stack.ok) return stack;
  const manifest = 'clusterClass' in stack.value ? stack.value.manifest : stack.value;
  if (manifest === undefined) return stack;
  const checked = withChartPolicy({ ok: true, value: manifest }, tenancy);
  return checked.ok ? stack : checked;
}

export interface ClusterStackReleaseResult {
  /** undefined: no commit validated yet, so nothing for Flux to fetch (an existing one is left). */
  gitRepository?: GitRepository;
  /** undefined: do not apply a Kustomization (an existing one is left as it is). */
  kustomization?: Kustomization;
  /** The provider object to apply (server-side apply); undefined: leave it as it is. */
  providerObject?: ProviderObject;
  /** The release's finalizers as they should be. */
  finalizers: string[];
  status: ClusterStackReleaseStatus;
}

export const Reason = {
  Succeeded: 'Succeeded',
  Progressing: 'Progressing',
  ArtifactNotReady: 'ArtifactNotReady',
  InvalidRelease: 'InvalidRelease',
  KustomizationNotReady: 'KustomizationNotReady',
  RevisionMismatch: 'RevisionMismatch',
  TagMoved: 'TagMoved',
  InUse: 'InUse',
  Suspended: 'Suspended',
  /** A provider object that was ready is not any more; the applied ClusterClass is kept. */
  ProviderNotReady: 'ProviderNotReady',
} as const;

/**
 * "<tag>@sha1:<commit>" or "refs/tags/<tag>@sha1:<commit>" (Flux's revision of a GitRepository
 * pinned by ref.name + ref.commit) → commit, if the revision is of this tag.
 */
export function commitOfRevision(revision: string | undefined, tag: string): string | undefined {
  if (revision === undefined) return undefined;
  const prefix = [`${tag}@sha1:`, `refs/tags/${tag}@sha1:`, `refs/heads/${tag}@sha1:`].find((p) =>
    revision.startsWith(p),
  );
  if (prefix === undefined) return undefined;
  const commit = revision.slice(prefix.length);
  return /^[0-9a-f]{40}$/.test(commit) ? commit : undefined;
}

/**
 * Kustomization readiness for its current generation. kustomize-controller moves
 * status.observedGeneration only on success, but stamps every condition with the generation it
 * was set for: a failure of the current generation (e.g. a forbidden object under a
 * least-privilege ServiceAccount) is current by its condition, even before any success.
 */
function kustomizationReady(k: Kustomization | undefined): Condition | undefined {
  if (k === undefined) return undefined;
  const ready = findCondition(k.status?.conditions, ConditionType.Ready);
  const gen = k.metadata.generation;
  const seen = [k.status?.observedGeneration, ready?.observedGeneration].filter(
    (g): g is number => g !== undefined,
  );
  if (gen !== undefined && seen.length > 0 && seen.every((g) => g < gen)) return undefined;
  return ready;
}

export function reconcileClusterStackRelease(input: ClusterStackReleaseInput): ClusterStackReleaseResult {
  const view = viewOf(input);
  const { release, stack, mark, now } = view;
  const source = pinnedSource(view);
  // The provider gate, once the release tree is valid (the provider object names its commit).
  const gate: ProviderGate | undefined =
    stack?.ok === true && release.spec.providerRef !== undefined
      ? providerGate(release, input.provider, source.commit)
      : undefined;
  const applying = applyPhase(view, source, gate);
  let conditions = providerCondition(applying.conditions, release, gate, mark, now);
  conditions = deletingCondition(view, conditions);
  return {
    // A release to render gets its GitRepository only once its rendered objects are written; until
    // then (or after a failed render) the one that exists is left as it is.
    ...(source.desired.gitRepository !== undefined && (!source.rendering || source.rendered !== undefined)
      ? { gitRepository: source.desired.gitRepository }
      : {}),
    ...(applying.kustomization !== undefined ? { kustomization: applying.kustomization } : {}),
    ...(gate?.apply !== undefined && !view.deleting ? { providerObject: gate.apply } : {}),
    finalizers: finalizersOf(view),
    status: releaseStatus(view, source, gate, conditions),
  };
}

/** What the phases of one release reconcile share: the input and what follows from it alone. */
interface ReleaseView {
  input: ClusterStackReleaseInput;
  release: ClusterStackRelease;
  tag: string;
  generation: number | undefined;
  deleting: boolean;
  /** The Clusters using the release's ClusterClass, de-duplicated and sorted. */
  clusters: string[];
  /** The release tree's validation under the chart policy; undefined while it is not read. */
  stack: ValidationResult<StackManifest | StackDescription> | undefined;
  mark: MarkFn;
  now: Date;
}

function viewOf(input: ClusterStackReleaseInput): ReleaseView {
  const { release, now } = input;
  const generation = release.metadata.generation;
  return {
    input,
    release,
    tag: release.spec.tag,
    generation,
    deleting: release.metadata.deletionTimestamp !== undefined,
    clusters: [...new Set(input.clusters)].sort(),
    stack: input.stack === undefined ? undefined : policyStack(input.stack, input.tenancy),
    mark: (reason: string, message: string) => ({
      reason,
      message,
      ...(generation !== undefined ? { observedGeneration: generation } : {}),
    }),
    now,
  };
}

/** What Flux fetches for the release (pinned to a commit), and what its Kustomization applied. */
interface PinnedSource {
  commit: string | undefined;
  /** stackflux renders the release's cluster-class (csctl: a Helm chart). */
  rendering: boolean;
  /** Where the rendered cluster-class is, once it is written. */
  rendered: Extract<RenderedClass, { ok: true }> | undefined;
  desired: ReturnType<typeof releaseFluxObjects>;
  sourceRef: string;
  sourceCommit: string | undefined;
  tagMoved: boolean;
  expectedRevision: string | undefined;
  applied: string | undefined;
  appliedCommit: string | undefined;
}

function pinnedSource(view: ReleaseView): PinnedSource {
  const { input, release, tag, stack } = view;
  // The pinned commit: the one this reconcile validated, else the pin the release already has.
  const validated = input.commit ?? release.status?.commit;
  const commit = stack?.ok === true ? validated : release.status?.commit;
  const rendering = stack?.ok === true && rendersClusterClass(stack.value);
  const rendered = rendering && input.renderedClass?.ok === true ? input.renderedClass : undefined;
  // What Flux's artifact is labelled with: the tag at its commit, or the release branch at its commit.
  const sourceRef = rendered !== undefined ? rendered.branch : tag;
  const sourceCommit = rendered !== undefined ? rendered.commit : commit;
  const applied = input.kustomization?.status?.lastAppliedRevision;
  return {
    commit,
    rendering,
    rendered,
    desired: releaseFluxObjects(input.templates, release, commit, input.tenancy, rendered),
    sourceRef,
    sourceCommit,
    tagMoved:
      stack?.ok === true &&
      commit !== undefined &&
      input.listedCommit !== undefined &&
      input.listedCommit !== commit,
    expectedRevision: sourceCommit !== undefined ? `${sourceRef}@sha1:${sourceCommit}` : undefined,
    applied,
    appliedCommit: commitOfRevision(applied, sourceRef),
  };
}

/** Finalizer: held while in use; released when deleting and no Cluster uses the class. */
function finalizersOf(view: ReleaseView): string[] {
  const { release, deleting, clusters } = view;
  const others = (release.metadata.finalizers ?? []).filter((f) => f !== FINALIZER_RELEASE_IN_USE);
  return deleting && clusters.length === 0 && view.input.clustersUnknown === undefined
    ? others
    : [...others, FINALIZER_RELEASE_IN_USE].sort();
}

/**
 * Whether the release is applied (its Kustomization desired), with the Ready / Reconciling
 * conditions saying why not or how far: the tree not read yet or invalid, the provider gate closed,
 * the cluster-class not rendered yet or failed, else the Kustomization's own state.
 */
function applyPhase(
  view: ReleaseView,
  source: PinnedSource,
  gate: ProviderGate | undefined,
): { conditions: Condition[]; kustomization: Kustomization | undefined } {
  const { input, tag, stack, mark, now } = view;
  const { rendering } = source;
  let conditions: Condition[] = [...(view.release.status?.conditions ?? [])];
  let kustomization: Kustomization | undefined;
  if (stack === undefined) {
    const failure = input.fetchFailure;
    conditions = markReconciling(
      conditions,
      failure !== undefined
        ? mark(
            failure.reason,
            // No error text here: it can differ on every try (paths, addresses), and each status
            // write triggers the next reconcile at once, past the back-off. The event has it.
            `reading the release tree of tag ${tag}${input.commit !== undefined ? ` at ${input.commit}` : ''} failed (${failure.reason}${failure.hint !== undefined ? `: ${failure.hint}` : ''}), nothing of it is applied; tried again with back-off (the ${failure.reason} event has the details)`,
          )
        : mark(
            Reason.ArtifactNotReady,
            `waiting for the release tree of tag ${tag} to be fetched and validated`,
          ),
      now,
    );
  } else if (!stack.ok) {
    conditions = markNotReady(
      conditions,
      mark(
        Reason.InvalidRelease,
        `release ${tag} is invalid, nothing was applied from it${input.kustomization !== undefined ? ' (the previously applied state is kept)' : ''}: ${stack.errors.join('; ')}`,
      ),
      now,
    );
    conditions = removeCondition(conditions, ConditionType.Reconciling);
  } else if (gate !== undefined && !gate.ready) {
    conditions = providerNotReady(
      conditions,
      gate,
      input.kustomization !== undefined,
      source.applied,
      mark,
      now,
    );
  } else if (rendering && input.renderedClass === undefined) {
    conditions = markReconciling(
      conditions,
      mark(
        Reason.ArtifactNotReady,
        `waiting for the cluster-class chart of ${tag} to be rendered and written`,
      ),
      now,
    );
  } else if (rendering && input.renderedClass?.ok === false) {
    conditions = markNotReady(
      conditions,
      mark(
        input.renderedClass.reason,
        `the cluster-class of release ${tag} was not applied${input.kustomization !== undefined ? ' (the previously applied state is kept)' : ''}: ${input.renderedClass.message}`,
      ),
      now,
    );
    conditions = removeCondition(conditions, ConditionType.Reconciling);
  } else {
    kustomization = source.desired.kustomization;
    conditions = appliedConditions(view, source, conditions);
  }
  return { conditions, kustomization };
}

/** The conditions of a release that is applied: how far its Kustomization is, and a moved tag. */
function appliedConditions(view: ReleaseView, source: PinnedSource, before: Condition[]): Condition[] {
  const { input, release, tag, mark, now } = view;
  const { commit, desired, expectedRevision, applied, appliedCommit, sourceCommit } = source;
  let conditions = before;
  const ready = kustomizationReady(input.kustomization);
  const appliedPinned = expectedRevision !== undefined && appliedCommit === sourceCommit;
  const name = desired.kustomization.metadata.name;
  if (release.spec.suspend === true) {
    conditions = setCondition(
      conditions,
      {
        type: ConditionType.Ready,
        status: findCondition(conditions, ConditionType.Ready)?.status ?? 'Unknown',
        ...mark(Reason.Suspended, `Kustomization ${name} is suspended`),
      },
      now,
    );
  } else if (
    ready?.status === 'Unknown' &&
    appliedPinned &&
    findCondition(conditions, ConditionType.Ready)?.status === 'True'
  ) {
    // Flux re-verifies the same revision every interval (Ready=Unknown meanwhile): the release
    // stays Ready, so it neither flaps nor looks like a gap to its ClusterStack.
  } else if (ready === undefined || ready.status === 'Unknown') {
    conditions = markReconciling(
      conditions,
      mark(
        Reason.Progressing,
        `waiting for Kustomization ${name} to apply ${expectedRevision ?? tag}${ready?.message ? `: ${ready.message}` : ''}`,
      ),
      now,
    );
  } else if (ready.status === 'False') {
    conditions = markNotReady(
      conditions,
      mark(Reason.KustomizationNotReady, `Kustomization ${name} (${ready.reason}): ${ready.message}`),
      now,
    );
  } else if (expectedRevision === undefined ? appliedCommit === undefined : !appliedPinned) {
    conditions = markReconciling(
      conditions,
      mark(
        Reason.RevisionMismatch,
        `Kustomization ${name} applied ${applied ?? 'nothing yet'}, waiting for ${expectedRevision ?? `${tag}@sha1:<commit>`}`,
      ),
      now,
    );
  } else {
    conditions = markReady(
      conditions,
      mark(Reason.Succeeded, `ClusterClass ${release.spec.clusterClass} applied at ${applied}`),
      now,
    );
  }
  if (source.tagMoved) {
    // Releases are immutable: the moved tag's new commit was never validated, so nothing of it
    // is applied; the release says so until the tag points back or a new release is cut.
    conditions = markNotReady(
      conditions,
      mark(
        Reason.TagMoved,
        `tag ${tag} now points at ${input.listedCommit}, not at the validated commit ${commit}: ` +
          `Flux keeps applying ${commit}; move the tag back or cut a new release (a release tag must not move)`,
      ),
      now,
    );
  }
  return conditions;
}

/** Deleting=True while a deletion waits: until every Cluster can be seen, then until none uses the release. */
function deletingCondition(view: ReleaseView, conditions: Condition[]): Condition[] {
  const { input, release, deleting, clusters, mark, now } = view;
  const unknown = input.clustersUnknown;
  if (deleting && unknown !== undefined) {
    return setCondition(
      conditions,
      {
        type: 'Deleting',
        status: 'True',
        ...mark(unknown.reason, `deletion waits until every Cluster can be seen: ${unknown.message}`),
      },
      now,
    );
  }
  if (deleting && clusters.length > 0) {
    return setCondition(
      conditions,
      {
        type: 'Deleting',
        status: 'True',
        ...mark(
          Reason.InUse,
          `deletion waits until no Cluster uses ClusterClass ${release.spec.clusterClass}: ${clusters.join(', ')}`,
        ),
      },
      now,
    );
  }
  return removeCondition(conditions, 'Deleting');
}

function releaseStatus(
  view: ReleaseView,
  source: PinnedSource,
  gate: ProviderGate | undefined,
  conditions: Condition[],
): ClusterStackReleaseStatus {
  const { input, release, stack, generation, clusters } = view;
  const { commit, expectedRevision, applied, desired } = source;
  const kubernetesVersion =
    stack?.ok === true ? stack.value.kubernetesVersion : release.status?.kubernetesVersion;
  const beforeClusterUpgradeAddons =
    stack?.ok === true
      ? beforeClusterUpgradeAddonsOf(stack.value)
      : release.status?.beforeClusterUpgradeAddons;
  return {
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
    ...(commit !== undefined ? { commit } : {}),
    ...(kubernetesVersion !== undefined ? { kubernetesVersion } : {}),
    ...(expectedRevision !== undefined ? { revision: expectedRevision } : {}),
    ...(applied !== undefined ? { lastAppliedRevision: applied } : {}),
    gitRepository: desired.kustomization.spec.sourceRef.name,
    kustomization: desired.kustomization.metadata.name,
    clusters: input.clustersUnknown !== undefined ? (release.status?.clusters ?? 0) : clusters.length,
    ...(beforeClusterUpgradeAddons !== undefined && beforeClusterUpgradeAddons.length > 0
      ? { beforeClusterUpgradeAddons }
      : {}),
    ...providerStatus(release, gate),
    conditions,
  };
}

type MarkFn = (
  reason: string,
  message: string,
) => { reason: string; message: string; observedGeneration?: number };

/**
 * The gate is closed. Nothing applied yet: the Kustomization is not created and the release waits
 * (Ready=False, Reconciling while the provider works, not while a user must fix something). Applied
 * before: the Kustomization is left exactly as it is (what runs keeps running) and Ready=False says
 * why the release is not usable any more.
 */
function providerNotReady(
  conditions: Condition[],
  gate: ProviderGate,
  wasApplied: boolean,
  applied: string | undefined,
  mark: MarkFn,
  now: Date,
): Condition[] {
  if (wasApplied) {
    const out = markNotReady(
      conditions,
      mark(
        Reason.ProviderNotReady,
        `${gate.message}; the ClusterClass applied${applied !== undefined ? ` at ${applied}` : ''} keeps running, the release is not offered to Clusters`,
      ),
      now,
    );
    return removeCondition(out, ConditionType.Reconciling);
  }
  const m = mark(gate.reason, `${gate.message}; the ClusterClass is applied once it is ready`);
  if (gate.problem) return removeCondition(markNotReady(conditions, m, now), ConditionType.Reconciling);
  const out = setCondition(conditions, { type: ConditionType.Reconciling, status: 'True', ...m }, now);
  return setCondition(out, { type: ConditionType.Ready, status: 'False', ...m }, now);
}

/** ProviderReady: absent without providerRef; kept as it was while the gate was not evaluated. */
function providerCondition(
  conditions: Condition[],
  release: ClusterStackRelease,
  gate: ProviderGate | undefined,
  mark: MarkFn,
  now: Date,
): Condition[] {
  if (release.spec.providerRef === undefined) return removeCondition(conditions, ConditionType.ProviderReady);
  if (gate === undefined) return conditions;
  return setCondition(
    conditions,
    {
      type: ConditionType.ProviderReady,
      status: gate.ready ? 'True' : 'False',
      ...mark(gate.reason, gate.message),
    },
    now,
  );
}

function providerStatus(
  release: ClusterStackRelease,
  gate: ProviderGate | undefined,
): Pick<ClusterStackReleaseStatus, 'provider'> {
  const ref = release.spec.providerRef;
  if (ref === undefined) return {};
  const previous = release.status?.provider;
  return {
    provider: {
      apiVersion: ref.apiVersion,
      kind: providerObjectKind(ref.kind),
      name: release.metadata.name,
      ready: gate !== undefined ? gate.ready : (previous?.ready ?? false),
    },
  };
}
