// `stackflux diff`: render against the live cluster. The objects the controllers read are listed
// into an in-memory snapshot (controller/offline/live.ts), render runs over it, and every object
// render would change is printed as a unified diff against its live version (fleet files too).
// Exit code 1 when there are differences (like `kubectl diff`).
import { join } from 'node:path';
import { secretCredentials } from '../controllers/common.ts';
import { type LiveOptions, liveSnapshot } from '../offline/live.ts';
import { writeFiles } from '../offline/output.ts';
import { mutationPath, parseControllers, RenderError } from '../offline/render.ts';
import { readSnapshot, type Snapshot, type SnapshotObject, snapshotFiles } from '../offline/snapshot.ts';
import { unifiedDiff } from '../offline/unified.ts';
import { canonicalYaml, compareStrings } from '../offline/yaml.ts';
import { DEFAULT_BRANCH_PREFIX } from '../reconcilers/clusteraddon.ts';
import { loadFluxTemplates } from '../releases/flux-templates.ts';
import { KubeClient, loadKubeConfig } from '../runtime/client.ts';
import { type Command, type CommandIO, type FlagValues, UsageError } from './command.ts';
import {
  controllerNamespaceFlag,
  inheritFleetFlags,
  installationRenderSeedKey,
  renderSeedSecretFlag,
} from './controllersettings.ts';
import { fleetFlags } from './render.ts';
import { renderLimitFlags, renderPoolOptions, renderSnapshotBounded } from './renderlimits.ts';
import { defaultCacheDir } from './run.ts';
import { sourceFlags, sourceOptions } from './sourceflags.ts';
import { tenancyFlags, tenancyPolicy } from './tenancyflags.ts';

function str(v: string | boolean | undefined): string {
  return typeof v === 'string' ? v : '';
}

/** The object as shown in a diff: without fields the API server or the simulation set. */
function shown(obj: SnapshotObject | undefined): string {
  if (obj === undefined) return '';
  const {
    managedFields: _a,
    resourceVersion: _b,
    generation: _c,
    uid: _d,
    creationTimestamp: _e,
    ...metadata
  } = obj.metadata;
  return canonicalYaml({ ...obj, metadata });
}

/**
 * Flags of where a live snapshot takes release sources and the fleet repository from, and how it
 * reads the sources (sourceFlags: as `stackflux run` does).
 */
export const liveSnapshotFlags: Command['flags'] = {
  'sources-dir': {
    type: 'string',
    description: 'take release sources from this snapshot directory (its sources/) instead of listing them',
  },
  'cache-dir': { type: 'string', description: 'cache of fetched release trees' },
  'fleet-secret': { type: 'string', description: 'NS/NAME of the fleet repository Secret' },
  'fleet-secret-ref': {
    type: 'string',
    description: 'Secret Flux reads the fleet repository with (per namespace)',
  },
  ...fleetFlags,
  ...controllerNamespaceFlag,
  ...renderSeedSecretFlag,
  ...sourceFlags,
};

/**
 * The live snapshot `stackflux diff` and `stackflux preview` read (flags: liveSnapshotFlags);
 * `githubApiUrl` from sourceOptions(flags), which the render of the snapshot takes too.
 */
export async function liveSnapshotOf(
  client: KubeClient,
  flags: FlagValues,
  io: CommandIO,
  opts: Pick<LiveOptions, 'namespace' | 'tenancy' | 'extraTags' | 'githubApiUrl'>,
): Promise<Snapshot> {
  flags = (await inheritFleetFlags(client, flags, io)).flags;
  const sourcesDir = str(flags['sources-dir']);
  const fleetUrl = str(flags['fleet-url']);
  let credentials: Awaited<ReturnType<typeof secretCredentials>> | undefined;
  const fleetSecret = str(flags['fleet-secret']);
  if (fleetSecret !== '') {
    const [ns, name] = fleetSecret.split('/');
    if (!ns || !name) throw new UsageError('--fleet-secret must be NAMESPACE/NAME');
    credentials = await secretCredentials(client, ns, name);
  }
  return liveSnapshot(client, {
    ...opts,
    cacheDir: str(flags['cache-dir']) || defaultCacheDir(io.env),
    ...(sourcesDir ? { sources: readSnapshot(sourcesDir).sources } : {}),
    ...(fleetUrl
      ? {
          fleet: {
            url: fleetUrl,
            branchPrefix: str(flags['fleet-branch-prefix']) || DEFAULT_BRANCH_PREFIX,
            ...(str(flags['fleet-secret-ref']) ? { secretRef: str(flags['fleet-secret-ref']) } : {}),
            ...(credentials ? { credentials } : {}),
          },
        }
      : {}),
  });
}

export const diffCommand: Command = {
  name: 'diff',
  summary: 'Show what the controllers would change on the live cluster, as a unified diff per object',
  flags: {
    kubeconfig: {
      type: 'string',
      description: 'path of a kubeconfig (default: $KUBECONFIG, ~/.kube/config)',
    },
    context: { type: 'string', description: 'kubeconfig context to use' },
    namespace: { type: 'string', short: 'n', description: 'only this namespace (default: all)' },
    now: { type: 'string', description: 'the time the controllers see (RFC 3339; default: now)' },
    controllers: { type: 'string', description: 'controllers to run ("*", "a,b", "*,-b")', default: '*' },
    ...liveSnapshotFlags,
    'export-snapshot': { type: 'string', description: 'also write the live snapshot to this directory' },
    ...renderLimitFlags,
    ...tenancyFlags,
  },
  run: async (flags, _positionals, io) => {
    const nowText = str(flags.now);
    const now =
      nowText === '' ? new Date(Math.floor(Date.now() / 1000) * 1000) : new Date(Date.parse(nowText));
    if (Number.isNaN(now.getTime())) throw new UsageError(`--now "${nowText}" is not an RFC 3339 time`);
    let controllers: ReturnType<typeof parseControllers>;
    try {
      controllers = parseControllers(str(flags.controllers));
    } catch (err) {
      throw new UsageError(err instanceof RenderError ? err.message : String(err));
    }
    const tenancy = tenancyPolicy(flags);
    const { githubApiUrl } = sourceOptions(flags);
    const limits = renderPoolOptions(flags);
    const kubeconfig = str(flags.kubeconfig);
    const context = str(flags.context);
    const client = new KubeClient(
      loadKubeConfig({ ...(kubeconfig ? { kubeconfig } : {}), ...(context ? { context } : {}) }),
      { userAgent: 'stackflux-diff' },
    );
    try {
      const namespace = str(flags.namespace);
      const renderSeedKey = await installationRenderSeedKey(client, flags, io);
      const snapshot = await liveSnapshotOf(client, flags, io, {
        ...(namespace ? { namespace } : {}),
        tenancy,
        githubApiUrl,
      });
      const exportDir = str(flags['export-snapshot']);
      if (exportDir !== '') writeFiles(exportDir, snapshotFiles(snapshot, canonicalYaml));
      const output = await renderSnapshotBounded(
        snapshot,
        {
          now,
          controllers,
          tenancy,
          githubApiUrl,
          templates: loadFluxTemplates(),
          ...(renderSeedKey !== undefined ? { renderSeedKey } : {}),
        },
        limits,
      );
      const keys = [...new Set(output.mutations.map(mutationPath))].sort(compareStrings);
      let changed = 0;
      for (const key of keys) {
        const d = unifiedDiff(
          join('live', key),
          join('render', key),
          shown(snapshot.objects.get(key)),
          shown(output.world.objects.get(key)),
        );
        if (d !== '') {
          io.stdout(d);
          changed++;
        }
      }
      // Fleet files as `fleet/<branch>/<addon>/<file>`, per branch the render would change.
      for (const branch of output.fleet.branches.keys()) {
        const paths = new Set(
          [...snapshot.fleet.keys(), ...output.world.fleet.keys()].filter((p) => p.startsWith(`${branch}/`)),
        );
        for (const p of [...paths].sort(compareStrings)) {
          const d = unifiedDiff(
            join('fleet', p),
            join('fleet', p),
            snapshot.fleet.get(p) ?? '',
            output.world.fleet.get(p) ?? '',
          );
          if (d !== '') {
            io.stdout(d);
            changed++;
          }
        }
      }
      io.stderr(changed === 0 ? 'no changes\n' : `${changed} object(s)/file(s) would change\n`);
      return changed === 0 ? 0 : 1;
    } finally {
      client.close();
    }
  },
};
