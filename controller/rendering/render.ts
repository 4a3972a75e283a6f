// Renders one addon of a release for one Cluster. Pure: inputs → files and objects.
import { parse as parseYaml } from 'yaml';
import { MAX_YAML_ALIASES, type StackAddon, type StackManifest } from '../api/release.ts';
import { pathProblem } from '../releases/paths.ts';
import { OutputBudget } from './budget.ts';
import { DEFAULT_RENDER_LIMITS } from './limits.ts';
import { OutputError, objectId, parseObjects } from './output.ts';
import { renderTemplate, TemplateError } from './template.ts';
import type {
  KubernetesObject,
  PlainObject,
  RenderAddonInput,
  RenderFailure,
  RenderOptions,
  RenderResult,
  RenderSuccess,
} from './types.ts';
import { compileSchema, isPlainObject, mergeAll, validateValues } from './values.ts';

export const ADDON_ROOT = 'cluster-addon';
export const VALUES_FILE = 'values.yaml';
export const SCHEMA_FILE = 'values.schema.json';
/** An addon folder holding this file is an in-tree Helm chart. */
export const CHART_FILE = 'Chart.yaml';
/** A Helm addon's values template: rendered per Cluster into the values Helm installs with. */
export const VALUES_TEMPLATE_FILE = 'values.yaml.hbs';

function fail(reason: RenderFailure['reason'], message: string): RenderFailure {
  return { ok: false, reason, message };
}

function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The files of one addon, path relative to its folder, sorted. */
export function addonFiles(tree: RenderAddonInput['tree'], addon: string): [string, string][] {
  const prefix = `${ADDON_ROOT}/${addon}/`;
  const files: [string, string][] = [];
  for (const [path, text] of tree) {
    if (path.startsWith(prefix)) files.push([path.slice(prefix.length), text]);
  }
  return files.sort((a, b) => compareStrings(a[0], b[0]));
}

const YAML_FILE = /\.ya?ml$/;

function readValuesLayer(label: string, value: unknown): PlainObject | string {
  if (value === undefined || value === null) return {};
  if (!isPlainObject(value))
    return `${label} must be a mapping, got ${Array.isArray(value) ? 'a list' : typeof value}`;
  return value;
}

/** Addon defaults < per-cluster values < central values, then the schema check. */
function resolveValues(
  input: RenderAddonInput,
  files: ReadonlyMap<string, string>,
  base: string,
): { ok: true; values: PlainObject } | RenderFailure {
  let defaults: unknown;
  const valuesText = files.get(VALUES_FILE);
  if (valuesText !== undefined) {
    try {
      defaults = parseYaml(valuesText, { uniqueKeys: true, maxAliasCount: MAX_YAML_ALIASES });
    } catch (error) {
      const message = error instanceof Error ? error.message.split('\n')[0] : String(error);
      return fail('InvalidValues', `${base}${VALUES_FILE}: invalid YAML: ${message}`);
    }
  }
  const layers: PlainObject[] = [];
  const sources: [string, unknown][] = [
    [`${base}${VALUES_FILE}`, defaults],
    [`per-cluster values for addon "${input.addon}"`, input.clusterValues?.[input.addon]],
    [
      `central values (ClusterStack spec.values) for addon "${input.addon}"`,
      input.centralValues?.[input.addon],
    ],
  ];
  for (const [label, value] of sources) {
    const layer = readValuesLayer(label, value);
    if (typeof layer === 'string') return fail('InvalidValues', layer);
    layers.push(layer);
  }
  const values = mergeAll(layers);

  const schemaText = files.get(SCHEMA_FILE);
  if (schemaText !== undefined) {
    let problems: string[] | undefined;
    try {
      problems = validateValues(compileSchema(schemaText), values);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      return fail('InvalidValues', `${base}${SCHEMA_FILE}: not a usable JSON schema: ${message}`);
    }
    if (problems) {
      return fail(
        'ValuesSchemaFailed',
        `values of addon "${input.addon}" fail ${base}${SCHEMA_FILE}: ${problems.join('; ')}`,
      );
    }
  }
  return { ok: true, values };
}

/**
 * Renders addon `input.addon` for `input.cluster`. Never throws for bad input. What it returns
 * (files, merged values, a Helm addon's values) is capped at `options.maxOutputBytes` in total
 * (LimitExceeded naming what crossed it, ./budget.ts); time and memory are bounded by running it in
 * a render process (./bounded.ts).
 */
export function renderAddon(input: RenderAddonInput, options: RenderOptions = {}): RenderResult {
  const maxOutputBytes = options.maxOutputBytes ?? DEFAULT_RENDER_LIMITS.maxOutputBytes;
  const entry: StackAddon | undefined = input.stack.addons.find((a) => a.name === input.addon);
  if (!entry) {
    return fail('AddonNotFound', `addon "${input.addon}" is not listed in stack.yaml`);
  }
  const base = `${ADDON_ROOT}/${input.addon}/`;
  const files = new Map(addonFiles(input.tree, input.addon));
  if (files.size === 0 && entry.chart === undefined) {
    return fail('AddonNotFound', `addon "${input.addon}" has no files under ${base}`);
  }

  const chartText = files.get(CHART_FILE);
  if (entry.chart !== undefined && chartText !== undefined) {
    return fail(
      'InvalidOutput',
      `addon "${input.addon}" names a remote chart in stack.yaml and also ships ${base}${CHART_FILE}: keep one of the two`,
    );
  }

  const resolved = resolveValues(input, files, base);
  if (!resolved.ok) return resolved;
  const mergedValues = resolved.values;
  // Everything a render returns is sent back to the controller: the merged values too.
  const budget = new OutputBudget(maxOutputBytes);
  const valuesOver = budget.addValue(`merged values of addon "${input.addon}"`, mergedValues);
  if (valuesOver !== undefined) return valuesOver;

  const context: Record<string, unknown> = {
    Cluster: input.cluster,
    Stack: input.stack,
    Values: mergedValues,
    Addon: {
      name: entry.name,
      targetNamespace: entry.targetNamespace ?? null,
      dependsOn: dependsOnOf(input.stack, entry.name),
    },
  };
  if (input.controlPlane !== undefined) context.ControlPlane = input.controlPlane;
  if (input.infraCluster !== undefined) context.InfraCluster = input.infraCluster;

  if (entry.chart !== undefined || chartText !== undefined) {
    return renderHelmAddon(input.addon, base, files, context, mergedValues, entry, budget, options);
  }

  // Decide the output name of every file first, so that clashes are reported before rendering.
  const outputs = new Map<string, { source: string; text: string; template: boolean }>();
  for (const [rel, text] of files) {
    if (rel === VALUES_FILE || rel === SCHEMA_FILE) continue;
    const template = rel.endsWith('.hbs');
    const out = template ? rel.slice(0, -'.hbs'.length) : rel;
    if (!YAML_FILE.test(out)) {
      if (template) {
        return fail('InvalidOutput', `${base}${rel}: a template must render a .yaml or .yml file`);
      }
      continue; // README.md and other non-manifests are not output
    }
    // The output becomes the fleet file <addon>/<out>: a ".git" or ".." in it would make the
    // Git host refuse the whole push, or name a file outside the addon's folder.
    const unsafe = pathProblem(`${input.addon}/${out}`);
    if (unsafe !== undefined)
      return fail('InvalidOutput', `${base}${rel}: cannot be a fleet file: ${unsafe}`);
    if (out === 'kustomization.yaml' || out === 'kustomization.yml') {
      return fail(
        'InvalidOutput',
        `${base}${rel}: addons must not ship a kustomization file; stackflux generates the Flux Kustomization`,
      );
    }
    const clash = outputs.get(out);
    if (clash) {
      return fail('InvalidOutput', `${base}${rel} and ${base}${clash.source} both produce ${base}${out}`);
    }
    outputs.set(out, { source: rel, text, template });
  }

  const result = new Map<string, string>();
  const objects: KubernetesObject[] = [];
  const fileObjects = new Map<string, KubernetesObject[]>();
  const objectsBudget = new OutputBudget(maxOutputBytes);
  const seen = new Map<string, string>();
  for (const out of [...outputs.keys()].sort(compareStrings)) {
    const spec = outputs.get(out);
    if (!spec) continue;
    let text = spec.text;
    if (spec.template) {
      options.onTemplate?.(`${base}${spec.source}`);
      try {
        text = renderTemplate(`${base}${spec.source}`, spec.text, context);
      } catch (error) {
        if (error instanceof TemplateError) return fail('TemplateError', error.message);
        return fail(
          'TemplateError',
          `${base}${spec.source}: ${error instanceof Error ? error.message : String(error)}`,
        );
      }
    }
    const label = spec.template ? `${base}${spec.source} (rendered)` : `${base}${spec.source}`;
    const over = budget.addText(label, text);
    if (over !== undefined) return over;
    let parsed: KubernetesObject[];
    try {
      parsed = parseObjects(label, text);
    } catch (error) {
      if (error instanceof OutputError) return fail('InvalidOutput', error.message);
      throw error;
    }
    if (parsed.length === 0) continue; // rendered to nothing, e.g. all inside a false {{#if}}
    // The objects are returned too, and YAML aliases repeat a scalar without repeating its text.
    const objectsOver = objectsBudget.addValue(`${label}: its objects`, parsed);
    if (objectsOver !== undefined) return objectsOver;
    for (const object of parsed) {
      const id = objectId(object);
      const first = seen.get(id);
      if (first !== undefined) {
        return fail('InvalidOutput', `${label}: ${id} is also defined in ${first}`);
      }
      seen.set(id, label);
    }
    result.set(out, text);
    objects.push(...parsed);
    fileObjects.set(out, parsed);
  }
  return { ok: true, files: result, objects, fileObjects, values: mergedValues };
}

/** The chart of an in-tree Helm addon: `name` and `version` of its Chart.yaml. */
function inTreeChart(base: string, text: string): { name: string; version: string } | string {
  let chart: unknown;
  try {
    chart = parseYaml(text, { uniqueKeys: true, maxAliasCount: MAX_YAML_ALIASES });
  } catch (error) {
    const message = error instanceof Error ? error.message.split('\n')[0] : String(error);
    return `${base}${CHART_FILE}: invalid YAML: ${message}`;
  }
  if (!isPlainObject(chart)) return `${base}${CHART_FILE}: must be a mapping (apiVersion, name, version)`;
  const missing = ['name', 'version'].filter((f) => typeof chart[f] !== 'string' || chart[f] === '');
  if (missing.length > 0) return `${base}${CHART_FILE}: ${missing.join(' and ')} must be set (strings)`;
  return { name: chart.name as string, version: chart.version as string };
}

/**
 * A Helm-chart addon: the values Helm installs with, for this Cluster. With values.yaml.hbs they
 * are that template rendered (it sees the same Cluster, Values, … as any template; Values are the
 * merged, schema-checked values); without it, the merged values themselves. stackflux renders
 * nothing else of a chart: its templates/ are Helm's.
 */
function renderHelmAddon(
  addon: string,
  base: string,
  files: ReadonlyMap<string, string>,
  context: Record<string, unknown>,
  mergedValues: PlainObject,
  entry: StackAddon,
  budget: OutputBudget,
  options: RenderOptions,
): RenderResult {
  let chart: NonNullable<RenderSuccess['helm']>['chart'];
  if (entry.chart !== undefined) {
    chart = { source: 'repository', ...entry.chart };
  } else {
    const read = inTreeChart(base, files.get(CHART_FILE) ?? '');
    if (typeof read === 'string') return fail('InvalidOutput', read);
    const path = `${ADDON_ROOT}/${addon}`;
    const unsafe = pathProblem(path);
    if (unsafe !== undefined) return fail('InvalidOutput', `Helm chart folder: ${unsafe}`);
    chart = { source: 'tree', path, ...read };
  }
  let values = mergedValues;
  const template = files.get(VALUES_TEMPLATE_FILE);
  if (template !== undefined) {
    const label = `${base}${VALUES_TEMPLATE_FILE}`;
    let parsed: unknown;
    options.onTemplate?.(label);
    try {
      const text = renderTemplate(label, template, context);
      // The rendered text counts before it is parsed (a huge scalar), the parsed values before
      // they are returned (YAML aliases expand).
      const over = budget.probeText(`${label} (rendered)`, text);
      if (over !== undefined) return over;
      parsed = parseYaml(text, { uniqueKeys: true, maxAliasCount: MAX_YAML_ALIASES });
    } catch (error) {
      if (error instanceof TemplateError) return fail('TemplateError', error.message);
      const message = error instanceof Error ? error.message.split('\n')[0] : String(error);
      return fail('InvalidValues', `${label} (rendered): not YAML: ${message}`);
    }
    if (parsed !== null && parsed !== undefined && !isPlainObject(parsed)) {
      return fail('InvalidValues', `${label} (rendered): must be a mapping of Helm values`);
    }
    values = parsed ?? {};
    const over = budget.addValue(`${label} (rendered)`, values);
    if (over !== undefined) return over;
  }
  return { ok: true, files: new Map(), objects: [], values: mergedValues, helm: { chart, values } };
}

/** The addons an addon waits for: its declared `dependsOn`, else the previous addon in stack.yaml. */
export function dependsOnOf(stack: StackManifest, addon: string): string[] {
  const index = stack.addons.findIndex((a) => a.name === addon);
  const entry = stack.addons[index];
  if (!entry) return [];
  if (entry.dependsOn !== undefined) return [...entry.dependsOn];
  const previous = stack.addons[index - 1];
  return previous ? [previous.name] : [];
}

export interface AddonOrderEntry {
  name: string;
  targetNamespace?: string;
  dependsOn: string[];
}

/**
 * Every addon of the stack in stack.yaml order with the addons it depends on (declared
 * `dependsOn`, an explicit `[]` meaning none; else the previous addon in the list).
 */
export function addonOrder(stack: StackManifest): AddonOrderEntry[] {
  return stack.addons.map((addon) => {
    const entry: AddonOrderEntry = { name: addon.name, dependsOn: dependsOnOf(stack, addon.name) };
    if (addon.targetNamespace !== undefined) entry.targetNamespace = addon.targetNamespace;
    return entry;
  });
}

/** Problems with the addon graph: duplicate names, unknown or self dependencies, cycles. Empty = fine. */
export function checkAddonGraph(stack: StackManifest): string[] {
  const problems: string[] = [];
  const names = new Set<string>();
  for (const addon of stack.addons) {
    if (names.has(addon.name)) problems.push(`addon "${addon.name}" is listed twice`);
    names.add(addon.name);
  }
  const order = addonOrder(stack);
  const edges = new Map<string, string[]>();
  for (const { name, dependsOn } of order) {
    for (const dep of dependsOn) {
      if (dep === name) problems.push(`addon "${name}" depends on itself`);
      else if (!names.has(dep)) problems.push(`addon "${name}" depends on unknown addon "${dep}"`);
    }
    edges.set(
      name,
      dependsOn.filter((d) => d !== name && names.has(d)),
    );
  }
  // Cycle detection (depth-first, deterministic in stack order).
  const state = new Map<string, 'visiting' | 'done'>();
  const reported = new Set<string>();
  const visit = (name: string, path: string[]): void => {
    const s = state.get(name);
    if (s === 'done') return;
    if (s === 'visiting') {
      const cycle = [...path.slice(path.indexOf(name)), name];
      const key = [...cycle].sort().join(',');
      if (!reported.has(key)) {
        reported.add(key);
        problems.push(`addons depend on each other in a cycle: ${cycle.join(' → ')}`);
      }
      return;
    }
    state.set(name, 'visiting');
    for (const dep of edges.get(name) ?? []) visit(dep, [...path, name]);
    state.set(name, 'done');
  };
  for (const { name } of order) visit(name, []);
  return [...new Set(problems)];
}
