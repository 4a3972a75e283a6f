// The live ClusterStackRelease controller: validates the release at its pinned commit (status.commit;
// before a pin, the commit the source poller or ls-remote lists for the tag), reading the release
// tree at that commit (fetched from Git objects, cached by commit on disk, validation cached in
// memory), passes where the tag points now (moved-tag detection), calls reconcileClusterStackRelease with `now`,
// and applies what it returns: the in-use finalizer, the owned GitRepository + Kustomization
// (server-side apply; owner references let Kubernetes GC remove them with the release), status.
// A release whose cluster-class is a Helm chart (csctl) is rendered and written to the fleet
// repository first (./releaseclass.ts); the reconcile is fed where it was written.
import { reconcileClusterStackRelease } from '../reconcilers/clusterstackrelease.ts';
import type { ReconcileContext, ReconcileResult } from '../runtime/controller.ts';
import { noopRecorder } from '../runtime/events.ts';
import { ReleaseApplier } from './clusterstackrelease/applier.ts';
import { failureForCondition, READ_PENDING_RECHECK_MS } from './clusterstackrelease/backgroundreads.ts';
import { recordReleaseEvents, requeueOf } from './clusterstackrelease/outcome.ts';
import { ReleaseReader } from './clusterstackrelease/reader.ts';
import { ReleaseSourceAccess } from './clusterstackrelease/sourceaccess.ts';
import type { ClusterStackReleaseDeps } from './clusterstackrelease/types.ts';
import { lookUpProvider, servedUsers } from './clusterstackrelease/users.ts';
import { ReleaseValidator } from './clusterstackrelease/validator.ts';

export { failureForCondition } from './clusterstackrelease/backgroundreads.ts';
export type { ClusterStackReleaseDeps } from './clusterstackrelease/types.ts';

/**
 * The controller as a composition of its collaborators (controllers/clusterstackrelease/): the
 * validator (and its cache by commit), the reader of the release's commit, validation and
 * rendered class, the provider and sharing look-ups, the applier of the result and the outcome
 * (Events, requeue). Each gets only the part of the deps it uses.
 */
export function clusterStackReleaseReconciler(deps: ClusterStackReleaseDeps) {
  const validator = new ReleaseValidator(deps);
  const reader = new ReleaseReader(deps, validator);
  const applier = new ReleaseApplier(deps);

  return async (key: string, ctx: ReconcileContext): Promise<ReconcileResult | undefined> => {
    const release = deps.releases.get(key);
    if (release === undefined) return undefined;
    const namespace = release.metadata.namespace ?? 'default';
    const gitRepository = deps.gitRepositories.get(key);
    const kustomization = deps.kustomizations.get(key);
    const clusters = servedUsers(
      deps,
      release,
      deps.clusterView.usingClass(namespace, release.spec.clusterClass),
    );
    const gap = clusters === undefined ? deps.clusterView.gap() : undefined;

    const read = await reader.read(key, release, new ReleaseSourceAccess(deps, release), ctx.log);
    const { stack, renderedClass, commit, listed, fetchError } = read;

    // A release validated at this commit before (a restart, an evicted validation) keeps its
    // status while its tree is read again (from the cache on disk, normally at once): no flap of
    // Ready to Unknown for every release after a restart.
    const pinned = release.status?.commit;
    if (read.pending && pinned !== undefined && commit === pinned)
      return { requeueAfter: READ_PENDING_RECHECK_MS };

    const provider = await lookUpProvider(deps.providers, release);
    const result = reconcileClusterStackRelease({
      release,
      ...(provider !== undefined ? { provider } : {}),
      ...(gitRepository !== undefined ? { gitRepository } : {}),
      ...(kustomization !== undefined ? { kustomization } : {}),
      ...(stack !== undefined ? { stack } : {}),
      ...(renderedClass !== undefined ? { renderedClass } : {}),
      ...(commit !== undefined ? { commit } : {}),
      ...(listed !== undefined ? { listedCommit: listed } : {}),
      ...(fetchError !== undefined ? { fetchFailure: failureForCondition(fetchError) } : {}),
      clusters: clusters ?? [],
      ...(gap !== undefined ? { clustersUnknown: gap } : {}),
      ...(deps.tenancy !== undefined ? { tenancy: deps.tenancy } : {}),
      templates: deps.templates,
      now: new Date(deps.clock.now()),
    });

    const current = { gitRepository, kustomization, provider };
    if (!(await applier.apply(release, result, current, ctx.signal))) return undefined;
    recordReleaseEvents(deps.recorder ?? noopRecorder, release, read, result);
    return requeueOf(read, provider);
  };
}
