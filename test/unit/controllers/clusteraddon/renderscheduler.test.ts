// The renders of one reconcile: queued in the pool under the Cluster's namespace, each render done
// once however often the reconcile runs, and renders the cache holds not rendered again.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RenderScheduler } from '../../../../controller/controllers/clusteraddon/renderscheduler.ts';
import type {
  ClusterAddonInput,
  ClusterAddonResult,
} from '../../../../controller/reconcilers/clusteraddon.ts';
import type { RenderCache, RenderPool, RenderResult } from '../../../../controller/rendering/index.ts';
import { addonInput, configMap } from '../../rendering/fixtures.ts';

const RENDERED: RenderResult = { ok: true, files: new Map([['cm.yaml', 'x']]), objects: [] } as never;

function fakePool() {
  const renders: string[] = [];
  const pool = {
    render: async (_input: unknown, o: { namespace?: string } = {}) => {
      renders.push(o.namespace ?? '');
      return RENDERED;
    },
    close: async () => {},
  };
  return { renders, pool: pool as unknown as RenderPool };
}

/** A reconcile that renders one addon and reports whether it got the render. */
const reconcile = (i: ClusterAddonInput): ClusterAddonResult | undefined => {
  const r = i.render?.(addonInput({ 'cm.yaml.hbs': configMap('  a: b') }));
  return {
    finalizers: [],
    status: { rendered: r?.ok === true } as never,
    deleteKustomizations: [],
    patches: [],
  };
};

const input = {} as ClusterAddonInput;

describe('RenderScheduler', () => {
  it('renders in the pool under the namespace, once per reconcile however often it decides', async () => {
    const { renders, pool } = fakePool();
    const s = new RenderScheduler({ pool, reconcile });
    const decide = s.decider('tenant');
    assert.deepEqual((await decide(input))?.status, { rendered: true });
    assert.deepEqual((await decide(input))?.status, { rendered: true });
    assert.deepEqual(renders, ['tenant']);
    await s.decider('tenant')(input);
    assert.deepEqual(renders, ['tenant', 'tenant'], 'a new reconcile renders again (not a csctl render)');
  });

  it('takes a render the cache holds without the pool', async () => {
    const { renders, pool } = fakePool();
    const cache = { get: () => RENDERED, set: () => {} } as unknown as RenderCache;
    const s = new RenderScheduler({ pool, cache, reconcile });
    assert.deepEqual((await s.decider('tenant')(input))?.status, { rendered: true });
    assert.deepEqual(renders, []);
  });
});
