// Flux objects for the cache tests: what stackflux applies (built by the real releases/flux.ts
// from the default templates, as the golden case full-pipeline's prod-1.cni and prod-1-addons)
// and the same object as the API server returns it once Flux converged it.

import { addonKustomization, fleetGitRepository } from '../../../controller/releases/flux.ts';
import { loadFluxTemplates } from '../../../controller/releases/flux-templates.ts';
import type { KubeObject } from '../../../controller/runtime/client.ts';

const templates = loadFluxTemplates();
const owners = [
  {
    apiVersion: 'stackflux.io/v1alpha1',
    kind: 'ClusterAddon',
    name: 'prod-1',
    uid: '37e48ade-7d00-5683-1bde-3cbd2bd8e8d5',
    controller: true,
    blockOwnerDeletion: true,
  },
];
const revision = 'stackflux/team-a/prod-1@sha1:b2d20b4d806e1b731370ad96f800eda4a8dd8583';

/** The addon Kustomization prod-1.cni as stackflux applies it. */
export function desiredKustomization(): KubeObject {
  return addonKustomization(templates, {
    cluster: 'prod-1',
    namespace: 'team-a',
    addon: 'cni',
    sourceName: 'prod-1-addons',
    dependsOn: [],
    targetNamespace: 'kube-system',
    ownerReferences: owners,
  }) as unknown as KubeObject;
}

/** The fleet GitRepository prod-1-addons as stackflux applies it. */
export function desiredGitRepository(): KubeObject {
  return fleetGitRepository(templates, {
    name: 'prod-1-addons',
    namespace: 'team-a',
    cluster: 'prod-1',
    url: 'https://git.example.com/platform/fleet.git',
    branch: 'stackflux/team-a/prod-1',
    secretRef: 'fleet-auth',
    ownerReferences: owners,
  }) as unknown as KubeObject;
}

const condition = (type: string, reason: string, message: string) => ({
  type,
  status: 'True',
  reason,
  message,
  lastTransitionTime: '2026-01-01T00:00:00Z',
  observedGeneration: 1,
});

/** The Flux status of a converged object of this kind (kustomize- / source-controller's). */
function fluxStatus(kind: string): Record<string, unknown> {
  if (kind === 'GitRepository') {
    return {
      artifact: {
        digest: 'sha256:0f1e',
        lastUpdateTime: '2026-01-01T00:05:12Z',
        path: 'gitrepository/team-a/prod-1-addons/b2d2.tar.gz',
        revision,
        size: 2048,
        url: 'http://source-controller.flux-system.svc.cluster.local./gitrepository/team-a/prod-1-addons/b2d2.tar.gz',
      },
      conditions: [
        condition('Ready', 'Succeeded', `stored artifact for revision '${revision}'`),
        condition('ArtifactInStorage', 'Succeeded', `stored artifact for revision '${revision}'`),
      ],
      lastHandledReconcileAt: '2026-01-01T00:05:12Z',
      observedGeneration: 1,
    };
  }
  return {
    conditions: [
      condition('Ready', 'ReconciliationSucceeded', `Applied revision: ${revision}`),
      condition('Healthy', 'Succeeded', 'Health check passed in 1.203s'),
    ],
    inventory: { entries: [{ id: 'kube-system_cni-config__ConfigMap', v: 'v1' }] },
    lastAppliedRevision: revision,
    lastAttemptedRevision: revision,
    observedGeneration: 1,
  };
}

/**
 * desired as the API server returns it once Flux converged it: server metadata, a spec default
 * (force / timeout), managedFields and Flux's status; parsed from JSON text like the client does.
 */
export function converged(desired: KubeObject): KubeObject {
  return JSON.parse(
    JSON.stringify({
      ...desired,
      metadata: {
        ...desired.metadata,
        uid: 'b1f3c0de-0000-4000-8000-000000000001',
        resourceVersion: '4242',
        generation: 1,
        creationTimestamp: '2026-01-01T00:00:00Z',
        finalizers: ['finalizers.fluxcd.io'],
        managedFields: [
          { manager: 'stackflux', operation: 'Apply', fieldsType: 'FieldsV1', fieldsV1: {} },
          { manager: 'flux', operation: 'Update', subresource: 'status', fieldsV1: {} },
        ],
      },
      spec: { timeout: '60s', force: false, ...(desired.spec as object) },
      status: fluxStatus(desired.kind),
    }),
  ) as KubeObject;
}
