// The live Progressive rollout: per ClusterStack, gathers the inputs of reconcileRollout from the
// informer caches (the ClusterStack, its releases, the Clusters and ClusterAddons of its
// namespace), calls it with `now`, and applies what it decides:
//   1. each Cluster change by server-side apply with the field manager "stackflux-rollout", owning
//      only the rollout annotations and the topology class and version (a Flux Kustomization that
//      applies the Cluster keeps every other field);
//   2. status.rollout and the Rollout condition with the same field manager (the ClusterStack
//      controller owns the rest of the status);
//   3. an Event per transition; a requeue when a soak, deadline or window ends.
// Manual ClusterStacks cost one cache read per event and write nothing (their status.rollout, if a
// previous Progressive spec left one, is removed once).
import type { ClusterAddon } from '../api/clusteraddon.ts';
import type { ClusterStack } from '../api/clusterstack.ts';
import type { ClusterStackRelease } from '../api/clusterstackrelease.ts';
import { API_VERSION, type Condition } from '../api/meta.ts';
import { ROLLOUT_CONDITION, ROLLOUT_FIELD_MANAGER } from '../api/rollout.ts';
import {
  clusterApplyBody,
  type RolloutCluster,
  type RolloutResult,
  reconcileRollout,
} from '../reconcilers/rollout.ts';
import type { KubeObject } from '../runtime/client.ts';
import { type Clock, realClock } from '../runtime/clock.ts';
import { findCondition, setCondition } from '../runtime/conditions.ts';
import type { Controller, ReconcileContext, ReconcileResult } from '../runtime/controller.ts';
import type { Manager } from '../runtime/manager.ts';
import { servedClusterApiVersion } from './clusterview.ts';
import { sameJson } from './common.ts';

const NS_INDEX = 'rollout/namespace';

export interface RolloutControllerOptions {
  /** Watch only this namespace (default: all). */
  namespace?: string;
  clock?: Clock;
  concurrency?: number;
}

type Obj = KubeObject;

function nsOf(o: Obj): string {
  return o.metadata.namespace ?? '';
}

/** The status.rollout + Rollout condition the ClusterStack should carry (undefined: none). */
function desiredStatus(
  cs: ClusterStack,
  result: RolloutResult,
  now: Date,
): { rollout?: RolloutResult['status']; condition?: Condition } {
  if (result.status === undefined || result.condition === undefined) return {};
  const [condition] = setCondition(
    (cs.status?.conditions ?? []).filter((c) => c.type === ROLLOUT_CONDITION),
    {
      type: ROLLOUT_CONDITION,
      ...result.condition,
      ...(cs.metadata.generation !== undefined ? { observedGeneration: cs.metadata.generation } : {}),
    },
    now,
  );
  return { rollout: result.status, ...(condition !== undefined ? { condition } : {}) };
}

export async function setupRolloutController(
  manager: Manager,
  opts: RolloutControllerOptions = {},
): Promise<Controller> {
  const clock = opts.clock ?? realClock;
  const client = manager.client;
  const scope = opts.namespace ? { namespace: opts.namespace } : {};
  const clusterApiVersion = (await servedClusterApiVersion(manager)) ?? 'cluster.x-k8s.io/v1beta2';
  const clusterStacks = manager.shardedInformer<ClusterStack & Obj>(API_VERSION, 'ClusterStack', scope);
  const releases = manager.shardedInformer<ClusterStackRelease & Obj>(
    API_VERSION,
    'ClusterStackRelease',
    scope,
  );
  const clusters = manager.shardedInformer<Obj>(clusterApiVersion, 'Cluster', scope);
  const clusterAddons = manager.shardedInformer<ClusterAddon & Obj>(API_VERSION, 'ClusterAddon', scope);
  clusterStacks.addIndexer(NS_INDEX, (o) => [nsOf(o)]);
  releases.addIndexer(NS_INDEX, (o) => [nsOf(o)]);
  clusters.addIndexer(NS_INDEX, (o) => [nsOf(o)]);
  clusterAddons.addIndexer(NS_INDEX, (o) => [nsOf(o)]);

  const reconcile = async (key: string, ctx: ReconcileContext): Promise<ReconcileResult | undefined> => {
    const cs = clusterStacks.get(key);
    if (cs === undefined || cs.metadata.deletionTimestamp !== undefined) return undefined;
    const progressive = cs.spec.rollout?.strategy === 'Progressive';
    if (
      !progressive &&
      cs.status?.rollout === undefined &&
      findCondition(cs.status?.conditions, ROLLOUT_CONDITION) === undefined
    )
      return undefined; // Manual and nothing to clean up: no work
    const ns = nsOf(cs);
    const now = new Date(clock.now());
    const result = reconcileRollout({
      clusterStack: cs,
      releases: releases.byIndex(NS_INDEX, ns),
      clusters: clusters.byIndex(NS_INDEX, ns) as unknown as RolloutCluster[],
      clusterAddons: clusterAddons.byIndex(NS_INDEX, ns),
      now,
    });

    // 1. Cluster changes (each its own apply; a failure is retried with backoff, the rest next time).
    for (const ch of result.changes) {
      const cluster = clusters.get(`${ns}/${ch.name}`);
      if (cluster === undefined) continue;
      ctx.log.info(
        { cluster: ch.name, action: ch.action, to: ch.topology?.className, annotations: ch.annotations },
        `rollout: ${ch.action.toLowerCase()} Cluster`,
      );
      await client.apply(clusterApplyBody(cluster as unknown as RolloutCluster, ch) as Obj, {
        fieldManager: ROLLOUT_FIELD_MANAGER,
        force: true,
        signal: ctx.signal,
      });
    }

    // 2. status.rollout and the Rollout condition (removed when the strategy is Manual).
    const want = desiredStatus(cs, result, now);
    const have = {
      ...(cs.status?.rollout !== undefined ? { rollout: cs.status.rollout } : {}),
      ...(findCondition(cs.status?.conditions, ROLLOUT_CONDITION) !== undefined
        ? { condition: findCondition(cs.status?.conditions, ROLLOUT_CONDITION) }
        : {}),
    };
    if (!sameJson(want, have)) {
      await client.applyStatus(
        {
          apiVersion: API_VERSION,
          kind: 'ClusterStack',
          metadata: { name: cs.metadata.name, namespace: ns },
          status: {
            ...(want.rollout !== undefined ? { rollout: want.rollout } : {}),
            ...(want.condition !== undefined ? { conditions: [want.condition] } : {}),
          },
        },
        { fieldManager: ROLLOUT_FIELD_MANAGER, force: true, signal: ctx.signal },
      );
    }

    // 3. Events, once the changes are written.
    for (const e of result.events) void manager.events.event(cs, e.type, e.reason, 'Rollout', e.message);
    return result.requeueAfterMs !== undefined
      ? { requeueAfter: Math.max(1000, result.requeueAfterMs) }
      : undefined;
  };

  const controller = manager.addController({
    name: 'rollout',
    kind: 'ClusterStack',
    maxConcurrentReconciles: opts.concurrency ?? 2,
    reconcile,
  });
  const stacksIn = (o: Obj): string[] =>
    clusterStacks
      .byIndex(NS_INDEX, nsOf(o))
      .filter((cs) => cs.spec.rollout?.strategy === 'Progressive' || cs.status?.rollout !== undefined)
      .map((cs) => `${nsOf(cs)}/${cs.metadata.name}`);
  manager.watch(controller, clusterStacks);
  manager.watch(controller, releases, (r) => [`${nsOf(r)}/${r.spec.clusterStack}`]);
  manager.watch(controller, clusters, stacksIn);
  manager.watch(controller, clusterAddons, stacksIn);
  return controller;
}
