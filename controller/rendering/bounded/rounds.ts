// Reconcilers stay pure and synchronous: withBoundedRenders runs one (or the offline renderer)
// with a renderer that answers from renders already done in the pool and notes the ones it lacks;
// those are rendered in the pool and the run is repeated until every render it asks for is known.
// The live controller (controllers/clusteraddon.ts) and `stackflux render` both use it. Go engine
// calls are answered the same way (withBoundedGoEngine), and both together by withPooledRendering.
import { createHash } from 'node:crypto';
import type { GoEngineCall, GoEngineResult } from '../goengine/index.ts';
import type { AddonRenderer, AddonRenderInput, RenderFailure, RenderResult } from '../types.ts';
import type { RenderCache } from './cache.ts';
import type { RenderPool } from './pool.ts';
import { renderKey, slimInput } from './renderkey.ts';
import type { RenderRequestOptions } from './types.ts';

const PENDING: RenderFailure = { ok: false, reason: 'TemplateError', message: 'render pending' };
const MAX_ROUNDS = 16;

/**
 * Runs `run` (a pure reconcile or the offline renderer) with every addon render done in `pool`:
 * each round answers the renders already done and collects the others, which are then rendered in
 * the pool (in parallel); the round whose renders were all known is the result. An error thrown by
 * a round that lacked renders is not the result (the placeholder may have caused it). Calls that
 * pass the same `done` map (e.g. the passes of one reconcile) render each input once. `request`
 * names who asks (the namespace the renders queue in); renders kept in `cache` (across reconciles)
 * are not rendered again.
 */
export async function withBoundedRenders<T>(
  pool: RenderPool,
  run: (render: AddonRenderer) => T,
  done: Map<string, RenderResult> = new Map(),
  request: RenderRequestOptions = {},
  cache?: RenderCache,
): Promise<T> {
  return untilSettled(
    () => {
      const missing = new Map<string, AddonRenderInput>();
      const render: AddonRenderer = (input) => {
        const slim = slimInput(input);
        const key = renderKey(slim);
        const known = done.get(key) ?? cache?.get(key);
        if (known !== undefined) {
          done.set(key, known);
          return known;
        }
        missing.set(key, slim);
        return PENDING;
      };
      return { missing, run: () => run(render) };
    },
    async (missing) => {
      const rendered = await Promise.all(
        [...missing].map(async ([key, slim]) => [key, slim, await pool.render(slim, request)] as const),
      );
      for (const [key, slim, r] of rendered) {
        done.set(key, r);
        cache?.set(key, slim, r);
      }
    },
    'addon renders',
  );
}

/**
 * Runs a round (a pure, synchronous run that records what it lacked in `missing`) until one lacks
 * nothing, answering what each asked for in between. An error thrown by a round that lacked
 * answers is not the result (a placeholder may have caused it).
 */
async function untilSettled<T, C>(
  round: () => { missing: ReadonlyMap<string, C>; run: () => T },
  answer: (missing: ReadonlyMap<string, C>) => Promise<void>,
  what: string,
): Promise<T> {
  for (let i = 0; i < MAX_ROUNDS; i++) {
    const { missing, run } = round();
    let result: T | undefined;
    let error: unknown;
    let failed = false;
    try {
      result = run();
    } catch (err) {
      failed = true;
      error = err;
    }
    if (missing.size === 0) {
      if (failed) throw error;
      return result as T;
    }
    await answer(missing);
  }
  throw new Error(`${what} did not settle after ${MAX_ROUNDS} rounds`);
}

const ENGINE_PENDING: RenderFailure = {
  ok: false,
  reason: 'TemplateError',
  message: 'Go engine call pending',
};

/** A stable key of one Go engine call (binary chart files by content). */
function goEngineCallKey(call: GoEngineCall): string {
  return createHash('sha256')
    .update(
      JSON.stringify(call, (_, v: unknown) => {
        if (v instanceof Uint8Array) return `b64:${Buffer.from(v).toString('base64')}`;
        if (v instanceof Map) return [...v].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
        return v;
      }),
    )
    .digest('hex');
}

/** A Go engine that answers the calls in `done` and collects the others in `missing`. */
export function goEngineMemo(done: ReadonlyMap<string, GoEngineResult | RenderFailure>): {
  engine: (call: GoEngineCall) => GoEngineResult | RenderFailure;
  missing: Map<string, GoEngineCall>;
} {
  const missing = new Map<string, GoEngineCall>();
  const engine = (call: GoEngineCall): GoEngineResult | RenderFailure => {
    const key = goEngineCallKey(call);
    const known = done.get(key);
    if (known !== undefined) return known;
    missing.set(key, call);
    return ENGINE_PENDING;
  };
  return { engine, missing };
}

/** Runs the `missing` calls in `pool` (in parallel) and records their answers in `done`. */
export async function answerGoEngineCalls(
  pool: RenderPool,
  missing: ReadonlyMap<string, GoEngineCall>,
  done: Map<string, GoEngineResult | RenderFailure>,
  request: RenderRequestOptions = {},
): Promise<void> {
  const answered = await Promise.all(
    [...missing].map(async ([key, call]) => [key, await pool.goEngine(call, request)] as const),
  );
  for (const [key, r] of answered) done.set(key, r);
}

/**
 * withBoundedRenders for Go engine calls: runs `run` (pure and synchronous) with every Go engine
 * call answered by `pool` (time budget, output and memory caps), re-running it until every call it
 * makes is known. The live controller and the offline renderer render a csctl cluster-class
 * through these, so both run the same code under the same limits.
 */
export async function withBoundedGoEngine<T>(
  pool: RenderPool,
  run: (engine: (call: GoEngineCall) => GoEngineResult | RenderFailure) => T,
  request: RenderRequestOptions = {},
  done: Map<string, GoEngineResult | RenderFailure> = new Map(),
): Promise<T> {
  return untilSettled(
    () => {
      const { engine, missing } = goEngineMemo(done);
      return { missing, run: () => run(engine) };
    },
    (missing) => answerGoEngineCalls(pool, missing, done, request),
    'Go engine calls',
  );
}

/** Passes before every Go engine call a run makes is answered. */
const MAX_ENGINE_PASSES = 16;

/**
 * Runs `run` (pure and synchronous) with every addon render and every Go engine call answered by
 * `pool`: unknown Go engine calls are answered between passes until a pass knows them all.
 * `settled()` says, inside a pass, whether every Go engine call of it so far was known.
 */
export async function withPooledRendering<T>(
  pool: RenderPool,
  run: (
    render: AddonRenderer,
    engine: (call: GoEngineCall) => GoEngineResult | RenderFailure,
    settled: () => boolean,
  ) => T,
  request: RenderRequestOptions = {},
): Promise<T> {
  const engineDone = new Map<string, GoEngineResult | RenderFailure>();
  for (let pass = 0; ; pass++) {
    const { engine, missing } = goEngineMemo(engineDone);
    const output = await withBoundedRenders(
      pool,
      (render) => run(render, engine, () => missing.size === 0),
      new Map(),
      request,
    );
    if (missing.size === 0) return output;
    if (pass >= MAX_ENGINE_PASSES) throw new Error('Go engine calls did not settle');
    await answerGoEngineCalls(pool, missing, engineDone, request);
  }
}
