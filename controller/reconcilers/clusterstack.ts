// The ClusterStack reconcile (pure): ClusterStack + its source's tag listing + existing
// ClusterStackReleases + Clusters in the namespace + now → desired ClusterStackReleases, the ones
// to delete, and the ClusterStack status.
//
// Desired = pinned versions ∪ latest (autoSubscribe) ∪ in use (a Cluster names the release's
// ClusterClass) ∪ the newest Ready release while the latest is not Ready yet (no gap).
// Nothing is deleted while the source cannot be listed, and an in-use release is never deleted:
// "in use" counts every release of this ClusterStack a Cluster names (also one of a previous
// kubernetesVersion or channel), and while the controller cannot see every Cluster
// (inUseUnknown) nothing is deleted at all (fail closed; condition GarbageCollection says why).
import type { ClusterStack, ClusterStackStatus, ReleaseSummary, SourceStatus } from '../api/clusterstack.ts';
import type { ClusterStackRelease } from '../api/clusterstackrelease.ts';
import { API_VERSION, type Condition, ConditionType } from '../api/meta.ts';
import { ROLLOUT_CONDITION } from '../api/rollout.ts';
import { ownerReferenceTo, releaseLabels } from '../releases/flux.ts';
import { githubCloneUrl } from '../releases/githuburl.ts';
import {
  type Channel,
  classifyTags,
  formatReleaseTag,
  parseReleaseTag,
  type ReleaseSelector,
  type ReleaseTag,
  releaseOrder,
  type TagListResult,
  tagForClusterClassName,
} from '../releases/tags.ts';
import {
  findCondition,
  markNotReady,
  markReady,
  markReconciling,
  removeCondition,
  setCondition,
} from '../runtime/conditions.ts';
import {
  type ProviderLookup,
  type ProviderRef,
  type ProviderTemplate,
  providerConfig,
  templateCondition,
} from './provider.ts';
import { lastHandledReconcileAt } from './reconcilerequest.ts';
import { type NamespaceLabels, servesNamespace } from './sharing.ts';

/** What the source's poller last returned for the ClusterStack's repository (undefined while suspended). */
export type SourceListing =
  | {
      ok: true;
      /** Tag names (annotated tags already peeled and de-duplicated by the source). */
      tags: readonly string[];
      /** Commit time (epoch seconds) per tag, where the source knows it (orders custom channels). */
      times?: Readonly<Record<string, number>>;
      /**
       * Tags listed but not kept (sources/listing.ts): not release tags of any stack, nor among the
       * first look-alikes. Counted in status.source tags and ignored.
       */
      notKept?: number;
      /** RFC 3339 time of the listing. */
      listedAt: string;
    }
  | {
      ok: false;
      /** CamelCase, e.g. "ListFailed", "RateLimited", "AuthenticationFailed". */
      reason: string;
      /** Free of credentials (the source guarantees it). */
      message: string;
      /** The last successful listing, if any. */
      lastListedAt?: string;
    };

/** A Cluster in the namespace and the ClusterClass its topology names. */
export interface ClusterUse {
  name: string;
  className: string;
  /** v1beta2 classRef.namespace; empty/undefined = the Cluster's namespace. */
  classNamespace?: string;
  /** The Cluster's own namespace, when it differs from the ClusterClass's (see sharing.ts). */
  clusterNamespace?: string;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * The ClusterClass a Cluster API Cluster uses, read from whichever API version the server served:
 * v1beta2 `spec.topology.classRef.{name,namespace}`, v1beta1 `spec.topology.class` (+ `classNamespace`).
 */
export function clusterUse(cluster: unknown): ClusterUse | undefined {
  if (!isRecord(cluster) || !isRecord(cluster.metadata) || typeof cluster.metadata.name !== 'string')
    return undefined;
  const name = cluster.metadata.name;
  const topology = isRecord(cluster.spec) ? cluster.spec.topology : undefined;
  if (!isRecord(topology)) return undefined;
  if (
    isRecord(topology.classRef) &&
    typeof topology.classRef.name === 'string' &&
    topology.classRef.name !== ''
  ) {
    const ns = topology.classRef.namespace;
    return {
      name,
      className: topology.classRef.name,
      ...(typeof ns === 'string' && ns !== '' ? { classNamespace: ns } : {}),
    };
  }
  if (typeof topology.class === 'string' && topology.class !== '') {
    const ns = topology.classNamespace;
    return {
      name,
      className: topology.class,
      ...(typeof ns === 'string' && ns !== '' ? { classNamespace: ns } : {}),
    };
  }
  return undefined;
}

export interface ClusterStackInput {
  clusterStack: ClusterStack;
  /** --github-api-url: github sources are cloned from that GitHub (default github.com). */
  githubApiUrl?: string;
  /** undefined: the source has not been listed yet. */
  listing: SourceListing | undefined;
  /** ClusterStackReleases in the namespace (those of other ClusterStacks are ignored). */
  releases: readonly ClusterStackRelease[];
  /** Clusters whose ClusterClass is in this namespace (from every namespace and shard). */
  clusters: readonly ClusterUse[];
  /**
   * Labels of the namespaces of those Clusters (clusterNamespace); undefined: not known yet, and a
   * Cluster of another namespace then counts as using its release (deleting nothing on a guess).
   */
  namespaceLabels?: NamespaceLabels;
  /**
   * The template spec.providerRef names, as the controller found it (ignored with noProvider);
   * undefined: not looked up yet.
   */
  providerTemplate?: ProviderLookup<ProviderTemplate>;
  /**
   * Set while `clusters` may be incomplete (Cluster API not served, Clusters not listed yet):
   * no release is deleted, and the GarbageCollection condition carries this reason and message.
   */
  inUseUnknown?: { reason: string; message: string };
  now: Date;
}

/** Condition type set (False) while garbage collection waits for a complete view of Clusters. */
export const GARBAGE_COLLECTION_CONDITION = 'GarbageCollection';

export interface ClusterStackResult {
  /** Desired ClusterStackReleases (metadata + spec; status is the release reconciler's), by name. */
  apply: ClusterStackRelease[];
  /** Names of ClusterStackReleases to delete, sorted. */
  delete: string[];
  status: ClusterStackStatus;
}

export const Reason = {
  Succeeded: 'Succeeded',
  Progressing: 'Progressing',
  Listed: 'Listed',
  SourceUnavailable: 'SourceUnavailable',
  NotListed: 'NotListed',
  VersionNotFound: 'VersionNotFound',
  NoReleaseFound: 'NoReleaseFound',
  ReleaseNotReady: 'ReleaseNotReady',
  Suspended: 'Suspended',
  Deleting: 'Deleting',
} as const;

const MAX_MALFORMED_IN_STATUS = 20;

/** The Listed message's word on tags the source listed but stackflux did not keep (F2). */
function notKeptNote(notKept: number | undefined): string {
  return notKept !== undefined && notKept > 0
    ? ` (${notKept} tags that are not release tags were counted, not kept)`
    : '';
}

/**
 * The URL the releases are fetched from: github sources become their https clone URL on the
 * GitHub whose API root is `githubApiUrl` (github.com for api.github.com, else the API's host:
 * GitHub Enterprise Server clones from the host it serves its API on).
 */
export function sourceUrl(cs: ClusterStack, githubApiUrl?: string): string {
  const { git, github, oci } = cs.spec.source;
  if (git !== undefined) return git.url;
  if (oci !== undefined) return oci.url;
  if (github !== undefined) return githubCloneUrl(github.owner, github.repo, githubApiUrl);
  return '';
}

function sourceSecretRef(cs: ClusterStack): { name: string } | undefined {
  return cs.spec.source.git?.secretRef ?? cs.spec.source.github?.secretRef ?? cs.spec.source.oci?.secretRef;
}

/** Whether a ClusterStackRelease belongs to this ClusterStack (controller owner, or spec/label by name). */
export function ownedBy(release: ClusterStackRelease, cs: ClusterStack): boolean {
  const owner = release.metadata.ownerReferences?.find((o) => o.controller === true);
  if (owner !== undefined) {
    return (
      owner.kind === 'ClusterStack' &&
      owner.name === cs.metadata.name &&
      (cs.metadata.uid === undefined || owner.uid === cs.metadata.uid)
    );
  }
  return release.spec.clusterStack === cs.metadata.name;
}

/** Ready=True for the release's current generation. */
export function releaseReady(release: ClusterStackRelease): boolean {
  const ready = findCondition(release.status?.conditions, ConditionType.Ready);
  if (ready?.status !== 'True') return false;
  const gen = release.metadata.generation;
  const observed = release.status?.observedGeneration;
  return gen === undefined || observed === undefined || observed >= gen;
}

export function desiredRelease(
  cs: ClusterStack,
  tag: ReleaseTag,
  providerRef?: ProviderRef,
  githubApiUrl?: string,
): ClusterStackRelease {
  const secretRef = sourceSecretRef(cs);
  const path = cs.spec.source.path ?? '';
  return {
    apiVersion: API_VERSION,
    kind: 'ClusterStackRelease',
    metadata: {
      name: tag.tag,
      namespace: cs.metadata.namespace ?? 'default',
      labels: releaseLabels(cs.metadata.name, tag.tag),
      ownerReferences: [ownerReferenceTo(cs)],
    },
    spec: {
      clusterStack: cs.metadata.name,
      tag: tag.tag,
      version: tag.version,
      clusterClass: tag.clusterClassName,
      kubernetesVersion: tag.kubernetesVersion,
      source: {
        url: sourceUrl(cs, githubApiUrl),
        ...(secretRef !== undefined ? { secretRef: { name: secretRef.name } } : {}),
        ...(path !== '' ? { path } : {}),
        ...(cs.spec.source.oci?.insecure === true ? { insecure: true } : {}),
      },
      ...(providerRef !== undefined ? { providerRef: { ...providerRef } } : {}),
      interval: cs.spec.interval ?? '5m',
      timeout: cs.spec.timeout ?? '5m',
      ...(cs.spec.serviceAccountName !== undefined ? { serviceAccountName: cs.spec.serviceAccountName } : {}),
    },
  };
}

/** What the provider phase yields (see providerPhase). */
interface ProviderPhase {
  ref?: ProviderRef;
  /** Releases are neither created nor deleted (fail closed). */
  hold?: { problem: boolean; reason: string; message: string };
  condition?: { status: Condition['status']; reason: string; message: string };
}

/**
 * The provider phase: the template ref to copy into releases, or why releases must not change
 * (a configuration problem, or the template not known yet), and the ProviderTemplateReady condition.
 */
function providerPhase(
  cs: ClusterStack,
  lookup: ProviderLookup<ProviderTemplate> | undefined,
): ProviderPhase {
  const config = providerConfig(cs);
  if (config.mode === 'none') return {};
  if (config.mode === 'invalid') {
    const c = { status: 'False' as const, reason: config.reason, message: config.message };
    return { hold: { problem: true, reason: c.reason, message: c.message }, condition: c };
  }
  const namespace = cs.metadata.namespace ?? 'default';
  const c = templateCondition(config.ref, lookup, namespace);
  if (c.status === 'True') return { ref: config.ref, condition: c };
  // Not known yet (e.g. the cache of the kind syncing after a restart) but found before, for this
  // same ref: carry on as found rather than flap Ready (the template's content is not read here).
  const found = templateCondition(config.ref, { state: 'found', object: {} as ProviderTemplate }, namespace);
  const previous = findCondition(cs.status?.conditions, ConditionType.ProviderTemplateReady);
  if (c.status === 'Unknown' && previous?.status === 'True' && previous.message === found.message)
    return { ref: config.ref, condition: found };
  return { hold: { problem: c.status === 'False', reason: c.reason, message: c.message }, condition: c };
}

function byName<T extends { metadata: { name: string } }>(a: T, b: T): number {
  return a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0;
}

export function reconcileClusterStack(input: ClusterStackInput): ClusterStackResult {
  const view = viewOf(input);
  const usedBy = clustersByRelease(view);
  const listed = listedReleases(view);
  const pinned = pinnedVersions(view, listed);
  const provider = providerPhase(view.cs, input.providerTemplate);
  const desired = desiredReleases(view, listed, pinned.tags, usedBy);
  const changes = releaseChanges(view, listed, provider, desired, usedBy);
  const summary = releaseSummaries(view, listed, pinned.tags, usedBy, changes);
  const source = sourceStatus(view, listed);

  // The Rollout condition belongs to the rollout controller (its own field manager): not carried over.
  let conditions: Condition[] = (view.cs.status?.conditions ?? []).filter(
    (c) => c.type !== ROLLOUT_CONDITION,
  );
  conditions = sourceCondition(view, conditions, listed, source);
  conditions = providerTemplateCondition(view, conditions, provider);
  conditions = garbageCollectionCondition(view, conditions, changes.heldBack);
  // Summary conditions (Ready / Reconciling / Stalled), the most important problem first.
  conditions =
    stoppedConditions(view, conditions, provider, source, summary) ??
    releaseConditions(view, conditions, source, {
      summary,
      desired,
      missingPinned: pinned.missing,
      latest: listed.latest,
    });

  return {
    apply: changes.apply.sort(byName),
    delete: changes.delete.sort(),
    status: stackStatus(view, summary, source, conditions),
  };
}

/** What the phases of one ClusterStack reconcile share: the input and what follows from it alone. */
interface StackView {
  input: ClusterStackInput;
  cs: ClusterStack;
  namespace: string;
  selector: ReleaseSelector;
  /** A tag of this ClusterStack's stack, Kubernetes version and channel. */
  isOurs: (t: ReleaseTag) => boolean;
  /** The ClusterStackReleases this ClusterStack owns, sorted by name. */
  existing: ClusterStackRelease[];
  existingByName: Map<string, ClusterStackRelease>;
  deleting: boolean;
  suspended: boolean;
  autoSubscribe: boolean;
  /** A condition's reason and message, for the ClusterStack's generation. */
  mark: (reason: string, message: string) => { reason: string; message: string; observedGeneration?: number };
}

function viewOf(input: ClusterStackInput): StackView {
  const { clusterStack: cs } = input;
  const generation = cs.metadata.generation;
  const channel: Channel = cs.spec.channel ?? 'stable';
  const selector = {
    provider: cs.spec.provider,
    name: cs.spec.name,
    kubernetesVersion: cs.spec.kubernetesVersion,
    channel,
  };
  const existing = input.releases.filter((r) => ownedBy(r, cs)).sort(byName);
  return {
    input,
    cs,
    namespace: cs.metadata.namespace ?? 'default',
    selector,
    isOurs: (t: ReleaseTag): boolean =>
      t.provider === selector.provider &&
      t.name === selector.name &&
      t.kubernetesVersion === selector.kubernetesVersion &&
      t.channel === channel,
    existing,
    existingByName: new Map(existing.map((r) => [r.metadata.name, r])),
    deleting: cs.metadata.deletionTimestamp !== undefined,
    suspended: cs.spec.suspend === true,
    autoSubscribe: cs.spec.autoSubscribe ?? true,
    mark: (reason: string, message: string) => ({
      reason,
      message,
      ...(generation !== undefined ? { observedGeneration: generation } : {}),
    }),
  };
}

/**
 * How many Clusters use each release of this stack (by ClusterClass name → tag). A count, not
 * a list: this runs on every poll over every Cluster of the namespace (10,000 and more), and
 * copying a growing list per Cluster was quadratic (about 400 MB of garbage at 10,000).
 */
function clustersByRelease(view: StackView): Map<string, number> {
  const { input, cs, namespace, isOurs, existingByName } = view;
  const usedBy = new Map<string, number>();
  const tagOfClass = new Map<string, ReturnType<typeof tagForClusterClassName>>();
  for (const c of input.clusters) {
    if (c.classNamespace !== undefined && c.classNamespace !== namespace) continue;
    // A Cluster of a namespace this ClusterStack does not serve gets no addons from it and must
    // not pin its releases either.
    const foreign = c.clusterNamespace !== undefined && c.clusterNamespace !== namespace;
    if (foreign && servesNamespace(cs, c.clusterNamespace ?? '', input.namespaceLabels) === false) continue;
    if (!tagOfClass.has(c.className)) tagOfClass.set(c.className, tagForClusterClassName(c.className));
    const tag = tagOfClass.get(c.className);
    // A release of this ClusterStack is in use whatever its Kubernetes version or channel: a
    // changed kubernetesVersion or channel must not delete what a Cluster still runs.
    if (tag === undefined || !(isOurs(tag) || existingByName.has(tag.tag))) continue;
    usedBy.set(tag.tag, (usedBy.get(tag.tag) ?? 0) + 1);
  }
  return usedBy;
}

/** The releases of this stack the source lists (none without a successful listing). */
interface Listed {
  compareReleaseTags: (a: ReleaseTag, b: ReleaseTag) => number;
  classified: TagListResult | undefined;
  available: Map<string, ReleaseTag>;
  latest: ReleaseTag | undefined;
}

/** Tags of the listing. */
function listedReleases(view: StackView): Listed {
  const { listing } = view.input;
  const times = listing?.ok === true ? listing.times : undefined;
  const classified = listing?.ok === true ? classifyTags(listing.tags, view.selector, times) : undefined;
  return {
    compareReleaseTags: releaseOrder(times),
    classified,
    available: new Map((classified?.releases ?? []).map((t) => [t.tag, t])),
    latest: classified?.releases.at(-1),
  };
}

/** Pinned versions: their tags, and the versions the listing does not have. */
function pinnedVersions(view: StackView, listed: Listed): { tags: Set<string>; missing: string[] } {
  const { cs, selector, isOurs } = view;
  const pinnedTags = new Set<string>();
  const missingPinned: string[] = [];
  for (const version of [...new Set(cs.spec.versions ?? [])].sort()) {
    const tag = formatReleaseTag(selector.provider, selector.name, selector.kubernetesVersion, version);
    const parsed = parseReleaseTag(tag);
    if (parsed.ok && isOurs(parsed.value)) pinnedTags.add(tag);
    if (listed.classified !== undefined && !listed.available.has(tag)) missingPinned.push(version);
  }
  return { tags: pinnedTags, missing: missingPinned };
}

/** Desired set (tags); empty while the ClusterStack is being deleted. */
function desiredReleases(
  view: StackView,
  listed: Listed,
  pinnedTags: ReadonlySet<string>,
  usedBy: ReadonlyMap<string, number>,
): Set<string> {
  const { autoSubscribe, existing, existingByName, isOurs } = view;
  const { latest, compareReleaseTags } = listed;
  const desired = new Set<string>();
  if (view.deleting) return desired;
  for (const t of pinnedTags) desired.add(t);
  if (autoSubscribe && latest !== undefined) desired.add(latest.tag);
  for (const t of usedBy.keys()) desired.add(t);
  if (autoSubscribe && latest !== undefined) {
    const latestRelease = existingByName.get(latest.tag);
    if (latestRelease === undefined || !releaseReady(latestRelease)) {
      // No gap: keep the newest Ready release older than the latest.
      const readyOlder = existing
        .filter((r) => r.metadata.name !== latest.tag && releaseReady(r))
        .map((r) => parseReleaseTag(r.metadata.name))
        .flatMap((p) => (p.ok && isOurs(p.value) && compareReleaseTags(p.value, latest) < 0 ? [p.value] : []))
        .sort(compareReleaseTags)
        .at(-1);
      if (readyOlder !== undefined) desired.add(readyOlder.tag);
    }
  }
  return desired;
}

/** The releases to apply and to delete, and those kept only because not every Cluster can be seen. */
interface ReleaseChanges {
  apply: ClusterStackRelease[];
  delete: string[];
  heldBack: string[];
}

/** Without a listing, keep what exists (never delete on a source error). */
function releaseChanges(
  view: StackView,
  listed: Listed,
  provider: ProviderPhase,
  desired: ReadonlySet<string>,
  usedBy: ReadonlyMap<string, number>,
): ReleaseChanges {
  const { input, cs, deleting, existing } = view;
  const { classified, available } = listed;
  // A provider problem freezes the releases as they are (deletion of the ClusterStack goes on).
  const frozen = view.suspended || (provider.hold !== undefined && !deleting);
  const apply: ClusterStackRelease[] = [];
  let del: string[] = [];
  if (!frozen) {
    if (!deleting && classified !== undefined) {
      for (const tagName of [...desired].sort()) {
        const tag = available.get(tagName);
        // A desired release whose tag is gone (e.g. in use, tag deleted) keeps its current object.
        if (tag !== undefined) apply.push(desiredRelease(cs, tag, provider.ref, input.githubApiUrl));
      }
    }
    if (classified !== undefined || deleting) {
      for (const r of existing) {
        if (!desired.has(r.metadata.name) && !usedBy.has(r.metadata.name)) del.push(r.metadata.name);
      }
    }
  }

  // Fail closed: without a complete view of the Clusters nothing is known to be unused.
  const heldBack = input.inUseUnknown !== undefined ? del : [];
  if (input.inUseUnknown !== undefined) del = [];
  return { apply, delete: del, heldBack };
}

/** status.summary: every release kept, in release order. */
function releaseSummaries(
  view: StackView,
  listed: Listed,
  pinnedTags: ReadonlySet<string>,
  usedBy: ReadonlyMap<string, number>,
  changes: ReleaseChanges,
): ReleaseSummary[] {
  const { existing, existingByName } = view;
  const keptNames = new Set([
    ...existing.map((r) => r.metadata.name),
    ...changes.apply.map((r) => r.metadata.name),
  ]);
  for (const d of changes.delete) keptNames.delete(d);
  const summaryTags = [...keptNames]
    .map((n) => parseReleaseTag(n))
    .flatMap((p) => (p.ok ? [p.value] : []))
    .sort(listed.compareReleaseTags);
  return summaryTags.map((t) => {
    const r = existingByName.get(t.tag);
    const ready = r !== undefined && releaseReady(r);
    const cond = findCondition(r?.status?.conditions, ConditionType.Ready);
    const clusters = usedBy.get(t.tag) ?? 0;
    return {
      name: t.tag,
      version: t.version,
      ready,
      ...(r === undefined
        ? { reason: 'Creating', message: 'ClusterStackRelease is being created' }
        : cond !== undefined
          ? { reason: cond.reason, message: cond.message }
          : {}),
      latest: listed.latest?.tag === t.tag,
      pinned: pinnedTags.has(t.tag),
      inUse: clusters > 0,
      clusters,
    };
  });
}

/** status.source: the URL and what the last listing returned. */
function sourceStatus(view: StackView, listed: Listed): SourceStatus {
  const { input, cs, suspended } = view;
  const { listing } = input;
  const { classified } = listed;
  const previous = cs.status;
  // Suspended: nothing is listed, so what the last listing returned stays as it was.
  const source: SourceStatus =
    suspended && previous?.source !== undefined
      ? { ...previous.source, url: sourceUrl(cs, input.githubApiUrl) }
      : {
          url: sourceUrl(cs, input.githubApiUrl),
          ...(listing?.ok === true
            ? { lastListedTime: listing.listedAt }
            : listing?.lastListedAt !== undefined
              ? { lastListedTime: listing.lastListedAt }
              : {}),
        };
  if (classified !== undefined && listing?.ok === true) {
    const notKept = listing.notKept ?? 0;
    source.tags = new Set(listing.tags).size + notKept;
    source.matching = classified.releases.length;
    source.ignored = classified.ignored.length + notKept;
    source.malformed = classified.malformed.length;
    if (classified.malformed.length > 0)
      source.malformedTags = classified.malformed.slice(0, MAX_MALFORMED_IN_STATUS);
  } else if (previous?.source !== undefined && !suspended) {
    // Keep the counts of the last good listing.
    const { tags, matching, ignored, malformed, malformedTags } = previous.source;
    Object.assign(source, {
      tags,
      matching,
      ignored,
      malformed,
      ...(malformedTags ? { malformedTags } : {}),
    });
    for (const k of ['tags', 'matching', 'ignored', 'malformed'] as const)
      if (source[k] === undefined) delete source[k];
  }
  return source;
}

/** Source condition (left as it was while suspended: the source is not listed). */
function sourceCondition(
  view: StackView,
  conditions: Condition[],
  listed: Listed,
  source: SourceStatus,
): Condition[] {
  const { mark } = view;
  const { listing, now } = view.input;
  if (view.suspended) return conditions;
  if (listing === undefined) {
    return setCondition(
      conditions,
      {
        type: ConditionType.SourceReady,
        status: 'Unknown',
        ...mark(Reason.NotListed, `${source.url} has not been listed yet`),
      },
      now,
    );
  }
  if (listing.ok) {
    const c = listed.classified ?? { releases: [], malformed: [] };
    return setCondition(
      conditions,
      {
        type: ConditionType.SourceReady,
        status: 'True',
        ...mark(
          Reason.Listed,
          `listed ${source.tags ?? 0} tags: ${c.releases.length} releases of this stack, ${c.malformed.length} malformed${notKeptNote(listing.notKept)}`,
        ),
      },
      now,
    );
  }
  return setCondition(
    conditions,
    { type: ConditionType.SourceReady, status: 'False', ...mark(listing.reason, listing.message) },
    now,
  );
}

/** Provider template condition (absent with noProvider). */
function providerTemplateCondition(
  view: StackView,
  conditions: Condition[],
  provider: ProviderPhase,
): Condition[] {
  if (provider.condition === undefined)
    return removeCondition(conditions, ConditionType.ProviderTemplateReady);
  return setCondition(
    conditions,
    {
      type: ConditionType.ProviderTemplateReady,
      status: provider.condition.status,
      ...view.mark(provider.condition.reason, provider.condition.message),
    },
    view.input.now,
  );
}

/** GarbageCollection=False while releases are kept only because not every Cluster can be seen. */
function garbageCollectionCondition(
  view: StackView,
  conditions: Condition[],
  heldBack: readonly string[],
): Condition[] {
  const { inUseUnknown, now } = view.input;
  if (inUseUnknown === undefined || heldBack.length === 0) {
    return removeCondition(conditions, GARBAGE_COLLECTION_CONDITION);
  }
  return setCondition(
    conditions,
    {
      type: GARBAGE_COLLECTION_CONDITION,
      status: 'False',
      ...view.mark(
        inUseUnknown.reason,
        `no release is deleted while not every Cluster can be seen: ${inUseUnknown.message}; kept until then: ${heldBack.join(', ')}`,
      ),
    },
    now,
  );
}

/**
 * The summary conditions while the ClusterStack is not at its releases: being deleted, suspended,
 * held by its provider template, or without a listing of its source. Undefined otherwise.
 */
function stoppedConditions(
  view: StackView,
  conditions: Condition[],
  provider: ProviderPhase,
  source: SourceStatus,
  summary: readonly ReleaseSummary[],
): Condition[] | undefined {
  const { cs, namespace, mark } = view;
  const { listing, now } = view.input;
  if (view.deleting) {
    const waiting = summary.filter((s) => s.inUse).map((s) => s.name);
    return markReconciling(
      conditions,
      mark(
        Reason.Deleting,
        waiting.length > 0
          ? `deleting: releases in use are kept until their Clusters move: ${waiting.join(', ')}`
          : 'deleting unused releases',
      ),
      now,
    );
  }
  if (view.suspended) {
    const marked = setCondition(
      conditions,
      {
        type: ConditionType.Ready,
        status: findCondition(conditions, ConditionType.Ready)?.status ?? 'Unknown',
        ...mark(
          Reason.Suspended,
          'suspended: the source is not listed and no ClusterStackRelease is created or deleted ' +
            `(resume with: stackflux resume clusterstack ${cs.metadata.name} -n ${namespace})`,
        ),
      },
      now,
    );
    return removeCondition(marked, ConditionType.Reconciling);
  }
  if (provider.hold?.problem === true) {
    const marked = markNotReady(
      conditions,
      mark(
        provider.hold.reason,
        `${provider.hold.message}; no release is created or deleted until this is fixed`,
      ),
      now,
    );
    return removeCondition(marked, ConditionType.Reconciling);
  }
  if (provider.hold !== undefined) {
    return markReconciling(conditions, mark(provider.hold.reason, provider.hold.message), now);
  }
  if (listing === undefined) {
    return markReconciling(conditions, mark(Reason.Progressing, `listing ${source.url}`), now);
  }
  if (!listing.ok) {
    return markNotReady(
      conditions,
      mark(
        Reason.SourceUnavailable,
        `cannot list ${source.url}: ${listing.message}; existing releases are kept`,
      ),
      now,
    );
  }
  return undefined;
}

/** The summary conditions from the desired releases: a pinned version missing, none found, failed, pending or Ready. */
function releaseConditions(
  view: StackView,
  conditions: Condition[],
  source: SourceStatus,
  releases: {
    summary: readonly ReleaseSummary[];
    desired: ReadonlySet<string>;
    missingPinned: readonly string[];
    latest: ReleaseTag | undefined;
  },
): Condition[] {
  const { selector, existingByName, autoSubscribe, mark } = view;
  const { channel } = selector;
  const { now } = view.input;
  const { summary, desired, missingPinned } = releases;
  const desiredSummaries = summary.filter((s) => desired.has(s.name));
  const failed = desiredSummaries.filter(
    (s) => !s.ready && existingByName.has(s.name) && isFailed(existingByName.get(s.name)),
  );
  const pending = desiredSummaries.filter((s) => !s.ready && !failed.includes(s));
  const latestName = releases.latest?.tag;
  if (missingPinned.length > 0) {
    return markNotReady(
      conditions,
      mark(
        Reason.VersionNotFound,
        `pinned version${missingPinned.length > 1 ? 's' : ''} ${missingPinned.join(', ')} not found in ${source.url} ` +
          `(tags ${missingPinned.map((v) => formatReleaseTag(selector.provider, selector.name, selector.kubernetesVersion, v)).join(', ')}, channel ${channel})`,
      ),
      now,
    );
  }
  if (desired.size === 0) {
    return markNotReady(
      conditions,
      mark(
        Reason.NoReleaseFound,
        autoSubscribe
          ? `no ${channel} release of ${selector.provider}-${selector.name} for Kubernetes ${selector.kubernetesVersion} in ${source.url}`
          : 'autoSubscribe is false and no versions are pinned',
      ),
      now,
    );
  }
  if (failed.length > 0) {
    return markNotReady(
      conditions,
      mark(
        Reason.ReleaseNotReady,
        failed.map((s) => `${s.name}: ${s.message ?? s.reason ?? 'not ready'}`).join('; '),
      ),
      now,
    );
  }
  if (pending.length > 0) {
    return markReconciling(
      conditions,
      mark(
        Reason.Progressing,
        `waiting for release${pending.length > 1 ? 's' : ''} ${pending.map((s) => s.name).join(', ')} to become Ready`,
      ),
      now,
    );
  }
  return markReady(
    conditions,
    mark(
      Reason.Succeeded,
      latestName !== undefined && desired.has(latestName)
        ? `latest release ${latestName} is Ready`
        : `releases ${[...desired].sort().join(', ')} are Ready`,
    ),
    now,
  );
}

/** The ClusterStack's status: its releases, its source and its conditions. */
function stackStatus(
  view: StackView,
  summary: ReleaseSummary[],
  source: SourceStatus,
  conditions: Condition[],
): ClusterStackStatus {
  const { cs, suspended } = view;
  const generation = cs.metadata.generation;
  const readyReleases = summary.filter((s) => s.ready);
  const latestReady = readyReleases.at(-1);
  return {
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
    ...(latestReady !== undefined ? { latestRelease: latestReady.name } : {}),
    ...(readyReleases.length > 0 ? { usableVersions: readyReleases.map((s) => s.version).join(', ') } : {}),
    summary,
    source,
    // A suspended ClusterStack handles no reconcile request (as Flux's controllers skip suspended objects).
    ...lastHandledReconcileAt(cs, !suspended),
    conditions,
  };
}

/** A release that failed (Ready=False for its generation), as opposed to still progressing. */
function isFailed(release: ClusterStackRelease | undefined): boolean {
  if (release === undefined) return false;
  const ready = findCondition(release.status?.conditions, ConditionType.Ready);
  const reconciling = findCondition(release.status?.conditions, ConditionType.Reconciling);
  return ready?.status === 'False' && reconciling?.status !== 'True';
}
