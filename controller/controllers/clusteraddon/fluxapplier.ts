// Applies what one reconcile of a Cluster returns, in passes: the ClusterAddon (owned by the
// Cluster, with our finalizer in the same apply), the deletion patches, then the Cluster's
// GitRepository and addon Kustomizations (owned by the ClusterAddon) and the deletes. When a pass
// wrote what the reconcile reads (the ClusterAddon it was waiting for, new Kustomizations), the
// reconcile runs again on the written objects, at most three passes, so the status written after
// them is the state the next event would show anyway: one status write instead of one per
// intermediate state. The finalizers as the result wants them are set last, by the caller.
import type { ClusterAddon } from '../../api/clusteraddon.ts';
import {
  FLUX_KUSTOMIZE_API_VERSION,
  FLUX_SOURCE_API_VERSION,
  type GitRepository,
  type Kustomization,
} from '../../api/flux.ts';
import { API_VERSION, LABEL_CLUSTER } from '../../api/meta.ts';
import {
  type ClusterAddonInput,
  type ClusterAddonResult,
  FINALIZER_FLEET_CLEANUP,
} from '../../reconcilers/clusteraddon.ts';
import { clusterGitRepositoryName } from '../../releases/flux.ts';
import { isNotFound, type KubeClient } from '../../runtime/client.ts';
import { isSubset } from '../common.ts';
import type { Obj } from './types.ts';

/** At most this many apply passes per reconcile. */
export const MAX_PASSES = 3;

/** JSON without undefined members (what the API server would store). */
function plain<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}

/** Whether applying desired would change existing (labels, annotations, owners, spec). */
export function needsApply(existing: Obj | undefined, desired: Obj): boolean {
  if (existing === undefined) return true;
  const { metadata, status: _status, ...rest } = plain(desired);
  const { ownerReferences, labels, annotations } = metadata;
  return !isSubset(plain({ ...rest, metadata: { ownerReferences, labels, annotations } }), existing);
}

/** The Flux objects of one Cluster as last read or written in this reconcile. */
export interface FluxState {
  gitRepository: (GitRepository & Obj) | undefined;
  kustomizations: Map<string, Kustomization & Obj>;
}

/** Runs the pure reconcile (with its renders) on an input. */
export type Decide = (input: ClusterAddonInput) => Promise<ClusterAddonResult | undefined>;

export interface FluxObjectApplierOptions {
  client: Pick<KubeClient, 'apply' | 'mergePatch' | 'delete'>;
  /** The ClusterAddon with this manager's shard label. */
  withShardLabel: <T extends Obj>(o: T) => T;
  /** A Flux object with the shard label its informer selects. */
  withOwnShard: <T extends Obj>(o: T) => T;
  /** The cached GitRepository "namespace/name", if any. */
  gitRepository: (key: string) => (GitRepository & Obj) | undefined;
}

/** What the passes leave: the ClusterAddon as the API server holds it, the last input and result. */
export interface Applied {
  current: (ClusterAddon & Obj) | undefined;
  input: ClusterAddonInput;
  result: ClusterAddonResult;
}

export class FluxObjectApplier {
  private readonly opts: FluxObjectApplierOptions;

  constructor(opts: FluxObjectApplierOptions) {
    this.opts = opts;
  }

  /**
   * 1–3. The ClusterAddon (with its finalizer; not while deleting), deletion patches, the Flux
   * objects; again on the written objects while a pass wrote what the reconcile reads.
   */
  async applyPasses(
    namespace: string,
    name: string,
    deleting: boolean,
    first: { input: ClusterAddonInput; result: ClusterAddonResult },
    decide: Decide,
    signal: AbortSignal,
  ): Promise<Applied> {
    let { input, result } = first;
    let current = input.clusterAddon as (ClusterAddon & Obj) | undefined;
    let flux: FluxState = {
      gitRepository: this.opts.gitRepository(`${namespace}/${clusterGitRepositoryName(name)}`),
      kustomizations: new Map(input.kustomizations.map((k) => [k.metadata.name, k as Kustomization & Obj])),
    };
    for (let pass = 1; ; pass++) {
      const before = current;
      if (!deleting) current = await this.applyClusterAddon(result, current, signal);
      await this.applyPatches(result, signal);
      const applied = await this.applyFluxObjects(namespace, name, result, flux, signal);
      flux = applied.state;
      if (pass >= MAX_PASSES || current === undefined || (before === current && !applied.created)) break;
      input = { ...input, clusterAddon: current, kustomizations: [...flux.kustomizations.values()] };
      const again = await decide(input);
      if (again === undefined) break;
      result = again;
    }
    return { current, input, result };
  }

  /**
   * The ClusterAddon (owned by the Cluster) with our finalizer in the same apply: the finalizer is
   * there before any fleet file, without a write of its own. Returns it as the API server holds it.
   */
  async applyClusterAddon(
    result: ClusterAddonResult,
    existing: (ClusterAddon & Obj) | undefined,
    signal: AbortSignal,
  ): Promise<(ClusterAddon & Obj) | undefined> {
    if (result.clusterAddon === undefined) return existing;
    const desired = this.opts.withShardLabel(result.clusterAddon as ClusterAddon & Obj);
    const ours = result.finalizers.filter((f) => f === FINALIZER_FLEET_CLEANUP);
    const missing = ours.some((f) => !(existing?.metadata.finalizers ?? []).includes(f));
    if (!missing && !needsApply(existing, desired)) return existing;
    return this.opts.client.apply(
      { ...desired, metadata: { ...desired.metadata, ...(ours.length > 0 ? { finalizers: ours } : {}) } },
      { force: true, signal },
    );
  }

  /** The finalizers as the result wants them (a merge patch of the list, leased on the resourceVersion). */
  async setFinalizers(
    current: ClusterAddon & Obj,
    finalizers: string[],
    signal: AbortSignal,
  ): Promise<(ClusterAddon & Obj) | undefined> {
    try {
      return await this.opts.client.mergePatch<ClusterAddon & Obj>(
        API_VERSION,
        'ClusterAddon',
        current.metadata.name ?? '',
        current.metadata.namespace ?? '',
        { metadata: { finalizers, resourceVersion: current.metadata.resourceVersion } },
        { signal },
      );
    } catch (err) {
      if (!isNotFound(err)) throw err;
      return undefined;
    }
  }

  /** Deletion patches (deletionPolicy Orphan) before anything goes away. */
  async applyPatches(result: ClusterAddonResult, signal: AbortSignal): Promise<void> {
    for (const p of result.patches) {
      try {
        await this.opts.client.mergePatch(p.apiVersion, p.kind, p.name, p.namespace, p.patch, { signal });
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    }
  }

  /**
   * The Cluster's GitRepository and addon Kustomizations (only those that differ from `known`)
   * and the deletes. Returns the objects as known afterwards (the API server's answers) and
   * whether this wrote a new Kustomization.
   */
  async applyFluxObjects(
    namespace: string,
    name: string,
    result: ClusterAddonResult,
    known: FluxState,
    signal: AbortSignal,
  ): Promise<{ state: FluxState; created: boolean }> {
    const { client, withOwnShard } = this.opts;
    let gitRepository = known.gitRepository;
    if (result.gitRepository !== undefined) {
      const desired = withOwnShard(result.gitRepository as GitRepository & Obj);
      if (needsApply(gitRepository, desired)) {
        gitRepository = await client.apply(desired, { force: true, signal });
      }
    }
    const staleRepo = result.deleteGitRepository;
    const stale = staleRepo !== undefined ? this.opts.gitRepository(`${namespace}/${staleRepo}`) : undefined;
    if (staleRepo !== undefined && stale?.metadata.labels?.[LABEL_CLUSTER] === name) {
      await client.delete(FLUX_SOURCE_API_VERSION, 'GitRepository', staleRepo, namespace, { signal });
    }
    const ks = new Map(known.kustomizations);
    let created = false;
    for (const k of result.kustomizations ?? []) {
      const desired = withOwnShard(k as Kustomization & Obj);
      const kname = desired.metadata.name ?? '';
      const have = ks.get(kname);
      if (needsApply(have, desired)) {
        ks.set(kname, await client.apply(desired, { force: true, signal }));
        created ||= have === undefined;
      }
    }
    for (const kname of result.deleteKustomizations) {
      await client.delete(FLUX_KUSTOMIZE_API_VERSION, 'Kustomization', kname, namespace, { signal });
      ks.delete(kname);
    }
    return { state: { gitRepository, kustomizations: ks }, created };
  }
}
