// What every phase of the ClusterAddon reconcile starts from: the context of one reconcile (the
// input and the names derived from it) and the status helpers the phases share.
import type { ClusterAddonStatus } from '../../api/clusteraddon.ts';
import { type Condition, LABEL_ADDON, LABEL_CLUSTER } from '../../api/meta.ts';
import { markStalled } from '../../runtime/conditions.ts';
import {
  type ClusterAddonInput,
  type ClusterAddonResult,
  type Context,
  FINALIZER_FLEET_CLEANUP,
  type Target,
} from './types.ts';

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The fleet branch of one Cluster: `<prefix><namespace>/<cluster>`. */
export function fleetBranchName(prefix: string, namespace: string, cluster: string): string {
  return `${prefix}${namespace}/${cluster}`;
}

/** Flux's revision of a branch artifact. */
export function branchRevision(branch: string, commit: string): string {
  return `${branch}@sha1:${commit}`;
}

export function contextOf(input: ClusterAddonInput): Context {
  const { namespace, name } = input;
  const existing = input.clusterAddon;
  const otherFinalizers = (existing?.metadata.finalizers ?? []).filter((f) => f !== FINALIZER_FLEET_CLEANUP);
  return {
    input,
    namespace,
    name,
    existing,
    previous: existing?.status,
    branchName: fleetBranchName(input.fleetSettings.branchPrefix, namespace, name),
    otherFinalizers,
    withFinalizer: [...otherFinalizers, FINALIZER_FLEET_CLEANUP].sort(compareStrings),
    ownKustomizations: input.kustomizations
      .filter(
        (k) => k.metadata.labels?.[LABEL_CLUSTER] === name && k.metadata.labels?.[LABEL_ADDON] !== undefined,
      )
      .sort((a, b) => compareStrings(a.metadata.name, b.metadata.name)),
    ownHelmReleases: (input.helmReleases ?? [])
      .filter(
        (h) => h.metadata.labels?.[LABEL_CLUSTER] === name && h.metadata.labels?.[LABEL_ADDON] !== undefined,
      )
      .sort((a, b) => compareStrings(a.metadata.name, b.metadata.name)),
  };
}

export function markOf(ctx: Context, reason: string, message: string) {
  const generation = ctx.existing?.metadata.generation;
  return { reason, message, ...(generation !== undefined ? { observedGeneration: generation } : {}) };
}

/** The previous status with new conditions: nothing else changes. */
export function keepStatus(ctx: Context, conditions: Condition[]): ClusterAddonStatus {
  const generation = ctx.existing?.metadata.generation;
  return {
    ...(ctx.previous ?? {}),
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
    conditions,
  };
}

export function base(status: ClusterAddonStatus, finalizers: string[]): ClusterAddonResult {
  return { finalizers, status, deleteKustomizations: [], patches: [] };
}

/** Result of a failure the user must fix: Ready=False (Stalled), the rest as it was. */
export function stalled(ctx: Context, target: Target, reason: string, message: string): ClusterAddonResult {
  const conditions = markStalled(ctx.previous?.conditions, markOf(ctx, reason, message), ctx.input.now);
  return { ...base(keepStatus(ctx, conditions), ctx.withFinalizer), clusterAddon: target.clusterAddon };
}
