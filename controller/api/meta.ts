// Shared API pieces: the group/version, object metadata as the reconcilers see it, and the
// schemas reused by several CRDs (metav1.Condition, secret references, durations).
import { type FromSchema, schema } from './schema.ts';

export const GROUP = 'stackflux.io';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}` as const;

/** Labels stackflux puts on what it creates, so `-l` selectors find them. */
export const LABEL_CLUSTER_STACK = 'stackflux.io/clusterstack';
export const LABEL_RELEASE = 'stackflux.io/release';
export const LABEL_CLUSTER = 'stackflux.io/cluster';
export const LABEL_ADDON = 'stackflux.io/addon';

/**
 * Flux's reconcile request annotation (fluxcd/pkg apis/meta ReconcileRequestAnnotation): its value
 * is a token (`flux reconcile` writes an RFC 3339 time); any change requests a reconcile now,
 * outside the interval. The controller acknowledges it in status.lastHandledReconcileAt.
 */
export const RECONCILE_REQUEST_ANNOTATION = 'reconcile.fluxcd.io/requestedAt';
/** Annotations on a provider object: where its release's files are (the same tree stackflux read). */
export const ANNOTATION_SOURCE_URL = 'stackflux.io/source-url';
export const ANNOTATION_SOURCE_PATH = 'stackflux.io/source-path';
export const ANNOTATION_TAG = 'stackflux.io/tag';
export const ANNOTATION_COMMIT = 'stackflux.io/commit';

/**
 * Label (value "true") a Secret needs before stackflux uses it as a ClusterStack's secretRef: the
 * Secret's owner allows stackflux to send it to the source URL a ClusterStack names.
 */
export const LABEL_SOURCE_CREDENTIALS = 'stackflux.io/source-credentials';

/**
 * Label (value "true") a source Secret needs before its credentials go over plain http (an OCI
 * source with `insecure: true`): anyone on the path reads them there, so the owner says so.
 */
export const LABEL_ALLOW_PLAIN_HTTP = 'stackflux.io/allow-plain-http';

/** Label of ClusterRoles aggregated into stackflux's controller role (Cluster API's pattern). */
export const LABEL_AGGREGATE_TO_CONTROLLER = 'stackflux.io/aggregate-to-controller';

/** Finalizer that keeps a ClusterStackRelease while a Cluster uses its ClusterClass. */
export const FINALIZER_RELEASE_IN_USE = 'stackflux.io/release-in-use';

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

/** The part of metav1.ObjectMeta the reconcilers read or write. */
export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  generation?: number;
  resourceVersion?: string;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  ownerReferences?: OwnerReference[];
}

/** Duration in the Go `time.ParseDuration` form Flux accepts ("30s", "5m", "1h30m"). */
export const durationSchema = schema({
  type: 'string',
  pattern: '^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$',
});

export const localObjectReferenceSchema = schema({
  type: 'object',
  description: 'A reference to an object in the same namespace.',
  required: ['name'],
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 253 },
  },
});
export type LocalObjectReference = FromSchema<typeof localObjectReferenceSchema>;

/** metav1.Condition, as the Kubernetes API conventions and kstatus expect it. */
export const conditionSchema = schema({
  type: 'object',
  description: 'Condition contains details for one aspect of the current state of this API Resource.',
  required: ['type', 'status', 'lastTransitionTime', 'reason', 'message'],
  properties: {
    type: {
      type: 'string',
      maxLength: 316,
      pattern:
        '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$',
    },
    status: { type: 'string', enum: ['True', 'False', 'Unknown'] },
    observedGeneration: { type: 'integer', format: 'int64', minimum: 0 },
    lastTransitionTime: { type: 'string', format: 'date-time' },
    reason: {
      type: 'string',
      minLength: 1,
      maxLength: 1024,
      pattern: '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$',
    },
    message: { type: 'string', maxLength: 32768 },
  },
});
export type Condition = FromSchema<typeof conditionSchema>;
export type ConditionStatus = Condition['status'];

export const conditionsSchema = schema({
  type: 'array',
  description: 'Ready is the summary; Reconciling and Stalled follow kstatus.',
  items: conditionSchema,
  'x-kubernetes-list-type': 'map',
  'x-kubernetes-list-map-keys': ['type'],
});

/** Condition types and reasons shared by the stackflux kinds. */
export const ConditionType = {
  Ready: 'Ready',
  Reconciling: 'Reconciling',
  Stalled: 'Stalled',
  SourceReady: 'SourceReady',
  /** ClusterStack: its providerRef names a template of a served kind that exists. */
  ProviderTemplateReady: 'ProviderTemplateReady',
  /** ClusterStackRelease: its provider object exists and its provider made it ready. */
  ProviderReady: 'ProviderReady',
  /** ClusterAddon of a csctl release: its addons' waitForPostConditions are Flux health checks. */
  PostConditionsChecked: 'PostConditionsChecked',
  /** ClusterAddon of a csctl release: its addons' waitForPreConditions are Flux gate Kustomizations. */
  PreConditionsChecked: 'PreConditionsChecked',
} as const;

/** meta.ReconcileRequestStatus of Flux, the field `flux reconcile` and Flux's tooling wait on. */
export const lastHandledReconcileAtSchema = schema({
  type: 'string',
  description:
    'The value of the most recent reconcile.fluxcd.io/requestedAt annotation handled, so a change ' +
    'of the annotation value can be detected (Flux meta.ReconcileRequestStatus).',
});

/** Printer column showing spec.suspend, the SUSPENDED column of `flux get`. */
export const suspendedPrinterColumn = {
  name: 'Suspended',
  type: 'boolean',
  jsonPath: '.spec.suspend',
} as const;

/** Printer columns every stackflux kind ends with: the Ready condition, its reason, the age. */
export const readyPrinterColumns = [
  { name: 'Ready', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
  { name: 'Reason', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].reason' },
  { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
] as const;
