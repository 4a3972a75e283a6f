// Fakes the ClusterStackRelease collaborators' unit tests share: a release as the informer holds
// it, and the recording client, Event recorder and informer of the ClusterAddon tests.
import type { ClusterStackRelease } from '../../../../controller/api/clusterstackrelease.ts';
import type { KubeObject } from '../../../../controller/runtime/client.ts';

export { FakeInformer, ko, notFound, recordingClient, recordingEvents } from '../clusteraddon/fakes.ts';

export type Release = ClusterStackRelease & KubeObject;

export const TAG = 'docker-ferrol-1-30-v2';
export const URL = 'https://git.example/stacks.git';

/** A release "team-a/r1" of TAG from URL; `patch` overrides spec, status and metadata fields. */
export function release(
  patch: {
    spec?: Partial<ClusterStackRelease['spec']>;
    status?: ClusterStackRelease['status'];
    metadata?: Partial<KubeObject['metadata']>;
  } = {},
): Release {
  return {
    apiVersion: 'stackflux.io/v1alpha1',
    kind: 'ClusterStackRelease',
    metadata: { name: 'r1', namespace: 'team-a', resourceVersion: '7', ...patch.metadata },
    spec: {
      clusterStack: 'docker',
      clusterClass: 'docker-ferrol-1-30-v2',
      tag: TAG,
      source: { url: URL },
      ...patch.spec,
    },
    ...(patch.status !== undefined ? { status: patch.status } : {}),
  } as Release;
}
