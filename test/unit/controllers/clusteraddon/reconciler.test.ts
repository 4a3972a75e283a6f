// The reconcile's phases over fakes of its collaborators: their order, the status held back while a
// change waits for its push, the Warning of a failed render, the finalizer set last, and the requeue.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  ClusterAddonReconciler,
  type ClusterAddonReconcilerParts,
} from '../../../../controller/controllers/clusteraddon/reconciler.ts';
import type { ClusterAddonResult } from '../../../../controller/reconcilers/clusteraddon.ts';
import type { KubeObject } from '../../../../controller/runtime/client.ts';
import { context, recordingEvents } from './fakes.ts';

const FINALIZER = 'stackflux.io/fleet-cleanup';
const current = { metadata: { name: 'a', namespace: 'team', finalizers: [FINALIZER] } } as KubeObject;

function parts(o: {
  gathered?: 'none' | { fetchError?: unknown; refsPending?: boolean };
  result?: Partial<ClusterAddonResult>;
  writeFailed?: boolean;
  holdMs?: number;
}) {
  const log: string[] = [];
  const { events, recorder } = recordingEvents();
  const result: ClusterAddonResult = {
    finalizers: [FINALIZER],
    status: {} as never,
    deleteKustomizations: [],
    patches: [],
    ...o.result,
  };
  const p: ClusterAddonReconcilerParts = {
    inputs: {
      gather: async () => {
        log.push('gather');
        if (o.gathered === 'none') return undefined;
        return {
          input: { kustomizations: [], clusterAddon: current } as never,
          deleting: false,
          fetchError: o.gathered?.fetchError,
          refsPending: o.gathered?.refsPending ?? false,
        };
      },
    },
    decider: (ns) => async () => {
      log.push(`decide ${ns}`);
      return result;
    },
    applier: {
      applyPasses: async (_ns, _n, _d, first) => {
        log.push('applyPasses');
        return { current: current as never, input: first.input, result: first.result };
      },
      setFinalizers: async (_c, f) => {
        log.push(`setFinalizers ${f.join()}`);
        return undefined;
      },
    },
    status: {
      write: async () => {
        log.push('status');
      },
    },
    publisher: {
      submit: (key, update) => {
        log.push(`submit ${key} ${update !== undefined}`);
        return o.holdMs ?? 0;
      },
      forget: (key) => log.push(`forget ${key}`),
      writeFailed: () => o.writeFailed ?? false,
    },
    refWaits: {
      next: () => 4_000,
      clear: (key) => log.push(`clearRefWait ${key}`),
    },
    events: recorder,
    client: {} as never,
  };
  return { r: new ClusterAddonReconciler(p), log, events };
}

describe('ClusterAddonReconciler', () => {
  it('a Cluster with nothing left: its fleet state and ref wait are forgotten', async () => {
    const { r, log } = parts({ gathered: 'none' });
    assert.equal(await r.reconcile('team/a', context('team/a')), undefined);
    assert.deepEqual(log, ['gather', 'forget team/a', 'clearRefWait team/a']);
  });

  it('gathers, decides in the namespace, applies, writes the status, submits the change, sets finalizers last', async () => {
    const { r, log } = parts({ result: { finalizers: [] } });
    assert.equal(await r.reconcile('team/a', context('team/a')), undefined);
    assert.deepEqual(log, [
      'gather',
      'decide team',
      'applyPasses',
      'status',
      'submit team/a false',
      'setFinalizers ',
      'clearRefWait team/a',
    ]);
  });

  it('a branch change waiting for its push holds the status back, unless its last write failed', async () => {
    const branch = { branch: {} as never };
    const waiting = parts({ result: branch });
    await waiting.r.reconcile('team/a', context('team/a'));
    assert.ok(!waiting.log.includes('status'));
    assert.ok(waiting.log.includes('submit team/a true'));
    const failed = parts({ result: branch, writeFailed: true });
    await failed.r.reconcile('team/a', context('team/a'));
    assert.ok(failed.log.includes('status'));
  });

  it('a render failure is a Warning Event on the ClusterAddon', async () => {
    const { r, events } = parts({
      result: {
        status: {
          conditions: [{ type: 'Ready', status: 'False', reason: 'RenderFailed', message: 'bad' }],
        } as never,
      },
    });
    await r.reconcile('team/a', context('team/a'));
    assert.deepEqual(
      events.map((e) => [e.type, e.reason, e.note]),
      [['Warning', 'RenderFailed', 'bad']],
    );
  });

  it('requeues: a tree fetch error is thrown after the writes; refs pending back off; a refused branch waits its hold', async () => {
    const fetch = parts({ gathered: { fetchError: new Error('tree') } });
    await assert.rejects(fetch.r.reconcile('team/a', context('team/a')), /tree/);
    assert.ok(fetch.log.includes('submit team/a false'));
    const refs = parts({ gathered: { refsPending: true } });
    assert.deepEqual(await refs.r.reconcile('team/a', context('team/a')), { requeueAfter: 4_000 });
    const held = parts({ holdMs: 1_500 });
    assert.deepEqual(await held.r.reconcile('team/a', context('team/a')), { requeueAfter: 1_500 });
  });
});
