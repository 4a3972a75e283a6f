// The shape of a cluster stack release as read from a release repository at a tag
// (../shared/DESIGN.md "A release at a tag"). Parsed and validated by controller/releases.

/** One addon of a stack, in apply order. */
export interface StackAddon {
  name: string;
  /** Namespace the addon's namespaced objects go to in the workload cluster. */
  targetNamespace?: string;
  /** Addons that must be Ready first; defaults to the previous addon in the list. */
  dependsOn?: string[];
  /**
   * A Helm chart from a Helm (https://) or OCI (oci://) repository: stack.yaml `chart`, `version`,
   * `repository`. Unset: the addon is manifests/templates, or an in-tree chart when
   * cluster-addon/<addon>/Chart.yaml exists.
   */
  chart?: RemoteChart;
}

/** A chart stackflux's Flux source objects fetch from a repository. */
export interface RemoteChart {
  /** Chart name in the repository (for oci://, the last path segment is appended to the URL). */
  name: string;
  /** Exact chart version or a semver range (HelmRepository); an OCI tag or range (OCIRepository). */
  version: string;
  /** https://… (HelmRepository) or oci://… (OCIRepository). */
  repository: string;
}

/** stack.yaml at the root of a release (under ClusterStack spec.source.path). */
export interface StackManifest {
  apiVersion: 'stackflux.io/v1alpha1';
  kind: 'Stack';
  provider: string;
  name: string;
  /** Full Kubernetes version, e.g. v1.30.4; its major.minor must match the tag. */
  kubernetesVersion: string;
  /** Stack version, e.g. v2 or v0-sha.abc1234; must match the tag. */
  version: string;
  addons: StackAddon[];
}

/**
 * The files of a release at a tag, relative to the stack path, POSIX separators: the map holds the
 * UTF-8 text files, e.g. "stack.yaml", "cluster-class/cluster-class.yaml"; `binary` the files that
 * are not UTF-8 (vendored Helm charts, charts/*.tgz), each path in one of the two only.
 * controller/releases/tree.ts builds trees with both.
 */
export type ReleaseTree = ReadonlyMap<string, string> & { readonly binary?: ReadonlyMap<string, Uint8Array> };

/**
 * Most alias expansions allowed when YAML from a release or from values is turned into data
 * (the yaml library's maxAliasCount): a "billion laughs" document fails instead of exhausting memory.
 */
export const MAX_YAML_ALIASES = 100;
