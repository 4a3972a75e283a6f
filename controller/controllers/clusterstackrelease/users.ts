// Who a release serves and what it waits on: the Clusters using its ClusterClass that its
// ClusterStack serves (sharing across namespaces), and its provider template and object from the
// provider caches (spec.providerRef).
import type { ClusterStackRelease } from '../../api/clusterstackrelease.ts';
import { providerObjectRef, type ReleaseProviderInput } from '../../reconcilers/provider.ts';
import { servedClusterNames } from '../../reconcilers/sharing.ts';
import { namespaceLabelsOf } from '../namespaces.ts';
import type { ProviderKinds } from '../provider.ts';
import type { ClusterStackReleaseDeps } from './types.ts';

/** Look again at a release whose provider kind is not served (yet) or whose cache is not synced. */
export const PROVIDER_RECHECK_MS = 30_000;

export function isWaitingOnCluster(l: { state: string }): boolean {
  return l.state === 'notServed' || l.state === 'pending';
}

/** Whether a provider kind is not served (yet) or its cache not synced (CRDs may be installed later). */
export function waitsOnProvider(provider: ReleaseProviderInput | undefined): boolean {
  return (
    provider !== undefined && (isWaitingOnCluster(provider.template) || isWaitingOnCluster(provider.object))
  );
}

/** The release's template and provider object from the provider caches (undefined without providerRef). */
export async function lookUpProvider(
  providers: Pick<ProviderKinds, 'template' | 'object'> | undefined,
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
export function servedUsers(
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
