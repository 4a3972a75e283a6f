// Which objects a Cluster's controlPlaneRef and infrastructureRef may lead stackflux to: ONE rule
// for the live ClusterAddon controller and for the snapshot the impact controller and `stackflux
// preview` read (offline/live.ts), so neither reads what the other would not.
//
// The Cluster is the tenant's, so its refs are the tenant's choice, and what they point at becomes
// template input (`.ControlPlane`, `.InfraCluster`) of a release author's templates. The
// controller's rights are wider than the tenant's (Secret `get` for source credentials), so a ref is
// followed only to a provider's kinds: never to a built-in Kubernetes group (core Secrets,
// ConfigMaps, ServiceAccounts, RBAC, ...), and only in the Cluster's own namespace, as Cluster API
// itself resolves them.
import { groupOf } from './resources.ts';

export type ClusterRefField = 'controlPlaneRef' | 'infrastructureRef';

export interface ClusterRef {
  field: ClusterRefField;
  /** API group ('' for the core group). */
  group: string;
  /** When the ref names one (v1beta1 ObjectReference); v1beta2 refs name only the group. */
  apiVersion?: string;
  kind: string;
  name: string;
  /** Always the Cluster's namespace. */
  namespace: string;
}

/** A ref that is followed, or why it is not (for the ClusterAddon's condition). */
export type ClusterRefResult = { ok: true; ref: ClusterRef } | { ok: false; problem: string };

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Whether a group is one of Kubernetes' own: the core group, the dot-less legacy groups (apps,
 * batch, policy, autoscaling, extensions) and every `*.k8s.io` group. Providers' kinds (Cluster
 * API's infrastructure.cluster.x-k8s.io, controlplane.cluster.x-k8s.io, or a provider's own group)
 * are never among them.
 */
export function isBuiltinGroup(group: string): boolean {
  return !group.includes('.') || group === 'k8s.io' || group.endsWith('.k8s.io');
}

/**
 * The object a Cluster's ref may be resolved to; undefined when the Cluster has no such ref. The
 * caller reads `ref` and nothing else (never the ref's own namespace).
 */
export function clusterRef(
  cluster: { metadata: { namespace?: string }; spec?: unknown },
  field: ClusterRefField,
): ClusterRefResult | undefined {
  const spec = cluster.spec;
  if (!isRecord(spec)) return undefined;
  const r = spec[field];
  if (!isRecord(r) || typeof r.kind !== 'string' || typeof r.name !== 'string' || r.name === '')
    return undefined;
  const apiVersion = typeof r.apiVersion === 'string' && r.apiVersion !== '' ? r.apiVersion : undefined;
  const group =
    typeof r.apiGroup === 'string' ? r.apiGroup : apiVersion !== undefined ? groupOf(apiVersion) : '';
  const what = `${field} ${JSON.stringify(r.kind)} ${JSON.stringify(r.name)}`;
  const namespace = cluster.metadata.namespace ?? '';
  if (typeof r.namespace === 'string' && r.namespace !== '' && r.namespace !== namespace)
    return {
      ok: false,
      problem: `${what} names namespace ${JSON.stringify(r.namespace)}: refs are resolved in the Cluster's own namespace only`,
    };
  if (isBuiltinGroup(group))
    return {
      ok: false,
      problem: `${what} is in the Kubernetes API group ${JSON.stringify(group)}: refs are followed only to provider kinds (infrastructure.cluster.x-k8s.io, controlplane.cluster.x-k8s.io or a provider's own group), never to built-in kinds such as Secrets or ConfigMaps`,
    };
  if (apiVersion !== undefined && groupOf(apiVersion) !== group)
    return {
      ok: false,
      problem: `${what}: apiVersion ${JSON.stringify(apiVersion)} is not in apiGroup ${JSON.stringify(group)}`,
    };
  return {
    ok: true,
    ref: {
      field,
      group,
      ...(apiVersion !== undefined ? { apiVersion } : {}),
      kind: r.kind,
      name: r.name,
      namespace,
    },
  };
}
