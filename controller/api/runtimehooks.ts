// Cluster API's Runtime SDK as stackflux serves it: the hooks API (group
// hooks.runtime.cluster.x-k8s.io, version v1alpha1; sigs.k8s.io/cluster-api
// api/runtime/hooks/v1alpha1) and the ExtensionConfig that registers an extension
// (runtime.cluster.x-k8s.io). Field names and JSON shapes are Cluster API's; only what stackflux
// uses is typed.

export const HOOKS_GROUP = 'hooks.runtime.cluster.x-k8s.io';
export const HOOKS_VERSION = 'v1alpha1';
export const HOOKS_API_VERSION = `${HOOKS_GROUP}/${HOOKS_VERSION}` as const;

/** ExtensionConfig's API version served by Cluster API v1.11 and later (v1alpha1 before, same fields). */
export const EXTENSION_CONFIG_API_VERSION = 'runtime.cluster.x-k8s.io/v1beta2';
/** Cluster API fills spec.clientConfig.caBundle from ca.crt of this Secret ("namespace/name"). */
export const INJECT_CA_FROM_SECRET_ANNOTATION = 'runtime.cluster.x-k8s.io/inject-ca-from-secret';

/** The one hook stackflux serves, and the name of its handler (a DNS-1123 label, as Cluster API checks). */
export const BEFORE_CLUSTER_UPGRADE_HOOK = 'BeforeClusterUpgrade';
export const BEFORE_CLUSTER_UPGRADE_HANDLER = 'before-cluster-upgrade';
/** Seconds Cluster API waits before it calls again (CSO's figure). */
export const RETRY_AFTER_SECONDS = 10;

/**
 * Cluster API's catalog.GVHToPath: /<group>/<version>/<lower-case hook>[/<lower-case handler name>].
 * Cluster API calls POST <clientConfig URL or service>/<this path>?timeout=<handler timeout>.
 */
export function hookPath(hook: string, handlerName?: string): string {
  const base = `/${HOOKS_GROUP}/${HOOKS_VERSION}/${hook.toLowerCase()}`;
  return handlerName === undefined || handlerName === '' ? base : `${base}/${handlerName.toLowerCase()}`;
}

export const DISCOVERY_PATH = hookPath('Discovery');
export const BEFORE_CLUSTER_UPGRADE_PATH = hookPath(
  BEFORE_CLUSTER_UPGRADE_HOOK,
  BEFORE_CLUSTER_UPGRADE_HANDLER,
);

export type ResponseStatus = 'Success' | 'Failure';

/** ExtensionHandler of a DiscoveryResponse. */
export interface ExtensionHandler {
  name: string;
  requestHook: { apiVersion: string; hook: string };
  timeoutSeconds?: number;
  failurePolicy?: 'Ignore' | 'Fail';
}

export interface DiscoveryResponse {
  apiVersion: typeof HOOKS_API_VERSION;
  kind: 'DiscoveryResponse';
  status: ResponseStatus;
  message?: string;
  handlers?: ExtensionHandler[];
}

/** BeforeClusterUpgradeRequest, as far as stackflux reads it (`cluster` is a whole Cluster object). */
export interface BeforeClusterUpgradeRequest {
  apiVersion: typeof HOOKS_API_VERSION;
  kind: 'BeforeClusterUpgradeRequest';
  settings?: Record<string, string>;
  cluster: Record<string, unknown>;
  fromKubernetesVersion: string;
  toKubernetesVersion: string;
  controlPlaneUpgrades?: Array<{ version: string }>;
  workersUpgrades?: Array<{ version: string }>;
}

/** CommonRetryResponse: Cluster API calls again after retryAfterSeconds when it is not 0. */
export interface HookRetryResponse {
  status: ResponseStatus;
  message?: string;
  retryAfterSeconds: number;
}

export interface BeforeClusterUpgradeResponse extends HookRetryResponse {
  apiVersion: typeof HOOKS_API_VERSION;
  kind: 'BeforeClusterUpgradeResponse';
}
