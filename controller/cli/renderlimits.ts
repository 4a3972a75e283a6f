// Flags of the addon render limits, shared by `stackflux run` and `stackflux render` (both render
// through the same bounded pool of render processes, rendering/bounded.ts).
import { parseDuration } from '../controllers/duration.ts';
import { checkFixedPoint } from '../offline/output.ts';
import { type RenderOptions, type RenderOutput, renderSnapshot } from '../offline/render.ts';
import type { Snapshot } from '../offline/snapshot.ts';
import { reconcileClusterAddon } from '../reconcilers/clusteraddon.ts';
import type { SyncGoEngine } from '../rendering/clusterclass.ts';
import {
  type AddonRenderer,
  DEFAULT_COOL_DOWN_AFTER,
  DEFAULT_COOL_DOWN_MS,
  DEFAULT_RENDER_LIMITS,
  formatBytes,
  formatMs,
  RenderPool,
  type RenderPoolOptions,
  withPooledRendering,
} from '../rendering/index.ts';
import { type Command, type FlagValues, UsageError } from './command.ts';

export const DEFAULT_RENDER_WORKERS = 2;

export const renderLimitFlags: Command['flags'] = {
  'render-timeout': {
    type: 'string',
    description: "time budget of one addon's render; a render that overruns is stopped (RenderFailed)",
    default: formatMs(DEFAULT_RENDER_LIMITS.timeoutMs),
  },
  'render-max-output': {
    type: 'string',
    description: 'most bytes one addon may render to, e.g. 8Mi, 512Ki or 1000000 (RenderFailed beyond)',
    default: formatBytes(DEFAULT_RENDER_LIMITS.maxOutputBytes).replace(' MiB', 'Mi'),
  },
  'render-max-memory': {
    type: 'string',
    description: 'heap of one render process in MiB; a render that needs more is stopped (RenderFailed)',
    default: String(DEFAULT_RENDER_LIMITS.maxMemoryMb),
  },
  'render-workers': {
    type: 'string',
    description:
      'processes rendering addons, at most (one serves quick renders; another starts when a slow or stuck render holds it; idle ones stop)',
    default: String(DEFAULT_RENDER_WORKERS),
  },
  'render-cooldown-after': {
    type: 'string',
    description:
      "limit hits in a row after which an addon's template (per namespace) is not rendered for --render-cooldown (RenderCoolingDown)",
    default: String(DEFAULT_COOL_DOWN_AFTER),
  },
  'render-cooldown': {
    type: 'string',
    description: 'how long a template that keeps hitting render limits is not rendered',
    default: formatMs(DEFAULT_COOL_DOWN_MS),
  },
};

const BYTE_UNITS: Record<string, number> = { '': 1, Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3 };

/** "8Mi" → 8388608; undefined when it is not a positive whole number of bytes. */
export function parseBytes(text: string): number | undefined {
  const m = /^(\d+)(Ki|Mi|Gi)?$/.exec(text.trim());
  if (!m) return undefined;
  const n = Number(m[1]) * (BYTE_UNITS[m[2] ?? ''] ?? 1);
  return Number.isSafeInteger(n) && n > 0 ? n : undefined;
}

function str(v: string | boolean | undefined): string {
  return typeof v === 'string' ? v : '';
}

/** The render pool options of the flags; usage errors name the flag. */
export function renderPoolOptions(flags: FlagValues): RenderPoolOptions {
  const options: RenderPoolOptions = {};
  const timeout = str(flags['render-timeout']);
  if (timeout !== '') {
    const ms = parseDuration(timeout);
    if (ms === undefined) throw new UsageError(`--render-timeout "${timeout}" is not a duration like 5s`);
    options.timeoutMs = ms;
  }
  const output = str(flags['render-max-output']);
  if (output !== '') {
    const bytes = parseBytes(output);
    if (bytes === undefined) throw new UsageError(`--render-max-output "${output}" is not a size like 8Mi`);
    options.maxOutputBytes = bytes;
  }
  const memory = str(flags['render-max-memory']);
  if (memory !== '') {
    const mb = Number(memory);
    if (!Number.isInteger(mb) || mb < 16)
      throw new UsageError(`--render-max-memory must be a whole number of MiB, at least 16, got "${memory}"`);
    options.maxMemoryMb = mb;
  }
  const workers = str(flags['render-workers']);
  if (workers !== '') {
    const n = Number(workers);
    if (!Number.isInteger(n) || n < 1)
      throw new UsageError(`--render-workers must be a positive integer, got "${workers}"`);
    options.workers = n;
  }
  const after = str(flags['render-cooldown-after']);
  if (after !== '') {
    const n = Number(after);
    if (!Number.isInteger(n) || n < 1)
      throw new UsageError(`--render-cooldown-after must be a positive integer, got "${after}"`);
    options.coolDownAfter = n;
  }
  const coolDown = str(flags['render-cooldown']);
  if (coolDown !== '') {
    const ms = parseDuration(coolDown);
    if (ms === undefined) throw new UsageError(`--render-cooldown "${coolDown}" is not a duration like 5m`);
    options.coolDownMs = ms;
  }
  return options;
}

/**
 * Runs `run` (pure and synchronous) with every addon render and every Go engine call (a csctl
 * cluster-class) answered by a bounded pool of render processes, as the controller renders
 * (rendering/bounded.ts withPooledRendering, in a pool of its own).
 */
export async function withBoundedRendering<T>(
  limits: RenderPoolOptions,
  run: (render: AddonRenderer, engine: SyncGoEngine, settled: () => boolean) => T,
): Promise<T> {
  const pool = new RenderPool(limits);
  try {
    return await withPooledRendering(pool, run);
  } finally {
    await pool.close();
  }
}

/**
 * renderSnapshot (and the fixed-point check when asked) with every addon render in a bounded
 * worker pool, as the controller renders.
 */
export async function renderSnapshotBounded(
  snapshot: Snapshot,
  options: RenderOptions,
  limits: RenderPoolOptions,
  checkFixed = false,
): Promise<RenderOutput> {
  return withBoundedRendering(limits, (render, engine, settled) => {
    const bounded: RenderOptions = {
      ...options,
      goEngine: engine,
      reconcilers: {
        ...options.reconcilers,
        clusterAddon: (input) =>
          (options.reconcilers?.clusterAddon ?? reconcileClusterAddon)({ ...input, render }),
      },
    };
    const out = renderSnapshot(snapshot, bounded);
    if (checkFixed && settled()) checkFixedPoint(snapshot, out, bounded);
    return out;
  });
}
