// The release-format interface and what every format shares: the stack description (what a
// release is, in any format), the result of reading one, and the renderer seams. The formats
// implement it (controller/releases/native.ts, controller/releases/csctl/) without knowing each
// other; their registry beside them (controller/releases/format.ts) picks one by the tree. This
// module imports neither format nor the registry: types only, plus the stage names.
import type { ReleaseTree, RemoteChart, StackManifest } from '../api/release.ts';
import type { ReleaseTag } from './tags.ts';

/** A value, or every error found reading it (each naming its file and field). */
export type ValidationResult<T> = { ok: true; value: T } | { ok: false; errors: string[] };

export type ReleaseFormatName = 'native' | 'csctl';

/**
 * How surely a tree is in a format, by its content (not by file names alone):
 * - `certain`: a file only this format has: stackflux's stack.yaml (apiVersion stackflux.io/… or
 *   kind Stack), csctl.yaml;
 * - `possible`: files this format reads that do not single it out: a stack.yaml of another schema,
 *   the metadata.yaml of a release csctl packaged (which has no csctl.yaml).
 * A format certain of a tree wins over one for which it is possible; ties go by the registry's order.
 */
export type FormatClaim = 'certain' | 'possible';

/** One release format: whether a tree is in it (by content), and how to read it. */
export interface ReleaseFormat {
  name: ReleaseFormatName;
  /** How surely the tree is in this format; undefined: not at all. Looks at this format's files only. */
  claims(tree: ReleaseTree): FormatClaim | undefined;
  /** Reads and validates the release against its tag; all errors at once, each naming file and field. */
  read(tree: ReleaseTree, tag: ReleaseTag): ValidationResult<StackDescription>;
  /**
   * The tree as this format's tool releases it at `tag` (csctl create substitutes placeholders);
   * absent, or the same tree object: released as it is.
   */
  asReleased?(tree: ReleaseTree, tag: ReleaseTag): ReleaseTree;
}

/** The cluster-stack-operator's hooks an addon stage belongs to (clusteraddon.yaml addonStages keys). */
export const ADDON_STAGES = ['AfterControlPlaneInitialized', 'BeforeClusterUpgrade'] as const;
export type AddonStage = (typeof ADDON_STAGES)[number];

/** An object of the workload cluster a CEL condition reads (clusteraddon.yaml, CSO's clusteraddon.Object). */
export interface ConditionObject {
  /** The name the CEL expression refers to the object by. */
  key: string;
  apiVersion: string;
  kind: string;
  name: string;
  namespace: string;
}

/** clusteraddon.yaml waitForPreCondition / waitForPostCondition (CSO's clusteraddon.WaitForCondition). */
export interface WaitForCondition {
  objects: ConditionObject[];
  /** A CEL expression over the objects by their keys. */
  conditions: string;
}

/** One addon step of a release, in apply order. */
export interface DescribedAddon {
  /**
   * The addon's name: its folder cluster-addon/<name>/ (native, csctl stages), or `cluster-addon`
   * for csctl's old single umbrella chart. Unique within a stage; an addon may appear in both stages.
   */
  name: string;
  /**
   * The hook this step runs in (csctl stages). Undefined: the release has no stages; the addon is
   * applied when a Cluster starts using the release and kept up to date on upgrades (native, csctl
   * old layout).
   */
  stage?: AddonStage;
  /** apply: apply the content; delete: remove the objects the content renders (csctl `action: delete`). */
  action: 'apply' | 'delete';
  /**
   * Steps of the SAME stage (by name) that must be Ready first. Native: stack.yaml dependsOn or the
   * previous addon; csctl: the previous entry of its stage (CSO runs a stage's entries in order,
   * each after the previous one's post-condition holds).
   */
  dependsOn: string[];
  /** Namespace of the addon's namespaced objects in the workload cluster (csctl: always kube-system). */
  targetNamespace?: string;
  /** The addon's folder in the release tree, with a trailing "/": `cluster-addon/cni/`, `cluster-addon/`. */
  path: string;
  /** How the addon's content is delivered: a folder of manifests/templates, or a Helm chart in `path`. */
  content: 'files' | 'helm-chart';
  /** A chart from a repository (native stack.yaml chart/version/repository). */
  chart?: RemoteChart;
  /**
   * The per-Cluster values template (Go text/template + sprig over .Cluster, .ControlPlane,
   * .InfraCluster; its output's `values:` string, when there is one, is the values): csctl's
   * `cluster-addon/<addon>/overwrite.yaml` or the old layout's `cluster-addon-values.yaml`.
   * Undefined: none (the chart's values.yaml as it is). Native values are Handlebars files in `path`.
   */
  valuesTemplate?: string;
  /** csctl: CEL condition that must hold before the step is applied/deleted. */
  waitForPreCondition?: WaitForCondition;
  /** csctl: CEL condition that must hold after it before the stage moves on. */
  waitForPostCondition?: WaitForCondition;
}

/** How a release's ClusterClass and the objects it references are delivered. */
export interface ClusterClassSource {
  /** `yaml-folder`: the files as they are (native); `helm-chart`: rendered with Helm's engine (csctl). */
  kind: 'yaml-folder' | 'helm-chart';
  /** Folder in the release tree, with a trailing "/". */
  path: string;
}

/** csctl's metadata.yaml (csctl clusterstack.MetaData), present in releases csctl packaged. */
export interface CsctlMetadata {
  apiVersion: string;
  clusterStack: string;
  kubernetes: string;
  clusterAddon: string;
  nodeImage: string;
}

/** What a release is, in any format. */
export interface StackDescription {
  format: ReleaseFormatName;
  provider: string;
  name: string;
  /** Full Kubernetes version, e.g. v1.30.4 (its major.minor is the tag's). */
  kubernetesVersion: string;
  /** Stack version, dot form as in the tag (csctl: from the tag; Chart.yaml versions are placeholders). */
  version: string;
  /** Every addon step in apply order: stage-less steps, or AfterControlPlaneInitialized then BeforeClusterUpgrade. */
  addons: DescribedAddon[];
  clusterClass: ClusterClassSource;
  /** The language of per-Cluster values: Handlebars (native) or Go text/template + sprig (csctl). */
  valuesTemplating: 'handlebars' | 'go-template';
  /** native only: the stack.yaml it was read from (what the native renderers take). */
  manifest?: StackManifest;
  /** csctl only. */
  csctl?: {
    /** `stages`: clusteraddon.yaml + one chart per addon; `umbrella`: one chart in cluster-addon/ (old layout). */
    layout: 'stages' | 'umbrella';
    /** csctl.yaml apiVersion, as written (csctl does not check it). */
    apiVersion: string;
    /**
     * The release's metadata.yaml: a packaged release's own, or the one csctl create writes for a
     * stack folder (the versions its placeholders stand for: ./csctl/placeholders.ts).
     */
    metadata?: CsctlMetadata;
  };
}

// Renderer seams, wired by the rendering layer (the Go engine: controller/rendering/goengine).

/** Renders a release's cluster-class/ for the management cluster into the YAML of its objects. */
export type ClusterClassRenderer = (input: {
  tree: ReleaseTree;
  description: StackDescription;
  /** Helm release name: the first four dash-parts of the tag, e.g. docker-scs-1-30 (csctl). */
  releaseName: string;
  /** The ClusterStack's namespace (Helm's .Release.Namespace). */
  namespace: string;
}) => Promise<ValidationResult<string>>;

/**
 * Renders the values of one addon step for one Cluster: the addon's valuesTemplate over the live
 * objects (undefined when the Cluster does not reference one), giving the values YAML.
 */
export type AddonValuesRenderer = (input: {
  template: string;
  cluster: Record<string, unknown>;
  controlPlane?: Record<string, unknown>;
  infraCluster?: Record<string, unknown>;
}) => Promise<ValidationResult<string>>;
