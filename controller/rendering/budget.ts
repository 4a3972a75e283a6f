// The output cap of one addon's render (--render-max-output) over everything the render returns:
// the files it writes, the merged values and a Helm addon's rendered values count together; the
// objects parsed from the files (YAML aliases repeat a scalar without repeating its text) are
// capped on their own, with the same limit. Sizes are checked
// without building the text they measure: a template's output is a rope of concatenated pieces
// whose length is known at once, while measuring its bytes (or serializing a value) would first
// allocate all of it, which is how a huge rendered scalar took the controller's memory.
import { formatBytes } from './limits.ts';
import type { RenderFailure } from './types.ts';

export class OutputBudget {
  readonly max: number;
  private used = 0;

  constructor(max: number) {
    this.max = max;
  }

  /** Bytes used so far. */
  get bytes(): number {
    return this.used;
  }

  private over(label: string): RenderFailure {
    return {
      ok: false,
      reason: 'LimitExceeded',
      message: `${label}: the addon's output exceeds the limit of ${formatBytes(this.max)} (--render-max-output)`,
    };
  }

  /** Checks that `text` fits what is left without counting it; a failure naming `label` if not. */
  probeText(label: string, text: string): RenderFailure | undefined {
    // UTF-8 has at least one byte per UTF-16 unit: the length rejects a huge text unflattened.
    if (text.length > this.max - this.used) return this.over(label);
    if (this.used + Buffer.byteLength(text, 'utf8') > this.max) return this.over(label);
    return undefined;
  }

  /** Counts `text` (UTF-8 bytes); a failure naming `label` when the budget is exceeded. */
  addText(label: string, text: string): RenderFailure | undefined {
    const failure = this.probeText(label, text);
    if (failure !== undefined) return failure;
    this.used += Buffer.byteLength(text, 'utf8');
    return undefined;
  }

  /** Counts about the serialized size of `value`; a failure naming `label` when it does not fit. */
  addValue(label: string, value: unknown): RenderFailure | undefined {
    const size = serializedSizeWithin(value, this.max - this.used);
    if (size === undefined) return this.over(label);
    this.used += size;
    return undefined;
  }
}

/**
 * About the bytes `value` takes serialized (JSON-like: strings by their length, each shared object
 * once, as a structured clone sends it), or undefined as soon as that exceeds `limit`. Walks without
 * recursion (YAML may nest deeply) and never serializes.
 */
export function serializedSizeWithin(value: unknown, limit: number): number | undefined {
  let size = 0;
  const seen = new Set<object>();
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') size += v.length + 2;
    else if (typeof v === 'object' && v !== null) {
      if (seen.has(v)) continue;
      seen.add(v);
      size += 2;
      if (Array.isArray(v)) {
        for (const item of v) {
          size += 1;
          stack.push(item);
        }
      } else {
        for (const [key, item] of Object.entries(v)) {
          size += key.length + 4;
          stack.push(item);
        }
      }
    } else size += 8;
    if (size > limit) return undefined;
  }
  return size;
}
