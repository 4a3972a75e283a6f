// The rendered cluster-class of a release (csctl: a Helm chart) for the live ClusterStackRelease
// controller: renders it in the render processes (controller/rendering/clusterclass.ts, the same
// pure code `stackflux render` runs) and writes the objects to the release's branch of the fleet
// repository, where the release's Flux GitRepository (pinned to that commit) and Kustomization
// pick them up.
//
// Why a fleet branch: kustomize-controller applies files from a source and cannot render a Helm
// chart; helm-controller could, but it would install a Helm release (its own storage, hooks, a
// version of the chart that is not csctl's) where CSO applies `helm template` output. The fleet
// repository is already where stackflux puts what it renders for Flux (per-Cluster addons); the
// release gets a branch of its own, pinned by commit as its tag is, so Flux applies exactly what
// was rendered and validated. Branches live under `<prefix>_releases/<namespace>/<release>`: a
// namespace never starts with "_", so no release branch shares a ref path with a Cluster's
// `<prefix><namespace>/<cluster>` (git cannot hold refs a/b and a/b/c at once).
import type { ReleaseTree } from '../api/release.ts';
import type { BranchState, FleetWriter } from '../gitops/branches.ts';
import { type RenderedClass, releaseClassBranch } from '../reconcilers/clusterstackrelease.ts';
import type { StackDescription } from '../releases/description.ts';
import { renderCsctlClusterClass } from '../rendering/clusterclass.ts';
import { type RenderPool, withBoundedGoEngine } from '../rendering/index.ts';

export interface ReleaseFleet {
  url: string;
  /** The Cluster branches' prefix (--fleet-branch-prefix); release branches go below it. */
  branchPrefix: string;
  /** The fleet Secret's name (in every namespace, as for Cluster branches). */
  secretName?: string;
  /** A writer for branches under releaseClassBranch's folder (created once, on first use). */
  writer: () => Promise<FleetWriter>;
}

export interface ReleaseClassDeps {
  pool: RenderPool;
  /** undefined: no --fleet-url, so a rendered cluster-class has nowhere to go. */
  fleet?: ReleaseFleet;
  /** The ClusterClass API versions the API server serves now. */
  servedClassVersions: () => Promise<string[]>;
}

export interface ReleaseClassRequest {
  /** Identifies the release tree (url, commit, path, tag): the render is cached under it. */
  treeKey: string;
  namespace: string;
  release: string;
  tag: string;
  description: StackDescription;
  tree: () => Promise<ReleaseTree>;
}

const MAX_CACHED = 1000;

/** Renders and writes release cluster-classes; answers are cached by tree, namespace and served versions. */
export function releaseClassRenderer(deps: ReleaseClassDeps) {
  const cache = new Map<string, RenderedClass>();
  const remember = (key: string, value: RenderedClass): RenderedClass => {
    if (cache.size >= MAX_CACHED) {
      const first = cache.keys().next().value;
      if (first !== undefined) cache.delete(first);
    }
    cache.set(key, value);
    return value;
  };

  /** Deletes a deleted release's branch (its Flux objects go with the release by owner reference). */
  const remove = async (namespace: string, release: string): Promise<void> => {
    const fleet = deps.fleet;
    if (fleet === undefined) return;
    const branch = releaseClassBranch(fleet.branchPrefix, namespace, release);
    for (const key of cache.keys()) if (key.includes(`\n${namespace}\n${release}\n`)) cache.delete(key);
    const writer = await fleet.writer();
    await writer.write([{ branch, files: null, message: `Release ${namespace}/${release} was deleted` }]);
  };

  const render = async (req: ReleaseClassRequest): Promise<RenderedClass> => {
    const fleet = deps.fleet;
    if (fleet === undefined)
      return {
        ok: false,
        reason: 'FleetNotConfigured',
        message:
          'its cluster-class is a Helm chart, which stackflux renders into the fleet repository for Flux; run the controller with --fleet-url',
      };
    const served = await deps.servedClassVersions();
    const branch = releaseClassBranch(fleet.branchPrefix, req.namespace, req.release);
    const key = `${req.treeKey}\n${req.namespace}\n${req.release}\n${served.join(',')}`;
    const known = cache.get(key);
    if (known !== undefined) return known;

    const tree = await req.tree();
    const rendering = await withBoundedGoEngine(
      deps.pool,
      (engine) =>
        renderCsctlClusterClass(engine, {
          tree,
          description: req.description,
          tag: req.tag,
          namespace: req.namespace,
          servedClassVersions: served,
        }),
      { namespace: req.namespace },
    );
    // A limit may pass another time (a busy machine): only verdicts on the content are cached.
    if (!rendering.ok) return rendering.reason === 'LimitExceeded' ? rendering : remember(key, rendering);

    let result: Awaited<ReturnType<FleetWriter['write']>>;
    try {
      const writer = await fleet.writer();
      result = await writer.write([
        { branch, files: rendering.value.files, message: `Render the cluster-class of release ${req.tag}` },
      ]);
    } catch (err) {
      return {
        ok: false,
        reason: 'FleetWriteFailed',
        message: `writing branch ${branch} of ${fleet.url} failed: ${err instanceof Error ? err.message : String(err)}`,
      };
    }
    const refused = result.refused?.get(branch);
    const state: BranchState | null | undefined = result.branches.get(branch);
    if (refused !== undefined || state === undefined || state === null)
      return {
        ok: false,
        reason: 'FleetWriteFailed',
        message: `writing branch ${branch} of ${fleet.url} failed: ${refused ?? result.deferredReason ?? 'the branch was not written'}`,
      };
    return remember(key, {
      ok: true,
      url: fleet.url,
      branch,
      commit: state.commit,
      ...(fleet.secretName !== undefined ? { secretName: fleet.secretName } : {}),
    });
  };
  return { render, remove };
}
