// The live ClusterStackRelease controller: validates the release at its pinned commit (status.commit;
// before a pin, the commit the source poller or ls-remote lists for the tag), reading the release
// tree at that commit (fetched from Git objects, cached by commit on disk, validation cached in
// memory), passes where the tag points now (moved-tag detection), calls reconcileClusterStackRelease with `now`,
// and applies what it returns: the in-use finalizer, the owned GitRepository + Kustomization
// (server-side apply; owner references let Kubernetes GC remove them with the release), status.
// A release whose cluster-class is a Helm chart (csctl) is rendered and written to the fleet
// repository first (./releaseclass.ts); the reconcile is fed where it was written.
import type { ClusterStack } from '../api/clusterstack.ts';
import { type ClusterStackRelease, withoutImpact } from '../api/clusterstackrelease.ts';
import type { GitRepository, Kustomization } from '../api/flux.ts';
import { API_VERSION, FINALIZER_RELEASE_IN_USE } from '../api/meta.ts';
import {
  type RenderedClass,
  reconcileClusterStackRelease,
  rendersClusterClass,
} from '../reconcilers/clusterstackrelease.ts';
import { providerObjectRef, type ReleaseProviderInput } from '../reconcilers/provider.ts';
import { servedClusterNames } from '../reconcilers/sharing.ts';
import type { FluxTemplates } from '../releases/flux.ts';
import { readReleaseDescription, type StackDescription } from '../releases/format.ts';
import type { ValidationResult } from '../releases/stack.ts';
import { parseReleaseTag, type ReleaseTag } from '../releases/tags.ts';
import type { TenancyPolicy } from '../releases/tenancy.ts';
import { isConflict, isNotFound, type KubeClient, type KubeObject } from '../runtime/client.ts';
import type { Clock } from '../runtime/clock.ts';
import type { ReconcileContext, ReconcileResult } from '../runtime/controller.ts';
import { noopRecorder, type Recorder } from '../runtime/events.ts';
import type { Informer } from '../runtime/informer.ts';
import {
  ChartDependencyError,
  dependencyChartDirs,
  releaseTreeKey,
  withChartDependencies,
} from '../sources/chartrepo.ts';
import { DeadlineError } from '../sources/deadline.ts';
import { type GitCredentials, SourceError } from '../sources/git.ts';
import type { SourcePollers, SourceRef, TagLister } from '../sources/poller.ts';
import type { ReleaseTreeFetcher } from '../sources/releasetree.ts';
import type { ClusterUseView } from './clusterview.ts';
import { needsApply, readyCondition, sameJson } from './common.ts';
import { namespaceLabelsOf } from './namespaces.ts';
import type { ProviderKinds } from './provider.ts';
import type { releaseClassRenderer } from './releaseclass.ts';
import type { ReleaseReads } from './sourcereads.ts';
import type { BackgroundFetcher, FetchJob } from './treefetcher.ts';

export interface ClusterStackReleaseDeps {
  client: KubeClient;
  clock: Clock;
  pollers: SourcePollers;
  releases: Informer<ClusterStackRelease & KubeObject>;
  gitRepositories: Informer<GitRepository & KubeObject>;
  kustomizations: Informer<Kustomization & KubeObject>;
  /** Which Clusters (of every namespace and shard) use which ClusterClass; incomplete → finalizer kept. */
  clusterView: Pick<ClusterUseView, 'usingClass' | 'gap'>;
  templates: FluxTemplates;
  /** --default-service-account and --allowed-chart-hosts (default: neither). */
  tenancy?: TenancyPolicy;
  cacheDir: string;
  credentials: (namespace: string, secretName: string) => Promise<GitCredentials>;
  fetchTree: ReleaseTreeFetcher;
  listTags: TagLister;
  /** Events for `kubectl describe` (default: none). */
  recorder?: Recorder;
  /** Adds the manager's shard label to created objects (default: unchanged). */
  withShardLabel?: <T extends KubeObject>(obj: T) => T;
  /** Caches of provider kinds (spec.providerRef). */
  providers?: ProviderKinds;
  /**
   * The ClusterStacks and Namespaces (labels): a Cluster of another namespace keeps a release in use
   * only when its ClusterStack serves that namespace (clusterNamespaceSelector).
   */
  sharing?: { clusterStacks: Informer<ClusterStack & KubeObject>; namespaces: Informer<KubeObject> };
  /** Renders and writes a Helm-chart cluster-class (csctl); absent: such a release cannot be applied. */
  classes?: ReturnType<typeof releaseClassRenderer>;
  /** Background reads with a total deadline (absent: reads are awaited in the reconcile). */
  reads?: ReleaseReads;
}

/** Look again at a release whose rendered cluster-class could not be written (the fleet may recover). */
const CLASS_RETRY_MS = 30_000;

const PROVIDER_RECHECK_MS = 30_000;

/** Look again at a release whose chart dependencies' repository could not be reached. */
const DEPENDENCY_RETRY_MS = 60_000;

function isWaitingOnCluster(l: { state: string }): boolean {
  return l.state === 'notServed' || l.state === 'pending';
}

/** The release's template and provider object from the provider caches (undefined without providerRef). */
async function lookUpProvider(
  providers: ProviderKinds | undefined,
  release: ClusterStackRelease,
): Promise<ReleaseProviderInput | undefined> {
  const templateRef = release.spec.providerRef;
  const objectRef = providerObjectRef(release);
  if (providers === undefined || templateRef === undefined || objectRef === undefined) return undefined;
  const namespace = release.metadata.namespace ?? 'default';
  return {
    template: await providers.template(templateRef, namespace),
    object: await providers.object(objectRef, namespace),
  };
}

/** The Clusters using a release that its ClusterStack serves (undefined: the view is incomplete). */
function servedUsers(
  deps: Pick<ClusterStackReleaseDeps, 'sharing'>,
  release: ClusterStackRelease,
  clusters: string[] | undefined,
): string[] | undefined {
  if (clusters === undefined || deps.sharing === undefined) return clusters;
  const namespace = release.metadata.namespace ?? 'default';
  const foreign = clusters.flatMap((n) => (n.includes('/') ? [n.slice(0, n.indexOf('/'))] : []));
  if (foreign.length === 0) return clusters;
  const cs = deps.sharing.clusterStacks.get(`${namespace}/${release.spec.clusterStack}`);
  return servedClusterNames(clusters, cs, namespaceLabelsOf(deps.sharing.namespaces, foreign));
}

const MAX_CACHED_VALIDATIONS = 1000;

/** The reason and message a failed read of a release tree shows in its condition. */
function fetchFailureOf(err: unknown): { reason: string; message: string; hint?: string } {
  return {
    reason: err instanceof SourceError ? err.reason : 'SourceUnavailable',
    message: err instanceof Error ? err.message : String(err),
    // Stable text (the same on every try), so the condition may carry it.
    ...(err instanceof DeadlineError ? { hint: `not finished within ${err.deadline}` } : {}),
  };
}

/** What of a failed read the release's condition shows: the reason and, for a deadline, which. */
export function failureForCondition(err: unknown): { reason: string; hint?: string } {
  const { reason, hint } = fetchFailureOf(err);
  return hint !== undefined ? { reason, hint } : { reason };
}

/** A read still running in the background: the release waits (ArtifactNotReady) and is woken. */
class ReadPending extends Error {}

/**
 * The value of a background read, or ReadPending while it runs; a failure is thrown (with its
 * back-off the fetcher keeps). Without `fetcher` the read is awaited here.
 */
async function readOffWorker<T>(
  fetcher: BackgroundFetcher<T> | undefined,
  job: FetchJob<T>,
  wake: () => void,
): Promise<T> {
  if (fetcher === undefined) return job.read(new AbortController().signal);
  const got = fetcher.request(job, { id: job.key, wake });
  if (got.state === 'ready') return got.value;
  if (got.state === 'failed') throw got.error;
  throw new ReadPending(job.what);
}

/** Look again at a release whose read runs in the background, in case its wake-up is lost. */
const READ_PENDING_RECHECK_MS = 60_000;

export function clusterStackReleaseReconciler(deps: ClusterStackReleaseDeps) {
  const validations = new Map<string, ValidationResult<StackDescription>>();

  return async (key: string, ctx: ReconcileContext): Promise<ReconcileResult | undefined> => {
    const { client } = deps;
    const recorder = deps.recorder ?? noopRecorder;
    const shardLabel = <T extends KubeObject>(o: T): T => (deps.withShardLabel ? deps.withShardLabel(o) : o);
    const release = deps.releases.get(key);
    if (release === undefined) return undefined;
    const namespace = release.metadata.namespace ?? 'default';
    const { tag } = release.spec;
    const deleting = release.metadata.deletionTimestamp !== undefined;
    const gitRepository = deps.gitRepositories.get(key);
    const kustomization = deps.kustomizations.get(key);
    const clusters = servedUsers(
      deps,
      release,
      deps.clusterView.usingClass(namespace, release.spec.clusterClass),
    );
    const gap = clusters === undefined ? deps.clusterView.gap() : undefined;

    const source = release.spec.source;
    const ref: SourceRef = {
      url: source.url,
      namespace,
      ...(source.secretRef !== undefined ? { secretName: source.secretRef.name } : {}),
      ...(source.insecure === true ? { insecure: true } : {}),
    };
    let creds: GitCredentials | undefined;
    const getCreds = async (): Promise<GitCredentials | undefined> => {
      if (ref.secretName === undefined) return undefined;
      creds ??= await deps.credentials(namespace, ref.secretName);
      return creds;
    };

    // A chart repository that could not be reached: no verdict, the release is looked at again.
    let dependenciesUnreachable = false;
    /** stack.yaml validation of the tree at `at` (cached by commit; a bad tree is a verdict too). */
    const validateAt = async (
      at: string,
      parsedTag: ReleaseTag,
    ): Promise<ValidationResult<StackDescription>> => {
      const cacheKey = `${source.url}\n${at}\n${source.path ?? ''}\n${tag}`;
      const cached = validations.get(cacheKey);
      if (cached !== undefined) return cached;
      let result: ValidationResult<StackDescription>;
      try {
        const tree = await readOffWorker(
          deps.reads?.trees,
          {
            key: `${cacheKey}\n${ref.secretName ?? ''}\n${namespace}`,
            namespace,
            what: `reading tag ${tag} of ${source.url}`,
            read: async (signal) => deps.fetchTree(source, tag, at, deps.cacheDir, await getCreds(), signal),
          },
          () => deps.reads?.wake(key),
        );
        result = readReleaseDescription(tree, parsedTag);
        // Chart dependencies not vendored are fetched here, once per release (cached on disk by
        // commit), as CSO's `helm template --dependency-update` would, so that every Cluster's
        // render reads them from the tree.
        const charts = result.ok ? dependencyChartDirs(result.value) : [];
        if (charts.length > 0) {
          try {
            await withChartDependencies(tree, charts, {
              cacheDir: deps.cacheDir,
              treeKey: releaseTreeKey(source.url, at, source.path ?? ''),
              ...(deps.tenancy !== undefined ? { tenancy: deps.tenancy } : {}),
            });
          } catch (err) {
            if (!(err instanceof ChartDependencyError)) throw err;
            if (err.transient) {
              dependenciesUnreachable = true;
              return {
                ok: false,
                errors: [`${err.message} (tried again in ${DEPENDENCY_RETRY_MS / 1000} s)`],
              };
            }
            result = { ok: false, errors: [err.message] };
          }
        }
      } catch (err) {
        // A symbolic link, a submodule, a tree over a limit: a verdict on the commit, not a failure
        // to fetch it, so the release reports it (InvalidRelease) and is not retried.
        if (!(err instanceof SourceError && err.reason === 'InvalidRelease')) throw err;
        result = { ok: false, errors: [err.message] };
      }
      if (validations.size >= MAX_CACHED_VALIDATIONS) {
        const first = validations.keys().next().value;
        if (first !== undefined) validations.delete(first);
      }
      validations.set(cacheKey, result);
      return result;
    };

    // The release is pinned to the commit it was validated at (status.commit); the listing says
    // where the tag points now. Only a release without a valid pin follows the tag.
    const pinned = release.status?.commit;
    let listed = deps.pollers.commitOf(ref, tag);
    let commit = pinned ?? listed;
    let stack: ValidationResult<StackDescription> | undefined;
    let renderedClass: RenderedClass | undefined;
    let fetchError: unknown;
    let pending = false;
    const parsed = parseReleaseTag(tag);
    if (!parsed.ok) {
      stack = { ok: false, errors: [`tag ${tag}: ${parsed.reason}`] };
    } else if (!deleting) {
      try {
        if (commit === undefined) {
          listed = (
            await readOffWorker(
              deps.reads?.listings,
              {
                key: `${source.url}\n${source.insecure === true}\n${ref.secretName ?? ''}\n${namespace}`,
                namespace,
                what: `listing the tags of ${source.url}`,
                read: async (signal) =>
                  deps.listTags(source.url, await getCreds(), {
                    ...(source.insecure === true ? { insecure: true } : {}),
                    signal,
                  }),
              },
              () => deps.reads?.wake(key),
            )
          ).find((t) => t.tag === tag)?.commit;
          if (listed === undefined)
            throw new SourceError('TagNotFound', `tag ${tag} not found in ${source.url}`);
          commit = listed;
        }
        stack = await validateAt(commit, parsed.value);
        if (!stack.ok && listed !== undefined && listed !== commit) {
          // Nothing of an invalid pinned commit was ever applied: the tag moved to fix it, follow it.
          commit = listed;
          stack = await validateAt(commit, parsed.value);
        }
        if (stack.ok && rendersClusterClass(stack.value)) {
          const at = commit;
          renderedClass = await renderClass(at, stack.value);
        }
      } catch (err) {
        if (err instanceof ReadPending) {
          // Not a failure: the read runs in the background and wakes this release when it settles.
          pending = true;
          stack = undefined;
          renderedClass = undefined;
        } else {
          fetchError = err;
        }
        if (err instanceof SourceError && err.reason === 'TagMoved') deps.pollers.trigger([source.url]);
        if (!pending)
          ctx.log.warn(
            { err: { message: err instanceof Error ? err.message : String(err) } },
            'reading the release failed',
          );
      }
    }

    // A release validated at this commit before (a restart, an evicted validation) keeps its
    // status while its tree is read again (from the cache on disk, normally at once): no flap of
    // Ready to Unknown for every release after a restart.
    if (pending && pinned !== undefined && commit === pinned)
      return { requeueAfter: READ_PENDING_RECHECK_MS };

    async function renderClass(at: string, description: StackDescription): Promise<RenderedClass> {
      if (deps.classes === undefined)
        return {
          ok: false,
          reason: 'FleetNotConfigured',
          message: 'its cluster-class is a Helm chart, which this controller does not render',
        };
      const name = key.slice(key.indexOf('/') + 1);
      return deps.classes.render({
        treeKey: `${source.url}\n${at}\n${source.path ?? ''}\n${tag}`,
        namespace,
        release: name,
        tag,
        description,
        tree: async () => deps.fetchTree(source, tag, at, deps.cacheDir, await getCreds()),
      });
    }

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
          { signal: ctx.signal },
        );
        return true;
      } catch (err) {
        if (isNotFound(err)) return false;
        throw err;
      }
    };
    // The in-use finalizer goes on before anything else is written ...
    if (adding && !(await setFinalizers())) return undefined;

    if (result.gitRepository !== undefined && (!deleting || gitRepository !== undefined)) {
      if (needsApply(gitRepository, result.gitRepository as GitRepository & KubeObject)) {
        await client.apply(shardLabel(result.gitRepository as GitRepository & KubeObject), {
          force: true,
          signal: ctx.signal,
        });
      }
    }
    if (result.providerObject !== undefined) {
      const existing = provider?.object.state === 'found' ? provider.object.object : undefined;
      const desired = result.providerObject as KubeObject;
      if (needsApply(existing as KubeObject | undefined, desired)) {
        await client.apply(shardLabel(desired), { force: true, signal: ctx.signal });
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
          signal: ctx.signal,
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
          { force: true, signal: ctx.signal },
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

    // Events: what a human should see in `kubectl describe`.
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
      void recorder.event(
        release,
        'Normal',
        'Ready',
        'Reconcile',
        ready.message ?? `release ${tag} is ready`,
      );
    }
    if (renderedClass?.ok === false) {
      void recorder.event(release, 'Warning', renderedClass.reason, 'Render', renderedClass.message);
    }
    if (fetchError !== undefined) throw fetchError;
    if (pending) return { requeueAfter: READ_PENDING_RECHECK_MS };
    if (dependenciesUnreachable) return { requeueAfter: DEPENDENCY_RETRY_MS };
    if (renderedClass?.ok === false && renderedClass.reason !== 'InvalidRelease')
      return { requeueAfter: CLASS_RETRY_MS };
    // A provider kind not served (yet) or a cache not synced: look again (CRDs may be installed later).
    if (
      provider !== undefined &&
      (isWaitingOnCluster(provider.template) || isWaitingOnCluster(provider.object))
    )
      return { requeueAfter: PROVIDER_RECHECK_MS };
    return undefined;
  };
}
