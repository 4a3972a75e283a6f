// Issue 31, F4: the Go engine's clock and randomness fixed per render (rendering/determinism.ts),
// the pure parts: the seed, the stream, and the WASI imports that answer from them during a call.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  fixedRender,
  fixedWasiImports,
  newRenderSeedKey,
  parseRenderSeedKey,
  SeedStream,
  timeNanos,
} from '../../../controller/rendering/determinism.ts';

const KEY = 'ab'.repeat(32);
const parts = {
  key: KEY,
  release: 'docker-ferrol-1-30-v2',
  commit: 'c2',
  clusterUid: 'uid-1',
  addon: 'cni',
  time: '2026-11-01T00:00:00Z',
};

function bytes(seed: string, n: number, chunks = 1): Buffer {
  const s = new SeedStream(seed);
  const out = Buffer.alloc(n);
  const size = Math.ceil(n / chunks);
  for (let at = 0; at < n; at += size) s.fill(out.subarray(at, Math.min(n, at + size)));
  return out;
}

describe('fixed render seeds', () => {
  it('the same release, Cluster and addon give the same seed and time; any other part another seed', () => {
    const a = fixedRender(parts);
    assert.deepEqual(fixedRender(parts), a);
    assert.equal(a.time, '2026-11-01T00:00:00Z');
    for (const k of ['release', 'commit', 'clusterUid', 'addon'] as const)
      assert.notEqual(fixedRender({ ...parts, [k]: `${parts[k]}x` }).seed, a.seed, k);
    assert.notEqual(
      fixedRender({ ...parts, key: 'cd'.repeat(32) }).seed,
      a.seed,
      'the installation key is part of the seed: public inputs alone do not predict it',
    );
    assert.equal(fixedRender({ ...parts, time: undefined }).time, '1970-01-01T00:00:00Z');
  });

  it('the stream is the same for the same seed, however it is read, and differs for another', () => {
    const seed = fixedRender(parts).seed;
    assert.deepEqual(bytes(seed, 100), bytes(seed, 100, 7));
    assert.notDeepEqual(bytes(seed, 100), bytes(fixedRender({ ...parts, addon: 'x' }).seed, 100));
    assert.equal(timeNanos('2026-11-01T00:00:00Z'), 1_793_491_200_000_000_000n);
  });

  it('a stored key is 64 hex digits (white space around it ignored, either case); anything else is none', () => {
    assert.equal(parseRenderSeedKey(`${KEY}\n`), KEY);
    assert.equal(parseRenderSeedKey(`  ${KEY.toUpperCase()}`), KEY);
    for (const bad of [
      '',
      KEY.slice(2),
      `${KEY}00`,
      `${KEY.slice(2)}zz`,
      `${KEY.slice(0, 32)} ${KEY.slice(32)}`,
    ])
      assert.equal(parseRenderSeedKey(bad), undefined, JSON.stringify(bad));
    const made = newRenderSeedKey();
    assert.equal(parseRenderSeedKey(made), made);
    assert.notEqual(newRenderSeedKey(), made);
  });
});

describe('the WASI imports of a fixed call', () => {
  const memory = { buffer: new ArrayBuffer(64) };
  const calls: string[] = [];
  const base = {
    random_get: ((_buf: number, _len: number) => {
      calls.push('random');
      return 0;
    }) as never,
    clock_time_get: ((id: number) => {
      calls.push(`clock ${id}`);
      return 0;
    }) as never,
    fd_write: (() => 0) as never,
  };

  it('answer random_get and the wall clock from the call, the monotonic clock and other calls as before', () => {
    let current: { stream: SeedStream; timeNs: bigint } | undefined = {
      stream: new SeedStream(KEY),
      timeNs: 42n,
    };
    const imports = fixedWasiImports(
      base,
      () => memory,
      () => current,
    ) as unknown as Record<string, (...a: unknown[]) => number>;
    assert.equal(imports.random_get?.(8, 16), 0);
    assert.deepEqual(Buffer.from(memory.buffer, 8, 16), bytes(KEY, 16));
    assert.equal(imports.clock_time_get?.(0, 1n, 32), 0);
    assert.equal(new DataView(memory.buffer).getBigUint64(32, true), 42n);
    imports.clock_time_get?.(1, 1n, 40);
    assert.deepEqual(calls, ['clock 1'], 'the monotonic clock (the runtime’s timers) stays real');
    current = undefined;
    imports.random_get?.(8, 16);
    imports.clock_time_get?.(0, 1n, 32);
    assert.deepEqual(calls, ['clock 1', 'random', 'clock 0'], 'outside a fixed call: the real ones');
    assert.equal(imports.fd_write, base.fd_write);
  });
});
