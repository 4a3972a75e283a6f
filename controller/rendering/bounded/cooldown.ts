// Cool-down (issue 22): a template that hits a limit `coolDownAfter` times in a row (per namespace,
// addon, the addon's files and the values it renders with) is not rendered again for `coolDownMs`:
// its renders fail at once with reason CoolingDown. So is the template with any values once
// `coolDownAfter` different values in a row hit a limit (a template slow whatever its values would
// otherwise be rendered to the limit K times per Cluster, and a tenant's many Clusters would keep
// the render processes and the CPU busy); one Cluster's hostile values alone cannot cool its
// neighbours down.
import type { AddonRenderInput, RenderFailure, RenderResult } from '../types.ts';
import { addonPlace } from './failures.ts';
import type { RenderPoolOptions, TemplateKeys } from './types.ts';

export const DEFAULT_COOL_DOWN_AFTER = 3;
export const DEFAULT_COOL_DOWN_MS = 5 * 60_000;
/** Templates whose limit hits in a row are remembered. */
const STREAKS_REMEMBERED = 1024;

/** Limit hits in a row of one template, and until when it is not rendered. */
interface Streak {
  hits: number;
  last: string;
  until: number | undefined;
  /** Of a template's streak (any values): the values that hit a limit in a row. */
  values?: Set<string>;
}

/** Limit hits in a row per template (and values), and the templates cooling down. */
export class CoolDowns {
  private readonly coolDownAfter: number;
  private readonly coolDownMs: number;
  private readonly streaks = new Map<string, Streak>();
  private readonly now: () => number;

  /** `now`: the clock a cool-down is timed with. */
  constructor(
    opts: Pick<RenderPoolOptions, 'coolDownAfter' | 'coolDownMs'> = {},
    now: () => number = Date.now,
  ) {
    this.now = now;
    this.coolDownAfter = Math.max(1, opts.coolDownAfter ?? DEFAULT_COOL_DOWN_AFTER);
    this.coolDownMs = opts.coolDownMs ?? DEFAULT_COOL_DOWN_MS;
  }

  /** The failure of a render whose template (with these values, or with any) is cooling down, or undefined. */
  failure(key: TemplateKeys, slim: AddonRenderInput): RenderFailure | undefined {
    return this.coolingDown(key.withValues, slim) ?? this.coolingDown(key.template, slim);
  }

  /**
   * Counts limit hits in a row per template and values, and the different values in a row per
   * template; a render within the limits ends both streaks. `closed`: the pool is shutting down
   * (its refusals are no limit hits).
   */
  noteResult(key: TemplateKeys, result: RenderResult, closed: boolean): void {
    if (result.ok || result.reason !== 'LimitExceeded' || closed) {
      if (result.ok || result.reason !== 'CoolingDown') {
        this.streaks.delete(key.withValues);
        this.streaks.delete(key.template);
      }
      return;
    }
    this.countHit(key.withValues, result.message);
    this.countHit(key.template, result.message, key.withValues);
  }

  /** The failure of a render of a template that is cooling down, or undefined. */
  private coolingDown(key: string, slim: AddonRenderInput): RenderFailure | undefined {
    const streak = this.streaks.get(key);
    if (streak?.until === undefined || this.now() >= streak.until) return undefined;
    return {
      ok: false,
      reason: 'CoolingDown',
      message: `${addonPlace(slim)}: not rendered until ${new Date(streak.until).toISOString()}: its renders hit a limit ${streak.hits} times in a row${streak.values !== undefined ? ' with different values' : ''}, last: ${streak.last}`,
    };
  }

  /** One limit hit on a streak; with `values`, the streak counts different values, not hits. */
  private countHit(key: string, message: string, values?: string): void {
    const streak = this.streaks.get(key) ?? { hits: 0, last: '', until: undefined };
    if (values !== undefined) {
      streak.values = streak.values ?? new Set();
      streak.values.add(values);
      streak.hits = streak.values.size;
    } else streak.hits += 1;
    streak.last = message;
    // A template's streak needs two different values at least: one Cluster's values alone never
    // cool its neighbours down.
    const after = values !== undefined ? Math.max(2, this.coolDownAfter) : this.coolDownAfter;
    if (streak.hits >= after) streak.until = this.now() + this.coolDownMs;
    // Re-inserted: the map stays in order of last hit, and is bounded by dropping the oldest.
    this.streaks.delete(key);
    this.streaks.set(key, streak);
    if (this.streaks.size > STREAKS_REMEMBERED) {
      const oldest = this.streaks.keys().next();
      if (!oldest.done) this.streaks.delete(oldest.value);
    }
  }
}
