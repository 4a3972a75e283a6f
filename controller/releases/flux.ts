// Fills in the Flux object templates of flux-templates/ (pure: the template texts come in as
// data; controller/releases/flux-templates.ts loads them from disk once at startup).
import { createHash } from 'node:crypto';
import { parse } from 'yaml';
import type { ClusterStackRelease } from '../api/clusterstackrelease.ts';
import type { GitRepository, Kustomization } from '../api/flux.ts';
import {
  API_VERSION,
  LABEL_ADDON,
  LABEL_CLUSTER,
  LABEL_CLUSTER_STACK,
  LABEL_RELEASE,
  type OwnerReference,
} from '../api/meta.ts';
import { pathProblem } from './paths.ts';
import { CLUSTER_CLASS_DIR } from './stack.ts';
import type { TenancyPolicy } from './tenancy.ts';

export interface FluxTemplates {
  releaseGitRepository: string;
  releaseKustomization: string;
  fleetGitRepository: string;
  addonKustomization: string;
  addonPreconditionKustomization: string;
  addonHelmRelease: string;
  addonHelmRepository: string;
  addonOciRepository: string;
}

export const FLUX_TEMPLATE_FILES: Readonly<Record<keyof FluxTemplates, string>> = {
  releaseGitRepository: 'release-gitrepository.yaml',
  releaseKustomization: 'release-kustomization.yaml',
  fleetGitRepository: 'fleet-gitrepository.yaml',
  addonKustomization: 'addon-kustomization.yaml',
  addonPreconditionKustomization: 'addon-precondition-kustomization.yaml',
  addonHelmRelease: 'addon-helmrelease.yaml',
  addonHelmRepository: 'addon-helmrepository.yaml',
  addonOciRepository: 'addon-ocirepository.yaml',
};

export const MANAGED_BY_LABELS: Readonly<Record<string, string>> = {
  'app.kubernetes.io/managed-by': 'stackflux',
};

const PLACEHOLDER = /\{\{([A-Za-z][A-Za-z0-9]*)\}\}/g;
const WHOLE_PLACEHOLDER = /^\{\{([A-Za-z][A-Za-z0-9]*)\}\}$/;
const parsedTemplates = new Map<string, unknown>();

function fill(node: unknown, values: Record<string, unknown>, at: string): unknown {
  const input = (name: string): unknown => {
    if (!Object.hasOwn(values, name)) throw new Error(`${at}: unknown input "${name}"`);
    return values[name];
  };
  if (typeof node === 'string') {
    const whole = WHOLE_PLACEHOLDER.exec(node);
    if (whole?.[1] !== undefined) return structuredClone(input(whole[1]) ?? null);
    return node.replace(PLACEHOLDER, (_, name: string) => {
      const v = input(name);
      if (typeof v !== 'string' && typeof v !== 'number')
        throw new Error(`${at}: input "${name}" inside text must be a string`);
      return String(v);
    });
  }
  if (Array.isArray(node)) {
    return node.map((item, i) => fill(item, values, `${at}[${i}]`)).filter((item) => item !== null);
  }
  if (typeof node === 'object' && node !== null) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(node)) {
      const filled = fill(v, values, at === '' ? k : `${at}.${k}`);
      if (filled !== null) out[k] = filled; // null input → optional field omitted
    }
    return out;
  }
  return node;
}

/**
 * Fills one template (see the format note at the top of flux-templates/*.yaml) with `values`.
 * The template is parsed as YAML first and placeholders are replaced in the parsed tree, so
 * no value can change the structure. Unknown inputs are errors naming the file and field.
 */
export function renderFluxTemplate(
  template: string,
  values: Record<string, unknown>,
  file = 'template',
): unknown {
  let tree = parsedTemplates.get(template);
  if (tree === undefined) {
    tree = parse(template) as unknown;
    parsedTemplates.set(template, tree);
  }
  try {
    return fill(tree, values, '');
  } catch (err: unknown) {
    throw new Error(`flux-templates/${file}: ${err instanceof Error ? err.message : String(err)}`);
  }
}

function sortedRecord(r: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(r).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** The controller owner reference to a stackflux object (which must have a uid). */
export function ownerReferenceTo(owner: {
  kind: string;
  metadata: { name: string; uid?: string };
}): OwnerReference {
  return {
    apiVersion: API_VERSION,
    kind: owner.kind,
    name: owner.metadata.name,
    uid: owner.metadata.uid ?? '',
    controller: true,
    blockOwnerDeletion: true,
  };
}

/**
 * gitignore rules (Flux `spec.ignore`) that keep only `path` of the repository in the artifact.
 * gitignore cannot re-include a file below an excluded folder, so every ancestor is re-included
 * and its other entries excluded again. Empty path → undefined (whole repository).
 */
export function ignoreAllBut(path: string): string | undefined {
  const segments = path.split('/').filter((s) => s !== '' && s !== '.');
  if (segments.length === 0) return undefined;
  const lines = ['/*'];
  let prefix = '';
  segments.forEach((segment, i) => {
    prefix = `${prefix}/${segment}`;
    lines.push(`!${prefix}/`);
    if (i < segments.length - 1) lines.push(`${prefix}/*`);
  });
  return `${lines.join('\n')}\n`;
}

function joinPath(...parts: string[]): string {
  const joined = parts
    .flatMap((p) => p.split('/'))
    .filter((s) => s !== '' && s !== '.')
    .join('/');
  return `./${joined}`;
}

export function releaseLabels(clusterStack: string, release: string): Record<string, string> {
  return sortedRecord({
    ...MANAGED_BY_LABELS,
    [LABEL_CLUSTER_STACK]: clusterStack,
    [LABEL_RELEASE]: release,
  });
}

/** Where stackflux wrote a release's rendered cluster-class: a fleet branch at a commit. */
export interface RenderedClassSource {
  url: string;
  /** Branch name without refs/heads/. */
  branch: string;
  commit: string;
  /** The fleet Secret's name (the same name in every namespace, as for Cluster branches). */
  secretName?: string;
}

/** Defaults when the ClusterStack left interval/timeout unset (the CRD defaults are the same). */
export const DEFAULT_INTERVAL = '5m';
export const DEFAULT_TIMEOUT = '5m';

/**
 * The Flux objects of one ClusterStackRelease, named after it, in its namespace, owned by it:
 * a GitRepository at the release tag pinned to `commit`, the commit stackflux validated
 * (artifact limited to the stack path; none while no commit is validated), and a Kustomization
 * applying <path>/cluster-class into the release's namespace.
 *
 * The Kustomization impersonates the ClusterStack's `serviceAccountName`, else
 * `tenancy.defaultServiceAccount` (`--default-service-account`), in the release's namespace.
 *
 * The pin is Flux's `ref.commit` ("takes precedence over all reference fields") with
 * `ref.name: refs/tags/<tag>`, so Flux checks out exactly that commit, whatever the tag points at
 * now, and labels the artifact "refs/tags/<tag>@sha1:<commit>". *
 * `rendered`: the release's cluster-class is rendered by stackflux (csctl: a Helm chart, which
 * kustomize-controller cannot read); the GitRepository is the fleet repository's release branch
 * pinned to the commit holding the rendered objects, and the Kustomization applies its root.
 */
export function releaseFluxObjects(
  templates: FluxTemplates,
  release: ClusterStackRelease,
  commit: string | undefined,
  tenancy: TenancyPolicy = {},
  rendered?: RenderedClassSource,
): { gitRepository: GitRepository | undefined; kustomization: Kustomization } {
  const name = release.metadata.name;
  const namespace = release.metadata.namespace ?? 'default';
  const common = {
    name,
    namespace,
    labels: releaseLabels(release.spec.clusterStack, name),
    ownerReferences: [ownerReferenceTo(release)],
    interval: release.spec.interval ?? DEFAULT_INTERVAL,
  };
  const path = release.spec.source.path ?? '';
  const source =
    rendered !== undefined
      ? {
          url: rendered.url,
          refName: null,
          branch: rendered.branch,
          commit: rendered.commit,
          secretRef: rendered.secretName !== undefined ? { name: rendered.secretName } : null,
          ignore: null,
        }
      : commit !== undefined
        ? {
            url: release.spec.source.url,
            refName: `refs/tags/${release.spec.tag}`,
            branch: null,
            commit,
            secretRef: release.spec.source.secretRef ? { name: release.spec.source.secretRef.name } : null,
            ignore: ignoreAllBut(path) ?? null,
          }
        : undefined;
  const gitRepository =
    source === undefined
      ? undefined
      : (renderFluxTemplate(
          templates.releaseGitRepository,
          { ...common, ...source },
          FLUX_TEMPLATE_FILES.releaseGitRepository,
        ) as GitRepository);
  const kustomization = renderFluxTemplate(
    templates.releaseKustomization,
    {
      ...common,
      timeout: release.spec.timeout ?? DEFAULT_TIMEOUT,
      path: rendered !== undefined ? './' : joinPath(path, CLUSTER_CLASS_DIR),
      sourceName: name,
      suspend: release.spec.suspend === true ? true : null,
      serviceAccountName: release.spec.serviceAccountName ?? tenancy.defaultServiceAccount ?? null,
    },
    FLUX_TEMPLATE_FILES.releaseKustomization,
  ) as Kustomization;
  return { gitRepository, kustomization };
}

/** Flux's sharding label: a Flux controller started with `--watch-label-selector` takes its shard. */
export const FLUX_SHARD_LABEL = 'sharding.fluxcd.io/key';

/**
 * The Flux shard (`shard0`..`shard<n-1>`) of one Cluster's Flux objects: a stable hash of
 * `<namespace>/<cluster>`, so its GitRepository and Kustomizations always share a shard and the
 * Clusters spread evenly. undefined when `shards` < 2 (no label).
 */
export function fluxShardOf(
  namespace: string,
  cluster: string,
  shards: number | undefined,
): string | undefined {
  if (shards === undefined || shards < 2) return undefined;
  const digest = createHash('sha256').update(`${namespace}/${cluster}`).digest();
  return `shard${digest.readUInt32BE(0) % shards}`;
}

/**
 * Namespace label that puts every Cluster of the namespace on one named Flux shard (with
 * --flux-shards ≥ 1): a platform gives a tenant its own kustomize-/source-/helm-controller so that
 * another tenant's churn never queues ahead of its changes.
 */
export const FLUX_SHARD_NAMESPACE_LABEL = 'stackflux.io/flux-shard';

/** A Kubernetes label value that is not empty. */
const SHARD_KEY = /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;

/**
 * The Flux shard of one Cluster's Flux objects: with --flux-shards ≥ 1, its namespace's
 * stackflux.io/flux-shard label when set (and a valid label value), else the hashed shard of
 * fluxShardOf (none with one shard). Without --flux-shards no label at all: the controller then
 * selects its Flux objects by its own shard key, which the Flux shard label would replace.
 */
export function fluxShardFor(
  namespace: string,
  cluster: string,
  shards: number | undefined,
  namespaceShard: string | undefined,
): string | undefined {
  if (shards === undefined || shards < 1) return undefined;
  if (namespaceShard !== undefined && SHARD_KEY.test(namespaceShard)) return namespaceShard;
  return fluxShardOf(namespace, cluster, shards);
}

const NAME_MAX = 63;

/**
 * Name of the GitRepository of one Cluster's fleet branch: `<cluster>-addons`, or, when that is
 * longer than 63 characters, the cluster name cut short plus a hash of the whole name.
 */
export function clusterGitRepositoryName(cluster: string): string {
  const name = `${cluster}-addons`;
  if (name.length <= NAME_MAX) return name;
  const hash = createHash('sha256').update(cluster).digest('hex').slice(0, 8);
  const head = cluster.slice(0, NAME_MAX - '-addons'.length - hash.length - 1).replace(/[-.]+$/, '');
  return `${head}-${hash}-addons`;
}

export interface FleetGitRepositoryInput {
  name: string;
  namespace: string;
  /** The Cluster whose branch it tracks (label stackflux.io/cluster). */
  cluster: string;
  url: string;
  branch: string;
  secretRef?: string;
  interval?: string;
  /** Extra labels (the Flux shard key). */
  labels?: Record<string, string>;
  ownerReferences?: OwnerReference[];
}

/** Default Flux interval of a Cluster's fleet GitRepository (a push requests a fetch at once). */
export const DEFAULT_FLEET_INTERVAL = '5m';

/** The GitRepository of one Cluster's fleet branch (owned by its ClusterAddon). */
export function fleetGitRepository(templates: FluxTemplates, input: FleetGitRepositoryInput): GitRepository {
  return renderFluxTemplate(
    templates.fleetGitRepository,
    {
      name: input.name,
      namespace: input.namespace,
      labels: sortedRecord({ ...MANAGED_BY_LABELS, [LABEL_CLUSTER]: input.cluster, ...input.labels }),
      ownerReferences: input.ownerReferences ?? [],
      url: input.url,
      branch: input.branch,
      interval: input.interval ?? DEFAULT_FLEET_INTERVAL,
      secretRef: input.secretRef !== undefined ? { name: input.secretRef } : null,
    },
    FLUX_TEMPLATE_FILES.fleetGitRepository,
  ) as GitRepository;
}

/**
 * Suffix of a Helm addon's folder on the branch and of its Kustomization's name. An addon name is a
 * DNS label (no dot), so `<addon>.helm` is never another addon's folder.
 */
const HELM_SUFFIX = '.helm';

/**
 * The folder of one addon on a Cluster's branch: `<addon>` for manifests, `<addon>.helm` for a Helm
 * addon's HelmRelease. The two kinds never share a folder, so a Kustomization never reads content
 * rendered for the other kind's target, whatever order pushes and Kustomization writes happen in.
 */
export function addonFolder(addon: string, helm: boolean): string {
  return helm ? `${addon}${HELM_SUFFIX}` : addon;
}

/** Suffix of the folder and Kustomization of an addon's pre-condition gate (see HELM_SUFFIX). */
const PRECONDITION_SUFFIX = '.pre';

/** The folder of an addon's pre-condition gate on a Cluster's branch: an empty kustomization. */
export function preconditionFolder(addon: string): string {
  return `${addon}${PRECONDITION_SUFFIX}`;
}

/** The addon whose folder this is (`<addon>`, `<addon>.helm` or `<addon>.pre`). */
export function addonOfFolder(folder: string): string {
  for (const suffix of [HELM_SUFFIX, PRECONDITION_SUFFIX])
    if (folder.endsWith(suffix)) return folder.slice(0, -suffix.length);
  return folder;
}

/** Name of the Kustomization gating one (cluster, addon) on its pre-conditions: `<cluster>.<addon>.pre`. */
export function preconditionKustomizationName(cluster: string, addon: string): string {
  return `${cluster}.${preconditionFolder(addon)}`;
}

/**
 * The gate folder's only file: a kustomization of no resources (kustomize-controller builds and
 * applies nothing, then runs the health checks).
 */
export const EMPTY_KUSTOMIZATION =
  'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: []\n';

/**
 * Name of the Kustomization of one (cluster, addon): `<cluster>.<addon>` applies manifests into the
 * workload cluster, `<cluster>.<addon>.helm` a HelmRelease to the management cluster. The name fixes
 * the target: an addon that changes kind between releases gets a new object (the old one is
 * deleted), never an old object pointed at another cluster (see addonKustomizationTarget).
 */
export function addonKustomizationName(cluster: string, addon: string, helm = false): string {
  return `${cluster}.${addonFolder(addon, helm)}`;
}

/** Name of the HelmRelease of one (cluster, Helm addon); neither contains a dot, so it is unique. */
export function addonHelmReleaseName(cluster: string, addon: string): string {
  return `${cluster}.${addon}`;
}

/**
 * Where a Kustomization applies: the kubeconfig Secret (none: the management cluster) and the
 * namespace override. An addon Kustomization keeps this for its whole life: the reconcile never
 * writes a different one to an existing object (it deletes the object and creates a new one).
 */
export function addonKustomizationTarget(k: Pick<Kustomization, 'spec'>): string {
  const ref = k.spec.kubeConfig?.secretRef;
  const cluster = ref === undefined ? 'management' : `secret ${ref.name}/${ref.key ?? 'value'}`;
  return `${cluster}, namespace ${k.spec.targetNamespace ?? '(as in the files)'}`;
}

export interface AddonKustomizationInput {
  cluster: string;
  namespace: string;
  addon: string;
  /** GitRepository of the Cluster's fleet branch. */
  sourceName: string;
  /** Extra labels (the Flux shard key). */
  extraLabels?: Record<string, string>;
  /** Addon names (not Kustomization names) this addon depends on. */
  dependsOn: string[];
  /** Which of the addons are Helm addons (their Kustomizations' names end in `.helm`). */
  helmAddons?: ReadonlySet<string>;
  /**
   * A Helm-chart addon: its folder holds the HelmRelease (and its chart source), applied to the
   * MANAGEMENT cluster (no kubeConfig, no targetNamespace); `wait` makes the Kustomization Ready
   * only once the HelmRelease is, so dependsOn orders Helm and manifest addons alike.
   */
  helm?: boolean;
  targetNamespace?: string;
  /**
   * ServiceAccount (of `namespace`) Flux impersonates to apply a Helm addon's folder to the
   * management cluster (`--default-service-account`). Not set on a manifest addon: with a
   * kubeConfig Flux would impersonate it in the WORKLOAD cluster, where Cluster API's kubeconfig
   * already is the identity and no such ServiceAccount exists.
   */
  serviceAccountName?: string;
  deletionPolicy?: 'MirrorPrune' | 'Delete' | 'WaitForTermination' | 'Orphan';
  suspend?: boolean;
  interval?: string;
  timeout?: string;
  ownerReferences: OwnerReference[];
  /** CEL health checks of the applied objects (a csctl addon's waitForPostCondition). */
  healthCheckExprs?: { apiVersion: string; kind: string; current: string }[];
  /** The addon waits for its pre-condition gate (preconditionKustomization) besides `dependsOn`. */
  preconditionGate?: boolean;
}

/** The template inputs an addon's Kustomization and its pre-condition gate share. */
function addonKustomizationCommon(
  input: Pick<
    AddonKustomizationInput,
    | 'cluster'
    | 'namespace'
    | 'addon'
    | 'sourceName'
    | 'extraLabels'
    | 'interval'
    | 'timeout'
    | 'ownerReferences'
  >,
  name: string,
  folder: string,
): Record<string, unknown> {
  return {
    name,
    namespace: input.namespace,
    labels: sortedRecord({
      ...MANAGED_BY_LABELS,
      [LABEL_CLUSTER]: input.cluster,
      [LABEL_ADDON]: input.addon,
      ...input.extraLabels,
    }),
    ownerReferences: input.ownerReferences,
    interval: input.interval ?? DEFAULT_INTERVAL,
    timeout: input.timeout ?? DEFAULT_TIMEOUT,
    path: joinPath(folder),
    sourceName: input.sourceName,
  };
}

/**
 * The Kustomization applying one addon of one cluster into the workload cluster. It names no
 * release (no label, no annotation): which release it applies is its branch's revision, so moving
 * a Cluster to another release changes its branch and ClusterAddon status, not its Kustomizations.
 */
export function addonKustomization(templates: FluxTemplates, input: AddonKustomizationInput): Kustomization {
  return renderFluxTemplate(
    templates.addonKustomization,
    {
      // The folder follows from the name, like the target: one object reads one kind of content.
      ...addonKustomizationCommon(
        input,
        addonKustomizationName(input.cluster, input.addon, input.helm === true),
        addonFolder(input.addon, input.helm === true),
      ),
      kubeConfig:
        input.helm === true ? null : { secretRef: { name: `${input.cluster}-kubeconfig`, key: 'value' } },
      dependsOn:
        input.dependsOn.length > 0 || input.preconditionGate === true
          ? [
              ...(input.preconditionGate === true
                ? [{ name: preconditionKustomizationName(input.cluster, input.addon) }]
                : []),
              ...input.dependsOn.map((a) => ({
                name: addonKustomizationName(input.cluster, a, input.helmAddons?.has(a) === true),
              })),
            ]
          : null,
      targetNamespace: input.helm === true ? null : (input.targetNamespace ?? null),
      serviceAccountName: input.helm === true ? (input.serviceAccountName ?? null) : null,
      deletionPolicy: input.deletionPolicy ?? null,
      suspend: input.suspend === true ? true : null,
      healthCheckExprs:
        input.healthCheckExprs !== undefined && input.healthCheckExprs.length > 0
          ? input.healthCheckExprs
          : null,
    },
    FLUX_TEMPLATE_FILES.addonKustomization,
  ) as Kustomization;
}

export interface PreconditionKustomizationInput {
  cluster: string;
  namespace: string;
  addon: string;
  /** GitRepository of the Cluster's fleet branch. */
  sourceName: string;
  /** Extra labels (the Flux shard key). */
  extraLabels?: Record<string, string>;
  interval?: string;
  timeout?: string;
  ownerReferences: OwnerReference[];
  /** Objects of the workload cluster the gate checks (it does not apply them). */
  healthChecks: { apiVersion: string; kind: string; name: string; namespace?: string }[];
  healthCheckExprs: { apiVersion: string; kind: string; current: string }[];
}

/**
 * The Kustomization gating one addon of one cluster on its csctl waitForPreCondition: Ready once
 * the listed objects of the workload cluster pass the expressions; the addon's Kustomization
 * depends on it. Labelled with the addon, so it is deleted with the addon's other Flux objects.
 */
export function preconditionKustomization(
  templates: FluxTemplates,
  input: PreconditionKustomizationInput,
): Kustomization {
  return renderFluxTemplate(
    templates.addonPreconditionKustomization,
    {
      ...addonKustomizationCommon(
        input,
        preconditionKustomizationName(input.cluster, input.addon),
        preconditionFolder(input.addon),
      ),
      kubeConfig: { secretRef: { name: `${input.cluster}-kubeconfig`, key: 'value' } },
      healthChecks: input.healthChecks,
      healthCheckExprs: input.healthCheckExprs,
    },
    FLUX_TEMPLATE_FILES.addonPreconditionKustomization,
  ) as Kustomization;
}

// ---- Helm-chart addons ----------------------------------------------------------------------

/** Helm's limit on release names. */
const RELEASE_NAME_MAX = 53;

/**
 * The Helm release name of one (cluster, addon) in the workload cluster: `<cluster>-<addon>`, or,
 * when longer than Helm's 53 characters, cut short plus a hash of the whole name. The Cluster's
 * name in it keeps the releases of two Clusters apart should they share a workload cluster.
 */
export function helmReleaseName(cluster: string, addon: string): string {
  const name = `${cluster}-${addon}`;
  if (name.length <= RELEASE_NAME_MAX) return name;
  const hash = createHash('sha256').update(name).digest('hex').slice(0, 8);
  return `${name.slice(0, RELEASE_NAME_MAX - hash.length - 1).replace(/[-.]+$/, '')}-${hash}`;
}

/** Where a Helm addon's chart comes from (see HelmAddon in controller/rendering/types.ts). */
export type HelmChartSource =
  /** In-tree: `path` (below the stack path) in the release's GitRepository. */
  | { source: 'tree'; path: string; gitRepository: { name: string; namespace: string }; stackPath: string }
  | { source: 'repository'; name: string; version: string; repository: string };

export interface AddonHelmReleaseInput {
  cluster: string;
  namespace: string;
  addon: string;
  release: string;
  chart: HelmChartSource;
  values: Record<string, unknown>;
  /** Namespace of the release in the workload cluster (also where Helm keeps its history). */
  targetNamespace: string;
  interval?: string;
  timeout?: string;
  /** Labels added to the HelmRelease and its source (the Cluster's Flux shard). */
  extraLabels?: Record<string, string>;
}

/** The Flux objects of one (cluster, Helm addon): the HelmRelease and, for a remote chart, its source. */
export function addonHelmObjects(
  templates: FluxTemplates,
  input: AddonHelmReleaseInput,
): { helmRelease: Record<string, unknown>; source?: Record<string, unknown> } {
  const name = addonHelmReleaseName(input.cluster, input.addon);
  const labels = sortedRecord({
    ...input.extraLabels,
    ...MANAGED_BY_LABELS,
    [LABEL_CLUSTER]: input.cluster,
    [LABEL_ADDON]: input.addon,
    [LABEL_RELEASE]: input.release,
  });
  const interval = input.interval ?? DEFAULT_INTERVAL;
  const common = { name, namespace: input.namespace, labels, interval };
  const c = input.chart;
  let chart: unknown = null;
  let chartRef: unknown = null;
  let source: Record<string, unknown> | undefined;
  if (c.source === 'tree') {
    const chartPath = joinPath(c.stackPath, c.path);
    // Flux reads the chart at this path of the release's GitRepository: a plain relative path only.
    const unsafe = pathProblem(chartPath.slice('./'.length));
    if (unsafe !== undefined) throw new Error(`Helm chart of addon ${input.addon}: ${unsafe}`);
    chart = {
      spec: {
        chart: chartPath,
        sourceRef: {
          kind: 'GitRepository',
          name: c.gitRepository.name,
          ...(c.gitRepository.namespace !== input.namespace ? { namespace: c.gitRepository.namespace } : {}),
        },
        interval,
      },
    };
  } else if (c.repository.startsWith('oci://')) {
    chartRef = { kind: 'OCIRepository', name };
    const exact = /^v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$/.test(c.version);
    source = renderFluxTemplate(
      templates.addonOciRepository,
      {
        ...common,
        url: `${c.repository.replace(/\/+$/, '')}/${c.name}`,
        ref: exact ? { tag: c.version } : { semver: c.version },
      },
      FLUX_TEMPLATE_FILES.addonOciRepository,
    ) as Record<string, unknown>;
  } else {
    chart = {
      spec: { chart: c.name, version: c.version, sourceRef: { kind: 'HelmRepository', name }, interval },
    };
    source = renderFluxTemplate(
      templates.addonHelmRepository,
      { ...common, url: c.repository },
      FLUX_TEMPLATE_FILES.addonHelmRepository,
    ) as Record<string, unknown>;
  }
  const helmRelease = renderFluxTemplate(
    templates.addonHelmRelease,
    {
      ...common,
      timeout: input.timeout ?? DEFAULT_TIMEOUT,
      releaseName: helmReleaseName(input.cluster, input.addon),
      targetNamespace: input.targetNamespace,
      cluster: input.cluster,
      chart,
      chartRef,
      values: Object.keys(input.values).length > 0 ? input.values : null,
    },
    FLUX_TEMPLATE_FILES.addonHelmRelease,
  ) as Record<string, unknown>;
  return { helmRelease, ...(source !== undefined ? { source } : {}) };
}
