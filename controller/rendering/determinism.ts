// The Go engine's clock and randomness, fixed per render (issue 31, F4). Sprig gives templates
// `now`, `uuidv4`, `randAlpha`, `genCA`, `genPrivateKey`, … A template that reads them renders
// differently every time, so no preview could show what rolls out (a time bomb: "after this date,
// add a ClusterRoleBinding"). The engine's WASI clock (CLOCK_REALTIME) and random source
// (random_get: crypto/rand, so every sprig function above) are answered per render from:
// - time: the release's creation time — the same for the preview and the live render; a
//   certificate made with genCA is valid from that time, not from the render's;
// - randomness: a stream seeded with HMAC-SHA256(key, release, commit, Cluster uid, addon). The key
//   is the installation's, so generated keys are not predictable from public inputs. It lives in
//   the management cluster (issue 32): the Secret `<name>-render-seed` in the controller's
//   namespace, created on the first start (controllers/renderseed.ts), so a restart, a new replica
//   or a leader change renders the same certificates and commits nothing. Deleting the Secret
//   rotates every generated value at the next render; a new release (or commit) seeds anew, so its
//   certificates are new, as the cluster-stack-operator re-renders per release. The ClusterAddon and
//   impact controllers of one process share the key; `stackflux preview` and `diff` read it from the
//   Secret when they may; `stackflux render` takes it from --render-seed-key-file. A render without
//   a key seeds with its process's own (its random values differ from any other process's).
// Not fixed: sprig's math/rand functions (randInt, shuffle) draw from the Go runtime's generator,
// seeded once per engine instance; a render using them differs from its preview and is held by the
// digest check (reconcilers/approvedrender.ts).
import { createHash, createHmac, randomBytes } from 'node:crypto';

/** What a render's Go engine calls read as the time and as random bytes. */
export interface FixedRender {
  /** Hex seed of the random stream. */
  seed: string;
  /** RFC 3339 time the engine's wall clock reads. */
  time: string;
}

/** The time a release's templates see when the release has no creation time (a CLI preview). */
export const EPOCH = '1970-01-01T00:00:00Z';

/** A render seed key as stored (64 hex digits, surrounding white space ignored), lower-case; else undefined. */
export function parseRenderSeedKey(text: string): string | undefined {
  const key = text.trim();
  return /^[0-9a-fA-F]{64}$/.test(key) ? key.toLowerCase() : undefined;
}

/** A new random render seed key (32 bytes, hex). */
export function newRenderSeedKey(): string {
  return randomBytes(32).toString('hex');
}

/** A process's own key, for a render without an installation key (the CLI). */
let processKey: string | undefined;
function ownKey(): string {
  processKey ??= newRenderSeedKey();
  return processKey;
}

/** The fixed clock and seed of one addon's render for one Cluster at one release. */
export function fixedRender(parts: {
  key: string | undefined;
  release: string;
  commit: string;
  clusterUid: string;
  addon: string;
  time: string | undefined;
}): FixedRender {
  const seed = createHmac('sha256', Buffer.from(parts.key ?? ownKey(), 'hex'))
    .update([parts.release, parts.commit, parts.clusterUid, parts.addon].join('\u0000'))
    .digest('hex');
  return { seed, time: parts.time ?? EPOCH };
}

/** A deterministic byte stream: SHA-256 of the seed and a block counter. */
export class SeedStream {
  private readonly seed: Buffer;
  private counter = 0n;
  private block = Buffer.alloc(0);
  private at = 0;

  constructor(seedHex: string) {
    this.seed = Buffer.from(seedHex, 'hex');
  }

  fill(out: Uint8Array): void {
    for (let i = 0; i < out.length; i++) {
      if (this.at >= this.block.length) {
        const n = Buffer.alloc(8);
        n.writeBigUInt64BE(this.counter++);
        this.block = createHash('sha256').update(this.seed).update(n).digest();
        this.at = 0;
      }
      out[i] = this.block[this.at++] ?? 0;
    }
  }
}

/** Nanoseconds since the epoch of an RFC 3339 time (the epoch when it does not parse). */
export function timeNanos(time: string): bigint {
  const ms = Date.parse(time);
  return Number.isFinite(ms) ? BigInt(ms) * 1_000_000n : 0n;
}

type WasiFn = (...args: never[]) => number;
const CLOCK_REALTIME = 0;
const WASI_SUCCESS = 0;

/**
 * WASI preview1 imports whose random_get and realtime clock_time_get answer from `current()` while
 * it is set (one engine call), else as `base` does. `memory()` is the instance's linear memory.
 */
export function fixedWasiImports(
  base: Record<string, WasiFn>,
  memory: () => { buffer: ArrayBuffer },
  current: () => { stream: SeedStream; timeNs: bigint } | undefined,
): Record<string, WasiFn> {
  const randomGet = base.random_get as unknown as (buf: number, len: number) => number;
  const clockTimeGet = base.clock_time_get as unknown as (
    id: number,
    precision: bigint,
    out: number,
  ) => number;
  return {
    ...base,
    random_get: ((buf: number, len: number) => {
      const fixed = current();
      if (fixed === undefined) return randomGet(buf, len);
      fixed.stream.fill(new Uint8Array(memory().buffer, buf, len));
      return WASI_SUCCESS;
    }) as WasiFn,
    clock_time_get: ((id: number, precision: bigint, out: number) => {
      const fixed = current();
      if (fixed === undefined || id !== CLOCK_REALTIME) return clockTimeGet(id, precision, out);
      new DataView(memory().buffer).setBigUint64(out, fixed.timeNs, true);
      return WASI_SUCCESS;
    }) as WasiFn,
  };
}
