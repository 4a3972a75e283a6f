// The ClusterAddon's status subresource: the reconcile's status when it differs from what the
// ClusterAddon holds, and Ready=False (everything else kept) when reading the fleet failed before
// anything could be reconciled.
import type { ClusterAddon } from '../../api/clusteraddon.ts';
import { API_VERSION } from '../../api/meta.ts';
import type { ClusterAddonResult } from '../../reconcilers/clusteraddon.ts';
import { isNotFound, type KubeClient } from '../../runtime/client.ts';
import type { Clock } from '../../runtime/clock.ts';
import { markNotReady } from '../../runtime/conditions.ts';
import { errorFields, type Logger } from '../../runtime/logging.ts';
import { sameJson } from '../common.ts';
import { fleetFailureOf } from './fleetbranches.ts';
import type { Obj } from './types.ts';

export interface AddonStatusWriterOptions {
  client: Pick<KubeClient, 'applyStatus'>;
  clock: Clock;
  log: Logger;
}

export class AddonStatusWriter {
  private readonly opts: AddonStatusWriterOptions;

  constructor(opts: AddonStatusWriterOptions) {
    this.opts = opts;
  }

  /** The status subresource, only when it differs from what the ClusterAddon holds. */
  async write(
    current: ClusterAddon & Obj,
    result: Pick<ClusterAddonResult, 'status'>,
    signal: AbortSignal,
  ): Promise<void> {
    if (sameJson(result.status, current.status ?? {})) return;
    try {
      await this.opts.client.applyStatus(
        {
          apiVersion: API_VERSION,
          kind: 'ClusterAddon',
          metadata: { name: current.metadata.name, namespace: current.metadata.namespace },
          status: result.status,
        },
        { force: true, signal },
      );
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }

  /**
   * Reading the fleet failed before anything could be reconciled: the ClusterAddon (if it
   * exists) says why in Ready=False, everything else in its status is kept.
   */
  async fleetReadFailed(
    existing: (ClusterAddon & Obj) | undefined,
    err: unknown,
    signal: AbortSignal | undefined,
  ): Promise<void> {
    if (existing === undefined || existing.metadata.deletionTimestamp !== undefined) return;
    const f = fleetFailureOf(err);
    const status = existing.status ?? {};
    const conditions = markNotReady(
      status.conditions,
      {
        reason: f.reason,
        message: `fleet repository unavailable, retrying with back-off: ${f.message}`,
        ...(existing.metadata.generation !== undefined
          ? { observedGeneration: existing.metadata.generation }
          : {}),
      },
      new Date(this.opts.clock.now()),
    );
    if (sameJson(conditions, status.conditions ?? [])) return;
    await this.opts.client
      .applyStatus(
        {
          apiVersion: API_VERSION,
          kind: 'ClusterAddon',
          metadata: { name: existing.metadata.name, namespace: existing.metadata.namespace },
          status: { ...status, conditions },
        },
        { force: true, ...(signal !== undefined ? { signal } : {}) },
      )
      .catch((e: unknown) => {
        if (!isNotFound(e))
          this.opts.log.warn(errorFields(e), 'reporting a fleet failure in the status failed');
      });
  }
}
