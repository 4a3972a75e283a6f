// Go's own semantics for the formats stackflux reads from other tools, by running the reference
// code: Go text/template with CSO's function map (the cluster-stack-operator's per-Cluster
// values), Helm's chart engine as `helm template` runs it (cluster-class and addon charts), and
// Go's YAML parsing (the YAML those produce). Re-implementing these in TypeScript would differ
// in corners real stacks use (sprig's functions, Helm's value merging and manifest order, Go's
// lenient YAML); the engine is one WebAssembly module built from pinned Go modules
// (hack/build-goengine.sh), loaded once per process. Callers see pure, synchronous functions.
// Stackflux-specific release logic (which chart, which values, csctl's layout) stays with them.
import type { FixedRender } from '../determinism.ts';
import { callEngine, type EngineFailure } from './engine.ts';

export {
  configureGoEngine,
  DEFAULT_ENGINE_MEMORY_MB,
  type EngineConfig,
  type EngineFailure,
  loadGoEngine,
} from './engine.ts';
export { goEngineBuildDir, locateGoEngine } from './locate.ts';

/** Largest response the engine hands out unless a call says otherwise (64 MiB). */
export const DEFAULT_MAX_OUTPUT_BYTES = 64 * 2 ** 20;

export interface GoTemplateOptions {
  /** The template's name, as errors quote it (CSO: "cluster-addon-values-<cluster name>"). */
  name?: string;
  /** "cso": go-task/slim-sprig at CSO's pin (default); "sprig": Masterminds/sprig at Helm's pin. */
  funcs?: 'cso' | 'sprig';
  /** template.Option arguments, e.g. "missingkey=error" (CSO passes none). */
  options?: string[];
  /** Longest response accepted, in bytes (default DEFAULT_MAX_OUTPUT_BYTES). */
  maxOutputBytes?: number;
  /** The clock and random seed the template reads (../determinism.ts); default: the real ones. */
  fixed?: FixedRender;
}

export type GoTemplateResult = { ok: true; output: string } | EngineFailure;

/**
 * Executes a Go text/template as CSO's buildTemplateFromClusterAddonValues does:
 * template.New(name).Funcs(sprig.TxtFuncMap()).Parse(text).Execute(data). data is JSON, decoded
 * as the Kubernetes client decodes objects (whole numbers as int64). An error is Go's message.
 */
export function goTemplate(text: string, data: unknown, opts: GoTemplateOptions = {}): GoTemplateResult {
  const res = callEngine(
    {
      op: 'goTemplate',
      name: opts.name ?? '',
      text,
      data,
      funcs: opts.funcs ?? 'cso',
      options: opts.options ?? [],
    },
    opts.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES,
    opts.fixed,
  );
  if (!isAnswer(res)) return res;
  return res.ok === true ? { ok: true, output: String(res.output ?? '') } : failure(res);
}

export interface HelmTemplateRequest {
  /** The chart's files by path relative to the chart root (charts/*.tgz subcharts included). */
  files: ReadonlyMap<string, Uint8Array | string> | Readonly<Record<string, Uint8Array | string>>;
  /** Values as with `-f <file>`, in order: objects, or YAML text parsed by Helm itself. */
  values?: ReadonlyArray<Record<string, unknown> | string>;
  releaseName: string;
  namespace: string;
  /** --kube-version (default: what Helm assumes, v1.<client-go minor>). */
  kubeVersion?: string;
  /** --include-crds: crds/ files first in the output. */
  includeCrds?: boolean;
  /** Replaces Chart.yaml's version (csctl writes the release version there). */
  chartVersion?: string;
  maxOutputBytes?: number;
  /** The clock and random seed the chart's templates read (../determinism.ts). */
  fixed?: FixedRender;
}

export interface HelmManifest {
  /** Source path as `# Source:` names it (<chart>/templates/x.yaml, <chart>/crds/y.yaml). */
  path: string;
  content: string;
  /** A Helm hook (printed after the other manifests). */
  hook?: boolean;
}

export type HelmTemplateResult = { ok: true; manifests: HelmManifest[]; stdout: string } | EngineFailure;

/**
 * What `helm template <releaseName> <chart> --namespace <ns> [--include-crds] [--kube-version v]
 * [-f values]...` prints (Helm v3.19), as manifests in the printed order and as the full text.
 * No network: subcharts must be in charts/ (CSO's --dependency-update has nothing to fetch then).
 */
export function helmTemplate(req: HelmTemplateRequest): HelmTemplateResult {
  const entries = req.files instanceof Map ? [...req.files] : Object.entries(req.files);
  const files: Record<string, string> = {};
  for (const [path, data] of entries) files[path] = Buffer.from(data).toString('base64');
  const valuesYaml = (req.values ?? []).map((v) => (typeof v === 'string' ? v : JSON.stringify(v)));
  const res = callEngine(
    {
      op: 'helmTemplate',
      files,
      valuesYaml,
      releaseName: req.releaseName,
      namespace: req.namespace,
      kubeVersion: req.kubeVersion ?? '',
      includeCrds: req.includeCrds ?? false,
      chartVersion: req.chartVersion ?? '',
    },
    req.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES,
    req.fixed,
  );
  if (!isAnswer(res)) return res;
  if (res.ok !== true) return failure(res);
  return {
    ok: true,
    manifests: (res.manifests as HelmManifest[] | undefined) ?? [],
    stdout: String(res.stdout),
  };
}

export type ParseGoYamlResult = { ok: true; documents: unknown[] } | EngineFailure;

/**
 * A multi-document YAML stream as Go reads it: split as Helm splits manifests
 * (releaseutil.SplitManifests), each document converted by sigs.k8s.io/yaml (the Kubernetes
 * parser), in order. An empty document is null.
 */
export function parseGoYaml(text: string, opts: { maxOutputBytes?: number } = {}): ParseGoYamlResult {
  const res = callEngine({ op: 'parseYaml', text }, opts.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES);
  if (!isAnswer(res)) return res;
  return res.ok === true
    ? { ok: true, documents: (res.documents as unknown[] | undefined) ?? [] }
    : failure(res);
}

/**
 * One document of Helm's output as the cluster-stack-operator parses it. Helm trims each document
 * and `helm template` prints it followed by a line break; CSO splits the output into documents by
 * `---` lines (apimachinery's YAMLReader, which keeps the line break) and converts each with
 * sigs.k8s.io/yaml, so a document ending in a `|` block keeps that block's final line break.
 * parseGoYaml trims documents as Helm splits them; a closing comment line keeps the break.
 */
export function asCsoReadsIt(document: string): string {
  return `${document}\n#\n`;
}

/** One Go engine call as the render processes carry it (../worker.ts). */
export type GoEngineCall =
  | { op: 'goTemplate'; text: string; data: unknown; options?: GoTemplateOptions }
  | { op: 'helmTemplate'; request: HelmTemplateRequest }
  | { op: 'parseGoYaml'; text: string; options?: { maxOutputBytes?: number } };

export type GoEngineResult = GoTemplateResult | HelmTemplateResult | ParseGoYamlResult;

/** Runs a call; maxOutputBytes applies unless the call sets its own. */
export function runGoEngineCall(call: GoEngineCall, maxOutputBytes: number): GoEngineResult {
  switch (call.op) {
    case 'goTemplate':
      return goTemplate(call.text, call.data, { maxOutputBytes, ...call.options });
    case 'helmTemplate':
      return helmTemplate({ maxOutputBytes, ...call.request });
    case 'parseGoYaml':
      return parseGoYaml(call.text, { maxOutputBytes, ...call.options });
  }
}

function isAnswer(res: Record<string, unknown> | EngineFailure): res is Record<string, unknown> {
  return !('engine' in res && res.ok === false);
}

function failure(res: Record<string, unknown>): EngineFailure {
  return {
    ok: false,
    error: String(res.error ?? 'the Go engine gave no answer'),
    ...(res.limit === 'output' ? { engine: 'output' as const } : {}),
  };
}
