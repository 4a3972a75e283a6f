// `stackflux rollout pause|resume|abort|approve CLUSTERSTACK`: conveniences over patching
// spec.rollout of a ClusterStack (Progressive rollouts, controllers/rollout.ts).
//   pause   spec.rollout.paused=true: no new Cluster starts; Clusters in flight finish.
//   resume  spec.rollout.paused=false.
//   abort   spec.rollout.strategy=Manual: nothing moves any more; Clusters stay where they are.
//   approve annotates the target ClusterStackRelease (or --release) rollout.stackflux.io/approved:
//           <release> and rollout.stackflux.io/approved-impact: <status.impact.digest> (the impact
//           it shows), so a rollout held by spec.rollout.requireApproval starts; a newer impact
//           (computed again when a live render differed) needs another approval.
import type { ClusterStack } from '../api/clusterstack.ts';
import type { ClusterStackRelease } from '../api/clusterstackrelease.ts';
import { API_VERSION } from '../api/meta.ts';
import { APPROVED_ANNOTATION, APPROVED_IMPACT_ANNOTATION } from '../api/rollout.ts';
import type { KubeClient, KubeObject } from '../runtime/client.ts';
import { type Command, type CommandIO, UsageError } from './command.ts';
import { clientFromFlags, kubeFlags, namespaceFlag } from './kube.ts';

const PATCHES = {
  pause: { patch: { spec: { rollout: { paused: true } } }, done: 'paused: no new Cluster starts' },
  resume: { patch: { spec: { rollout: { paused: false } } }, done: 'resumed' },
  abort: {
    patch: { spec: { rollout: { strategy: 'Manual' } } },
    done: 'aborted: strategy Manual, Clusters stay where they are',
  },
} as const;

/** Approves the rollout of `cs` to `release` (default: its rollout's target) by annotating the release. */
async function approve(
  client: KubeClient,
  cs: ClusterStack,
  namespace: string,
  release: string,
  io: CommandIO,
): Promise<number> {
  const target = release !== '' ? release : (cs.status?.rollout?.targetRelease ?? cs.status?.latestRelease);
  if (target === undefined) {
    io.stderr(
      `✗ ClusterStack ${namespace}/${cs.metadata.name} has no target release yet; name one with --release\n`,
    );
    return 1;
  }
  const r = await client.get<ClusterStackRelease & KubeObject>(
    API_VERSION,
    'ClusterStackRelease',
    target,
    namespace,
  );
  if (r === undefined || r.spec.clusterStack !== cs.metadata.name) {
    io.stderr(`✗ ClusterStackRelease ${namespace}/${target} of ClusterStack ${cs.metadata.name} not found\n`);
    return 1;
  }
  const i = r.status?.impact;
  if (i !== undefined && i.error === undefined)
    io.stderr(
      `◎ impact of ${target}: ${i.clustersAffected ?? 0} of ${i.clusters ?? 0} Cluster(s) affected, ${i.clustersFailing ?? 0} failing to render, objects +${i.objectsAdded ?? 0} ~${i.objectsChanged ?? 0} -${i.objectsRemoved ?? 0}\n`,
    );
  else if (i?.error !== undefined) io.stderr(`◎ the impact of ${target} could not be computed: ${i.error}\n`);
  // The approval names the impact shown: a newer impact (computed again when a live render
  // differed from this one) is not approved by it.
  if (i?.digest === undefined || i.commit !== r.status?.commit) {
    io.stderr(`✗ the impact of ${target} is not computed yet: nothing to approve; try again shortly\n`);
    return 1;
  }
  io.stderr(
    `► approving the rollout of ClusterStack ${cs.metadata.name} to ${target} in ${namespace} namespace (impact ${i.digest})\n`,
  );
  await client.mergePatch(API_VERSION, 'ClusterStackRelease', target, namespace, {
    metadata: { annotations: { [APPROVED_ANNOTATION]: target, [APPROVED_IMPACT_ANNOTATION]: i.digest } },
  });
  io.stderr(`✔ rollout to ${target} approved\n`);
  return 0;
}

export const rolloutCommand: Command = {
  name: 'rollout',
  summary: "Pause, resume, abort or approve a ClusterStack's Progressive rollout",
  usage: 'rollout pause|resume|abort|approve CLUSTERSTACK [-n NAMESPACE] [--release TAG] [flags]',
  examples: [
    'stackflux rollout pause ferrol -n team-a',
    'stackflux rollout resume ferrol -n team-a',
    'stackflux rollout approve ferrol -n team-a',
  ],
  flags: {
    ...kubeFlags,
    release: {
      type: 'string',
      description: 'approve: the release to approve (default: the rollout target)',
    },
  },
  run: async (flags, positionals, io) => {
    const [verb, name, ...rest] = positionals;
    if (verb !== 'pause' && verb !== 'resume' && verb !== 'abort' && verb !== 'approve')
      throw new UsageError(`rollout needs pause, resume, abort or approve, got "${verb ?? ''}"`);
    if (name === undefined || name === '') throw new UsageError('ClusterStack name is required');
    if (rest.length > 0) throw new UsageError(`unexpected arguments: ${rest.join(' ')}`);
    const namespace = namespaceFlag(flags);
    const client = clientFromFlags(flags, 'stackflux-cli');
    try {
      const cs = await client.get<ClusterStack & KubeObject>(API_VERSION, 'ClusterStack', name, namespace);
      if (cs === undefined) {
        io.stderr(`✗ ClusterStack ${namespace}/${name} not found\n`);
        return 1;
      }
      if (verb === 'approve')
        return await approve(
          client,
          cs,
          namespace,
          typeof flags.release === 'string' ? flags.release : '',
          io,
        );
      if (verb !== 'abort' && cs.spec.rollout?.strategy !== 'Progressive')
        io.stderr(`◎ ClusterStack ${namespace}/${name} has no Progressive rollout (strategy Manual)\n`);
      io.stderr(
        `► ${verb === 'abort' ? 'aborting' : `${verb.replace(/e$/, '')}ing`} the rollout of ClusterStack ${name} in ${namespace} namespace\n`,
      );
      await client.mergePatch(API_VERSION, 'ClusterStack', name, namespace, PATCHES[verb].patch);
      io.stderr(`✔ rollout ${PATCHES[verb].done}\n`);
      return 0;
    } catch (err) {
      io.stderr(`✗ ${err instanceof Error ? err.message : String(err)}\n`);
      return 1;
    } finally {
      client.close();
    }
  },
};
