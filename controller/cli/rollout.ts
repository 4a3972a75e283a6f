// `stackflux rollout pause|resume|abort CLUSTERSTACK`: conveniences over patching
// spec.rollout of a ClusterStack (Progressive rollouts, controllers/rollout.ts).
//   pause   spec.rollout.paused=true: no new Cluster starts; Clusters in flight finish.
//   resume  spec.rollout.paused=false.
//   abort   spec.rollout.strategy=Manual: nothing moves any more; Clusters stay where they are.
import type { ClusterStack } from '../api/clusterstack.ts';
import { API_VERSION } from '../api/meta.ts';
import type { KubeObject } from '../runtime/client.ts';
import { type Command, UsageError } from './command.ts';
import { clientFromFlags, kubeFlags, namespaceFlag } from './kube.ts';

const PATCHES = {
  pause: { patch: { spec: { rollout: { paused: true } } }, done: 'paused: no new Cluster starts' },
  resume: { patch: { spec: { rollout: { paused: false } } }, done: 'resumed' },
  abort: {
    patch: { spec: { rollout: { strategy: 'Manual' } } },
    done: 'aborted: strategy Manual, Clusters stay where they are',
  },
} as const;

export const rolloutCommand: Command = {
  name: 'rollout',
  summary: "Pause, resume or abort a ClusterStack's Progressive rollout (patches spec.rollout)",
  usage: 'rollout pause|resume|abort CLUSTERSTACK [-n NAMESPACE] [flags]',
  examples: ['stackflux rollout pause ferrol -n team-a', 'stackflux rollout resume ferrol -n team-a'],
  flags: { ...kubeFlags },
  run: async (flags, positionals, io) => {
    const [verb, name, ...rest] = positionals;
    if (verb !== 'pause' && verb !== 'resume' && verb !== 'abort')
      throw new UsageError(`rollout needs pause, resume or abort, got "${verb ?? ''}"`);
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
