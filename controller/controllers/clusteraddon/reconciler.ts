// One reconcile of a Cluster's addons, as named phases over the collaborators (held as fields, as
// Flux's kustomize-controller holds its parts in the reconciler struct): gather the inputs, decide
// (the pure reconcile with its renders), apply the ClusterAddon, patches and Flux objects in
// passes, pass a requested reconcile on to the Flux sources, write the status, hand the branch
// change to the fleet publisher, and take the finalizer off last.
import type { ClusterAddon } from '../../api/clusteraddon.ts';
import type { ClusterStack } from '../../api/clusterstack.ts';
import type { ClusterAddonInput, ClusterAddonResult } from '../../reconcilers/clusteraddon.ts';
import type { KubeClient } from '../../runtime/client.ts';
import type { ReconcileContext, ReconcileResult } from '../../runtime/controller.ts';
import type { Recorder } from '../../runtime/events.ts';
import { requestFluxSourcesFetch } from '../reconcilerequest.ts';
import type { AddonStatusWriter } from './addonstatus.ts';
import type { FleetPublisher } from './fleetpublisher.ts';
import type { FluxObjectApplier } from './fluxapplier.ts';
import { finalizersChange, renderWarning, statusWaitsForPush } from './gates.ts';
import type { AddonInputGatherer } from './inputs.ts';
import type { RefWaits } from './refobjects.ts';
import type { Obj } from './types.ts';

export interface ClusterAddonReconcilerParts {
  inputs: Pick<AddonInputGatherer, 'gather'>;
  /** The reconcile of one key with its renders (RenderScheduler.decider). */
  decider: (namespace: string) => (input: ClusterAddonInput) => Promise<ClusterAddonResult | undefined>;
  applier: Pick<FluxObjectApplier, 'applyPasses' | 'setFinalizers'>;
  status: Pick<AddonStatusWriter, 'write'>;
  publisher: Pick<FleetPublisher, 'submit' | 'forget' | 'writeFailed'>;
  refWaits: Pick<RefWaits, 'next' | 'clear'>;
  events: Pick<Recorder, 'event'>;
  /** Patches the Flux sources of a requested reconcile. */
  client: KubeClient;
}

export class ClusterAddonReconciler {
  private readonly parts: ClusterAddonReconcilerParts;

  constructor(parts: ClusterAddonReconcilerParts) {
    this.parts = parts;
  }

  async reconcile(key: string, ctx: ReconcileContext): Promise<ReconcileResult | undefined> {
    const { inputs, applier, status, publisher, refWaits, events, client } = this.parts;
    const namespace = ctx.namespace ?? '';
    const name = ctx.name;
    const gathered = await inputs.gather(key, namespace, name, ctx);
    if (gathered === undefined) {
      publisher.forget(key);
      refWaits.clear(key);
      return undefined;
    }
    const { deleting, fetchError, refsPending } = gathered;
    // Addon renders run in the worker pool; the passes below render each input once.
    const decide = this.parts.decider(namespace);
    const first = await decide(gathered.input);
    if (first === undefined) return undefined;

    // 1–3. The ClusterAddon (with its finalizer), deletion patches, the Flux objects, in passes.
    const { current, input, result } = await applier.applyPasses(
      namespace,
      name,
      deleting,
      { input: gathered.input, result: first },
      decide,
      ctx.signal,
    );
    const have = current?.metadata.finalizers ?? [];

    // A requested reconcile is passed on to the Flux sources of its Kustomizations (Flux fetches now).
    if (current !== undefined) {
      await requestFluxSourcesFetch(client, current, input.kustomizations, ctx.log, ctx.signal);
    }

    // 4. Status, unless it waits for the branch's push.
    if (current !== undefined && !statusWaitsForPush(result, publisher.writeFailed(key))) {
      await status.write(current, result, ctx.signal);
    }
    const warning = renderWarning(result.status);
    if (current !== undefined && warning !== undefined) {
      void events.event(current, 'Warning', warning.reason, 'Render', warning.note);
    }

    // 5. A branch change joins the batch, unless the fleet host refused this very content and its
    // back-off has not ended.
    const holdMs = publisher.submit(
      key,
      result.branch,
      input.clusterStack as (ClusterStack & Obj) | undefined,
    );

    // 6. The finalizer comes off last, once the Cluster's branch is known to be gone.
    if (current !== undefined && finalizersChange(have, result.finalizers)) {
      await applier.setFinalizers(current as ClusterAddon & Obj, result.finalizers, ctx.signal);
    }

    if (fetchError !== undefined) throw fetchError;
    // A missing ref waits with exponential backoff; its informer's event requeues at once anyway.
    if (refsPending) return { requeueAfter: refWaits.next(key) };
    refWaits.clear(key);
    return holdMs > 0 ? { requeueAfter: holdMs } : undefined;
  }
}
