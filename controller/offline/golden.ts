// Golden cases: test/golden/<case>/{test.yaml,input/,expected/}. A case renders input/ with the
// options of test.yaml, checks the fixed point, renders a second time (byte-identical output or
// the renderer is nondeterministic), and compares with expected/ (UPDATE_GOLDEN=1 rewrites it).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { previewFiles } from '../preview/snapshot.ts';
import type { FluxTemplates } from '../releases/flux.ts';
import { checkFixedPoint, outputFiles, readFiles, writeFiles } from './output.ts';
import { parseControllers, type Reconcilers, type RenderOptions, renderSnapshot } from './render.ts';
import { readSnapshot, type Snapshot } from './snapshot.ts';
import { isRecord, parseOneDocument } from './yaml.ts';

export interface GoldenCase {
  name: string;
  dir: string;
  description: string;
  now: Date;
  controllers: string;
}

export function readGoldenCase(dir: string, name: string): GoldenCase {
  const file = join(dir, 'test.yaml');
  const spec = parseOneDocument(readFileSync(file, 'utf8'));
  if (!isRecord(spec)) throw new Error(`${file}: must be a mapping`);
  for (const k of Object.keys(spec)) {
    if (!['description', 'now', 'controllers'].includes(k)) throw new Error(`${file}: unknown field "${k}"`);
  }
  if (typeof spec.description !== 'string' || spec.description === '')
    throw new Error(`${file}: description is required`);
  return {
    name,
    dir,
    description: spec.description,
    now: new Date(typeof spec.now === 'string' ? spec.now : '1970-01-01T00:00:00Z'),
    controllers: typeof spec.controllers === 'string' ? spec.controllers : '*',
  };
}

/** A line-level summary of the differences between two file sets. */
export function diffFiles(want: ReadonlyMap<string, string>, got: ReadonlyMap<string, string>): string[] {
  const out: string[] = [];
  for (const path of new Set([...want.keys(), ...got.keys()])) {
    const a = want.get(path);
    const b = got.get(path);
    if (a === b) continue;
    if (a === undefined) out.push(`+ ${path} (unexpected file)`);
    else if (b === undefined) out.push(`- ${path} (missing)`);
    else {
      const al = a.split('\n');
      const bl = b.split('\n');
      const i = al.findIndex((l, n) => l !== bl[n]);
      out.push(`~ ${path} line ${i + 1}: expected ${JSON.stringify(al[i])}, got ${JSON.stringify(bl[i])}`);
    }
  }
  return out.sort();
}

export interface GoldenRun {
  files: Map<string, string>;
  /** Differences from expected/ (empty = pass). */
  differences: string[];
}

export function renderCase(
  c: GoldenCase,
  templates: FluxTemplates,
  opts: { reconcilers?: Partial<Reconcilers>; snapshot?: Snapshot } = {},
): Map<string, string> {
  const snapshot = opts.snapshot ?? readSnapshot(join(c.dir, 'input'));
  const options: RenderOptions = {
    now: c.now,
    templates,
    controllers: parseControllers(c.controllers),
    ...(opts.reconcilers !== undefined ? { reconcilers: opts.reconcilers } : {}),
  };
  const output = renderSnapshot(snapshot, options);
  checkFixedPoint(snapshot, output, options);
  const preview = previewFiles(snapshot, { now: c.now, templates });
  return new Map([...outputFiles(output, c.now), ...preview]);
}

export function runGoldenCase(
  c: GoldenCase,
  templates: FluxTemplates,
  opts: { update?: boolean; reconcilers?: Partial<Reconcilers> } = {},
): GoldenRun {
  const files = renderCase(c, templates, opts);
  const again = renderCase(c, templates, opts);
  const unstable = diffFiles(files, again);
  if (unstable.length > 0)
    throw new Error(`nondeterministic output (two renders differ):\n  ${unstable.join('\n  ')}`);
  const expectedDir = join(c.dir, 'expected');
  if (opts.update === true) writeFiles(expectedDir, files);
  const expected = existsSync(expectedDir) ? readFiles(expectedDir) : new Map<string, string>();
  return { files, differences: diffFiles(expected, files) };
}
