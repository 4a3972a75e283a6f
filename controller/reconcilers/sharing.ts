// Which Clusters a ClusterStack serves. Cluster API lets a Cluster name a ClusterClass of another
// namespace (v1beta2 classRef.namespace, v1beta1 classNamespace); a tenant must not get another
// namespace's release and central values that way (issue 22), nor keep its releases from being
// collected. So a ClusterStack serves the Clusters of its own namespace, and those of other
// namespaces only when it opts in: spec.clusterNamespaceSelector selects their Namespace's labels.
import type { ClusterStack } from '../api/clusterstack.ts';
import type { ReleaseTag } from '../releases/tags.ts';
import { selects } from './labelselector.ts';

/**
 * The labels of Namespaces, from a complete view: a namespace without an entry does not exist.
 * Only the namespaces asked about need to be in it.
 */
export type NamespaceLabels = ReadonlyMap<string, Readonly<Record<string, string>>>;

/** Condition reason of a Cluster whose ClusterClass is in a namespace that does not serve it. */
export const CLUSTER_CLASS_NOT_SHARED = 'ClusterClassNotShared';

/**
 * Whether `cs` serves a Cluster of `clusterNamespace`; undefined when that depends on Namespace
 * labels not known yet (the caller decides which way is safe).
 */
export function servesNamespace(
  cs: Pick<ClusterStack, 'metadata' | 'spec'>,
  clusterNamespace: string,
  namespaces: NamespaceLabels | undefined,
): boolean | undefined {
  if (clusterNamespace === (cs.metadata.namespace ?? 'default')) return true;
  const selector = cs.spec.clusterNamespaceSelector;
  if (selector === undefined) return false;
  if (namespaces === undefined) return undefined;
  const labels = namespaces.get(clusterNamespace);
  return labels !== undefined && selects(selector, { ...labels });
}

/** Why a Cluster of `clusterNamespace` is refused, naming what to change. */
export function notSharedMessage(
  cs: Pick<ClusterStack, 'metadata' | 'spec'>,
  clusterNamespace: string,
): string {
  const stack = `ClusterStack ${cs.metadata.namespace ?? 'default'}/${cs.metadata.name}`;
  const selector = cs.spec.clusterNamespaceSelector;
  return selector === undefined
    ? `${stack} serves Clusters of its own namespace only: namespace ${clusterNamespace} is not shared (its spec.clusterNamespaceSelector is unset); use a ClusterStack of namespace ${clusterNamespace}, or have the owner of ${stack} set a selector that selects it`
    : `${stack} does not share its releases with namespace ${clusterNamespace}: spec.clusterNamespaceSelector ${JSON.stringify(selector)} does not select that Namespace's labels`;
}

/**
 * The Clusters of a release's in-use list that `cs` serves (a Cluster of another namespace is named
 * `<namespace>/<name>`, as ClusterUseView.usingClass names it). Without the ClusterStack, or while
 * the Namespace labels are not known, every Cluster counts (nothing is deleted on a guess).
 */
export function servedClusterNames(
  names: readonly string[],
  cs: Pick<ClusterStack, 'metadata' | 'spec'> | undefined,
  namespaces: NamespaceLabels | undefined,
): string[] {
  if (cs === undefined) return [...names];
  return names.filter((n) => {
    const slash = n.indexOf('/');
    return slash < 0 || servesNamespace(cs, n.slice(0, slash), namespaces) !== false;
  });
}

/**
 * The ClusterStack of a namespace whose releases this tag would be (provider, name, Kubernetes
 * version, channel): for a Cluster of another namespace whose release does not exist (never created
 * for it, or collected because that ClusterStack does not serve it), so the refusal still names it.
 */
export function clusterStackOfTag<T extends Pick<ClusterStack, 'metadata' | 'spec'>>(
  stacks: readonly T[],
  tag: Pick<ReleaseTag, 'provider' | 'name' | 'kubernetesVersion' | 'channel'>,
): T | undefined {
  return [...stacks]
    .sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0))
    .find(
      (cs) =>
        cs.spec.provider === tag.provider &&
        cs.spec.name === tag.name &&
        cs.spec.kubernetesVersion === tag.kubernetesVersion &&
        (cs.spec.channel ?? 'stable') === tag.channel,
    );
}
