// Inputs and outputs of addon rendering (controller/rendering). Everything here is data:
// rendering is a pure function of these inputs.
import type { ReleaseTree, StackManifest } from '../api/release.ts';
import type { FixedRender } from './determinism.ts';

/** A JSON-like object, as read from YAML or the API server. */
export type PlainObject = Record<string, unknown>;

/** Values keyed by addon name: `{ cni: { mtu: 1400 }, "metrics-server": {...} }`. */
export type ValuesByAddon = Readonly<Record<string, unknown>>;

export interface RenderAddonInput {
  /** The release files at its tag, relative to the stack root. */
  tree: ReleaseTree;
  /** The release's stack.yaml, already parsed and validated. */
  stack: StackManifest;
  /** The addon to render; must be listed in `stack.addons`. */
  addon: string;
  /** The Cluster API Cluster (as served by the API server). Template name: `Cluster`. */
  cluster: PlainObject;
  /** The object `spec.controlPlaneRef` points at, when available. Template name: `ControlPlane`. */
  controlPlane?: PlainObject;
  /** The object `spec.infrastructureRef` points at, when available. Template name: `InfraCluster`. */
  infraCluster?: PlainObject;
  /**
   * Per-cluster values keyed by addon name; this addon uses `clusterValues[addon]`.
   * Wins over the addon's `values.yaml`, loses to `centralValues`.
   */
  clusterValues?: ValuesByAddon;
  /**
   * Central values from the ClusterStack `spec.values`, keyed by addon name; this addon uses
   * `centralValues[addon]`. Wins over everything.
   */
  centralValues?: ValuesByAddon;
}

/** A Kubernetes object as parsed from rendered output: the fields every applied object needs. */
export interface KubernetesObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    [key: string]: unknown;
  };
  [key: string]: unknown;
}

export type RenderFailureReason =
  /** The addon is not listed in stack.yaml or has no folder under cluster-addon/. */
  | 'AddonNotFound'
  /** A values.yaml / values.schema.json / per-cluster or central values is not usable. */
  | 'InvalidValues'
  /** The merged values do not satisfy the addon's values.schema.json. */
  | 'ValuesSchemaFailed'
  /** A template does not parse, references a missing field, or a helper failed. */
  | 'TemplateError'
  /** A rendered or copied file is not YAML Kubernetes objects. */
  | 'InvalidOutput'
  /** The render hit a resource limit: output size, time budget or memory (./limits.ts). */
  | 'LimitExceeded'
  /** Not rendered: the addon's renders hit a limit several times in a row and wait (./bounded.ts). */
  | 'CoolingDown';

export interface RenderSuccess {
  ok: true;
  /**
   * Output files, path relative to `cluster-addon/<addon>/` (the `.hbs` suffix removed), in
   * sorted order. Rendered templates keep their rendered text; copied files keep the author's.
   * Files that render to no document at all are left out.
   */
  files: Map<string, string>;
  /** Every object of every output file, in file order then document order. */
  objects: KubernetesObject[];
  /**
   * Set by the native render: each output file's objects (the same as in `objects`), as
   * parseObjects reads the file's text, so a reader of the text (the preview) need not parse it.
   */
  fileObjects?: Map<string, KubernetesObject[]>;
  /** The merged values the templates saw (useful for status and debugging). */
  values: PlainObject;
  /** Set for a Helm-chart addon (then `files` and `objects` are empty): its chart and values. */
  helm?: HelmAddon;
}

/** A Helm-chart addon rendered for one Cluster. */
export interface HelmAddon {
  /** In-tree: cluster-addon/<addon>/Chart.yaml; remote: stack.yaml chart/version/repository. */
  chart:
    | { source: 'tree'; path: string; name: string; version: string }
    | { source: 'repository'; name: string; version: string; repository: string };
  /** The values Helm installs with: values.yaml.hbs rendered, else the merged values. */
  values: PlainObject;
}

export interface RenderFailure {
  ok: false;
  reason: RenderFailureReason;
  /** Names the file (path relative to the stack root), the line and the field where known. */
  message: string;
}

export type RenderResult = RenderSuccess | RenderFailure;

/** How a render runs: its limits, and a hook told which template is about to render. */
export interface RenderOptions {
  /** Output cap of the addon (default DEFAULT_RENDER_LIMITS.maxOutputBytes). */
  maxOutputBytes?: number;
  /** Called with the file (relative to the stack root) before each template renders. */
  onTemplate?: (file: string) => void;
}

/** One csctl addon step of one Cluster: what renderCsctlAddon reads. */
export interface CsctlAddonInput {
  format: 'csctl';
  /** The release's text files (at least the chart folder and the values template). */
  tree: ReleaseTree;
  /**
   * The binary files (vendored charts/*.tgz), carried on their own: a structured clone to a render
   * process keeps a Map's entries, not the `binary` property of a ReleaseTree.
   */
  binary: ReadonlyMap<string, Uint8Array>;
  /** The addon's name (its folder on the fleet branch). */
  addon: string;
  /** The chart folder in the tree, with a trailing "/": `cluster-addon/cni/`, `cluster-addon/`. */
  chartPath: string;
  /** The values template's path in the tree; undefined: none (CSO pipes empty values then). */
  valuesTemplate?: string;
  /** --kube-version: the release's full Kubernetes version (metadata.yaml / csctl.yaml). */
  kubernetesVersion: string;
  /** The Cluster API Cluster as served. Template name `.Cluster`. */
  cluster: PlainObject;
  /** Template name `.ControlPlane`; absent when the Cluster has no controlPlaneRef. */
  controlPlane?: PlainObject;
  /** Template name `.InfraCluster`; absent when the Cluster has no infrastructureRef. */
  infraCluster?: PlainObject;
  /** The Go engine's clock and random seed for this render (./determinism.ts); default: real ones. */
  fixed?: FixedRender;
}

/** What an addon renderer takes: a stackflux (native) addon, or a csctl (cluster-stack-operator) one. */
export type AddonRenderInput = RenderAddonInput | CsctlAddonInput;

/** Whether the input is a csctl addon's. */
export function isCsctlAddonInput(input: AddonRenderInput): input is CsctlAddonInput {
  return 'format' in input && input.format === 'csctl';
}

/** A synchronous addon renderer, as the pure reconcilers call it (default: renderAnyAddon in-line). */
export type AddonRenderer = (input: AddonRenderInput) => RenderResult;
