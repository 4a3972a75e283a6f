// Renders one addon of a cluster-stack-operator (csctl) release for one Cluster, as CSO does it
// (internal/controller/clusteraddon_controller.go): the values are the addon's Go template
// (overwrite.yaml, or the old layout's cluster-addon-values.yaml) executed with CSO's function map
// over the live {Cluster, ControlPlane, InfraCluster}; when its YAML output has a string field
// `values`, that string is the values, else the whole output (buildTemplateFromClusterAddonValues).
// The chart is then rendered as `helm template --include-crds --kube-version <k8s> cluster-addon
// <chart> --namespace kube-system -f <values>` (helmTemplateClusterAddon). Hooks are printed and
// applied like any object, as CSO applies helm template's whole output. Pure and synchronous over
// the Go engine: the result has the shape of the native renderer's, so the fleet branch,
// Kustomizations and readiness stay as they are.
import { pathProblem } from '../releases/paths.ts';
import { OutputBudget } from './budget.ts';
import { asCsoReadsIt, type EngineFailure, goTemplate, helmTemplate, parseGoYaml } from './goengine/index.ts';
import { DEFAULT_RENDER_LIMITS, formatBytes } from './limits.ts';
import type {
  CsctlAddonInput,
  KubernetesObject,
  PlainObject,
  RenderFailure,
  RenderOptions,
  RenderResult,
} from './types.ts';
import { isPlainObject } from './values.ts';

/** The Helm release name CSO renders every addon chart with. */
export const CSO_ADDON_RELEASE_NAME = 'cluster-addon';
/** The namespace CSO renders and applies addons into. */
export const CSO_ADDON_NAMESPACE = 'kube-system';

function fail(reason: RenderFailure['reason'], message: string): RenderFailure {
  return { ok: false, reason, message };
}

/** A Go engine failure as a render failure: limits as LimitExceeded, the rest as `reason`. */
function engineFailure(
  where: string,
  failure: EngineFailure,
  reason: RenderFailure['reason'],
  maxOutputBytes: number,
): RenderFailure {
  if (failure.engine === 'output')
    return fail(
      'LimitExceeded',
      `${where}: the addon's output exceeds the limit of ${formatBytes(maxOutputBytes)} (--render-max-output)`,
    );
  if (failure.engine === 'memory')
    return fail(
      'LimitExceeded',
      `${where}: rendering needs more than the memory limit (--render-max-memory)`,
    );
  return fail(reason, `${where}: ${failure.error}`);
}

/** The template data CSO builds: only the objects the Cluster refers to. */
function templateData(input: CsctlAddonInput): PlainObject {
  return {
    Cluster: input.cluster,
    ...(input.controlPlane !== undefined ? { ControlPlane: input.controlPlane } : {}),
    ...(input.infraCluster !== undefined ? { InfraCluster: input.infraCluster } : {}),
  };
}

function clusterName(cluster: PlainObject): string {
  const meta = cluster.metadata;
  return isPlainObject(meta) && typeof meta.name === 'string' ? meta.name : '';
}

/**
 * The values YAML of one addon for one Cluster, as CSO's buildTemplateFromClusterAddonValues gives
 * it: the template's output, or its `values:` string when it has one. CSO reads only the first YAML
 * document of the output and fails (a panic in CSO) when that is not a mapping; so does this.
 */
export function csctlAddonValues(
  input: CsctlAddonInput,
  maxOutputBytes: number = DEFAULT_RENDER_LIMITS.maxOutputBytes,
): { ok: true; values: string | undefined } | RenderFailure {
  const file = input.valuesTemplate;
  if (file === undefined) return { ok: true, values: undefined };
  const template = input.tree.get(file);
  if (template === undefined) return fail('InvalidValues', `${file}: not found in the release`);
  const rendered = goTemplate(template, templateData(input), {
    name: `cluster-addon-values-${clusterName(input.cluster)}`,
    funcs: 'cso',
    maxOutputBytes,
    ...(input.fixed !== undefined ? { fixed: input.fixed } : {}),
  });
  if (!rendered.ok) return engineFailure(file, rendered, 'TemplateError', maxOutputBytes);
  // parseGoYaml trims each document as Helm splits manifests; a closing comment line keeps the
  // line break that ends a `values: |` block, which yaml.v3 (CSO's parser) keeps.
  const text = rendered.output.endsWith('\n') ? `${rendered.output}#\n` : rendered.output;
  const parsed = parseGoYaml(text, { maxOutputBytes });
  if (!parsed.ok) return engineFailure(`${file} (rendered)`, parsed, 'InvalidValues', maxOutputBytes);
  const first = parsed.documents[0];
  if (!isPlainObject(first)) {
    return fail(
      'InvalidValues',
      `${file}: renders to ${first === null || first === undefined ? 'nothing' : Array.isArray(first) ? 'a list' : typeof first}, expected a YAML mapping (with a "values: |" string, or the values themselves)`,
    );
  }
  return { ok: true, values: typeof first.values === 'string' ? first.values : rendered.output };
}

/** The chart's files, by path relative to the chart folder (text and binary). */
function chartFiles(input: CsctlAddonInput): Map<string, string | Uint8Array> {
  const files = new Map<string, string | Uint8Array>();
  for (const source of [input.tree, input.binary] as const) {
    for (const [path, content] of source) {
      if (path.startsWith(input.chartPath)) files.set(path.slice(input.chartPath.length), content);
    }
  }
  return files;
}

/**
 * Renders csctl addon `input.addon` for `input.cluster`: files (path relative to the addon's
 * folder on the fleet branch: helm's `# Source:` path, documents of one source joined in printed
 * order) and their objects. Never throws for bad input; output capped at options.maxOutputBytes.
 */
export function renderCsctlAddon(input: CsctlAddonInput, options: RenderOptions = {}): RenderResult {
  const maxOutputBytes = options.maxOutputBytes ?? DEFAULT_RENDER_LIMITS.maxOutputBytes;
  const budget = new OutputBudget(maxOutputBytes);
  if (input.valuesTemplate !== undefined) options.onTemplate?.(input.valuesTemplate);
  const values = csctlAddonValues(input, maxOutputBytes);
  if (!values.ok) return values;
  if (values.values !== undefined) {
    const over = budget.addText(`${input.valuesTemplate} (rendered)`, values.values);
    if (over !== undefined) return over;
  }
  const files = chartFiles(input);
  if (!files.has('Chart.yaml'))
    return fail('AddonNotFound', `${input.chartPath}Chart.yaml: not found in the release`);
  options.onTemplate?.(`${input.chartPath}templates/`);
  const rendered = helmTemplate({
    files,
    values: values.values === undefined ? [] : [values.values],
    releaseName: CSO_ADDON_RELEASE_NAME,
    namespace: CSO_ADDON_NAMESPACE,
    kubeVersion: input.kubernetesVersion,
    includeCrds: true,
    maxOutputBytes: maxOutputBytes - budget.bytes,
    ...(input.fixed !== undefined ? { fixed: input.fixed } : {}),
  });
  if (!rendered.ok) return engineFailure(input.chartPath, rendered, 'TemplateError', maxOutputBytes);

  const bySource = new Map<string, string[]>();
  for (const manifest of rendered.manifests) {
    const docs = bySource.get(manifest.path) ?? [];
    docs.push(manifest.content.trim());
    bySource.set(manifest.path, docs);
  }
  const out = new Map<string, string>();
  const objects: KubernetesObject[] = [];
  for (const [source, docs] of [...bySource].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const unsafe = pathProblem(`${input.addon}/${source}`);
    if (unsafe !== undefined) return fail('InvalidOutput', `${input.chartPath}: rendered file ${unsafe}`);
    const text = `${docs.join('\n---\n')}\n`;
    const over = budget.addText(`${input.chartPath} (rendered ${source})`, text);
    if (over !== undefined) return over;
    const parsed = parseGoYaml(docs.map(asCsoReadsIt).join('---\n'), { maxOutputBytes });
    if (!parsed.ok)
      return engineFailure(
        `${input.chartPath} (rendered ${source})`,
        parsed,
        'InvalidOutput',
        maxOutputBytes,
      );
    const found = objectsOf(source, parsed.documents);
    if (typeof found === 'string')
      return fail('InvalidOutput', `${input.chartPath} (rendered ${source}): ${found}`);
    if (found.length === 0) continue;
    objects.push(...found);
    out.set(source, text);
  }
  return { ok: true, files: out, objects, values: {} };
}

/** The Kubernetes objects of one rendered source, or what is wrong with a document. */
function objectsOf(source: string, documents: unknown[]): KubernetesObject[] | string {
  const objects: KubernetesObject[] = [];
  for (const [index, doc] of documents.entries()) {
    if (doc === null || doc === undefined) continue;
    const where = `document ${index + 1} of ${source}`;
    if (!isPlainObject(doc)) return `${where} is not a Kubernetes object (a mapping)`;
    const meta = doc.metadata;
    const missing = [
      ...(typeof doc.apiVersion !== 'string' || doc.apiVersion === '' ? ['apiVersion'] : []),
      ...(typeof doc.kind !== 'string' || doc.kind === '' ? ['kind'] : []),
      ...(!isPlainObject(meta) || typeof meta.name !== 'string' || meta.name === '' ? ['metadata.name'] : []),
    ];
    if (missing.length > 0) return `${where} has no ${missing.join(', ')}`;
    objects.push(doc as KubernetesObject);
  }
  return objects;
}
