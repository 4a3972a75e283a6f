// stack.yaml: parse, validate, and check a release tree (pure).
//
// Schema (stackflux.io/v1alpha1, kind Stack), unknown fields are errors (typos must not pass):
//   apiVersion: stackflux.io/v1alpha1
//   kind: Stack
//   provider: docker                # = the tag's provider
//   name: ferrol                    # = the tag's name
//   kubernetesVersion: v1.30.4      # full version, "v" prefix; major.minor = the tag's
//   version: v2                     # = the tag's version; custom: v0-sha.abc1234 (or v0-sha-abc1234)
//   addons:                         # apply order; may be empty
//     - name: cni                   # DNS-1123 label, unique
//       targetNamespace: kube-system  # optional, DNS-1123 label
//       dependsOn: [other]          # optional; only addons listed EARLIER (so no cycles);
//                                   # default: the previous addon in the list
//       chart: cilium               # optional, with version + repository: a Helm chart (a DNS-1123
//       version: 1.16.5             #   label) from a Helm (https://) or OCI (oci://) repository; an
//       repository: https://helm.cilium.io  # in-tree chart is cluster-addon/<addon>/Chart.yaml instead
// Every error message starts with "stack.yaml: " and names the field.
import { isMap, isSeq, parseDocument } from 'yaml';
import { MAX_YAML_ALIASES, type ReleaseTree, type StackAddon, type StackManifest } from '../api/release.ts';
import type { ValidationResult } from './description.ts';
import { parseStackVersion, type ReleaseTag, toDashForm } from './tags.ts';

export const STACK_FILE = 'stack.yaml';
export const CLUSTER_CLASS_DIR = 'cluster-class/';
export const CLUSTER_ADDON_DIR = 'cluster-addon/';

// Where it was defined before the release-format interface took it (its importers still find it here).
export type { ValidationResult } from './description.ts';

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const KUBERNETES_VERSION =
  /^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$/;
const TOP_LEVEL_FIELDS = ['apiVersion', 'kind', 'provider', 'name', 'kubernetesVersion', 'version', 'addons'];
const ADDON_FIELDS = ['name', 'targetNamespace', 'dependsOn', 'chart', 'version', 'repository'];
const CHART_FIELDS = ['chart', 'version', 'repository'] as const;
/**
 * A chart repository: https:// (Helm) or oci:// (OCI), a host name or IPv4 address (optional
 * port), then path segments of URL-safe characters. No credentials, query, fragment, percent
 * escapes or "." / ".." segments: the chart name is appended to an OCI URL, and nothing may walk
 * it to another path of the registry (oci://registry/charts/../../v2/_catalog).
 */
const REPOSITORY_URL =
  /^(https|oci):\/\/([A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*)(:[0-9]{1,5})?((\/[A-Za-z0-9._~-]+)*)\/?$/;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function dns1123LabelError(field: string, value: string): string | undefined {
  if (value.length > 63) return `stack.yaml: ${field} "${value}" is longer than 63 characters`;
  if (!DNS1123_LABEL.test(value)) {
    return `stack.yaml: ${field} "${value}" must be a DNS-1123 label (lower-case letters, digits and "-", starting and ending with a letter or digit)`;
  }
  return undefined;
}

/** Parses and validates stack.yaml on its own (not against a tag). */
export function parseStackManifest(text: string): ValidationResult<StackManifest> {
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: false });
  if (doc.errors.length > 0) {
    return {
      ok: false,
      errors: doc.errors.map((e) => `stack.yaml: invalid YAML: ${e.message.split('\n')[0]}`),
    };
  }
  if (!isMap(doc.contents)) {
    return { ok: false, errors: ['stack.yaml: must be a YAML mapping (apiVersion, kind, provider, ...)'] };
  }
  let data: unknown;
  try {
    data = doc.toJS({ maxAliasCount: MAX_YAML_ALIASES });
  } catch (error) {
    // e.g. "Excessive alias count indicates a resource exhaustion attack"
    const message = error instanceof Error ? error.message.split('\n')[0] : String(error);
    return { ok: false, errors: [`stack.yaml: invalid YAML: ${message}`] };
  }
  if (!isRecord(data)) return { ok: false, errors: ['stack.yaml: must be a YAML mapping'] };
  const errors: string[] = [];

  for (const key of Object.keys(data).sort()) {
    if (!TOP_LEVEL_FIELDS.includes(key)) errors.push(`stack.yaml: unknown field "${key}"`);
  }
  const str = (field: string): string | undefined => {
    const v = data[field];
    if (v === undefined || v === null) {
      errors.push(`stack.yaml: ${field} is required`);
      return undefined;
    }
    if (typeof v !== 'string') {
      errors.push(`stack.yaml: ${field} must be a string, got ${JSON.stringify(v)}`);
      return undefined;
    }
    return v;
  };

  const apiVersion = str('apiVersion');
  if (apiVersion !== undefined && apiVersion !== 'stackflux.io/v1alpha1') {
    errors.push(`stack.yaml: apiVersion "${apiVersion}" is not stackflux.io/v1alpha1`);
  }
  const kind = str('kind');
  if (kind !== undefined && kind !== 'Stack') errors.push(`stack.yaml: kind "${kind}" is not Stack`);
  const provider = str('provider');
  if (provider !== undefined && !/^[a-z0-9]+$/.test(provider)) {
    errors.push(`stack.yaml: provider "${provider}" must be lower-case letters and digits`);
  }
  const name = str('name');
  if (name !== undefined && !/^[a-z0-9]+$/.test(name)) {
    errors.push(`stack.yaml: name "${name}" must be lower-case letters and digits`);
  }
  const kubernetesVersion = str('kubernetesVersion');
  if (kubernetesVersion !== undefined && !KUBERNETES_VERSION.test(kubernetesVersion)) {
    errors.push(`stack.yaml: kubernetesVersion "${kubernetesVersion}" is not a full version like v1.30.4`);
  }
  const version = str('version');
  if (version !== undefined) {
    const v = parseStackVersion(version);
    if (!v.ok) errors.push(`stack.yaml: ${v.reason}`);
  }

  const addons: StackAddon[] = [];
  const rawAddons = data.addons;
  if (rawAddons === undefined || rawAddons === null) {
    errors.push('stack.yaml: addons is required (use [] for a stack without addons)');
  } else if (!Array.isArray(rawAddons) || !isSeq(doc.get('addons'))) {
    errors.push('stack.yaml: addons must be a list');
  } else {
    const seen = new Set<string>();
    rawAddons.forEach((raw: unknown, i: number) => {
      const at = `addons[${i}]`;
      if (!isRecord(raw)) {
        errors.push(`stack.yaml: ${at} must be a mapping with a name`);
        return;
      }
      for (const key of Object.keys(raw).sort()) {
        if (!ADDON_FIELDS.includes(key)) errors.push(`stack.yaml: ${at}: unknown field "${key}"`);
      }
      const addonName = raw.name;
      if (typeof addonName !== 'string') {
        errors.push(`stack.yaml: ${at}.name is required and must be a string`);
        return;
      }
      const where = `addons[${i}] (${addonName})`;
      const nameError = dns1123LabelError(`${at}.name`, addonName);
      if (nameError !== undefined) errors.push(nameError);
      if (seen.has(addonName)) errors.push(`stack.yaml: ${at}.name "${addonName}" is listed twice`);
      const addon: StackAddon = { name: addonName };
      if (raw.targetNamespace !== undefined) {
        if (typeof raw.targetNamespace !== 'string') {
          errors.push(`stack.yaml: ${where}.targetNamespace must be a string`);
        } else {
          const e = dns1123LabelError(`${where}.targetNamespace`, raw.targetNamespace);
          if (e !== undefined) errors.push(e);
          addon.targetNamespace = raw.targetNamespace;
        }
      }
      if (raw.dependsOn !== undefined) {
        if (!Array.isArray(raw.dependsOn) || !raw.dependsOn.every((d: unknown) => typeof d === 'string')) {
          errors.push(`stack.yaml: ${where}.dependsOn must be a list of addon names`);
        } else {
          const deps = raw.dependsOn as string[];
          const depSeen = new Set<string>();
          for (const dep of deps) {
            if (dep === addonName) errors.push(`stack.yaml: ${where}.dependsOn names the addon itself`);
            else if (depSeen.has(dep)) errors.push(`stack.yaml: ${where}.dependsOn lists "${dep}" twice`);
            else if (!seen.has(dep)) {
              const later = rawAddons.some((a: unknown) => isRecord(a) && a.name === dep);
              errors.push(
                later
                  ? `stack.yaml: ${where}.dependsOn "${dep}" is listed after it; addons may only depend on earlier addons (this also rules out cycles)`
                  : `stack.yaml: ${where}.dependsOn "${dep}" is not an addon of this stack`,
              );
            }
            depSeen.add(dep);
          }
          addon.dependsOn = deps;
        }
      }
      const chart = remoteChartOf(raw, where, errors);
      if (chart !== undefined) addon.chart = chart;
      seen.add(addonName);
      addons.push(addon);
    });
  }

  if (errors.length > 0) return { ok: false, errors };
  return {
    ok: true,
    value: {
      apiVersion: 'stackflux.io/v1alpha1',
      kind: 'Stack',
      provider: provider ?? '',
      name: name ?? '',
      kubernetesVersion: kubernetesVersion ?? '',
      version: version ?? '',
      addons,
    },
  };
}

/** The `chart`/`version`/`repository` of one addon entry: all three or none (errors pushed). */
function remoteChartOf(
  raw: Record<string, unknown>,
  where: string,
  errors: string[],
): StackAddon['chart'] | undefined {
  const given = CHART_FIELDS.filter((f) => raw[f] !== undefined);
  if (given.length === 0) return undefined;
  if (given.length < CHART_FIELDS.length) {
    const missing = CHART_FIELDS.filter((f) => raw[f] === undefined);
    errors.push(
      `stack.yaml: ${where} names a remote chart with ${given.join(', ')} but lacks ${missing.join(', ')} (a remote chart needs chart, version and repository)`,
    );
    return undefined;
  }
  const text = (f: (typeof CHART_FIELDS)[number]): string | undefined => {
    const v = raw[f];
    if (typeof v === 'string' && v !== '') return v;
    errors.push(`stack.yaml: ${where}.${f} must be a non-empty string, got ${JSON.stringify(v)}`);
    return undefined;
  };
  const name = text('chart');
  const version = text('version');
  const repository = text('repository');
  if (name === undefined || version === undefined || repository === undefined) return undefined;
  const chartError = dns1123LabelError(`${where}.chart`, name);
  if (chartError !== undefined) errors.push(chartError);
  const repositoryError = chartRepositoryError(`${where}.repository`, repository);
  if (repositoryError !== undefined) errors.push(repositoryError);
  if (chartError !== undefined || repositoryError !== undefined) return undefined;
  return { name, version, repository };
}

function chartRepositoryError(field: string, repository: string): string | undefined {
  const m = REPOSITORY_URL.exec(repository);
  const segments = (m?.[7] ?? '').split('/');
  if (m === null || segments.some((s) => /^\.+$/.test(s))) {
    return `stack.yaml: ${field} "${repository}" must be an https:// (Helm repository) or oci:// (OCI registry) URL of a host and a path without "." or ".." segments, credentials, query or escapes`;
  }
  return undefined;
}

/** The host (lower case, without port) of a chart repository URL that passed validation. */
export function chartRepositoryHost(repository: string): string {
  return (REPOSITORY_URL.exec(repository)?.[2] ?? '').toLowerCase();
}

/**
 * Whether `host` is allowed by `allowed` (`--allowed-chart-hosts`): an entry is a host name that
 * must match exactly, or `*.domain` for any host below domain. Case-insensitive.
 */
export function chartHostAllowed(host: string, allowed: readonly string[]): boolean {
  const h = host.toLowerCase();
  return allowed.some((entry) => {
    const e = entry.toLowerCase();
    return e.startsWith('*.') ? h.endsWith(e.slice(1)) && h.length > e.length - 1 : h === e;
  });
}

/**
 * Errors of the remote charts of a valid stack.yaml whose repository host is not in `allowed`
 * (undefined: any host). Each names the addon and field, like the other stack.yaml errors.
 */
export function chartHostErrors(manifest: StackManifest, allowed: readonly string[] | undefined): string[] {
  if (allowed === undefined) return [];
  return manifest.addons.flatMap((addon, i) => {
    if (addon.chart === undefined) return [];
    const host = chartRepositoryHost(addon.chart.repository);
    return chartHostAllowed(host, allowed)
      ? []
      : [
          `stack.yaml: addons[${i}] (${addon.name}).repository "${addon.chart.repository}": host ${host} is not in --allowed-chart-hosts (${allowed.join(', ')})`,
        ];
  });
}

/** Checks a parsed stack.yaml against the tag it was read at. Empty when it matches. */
export function validateStackAgainstTag(manifest: StackManifest, tag: ReleaseTag): string[] {
  const errors: string[] = [];
  if (manifest.provider !== tag.provider) {
    errors.push(`stack.yaml: provider "${manifest.provider}" does not match the tag's ${tag.provider}`);
  }
  if (manifest.name !== tag.name) {
    errors.push(`stack.yaml: name "${manifest.name}" does not match the tag's ${tag.name}`);
  }
  const m = /^v(\d+)\.(\d+)\./.exec(manifest.kubernetesVersion);
  if (m === null || Number(m[1]) !== tag.kubernetesMajor || Number(m[2]) !== tag.kubernetesMinor) {
    errors.push(
      `stack.yaml: kubernetesVersion "${manifest.kubernetesVersion}" does not match the tag's ${tag.kubernetesVersion}`,
    );
  }
  if (toDashForm(manifest.version) !== toDashForm(tag.version)) {
    errors.push(`stack.yaml: version "${manifest.version}" does not match the tag's ${tag.version}`);
  }
  return errors;
}

/** The effective dependencies of each addon: declared dependsOn, or the previous addon. */
export function addonDependencies(manifest: StackManifest): Map<string, string[]> {
  const deps = new Map<string, string[]>();
  manifest.addons.forEach((addon, i) => {
    const previous = manifest.addons[i - 1];
    deps.set(addon.name, addon.dependsOn ?? (previous === undefined ? [] : [previous.name]));
  });
  return deps;
}

/** Structural checks of a release tree: stack.yaml and at least one YAML file in cluster-class/. */
export function validateReleaseTree(tree: ReleaseTree): string[] {
  const errors: string[] = [];
  if (!tree.has(STACK_FILE)) errors.push(`release has no ${STACK_FILE}`);
  const classFiles = [...tree.keys()].filter((p) => p.startsWith(CLUSTER_CLASS_DIR) && /\.ya?ml$/.test(p));
  if (classFiles.length === 0) errors.push(`release has no YAML files in ${CLUSTER_CLASS_DIR}`);
  return errors;
}

/**
 * Reads a release: tree checks, stack.yaml parse + validation, and the match with its tag.
 * All errors at once, so the condition message tells the author everything to fix.
 */
export function readRelease(tree: ReleaseTree, tag: ReleaseTag): ValidationResult<StackManifest> {
  const errors = validateReleaseTree(tree);
  const text = tree.get(STACK_FILE);
  if (text === undefined) return { ok: false, errors };
  const parsed = parseStackManifest(text);
  if (!parsed.ok) return { ok: false, errors: [...errors, ...parsed.errors] };
  errors.push(...validateStackAgainstTag(parsed.value, tag));
  return errors.length > 0 ? { ok: false, errors } : parsed;
}
