// Which release a Cluster's addons are rendered from. Normally the release its ClusterClass is; while
// a Progressive rollout prepares the Cluster (annotation rollout.stackflux.io/phase: Preparing), the
// release it moves to, so that release's BeforeClusterUpgrade stage lands in the workload cluster
// before the topology moves (what the cluster-stack-operator does while Cluster API's hook holds the
// upgrade). One function for the live ClusterAddon controller, its reconciler and offline render.
import { PREPARING_PHASE, ROLLOUT_ANNOTATIONS } from '../api/rollout.ts';
import { parseReleaseTag, type ReleaseTag, tagForClusterClassName } from '../releases/tags.ts';
import { clusterUse } from './clusterstack.ts';

function annotationsOf(cluster: unknown): Record<string, unknown> {
  if (typeof cluster !== 'object' || cluster === null) return {};
  const metadata = (cluster as { metadata?: unknown }).metadata;
  if (typeof metadata !== 'object' || metadata === null) return {};
  const a = (metadata as { annotations?: unknown }).annotations;
  return typeof a === 'object' && a !== null && !Array.isArray(a) ? (a as Record<string, unknown>) : {};
}

/** Whether two tags are releases of one ClusterStack (its provider, name, Kubernetes version, channel). */
export function sameClusterStack(a: ReleaseTag, b: ReleaseTag): boolean {
  return (
    a.provider === b.provider &&
    a.name === b.name &&
    a.kubernetesVersion === b.kubernetesVersion &&
    a.channel === b.channel
  );
}

/**
 * The release tag whose addons the Cluster gets (undefined: its class is no cluster stack release).
 * The rollout target counts only while the Cluster is Preparing (a result other than Failed ends it:
 * RolledBack, HandMoved put the addons back on the class's release) and only when it is a release of
 * the same ClusterStack as the class: it is looked up in the class's namespace like the class's own
 * release, so the annotation reaches nothing a tenant could not reach by moving the class.
 */
export function addonReleaseTag(cluster: unknown): ReleaseTag | undefined {
  const use = clusterUse(cluster);
  const current = use === undefined ? undefined : tagForClusterClassName(use.className);
  if (current === undefined) return undefined;
  const a = annotationsOf(cluster);
  const result = a[ROLLOUT_ANNOTATIONS.result];
  if (a[ROLLOUT_ANNOTATIONS.phase] !== PREPARING_PHASE || (result !== undefined && result !== 'Failed'))
    return current;
  const to = a[ROLLOUT_ANNOTATIONS.to];
  const target = typeof to === 'string' ? parseReleaseTag(to) : undefined;
  return target?.ok === true && sameClusterStack(current, target.value) ? target.value : current;
}

/**
 * The Cluster as the addons' values templates see it. While Preparing, with the topology the move
 * will give it (the class of the release its addons come from, and that release's Kubernetes
 * version): the cluster-stack-operator renders the BeforeClusterUpgrade stage for a Cluster whose
 * topology already changed (Cluster API calls the hook after the change), and the values stay the
 * same when the topology then moves, so nothing is applied twice. Otherwise the Cluster as it is.
 */
export function clusterForAddons(
  cluster: Record<string, unknown>,
  tag: ReleaseTag,
  kubernetesVersion: string,
): Record<string, unknown> {
  const use = clusterUse(cluster);
  if (use === undefined || use.className === tag.clusterClassName) return cluster;
  const spec = cluster.spec as Record<string, unknown>;
  const topology = spec.topology as Record<string, unknown>;
  const classRef = topology.classRef;
  const moved =
    typeof classRef === 'object' && classRef !== null
      ? { ...topology, classRef: { ...classRef, name: tag.clusterClassName } }
      : { ...topology, class: tag.clusterClassName };
  const version = kubernetesVersion.startsWith('v') ? kubernetesVersion : `v${kubernetesVersion}`;
  return { ...cluster, spec: { ...spec, topology: { ...moved, version } } };
}
