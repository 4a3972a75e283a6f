// What the CLI commands that talk to a cluster share: the kubectl/flux connection flags and the
// client built from them.
import { KubeClient, loadKubeConfig } from '../runtime/client.ts';
import type { FlagSpec, FlagValues } from './command.ts';

/** --kubeconfig, --context, -n/--namespace (as kubectl and flux spell them). */
export const kubeFlags: Record<string, FlagSpec> = {
  kubeconfig: {
    type: 'string',
    description: 'path of a kubeconfig (default: $KUBECONFIG, ~/.kube/config)',
  },
  context: { type: 'string', description: 'kubeconfig context to use' },
  namespace: { type: 'string', short: 'n', description: 'namespace', default: 'default' },
};

/** A client for the cluster the flags name. */
export function clientFromFlags(flags: FlagValues, userAgent: string): KubeClient {
  const kubeconfig = typeof flags.kubeconfig === 'string' ? flags.kubeconfig : '';
  const context = typeof flags.context === 'string' ? flags.context : '';
  return new KubeClient(
    loadKubeConfig({ ...(kubeconfig ? { kubeconfig } : {}), ...(context ? { context } : {}) }),
    { userAgent },
  );
}

/** The -n/--namespace flag ('default' when empty). */
export function namespaceFlag(flags: FlagValues): string {
  return typeof flags.namespace === 'string' && flags.namespace !== '' ? flags.namespace : 'default';
}
