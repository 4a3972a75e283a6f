// The golden suite: every test/golden/<case> renders to exactly its expected/ files and passes the
// fixed-point check. UPDATE_GOLDEN=1 rewrites expected/. Pure: file reads only.
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import {
  diffFiles,
  type GoldenCase,
  readGoldenCase,
  renderCase,
  runGoldenCase,
} from '../../../controller/offline/golden.ts';
import { readFiles } from '../../../controller/offline/output.ts';
import { readSnapshot, type Snapshot, type SnapshotObject } from '../../../controller/offline/snapshot.ts';
import { reconcileClusterStack } from '../../../controller/reconcilers/clusterstack.ts';
import { loadFluxTemplates } from '../../../controller/releases/flux-templates.ts';
import { binaryFilesOf, releaseTree } from '../../../controller/releases/tree.ts';

const ROOT = new URL('../../golden/', import.meta.url).pathname;
const templates = loadFluxTemplates();
const update = process.env.UPDATE_GOLDEN === '1';
const cases: GoldenCase[] = readdirSync(ROOT, { withFileTypes: true })
  .filter((e) => e.isDirectory())
  .map((e) => e.name)
  .sort()
  .map((name) => readGoldenCase(join(ROOT, name), name));

describe('golden cases (render + fixed point)', () => {
  it('has at least 15 cases', () => assert.ok(cases.length >= 15, `${cases.length} cases`));
  for (const c of cases) {
    it(`${c.name}: ${c.description}`, () => {
      const run = runGoldenCase(c, templates, { update });
      assert.deepEqual(
        run.differences,
        [],
        `output differs from ${c.name}/expected (UPDATE_GOLDEN=1 rewrites it)`,
      );
    });
  }
});

/** The same snapshot with every object's keys (deeply) in reverse order and the objects in reverse order. */
function shuffled(snapshot: Snapshot): Snapshot {
  const reverseKeys = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(reverseKeys);
    if (typeof v === 'object' && v !== null)
      return Object.fromEntries(
        Object.entries(v)
          .reverse()
          .map(([k, x]) => [k, reverseKeys(x)]),
      );
    return v;
  };
  return {
    ...snapshot,
    objects: new Map([...snapshot.objects].reverse().map(([k, o]) => [k, reverseKeys(o) as SnapshotObject])),
    sources: [...snapshot.sources].reverse().map((s) => ({
      ...s,
      // The binary files too (vendored charts/*.tgz): a bare Map would drop them.
      trees: new Map(
        [...s.trees]
          .reverse()
          .map(([t, files]) => [
            t,
            releaseTree(new Map([...files].reverse()), new Map([...binaryFilesOf(files)].reverse())),
          ]),
      ),
    })),
    fleet: new Map([...snapshot.fleet].reverse()),
  };
}

describe('determinism', () => {
  it('key order and file order of the input do not change the output', () => {
    for (const c of cases) {
      const snapshot = shuffled(readSnapshot(join(c.dir, 'input')));
      const got = renderCase(c, templates, { snapshot });
      assert.deepEqual(diffFiles(readFiles(join(c.dir, 'expected')), got), [], c.name);
    }
  });

  it('a deliberately nondeterministic reconciler (unsorted list from hidden state) is caught', () => {
    const c = cases.find((x) => x.name === 'in-use-retention');
    assert.ok(c);
    let calls = 0;
    // Hidden state leaks into list order: the summary comes out in a different order per call.
    const flaky: typeof reconcileClusterStack = (input) => {
      const r = reconcileClusterStack(input);
      calls++;
      if (calls % 2 === 0) r.status.summary = [...(r.status.summary ?? [])].reverse();
      return r;
    };
    assert.throws(() => {
      const run = runGoldenCase(c, templates, { reconcilers: { clusterStack: flaky } });
      if (run.differences.length > 0) throw new Error(`differs: ${run.differences.join('; ')}`);
    }, /nondeterministic|not a fixed point|no fixed point|differs/);
  });

  it('a reconciler that reads the clock is caught by the golden comparison', () => {
    const c = cases.find((x) => x.name === 'new-stack');
    assert.ok(c);
    const clocked: typeof reconcileClusterStack = (input) =>
      reconcileClusterStack({ ...input, now: new Date() });
    assert.throws(() => {
      const run = runGoldenCase(c, templates, { reconcilers: { clusterStack: clocked } });
      if (run.differences.length > 0) throw new Error(`differs: ${run.differences.join('; ')}`);
    });
  });
});
