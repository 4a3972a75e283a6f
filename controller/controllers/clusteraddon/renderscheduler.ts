// Addon renders of the ClusterAddon reconcile: in a pool of child processes (bounded in time,
// memory and output, fair per namespace; a template that keeps hitting limits cools down, see
// rendering/bounded.ts), csctl renders kept across reconciles of the same inputs (the render
// cache), and within one reconcile each render done once however often the reconcile runs.
import {
  type ClusterAddonInput,
  type ClusterAddonResult,
  reconcileClusterAddon,
} from '../../reconcilers/clusteraddon.ts';
import {
  RenderCache,
  RenderPool,
  type RenderPoolOptions,
  type RenderResult,
  withBoundedRenders,
} from '../../rendering/index.ts';

/** The pure reconcile given a renderer. */
export type AddonReconcile = (input: ClusterAddonInput) => ClusterAddonResult | undefined;

export interface RenderSchedulerOptions {
  /** The render processes (default: a pool with `render`'s limits). */
  pool?: RenderPool;
  render?: RenderPoolOptions;
  cache?: RenderCache;
  /** The pure reconcile (default reconcileClusterAddon). */
  reconcile?: AddonReconcile;
}

export class RenderScheduler {
  readonly pool: RenderPool;
  readonly cache: RenderCache;
  private readonly reconcile: AddonReconcile;

  constructor(opts: RenderSchedulerOptions = {}) {
    this.pool = opts.pool ?? new RenderPool(opts.render);
    // csctl renders (Helm's engine) kept across reconciles of the same inputs.
    this.cache = opts.cache ?? new RenderCache();
    this.reconcile = opts.reconcile ?? reconcileClusterAddon;
  }

  /**
   * The reconcile of one key: each call runs the pure reconcile on an input with its renders done
   * in the pool (queued in `namespace`); renders already done in this reconcile are not repeated.
   */
  decider(namespace: string): (input: ClusterAddonInput) => Promise<ClusterAddonResult | undefined> {
    const renders = new Map<string, RenderResult>();
    return (i) =>
      withBoundedRenders(
        this.pool,
        (render) => this.reconcile({ ...i, render }),
        renders,
        { namespace },
        this.cache,
      );
  }

  /** Stops the render processes. */
  close(): Promise<void> {
    return this.pool.close();
  }
}
