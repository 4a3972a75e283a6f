// Phase "resolve" of the ClusterAddon reconcile: from the Cluster to what it runs (its release,
// the release's files and addons, its ClusterStack) and the ClusterAddon that owns the rest.
import type { ClusterAddon } from '../../api/clusteraddon.ts';
import type { ClusterStackRelease } from '../../api/clusterstackrelease.ts';
import {
  API_VERSION,
  LABEL_CLUSTER,
  LABEL_CLUSTER_STACK,
  LABEL_RELEASE,
  type OwnerReference,
} from '../../api/meta.ts';
import type { ReleaseTree, StackManifest } from '../../api/release.ts';
import { MANAGED_BY_LABELS } from '../../releases/flux.ts';
import { nativeManifestOf, readReleaseDescription, type StackDescription } from '../../releases/format.ts';
import { parseReleaseTag } from '../../releases/tags.ts';
import { withChartPolicy } from '../../releases/tenancy.ts';
import { addonOrder } from '../../rendering/index.ts';
import { markReconciling, markStalled } from '../../runtime/conditions.ts';
import { addonReleaseTag, clusterForAddons } from '../addonrelease.ts';
import { clusterUse } from '../clusterstack.ts';
import { ProviderReason, releaseProviderBlock } from '../provider.ts';
import { notSharedMessage, servesNamespace } from '../sharing.ts';
import { base, compareStrings, isRecord, keepStatus, markOf } from './context.ts';
import { releaseInvalidMessage } from './reconcileinputs.ts';
import {
  type ClusterAddonInput,
  type ClusterAddonResult,
  type Context,
  FINALIZER_FLEET_CLEANUP,
  type PlannedAddon,
  Reason,
  type Step,
  type Target,
} from './types.ts';

function clusterOwnerReference(cluster: Record<string, unknown>, name: string): OwnerReference {
  const meta = isRecord(cluster.metadata) ? cluster.metadata : {};
  return {
    apiVersion: typeof cluster.apiVersion === 'string' ? cluster.apiVersion : 'cluster.x-k8s.io/v1beta2',
    kind: 'Cluster',
    name,
    uid: typeof meta.uid === 'string' ? meta.uid : '',
    controller: true,
    blockOwnerDeletion: true,
  };
}

function hasRef(
  cluster: Record<string, unknown>,
  field: 'controlPlaneRef' | 'infrastructureRef',
): string | undefined {
  const spec = cluster.spec;
  if (!isRecord(spec)) return undefined;
  const ref = spec[field];
  if (!isRecord(ref) || typeof ref.name !== 'string' || ref.name === '') return undefined;
  return `${typeof ref.kind === 'string' ? ref.kind : 'object'} ${ref.name}`;
}

/** The ClusterAddon as it should be: owned by the Cluster, labelled with its release and stack. */
function desiredClusterAddon(
  ctx: Context,
  cluster: Record<string, unknown>,
  releaseName: string,
  clusterStackName: string | undefined,
): ClusterAddon {
  const { namespace, name } = ctx;
  return {
    apiVersion: API_VERSION,
    kind: 'ClusterAddon',
    metadata: {
      name,
      namespace,
      labels: Object.fromEntries(
        Object.entries({
          ...MANAGED_BY_LABELS,
          [LABEL_CLUSTER]: name,
          [LABEL_RELEASE]: releaseName,
          ...(clusterStackName !== undefined ? { [LABEL_CLUSTER_STACK]: clusterStackName } : {}),
        }).sort(([a], [b]) => compareStrings(a, b)),
      ),
      ownerReferences: [clusterOwnerReference(cluster, name)],
    },
    spec: {
      cluster: name,
      release: releaseName,
      ...(clusterStackName !== undefined ? { clusterStack: clusterStackName } : {}),
    },
  };
}

/**
 * Phase "resolve": the Cluster's release, its files and its ClusterStack, and the ClusterAddon
 * that owns what follows. Anything missing ends the reconcile with a condition saying what.
 */
export function resolveTarget(ctx: Context): Step<Target> {
  const { input, existing, previous, namespace, name } = ctx;
  const cluster = input.cluster as Record<string, unknown>;
  const now = input.now;
  const end = (result: ClusterAddonResult | undefined): Step<Target> => ({ ok: false, result });
  const tag = addonReleaseTag(cluster);
  if (tag === undefined) {
    if (existing === undefined) return end(undefined);
    // It was ours and moved to a ClusterClass that is no release: keep what runs, say so.
    const className = clusterUse(cluster)?.className ?? '(none)';
    const message = `Cluster uses ClusterClass ${className}, which is not a cluster stack release; addons are left as they are`;
    const conditions = markStalled(
      previous?.conditions,
      markOf(ctx, Reason.NotAStackfluxClass, message),
      now,
    );
    return end(base(keepStatus(ctx, conditions), ctx.withFinalizer));
  }
  const releaseName = tag.tag;
  const clusterStackName = input.release?.spec.clusterStack ?? input.clusterStack?.metadata.name;
  const clusterAddon = desiredClusterAddon(ctx, cluster, releaseName, clusterStackName);
  const waiting = (reason: string, message: string): Step<Target> =>
    end({
      ...base(
        keepStatus(ctx, markReconciling(previous?.conditions, markOf(ctx, reason, message), now)),
        ctx.withFinalizer,
      ),
      clusterAddon,
    });
  const failed = (reason: string, message: string): Step<Target> =>
    end({
      ...base(
        keepStatus(ctx, markStalled(previous?.conditions, markOf(ctx, reason, message), now)),
        ctx.withFinalizer,
      ),
      clusterAddon,
    });

  // The ClusterAddon must exist (uid for owner references, finalizer before the branch).
  if (
    existing === undefined ||
    existing.metadata.uid === undefined ||
    !(existing.metadata.finalizers ?? []).includes(FINALIZER_FLEET_CLEANUP)
  ) {
    return waiting(Reason.Creating, `creating ClusterAddon ${namespace}/${name} for release ${releaseName}`);
  }
  const { release, tree, clusterStack } = input;
  // Before anything of the release is read: a ClusterStack serves another namespace only by opt-in.
  // (Checked without the release too: a release a Cluster may not use may well be collected.)
  const served =
    clusterStack === undefined ? true : servesNamespace(clusterStack, namespace, input.namespaceLabels);
  if (served === false && clusterStack !== undefined) {
    return failed(
      Reason.ClusterClassNotShared,
      `${notSharedMessage(clusterStack, namespace)}; nothing of release ${releaseName} is rendered for this Cluster`,
    );
  }
  if (served === undefined) {
    return waiting(Reason.NamespaceNotKnown, `waiting for the labels of Namespace ${namespace}`);
  }
  if (release === undefined)
    return waiting(Reason.ReleaseNotFound, `waiting for ClusterStackRelease ${releaseName}`);
  const providerBlock = releaseProviderBlock(release);
  if (providerBlock !== undefined) return waiting(ProviderReason.WaitingForProvider, providerBlock);
  const invalid = releaseInvalidMessage(release);
  if (tree === undefined && invalid !== undefined) {
    return failed(Reason.InvalidRelease, `ClusterStackRelease ${releaseName}: ${invalid}`);
  }
  if (tree === undefined) {
    return waiting(Reason.ReleaseNotFetched, `waiting for the files of release ${releaseName} to be fetched`);
  }
  if (clusterStack === undefined) {
    return waiting(
      Reason.ClusterStackNotFound,
      `waiting for ClusterStack ${release.spec.clusterStack} (its central values are enforced)`,
    );
  }
  const content = releaseContent(input, release, tree, releaseName);
  if (!content.ok) return failed(Reason.InvalidRelease, content.message);
  // Objects the templates read must be in the cache before rendering (else a false "missing field").
  const refs = missingRefs(cluster, input);
  if (refs !== undefined) return waiting(refs.reason, refs.message);
  return {
    ok: true,
    value: {
      cluster: clusterForAddons(cluster, tag, content.description.kubernetesVersion),
      clusterAddon,
      owner: existing,
      releaseName,
      release,
      tree,
      clusterStack,
      ...(content.stack !== undefined
        ? { stack: content.stack, addons: addonOrder(content.stack) }
        : { addons: csctlAddonPlan(content.description) }),
      description: content.description,
    },
  };
}

/**
 * The release's description and, for a native release, its stack.yaml under the chart policy; or
 * why the release is invalid.
 */
function releaseContent(
  input: ClusterAddonInput,
  release: ClusterStackRelease,
  tree: ReleaseTree,
  releaseName: string,
): { ok: true; description: StackDescription; stack?: StackManifest } | { ok: false; message: string } {
  const parsedTag = parseReleaseTag(release.spec.tag);
  if (!parsedTag.ok) return { ok: false, message: `release ${release.spec.tag}: ${parsedTag.reason}` };
  const described = readReleaseDescription(tree, parsedTag.value);
  const read =
    described.ok && described.value.format === 'csctl'
      ? { ok: true as const, value: undefined }
      : withChartPolicy(nativeManifestOf(described), input.tenancy);
  if (!read.ok || !described.ok) {
    const errors = read.ok ? (described.ok ? [] : described.errors) : read.errors;
    return {
      ok: false,
      message: `release ${releaseName}${input.treeCommit ? ` at ${input.treeCommit}` : ''} is invalid: ${errors.join('; ')}`,
    };
  }
  return {
    ok: true,
    description: described.value,
    ...(read.value !== undefined ? { stack: read.value } : {}),
  };
}

/** The objects the Cluster refers to that are not in the cache yet: why the reconcile waits, if it does. */
function missingRefs(
  cluster: Record<string, unknown>,
  input: ClusterAddonInput,
): { reason: string; message: string } | undefined {
  const cpRef = hasRef(cluster, 'controlPlaneRef');
  const infraRef = hasRef(cluster, 'infrastructureRef');
  const missing = [
    ...(cpRef !== undefined && input.controlPlane === undefined ? [`ControlPlane (${cpRef})`] : []),
    ...(infraRef !== undefined && input.infraCluster === undefined ? [`InfraCluster (${infraRef})`] : []),
  ];
  if (missing.length === 0) return undefined;
  const problems = input.refProblems ?? [];
  if (problems.length > 0) {
    return {
      reason: Reason.RefsNotReadable,
      message: `waiting for ${missing.join(' and ')}: ${problems.join('; ')}`,
    };
  }
  return { reason: Reason.WaitingForRefs, message: `waiting for ${missing.join(' and ')}` };
}

/**
 * The addons of a csctl release as one Kustomization each. An addon is one chart (one folder),
 * rendered the same in whichever stage lists it, so a name listed in both stages is one addon:
 * ordered (dependsOn) by its first entry, i.e. as AfterControlPlaneInitialized orders it; its stage
 * is BeforeClusterUpgrade when that stage applies it (the upgrade hook waits for those), else
 * AfterControlPlaneInitialized. An addon whose last entry is `action: delete` is not rendered, so
 * Flux prunes what an earlier release applied of it. The old layout's one chart has no stage.
 */
export function csctlAddonPlan(description: StackDescription): PlannedAddon[] {
  const last = new Map(description.addons.map((a) => [a.name, a]));
  const kept = new Set([...last].filter(([, a]) => a.action === 'apply').map(([name]) => name));
  const plan = new Map<string, PlannedAddon>();
  for (const addon of description.addons) {
    if (!kept.has(addon.name)) continue;
    const stage =
      addon.stage === 'BeforeClusterUpgrade' && addon.action === 'apply' ? addon.stage : undefined;
    const have = plan.get(addon.name);
    if (have !== undefined) {
      if (stage !== undefined) have.stage = stage;
      continue;
    }
    plan.set(addon.name, {
      name: addon.name,
      dependsOn: addon.dependsOn.filter((d) => kept.has(d) && d !== addon.name),
      ...(addon.targetNamespace !== undefined ? { targetNamespace: addon.targetNamespace } : {}),
      ...(addon.stage !== undefined ? { stage: addon.stage } : {}),
    });
  }
  return [...plan.values()];
}
