// The BeforeClusterUpgrade decision (pure): Cluster API calls the hook after a Cluster's
// spec.topology.version changed and before the control plane moves; stackflux answers "retry in
// 10 s" until the target release's BeforeClusterUpgrade addon stage is applied and Ready in that
// workload cluster, so new addons land before the control plane moves (what the
// cluster-stack-operator does, extension/hooks.go). Unlike CSO the hook changes nothing: the
// ClusterAddon controller already renders the release the Cluster's class names; the hook only
// reads how far it got.
//
// Answers:
// - Success: the class is no cluster stack release, the versions are equal, the release has no
//   BeforeClusterUpgrade stage, or the stage is Ready.
// - Success + retryAfterSeconds 10 + a message saying what is waited for: the stage is not
//   rendered or applied yet, not Ready yet, or its state could not be read (transient).
// - Failure + message: the stage cannot become Ready without a change by someone (the ClusterAddon
//   is Stalled: invalid release, render failure, ...). Cluster API reports the message on the
//   Cluster and calls again with back-off.
//
// Anyone who reaches the port may ask about any Cluster (Cluster API sends no credentials), so an
// answer names only addons and condition reasons, never a condition's message (a render error may
// quote values or a release's files): the ClusterAddon, readable by those allowed, has the rest.

import type { ClusterAddon } from '../api/clusteraddon.ts';
import {
  BEFORE_CLUSTER_UPGRADE_HANDLER,
  BEFORE_CLUSTER_UPGRADE_HOOK,
  type BeforeClusterUpgradeRequest,
  type BeforeClusterUpgradeResponse,
  type DiscoveryResponse,
  HOOKS_API_VERSION,
  type HookRetryResponse,
  RETRY_AFTER_SECONDS,
} from '../api/runtimehooks.ts';
import { tagForClusterClassName } from '../releases/tags.ts';
import { clusterUse } from './clusterstack.ts';

/** The addon stage of a cluster-stack-operator release (clusteraddon.yaml) waited for. */
export const BEFORE_CLUSTER_UPGRADE_STAGE = 'BeforeClusterUpgrade';
/** Messages are cut to this (they end up in the Cluster's conditions). */
export const MAX_MESSAGE = 1024;

/** The upgrade a BeforeClusterUpgradeRequest announces, as far as the decision needs it. */
export interface UpgradeTarget {
  namespace: string;
  cluster: string;
  /** The ClusterClass the Cluster's topology names now (the class it moves to); undefined: none. */
  className: string | undefined;
  /** The release that class is (its tag), undefined when the class is no cluster stack release. */
  release: string | undefined;
  fromKubernetesVersion: string;
  toKubernetesVersion: string;
}

/**
 * What stackflux knows of a release's BeforeClusterUpgrade stage in one workload cluster: the
 * input the ClusterAddon side feeds (today read from ClusterAddon status, stageFromClusterAddon).
 */
export type UpgradeStage =
  /** Nothing to wait for (the release has no such stage); `why` says so in the answer. */
  | { kind: 'NotApplicable'; why: string }
  /** The stage is not rendered or applied for this release yet. */
  | { kind: 'Pending'; why: string }
  /** Applied (at least in part), these addons are not Ready yet ("name (reason)"). */
  | { kind: 'Applied'; notReady: readonly string[] }
  | { kind: 'Ready' }
  /**
   * It cannot become Ready without a change: reason and message of the failure (the message is
   * for the rollout's status in the tenant's namespace; the hook's answer never repeats it).
   */
  | { kind: 'Failed'; reason: string; message: string }
  /** The state could not be read (an API error): asked again later. */
  | { kind: 'Unknown'; why: string };

/** The live source of UpgradeStage (controllers/upgradehook.ts reads ClusterAddons). */
export interface UpgradeStageLookup {
  stageOf(target: UpgradeTarget & { release: string }, signal?: AbortSignal): Promise<UpgradeStage>;
}

export type Parsed<T> = { ok: true; value: T } | { ok: false; message: string };

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
/** Longer than any Kubernetes version string; a bound on what a message repeats. */
const MAX_VERSION = 128;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * A BeforeClusterUpgradeRequest body → the upgrade it announces. Unknown fields are ignored (as
 * Cluster API's own server, which unmarshals into the Go type); apiVersion and kind, when given,
 * must be the hook's; the Cluster's name and namespace must be Kubernetes names.
 */
export function parseBeforeClusterUpgradeRequest(body: Buffer | string): Parsed<UpgradeTarget> {
  let json: unknown;
  try {
    json = JSON.parse(typeof body === 'string' ? body : body.toString('utf8'));
  } catch (err) {
    return {
      ok: false,
      message: `error unmarshalling request: ${err instanceof Error ? err.message : String(err)}`,
    };
  }
  if (!isRecord(json)) return { ok: false, message: 'error unmarshalling request: not a JSON object' };
  const request = json as Partial<Record<keyof BeforeClusterUpgradeRequest, unknown>>;
  if (request.apiVersion !== undefined && request.apiVersion !== HOOKS_API_VERSION)
    return { ok: false, message: `apiVersion must be ${HOOKS_API_VERSION}` };
  if (request.kind !== undefined && request.kind !== 'BeforeClusterUpgradeRequest')
    return { ok: false, message: 'kind must be BeforeClusterUpgradeRequest' };
  const cluster = request.cluster;
  const metadata = isRecord(cluster) ? cluster.metadata : undefined;
  if (!isRecord(metadata)) return { ok: false, message: 'request has no cluster.metadata' };
  const { name, namespace } = metadata;
  if (typeof name !== 'string' || name.length > 253 || !DNS1123_SUBDOMAIN.test(name))
    return { ok: false, message: 'cluster.metadata.name is not a Kubernetes object name' };
  if (typeof namespace !== 'string' || namespace.length > 63 || !DNS1123_LABEL.test(namespace))
    return { ok: false, message: 'cluster.metadata.namespace is not a namespace name' };
  const versions: string[] = [];
  for (const field of ['fromKubernetesVersion', 'toKubernetesVersion'] as const) {
    const v = request[field];
    if (typeof v !== 'string' || v === '' || v.length > MAX_VERSION || /[^\x21-\x7e]/.test(v))
      return { ok: false, message: `${field} must be a Kubernetes version` };
    versions.push(v);
  }
  const className = clusterUse(cluster)?.className;
  return {
    ok: true,
    value: {
      namespace,
      cluster: name,
      className,
      release: className === undefined ? undefined : tagForClusterClassName(className)?.tag,
      fromKubernetesVersion: versions[0] ?? '',
      toKubernetesVersion: versions[1] ?? '',
    },
  };
}

function cut(message: string): string {
  return message.length <= MAX_MESSAGE ? message : `${message.slice(0, MAX_MESSAGE - 1)}…`;
}

function respond(status: 'Success' | 'Failure', message: string, retryAfterSeconds = 0): HookRetryResponse {
  return { status, message: cut(message), retryAfterSeconds };
}

/** The hook's answer for this upgrade, given the target release's stage (undefined: no release). */
export function decideBeforeClusterUpgrade(
  target: UpgradeTarget,
  stage: UpgradeStage | undefined,
): HookRetryResponse {
  const cluster = `Cluster ${target.namespace}/${target.cluster}`;
  if (target.release === undefined || stage === undefined)
    return respond(
      'Success',
      target.className === undefined
        ? `${cluster} has no ClusterClass: nothing to wait for`
        : `ClusterClass ${target.className} is not a cluster stack release: nothing to wait for`,
    );
  if (target.fromKubernetesVersion === target.toKubernetesVersion)
    return respond(
      'Success',
      `${cluster} stays at Kubernetes ${target.toKubernetesVersion}: nothing to wait for`,
    );
  const stageName = `the ${BEFORE_CLUSTER_UPGRADE_STAGE} stage of release ${target.release}`;
  switch (stage.kind) {
    case 'NotApplicable':
      return respond('Success', `${stage.why}: nothing to wait for`);
    case 'Ready':
      return respond('Success', `${stageName} is Ready in ${cluster}`);
    case 'Pending':
      return respond(
        'Success',
        `waiting for ${stageName} to be applied to ${cluster}: ${stage.why}`,
        RETRY_AFTER_SECONDS,
      );
    case 'Applied':
      return respond(
        'Success',
        `waiting for ${stageName} to be Ready in ${cluster}: not Ready: ${stage.notReady.join(', ')}`,
        RETRY_AFTER_SECONDS,
      );
    case 'Unknown':
      return respond(
        'Success',
        `waiting for ${stageName} in ${cluster}: its state could not be read: ${stage.why}`,
        RETRY_AFTER_SECONDS,
      );
    case 'Failed':
      return respond(
        'Failure',
        `${stageName} cannot become Ready in ${cluster}: ${stage.reason} (the ClusterAddon's Stalled condition says why)`,
      );
  }
}

/**
 * What a ClusterAddon says of `release`'s BeforeClusterUpgrade stage. Addons carry their stage in
 * status.addons[].stage (set by the ClusterAddon side for cluster-stack-operator releases); a
 * release none of whose addons has a stage has none (stackflux's own format, CSO's old layout).
 * Until the ClusterAddon has taken up the release (spec, observedGeneration, status.release), the
 * release's addons, and so its stages, are not known yet: Pending.
 */
export function stageFromClusterAddon(ca: ClusterAddon | undefined, release: string): UpgradeStage {
  if (ca === undefined) return { kind: 'Pending', why: 'its ClusterAddon does not exist yet' };
  const name = `ClusterAddon ${ca.metadata.namespace ?? ''}/${ca.metadata.name ?? ''}`;
  if (ca.spec.release !== release)
    return { kind: 'Pending', why: `${name} is still at release ${ca.spec.release ?? '(none)'}` };
  const generation = ca.metadata.generation;
  if (generation !== undefined && ca.status?.observedGeneration !== generation)
    return { kind: 'Pending', why: `${name} generation ${generation} is not reconciled yet` };
  const conditions = ca.status?.conditions ?? [];
  const stalled = conditions.find((c) => c.type === 'Stalled' && c.status === 'True');
  if (stalled !== undefined) return { kind: 'Failed', reason: stalled.reason, message: stalled.message };
  if (ca.status?.release !== release) {
    const ready = conditions.find((c) => c.type === 'Ready');
    return {
      kind: 'Pending',
      why: `the addons of release ${release} are not committed yet${ready?.reason ? ` (${ready.reason})` : ''}`,
    };
  }
  const addons = ca.status?.addons ?? [];
  if (!addons.some((a) => a.stage !== undefined))
    return { kind: 'NotApplicable', why: `release ${release} has no addon stages` };
  const stage = addons.filter((a) => a.stage === BEFORE_CLUSTER_UPGRADE_STAGE);
  if (stage.length === 0)
    return { kind: 'NotApplicable', why: `release ${release} has no ${BEFORE_CLUSTER_UPGRADE_STAGE} stage` };
  const notReady = stage
    .filter((a) => a.release !== release || !a.ready)
    .map((a) =>
      a.release !== release ? `${a.name} (not applied yet)` : `${a.name}${a.reason ? ` (${a.reason})` : ''}`,
    );
  if (notReady.length === 0) return { kind: 'Ready' };
  if (stage.every((a) => a.release !== release))
    return { kind: 'Pending', why: `not applied yet: ${stage.map((a) => a.name).join(', ')}` };
  return { kind: 'Applied', notReady };
}

/** The whole hook response for a decision. */
export function beforeClusterUpgradeResponse(r: HookRetryResponse): BeforeClusterUpgradeResponse {
  return { apiVersion: HOOKS_API_VERSION, kind: 'BeforeClusterUpgradeResponse', ...r };
}

/** The Discovery answer: the one handler, failurePolicy Fail (an upgrade waits for stackflux, as with CSO). */
export function discoveryResponse(): DiscoveryResponse {
  return {
    apiVersion: HOOKS_API_VERSION,
    kind: 'DiscoveryResponse',
    status: 'Success',
    handlers: [
      {
        name: BEFORE_CLUSTER_UPGRADE_HANDLER,
        requestHook: { apiVersion: HOOKS_API_VERSION, hook: BEFORE_CLUSTER_UPGRADE_HOOK },
        timeoutSeconds: 10,
        failurePolicy: 'Fail',
      },
    ],
  };
}
