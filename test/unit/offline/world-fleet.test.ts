// The World's fleet branches (controller/offline/world.ts) read through its sorted index of paths
// must be what a scan of every path gives (the way they were read before the index), through any
// sequence of writes: branch names that are prefixes of each other, deleted and emptied branches.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { World } from '../../../controller/offline/world.ts';
import { compareStrings } from '../../../controller/offline/yaml.ts';

/** The reference: every path scanned and sorted per read, every path scanned per write. */
class ScannedFleet {
  readonly fleet: Map<string, string>;
  constructor(fleet: Map<string, string>) {
    this.fleet = new Map(fleet);
  }
  branchFiles(branch: string): Map<string, string> {
    const base = `${branch}/`;
    return new Map(
      [...this.fleet]
        .sort(([a], [b]) => compareStrings(a, b))
        .filter(([p]) => p.startsWith(base))
        .map(([p, t]) => [p.slice(base.length), t]),
    );
  }
  writeBranch(branch: string, files: ReadonlyMap<string, string> | null): void {
    const base = `${branch}/`;
    for (const p of [...this.fleet.keys()]) if (p.startsWith(base)) this.fleet.delete(p);
    if (files !== null) for (const [f, t] of files) this.fleet.set(`${base}${f}`, t);
  }
}

/** A small deterministic generator (mulberry32), so a failure reproduces. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const BRANCHES = ['c/ns/a', 'c/ns/a-b', 'c/ns/ab', 'c/ns/a.b', 'c/ns-x/a', 'c/ns/b', 'c/ns/é', 'c/ns/a0'];
const FILES = ['cni/cm.yaml', 'cni/kustomization.yaml', 'cni-x.yaml', 'metrics/a/b.yaml', 'z', 'A.yaml'];

describe('World fleet branches through the sorted index', () => {
  it('reads and writes exactly as a scan of every path does, through 2,000 random operations', () => {
    const next = random(25);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)] as T;
    const initial = new Map<string, string>();
    for (const b of BRANCHES.slice(0, 5))
      for (const f of FILES.slice(0, 3)) initial.set(`${b}/${f}`, `${b} ${f}`);
    const world = new World({ objects: new Map(), fleet: initial }, new Date(0));
    const reference = new ScannedFleet(initial);
    for (let i = 0; i < 2000; i++) {
      const branch = pick(BRANCHES);
      const op = next();
      if (op < 0.5) {
        assert.deepEqual(
          [...world.branchFiles(branch)],
          [...reference.branchFiles(branch)],
          `read ${branch}`,
        );
        continue;
      }
      const files =
        op < 0.6 ? null : new Map(FILES.filter(() => next() < 0.5).map((f) => [f, `${i} ${f}`] as const));
      world.writeBranch(branch, files);
      reference.writeBranch(branch, files);
      assert.deepEqual(
        [...world.fleet].sort(([a], [b]) => compareStrings(a, b)),
        [...reference.fleet].sort(([a], [b]) => compareStrings(a, b)),
        `after writing ${branch}`,
      );
    }
    for (const b of BRANCHES) assert.deepEqual([...world.branchFiles(b)], [...reference.branchFiles(b)]);
  });
});
