// `stackflux preview clusterstack NAME -n NS [--release TAG]`: what moving the ClusterStack's
// Clusters to a release would change on every Cluster's fleet branch, before anything moves. The
// live objects, release trees and fleet branches are read as `stackflux diff` reads them (a live
// snapshot, read-only); each Cluster is rendered through the ClusterAddon reconcile in the bounded
// render pool (controller/preview/). Exit code 1 when any Cluster would fail to render.
import type { LabelSelector } from '../api/rollout.ts';
import { PreviewError, type PreviewResult, previewRelease } from '../preview/core.ts';
import { diffText, jsonText, summaryText } from '../preview/report.ts';
import { parseLabelSelector } from '../preview/selector.ts';
import { previewInputOf } from '../preview/snapshot.ts';
import { loadFluxTemplates } from '../releases/flux-templates.ts';
import { type Command, UsageError } from './command.ts';
import { inheritFleetFlags, installationRenderSeedKey } from './controllersettings.ts';
import { liveSnapshotFlags, liveSnapshotOf } from './diff.ts';
import { clientFromFlags, kubeFlags, namespaceFlag } from './kube.ts';
import { renderLimitFlags, renderPoolOptions, withBoundedRendering } from './renderlimits.ts';
import { sourceOptions } from './sourceflags.ts';
import { tenancyFlags, tenancyPolicy } from './tenancyflags.ts';

function str(v: string | boolean | undefined): string {
  return typeof v === 'string' ? v : '';
}

/** The preview as the flags ask for it: summary (and diffs), or JSON. */
export function previewOutput(result: PreviewResult, o: { json: boolean; diff: boolean }): string {
  if (o.json) return jsonText(result);
  return o.diff ? `${summaryText(result)}\n${diffText(result)}` : summaryText(result);
}

export function selectorFlag(text: string): LabelSelector | undefined {
  if (text === '') return undefined;
  try {
    return parseLabelSelector(text);
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
}

export const previewCommand: Command = {
  name: 'preview',
  summary:
    "Show what moving a ClusterStack's Clusters to a release would change, per Cluster, before anything moves",
  usage:
    'preview clusterstack NAME [-n NAMESPACE] [--release TAG] [--selector LABELS] [--wave NAME] [--diff] [-o json]',
  examples: [
    'stackflux preview clusterstack ferrol -n team-a --fleet-url https://git.example.com/fleet.git',
    'stackflux preview clusterstack ferrol -n team-a --release docker-ferrol-1-30-v3 --diff --fleet-url URL',
  ],
  flags: {
    ...kubeFlags,
    release: {
      type: 'string',
      description: 'the release (tag) to preview (default: the newest the ClusterStack would take)',
    },
    selector: { type: 'string', short: 'l', description: 'only Clusters with these labels (kubectl syntax)' },
    wave: {
      type: 'string',
      description: 'only the Clusters of this rollout wave ("rest": those no wave selects)',
    },
    diff: { type: 'boolean', description: 'unified diffs per group of Clusters and object', default: false },
    output: { type: 'string', short: 'o', description: 'output format: "json" for machines' },
    now: { type: 'string', description: 'the time the controllers see (RFC 3339; default: now)' },
    ...liveSnapshotFlags,
    ...renderLimitFlags,
    ...tenancyFlags,
  },
  run: async (flags, positionals, io) => {
    const [kind, name, ...rest] = positionals;
    if (kind !== 'clusterstack' && kind !== 'csk')
      throw new UsageError(`preview needs "clusterstack NAME", got "${positionals.join(' ')}"`);
    if (name === undefined || name === '') throw new UsageError('ClusterStack name is required');
    if (rest.length > 0) throw new UsageError(`unexpected arguments: ${rest.join(' ')}`);
    const output = str(flags.output);
    if (output !== '' && output !== 'json') throw new UsageError(`-o must be "json", got "${output}"`);
    const nowText = str(flags.now);
    const now =
      nowText === '' ? new Date(Math.floor(Date.now() / 1000) * 1000) : new Date(Date.parse(nowText));
    if (Number.isNaN(now.getTime())) throw new UsageError(`--now "${nowText}" is not an RFC 3339 time`);
    const namespace = namespaceFlag(flags);
    const selector = selectorFlag(str(flags.selector));
    const release = str(flags.release);
    const wave = str(flags.wave);
    const tenancy = tenancyPolicy(flags);
    const { githubApiUrl } = sourceOptions(flags);
    const limits = renderPoolOptions(flags);
    const client = clientFromFlags(flags, 'stackflux-preview');
    try {
      const inherited = await inheritFleetFlags(client, flags, io);
      if (str(inherited.flags['fleet-url']) === '')
        throw new UsageError(
          `--fleet-url is required: the preview compares with the Clusters' fleet branches (not taken from the installed controller: ${inherited.why ?? 'it has no --fleet-url'})`,
        );
      flags = inherited.flags;
      const renderSeedKey = await installationRenderSeedKey(client, flags, io);
      const snapshot = await liveSnapshotOf(client, flags, io, {
        namespace,
        tenancy,
        githubApiUrl,
        ...(release !== '' ? { extraTags: [release] } : {}),
      });
      const input = previewInputOf(
        snapshot,
        {
          namespace,
          clusterStack: name,
          ...(release !== '' ? { release } : {}),
          ...(selector !== undefined ? { selector } : {}),
          ...(wave !== '' ? { wave } : {}),
        },
        {
          now,
          templates: loadFluxTemplates(),
          tenancy,
          githubApiUrl,
          ...(renderSeedKey !== undefined ? { renderSeedKey } : {}),
        },
      );
      // Renders run bounded in child processes, as in the controller.
      const result = await withBoundedRendering(limits, (render, goEngine) =>
        previewRelease({ ...input, render, goEngine }),
      );
      io.stdout(previewOutput(result, { json: output === 'json', diff: flags.diff === true }));
      return result.failed > 0 ? 1 : 0;
    } catch (err) {
      if (!(err instanceof PreviewError)) throw err;
      io.stderr(`✗ ${err.message}\n`);
      return 2;
    } finally {
      client.close();
    }
  },
};
