// One copy of each often-repeated string of the cached objects. JSON.parse allocates every string
// value anew, so 10,000 Clusters hold 10,000 copies of "True", "cluster.x-k8s.io/v1beta2", the
// namespace, each condition type and reason, the same timestamps, label values… (about a fifth of
// an informer's heap, `npm run bench -- heap`). Replacing a string by an equal one changes no value
// a reader can see (strings compare by value in JavaScript); it only lets the copies be collected.
//
// The table is bounded, so strings of deleted objects or values seen once do not stay: two
// generations of at most `generationSize` strings each; a full current generation becomes the
// previous one (the older is dropped), and a string found in the previous one moves to the current.
// Strings that keep recurring therefore stay; unique ones pass through.

/** Values unique to one object and version: never shared, so never worth a table entry. */
const UNIQUE_KEYS = new Set(['uid', 'resourceVersion']);

export class StringTable {
  private current = new Map<string, string>();
  private previous = new Map<string, string>();
  private readonly generationSize: number;
  private readonly maxLength: number;

  /** generationSize: strings per generation; maxLength: longer strings are not shared (messages). */
  constructor(opts: { generationSize?: number; maxLength?: number } = {}) {
    this.generationSize = opts.generationSize ?? 8192;
    this.maxLength = opts.maxLength ?? 128;
  }

  /** The table's copy of s (s itself the first time it is seen). */
  intern(s: string): string {
    if (s.length === 0 || s.length > this.maxLength) return s;
    const known = this.current.get(s);
    if (known !== undefined) return known;
    const shared = this.previous.get(s) ?? s;
    if (this.current.size >= this.generationSize) {
      this.previous = this.current;
      this.current = new Map();
    }
    this.current.set(shared, shared);
    return shared;
  }

  /** Whether the table holds s. */
  has(s: string): boolean {
    return this.current.has(s) || this.previous.has(s);
  }

  /** Strings held (both generations): at most 2 × generationSize. */
  size(): number {
    return this.current.size + this.previous.size;
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Replaces, IN PLACE, every string value of a JSON value (objects and arrays, any depth) by the
 * table's copy; keys are left alone (V8 already keeps one copy of property names), as are uid and
 * resourceVersion. For objects only this process holds (a freshly parsed API answer); frozen parts
 * are skipped. Returns value.
 */
export function internStrings<T>(value: T, table: StringTable): T {
  if (Array.isArray(value)) {
    if (Object.isFrozen(value)) return value;
    for (let i = 0; i < value.length; i++) {
      const v: unknown = value[i];
      if (typeof v === 'string') value[i] = table.intern(v);
      else if (typeof v === 'object' && v !== null) internStrings(v, table);
    }
    return value;
  }
  if (!isRecord(value) || Object.isFrozen(value)) return value;
  const record: Record<string, unknown> = value;
  for (const key of Object.keys(record)) {
    const v = record[key];
    if (typeof v === 'string') {
      if (!UNIQUE_KEYS.has(key)) record[key] = table.intern(v);
    } else if (typeof v === 'object' && v !== null) {
      internStrings(v, table);
    }
  }
  return value;
}

/** The table every informer of this process shares (the same namespace, labels, kinds across kinds). */
export const sharedStrings = new StringTable();
