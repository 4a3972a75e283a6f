// The options of the ClusterAddon controller (re-exported by ../clusteraddon.ts) and the fleet
// settings the pure reconcile reads, derived from them.
import type { FleetWriter } from '../../gitops/branches.ts';
import { DEFAULT_BRANCH_PREFIX, type FleetSettings } from '../../reconcilers/clusteraddon.ts';
import type { FluxTemplates } from '../../releases/flux.ts';
import type { TenancyPolicy } from '../../releases/tenancy.ts';
import type { RenderPoolOptions } from '../../rendering/index.ts';
import type { Clock } from '../../runtime/clock.ts';
import type { GitCredentials } from '../../sources/git.ts';
import type { ReleaseTreeFetcher } from '../../sources/releasetree.ts';

export interface ClusterAddonControllerOptions {
  /** Watch only this namespace (default: all). */
  namespace?: string;
  fleet: {
    url: string;
    /** Prefix of the Clusters' branches, `<prefix><namespace>/<cluster>` (default "stackflux/"). */
    branchPrefix?: string;
    /**
     * Secret with the fleet repo credentials (username/password or token) the controller pushes
     * with. Each Cluster's GitRepository references a Secret of the same name in the Cluster's
     * namespace (Flux reads with it); create it there when the repo needs auth.
     */
    secret?: { namespace: string; name: string };
    /** Flux interval of each Cluster's GitRepository (a push requests a fetch at once). */
    interval?: string;
    /** Flux interval of the addon Kustomizations (default: the ClusterStack's interval). */
    addonInterval?: string;
    /**
     * Flux shards (≥ 2: each Cluster's Flux objects get sharding.fluxcd.io/key=shard<k>; ≥ 1: a
     * Namespace labelled stackflux.io/flux-shard=<key> puts its Clusters' Flux objects on <key>).
     */
    fluxShards?: number;
  };
  /** Builds the fleet writer once the fleet credentials are read. */
  writer: (credentials: GitCredentials | undefined) => FleetWriter;
  cacheDir: string;
  /** Reads release trees (the release pipeline's, so every source reads alike; default: no OCI client). */
  fetchTree?: ReleaseTreeFetcher;
  /** --github-api-url: where releases read from GitHub release assets are downloaded. */
  githubApiUrl?: string;
  templates: FluxTemplates;
  /** --default-service-account and --allowed-chart-hosts (default: neither). */
  tenancy?: TenancyPolicy;
  concurrency?: number;
  /**
   * Limits of addon renders (time budget, output and memory caps, render processes); renders run in
   * a pool of processes so a hostile template cannot block or abort this one. Defaults:
   * rendering/limits.ts.
   */
  render?: RenderPoolOptions;
  /** Window of fleet writes (default 2 s), from the first change waiting; not extended. */
  batchWindowMs?: number;
  /** Key of the Go engine's per-render seeds, shared with the impact controller (rendering/determinism.ts). */
  renderSeedKey?: string;
  clock?: Clock;
}

/** Whether Flux shards are on (--flux-shards ≥ 1). */
export function fluxShardsOn(fleet: ClusterAddonControllerOptions['fleet']): boolean {
  return fleet.fluxShards !== undefined && fleet.fluxShards >= 1;
}

/** The fleet settings every Cluster's reconcile reads (repository, branch prefix, intervals, shards). */
export function fleetSettingsOf(fleet: ClusterAddonControllerOptions['fleet']): FleetSettings {
  return {
    url: fleet.url,
    branchPrefix: fleet.branchPrefix ?? DEFAULT_BRANCH_PREFIX,
    ...(fleet.secret !== undefined ? { secretRef: fleet.secret.name } : {}),
    ...(fleet.interval !== undefined ? { interval: fleet.interval } : {}),
    ...(fleet.addonInterval !== undefined ? { addonInterval: fleet.addonInterval } : {}),
    ...(fluxShardsOn(fleet) ? { fluxShards: fleet.fluxShards } : {}),
  };
}
