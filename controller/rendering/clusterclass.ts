// The cluster-class of a csctl release (a Helm chart), rendered as the cluster-stack-operator
// renders it: `helm template <first four dash-parts of the tag> <cluster-class/> --namespace <the
// ClusterStack's namespace>` with the chart's own values and Chart.yaml's version replaced by the
// release version (csctl writes it there). The output is parsed with Go's YAML semantics and
// checked; what Flux applies is exactly the parsed objects, written one per file as JSON (valid
// YAML that no YAML dialect reads differently), so what was validated is what lands.
//
// Pure and synchronous: Go engine calls go through `engine`, which answers at once (in-process, or
// a result a driver already has: withBoundedGoEngine re-runs the caller until every call is known).
import type { ReleaseTree } from '../api/release.ts';
import type { StackDescription } from '../releases/description.ts';
import { pathProblem } from '../releases/paths.ts';
import { clusterClassNameForTag } from '../releases/tags.ts';
import {
  asCsoReadsIt,
  type EngineFailure,
  type GoEngineCall,
  type GoEngineResult,
} from './goengine/index.ts';
import type { RenderFailure } from './types.ts';

/** A Go engine call answered at once: its result, or a limit's / the pool's failure. */
export type SyncGoEngine = (call: GoEngineCall) => GoEngineResult | RenderFailure;

export interface ClusterClassRenderInput {
  tree: ReleaseTree;
  description: StackDescription;
  /** The release tag, e.g. docker-csoferrol-1-30-v1 (the ClusterClass's name). */
  tag: string;
  /** The ClusterStack's namespace (Helm's .Release.Namespace). */
  namespace: string;
  /** The ClusterClass API versions the management cluster serves (undefined: not checked). */
  servedClassVersions?: readonly string[];
}

export interface RenderedClusterClass {
  /** The objects in Helm's output order. */
  objects: Record<string, unknown>[];
  /** The files Flux applies: `<n>-<kind>-<name>.yaml` (JSON) → content. */
  files: Map<string, string>;
  /** apiVersion of the ClusterClass. */
  classApiVersion: string;
}

export type ClusterClassRendering =
  | { ok: true; value: RenderedClusterClass }
  | {
      ok: false;
      /** RenderFailed / LimitExceeded (the engine), InvalidRelease (the output), ClusterClassVersionNotServed. */
      reason: 'RenderFailed' | 'LimitExceeded' | 'InvalidRelease' | 'ClusterClassVersionNotServed';
      message: string;
    };

/** Helm's release name of a csctl cluster-class: the first four dash-parts of the tag (CSO). */
export function csctlReleaseName(tag: string): string {
  return tag.split('-').slice(0, 4).join('-');
}

/** The versions of ClusterClass a csctl cluster-class may hold (real SCS stacks use v1beta1). */
export const CLUSTER_CLASS_API_VERSIONS = ['cluster.x-k8s.io/v1beta2', 'cluster.x-k8s.io/v1beta1'];

/**
 * Kinds that are cluster-scoped in every Kubernetes: a cluster-class chart must not render them (its
 * objects belong to the ClusterStack's namespace, as a native cluster-class's do under the release
 * Kustomization's targetNamespace).
 */
const CLUSTER_SCOPED_KINDS = new Set([
  'Namespace',
  'Node',
  'PersistentVolume',
  'ClusterRole',
  'ClusterRoleBinding',
  'CustomResourceDefinition',
  'APIService',
  'MutatingWebhookConfiguration',
  'ValidatingWebhookConfiguration',
  'ValidatingAdmissionPolicy',
  'ValidatingAdmissionPolicyBinding',
  'MutatingAdmissionPolicy',
  'MutatingAdmissionPolicyBinding',
  'StorageClass',
  'CSIDriver',
  'CSINode',
  'VolumeAttachment',
  'PriorityClass',
  'RuntimeClass',
  'IngressClass',
  'CertificateSigningRequest',
  'FlowSchema',
  'PriorityLevelConfiguration',
  'ExtensionConfig',
]);

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function engineFailure(
  result: EngineFailure | RenderFailure,
  what: string,
): Extract<ClusterClassRendering, { ok: false }> {
  if ('reason' in result) {
    const reason = result.reason === 'LimitExceeded' ? 'LimitExceeded' : 'RenderFailed';
    return { ok: false, reason, message: `${what}: ${result.message}` };
  }
  const limit = result.engine === 'output' || result.engine === 'memory';
  return {
    ok: false,
    reason: limit ? 'LimitExceeded' : 'RenderFailed',
    message: `${what}: ${result.error}`,
  };
}

/** The chart's files relative to the chart root (text and binary, e.g. vendored charts/*.tgz). */
export function chartFiles(tree: ReleaseTree, root: string): Map<string, string | Uint8Array> {
  const files = new Map<string, string | Uint8Array>();
  for (const [path, content] of tree) if (path.startsWith(root)) files.set(path.slice(root.length), content);
  for (const [path, content] of tree.binary ?? [])
    if (path.startsWith(root)) files.set(path.slice(root.length), content);
  return files;
}

/** The file name an object is written under (its position keeps Helm's order; names are DNS). */
function objectFileName(index: number, kind: string, name: string): string {
  return `${String(index).padStart(3, '0')}-${kind.toLowerCase()}-${name}.yaml`;
}

/** Renders and checks the cluster-class chart of a csctl release (see the top of this file). */
export function renderCsctlClusterClass(
  engine: SyncGoEngine,
  input: ClusterClassRenderInput,
): ClusterClassRendering {
  const root = input.description.clusterClass.path;
  const where = `${root} (helm template ${csctlReleaseName(input.tag)})`;
  const rendered = engine({
    op: 'helmTemplate',
    request: {
      files: chartFiles(input.tree, root),
      releaseName: csctlReleaseName(input.tag),
      namespace: input.namespace,
      chartVersion: input.description.version,
    },
  });
  if (!rendered.ok) return engineFailure(rendered, where);
  if (!('manifests' in rendered))
    return { ok: false, reason: 'RenderFailed', message: `${where}: no manifests` };

  const objects: Record<string, unknown>[] = [];
  const problems: string[] = [];
  const seen = new Set<string>();
  for (const manifest of rendered.manifests) {
    const file = `${root}${manifest.path.slice(manifest.path.indexOf('/') + 1)}`;
    if (manifest.hook === true) {
      problems.push(`${file}: a Helm hook; CSO applies a cluster-class's objects, not hooks`);
      continue;
    }
    const parsed = engine({ op: 'parseGoYaml', text: asCsoReadsIt(manifest.content) });
    if (!parsed.ok) return engineFailure(parsed, file);
    if (!('documents' in parsed)) return { ok: false, reason: 'RenderFailed', message: `${file}: not YAML` };
    for (const doc of parsed.documents) {
      if (doc === null) continue;
      const problem = objectProblem(doc, input.namespace);
      if (problem !== undefined) {
        problems.push(`${file}: ${problem}`);
        continue;
      }
      const obj = doc as Record<string, unknown> & { metadata: Record<string, unknown> };
      const id = `${String(obj.apiVersion).split('/')[0]}/${String(obj.kind)}/${String(obj.metadata.name)}`;
      if (seen.has(id)) problems.push(`${file}: ${obj.kind} ${obj.metadata.name} is rendered twice`);
      seen.add(id);
      objects.push(obj);
    }
  }
  const classes = objects.filter((o) => o.kind === 'ClusterClass');
  // csctl names the ClusterClass <release name>-<chart version>: for a custom channel the version's
  // dot form (docker-ferrol-1-30-v0-sha.abc1234), which CSO's Clusters name; stable: the tag.
  const className = clusterClassNameForTag(input.tag) ?? input.tag;
  const cls = classes.find((o) => (o.metadata as Record<string, unknown>).name === className);
  if (cls === undefined) {
    const found = classes.map((o) => `${(o.metadata as Record<string, unknown>).name}`);
    problems.push(
      `${root}: renders no ClusterClass named ${className} (the release's ClusterClass)${found.length > 0 ? `; found ClusterClass ${found.join(', ')}` : '; it renders no ClusterClass at all'}`,
    );
  } else if (!CLUSTER_CLASS_API_VERSIONS.includes(String(cls.apiVersion))) {
    problems.push(
      `${root}: ClusterClass ${className} is ${String(cls.apiVersion)}; expected one of ${CLUSTER_CLASS_API_VERSIONS.join(', ')}`,
    );
  }
  if (problems.length > 0) return { ok: false, reason: 'InvalidRelease', message: problems.join('; ') };
  const classApiVersion = String(cls?.apiVersion);
  const served = input.servedClassVersions;
  if (served !== undefined && !served.includes(classApiVersion))
    return {
      ok: false,
      reason: 'ClusterClassVersionNotServed',
      message: `ClusterClass ${className} is ${classApiVersion}, which the management cluster does not serve (it serves ${served.length > 0 ? served.join(', ') : 'no ClusterClass version'}); install a Cluster API that serves it`,
    };
  const files = new Map<string, string>();
  objects.forEach((o, i) => {
    const meta = o.metadata as Record<string, unknown>;
    files.set(objectFileName(i, String(o.kind), String(meta.name)), `${JSON.stringify(o, null, 2)}\n`);
  });
  return { ok: true, value: { objects, files, classApiVersion } };
}

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
const KIND = /^[A-Za-z][A-Za-z0-9]{0,62}$/;

/** Why one rendered document cannot be applied into `namespace` (undefined: it can). */
function objectProblem(doc: unknown, namespace: string): string | undefined {
  if (!isRecord(doc)) return 'a document that is not an object';
  const { apiVersion, kind, metadata } = doc;
  if (typeof apiVersion !== 'string' || apiVersion === '') return 'an object without apiVersion';
  if (typeof kind !== 'string' || !KIND.test(kind)) return 'an object without a valid kind';
  if (!isRecord(metadata) || typeof metadata.name !== 'string' || !DNS_SUBDOMAIN.test(metadata.name))
    return `${kind} without a valid metadata.name`;
  const name = metadata.name;
  if (pathProblem(name) !== undefined) return `${kind} ${name}: its name is not usable as a file name`;
  if (CLUSTER_SCOPED_KINDS.has(kind))
    return `${kind} ${name} is cluster-scoped; a cluster-class may only hold objects of the ClusterStack's namespace ${namespace}`;
  if (metadata.namespace !== undefined && metadata.namespace !== namespace)
    return `${kind} ${name} is in namespace ${String(metadata.namespace)}; a cluster-class may only hold objects of the ClusterStack's namespace ${namespace}`;
  return undefined;
}
