// Which controller keys an event of a related object concerns: pure maps from an object to the
// keys of ClusterStacks or releases, over the informers' NAMESPACE_INDEX (the cost: the
// ClusterStacks or releases of one namespace).
import type { ClusterStack } from '../../api/clusterstack.ts';
import type { ClusterStackRelease } from '../../api/clusterstackrelease.ts';
import { clusterUse } from '../../reconcilers/clusterstack.ts';
import type { KubeObject } from '../../runtime/client.ts';
import { type Informer, objectKey } from '../../runtime/informer.ts';
import { NAMESPACE_INDEX } from '../clusterstack.ts';
import { ownerKey } from '../common.ts';

type Stacks = Pick<Informer<ClusterStack & KubeObject>, 'byIndex' | 'list'>;
type Releases = Pick<Informer<ClusterStackRelease & KubeObject>, 'byIndex'>;

/** A release → its ClusterStack (the owner; before one is set, spec.clusterStack of its namespace). */
export function stackOfRelease(r: ClusterStackRelease & KubeObject): string[] {
  const owner = ownerKey(r, 'ClusterStack');
  if (owner !== undefined) return [owner];
  return r.metadata.namespace ? [`${r.metadata.namespace}/${r.spec.clusterStack}`] : [];
}

/** A Flux object → the release that owns it. */
export function releaseOwning(o: KubeObject): string[] {
  const k = ownerKey(o, 'ClusterStackRelease');
  return k === undefined ? [] : [k];
}

/** The namespace of the ClusterClass a Cluster names (where the releases that can serve it live). */
export function classNamespace(c: KubeObject): string | undefined {
  const use = clusterUse(c);
  return use === undefined ? undefined : (use.classNamespace ?? c.metadata.namespace);
}

/** A Cluster → the ClusterStacks of its class's namespace. */
export function clusterStacksOf(clusterStacks: Pick<Stacks, 'byIndex'>): (c: KubeObject) => string[] {
  return (c) => {
    const ns = classNamespace(c);
    return ns ? clusterStacks.byIndex(NAMESPACE_INDEX, ns).map((cs) => `${ns}/${cs.metadata.name}`) : [];
  };
}

/** A Cluster → the releases of its class. */
export function releasesOf(releases: Releases): (c: KubeObject) => string[] {
  return (c) => {
    const use = clusterUse(c);
    const ns = classNamespace(c);
    if (use === undefined || ns === undefined) return [];
    return releases
      .byIndex(NAMESPACE_INDEX, ns)
      .filter((r) => r.spec.clusterClass === use.className)
      .map((r) => `${ns}/${r.metadata.name}`);
  };
}

/** A ClusterStack → its releases. */
export function releasesOfStack(releases: Releases): (cs: ClusterStack & KubeObject) => string[] {
  return (cs) =>
    releases
      .byIndex(NAMESPACE_INDEX, cs.metadata.namespace ?? '')
      .filter((r) => r.spec.clusterStack === cs.metadata.name)
      .map(objectKey);
}

/** The ClusterStacks that share their releases with other namespaces (clusterNamespaceSelector). */
export function sharingStacks(clusterStacks: Pick<Stacks, 'list'>): (ClusterStack & KubeObject)[] {
  return clusterStacks.list().filter((cs) => cs.spec.clusterNamespaceSelector !== undefined);
}
