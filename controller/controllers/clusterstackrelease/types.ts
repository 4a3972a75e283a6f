// Types shared by the ClusterStackRelease controller's collaborators (this folder) and its
// composition (../clusterstackrelease.ts). The lowest layer of the controller: it imports no
// collaborator.
import type { ClusterStack } from '../../api/clusterstack.ts';
import type { ClusterStackRelease } from '../../api/clusterstackrelease.ts';
import type { GitRepository, Kustomization } from '../../api/flux.ts';
import type { RenderedClass } from '../../reconcilers/clusterstackrelease.ts';
import type { FluxTemplates } from '../../releases/flux.ts';
import type { StackDescription } from '../../releases/format.ts';
import type { ValidationResult } from '../../releases/stack.ts';
import type { TenancyPolicy } from '../../releases/tenancy.ts';
import type { KubeClient, KubeObject } from '../../runtime/client.ts';
import type { Clock } from '../../runtime/clock.ts';
import type { Recorder } from '../../runtime/events.ts';
import type { Informer } from '../../runtime/informer.ts';
import type { GitCredentials } from '../../sources/git.ts';
import type { SourcePollers, TagLister } from '../../sources/poller.ts';
import type { ReleaseTreeFetcher } from '../../sources/releasetree.ts';
import type { ClusterUseView } from '../clusterview.ts';
import type { ProviderKinds } from '../provider.ts';
import type { releaseClassRenderer } from '../releaseclass.ts';
import type { ReleaseReads } from '../sourcereads.ts';

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

/** The cluster-class renderer of a release (../releaseclass.ts), as the collaborators use it. */
export type ReleaseClasses = NonNullable<ClusterStackReleaseDeps['classes']>;

/** What one reconcile read of a release: where its tag points, its validation, its rendered class. */
export interface ReleaseRead {
  /** Where the listing says the tag points now. */
  listed: string | undefined;
  /** The commit the release is validated at (the pin, else the listed commit). */
  commit: string | undefined;
  stack: ValidationResult<StackDescription> | undefined;
  renderedClass: RenderedClass | undefined;
  /** A failed read (thrown again at the end of the reconcile). */
  fetchError: unknown;
  /** A read still running in the background: the release waits and is woken. */
  pending: boolean;
  /** A chart repository could not be reached: no verdict, the release is looked at again. */
  dependenciesUnreachable: boolean;
}
