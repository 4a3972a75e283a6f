// Phase "emit" of the ClusterAddon reconcile: the Flux objects that apply the Cluster's fleet
// branch (its GitRepository, a Kustomization per addon and per pre-condition gate), those to
// delete, and the Flux settings all of them share.
import type { GitRepository, Kustomization } from '../../api/flux.ts';
import { LABEL_ADDON, type OwnerReference } from '../../api/meta.ts';
import {
  addonFolder,
  addonKustomization,
  addonKustomizationName,
  addonKustomizationTarget,
  clusterGitRepositoryName,
  FLUX_SHARD_LABEL,
  fleetGitRepository,
  fluxShardFor,
  ownerReferenceTo,
  preconditionFolder,
  preconditionKustomization,
  preconditionKustomizationName,
} from '../../releases/flux.ts';
import type { HelmAddon } from '../../rendering/index.ts';
import type { HealthCheckExpr, PreConditionChecks } from '../waitcondition.ts';
import type { ClusterAddonResult, Context, MergePatch, Selection, Target } from './types.ts';

/** The Flux interval of a Cluster's addon objects: --addon-interval, else the ClusterStack's. */
export function addonIntervalOf(ctx: Context, target: Target): string | undefined {
  return ctx.input.fleetSettings.addonInterval ?? target.release.spec.interval;
}

/** The Flux shard of this Cluster's Flux objects (releases/flux.ts fluxShardFor). */
export function clusterFluxShard(ctx: Context): string | undefined {
  return fluxShardFor(
    ctx.namespace,
    ctx.name,
    ctx.input.fleetSettings.fluxShards,
    ctx.input.namespaceFluxShard,
  );
}

export function shardLabelsOf(shard: string | undefined): Record<string, string> {
  return shard !== undefined ? { [FLUX_SHARD_LABEL]: shard } : {};
}

/** What the Flux objects of one Cluster share: their source, shard labels, owner and interval. */
interface FluxCommon {
  sourceName: string;
  shardLabels: Record<string, string>;
  owner: OwnerReference[];
  interval: string | undefined;
}

/**
 * Phase "emit": the GitRepository of the branch (once the branch exists) and one Kustomization per
 * enabled addon (once its folder is on the branch), all owned by the ClusterAddon.
 */
export function fluxObjects(
  ctx: Context,
  target: Target,
  selection: Selection,
  helm: ReadonlyMap<string, HelmAddon>,
  healthChecks: ReadonlyMap<string, HealthCheckExpr[]>,
  gates: ReadonlyMap<string, PreConditionChecks>,
  settled: boolean,
): Pick<
  ClusterAddonResult,
  'gitRepository' | 'deleteGitRepository' | 'kustomizations' | 'deleteKustomizations' | 'patches'
> {
  const { input, namespace, name } = ctx;
  const common: FluxCommon = {
    sourceName: clusterGitRepositoryName(name),
    shardLabels: shardLabelsOf(clusterFluxShard(ctx)),
    owner: [ownerReferenceTo(target.owner)],
    interval: addonIntervalOf(ctx, target),
  };
  const { sourceName, shardLabels, owner, interval } = common;
  const branch = input.branch;
  const gitRepository = branch === undefined ? undefined : branchGitRepository(ctx, common);
  const existing = new Map(ctx.ownKustomizations.map((k) => [k.metadata.name, k]));
  const helmAddons = new Set(helm.keys());
  const kustomizations: Kustomization[] = [];
  for (const entry of selection.order) {
    const isHelm = helm.has(entry.name);
    const kname = addonKustomizationName(name, entry.name, isHelm);
    const desired = addonKustomization(input.templates, {
      cluster: name,
      namespace,
      addon: entry.name,
      sourceName,
      extraLabels: shardLabels,
      dependsOn: selection.dependencies.get(entry.name) ?? [],
      helmAddons,
      ...(isHelm ? { helm: true } : {}),
      ...(input.tenancy?.defaultServiceAccount !== undefined
        ? { serviceAccountName: input.tenancy.defaultServiceAccount }
        : {}),
      ...(entry.targetNamespace !== undefined ? { targetNamespace: entry.targetNamespace } : {}),
      ...(healthChecks.has(entry.name) ? { healthCheckExprs: healthChecks.get(entry.name) } : {}),
      ...(gates.has(entry.name) ? { preconditionGate: true } : {}),
      ...(interval !== undefined ? { interval } : {}),
      ...(target.release.spec.timeout !== undefined ? { timeout: target.release.spec.timeout } : {}),
      ownerReferences: owner,
    });
    const gate = gates.get(entry.name);
    if (gate !== undefined) {
      const gname = preconditionKustomizationName(name, entry.name);
      // Created once its folder is on the branch, like the addon's; its target never changes.
      if (existing.has(gname) || branch?.addons.has(preconditionFolder(entry.name)) === true)
        kustomizations.push(gateKustomization(ctx, target, common, entry.name, gate));
    }
    const have = existing.get(kname);
    if (have !== undefined) {
      // Never pointed elsewhere: an object whose target differs (a targetNamespace that changed
      // between releases, a Kustomization of the old naming) is deleted and created anew once gone.
      if (addonKustomizationTarget(have) === addonKustomizationTarget(desired)) kustomizations.push(desired);
      continue;
    }
    // Created once its folder is on the branch, and once the other kind's Kustomization of the addon
    // is gone: that one still prunes what it applied (helm-controller uninstalling a release that
    // the manifests now create, or the reverse).
    const otherKind = addonKustomizationName(name, entry.name, !isHelm);
    if (branch?.addons.has(addonFolder(entry.name, isHelm)) !== true || existing.has(otherKind)) continue;
    kustomizations.push(desired);
  }
  const wanted = new Set(kustomizations.map((k) => k.metadata.name));
  const planned = new Set(selection.order.map((e) => e.name));
  // One delete per object: one already being deleted (Flux pruning) is only waited for. The
  // Kustomization of an addon the release no longer has (renamed, moved into another chart: csctl's
  // umbrella chart split into stages, or action: delete) goes only once every planned addon is Ready
  // at the branch tip: its finalizer prunes only the objects still labelled as its own, so objects
  // another addon now applies stay (same uid, never absent) and only those nobody applies go. That
  // of a planned addon (the other kind, another target) goes at once: its successor waits for it.
  const deleteKustomizations = [...existing]
    .filter(
      ([n, k]) =>
        !wanted.has(n) &&
        k.metadata.deletionTimestamp === undefined &&
        (settled || planned.has(k.metadata.labels?.[LABEL_ADDON] ?? '')),
    )
    .map(([n]) => n);
  return {
    ...(gitRepository !== undefined ? { gitRepository } : { deleteGitRepository: sourceName }),
    kustomizations,
    deleteKustomizations,
    patches: deleteKustomizations.flatMap((n) => {
      const k = existing.get(n);
      return k === undefined ? [] : legacyHelmOrphan(ctx, k, helmAddons);
    }),
  };
}

/** The GitRepository of the Cluster's fleet branch. */
function branchGitRepository(ctx: Context, common: FluxCommon): GitRepository {
  const settings = ctx.input.fleetSettings;
  return fleetGitRepository(ctx.input.templates, {
    name: common.sourceName,
    namespace: ctx.namespace,
    cluster: ctx.name,
    url: settings.url,
    branch: ctx.branchName,
    ...(settings.secretRef !== undefined ? { secretRef: settings.secretRef } : {}),
    ...(settings.interval !== undefined ? { interval: settings.interval } : {}),
    labels: common.shardLabels,
    ownerReferences: common.owner,
  });
}

/** The gate Kustomization of an addon's csctl waitForPreCondition: Flux health checks the addon depends on. */
function gateKustomization(
  ctx: Context,
  target: Target,
  common: FluxCommon,
  addon: string,
  gate: PreConditionChecks,
): Kustomization {
  const { interval } = common;
  return preconditionKustomization(ctx.input.templates, {
    cluster: ctx.name,
    namespace: ctx.namespace,
    addon,
    sourceName: common.sourceName,
    extraLabels: common.shardLabels,
    healthChecks: gate.healthChecks,
    healthCheckExprs: gate.exprs,
    ...(interval !== undefined ? { interval } : {}),
    ...(target.release.spec.timeout !== undefined ? { timeout: target.release.spec.timeout } : {}),
    ownerReferences: common.owner,
  });
}

/**
 * A Helm addon's Kustomization of the old naming (`<cluster>.<addon>`, applying to the management
 * cluster) whose addon is still a Helm addon: deleted with deletionPolicy Orphan, so its HelmRelease
 * (same name) stays installed and the `<cluster>.<addon>.helm` Kustomization adopts it instead of
 * helm-controller uninstalling and installing again.
 */
function legacyHelmOrphan(ctx: Context, k: Kustomization, helmAddons: ReadonlySet<string>): MergePatch[] {
  const addon = k.metadata.labels?.[LABEL_ADDON];
  const legacy =
    addon !== undefined &&
    helmAddons.has(addon) &&
    k.metadata.name === addonKustomizationName(ctx.name, addon, false) &&
    k.spec.kubeConfig === undefined;
  if (!legacy || k.spec.deletionPolicy === 'Orphan') return [];
  return [
    {
      apiVersion: k.apiVersion,
      kind: 'Kustomization',
      namespace: k.metadata.namespace ?? ctx.namespace,
      name: k.metadata.name,
      patch: { spec: { deletionPolicy: 'Orphan' } },
    },
  ];
}
