// The preview's input assembled from a snapshot (controller/offline/): the offline `stackflux
// render` with preview.yaml, and `stackflux preview` over the live snapshot `stackflux diff` reads.
// Objects are gathered as the offline renderer gathers them for the ClusterAddon reconcile.
import type { ClusterAddon } from '../api/clusteraddon.ts';
import type { ClusterStack } from '../api/clusterstack.ts';
import type { ClusterStackRelease } from '../api/clusterstackrelease.ts';
import { API_VERSION, GROUP } from '../api/meta.ts';
import type { LabelSelector } from '../api/rollout.ts';
import {
  clusterRefsIn,
  fleetSettingsOf,
  namespaceFluxShardIn,
  namespaceLabelsIn,
  treeAt,
} from '../offline/render.ts';
import type { Snapshot } from '../offline/snapshot.ts';
import { World } from '../offline/world.ts';
import { fleetBranchName } from '../reconcilers/clusteraddon.ts';
import { clusterUse, ownedBy, sourceUrl } from '../reconcilers/clusterstack.ts';
import type { FluxTemplates } from '../releases/flux.ts';
import { classifyTags, formatReleaseTag, releaseOrder, tagForClusterClassName } from '../releases/tags.ts';
import type { TenancyPolicy } from '../releases/tenancy.ts';
import type { SyncGoEngine } from '../rendering/clusterclass.ts';
import type { AddonRenderer } from '../rendering/index.ts';
import {
  type PreviewClusterInput,
  PreviewError,
  type PreviewInput,
  type PreviewRelease,
  previewRelease,
} from './core.ts';
import { diffText, jsonText, summaryText } from './report.ts';
import { parseLabelSelector } from './selector.ts';

const CAPI_GROUP = 'cluster.x-k8s.io';

/** Which preview to make: the ClusterStack, the candidate (default: the newest it would take), which Clusters. */
export interface PreviewRequest {
  namespace: string;
  clusterStack: string;
  release?: string;
  selector?: LabelSelector;
  wave?: string;
}

export interface PreviewOptions {
  now: Date;
  templates: FluxTemplates;
  tenancy?: TenancyPolicy;
  render?: AddonRenderer;
  goEngine?: SyncGoEngine;
  /** --github-api-url: the GitHub a spec.source.github names (its clone URL keys the snapshot's source). */
  githubApiUrl?: string;
  /** The installation's render seed key (default: this process's own). */
  renderSeedKey?: string;
}

/**
 * The newest release the ClusterStack would take: of its pinned versions, its releases and (with
 * autoSubscribe) the latest listed tag, the newest in the listing's order.
 */
export function defaultCandidate(
  cs: ClusterStack,
  releases: readonly string[],
  listed?: readonly { tag: string; time?: number }[],
): string | undefined {
  const selector = {
    provider: cs.spec.provider,
    name: cs.spec.name,
    kubernetesVersion: cs.spec.kubernetesVersion,
    channel: cs.spec.channel ?? 'stable',
  };
  const times = new Map(
    (listed ?? []).flatMap((t) => (t.time !== undefined ? [[t.tag, t.time] as const] : [])),
  );
  const pinned = (cs.spec.versions ?? []).map((v) =>
    formatReleaseTag(selector.provider, selector.name, selector.kubernetesVersion, v),
  );
  const classified = classifyTags(
    [...(listed ?? []).map((t) => t.tag), ...releases, ...pinned],
    selector,
    times,
  );
  const latestListed =
    listed !== undefined
      ? classifyTags(
          listed.map((t) => t.tag),
          selector,
          times,
        ).releases.at(-1)
      : undefined;
  const wanted = new Set([
    ...pinned,
    ...releases,
    ...((cs.spec.autoSubscribe ?? true) && latestListed !== undefined ? [latestListed.tag] : []),
  ]);
  const ordered = classified.releases.filter((r) => wanted.has(r.tag)).sort(releaseOrder(times));
  return ordered.at(-1)?.tag;
}

export function previewInputOf(
  snapshot: Snapshot,
  request: PreviewRequest,
  options: PreviewOptions,
): PreviewInput {
  const w = new World(snapshot, options.now);
  const ns = request.namespace;
  const cs = w.get(API_VERSION, 'ClusterStack', request.clusterStack, ns) as unknown as
    | ClusterStack
    | undefined;
  if (cs === undefined) throw new PreviewError(`ClusterStack ${ns}/${request.clusterStack} not found`);
  const url = sourceUrl(cs, options.githubApiUrl);
  const source = snapshot.sources.find((s) => s.url === url);
  const path = cs.spec.source.path ?? '';
  const owned = (w.list(GROUP, 'ClusterStackRelease', ns) as unknown as ClusterStackRelease[]).filter((r) =>
    ownedBy(r, cs),
  );
  const listed = source?.listing.ok === true ? source.listing.tags : undefined;
  const candidate =
    request.release ??
    defaultCandidate(
      cs,
      owned.map((r) => r.metadata.name),
      listed,
    );
  if (candidate === undefined)
    throw new PreviewError(
      `ClusterStack ${ns}/${cs.metadata.name} has no release to move to; name one with --release`,
    );
  if (
    listed !== undefined &&
    !listed.some((t) => t.tag === candidate) &&
    !owned.some((r) => r.metadata.name === candidate)
  )
    throw new PreviewError(`release ${candidate} is not a tag of ${url}`);

  const releases = new Map<string, PreviewRelease>();
  const tagsInUse = new Set<string>([candidate]);
  const clusters: PreviewClusterInput[] = [];
  const settings = fleetSettingsOf(snapshot);
  for (const cluster of w.list(CAPI_GROUP, 'Cluster')) {
    const use = clusterUse(cluster);
    const namespace = cluster.metadata.namespace ?? '';
    if (use === undefined || (use.classNamespace ?? namespace) !== ns) continue;
    const { controlPlane, infraCluster } = clusterRefsIn(w, cluster);
    const clusterAddon = w.get(API_VERSION, 'ClusterAddon', cluster.metadata.name, namespace) as unknown as
      | ClusterAddon
      | undefined;
    const tag = tagForClusterClassName(use.className);
    if (tag !== undefined) tagsInUse.add(tag.tag);
    clusters.push({
      cluster,
      ...(controlPlane !== undefined ? { controlPlane } : {}),
      ...(infraCluster !== undefined ? { infraCluster } : {}),
      ...(clusterAddon !== undefined ? { clusterAddon } : {}),
      ...(ns !== namespace ? { namespaceLabels: namespaceLabelsIn(w, [namespace]) } : {}),
      ...namespaceFluxShardIn(w, namespace, settings),
      branch: w.branchFiles(fleetBranchName(settings.branchPrefix, namespace, cluster.metadata.name)),
    });
  }
  for (const tag of tagsInUse) {
    const release = owned.find((r) => r.metadata.name === tag);
    const tree = treeAt(source, tag, release?.spec.source.path ?? path);
    releases.set(tag, {
      ...(release !== undefined ? { release } : {}),
      ...(tree !== undefined ? { tree } : {}),
    });
  }
  return {
    clusterStack: cs,
    releases,
    candidate,
    clusters,
    ...(request.selector !== undefined ? { selector: request.selector } : {}),
    ...(request.wave !== undefined ? { wave: request.wave } : {}),
    fleetSettings: settings,
    templates: options.templates,
    ...(options.tenancy !== undefined ? { tenancy: options.tenancy } : {}),
    now: options.now,
    ...(options.render !== undefined ? { render: options.render } : {}),
    ...(options.goEngine !== undefined ? { goEngine: options.goEngine } : {}),
    ...(options.renderSeedKey !== undefined ? { renderSeedKey: options.renderSeedKey } : {}),
  };
}

/** The request of a snapshot's preview.yaml (its selector parsed). */
export function snapshotPreviewRequest(snapshot: Snapshot): PreviewRequest | undefined {
  const p = snapshot.preview;
  if (p === undefined) return undefined;
  return {
    namespace: p.namespace,
    clusterStack: p.clusterStack,
    ...(p.release !== undefined ? { release: p.release } : {}),
    ...(p.selector !== undefined ? { selector: parseLabelSelector(p.selector) } : {}),
    ...(p.wave !== undefined ? { wave: p.wave } : {}),
  };
}

/**
 * The output files of a snapshot's preview.yaml: preview/summary.txt, preview/diff.txt and
 * preview/preview.json (none without preview.yaml).
 */
export function previewFiles(snapshot: Snapshot, options: PreviewOptions): Map<string, string> {
  const request = snapshotPreviewRequest(snapshot);
  if (request === undefined) return new Map();
  const result = previewRelease(previewInputOf(snapshot, request, options));
  return new Map([
    ['preview/summary.txt', summaryText(result)],
    ['preview/diff.txt', diffText(result)],
    ['preview/preview.json', jsonText(result)],
  ]);
}
