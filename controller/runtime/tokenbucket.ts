// Token buckets: one overall and one per key (a caller's address), so one caller cannot spend what
// the others need, and all callers together cannot exceed what the server may spend. Pure apart
// from the clock it is given.

export interface RateLimit {
  /** Tokens added per second. */
  ratePerSecond: number;
  /** Most tokens held (the burst allowed after a quiet time). */
  burst: number;
}

interface Bucket {
  tokens: number;
  at: number;
}

/** Callers remembered at most; the longest unseen is forgotten first (it starts full again). */
export const MAX_KEYS = 4096;

function refill(b: Bucket, limit: RateLimit, now: number): void {
  b.tokens = Math.min(limit.burst, b.tokens + ((now - b.at) / 1000) * limit.ratePerSecond);
  b.at = now;
}

export class TokenBuckets {
  private readonly overall: Bucket;
  private readonly byKey = new Map<string, Bucket>();
  private readonly limits: { overall: RateLimit; perKey: RateLimit };
  private readonly now: () => number;

  constructor(limits: { overall: RateLimit; perKey: RateLimit }, now: () => number = Date.now) {
    this.limits = limits;
    this.now = now;
    this.overall = { tokens: limits.overall.burst, at: now() };
  }

  /** Takes a token for `key` and one overall; else which bucket is empty (nothing taken). */
  take(key: string): 'ok' | 'key' | 'overall' {
    const now = this.now();
    let mine = this.byKey.get(key);
    if (mine === undefined) {
      mine = { tokens: this.limits.perKey.burst, at: now };
      if (this.byKey.size >= MAX_KEYS) {
        const oldest = this.byKey.keys().next().value;
        if (oldest !== undefined) this.byKey.delete(oldest);
      }
    }
    // Re-inserted: the map's order is the order callers were last seen.
    this.byKey.delete(key);
    this.byKey.set(key, mine);
    refill(mine, this.limits.perKey, now);
    refill(this.overall, this.limits.overall, now);
    if (mine.tokens < 1) return 'key';
    if (this.overall.tokens < 1) return 'overall';
    mine.tokens -= 1;
    this.overall.tokens -= 1;
    return 'ok';
  }
}
