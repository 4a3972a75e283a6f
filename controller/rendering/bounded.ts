// Bounded rendering (issue 11, defect 3; issue 22): addon renders run in a small pool of child
// processes, each with a time budget and a heap cap. A render that overruns is stopped by killing
// its process (a fresh one takes its place), so a hostile template costs one process for at most
// the budget and never blocks the event loop that renews the Lease and answers /healthz; other
// renders go on in the other processes. The result is a RenderFailure with reason LimitExceeded
// naming the file being rendered, the limit and its flag.
//
// The parts, in ./bounded/ (each imports only those below it):
//   rounds.ts     reconcilers stay pure: a run is repeated until the pool has answered every render
//   cache.ts      csctl renders kept across reconciles
//   pool.ts       RenderPool: queues, spare processes, the process reserved for waiting tenants
//   slots.ts      one render process at a time: its time budget, heap cap and idle stop
//   process.ts    forking a render process (why processes, not worker threads)
//   fairness.ts   renders queued per namespace, taken round-robin
//   cooldown.ts   templates that keep hitting limits are not rendered for a while
//   renderkey.ts  the identity of a render and of a template
//   failures.ts   how the pool's failures read
//   types.ts      the options and types the parts share
export { RENDER_CACHE_BYTES, RenderCache } from './bounded/cache.ts';
export { DEFAULT_COOL_DOWN_AFTER, DEFAULT_COOL_DOWN_MS } from './bounded/cooldown.ts';
export { RenderPool } from './bounded/pool.ts';
export { RENDER_NICENESS } from './bounded/process.ts';
export { renderKey, slimInput } from './bounded/renderkey.ts';
export {
  answerGoEngineCalls,
  goEngineMemo,
  withBoundedGoEngine,
  withBoundedRenders,
  withPooledRendering,
} from './bounded/rounds.ts';
export { GO_ENGINE_BASE_MB } from './bounded/slots.ts';
export type { RenderPoolOptions, RenderRequestOptions } from './bounded/types.ts';
