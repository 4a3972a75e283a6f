// `stackflux render`: the controllers' decisions over a snapshot directory, with no cluster and
// no network (controller/offline/README.md describes the snapshot and output layouts).
import { readFileSync } from 'node:fs';
import { outputFiles, writeFiles } from '../offline/output.ts';
import { DEFAULT_NOW, parseControllers, RenderError } from '../offline/render.ts';
import { readSnapshot, type Snapshot } from '../offline/snapshot.ts';
import { previewFiles } from '../preview/snapshot.ts';
import { loadFluxTemplates } from '../releases/flux-templates.ts';
import { parseRenderSeedKey } from '../rendering/determinism.ts';
import { type Command, type FlagValues, UsageError } from './command.ts';
import {
  renderLimitFlags,
  renderPoolOptions,
  renderSnapshotBounded,
  withBoundedRendering,
} from './renderlimits.ts';
import { githubApiUrlFlag, githubApiUrlOf } from './sourceflags.ts';
import { tenancyFlags, tenancyPolicy } from './tenancyflags.ts';

function str(v: string | boolean | undefined): string {
  return typeof v === 'string' ? v : '';
}

export function parseNow(value: string): Date {
  const v = value || DEFAULT_NOW;
  if (
    !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/.test(v) ||
    Number.isNaN(Date.parse(v))
  )
    throw new UsageError(`--now "${v}" is not an RFC 3339 time like 2025-01-02T03:04:05Z`);
  return new Date(Date.parse(v));
}

/** Fleet flags override the snapshot's settings.yaml. */
export function applyFleetFlags(snapshot: Snapshot, flags: FlagValues): void {
  const f = snapshot.settings.fleet;
  if (str(flags['fleet-url']) !== '') f.url = str(flags['fleet-url']);
  if (str(flags['fleet-branch-prefix']) !== '') f.branchPrefix = str(flags['fleet-branch-prefix']);
}

export const fleetFlags: Command['flags'] = {
  'fleet-url': { type: 'string', description: 'fleet repository URL (overrides settings.yaml)' },
  'fleet-branch-prefix': {
    type: 'string',
    description: "prefix of each Cluster's branch <prefix><namespace>/<cluster> (overrides settings.yaml)",
  },
};

/**
 * The key of --render-seed-key-file (64 hex digits, as the controller's render seed Secret holds
 * it); undefined without the flag: the renders seed with this process's own key.
 */
export function renderSeedKeyFile(flags: FlagValues): string | undefined {
  const file = str(flags['render-seed-key-file']);
  if (file === '') return undefined;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new UsageError(
      `--render-seed-key-file: cannot read ${file}: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  const key = parseRenderSeedKey(text);
  if (key === undefined)
    throw new UsageError(`--render-seed-key-file: ${file} does not hold 64 hex digits (32 bytes)`);
  return key;
}

export const renderCommand: Command = {
  name: 'render',
  summary: 'Write every mutation the controllers would make over a snapshot directory (offline)',
  flags: {
    'input-dir': { type: 'string', description: 'snapshot directory (see controller/offline/README.md)' },
    'output-dir': {
      type: 'string',
      description: 'directory to write the mutations to (its content is replaced)',
    },
    now: { type: 'string', description: 'the time the controllers see (RFC 3339)', default: DEFAULT_NOW },
    controllers: {
      type: 'string',
      description:
        'controllers to run: "*", "a,b" or "*,-b" (clusterstack, clusterstackrelease, clusteraddon, rollout)',
      default: '*',
    },
    'check-fixed-point': {
      type: 'boolean',
      description: 'render again over snapshot + mutations and fail if anything changes',
      default: false,
    },
    'flux-templates': {
      type: 'string',
      description: 'folder of the Flux object templates (default: bundled)',
    },
    'render-seed-key-file': {
      type: 'string',
      description:
        "file holding a render seed key (64 hex digits, e.g. the controller's render seed Secret's data.key) that seeds the random values Go templates generate (genCA, randAlpha, …); without it each run seeds with a key of its own, so two runs generate different values",
    },
    ...fleetFlags,
    ...renderLimitFlags,
    ...tenancyFlags,
    ...githubApiUrlFlag,
  },
  run: async (flags, _positionals, io) => {
    const input = str(flags['input-dir']);
    const out = str(flags['output-dir']);
    if (input === '') throw new UsageError('--input-dir is required');
    if (out === '') throw new UsageError('--output-dir is required');
    const now = parseNow(str(flags.now));
    const limits = renderPoolOptions(flags);
    const tenancy = tenancyPolicy(flags);
    const githubApiUrl = githubApiUrlOf(flags);
    const renderSeedKey = renderSeedKeyFile(flags);
    let controllers: ReturnType<typeof parseControllers>;
    try {
      controllers = parseControllers(str(flags.controllers));
    } catch (err) {
      throw new UsageError(err instanceof RenderError ? err.message : String(err));
    }
    const snapshot = readSnapshot(input);
    applyFleetFlags(snapshot, flags);
    const dir = str(flags['flux-templates']);
    const options = {
      now,
      controllers,
      tenancy,
      githubApiUrl,
      templates: dir ? loadFluxTemplates(dir) : loadFluxTemplates(),
      ...(renderSeedKey !== undefined ? { renderSeedKey } : {}),
    };
    // Addon renders run bounded in child processes, as in the controller.
    const output = await renderSnapshotBounded(
      snapshot,
      options,
      limits,
      flags['check-fixed-point'] === true,
    );
    const files = outputFiles(output, now);
    // preview.yaml: the release preview over the snapshot, rendered bounded as well.
    if (snapshot.preview !== undefined) {
      const preview = await withBoundedRendering(limits, (render, goEngine) =>
        previewFiles(snapshot, {
          now,
          templates: options.templates,
          tenancy,
          githubApiUrl,
          render,
          goEngine,
          ...(renderSeedKey !== undefined ? { renderSeedKey } : {}),
        }),
      );
      for (const [path, text] of preview) files.set(path, text);
    }
    writeFiles(out, files);
    io.stderr(
      `rendered ${output.mutations.length} mutation(s), ${output.fleet.branches.size} fleet branch(es) changed in ${output.fleet.pushes} push(es), ${output.rounds} round(s) to ${out}\n`,
    );
    return 0;
  },
};
