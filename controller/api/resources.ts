// What stackflux reads and writes on the API server: ONE declaration used by
// `stackflux input-resources` / `output-resources`, by the offline renderer's output check
// (a mutation outside OUTPUT_RESOURCES fails the run) and by the generated RBAC of
// `stackflux install`.
import { kinds } from './crds.ts';
import { GROUP, VERSION } from './meta.ts';

export interface ResourceDeclaration {
  group: string;
  version: string;
  /** Plural resource name, with "/<subresource>" for subresources (e.g. clusterstacks/status). */
  resource: string;
  verbs: string[];
  /** Why stackflux needs it (shown by the CLI, comment in the RBAC). */
  purpose: string;
}

/** Known kinds: group + kind → plural and scope. Anything else uses pluralize(). */
export interface KindInfo {
  group: string;
  kind: string;
  plural: string;
  namespaced: boolean;
}

export const KNOWN_KINDS: readonly KindInfo[] = [
  ...kinds.map((k) => ({ group: GROUP, kind: k.kind, plural: k.plural, namespaced: true })),
  { group: '', kind: 'Namespace', plural: 'namespaces', namespaced: false },
  { group: '', kind: 'Secret', plural: 'secrets', namespaced: true },
  { group: '', kind: 'ConfigMap', plural: 'configmaps', namespaced: true },
  { group: '', kind: 'ServiceAccount', plural: 'serviceaccounts', namespaced: true },
  { group: '', kind: 'Service', plural: 'services', namespaced: true },
  { group: '', kind: 'Event', plural: 'events', namespaced: true },
  { group: 'events.k8s.io', kind: 'Event', plural: 'events', namespaced: true },
  { group: 'coordination.k8s.io', kind: 'Lease', plural: 'leases', namespaced: true },
  { group: 'apps', kind: 'Deployment', plural: 'deployments', namespaced: true },
  { group: 'rbac.authorization.k8s.io', kind: 'ClusterRole', plural: 'clusterroles', namespaced: false },
  {
    group: 'rbac.authorization.k8s.io',
    kind: 'ClusterRoleBinding',
    plural: 'clusterrolebindings',
    namespaced: false,
  },
  { group: 'rbac.authorization.k8s.io', kind: 'Role', plural: 'roles', namespaced: true },
  { group: 'rbac.authorization.k8s.io', kind: 'RoleBinding', plural: 'rolebindings', namespaced: true },
  {
    group: 'apiextensions.k8s.io',
    kind: 'CustomResourceDefinition',
    plural: 'customresourcedefinitions',
    namespaced: false,
  },
  { group: 'source.toolkit.fluxcd.io', kind: 'GitRepository', plural: 'gitrepositories', namespaced: true },
  { group: 'kustomize.toolkit.fluxcd.io', kind: 'Kustomization', plural: 'kustomizations', namespaced: true },
  { group: 'helm.toolkit.fluxcd.io', kind: 'HelmRelease', plural: 'helmreleases', namespaced: true },
  { group: 'cluster.x-k8s.io', kind: 'Cluster', plural: 'clusters', namespaced: true },
  { group: 'cluster.x-k8s.io', kind: 'ClusterClass', plural: 'clusterclasses', namespaced: true },
];

/** The default English pluralization of a kind, as kubectl / controller-gen guess it. */
export function pluralize(kind: string): string {
  const k = kind.toLowerCase();
  if (/(s|x|z|ch|sh)$/.test(k)) return `${k}es`;
  if (/[^aeiou]y$/.test(k)) return `${k.slice(0, -1)}ies`;
  return `${k}s`;
}

export function groupOf(apiVersion: string): string {
  const i = apiVersion.indexOf('/');
  return i < 0 ? '' : apiVersion.slice(0, i);
}

export function versionOf(apiVersion: string): string {
  const i = apiVersion.indexOf('/');
  return i < 0 ? apiVersion : apiVersion.slice(i + 1);
}

/** Plural and scope of a kind (scope undefined when the kind is not known). */
export function kindInfo(apiVersion: string, kind: string): { plural: string; namespaced?: boolean } {
  const group = groupOf(apiVersion);
  const known = KNOWN_KINDS.find((k) => k.group === group && k.kind === kind);
  return known !== undefined
    ? { plural: known.plural, namespaced: known.namespaced }
    : { plural: pluralize(kind) };
}

const FLUX_SOURCE = 'source.toolkit.fluxcd.io';
const FLUX_KUSTOMIZE = 'kustomize.toolkit.fluxcd.io';
const FLUX_HELM = 'helm.toolkit.fluxcd.io';
const CAPI = 'cluster.x-k8s.io';
/**
 * The group of the cluster-stack-operator's providers (OpenStack, Docker, Hetzner):
 * <Provider>ClusterStackReleaseTemplate / <Provider>ClusterStackRelease. Granted by default so their
 * providerRef works unchanged; providers in other groups add a ClusterRole labelled
 * LABEL_AGGREGATE_TO_CONTROLLER (it is aggregated into the controller's role).
 */
export const CSO_PROVIDER_GROUP = 'infrastructure.clusterstack.x-k8s.io';

/** What the controller reads (informer caches and direct GETs). */
export const INPUT_RESOURCES: readonly ResourceDeclaration[] = [
  {
    group: GROUP,
    version: VERSION,
    resource: 'clusterstacks',
    verbs: ['get', 'list', 'watch'],
    purpose: 'ClusterStacks to reconcile',
  },
  {
    group: GROUP,
    version: VERSION,
    resource: 'clusterstackreleases',
    verbs: ['get', 'list', 'watch'],
    purpose: 'releases to reconcile and garbage-collect',
  },
  {
    group: GROUP,
    version: VERSION,
    resource: 'clusteraddons',
    verbs: ['get', 'list', 'watch'],
    purpose: 'ClusterAddons to reconcile',
  },
  {
    group: FLUX_SOURCE,
    version: 'v1',
    resource: 'gitrepositories',
    verbs: ['get', 'list', 'watch'],
    purpose: 'artifact revision (resolved commit) of owned GitRepositories',
  },
  {
    group: FLUX_KUSTOMIZE,
    version: 'v1',
    resource: 'kustomizations',
    verbs: ['get', 'list', 'watch'],
    purpose: 'readiness and lastAppliedRevision of owned Kustomizations',
  },
  {
    group: FLUX_HELM,
    version: 'v2',
    resource: 'helmreleases',
    verbs: ['get', 'list', 'watch'],
    purpose:
      "Helm-chart addons: readiness, revision, chart version and values digest of each Cluster's HelmReleases",
  },
  {
    group: CAPI,
    version: 'v1beta2',
    resource: 'clusters',
    verbs: ['get', 'list', 'watch'],
    purpose: 'which ClusterClass (release) each Cluster uses; template input',
  },
  {
    group: `controlplane.${CAPI}`,
    version: '*',
    resource: '*',
    verbs: ['get', 'list', 'watch'],
    purpose: 'the object spec.controlPlaneRef points at (template input ControlPlane)',
  },
  {
    group: `infrastructure.${CAPI}`,
    version: '*',
    resource: '*',
    verbs: ['get', 'list', 'watch'],
    purpose: 'the object spec.infrastructureRef points at (template input InfraCluster)',
  },
  {
    group: CSO_PROVIDER_GROUP,
    version: '*',
    resource: '*',
    verbs: ['get', 'list', 'watch'],
    purpose:
      'provider templates (ClusterStack providerRef) and provider objects of releases; other groups: aggregated ClusterRoles',
  },
  {
    group: '',
    version: 'v1',
    resource: 'namespaces',
    verbs: ['get', 'list', 'watch'],
    purpose:
      "Namespace labels: a ClusterStack's clusterNamespaceSelector decides which other namespaces' Clusters it serves",
  },
  {
    group: '',
    version: 'v1',
    resource: 'secrets',
    verbs: ['get'],
    purpose:
      "credentials of release sources and the fleet repository; the installation's render seed key (read directly, not cached)",
  },
];

/** What the controller writes. apply/applyStatus are PATCH (server-side apply). */
export const OUTPUT_RESOURCES: readonly ResourceDeclaration[] = [
  {
    group: GROUP,
    version: VERSION,
    resource: 'clusterstacks/status',
    verbs: ['patch'],
    purpose: 'ClusterStack status',
  },
  {
    group: GROUP,
    version: VERSION,
    resource: 'clusterstackreleases',
    verbs: ['create', 'patch', 'delete'],
    purpose: 'desired releases (server-side apply), release-in-use finalizer, garbage collection',
  },
  {
    group: GROUP,
    version: VERSION,
    resource: 'clusterstackreleases/status',
    verbs: ['patch'],
    purpose: 'ClusterStackRelease status',
  },
  {
    group: GROUP,
    version: VERSION,
    resource: 'clusteraddons',
    verbs: ['create', 'patch'],
    purpose: 'one ClusterAddon per Cluster using a release; fleet-cleanup finalizer',
  },
  {
    group: GROUP,
    version: VERSION,
    resource: 'clusteraddons/status',
    verbs: ['patch'],
    purpose: 'ClusterAddon status',
  },
  {
    group: GROUP,
    version: VERSION,
    resource: 'clusterstacks/finalizers',
    verbs: ['update'],
    purpose: 'blockOwnerDeletion on owner references to a ClusterStack',
  },
  {
    group: GROUP,
    version: VERSION,
    resource: 'clusterstackreleases/finalizers',
    verbs: ['update'],
    purpose: 'blockOwnerDeletion on owner references to a ClusterStackRelease',
  },
  {
    group: GROUP,
    version: VERSION,
    resource: 'clusteraddons/finalizers',
    verbs: ['update'],
    purpose: 'blockOwnerDeletion on owner references to a ClusterAddon',
  },
  {
    group: CAPI,
    version: 'v1beta2',
    resource: 'clusters',
    verbs: ['patch'],
    purpose:
      'Progressive rollout: server-side apply (field manager stackflux-rollout) of topology class/version and rollout annotations',
  },
  {
    group: CAPI,
    version: 'v1beta2',
    resource: 'clusters/finalizers',
    verbs: ['update'],
    purpose: 'blockOwnerDeletion on the ClusterAddon owner reference to its Cluster',
  },
  {
    group: FLUX_SOURCE,
    version: 'v1',
    resource: 'gitrepositories',
    verbs: ['create', 'patch', 'delete'],
    purpose:
      "release GitRepositories and each Cluster's fleet GitRepository (server-side apply; requestedAt patches; deleted when the Cluster has no branch)",
  },
  {
    group: FLUX_KUSTOMIZE,
    version: 'v1',
    resource: 'kustomizations',
    verbs: ['create', 'patch', 'delete'],
    purpose: 'release and addon Kustomizations; deletionPolicy patches; removed addons',
  },
  {
    group: FLUX_HELM,
    version: 'v2',
    resource: 'helmreleases',
    verbs: ['patch'],
    purpose:
      'Cluster deletion: suspend its HelmReleases so helm-controller drops them without uninstalling (they are written by Flux from the fleet branch, not by stackflux)',
  },
  {
    group: CSO_PROVIDER_GROUP,
    version: '*',
    resource: '*',
    verbs: ['create', 'patch'],
    purpose:
      'one <Provider>ClusterStackRelease per release (server-side apply); GC deletes it with the release',
  },
  {
    group: '',
    version: 'v1',
    resource: 'events',
    verbs: ['create', 'patch'],
    purpose: 'events on reconciled objects (kubectl describe)',
  },
  {
    group: 'events.k8s.io',
    version: 'v1',
    resource: 'events',
    verbs: ['create', 'patch'],
    purpose: 'events on reconciled objects (events.k8s.io API)',
  },
];

/** Leader election: Leases in the controller's own namespace only (a Role, not a ClusterRole). */
export const LEADER_ELECTION_RESOURCES: readonly ResourceDeclaration[] = [
  {
    group: 'coordination.k8s.io',
    version: 'v1',
    resource: 'leases',
    verbs: ['get', 'list', 'watch', 'create', 'update', 'patch'],
    purpose: 'leader election Lease (controller namespace only)',
  },
];

/**
 * The installation's render seed key: a Secret in the controller's own namespace (a Role), created
 * on the first start. Kubernetes cannot limit create to one name (the name is not known when create
 * is authorized); reading it is the Secret get above.
 */
export const RENDER_SEED_RESOURCES: readonly ResourceDeclaration[] = [
  {
    group: '',
    version: 'v1',
    resource: 'secrets',
    verbs: ['create'],
    purpose: "the installation's render seed key Secret, created when absent (controller namespace only)",
  },
];

/** The verb an offline mutation needs: apply/patch → patch, applyStatus → patch on /status, delete. */
export function requiredPermission(
  verb: 'apply' | 'applyStatus' | 'patch' | 'delete',
  resource: string,
): { resource: string; verb: string } {
  if (verb === 'applyStatus') return { resource: `${resource}/status`, verb: 'patch' };
  if (verb === 'delete') return { resource, verb: 'delete' };
  return { resource, verb: 'patch' };
}

/**
 * A provider object (<Provider>ClusterStackRelease of a group other than stackflux's): written with
 * the permissions a provider's ClusterRole aggregates into the controller's role.
 */
export function isProviderObjectKind(apiVersion: string, kind: string): boolean {
  return (
    groupOf(apiVersion) !== GROUP && kind.endsWith('ClusterStackRelease') && kind !== 'ClusterStackRelease'
  );
}

/** Whether OUTPUT_RESOURCES allows verb on group/resource. */
export function isDeclaredOutput(group: string, resource: string, verb: string): boolean {
  return OUTPUT_RESOURCES.some((r) => r.group === group && r.resource === resource && r.verbs.includes(verb));
}
