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
  type ReleaseTag,
  releaseOrder,
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

/**
 * The provider phase: the template ref to copy into releases, or why releases must not change
 * (a configuration problem, or the template not known yet), and the ProviderTemplateReady condition.
 */
function providerPhase(
  cs: ClusterStack,
  lookup: ProviderLookup<ProviderTemplate> | undefined,
): {
  ref?: ProviderRef;
  /** Releases are neither created nor deleted (fail closed). */
  hold?: { problem: boolean; reason: string; message: string };
  condition?: { status: Condition['status']; reason: string; message: string };
} {
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
  const { clusterStack: cs, listing, now } = input;
  const generation = cs.metadata.generation;
  const namespace = cs.metadata.namespace ?? 'default';
  const channel: Channel = cs.spec.channel ?? 'stable';
  const selector = {
    provider: cs.spec.provider,
    name: cs.spec.name,
    kubernetesVersion: cs.spec.kubernetesVersion,
    channel,
  };
  const isOurs = (t: ReleaseTag): boolean =>
    t.provider === selector.provider &&
    t.name === selector.name &&
    t.kubernetesVersion === selector.kubernetesVersion &&
    t.channel === channel;

  const existing = input.releases.filter((r) => ownedBy(r, cs)).sort(byName);
  const existingByName = new Map(existing.map((r) => [r.metadata.name, r]));

  // How many Clusters use each release of this stack (by ClusterClass name → tag). A count, not
  // a list: this runs on every poll over every Cluster of the namespace (10,000 and more), and
  // copying a growing list per Cluster was quadratic (about 400 MB of garbage at 10,000).
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

  // Tags of the listing.
  const times = listing?.ok === true ? listing.times : undefined;
  const compareReleaseTags = releaseOrder(times);
  const classified = listing?.ok === true ? classifyTags(listing.tags, selector, times) : undefined;
  const available = new Map((classified?.releases ?? []).map((t) => [t.tag, t]));
  const latest = classified?.releases.at(-1);

  // Pinned versions.
  const pinnedTags = new Set<string>();
  const missingPinned: string[] = [];
  for (const version of [...new Set(cs.spec.versions ?? [])].sort()) {
    const tag = formatReleaseTag(selector.provider, selector.name, selector.kubernetesVersion, version);
    const parsed = parseReleaseTag(tag);
    if (parsed.ok && isOurs(parsed.value)) pinnedTags.add(tag);
    if (classified !== undefined && !available.has(tag)) missingPinned.push(version);
  }

  const deleting = cs.metadata.deletionTimestamp !== undefined;
  const suspended = cs.spec.suspend === true;
  const autoSubscribe = cs.spec.autoSubscribe ?? true;
  const provider = providerPhase(cs, input.providerTemplate);
  // A provider problem freezes the releases as they are (deletion of the ClusterStack goes on).
  const frozen = suspended || (provider.hold !== undefined && !deleting);

  // Desired set (tags). Without a listing, keep what exists (never delete on a source error).
  const desired = new Set<string>();
  if (!deleting) {
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
          .flatMap((p) =>
            p.ok && isOurs(p.value) && compareReleaseTags(p.value, latest) < 0 ? [p.value] : [],
          )
          .sort(compareReleaseTags)
          .at(-1);
        if (readyOlder !== undefined) desired.add(readyOlder.tag);
      }
    }
  }

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

  // Status.
  const keptNames = new Set([...existing.map((r) => r.metadata.name), ...apply.map((r) => r.metadata.name)]);
  for (const d of del) keptNames.delete(d);
  const summaryTags = [...keptNames]
    .map((n) => parseReleaseTag(n))
    .flatMap((p) => (p.ok ? [p.value] : []))
    .sort(compareReleaseTags);
  const summary: ReleaseSummary[] = summaryTags.map((t) => {
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
      latest: latest?.tag === t.tag,
      pinned: pinnedTags.has(t.tag),
      inUse: clusters > 0,
      clusters,
    };
  });
  const readyReleases = summary.filter((s) => s.ready);
  const latestReady = readyReleases.at(-1);

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

  // The Rollout condition belongs to the rollout controller (its own field manager): not carried over.
  let conditions: Condition[] = (previous?.conditions ?? []).filter((c) => c.type !== ROLLOUT_CONDITION);
  const mark = (reason: string, message: string) => ({
    reason,
    message,
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
  });

  // Source condition (left as it was while suspended: the source is not listed).
  if (suspended) {
    // unchanged
  } else if (listing === undefined) {
    conditions = setCondition(
      conditions,
      {
        type: ConditionType.SourceReady,
        status: 'Unknown',
        ...mark(Reason.NotListed, `${source.url} has not been listed yet`),
      },
      now,
    );
  } else if (listing.ok) {
    const c = classified ?? { releases: [], malformed: [] };
    conditions = setCondition(
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
  } else {
    conditions = setCondition(
      conditions,
      { type: ConditionType.SourceReady, status: 'False', ...mark(listing.reason, listing.message) },
      now,
    );
  }

  // Provider template condition (absent with noProvider).
  conditions =
    provider.condition === undefined
      ? removeCondition(conditions, ConditionType.ProviderTemplateReady)
      : setCondition(
          conditions,
          {
            type: ConditionType.ProviderTemplateReady,
            status: provider.condition.status,
            ...mark(provider.condition.reason, provider.condition.message),
          },
          now,
        );
  if (input.inUseUnknown !== undefined && heldBack.length > 0) {
    conditions = setCondition(
      conditions,
      {
        type: GARBAGE_COLLECTION_CONDITION,
        status: 'False',
        ...mark(
          input.inUseUnknown.reason,
          `no release is deleted while not every Cluster can be seen: ${input.inUseUnknown.message}; kept until then: ${heldBack.join(', ')}`,
        ),
      },
      now,
    );
  } else {
    conditions = removeCondition(conditions, GARBAGE_COLLECTION_CONDITION);
  }

  // Summary conditions (Ready / Reconciling / Stalled), the most important problem first.
  const desiredSummaries = summary.filter((s) => desired.has(s.name));
  const failed = desiredSummaries.filter(
    (s) => !s.ready && existingByName.has(s.name) && isFailed(existingByName.get(s.name)),
  );
  const pending = desiredSummaries.filter((s) => !s.ready && !failed.includes(s));
  const latestName = latest?.tag;
  if (deleting) {
    const waiting = summary.filter((s) => s.inUse).map((s) => s.name);
    conditions = markReconciling(
      conditions,
      mark(
        Reason.Deleting,
        waiting.length > 0
          ? `deleting: releases in use are kept until their Clusters move: ${waiting.join(', ')}`
          : 'deleting unused releases',
      ),
      now,
    );
  } else if (suspended) {
    conditions = setCondition(
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
    conditions = removeCondition(conditions, ConditionType.Reconciling);
  } else if (provider.hold?.problem === true) {
    conditions = markNotReady(
      conditions,
      mark(
        provider.hold.reason,
        `${provider.hold.message}; no release is created or deleted until this is fixed`,
      ),
      now,
    );
    conditions = removeCondition(conditions, ConditionType.Reconciling);
  } else if (provider.hold !== undefined) {
    conditions = markReconciling(conditions, mark(provider.hold.reason, provider.hold.message), now);
  } else if (listing === undefined) {
    conditions = markReconciling(conditions, mark(Reason.Progressing, `listing ${source.url}`), now);
  } else if (!listing.ok) {
    conditions = markNotReady(
      conditions,
      mark(
        Reason.SourceUnavailable,
        `cannot list ${source.url}: ${listing.message}; existing releases are kept`,
      ),
      now,
    );
  } else if (missingPinned.length > 0) {
    conditions = markNotReady(
      conditions,
      mark(
        Reason.VersionNotFound,
        `pinned version${missingPinned.length > 1 ? 's' : ''} ${missingPinned.join(', ')} not found in ${source.url} ` +
          `(tags ${missingPinned.map((v) => formatReleaseTag(selector.provider, selector.name, selector.kubernetesVersion, v)).join(', ')}, channel ${channel})`,
      ),
      now,
    );
  } else if (desired.size === 0) {
    conditions = markNotReady(
      conditions,
      mark(
        Reason.NoReleaseFound,
        autoSubscribe
          ? `no ${channel} release of ${selector.provider}-${selector.name} for Kubernetes ${selector.kubernetesVersion} in ${source.url}`
          : 'autoSubscribe is false and no versions are pinned',
      ),
      now,
    );
  } else if (failed.length > 0) {
    conditions = markNotReady(
      conditions,
      mark(
        Reason.ReleaseNotReady,
        failed.map((s) => `${s.name}: ${s.message ?? s.reason ?? 'not ready'}`).join('; '),
      ),
      now,
    );
  } else if (pending.length > 0) {
    conditions = markReconciling(
      conditions,
      mark(
        Reason.Progressing,
        `waiting for release${pending.length > 1 ? 's' : ''} ${pending.map((s) => s.name).join(', ')} to become Ready`,
      ),
      now,
    );
  } else {
    conditions = markReady(
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

  const status: ClusterStackStatus = {
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
    ...(latestReady !== undefined ? { latestRelease: latestReady.name } : {}),
    ...(readyReleases.length > 0 ? { usableVersions: readyReleases.map((s) => s.version).join(', ') } : {}),
    summary,
    source,
    // A suspended ClusterStack handles no reconcile request (as Flux's controllers skip suspended objects).
    ...lastHandledReconcileAt(cs, !suspended),
    conditions,
  };
  return { apply: apply.sort(byName), delete: del.sort(), status };
}

/** A release that failed (Ready=False for its generation), as opposed to still progressing. */
function isFailed(release: ClusterStackRelease | undefined): boolean {
  if (release === undefined) return false;
  const ready = findCondition(release.status?.conditions, ConditionType.Ready);
  const reconciling = findCondition(release.status?.conditions, ConditionType.Reconciling);
  return ready?.status === 'False' && reconciling?.status !== 'True';
}
