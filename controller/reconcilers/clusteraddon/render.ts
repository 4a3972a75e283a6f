// Phase "render" of the ClusterAddon reconcile: every enabled addon's files as they go on the
// Cluster's fleet branch (a Helm addon: its HelmRelease), with the csctl wait conditions of each
// addon as Flux health checks.
import { stringify as stringifyYaml } from 'yaml';
import type { StackManifest } from '../../api/release.ts';
import {
  addonFolder,
  addonHelmObjects,
  EMPTY_KUSTOMIZATION,
  preconditionFolder,
} from '../../releases/flux.ts';
import type { StackDescription, WaitForCondition } from '../../releases/format.ts';
import { binaryFilesOf } from '../../releases/tree.ts';
import { type FixedRender, fixedRender } from '../../rendering/determinism.ts';
import {
  type AddonOrderEntry,
  type AddonRenderInput,
  type HelmAddon,
  type KubernetesObject,
  type RenderFailure,
  renderAnyAddon,
} from '../../rendering/index.ts';
import { templateInputOf } from '../../rendering/templateinput.ts';
import {
  type AppliedObject,
  type HealthCheckExpr,
  type PreConditionChecks,
  postConditionHealthChecks,
  preConditionHealthChecks,
} from '../waitcondition.ts';
import { compareStrings, isRecord, stalled } from './context.ts';
import { addonIntervalOf, clusterFluxShard, shardLabelsOf } from './fluxobjects.ts';
import {
  type ConditionSummary,
  type Context,
  Reason,
  type Rendered,
  type Selection,
  type Step,
  type Target,
} from './types.ts';

function renderFailureReason(failure: RenderFailure): string {
  if (failure.reason === 'CoolingDown') return Reason.RenderCoolingDown;
  return failure.reason === 'InvalidValues' || failure.reason === 'ValuesSchemaFailed'
    ? Reason.ValuesInvalid
    : Reason.RenderFailed;
}

/** The distinct wait conditions of the entries that apply `addon` (it may be in both stages). */
function conditionsOf(
  description: StackDescription,
  addon: string,
  when: 'waitForPreCondition' | 'waitForPostCondition',
): WaitForCondition[] {
  const all = description.addons
    .filter((a) => a.name === addon && a.action === 'apply')
    .flatMap((a) => {
      const c = a[when];
      return c !== undefined ? [c] : [];
    });
  return [...new Map(all.map((c) => [JSON.stringify(c), c])).values()];
}

/** The rendered objects as the addon's Kustomization applies them (its targetNamespace set). */
function appliedObjects(
  objects: readonly KubernetesObject[],
  targetNamespace: string | undefined,
): AppliedObject[] {
  return objects.map((o) => ({
    apiVersion: String(o.apiVersion),
    kind: String(o.kind),
    name: String(o.metadata?.name ?? ''),
    namespace: targetNamespace ?? String(o.metadata?.namespace ?? ''),
  }));
}

/** Default namespace of a Helm addon's release when stack.yaml gives no targetNamespace. */
export const DEFAULT_HELM_NAMESPACE = 'default';

/** The files of one Helm addon on the branch: its HelmRelease and, for a remote chart, its source. */
function helmAddonFiles(
  ctx: Context,
  target: Target,
  entry: AddonOrderEntry,
  helm: HelmAddon,
): [string, string][] {
  const { chart } = helm;
  const interval = addonIntervalOf(ctx, target);
  const timeout = target.release.spec.timeout;
  const objects = addonHelmObjects(ctx.input.templates, {
    cluster: ctx.name,
    namespace: ctx.namespace,
    addon: entry.name,
    release: target.releaseName,
    chart:
      chart.source === 'tree'
        ? {
            source: 'tree',
            path: chart.path,
            stackPath: target.release.spec.source.path ?? '',
            gitRepository: {
              name: target.release.metadata.name,
              namespace: target.release.metadata.namespace ?? ctx.namespace,
            },
          }
        : chart,
    values: helm.values,
    targetNamespace: entry.targetNamespace ?? DEFAULT_HELM_NAMESPACE,
    ...(interval !== undefined ? { interval } : {}),
    ...(timeout !== undefined ? { timeout } : {}),
    extraLabels: shardLabelsOf(clusterFluxShard(ctx)),
  });
  const folder = addonFolder(entry.name, true);
  const out: [string, string][] = [[`${folder}/helmrelease.yaml`, stringifyYaml(objects.helmRelease)]];
  if (objects.source !== undefined) {
    const kind = String(objects.source.kind).toLowerCase();
    out.push([`${folder}/${kind}.yaml`, stringifyYaml(objects.source)]);
  }
  return out;
}

/** The Go engine's clock and seed for one addon of this Cluster at this release (rendering/determinism.ts). */
function fixedRenderOf(ctx: Context, target: Target, addon: string): FixedRender {
  const meta = isRecord(target.cluster.metadata) ? target.cluster.metadata : {};
  return fixedRender({
    key: ctx.input.renderSeedKey,
    release: target.releaseName,
    commit: ctx.input.treeCommit ?? '',
    clusterUid: typeof meta.uid === 'string' ? meta.uid : `${ctx.namespace}/${ctx.name}`,
    addon,
    time: target.release.metadata.creationTimestamp,
  });
}

/**
 * Phase "render": every enabled addon's files, keyed `<addon>/<path>` as on the branch (a Helm
 * addon: its HelmRelease with the rendered values). Any failure → no change at all, with per-addon
 * detail in the status.
 */
export function renderAddons(ctx: Context, target: Target, selection: Selection): Step<Rendered> {
  const { input } = ctx;
  const centralValues = target.clusterStack.spec.values;
  const files = new Map<string, string>();
  const helm = new Map<string, HelmAddon>();
  const healthChecks = new Map<string, HealthCheckExpr[]>();
  const postConditions: ConditionSummary = { count: 0, unmapped: [] };
  const gates = new Map<string, PreConditionChecks>();
  const preConditions: ConditionSummary = { count: 0, unmapped: [] };
  const failures: { addon: string; failure: RenderFailure }[] = [];
  const render = input.render ?? renderAnyAddon;
  // The one template input of live and preview renders (rendering/templateinput.ts).
  const { cluster, ...refs } = templateInputOf({
    cluster: target.cluster,
    ...(input.controlPlane !== undefined ? { controlPlane: input.controlPlane } : {}),
    ...(input.infraCluster !== undefined ? { infraCluster: input.infraCluster } : {}),
  });
  for (const entry of selection.order) {
    const addon = entry.name;
    const described = target.description.addons.find((a) => a.name === addon);
    const renderInput: AddonRenderInput =
      target.stack !== undefined || described === undefined
        ? {
            tree: target.tree,
            stack: target.stack as StackManifest,
            addon,
            cluster,
            ...refs,
            ...(selection.clusterValues !== undefined ? { clusterValues: selection.clusterValues } : {}),
            ...(centralValues !== undefined ? { centralValues } : {}),
          }
        : {
            // csctl: the values come from the Cluster only, as with the cluster-stack-operator.
            format: 'csctl',
            tree: target.tree,
            binary: binaryFilesOf(target.tree),
            addon,
            chartPath: described.path,
            ...(described.valuesTemplate !== undefined ? { valuesTemplate: described.valuesTemplate } : {}),
            kubernetesVersion: target.description.kubernetesVersion,
            cluster,
            ...refs,
            fixed: fixedRenderOf(ctx, target, addon),
          };
    const result = render(renderInput);
    if (!result.ok) failures.push({ addon, failure: result });
    else if (result.helm !== undefined) {
      helm.set(addon, result.helm);
      for (const [path, text] of helmAddonFiles(ctx, target, entry, result.helm)) files.set(path, text);
    } else {
      for (const [path, text] of result.files) files.set(`${addon}/${path}`, text);
      const csctl = target.stack === undefined;
      const post = csctl ? conditionsOf(target.description, addon, 'waitForPostCondition') : [];
      if (post.length > 0) {
        const checks = postConditionHealthChecks(post, appliedObjects(result.objects, entry.targetNamespace));
        if (checks.exprs.length > 0) healthChecks.set(addon, checks.exprs);
        postConditions.count += post.length;
        postConditions.unmapped.push(...checks.unmapped.map((u) => `addon ${addon}: ${u}`));
      }
      const pre = csctl ? conditionsOf(target.description, addon, 'waitForPreCondition') : [];
      if (pre.length > 0) {
        const gate = preConditionHealthChecks(pre);
        if (gate.exprs.length > 0) {
          gates.set(addon, gate);
          files.set(`${preconditionFolder(addon)}/kustomization.yaml`, EMPTY_KUSTOMIZATION);
        }
        preConditions.count += pre.length;
        preConditions.unmapped.push(...gate.unmapped.map((u) => `addon ${addon}: ${u}`));
      }
    }
  }
  if (failures.length === 0)
    return { ok: true, value: { files, helm, healthChecks, postConditions, gates, preConditions } };

  const first = failures[0];
  const reason = first === undefined ? Reason.RenderFailed : renderFailureReason(first.failure);
  const message = `release ${target.releaseName}: ${failures
    .map((f) => `addon ${f.addon}: ${f.failure.message}`)
    .join('; ')}; nothing was changed, the addons keep running as they are`;
  const out = stalled(ctx, target, reason, message);
  // Per-addon detail, the rest of the status as it was.
  const failedBy = new Map(failures.map((f) => [f.addon, f.failure]));
  const addons = (ctx.previous?.addons ?? []).map((a) => {
    const f = failedBy.get(a.name);
    return f === undefined ? a : { ...a, reason: renderFailureReason(f), message: f.message };
  });
  for (const [addon, f] of failedBy) {
    if (!addons.some((a) => a.name === addon)) {
      addons.push({ name: addon, ready: false, reason: renderFailureReason(f), message: f.message });
    }
  }
  out.status = { ...out.status, addons: addons.sort((a, b) => compareStrings(a.name, b.name)) };
  return { ok: false, result: out };
}
