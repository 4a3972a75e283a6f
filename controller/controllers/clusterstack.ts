// The live ClusterStack controller: gathers the inputs of reconcileClusterStack from the informer
// caches and the source pollers, calls it with `now`, and applies what it returns: desired
// ClusterStackReleases (server-side apply, owned by the ClusterStack), deletions, status.
import type { ClusterStack, ClusterStackStatus } from '../api/clusterstack.ts';
import type { ClusterStackRelease } from '../api/clusterstackrelease.ts';
import { API_VERSION } from '../api/meta.ts';
import { withoutRolloutStatus } from '../api/rollout.ts';
import { reconcileClusterStack, sourceUrl } from '../reconcilers/clusterstack.ts';
import { providerConfig } from '../reconcilers/provider.ts';
import type { KubeClient, KubeObject } from '../runtime/client.ts';
import type { Clock } from '../runtime/clock.ts';
import type { ReconcileContext, ReconcileResult } from '../runtime/controller.ts';
import { noopRecorder, type Recorder } from '../runtime/events.ts';
import type { Informer } from '../runtime/informer.ts';
import type { SourcePollers, SourceRef } from '../sources/poller.ts';
import type { ClusterUseView } from './clusterview.ts';
import { needsApply, sameJson } from './common.ts';
import { parseDuration } from './duration.ts';
import { namespaceLabelsOf } from './namespaces.ts';
import type { ProviderKinds } from './provider.ts';
import { listSourceOnRequest } from './reconcilerequest.ts';

export const NAMESPACE_INDEX = 'namespace';

export interface ClusterStackDeps {
  client: KubeClient;
  /** --github-api-url: github sources are cloned from that GitHub (default github.com). */
  githubApiUrl?: string;
  clock: Clock;
  pollers: SourcePollers;
  clusterStacks: Informer<ClusterStack & KubeObject>;
  releases: Informer<ClusterStackRelease & KubeObject>;
  /** Which Clusters (of every namespace and shard) use which ClusterClass; incomplete → no GC. */
  clusterView: Pick<ClusterUseView, 'usingNamespace' | 'gap'>;
  /** Poll interval when the ClusterStack sets none (ms). */
  defaultIntervalMs: number;
  /** Events for `kubectl describe` (default: none). */
  recorder?: Recorder;
  /** Adds the manager's shard label to created objects (default: unchanged). */
  withShardLabel?: <T extends KubeObject>(obj: T) => T;
  /** Caches of provider kinds (providerRef); without it a providerRef stays "looking up". */
  providers?: ProviderKinds;
  /** Namespaces (labels): whether a Cluster of another namespace is served (clusterNamespaceSelector). */
  namespaces?: Informer<KubeObject>;
}

export function sourceRefOf(cs: ClusterStack, githubApiUrl?: string): SourceRef {
  const secret =
    cs.spec.source.git?.secretRef ?? cs.spec.source.github?.secretRef ?? cs.spec.source.oci?.secretRef;
  return {
    url: sourceUrl(cs, githubApiUrl),
    namespace: cs.metadata.namespace ?? 'default',
    ...(secret !== undefined ? { secretName: secret.name } : {}),
    ...(cs.spec.source.github !== undefined
      ? { github: { owner: cs.spec.source.github.owner, repo: cs.spec.source.github.repo } }
      : {}),
    ...(cs.spec.source.oci?.insecure === true ? { insecure: true } : {}),
  };
}

/**
 * How long a release must have been found unused, in every decision, before it is deleted. The
 * in-use view is a watch cache: a Cluster created just before a ClusterStack change can reach it
 * after the ClusterStack's event (separate watch streams, no order between them), and a release
 * deleted in that gap would be gone for good. Kubernetes' own garbage collector re-reads the owner
 * live before it deletes; a release's users cannot be read live without listing every Cluster, so
 * the decision is repeated after this grace instead, by which time the view has caught up.
 */
export const RELEASE_GC_GRACE_MS = 10_000;

/** Since when each release (by ClusterStack key and release name) has been found unused. */
export class UnusedSince {
  private readonly since = new Map<string, Map<string, number>>();

  /**
   * Of the releases `unused` now, those unused for at least the grace (to delete now), and the ms
   * until the next one is due. Releases of this stack no longer unused are forgotten.
   */
  due(stackKey: string, unused: readonly string[], now: number): { names: string[]; nextMs?: number } {
    const prev = this.since.get(stackKey) ?? new Map<string, number>();
    const next = new Map<string, number>();
    const names: string[] = [];
    let nextMs: number | undefined;
    for (const name of unused) {
      const since = prev.get(name) ?? now;
      const left = since + RELEASE_GC_GRACE_MS - now;
      if (left <= 0) {
        names.push(name);
        continue;
      }
      next.set(name, since);
      nextMs = Math.min(nextMs ?? left, left);
    }
    if (next.size > 0) this.since.set(stackKey, next);
    else this.since.delete(stackKey);
    return { names, ...(nextMs !== undefined ? { nextMs } : {}) };
  }

  forget(stackKey: string): void {
    this.since.delete(stackKey);
  }
}

export function clusterStackReconciler(deps: ClusterStackDeps) {
  const unusedSince = new UnusedSince();
  return async (key: string, ctx: ReconcileContext): Promise<ReconcileResult | undefined> => {
    const { client, pollers } = deps;
    const recorder = deps.recorder ?? noopRecorder;
    const cs = deps.clusterStacks.get(key);
    if (cs === undefined) {
      pollers.unsubscribe(key);
      unusedSince.forget(key);
      return undefined;
    }
    const namespace = cs.metadata.namespace ?? 'default';
    const intervalMs = parseDuration(cs.spec.interval) ?? deps.defaultIntervalMs;
    if (cs.metadata.deletionTimestamp === undefined && cs.spec.suspend !== true) {
      pollers.subscribe(key, { ...sourceRefOf(cs, deps.githubApiUrl), intervalMs });
    } else {
      pollers.unsubscribe(key);
    }
    await listSourceOnRequest(pollers, key, cs, ctx.log);
    const listing = pollers.listing(key);
    if (
      listing === undefined &&
      cs.status?.source?.lastListedTime !== undefined &&
      cs.metadata.deletionTimestamp === undefined &&
      cs.spec.suspend !== true
    ) {
      // This process has not listed the source yet (just started, or the source URL changed);
      // the status shows the last listing. Deciding now would write "listing…" over a good status
      // and back again: the poller enqueues this key once its listing lands.
      ctx.log.debug('waiting for the first listing of the source');
      return undefined;
    }
    const releases = deps.releases.byIndex(NAMESPACE_INDEX, namespace);
    const clusters = deps.clusterView.usingNamespace(namespace);
    const gap = deps.clusterView.gap();
    const foreign = new Set(
      (clusters ?? []).flatMap((c) => (c.clusterNamespace !== undefined ? [c.clusterNamespace] : [])),
    );
    const namespaceLabels =
      deps.namespaces !== undefined && foreign.size > 0
        ? namespaceLabelsOf(deps.namespaces, foreign)
        : undefined;
    const provider = providerConfig(cs);
    const providerTemplate =
      provider.mode === 'ref' && deps.providers !== undefined
        ? await deps.providers.template(provider.ref, namespace)
        : undefined;
    const result = reconcileClusterStack({
      clusterStack: cs,
      ...(deps.githubApiUrl !== undefined ? { githubApiUrl: deps.githubApiUrl } : {}),
      listing,
      releases,
      clusters: clusters ?? [],
      ...(clusters === undefined && gap !== undefined ? { inUseUnknown: gap } : {}),
      ...(namespaceLabels !== undefined ? { namespaceLabels } : {}),
      ...(providerTemplate !== undefined ? { providerTemplate } : {}),
      now: new Date(deps.clock.now()),
    });

    for (const desired of result.apply) {
      const existing = deps.releases.getByName(desired.metadata.name, namespace);
      if (!needsApply(existing, desired as ClusterStackRelease & KubeObject)) continue;
      ctx.log.info({ release: desired.metadata.name }, existing ? 'updating release' : 'creating release');
      const obj = desired as ClusterStackRelease & KubeObject;
      await client.apply(deps.withShardLabel ? deps.withShardLabel(obj) : obj, {
        force: true,
        signal: ctx.signal,
      });
      if (existing === undefined) {
        void recorder.event(
          cs,
          'Normal',
          'ReleaseCreated',
          'Create',
          `release ${desired.spec.tag} discovered: created ClusterStackRelease ${desired.metadata.name}`,
        );
      }
    }
    const gc = unusedSince.due(key, result.delete, deps.clock.now());
    for (const name of gc.names) {
      const existing = deps.releases.getByName(name, namespace);
      if (existing?.metadata.deletionTimestamp !== undefined) continue;
      ctx.log.info({ release: name }, 'deleting release');
      await client.delete(API_VERSION, 'ClusterStackRelease', name, namespace, {
        propagationPolicy: 'Background',
        ...(existing?.metadata.uid ? { preconditions: { uid: existing.metadata.uid } } : {}),
        signal: ctx.signal,
      });
      void recorder.event(
        cs,
        'Normal',
        'ReleaseGarbageCollected',
        'Delete',
        `deleted ClusterStackRelease ${name}: not pinned, not the latest and not used by any Cluster`,
      );
    }
    if (listing !== undefined && !listing.ok && cs.metadata.deletionTimestamp === undefined) {
      void recorder.event(
        cs,
        'Warning',
        'SourceUnavailable',
        'List',
        `${sourceUrl(cs, deps.githubApiUrl)}: ${listing.reason}: ${listing.message}`,
      );
    }
    // status.rollout and the Rollout condition are the rollout controller's (controllers/rollout.ts).
    if (!sameJson(result.status, withoutRolloutStatus(cs.status ?? {}))) {
      await client.applyStatus(
        {
          apiVersion: API_VERSION,
          kind: 'ClusterStack',
          metadata: { name: cs.metadata.name, namespace },
          status: result.status satisfies ClusterStackStatus,
        },
        { force: true, signal: ctx.signal },
      );
    }
    return { requeueAfter: Math.min(intervalMs, gc.nextMs ?? intervalMs) };
  };
}
