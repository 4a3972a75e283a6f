// The cluster-stack-operator's release format (csctl's layout), read as csctl and CSO read it
// (github.com/SovereignCloudStack/csctl pkg/clusterstack, cluster-stack-operator
// pkg/clusteraddon and internal/controller/clusteraddon_controller.go):
//
//   csctl.yaml                  apiVersion, config.provider.type, config.clusterStackName,
//                               config.kubernetesVersion (full: v1.30.10)
//   metadata.yaml               read in a packaged release (assets.ts), which has it INSTEAD of
//                               csctl.yaml; csctl create never reads one in a stack folder (it
//                               writes the release's own), so neither does this
//   cluster-class/              a Helm chart (Chart.yaml + templates/); its version is a placeholder
//   clusteraddon.yaml           present: the stages layout; addonStages.<hook>: [{name, action,
//                               waitForPreCondition, waitForPostCondition}], each name a chart
//                               cluster-addon/<name>/ (Chart.yaml, values.yaml, charts/*.tgz,
//                               overwrite.yaml = per-Cluster values, Go template)
//   cluster-addon/ + cluster-addon-values.yaml   absent: the old layout, one umbrella chart
//
// The version is the tag's: csctl overwrites the Chart.yaml versions with it. Every addon goes
// to kube-system, as CSO's helm template --namespace kube-system does. A stack folder is read as
// csctl create packages it: its `<< .ClusterClassVersion >>`-style placeholders substituted in
// the files csctl releases (csctlTreeAsReleased, ./placeholders.ts).
import type { ReleaseTree } from '../../api/release.ts';
import {
  ADDON_STAGES,
  type AddonStage,
  type CsctlMetadata,
  type DescribedAddon,
  type ReleaseFormat,
  type StackDescription,
  type ValidationResult,
  type WaitForCondition,
} from '../description.ts';
import { pathProblem } from '../paths.ts';
import { parseStackVersion, type ReleaseTag, toDashForm } from '../tags.ts';
import { type CsctlVersions, csctlPlaceholderErrors, substituteCsctlTree } from './placeholders.ts';
import { StructReader } from './struct.ts';

export const CSCTL_FILE = 'csctl.yaml';
export const CLUSTER_ADDON_CONFIG_FILE = 'clusteraddon.yaml';
export const CLUSTER_ADDON_VALUES_FILE = 'cluster-addon-values.yaml';
export const METADATA_FILE = 'metadata.yaml';
export const OVERWRITE_FILE = 'overwrite.yaml';
export const CLUSTER_CLASS_DIR = 'cluster-class/';
export const CLUSTER_ADDON_DIR = 'cluster-addon/';
/** CSO's clusterAddonNamespace: every addon is templated and applied there. */
export const CLUSTER_ADDON_NAMESPACE = 'kube-system';

// csctl's GetCsctlConfig checks, with its patterns.
const PROVIDER_TYPE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const CSCTL_KUBERNETES_VERSION = /^v\d+\.\d+\.\d+$/;

/** csctl.yaml (csctl clusterstack.CsctlConfig). */
export interface CsctlConfig {
  apiVersion: string;
  kubernetesVersion: string;
  clusterStackName: string;
  providerType: string;
  providerApiVersion: string;
}

/** One entry of a clusteraddon.yaml stage (CSO clusteraddon.Stage). */
export interface ClusterAddonStage {
  name: string;
  action: 'apply' | 'delete';
  waitForPreCondition?: WaitForCondition;
  waitForPostCondition?: WaitForCondition;
}

/** clusteraddon.yaml (CSO clusteraddon.Config): the stages of the two hooks CSO runs. */
export interface ClusterAddonConfig {
  apiVersion: string;
  clusterAddonVersion: string;
  addonStages: Record<AddonStage, ClusterAddonStage[]>;
}

/** Parses csctl.yaml with csctl's checks; errors name the field. */
export function parseCsctlConfig(text: string): ValidationResult<CsctlConfig> {
  const r = StructReader.parse(CSCTL_FILE, text);
  const top = r.struct(r.root(), '');
  const config = r.struct(top?.get('config'), 'config');
  const provider = r.struct(config?.get('provider'), 'config.provider');
  const value: CsctlConfig = {
    apiVersion: r.string(top?.get('apiVersion'), 'apiVersion'),
    kubernetesVersion: r.string(config?.get('kubernetesVersion'), 'config.kubernetesVersion'),
    clusterStackName: r.string(config?.get('clusterStackName'), 'config.clusterStackName'),
    providerType: r.string(provider?.get('type'), 'config.provider.type'),
    providerApiVersion: r.string(provider?.get('apiVersion'), 'config.provider.apiVersion'),
  };
  const errors = r.errors;
  if (errors.length === 0) {
    if (value.providerType === '') errors.push(`${CSCTL_FILE}: config.provider.type must not be empty`);
    else if (value.providerType.length > 253 || !PROVIDER_TYPE.test(value.providerType))
      errors.push(
        `${CSCTL_FILE}: config.provider.type "${value.providerType}" must be lower-case letters, digits and "-" (at most 253)`,
      );
    if (value.clusterStackName === '')
      errors.push(`${CSCTL_FILE}: config.clusterStackName must not be empty`);
    if (!CSCTL_KUBERNETES_VERSION.test(value.kubernetesVersion))
      errors.push(
        `${CSCTL_FILE}: config.kubernetesVersion "${value.kubernetesVersion}" is not a full version like v1.30.10`,
      );
  }
  return errors.length > 0 ? { ok: false, errors } : { ok: true, value };
}

function waitForCondition(r: StructReader, node: unknown, field: string): WaitForCondition | undefined {
  const fields = r.struct(node, field);
  if (fields === undefined) return undefined;
  const objects = (r.list(fields.get('objects'), `${field}.objects`) ?? []).map((o, i) => {
    const at = `${field}.objects[${i}]`;
    const f = r.struct(o, at);
    const s = (k: string): string => r.string(f?.get(k), `${at}.${k}`);
    return {
      key: s('key'),
      apiVersion: s('apiVersion'),
      kind: s('kind'),
      name: s('name'),
      namespace: s('namespace'),
    };
  });
  const conditions = r.string(fields.get('conditions'), `${field}.conditions`);
  // CSO waits when the decoded condition is not the zero value (reflect.DeepEqual): a given
  // objects list, even an empty one, or a non-empty expression.
  return r.given(fields.get('objects')) || conditions !== '' ? { objects, conditions } : undefined;
}

/**
 * Parses clusteraddon.yaml. Stage keys other than CSO's two hooks are ignored (CSO never runs
 * them). An action other than apply/delete is an error: CSO would run it as a delete.
 */
export function parseClusterAddonConfig(text: string): ValidationResult<ClusterAddonConfig> {
  const file = CLUSTER_ADDON_CONFIG_FILE;
  const r = StructReader.parse(file, text);
  const top = r.struct(r.root(), '');
  const stagesNode = r.struct(top?.get('addonStages'), 'addonStages');
  const semantic: string[] = [];
  const addonStages = {} as Record<AddonStage, ClusterAddonStage[]>;
  for (const hook of ADDON_STAGES) {
    const seen = new Set<string>();
    addonStages[hook] = (r.list(stagesNode?.get(hook), `addonStages.${hook}`) ?? []).flatMap((entry, i) => {
      const at = `addonStages.${hook}[${i}]`;
      const f = r.struct(entry, at);
      if (f === undefined) return [];
      const name = r.string(f.get('name'), `${at}.name`);
      const action = r.string(f.get('action'), `${at}.action`);
      const pre = waitForCondition(r, f.get('waitForPreCondition'), `${at}.waitForPreCondition`);
      const post = waitForCondition(r, f.get('waitForPostCondition'), `${at}.waitForPostCondition`);
      if (name === '') semantic.push(`${file}: ${at}.name must not be empty`);
      if (action !== 'apply' && action !== 'delete') {
        semantic.push(`${file}: ${at}.action "${action}" must be apply or delete`);
        return [];
      }
      // CSO tracks a stage's progress by (name, action): a repeat would share one status.
      const id = `${name}\n${action}`;
      if (seen.has(id)) semantic.push(`${file}: ${at} repeats ${name} with action ${action} in ${hook}`);
      seen.add(id);
      return [
        {
          name,
          action,
          ...(pre !== undefined ? { waitForPreCondition: pre } : {}),
          ...(post !== undefined ? { waitForPostCondition: post } : {}),
        },
      ];
    });
  }
  const errors = [...r.errors, ...semantic];
  if (errors.length > 0) return { ok: false, errors };
  return {
    ok: true,
    value: {
      apiVersion: r.string(top?.get('apiVersion'), 'apiVersion'),
      clusterAddonVersion: r.string(top?.get('clusterAddonVersion'), 'clusterAddonVersion'),
      addonStages,
    },
  };
}

/** Parses metadata.yaml (csctl clusterstack.MetaData). */
export function parseCsctlMetadata(text: string): ValidationResult<CsctlMetadata> {
  const r = StructReader.parse(METADATA_FILE, text);
  const top = r.struct(r.root(), '');
  const versions = r.struct(top?.get('versions'), 'versions');
  const components = r.struct(versions?.get('components'), 'versions.components');
  const value: CsctlMetadata = {
    apiVersion: r.string(top?.get('apiVersion'), 'apiVersion'),
    clusterStack: r.string(versions?.get('clusterStack'), 'versions.clusterStack'),
    kubernetes: r.string(versions?.get('kubernetes'), 'versions.kubernetes'),
    clusterAddon: r.string(components?.get('clusterAddon'), 'versions.components.clusterAddon'),
    nodeImage: r.string(components?.get('nodeImage'), 'versions.components.nodeImage'),
  };
  return r.errors.length > 0 ? { ok: false, errors: r.errors } : { ok: true, value };
}

/** The checks of csctl.yaml against the tag, naming the field that differs. */
export function csctlConfigTagErrors(config: CsctlConfig, tag: ReleaseTag): string[] {
  const errors: string[] = [];
  if (config.providerType !== tag.provider)
    errors.push(
      `${CSCTL_FILE}: config.provider.type "${config.providerType}" does not match the tag's provider ${tag.provider}`,
    );
  if (config.clusterStackName !== tag.name)
    errors.push(
      `${CSCTL_FILE}: config.clusterStackName "${config.clusterStackName}" does not match the tag's name ${tag.name}`,
    );
  const m = /^v(\d+)\.(\d+)\./.exec(config.kubernetesVersion);
  if (m === null || Number(m[1]) !== tag.kubernetesMajor || Number(m[2]) !== tag.kubernetesMinor)
    errors.push(
      `${CSCTL_FILE}: config.kubernetesVersion "${config.kubernetesVersion}" does not match the tag's Kubernetes ${tag.kubernetesVersion}`,
    );
  return errors;
}

function metadataErrors(metadata: CsctlMetadata, config: CsctlConfig, tag: ReleaseTag): string[] {
  const errors: string[] = [];
  const v = parseStackVersion(metadata.clusterStack);
  if (!v.ok || toDashForm(metadata.clusterStack) !== toDashForm(tag.version))
    errors.push(
      `${METADATA_FILE}: versions.clusterStack "${metadata.clusterStack}" does not match the tag's version ${tag.version}`,
    );
  if (metadata.kubernetes !== config.kubernetesVersion)
    errors.push(
      `${METADATA_FILE}: versions.kubernetes "${metadata.kubernetes}" differs from ${CSCTL_FILE} config.kubernetesVersion "${config.kubernetesVersion}"`,
    );
  return errors;
}

/** The addon steps of the stages layout; errors for stage names without a chart folder. */
function stageAddons(tree: ReleaseTree, config: ClusterAddonConfig, errors: string[]): DescribedAddon[] {
  return ADDON_STAGES.flatMap((hook) =>
    config.addonStages[hook].map((stage, i): DescribedAddon => {
      const path = `${CLUSTER_ADDON_DIR}${stage.name}/`;
      // CSO looks the name up among the folders directly in cluster-addon/ and skips a stage it
      // does not find there (with only a condition): an error here, so the author hears of it.
      if (stage.name !== '' && (stage.name.includes('/') || pathProblem(stage.name) !== undefined))
        errors.push(
          `${CLUSTER_ADDON_CONFIG_FILE}: addonStages.${hook}[${i}].name "${stage.name}" must be the name of a folder in ${CLUSTER_ADDON_DIR}`,
        );
      else if (stage.name !== '' && !tree.has(`${path}Chart.yaml`))
        errors.push(
          `${CLUSTER_ADDON_CONFIG_FILE}: addonStages.${hook}[${i}].name "${stage.name}": ${path}Chart.yaml is missing (each stage entry names a Helm chart in ${CLUSTER_ADDON_DIR})`,
        );
      const previous = config.addonStages[hook][i - 1];
      return {
        name: stage.name,
        stage: hook,
        action: stage.action,
        dependsOn: previous === undefined ? [] : [previous.name],
        targetNamespace: CLUSTER_ADDON_NAMESPACE,
        path,
        content: 'helm-chart',
        ...(tree.has(`${path}${OVERWRITE_FILE}`) ? { valuesTemplate: `${path}${OVERWRITE_FILE}` } : {}),
        ...(stage.waitForPreCondition !== undefined
          ? { waitForPreCondition: stage.waitForPreCondition }
          : {}),
        ...(stage.waitForPostCondition !== undefined
          ? { waitForPostCondition: stage.waitForPostCondition }
          : {}),
      };
    }),
  );
}

/** The one addon of the old layout: the umbrella chart cluster-addon/ with cluster-addon-values.yaml. */
function umbrellaAddon(tree: ReleaseTree, errors: string[]): DescribedAddon {
  if (!tree.has(`${CLUSTER_ADDON_DIR}Chart.yaml`))
    errors.push(
      `release has no ${CLUSTER_ADDON_DIR}Chart.yaml: a csctl stack without ${CLUSTER_ADDON_CONFIG_FILE} needs one umbrella chart in ${CLUSTER_ADDON_DIR}`,
    );
  if (!tree.has(CLUSTER_ADDON_VALUES_FILE))
    errors.push(
      `release has no ${CLUSTER_ADDON_VALUES_FILE}: a csctl stack without ${CLUSTER_ADDON_CONFIG_FILE} needs it (csctl packages it, CSO templates the values from it)`,
    );
  return {
    name: 'cluster-addon',
    action: 'apply',
    dependsOn: [],
    targetNamespace: CLUSTER_ADDON_NAMESPACE,
    path: CLUSTER_ADDON_DIR,
    content: 'helm-chart',
    valuesTemplate: CLUSTER_ADDON_VALUES_FILE,
  };
}

/** Reads a csctl-layout release at its tag; all errors at once. */
export function readCsctlRelease(tree: ReleaseTree, tag: ReleaseTag): ValidationResult<StackDescription> {
  const errors: string[] = [];
  const configText = tree.get(CSCTL_FILE);
  // A stack folder's metadata.yaml is not read: csctl create writes the release's own.
  const metadataText = configText === undefined ? tree.get(METADATA_FILE) : undefined;
  const metadata = metadataText === undefined ? undefined : parseCsctlMetadata(metadataText);
  const config =
    configText !== undefined
      ? parseCsctlConfig(configText)
      : metadata?.ok === true && isPackagedMetadata(metadata.value)
        ? packagedConfig(metadata.value, tag)
        : undefined;
  if (config === undefined) errors.push(`release has no ${CSCTL_FILE}`);
  else if (!config.ok) errors.push(...config.errors);
  else errors.push(...csctlConfigTagErrors(config.value, tag));

  if (metadata !== undefined && !metadata.ok) errors.push(...metadata.errors);
  if (metadata?.ok === true && config?.ok === true)
    errors.push(...metadataErrors(metadata.value, config.value, tag));
  if (configText !== undefined) errors.push(...csctlPlaceholderErrors(tree, releasedByCsctl(tree)));

  if (!tree.has(`${CLUSTER_CLASS_DIR}Chart.yaml`))
    errors.push(
      `release has no ${CLUSTER_CLASS_DIR}Chart.yaml: a csctl stack's cluster-class is a Helm chart`,
    );

  // CSO (and csctl) choose the layout by the presence of clusteraddon.yaml alone; a
  // cluster-addon-values.yaml beside it is not used.
  const addonConfigText = tree.get(CLUSTER_ADDON_CONFIG_FILE);
  let addons: DescribedAddon[] = [];
  if (addonConfigText === undefined) {
    addons = [umbrellaAddon(tree, errors)];
  } else {
    const addonConfig = parseClusterAddonConfig(addonConfigText);
    if (!addonConfig.ok) errors.push(...addonConfig.errors);
    else addons = stageAddons(tree, addonConfig.value, errors);
  }

  if (errors.length > 0 || config === undefined || !config.ok) return { ok: false, errors };
  return {
    ok: true,
    value: {
      format: 'csctl',
      provider: config.value.providerType,
      name: config.value.clusterStackName,
      kubernetesVersion: config.value.kubernetesVersion,
      version: tag.version,
      addons,
      clusterClass: { kind: 'helm-chart', path: CLUSTER_CLASS_DIR },
      valuesTemplating: 'go-template',
      csctl: {
        layout: addonConfigText === undefined ? 'umbrella' : 'stages',
        apiVersion: config.value.apiVersion,
        metadata:
          metadata?.ok === true ? metadata.value : csctlSourceMetadata(config.value.kubernetesVersion, tag),
      },
    },
  };
}

/** The apiVersion group of csctl's metadata.yaml (clusterstack.MetaData). */
const METADATA_API_GROUP = 'metadata.clusterstack.x-k8s.io/';
/** The apiVersion csctl create writes into metadata.yaml. */
const METADATA_API_VERSION = `${METADATA_API_GROUP}v1alpha1`;

/**
 * The versions csctl create gives a stack folder released at `tag`: the tag's for the stack and, as
 * csctl's hash mode and a stack's first stable release give them, for the addon and the node image
 * too. (A later stable release bumps those two only when their folders changed since the previous
 * release, which the tree at one tag does not say.)
 */
export function csctlSourceVersions(tag: ReleaseTag): CsctlVersions {
  return { clusterStack: tag.version, clusterAddon: tag.version, nodeImage: tag.version };
}

/** The metadata.yaml csctl create writes for a stack folder released at `tag`. */
export function csctlSourceMetadata(kubernetesVersion: string, tag: ReleaseTag): CsctlMetadata {
  return { apiVersion: METADATA_API_VERSION, kubernetes: kubernetesVersion, ...csctlSourceVersions(tag) };
}

/**
 * Which files of a stack folder csctl create releases templated: cluster-class/ (helm package),
 * cluster-addon/ (a tar; helm package in the old layout) and, in the old layout only,
 * cluster-addon-values.yaml. clusteraddon.yaml it copies from the folder untemplated; csctl.yaml and
 * metadata.yaml are not released.
 */
export function releasedByCsctl(tree: ReleaseTree): (path: string) => boolean {
  const umbrella = !tree.has(CLUSTER_ADDON_CONFIG_FILE);
  return (path) =>
    path.startsWith(CLUSTER_CLASS_DIR) ||
    path.startsWith(CLUSTER_ADDON_DIR) ||
    (umbrella && path === CLUSTER_ADDON_VALUES_FILE);
}

/**
 * A stack folder (csctl.yaml) released at `tag` as csctl create packages it: csctl's placeholders
 * substituted in the files it releases. A packaged release (no csctl.yaml) is as csctl left it;
 * either way the same tree object when nothing changes.
 */
export function csctlTreeAsReleased(tree: ReleaseTree, tag: ReleaseTag): ReleaseTree {
  if (!tree.has(CSCTL_FILE)) return tree;
  return substituteCsctlTree(tree, csctlSourceVersions(tag), releasedByCsctl(tree));
}

function isPackagedMetadata(metadata: CsctlMetadata): boolean {
  return metadata.apiVersion.startsWith(METADATA_API_GROUP);
}

/**
 * A release csctl packaged (controller/releases/csctl/assets.ts) has no csctl.yaml: as CSO does,
 * provider and name come from the tag and the full Kubernetes version from metadata.yaml. Its
 * apiVersion is unknown (""): csctl.yaml's is read by nothing after csctl.
 */
function packagedConfig(metadata: CsctlMetadata, tag: ReleaseTag): ValidationResult<CsctlConfig> {
  if (!CSCTL_KUBERNETES_VERSION.test(metadata.kubernetes))
    return {
      ok: false,
      errors: [
        `${METADATA_FILE}: versions.kubernetes "${metadata.kubernetes}" is not a full version like v1.30.10`,
      ],
    };
  return {
    ok: true,
    value: {
      apiVersion: '',
      kubernetesVersion: metadata.kubernetes,
      clusterStackName: tag.name,
      providerType: tag.provider,
      providerApiVersion: '',
    },
  };
}

/** A tree of a packaged csctl release: no csctl.yaml, csctl's metadata.yaml and a cluster-class chart. */
export function isPackagedCsctlTree(tree: ReleaseTree): boolean {
  const text = tree.get(METADATA_FILE);
  if (tree.has(CSCTL_FILE) || text === undefined || !tree.has(`${CLUSTER_CLASS_DIR}Chart.yaml`)) return false;
  const metadata = parseCsctlMetadata(text);
  return metadata.ok && isPackagedMetadata(metadata.value);
}

export const csctlFormat: ReleaseFormat = {
  name: 'csctl',
  // A packaged release's metadata.yaml is only possible: a stack.yaml beside it is read as native.
  claims: (tree) => (tree.has(CSCTL_FILE) ? 'certain' : isPackagedCsctlTree(tree) ? 'possible' : undefined),
  read: readCsctlRelease,
  asReleased: csctlTreeAsReleased,
};
