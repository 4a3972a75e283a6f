// Provider-specific release objects (pure), the cluster-stack-operator's contract:
// ClusterStack.spec.providerRef names a <Provider>ClusterStackReleaseTemplate in the ClusterStack's
// namespace; per release stackflux creates a <Provider>ClusterStackRelease (the template's kind
// without "Template") named after the release, with the template's spec.template.spec, an owner
// reference to the ClusterStackRelease (Kubernetes GC removes it with the release) and annotations
// saying which release tree it is for. The provider's controller prepares what the release needs
// (node images, ...) and sets status.ready: true; until then the release's ClusterClass is not
// applied and the release is not usable by Clusters.
import type { ClusterStack } from '../api/clusterstack.ts';
import type { ClusterStackRelease } from '../api/clusterstackrelease.ts';
import {
  ANNOTATION_COMMIT,
  ANNOTATION_SOURCE_PATH,
  ANNOTATION_SOURCE_URL,
  ANNOTATION_TAG,
  type Condition,
  ConditionType,
  type ObjectMeta,
} from '../api/meta.ts';
import { ownerReferenceTo, releaseLabels } from '../releases/flux.ts';
import { findCondition } from '../runtime/conditions.ts';

export interface ProviderRef {
  apiVersion: string;
  kind: string;
  name: string;
}

/** A <Provider>ClusterStackReleaseTemplate as read from the cluster. */
export interface ProviderTemplate {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  spec?: { template?: { spec?: unknown } } & Record<string, unknown>;
}

/** A <Provider>ClusterStackRelease. */
export interface ProviderObject {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  spec?: unknown;
  status?: { ready?: unknown; observedGeneration?: unknown; conditions?: unknown } & Record<string, unknown>;
}

/** What a controller found when it looked a provider kind/object up (live: caches; offline: snapshot). */
export type ProviderLookup<T> =
  | { state: 'found'; object: T }
  | { state: 'notFound' }
  /** The API server does not serve this apiVersion/kind (CRD not installed, wrong apiVersion). */
  | { state: 'notServed'; apiVersion: string; kind: string }
  /** Not known yet (the cache of a newly watched kind has not synced); message says what is awaited. */
  | { state: 'pending'; message: string };

export const ProviderReason = {
  ProviderNotConfigured: 'ProviderNotConfigured',
  InvalidProviderRef: 'InvalidProviderRef',
  ProviderTemplateNotFound: 'ProviderTemplateNotFound',
  ProviderKindNotServed: 'ProviderKindNotServed',
  ProviderPending: 'ProviderPending',
  TemplateFound: 'TemplateFound',
  WaitingForProvider: 'WaitingForProvider',
  ProviderNotReady: 'ProviderNotReady',
  ProviderReady: 'ProviderReady',
} as const;

const TEMPLATE_SUFFIX = 'Template';

/** "DockerClusterStackReleaseTemplate" → "DockerClusterStackRelease". */
export function providerObjectKind(templateKind: string): string {
  return templateKind.endsWith(TEMPLATE_SUFFIX)
    ? templateKind.slice(0, -TEMPLATE_SUFFIX.length)
    : templateKind;
}

/** How a ClusterStack configures its provider. */
export type ProviderConfig =
  | { mode: 'none' }
  | { mode: 'ref'; ref: ProviderRef }
  | { mode: 'invalid'; reason: string; message: string };

/** noProvider wins (as in the cluster-stack-operator); neither field set is a configuration error. */
export function providerConfig(cs: ClusterStack): ProviderConfig {
  if (cs.spec.noProvider === true) return { mode: 'none' };
  const ref = cs.spec.providerRef;
  if (ref === undefined) {
    return {
      mode: 'invalid',
      reason: ProviderReason.ProviderNotConfigured,
      message:
        'neither spec.providerRef nor spec.noProvider is set: set providerRef to the ' +
        '<Provider>ClusterStackReleaseTemplate of your provider, or noProvider: true when the stack needs none',
    };
  }
  const missing = (['apiVersion', 'kind', 'name'] as const).filter((k) => (ref[k] ?? '') === '');
  if (missing.length > 0) {
    return {
      mode: 'invalid',
      reason: ProviderReason.InvalidProviderRef,
      message: `spec.providerRef lacks ${missing.join(', ')}`,
    };
  }
  const kind = ref.kind ?? '';
  if (!kind.endsWith(TEMPLATE_SUFFIX) || kind === TEMPLATE_SUFFIX) {
    return {
      mode: 'invalid',
      reason: ProviderReason.InvalidProviderRef,
      message: `spec.providerRef.kind ${kind} must name a <Provider>ClusterStackReleaseTemplate kind (ending in "Template")`,
    };
  }
  return { mode: 'ref', ref: { apiVersion: ref.apiVersion ?? '', kind, name: ref.name ?? '' } };
}

/** The ClusterStack's condition about its template, or a problem that must stop release changes. */
export function templateCondition(
  ref: ProviderRef,
  lookup: ProviderLookup<ProviderTemplate> | undefined,
  namespace: string,
): { status: Condition['status']; reason: string; message: string } {
  const what = `${ref.kind} ${namespace}/${ref.name} (${ref.apiVersion})`;
  if (lookup === undefined) {
    return { status: 'Unknown', reason: ProviderReason.ProviderPending, message: `looking up ${what}` };
  }
  switch (lookup.state) {
    case 'found':
      return { status: 'True', reason: ProviderReason.TemplateFound, message: `${what} found` };
    case 'notFound':
      return {
        status: 'False',
        reason: ProviderReason.ProviderTemplateNotFound,
        message: `${what} not found: create it (or fix spec.providerRef)`,
      };
    case 'notServed':
      return {
        status: 'False',
        reason: ProviderReason.ProviderKindNotServed,
        message:
          `the API server does not serve ${lookup.kind} in ${lookup.apiVersion}: install the provider's CRDs ` +
          '(or fix spec.providerRef.apiVersion/kind)',
      };
    case 'pending':
      return { status: 'Unknown', reason: ProviderReason.ProviderPending, message: lookup.message };
  }
}

/** The provider object of a release (name and kind only), if the release has a providerRef. */
export function providerObjectRef(release: ClusterStackRelease): ProviderRef | undefined {
  const ref = release.spec.providerRef;
  if (ref === undefined) return undefined;
  return { apiVersion: ref.apiVersion, kind: providerObjectKind(ref.kind), name: release.metadata.name };
}

function sortedRecord(r: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(r).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/**
 * The provider object of a release: the template's spec.template.spec, named after the release, in
 * its namespace, owned by it, annotated with the release's source URL, path, tag and the validated
 * commit (so the provider's controller reads the same tree, e.g. its node-images.yaml).
 */
export function desiredProviderObject(
  template: ProviderTemplate,
  release: ClusterStackRelease,
  commit: string,
): ProviderObject {
  const spec = template.spec?.template?.spec;
  const path = release.spec.source.path ?? '';
  return {
    apiVersion: template.apiVersion,
    kind: providerObjectKind(template.kind),
    metadata: {
      name: release.metadata.name,
      namespace: release.metadata.namespace ?? 'default',
      labels: releaseLabels(release.spec.clusterStack, release.metadata.name),
      annotations: sortedRecord({
        [ANNOTATION_SOURCE_URL]: release.spec.source.url,
        ...(path !== '' ? { [ANNOTATION_SOURCE_PATH]: path } : {}),
        [ANNOTATION_TAG]: release.spec.tag,
        [ANNOTATION_COMMIT]: commit,
      }),
      ownerReferences: [ownerReferenceTo(release)],
    },
    ...(spec !== undefined ? { spec: structuredClone(spec) } : {}),
  };
}

/**
 * Whether the provider made the object ready: status.ready true, or a Ready condition True; not
 * while status.observedGeneration (when the provider sets it) is behind the object's generation.
 */
export function providerObjectReady(obj: ProviderObject): { ready: boolean; detail: string } {
  const status = obj.status;
  const gen = obj.metadata.generation;
  const observed = status?.observedGeneration;
  if (typeof observed === 'number' && gen !== undefined && observed < gen) {
    return { ready: false, detail: `status is of generation ${observed}, the object is at ${gen}` };
  }
  if (status?.ready === true) return { ready: true, detail: 'status.ready is true' };
  const conditions = Array.isArray(status?.conditions) ? (status.conditions as Condition[]) : [];
  const ready = findCondition(conditions, ConditionType.Ready);
  if (ready?.status === 'True') return { ready: true, detail: 'its Ready condition is True' };
  if (ready !== undefined) {
    return { ready: false, detail: `Ready=${ready.status} (${ready.reason}: ${ready.message})` };
  }
  return { ready: false, detail: 'status.ready is not true yet' };
}

/** Why a ClusterAddon may not use this release yet (its provider object is not ready), or undefined. */
export function releaseProviderBlock(release: ClusterStackRelease): string | undefined {
  if (release.spec.providerRef === undefined) return undefined;
  const c = findCondition(release.status?.conditions, ConditionType.ProviderReady);
  if (c?.status === 'True') return undefined;
  return `release ${release.metadata.name} is not usable yet: ${c?.message ?? 'its provider object has not been checked yet'}`;
}

/** What the release controller found for the release's template and provider object. */
export interface ReleaseProviderInput {
  template: ProviderLookup<ProviderTemplate>;
  object: ProviderLookup<ProviderObject>;
}

export interface ProviderGate {
  /** The provider object to apply (server-side apply), if the template is known. */
  apply?: ProviderObject;
  ready: boolean;
  /** CamelCase reason for the release's ProviderReady condition (and Ready while waiting). */
  reason: string;
  /** Names the provider object and what is awaited. */
  message: string;
  /** true: the problem needs a user's fix (template or CRD missing), not the provider's work. */
  problem: boolean;
}

/**
 * The gate of a release with a providerRef: the provider object to write (from the template, once the
 * release's commit is validated) and whether its provider made it ready. A template that is gone or
 * of a kind no longer served does not remove an existing object: it keeps being read for readiness.
 */
export function providerGate(
  release: ClusterStackRelease,
  input: ReleaseProviderInput | undefined,
  commit: string | undefined,
): ProviderGate {
  const gate = evaluateGate(release, input, commit);
  // Not known yet (a cache syncing, e.g. after a restart): keep the last verdict instead of flapping.
  const previous = findCondition(release.status?.conditions, ConditionType.ProviderReady);
  if (gate.reason === ProviderReason.ProviderPending && previous?.status === 'True') {
    return { ready: true, reason: previous.reason, message: previous.message, problem: false };
  }
  return gate;
}

function evaluateGate(
  release: ClusterStackRelease,
  input: ReleaseProviderInput | undefined,
  commit: string | undefined,
): ProviderGate {
  const ref = providerObjectRef(release);
  const namespace = release.metadata.namespace ?? 'default';
  const templateRef = release.spec.providerRef;
  if (ref === undefined || templateRef === undefined) {
    return {
      ready: true,
      reason: ProviderReason.ProviderReady,
      message: 'no provider object',
      problem: false,
    };
  }
  const what = `${ref.kind} ${namespace}/${ref.name}`;
  const template = input?.template ?? { state: 'pending', message: `looking up ${templateRef.kind}` };
  const object = input?.object ?? { state: 'pending', message: `looking up ${ref.kind}` };
  // Written only when the object's current state is known (its cache synced).
  const apply =
    template.state === 'found' &&
    commit !== undefined &&
    (object.state === 'found' || object.state === 'notFound')
      ? desiredProviderObject(template.object, release, commit)
      : undefined;
  if (object.state === 'found') {
    const r = providerObjectReady(object.object);
    return r.ready
      ? {
          ...(apply ? { apply } : {}),
          ready: true,
          reason: ProviderReason.ProviderReady,
          message: `${what} is ready (${r.detail})`,
          problem: false,
        }
      : {
          ...(apply ? { apply } : {}),
          ready: false,
          reason: ProviderReason.WaitingForProvider,
          message: `waiting for the provider to make ${what} ready: ${r.detail}`,
          problem: false,
        };
  }
  if (object.state === 'pending') {
    return {
      ready: false,
      reason: ProviderReason.ProviderPending,
      message: `${what}: ${object.message}`,
      problem: false,
    };
  }
  if (object.state === 'notServed') {
    return {
      ready: false,
      reason: ProviderReason.ProviderKindNotServed,
      message: `cannot create ${what}: the API server does not serve ${object.kind} in ${object.apiVersion}; install the provider's CRDs`,
      problem: true,
    };
  }
  // The object does not exist yet.
  switch (template.state) {
    case 'found':
      return {
        ...(apply ? { apply } : {}),
        ready: false,
        reason: ProviderReason.WaitingForProvider,
        message: `creating ${what} from ${templateRef.kind} ${templateRef.name}; then waiting for its provider to set status.ready: true`,
        problem: false,
      };
    case 'notFound':
      return {
        ready: false,
        reason: ProviderReason.ProviderTemplateNotFound,
        message: `cannot create ${what}: ${templateRef.kind} ${namespace}/${templateRef.name} not found`,
        problem: true,
      };
    case 'notServed':
      return {
        ready: false,
        reason: ProviderReason.ProviderKindNotServed,
        message: `cannot create ${what}: the API server does not serve ${template.kind} in ${template.apiVersion}`,
        problem: true,
      };
    case 'pending':
      return {
        ready: false,
        reason: ProviderReason.ProviderPending,
        message: `${what}: ${template.message}`,
        problem: false,
      };
  }
}
