// The render output as files (deterministic bytes), and the fixed-point check.
//   <verb>/<scope>/<group>/<resource>/<name>.meta.yaml   verb, resource, namespace, name, fieldManager, reconciler
//   <verb>/<scope>/<group>/<resource>/<name>.body.yaml   what is sent (applied object, status, merge patch, DeleteOptions)
//   fleet/changes.yaml                                   pushes; per changed branch its commit messages (or deleted)
//   fleet/branches/<branch>/<addon>/<file>               final files of every written branch
//   results.yaml                                         per-reconciler outcome
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { groupOf, kindInfo } from '../api/resources.ts';
import { resolveUnder } from '../releases/paths.ts';
import {
  describeMutation,
  FIELD_MANAGER,
  type Mutation,
  mutationPath,
  type RenderOptions,
  type RenderOutput,
  renderSnapshot,
} from './render.ts';
import { groupDir, type Snapshot } from './snapshot.ts';
import { World } from './world.ts';
import { canonicalYaml, compareStrings } from './yaml.ts';

export function outputFiles(output: RenderOutput, now: Date): Map<string, string> {
  const files = new Map<string, string>();
  for (const m of output.mutations) {
    const base = `${m.verb}/${mutationPath(m)}`;
    const group = groupOf(m.apiVersion);
    files.set(
      `${base}.meta.yaml`,
      canonicalYaml({
        verb: m.verb,
        apiVersion: m.apiVersion,
        kind: m.kind,
        resource: `${groupDir(group)}/${kindInfo(m.apiVersion, m.kind).plural}${m.verb === 'applyStatus' ? '/status' : ''}`,
        ...(m.namespace !== undefined ? { namespace: m.namespace } : {}),
        name: m.name,
        fieldManager: m.fieldManager ?? FIELD_MANAGER,
        reconciler: m.reconciler,
      }),
    );
    files.set(`${base}.body.yaml`, canonicalYaml(m.body));
  }
  const { fleet } = output;
  if (fleet.branches.size > 0) {
    files.set(
      'fleet/changes.yaml',
      canonicalYaml({
        pushes: fleet.pushes,
        branches: [...fleet.branches].map(([branch, b]) => ({
          branch,
          ...(b.files === null ? { deleted: true } : {}),
          commits: b.commits,
        })),
      }),
    );
    for (const [branch, b] of fleet.branches) {
      for (const [f, text] of b.files ?? []) files.set(`fleet/branches/${branch}/${f}`, text);
    }
  }
  files.set(
    'results.yaml',
    canonicalYaml({
      now: now.toISOString().replace(/\.\d+Z$/, 'Z'),
      rounds: output.rounds,
      controllers: output.controllers,
      mutations: output.mutations.length,
      fleetPushes: fleet.pushes,
      results: output.results,
    }),
  );
  return new Map([...files].sort(([a], [b]) => compareStrings(a, b)));
}

/** Replaces dir's content with files. */
export function writeFiles(dir: string, files: ReadonlyMap<string, string | Uint8Array>): void {
  if (existsSync(dir)) {
    for (const e of readdirSync(dir)) rmSync(join(dir, e), { recursive: true, force: true });
  }
  mkdirSync(dir, { recursive: true });
  for (const [path, text] of files) {
    // Fleet file names come from release trees: never written outside dir.
    const full = resolveUnder(dir, path);
    mkdirSync(dirname(full), { recursive: true });
    writeFileSync(full, text);
  }
}

/** Every file below dir (relative path → text), sorted. */
export function readFiles(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (d: string, prefix: string) => {
    for (const e of readdirSync(d).sort(compareStrings)) {
      const p = join(d, e);
      if (statSync(p).isDirectory()) walk(p, `${prefix}${e}/`);
      else out.set(`${prefix}${e}`, readFileSync(p, 'utf8'));
    }
  };
  if (existsSync(dir)) walk(dir, '');
  return out;
}

const VERB_ORDER: Record<Mutation['verb'], number> = { apply: 0, patch: 1, applyStatus: 2, delete: 3 };

/** The snapshot after the render's mutations and fleet changes (simulated like the render does). */
export function applyOutput(snapshot: Snapshot, output: RenderOutput, now: Date): Snapshot {
  const world = new World(snapshot, now);
  const ordered = [...output.mutations].sort((a, b) => VERB_ORDER[a.verb] - VERB_ORDER[b.verb]);
  for (const m of ordered) {
    switch (m.verb) {
      case 'apply':
        world.apply(m.body as Parameters<World['apply']>[0]);
        break;
      case 'applyStatus':
        // Another field manager's (the rollout's) status apply sets only its own fields.
        if (m.fieldManager === undefined) world.applyStatus(m.body as Parameters<World['applyStatus']>[0]);
        else world.applyStatusFields(m.body as Parameters<World['applyStatusFields']>[0]);
        break;
      case 'patch':
        world.patch(m.apiVersion, m.kind, m.name, m.namespace, m.body);
        break;
      case 'delete':
        world.delete(m.apiVersion, m.kind, m.name, m.namespace);
        break;
    }
  }
  for (const [branch, b] of output.fleet.branches) world.writeBranch(branch, b.files);
  return {
    ...snapshot,
    objects: new Map(world.objects),
    fleet: new Map(world.fleet),
    fleetTips: new Map(world.fleetTips),
  };
}

export class FixedPointError extends Error {
  readonly mutations: string[];
  constructor(mutations: string[]) {
    super(
      `not a fixed point: rendering again over the snapshot plus its own mutations changes more:\n  ${mutations.join('\n  ')}`,
    );
    this.name = 'FixedPointError';
    this.mutations = mutations;
  }
}

/** Renders over snapshot + output; throws FixedPointError naming every further mutation. */
export function checkFixedPoint(snapshot: Snapshot, output: RenderOutput, options: RenderOptions): void {
  const next = applyOutput(snapshot, output, options.now);
  const again = renderSnapshot(next, options);
  const further = [
    ...again.mutations.map(describeMutation),
    ...[...again.fleet.branches].map(([branch, b]) =>
      b.files === null ? `fleet: delete branch ${branch}` : `fleet: write branch ${branch}`,
    ),
  ];
  if (further.length > 0) throw new FixedPointError(further);
}
