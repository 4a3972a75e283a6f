// Applies what reconcileClusterStackRelease returns, in order: the in-use finalizer goes on before
// anything else is written, then the owned GitRepository, provider object and Kustomization
// (server-side apply; owner references let Kubernetes GC remove them with the release), the status,
// a deleted release's rendered cluster-class branch, and the finalizer comes off last.
import { type ClusterStackRelease, withoutImpact } from '../../api/clusterstackrelease.ts';
import type { GitRepository, Kustomization } from '../../api/flux.ts';
import { API_VERSION, FINALIZER_RELEASE_IN_USE } from '../../api/meta.ts';
import type { ClusterStackReleaseResult } from '../../reconcilers/clusterstackrelease.ts';
import type { ReleaseProviderInput } from '../../reconcilers/provider.ts';
import { isConflict, isNotFound, type KubeObject } from '../../runtime/client.ts';
import { noopRecorder } from '../../runtime/events.ts';
import { needsApply, sameJson } from '../common.ts';
import type { ClusterStackReleaseDeps } from './types.ts';

export type ApplierDeps = Pick<ClusterStackReleaseDeps, 'client' | 'recorder' | 'withShardLabel' | 'classes'>;

/** The objects the release has now, which the result is compared with. */
export interface ReleaseCurrent {
  gitRepository: (GitRepository & KubeObject) | undefined;
  kustomization: (Kustomization & KubeObject) | undefined;
  provider: ReleaseProviderInput | undefined;
}

export class ReleaseApplier {
  private readonly deps: ApplierDeps;

  constructor(deps: ApplierDeps) {
    this.deps = deps;
  }

  /** Writes `result` for `release`; false when the release is gone (nothing else was written). */
  async apply(
    release: ClusterStackRelease & KubeObject,
    result: ClusterStackReleaseResult,
    current: ReleaseCurrent,
    signal: AbortSignal,
  ): Promise<boolean> {
    const { deps } = this;
    const { client } = deps;
    const recorder = deps.recorder ?? noopRecorder;
    const shardLabel = <T extends KubeObject>(o: T): T => (deps.withShardLabel ? deps.withShardLabel(o) : o);
    const { gitRepository, kustomization, provider } = current;
    const namespace = release.metadata.namespace ?? 'default';
    const deleting = release.metadata.deletionTimestamp !== undefined;

    const have = release.metadata.finalizers ?? [];
    const want = result.finalizers;
    const sameFinalizers = have.length === want.length && want.every((f) => have.includes(f));
    const adding = want.some((f) => !have.includes(f));
    const setFinalizers = async (): Promise<boolean> => {
      try {
        await client.mergePatch(
          API_VERSION,
          'ClusterStackRelease',
          release.metadata.name,
          namespace,
          { metadata: { finalizers: want, resourceVersion: release.metadata.resourceVersion } },
          { signal },
        );
        return true;
      } catch (err) {
        if (isNotFound(err)) return false;
        throw err;
      }
    };
    // The in-use finalizer goes on before anything else is written ...
    if (adding && !(await setFinalizers())) return false;

    if (result.gitRepository !== undefined && (!deleting || gitRepository !== undefined)) {
      if (needsApply(gitRepository, result.gitRepository as GitRepository & KubeObject)) {
        await client.apply(shardLabel(result.gitRepository as GitRepository & KubeObject), {
          force: true,
          signal,
        });
      }
    }
    if (result.providerObject !== undefined) {
      const existing = provider?.object.state === 'found' ? provider.object.object : undefined;
      const desired = result.providerObject as KubeObject;
      if (needsApply(existing as KubeObject | undefined, desired)) {
        await client.apply(shardLabel(desired), { force: true, signal });
        if (existing === undefined)
          void recorder.event(
            release,
            'Normal',
            'ProviderObjectCreated',
            'Create',
            `created ${desired.kind} ${desired.metadata.name}; its ClusterClass is applied once the provider sets status.ready`,
          );
      }
    }
    if (result.kustomization !== undefined && (!deleting || kustomization !== undefined)) {
      if (needsApply(kustomization, result.kustomization as Kustomization & KubeObject)) {
        await client.apply(shardLabel(result.kustomization as Kustomization & KubeObject), {
          force: true,
          signal,
        });
      }
    }
    // status.impact is the impact controller's (its own field manager): not compared, not written.
    if (!sameJson(result.status, withoutImpact(release.status))) {
      try {
        await client.applyStatus(
          {
            apiVersion: API_VERSION,
            kind: 'ClusterStackRelease',
            metadata: { name: release.metadata.name, namespace },
            status: result.status,
          },
          { force: true, signal },
        );
      } catch (err) {
        if (!(deleting && (isNotFound(err) || isConflict(err)))) throw err;
      }
    }
    // A deleted release's rendered cluster-class branch goes before the release does (its
    // GitRepository names the branch; a native release's does not, so it costs nothing).
    const releasing = deleting && !want.includes(FINALIZER_RELEASE_IN_USE) && !sameFinalizers;
    const branch = gitRepository?.spec.ref?.branch;
    if (releasing && branch !== undefined && deps.classes !== undefined)
      await deps.classes.remove(namespace, release.metadata.name);
    // ... and comes off last, once nothing else needs writing.
    if (!adding && !sameFinalizers) await setFinalizers();
    return true;
  }
}
