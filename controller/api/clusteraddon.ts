// ClusterAddon (caddon): one per Cluster API Cluster whose topology names a ClusterClass of a
// cluster stack release; owned by the Cluster. Records which release and addons were rendered
// into the Cluster's branch of the fleet repo and their readiness in the workload cluster (from Flux).
import {
  type API_VERSION,
  conditionsSchema,
  lastHandledReconcileAtSchema,
  type ObjectMeta,
  readyPrinterColumns,
} from './meta.ts';
import { type FromSchema, schema } from './schema.ts';

export const clusterAddonSpecSchema = schema({
  type: 'object',
  required: ['cluster'],
  properties: {
    cluster: { type: 'string', description: 'Name of the Cluster API Cluster in this namespace.' },
    clusterStack: { type: 'string', description: 'The ClusterStack whose release the Cluster uses.' },
    release: { type: 'string', description: 'The ClusterStackRelease (tag) the Cluster uses.' },
  },
});
export type ClusterAddonSpec = FromSchema<typeof clusterAddonSpecSchema>;

export const addonStatusSchema = schema({
  type: 'object',
  required: ['name', 'ready'],
  properties: {
    name: { type: 'string' },
    ready: { type: 'boolean' },
    reason: { type: 'string' },
    message: { type: 'string' },
    release: { type: 'string', description: 'The release this addon was rendered from.' },
    stage: {
      type: 'string',
      description:
        'The addon stage of a cluster-stack-operator release (clusteraddon.yaml) this addon is in: AfterControlPlaneInitialized or BeforeClusterUpgrade. Unset when the release has no stages.',
    },
    kustomization: { type: 'string' },
    lastAppliedRevision: { type: 'string' },
    helmRelease: {
      type: 'string',
      description: 'A Helm-chart addon: its HelmRelease (applied by its Kustomization).',
    },
    helmRevision: {
      type: 'integer',
      description: "Revision of the addon's last Helm release in the workload cluster.",
    },
    chartVersion: { type: 'string', description: 'Chart version of the last Helm release.' },
    valuesDigest: {
      type: 'string',
      description: 'Digest of the values of the last Helm release (helm-controller configDigest).',
    },
  },
});
export type AddonStatus = FromSchema<typeof addonStatusSchema>;

export const clusterAddonStatusSchema = schema({
  type: 'object',
  properties: {
    observedGeneration: { type: 'integer', format: 'int64' },
    release: { type: 'string', description: 'The release the addons were last rendered from.' },
    fleetCommit: {
      type: 'string',
      description: "The tip commit of the Cluster's fleet branch holding the rendered files.",
    },
    fleetBranch: {
      type: 'string',
      description: "The Cluster's branch in the fleet repo (<prefix><namespace>/<cluster>).",
    },
    gitRepository: {
      type: 'string',
      description: "The Flux GitRepository (owned by this ClusterAddon) tracking the Cluster's branch.",
    },
    addons: {
      type: 'array',
      items: addonStatusSchema,
      'x-kubernetes-list-type': 'map',
      'x-kubernetes-list-map-keys': ['name'],
    },
    lastHandledReconcileAt: lastHandledReconcileAtSchema,
    heldRender: {
      type: 'object',
      description:
        "Set while the Cluster's move to a release is held because its live render differs from the render the release's approved impact recorded (condition RenderApproved=False): the impact controller computes the impact again.",
      required: ['release', 'digest'],
      properties: {
        release: { type: 'string' },
        impact: {
          type: 'string',
          description: 'status.impact.digest of the release the render was held against.',
        },
        digest: { type: 'string', description: 'Digest of the live render (fleet branch files).' },
      },
    },
    conditions: conditionsSchema,
  },
});
export type ClusterAddonStatus = FromSchema<typeof clusterAddonStatusSchema>;

export interface ClusterAddon {
  apiVersion: typeof API_VERSION;
  kind: 'ClusterAddon';
  metadata: ObjectMeta;
  spec: ClusterAddonSpec;
  status?: ClusterAddonStatus;
}

export const clusterAddonCrd = {
  kind: 'ClusterAddon',
  plural: 'clusteraddons',
  singular: 'clusteraddon',
  shortNames: ['caddon'],
  spec: clusterAddonSpecSchema,
  status: clusterAddonStatusSchema,
  printerColumns: [
    { name: 'Cluster', type: 'string', jsonPath: '.spec.cluster' },
    { name: 'Release', type: 'string', jsonPath: '.status.release' },
    ...readyPrinterColumns,
  ],
} as const;
