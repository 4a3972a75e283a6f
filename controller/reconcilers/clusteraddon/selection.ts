// Phase "select" of the ClusterAddon reconcile: which of the release's addons this Cluster gets
// (the ClusterStack's and the Cluster's switches), in which order, with which per-cluster values.
import type { StackManifest } from '../../api/release.ts';
import { type AddonOrderEntry, addonOrder } from '../../rendering/index.ts';
import { compareStrings, isRecord, stalled } from './context.ts';
import { type Context, Reason, type Selection, type Step, type Target } from './types.ts';

/** Cluster annotation: comma-separated addon names disabled for this cluster. */
export const ANNOTATION_DISABLED_ADDONS = 'stackflux.io/disabled-addons';
/** Cluster topology variable holding per-cluster addon values, keyed by addon name. */
export const VALUES_VARIABLE = 'stackfluxAddonValues';

/** Addons disabled on the Cluster by annotation, sorted, de-duplicated. */
export function disabledByAnnotation(cluster: unknown): string[] {
  if (!isRecord(cluster) || !isRecord(cluster.metadata)) return [];
  const annotations = cluster.metadata.annotations;
  if (!isRecord(annotations)) return [];
  const raw = annotations[ANNOTATION_DISABLED_ADDONS];
  if (typeof raw !== 'string') return [];
  return [
    ...new Set(
      raw
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s !== ''),
    ),
  ].sort(compareStrings);
}

/**
 * Per-cluster values: the `stackfluxAddonValues` topology variable (a mapping keyed by addon name).
 * Undefined when unset; a string when it is not a mapping (the message for the condition).
 */
export function clusterValuesOf(cluster: unknown): Record<string, unknown> | undefined | string {
  if (!isRecord(cluster) || !isRecord(cluster.spec) || !isRecord(cluster.spec.topology)) return undefined;
  const variables = cluster.spec.topology.variables;
  if (!Array.isArray(variables)) return undefined;
  const entry = variables.find((v: unknown) => isRecord(v) && v.name === VALUES_VARIABLE) as unknown;
  if (!isRecord(entry) || entry.value === undefined || entry.value === null) return undefined;
  if (!isRecord(entry.value)) {
    return `Cluster spec.topology.variables[${VALUES_VARIABLE}].value must be a mapping keyed by addon name`;
  }
  for (const [addon, v] of Object.entries(entry.value)) {
    if (v !== null && v !== undefined && !isRecord(v)) {
      return `Cluster spec.topology.variables[${VALUES_VARIABLE}].value.${addon} must be a mapping`;
    }
  }
  return entry.value;
}

/**
 * Dependencies among the enabled addons: an addon's dependency that is disabled is replaced by
 * that addon's own (effective) dependencies, so the graph skips it. Sorted, de-duplicated.
 */
export function enabledDependencies(
  stack: StackManifest,
  enabled: ReadonlySet<string>,
): Map<string, string[]> {
  return dependenciesAmong(addonOrder(stack), enabled);
}

/** enabledDependencies over addons in apply order (any release format). */
function dependenciesAmong(
  order: readonly AddonOrderEntry[],
  enabled: ReadonlySet<string>,
): Map<string, string[]> {
  const direct = new Map(order.map((e) => [e.name, e.dependsOn]));
  const memo = new Map<string, string[]>();
  // stack.yaml only allows dependencies on earlier addons, so this terminates; `seen` guards anyway.
  const effective = (name: string, seen: Set<string>): string[] => {
    const cached = memo.get(name);
    if (cached !== undefined) return cached;
    const out = new Set<string>();
    for (const dep of direct.get(name) ?? []) {
      if (seen.has(dep)) continue;
      if (enabled.has(dep)) out.add(dep);
      else for (const d of effective(dep, new Set([...seen, dep]))) out.add(d);
    }
    const list = [...out].sort(compareStrings);
    memo.set(name, list);
    return list;
  };
  const result = new Map<string, string[]>();
  for (const addon of order) {
    if (enabled.has(addon.name)) result.set(addon.name, effective(addon.name, new Set([addon.name])));
  }
  return result;
}

/** Phase "select": which addons, in which order, with which per-cluster values. */
export function selectAddons(ctx: Context, target: Target): Step<Selection> {
  const clusterValues = clusterValuesOf(target.cluster);
  if (typeof clusterValues === 'string') {
    return { ok: false, result: stalled(ctx, target, Reason.ValuesInvalid, clusterValues) };
  }
  const disabled = new Set([
    ...(target.clusterStack.spec.addons ?? []).filter((a) => a.enabled === false).map((a) => a.name),
    ...disabledByAnnotation(target.cluster),
  ]);
  const enabled = new Set(target.addons.map((a) => a.name).filter((a) => !disabled.has(a)));
  return {
    ok: true,
    value: {
      order: target.addons.filter((e) => enabled.has(e.name)),
      dependencies: dependenciesAmong(target.addons, enabled),
      disabled,
      clusterValues,
    },
  };
}
