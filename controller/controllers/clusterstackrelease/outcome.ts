// The end of a reconcile: the Events a human should see in `kubectl describe` (an invalid
// release, a failed read, Ready, a failed render), and when the release is looked at again.
import type { ClusterStackRelease } from '../../api/clusterstackrelease.ts';
import type { ClusterStackReleaseResult } from '../../reconcilers/clusterstackrelease.ts';
import type { ReleaseProviderInput } from '../../reconcilers/provider.ts';
import type { KubeObject } from '../../runtime/client.ts';
import type { ReconcileResult } from '../../runtime/controller.ts';
import type { Recorder } from '../../runtime/events.ts';
import { readyCondition } from '../common.ts';
import { fetchFailureOf, READ_PENDING_RECHECK_MS } from './backgroundreads.ts';
import { CLASS_RETRY_MS } from './classrender.ts';
import type { ReleaseRead } from './types.ts';
import { PROVIDER_RECHECK_MS, waitsOnProvider } from './users.ts';
import { DEPENDENCY_RETRY_MS } from './validator.ts';

/** Records the Events of a reconcile of `release` that read `read` and computed `result`. */
export function recordReleaseEvents(
  recorder: Pick<Recorder, 'event'>,
  release: ClusterStackRelease & KubeObject,
  read: Pick<ReleaseRead, 'stack' | 'fetchError' | 'renderedClass'>,
  result: Pick<ClusterStackReleaseResult, 'status'>,
): void {
  const { stack, fetchError, renderedClass } = read;
  const { tag } = release.spec;
  const deleting = release.metadata.deletionTimestamp !== undefined;
  if (stack !== undefined && !stack.ok) {
    void recorder.event(release, 'Warning', 'InvalidRelease', 'Validate', stack.errors.join('; '));
  }
  if (fetchError !== undefined) {
    const { reason, message } = fetchFailureOf(fetchError);
    void recorder.event(release, 'Warning', reason, 'Fetch', `reading tag ${tag} failed: ${message}`);
  }
  const wasReady = readyCondition(release.status)?.status === 'True';
  const ready = readyCondition(result.status);
  if (!deleting && !wasReady && ready?.status === 'True') {
    void recorder.event(release, 'Normal', 'Ready', 'Reconcile', ready.message ?? `release ${tag} is ready`);
  }
  if (renderedClass?.ok === false) {
    void recorder.event(release, 'Warning', renderedClass.reason, 'Render', renderedClass.message);
  }
}

/**
 * When the release is looked at again: a failed read is thrown (the controller's back-off); a read
 * in the background, an unreachable chart repository, a class not written or a provider kind not
 * served (yet) each wait their time; otherwise not (undefined).
 */
export function requeueOf(
  read: Pick<ReleaseRead, 'fetchError' | 'pending' | 'dependenciesUnreachable' | 'renderedClass'>,
  provider: ReleaseProviderInput | undefined,
): ReconcileResult | undefined {
  const { fetchError, pending, dependenciesUnreachable, renderedClass } = read;
  if (fetchError !== undefined) throw fetchError;
  if (pending) return { requeueAfter: READ_PENDING_RECHECK_MS };
  if (dependenciesUnreachable) return { requeueAfter: DEPENDENCY_RETRY_MS };
  if (renderedClass?.ok === false && renderedClass.reason !== 'InvalidRelease')
    return { requeueAfter: CLASS_RETRY_MS };
  // A provider kind not served (yet) or a cache not synced: look again (CRDs may be installed later).
  if (waitsOnProvider(provider)) return { requeueAfter: PROVIDER_RECHECK_MS };
  return undefined;
}
