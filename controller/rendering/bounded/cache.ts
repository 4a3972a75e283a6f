// Addon renders kept across reconciles (RenderCache), by render identity (./renderkey.ts).
import { createHash } from 'node:crypto';
import { type AddonRenderInput, isCsctlAddonInput, type RenderResult } from '../types.ts';

/**
 * Bytes of csctl render output a RenderCache keeps (default): its files' text as held in memory
 * (UTF-16); their parsed objects take about as much again.
 */
export const RENDER_CACHE_BYTES = 32 * 2 ** 20;

/**
 * Successful csctl addon renders kept across reconciles, by render identity (renderKey), least
 * recently used dropped first, bounded by the size of their output. A csctl render is Helm's engine
 * in a render process (milliseconds of CPU each, against well under one for a native addon), and a
 * Cluster is reconciled several times while nothing it renders from changes: in a fan-out again
 * once its fleet batch is pushed, and on the watch events of its own writes. Renders are pure, so
 * an equal key renders equally; failures are not kept (a limit hit depends on the moment). Native
 * renders are not kept: they cost less than keeping them would.
 */
export class RenderCache {
  /** Renders answered from the cache, since start. */
  hits = 0;
  private bytes = 0;
  private readonly entries = new Map<string, { result: RenderResult; bytes: number }>();
  private readonly maxBytes: number;

  constructor(maxBytes = RENDER_CACHE_BYTES) {
    this.maxBytes = maxBytes;
  }

  get size(): number {
    return this.entries.size;
  }

  /** The kept result of the render with this key (renderKey of its slim input), or undefined. */
  get(key: string): RenderResult | undefined {
    const id = cacheId(key);
    const entry = this.entries.get(id);
    if (entry === undefined) return undefined;
    this.entries.delete(id);
    this.entries.set(id, entry);
    this.hits += 1;
    return entry.result;
  }

  /** Keeps a successful csctl render's result; others, and one larger than the whole cache, are not kept. */
  set(key: string, slim: AddonRenderInput, result: RenderResult): void {
    if (!result.ok || !isCsctlAddonInput(slim)) return;
    let bytes = 0;
    for (const [path, text] of result.files) bytes += 2 * (path.length + text.length);
    if (bytes > this.maxBytes) return;
    const id = cacheId(key);
    const previous = this.entries.get(id);
    if (previous !== undefined) {
      this.entries.delete(id);
      this.bytes -= previous.bytes;
    }
    this.entries.set(id, { result, bytes });
    this.bytes += bytes;
    for (const [oldest, entry] of this.entries) {
      if (this.bytes <= this.maxBytes) break;
      this.entries.delete(oldest);
      this.bytes -= entry.bytes;
    }
  }
}

/** A render key as a short id: the key holds the addon's files and the Cluster. */
function cacheId(key: string): string {
  return createHash('sha256').update(key).digest('base64');
}
