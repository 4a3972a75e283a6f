// ClusterStack (csk): subscribes to the releases of one cluster stack (provider, name,
// Kubernetes minor version, channel) published as Git tags. The spec keeps the field names of the
// Sovereign Cloud Stack cluster-stack-operator (clusterstack.x-k8s.io) so its users move over by
// changing apiVersion and adding `source`.
import {
  type API_VERSION,
  conditionsSchema,
  durationSchema,
  lastHandledReconcileAtSchema,
  localObjectReferenceSchema,
  type ObjectMeta,
  readyPrinterColumns,
  suspendedPrinterColumn,
} from './meta.ts';
import { labelSelectorSchema, rolloutSpecSchema, rolloutStatusSchema } from './rollout.ts';
import { type FromSchema, schema } from './schema.ts';

/** provider and name are single tag segments: lower-case alphanumerics, no dashes. */
export const TAG_SEGMENT_PATTERN = '^[a-z0-9]+$';
/** "1.30": Kubernetes major.minor the stack is built for. */
export const KUBERNETES_MINOR_PATTERN = '^[1-9][0-9]*\\.(0|[1-9][0-9]*)$';
/** "v3" (stable) or "v0-sha.abc1234" / "v0-sha-abc1234" (custom channel). */
export const STACK_VERSION_PATTERN = '^v(0|[1-9][0-9]*)(-[a-z0-9]+[.-][a-z0-9]+)?$';

/**
 * Release repository URLs: https, http or ssh (as Flux's GitRepository accepts), no credentials in
 * the URL, and no user or host starting with "-" (git would read it as an option). RE2 and
 * ECMAScript both accept this expression (CRD validation and sources/git.ts use it).
 */
export const REPO_URL_PATTERN =
  '^(https?://[A-Za-z0-9\\[][^@/\\s]*/\\S+|ssh://([A-Za-z0-9._][A-Za-z0-9._-]*@)?[A-Za-z0-9\\[][^@/:\\s]*(:[0-9]+)?/\\S+)$';

/**
 * OCI repository URLs, oci://host[:port]/repository (csctl releases pushed as OCI artifacts): no
 * credentials, query or fragment. sources/oci.ts parseOciUrl checks the repository grammar too.
 */
export const OCI_URL_PATTERN = '^oci://[A-Za-z0-9\\[][^@/?#\\s]*/[^@?#\\s]+$';

/**
 * Flux Kustomization spec.serviceAccountName for a release's cluster-class/: kustomize-controller
 * impersonates this ServiceAccount of the ClusterStack's namespace, so a release can do only what
 * its RBAC allows (least privilege) instead of everything kustomize-controller may do.
 */
export const SERVICE_ACCOUNT_NAME_SCHEMA = {
  type: 'string',
  description:
    "ServiceAccount (in this namespace) that Flux impersonates to apply each release's cluster-class/; " +
    "unset: kustomize-controller's own rights (or its --default-service-account).",
  pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$',
  maxLength: 253,
} as const;

export const clusterStackSourceSchema = schema({
  type: 'object',
  description:
    'Where releases are published: a Git repository (tags via ls-remote), a GitHub repository ' +
    '(GitHub Releases API) or an OCI repository (csctl release artifacts). Exactly one of git, github and oci.',
  properties: {
    git: {
      type: 'object',
      required: ['url'],
      properties: {
        url: {
          type: 'string',
          description: 'Repository URL; only https, http and ssh URLs. Credentials never go in the URL.',
          pattern: REPO_URL_PATTERN,
        },
        secretRef: {
          ...localObjectReferenceSchema,
          description:
            'Secret with username/password (or bearer token) for http(s), identity/known_hosts for ssh; ' +
            'the same keys as a Flux GitRepository secret.',
        },
      },
    },
    github: {
      type: 'object',
      required: ['owner', 'repo'],
      properties: {
        owner: { type: 'string', minLength: 1, pattern: '^[A-Za-z0-9][A-Za-z0-9-]*$' },
        repo: { type: 'string', minLength: 1, pattern: '^[A-Za-z0-9._-]+$' },
        secretRef: {
          ...localObjectReferenceSchema,
          description: 'Secret with a `token` key for the GitHub API and clones.',
        },
      },
    },
    oci: {
      type: 'object',
      required: ['url'],
      properties: {
        url: {
          type: 'string',
          description:
            'oci://host[:port]/repository holding one csctl release artifact per tag; a release is pinned ' +
            'to the manifest digest it was validated at.',
          pattern: OCI_URL_PATTERN,
          maxLength: 512,
        },
        secretRef: {
          ...localObjectReferenceSchema,
          description:
            'Secret with username/password, a `token` (registry token, sent as the bearer), or a ' +
            'kubernetes.io/dockerconfigjson Secret (its auths entry of the registry host).',
        },
        insecure: {
          type: 'boolean',
          description: 'Plain http to the registry (and its token realm); default https only.',
          default: false,
        },
      },
    },
    path: {
      type: 'string',
      description: 'Folder of the stack inside the repository (holds stack.yaml); empty for the root.',
      pattern: '^([A-Za-z0-9_-][A-Za-z0-9._-]*(/[A-Za-z0-9_-][A-Za-z0-9._-]*)*)?$',
      maxLength: 512,
    },
  },
  'x-kubernetes-validations': [
    {
      rule: '(has(self.git) ? 1 : 0) + (has(self.github) ? 1 : 0) + (has(self.oci) ? 1 : 0) == 1',
      message: 'exactly one of git, github and oci must be set',
    },
  ],
});
export type ClusterStackSource = FromSchema<typeof clusterStackSourceSchema>;

export const clusterStackSpecSchema = schema({
  type: 'object',
  required: ['provider', 'name', 'kubernetesVersion', 'source'],
  properties: {
    provider: {
      type: 'string',
      description: 'Provider of the cluster stack, the first segment of its tags (e.g. docker).',
      pattern: TAG_SEGMENT_PATTERN,
      maxLength: 20,
    },
    name: {
      type: 'string',
      description: 'Name of the cluster stack, the second segment of its tags (e.g. ferrol).',
      pattern: TAG_SEGMENT_PATTERN,
      maxLength: 20,
    },
    kubernetesVersion: {
      type: 'string',
      description: 'Kubernetes major.minor version of the stack, e.g. "1.30".',
      pattern: KUBERNETES_MINOR_PATTERN,
    },
    channel: {
      type: 'string',
      description: 'stable: tags ...-vN. custom: tags ...-v0-<channel>-<suffix>, e.g. v0-sha-abc1234.',
      enum: ['stable', 'custom'],
      default: 'stable',
    },
    versions: {
      type: 'array',
      description: 'Pinned versions that are kept available, e.g. [v1, v3] or [v0-sha.abc1234].',
      items: { type: 'string', pattern: STACK_VERSION_PATTERN },
      'x-kubernetes-list-type': 'set',
      maxItems: 100,
    },
    autoSubscribe: {
      type: 'boolean',
      description: 'Follow the latest release of the channel automatically.',
      default: true,
    },
    noProvider: {
      type: 'boolean',
      description:
        'true: releases of this stack need no provider-specific object (no providerRef). One of ' +
        'noProvider and providerRef must be set, as in the cluster-stack-operator.',
      default: false,
    },
    providerRef: {
      type: 'object',
      description:
        'The <Provider>ClusterStackReleaseTemplate (in this namespace) whose spec.template.spec is the ' +
        'spec of the <Provider>ClusterStackRelease created for every release. The release is usable ' +
        'only once that object is ready (status.ready or a Ready condition). Ignored with noProvider.',
      properties: {
        apiVersion: { type: 'string' },
        kind: { type: 'string' },
        name: { type: 'string' },
        namespace: { type: 'string', description: 'Ignored: the template is read from this namespace.' },
      },
    },
    source: clusterStackSourceSchema,
    serviceAccountName: SERVICE_ACCOUNT_NAME_SCHEMA,
    interval: {
      ...durationSchema,
      description: 'How often the source is listed and the Flux objects reconcile.',
      default: '5m',
    },
    timeout: {
      ...durationSchema,
      description: 'Timeout of the Flux Kustomization that applies a release (apply + wait).',
      default: '5m',
    },
    suspend: {
      type: 'boolean',
      description:
        'Stop listing the source and creating or deleting ClusterStackReleases; existing ones stay ' +
        '(`stackflux suspend|resume clusterstack`, like `flux suspend`).',
      default: false,
    },
    addons: {
      type: 'array',
      description: 'Enable or disable addons of the stack for every Cluster using it (default: enabled).',
      items: {
        type: 'object',
        required: ['name', 'enabled'],
        properties: {
          name: { type: 'string', pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$', maxLength: 63 },
          enabled: { type: 'boolean' },
        },
      },
      'x-kubernetes-list-type': 'map',
      'x-kubernetes-list-map-keys': ['name'],
      maxItems: 100,
    },
    values: {
      type: 'object',
      description:
        'Central addon values; they win over per-cluster values and the addon defaults of the release.',
      'x-kubernetes-preserve-unknown-fields': true,
    },
    rollout: rolloutSpecSchema,
    clusterNamespaceSelector: {
      ...labelSelectorSchema,
      description:
        'Namespaces whose Clusters may use the releases of this ClusterStack (a Cluster names a ClusterClass ' +
        "of another namespace with classRef.namespace): their addons are rendered with this stack's central " +
        'values, and they keep its releases from being garbage-collected. Clusters of this namespace always ' +
        'may; unset: no other namespace; {} (empty): every namespace. Selects on Namespace labels ' +
        '(kubernetes.io/metadata.name is the name).',
    },
  },
});
export type ClusterStackSpec = FromSchema<typeof clusterStackSpecSchema>;

export const releaseSummarySchema = schema({
  type: 'object',
  required: ['name', 'version', 'ready'],
  properties: {
    name: { type: 'string', description: 'ClusterStackRelease name (= the tag).' },
    version: { type: 'string' },
    ready: { type: 'boolean' },
    reason: { type: 'string' },
    message: { type: 'string' },
    latest: { type: 'boolean' },
    pinned: { type: 'boolean' },
    inUse: { type: 'boolean', description: 'A Cluster in the namespace uses its ClusterClass.' },
    clusters: { type: 'integer', minimum: 0, description: 'How many Clusters use its ClusterClass.' },
  },
});
export type ReleaseSummary = FromSchema<typeof releaseSummarySchema>;

export const sourceStatusSchema = schema({
  type: 'object',
  description: 'What the last listing of the source returned.',
  properties: {
    url: { type: 'string' },
    lastListedTime: { type: 'string', format: 'date-time' },
    tags: { type: 'integer', minimum: 0, description: 'Tags listed.' },
    matching: { type: 'integer', minimum: 0, description: 'Tags that are releases of this stack.' },
    ignored: { type: 'integer', minimum: 0, description: 'Tags of other stacks or channels.' },
    malformed: { type: 'integer', minimum: 0, description: 'Look-alike tags that do not parse.' },
    malformedTags: {
      type: 'array',
      description: 'The first malformed tags with the reason (at most 20).',
      maxItems: 20,
      items: {
        type: 'object',
        required: ['tag', 'reason'],
        properties: { tag: { type: 'string' }, reason: { type: 'string' } },
      },
    },
  },
});
export type SourceStatus = FromSchema<typeof sourceStatusSchema>;

export const clusterStackStatusSchema = schema({
  type: 'object',
  properties: {
    observedGeneration: { type: 'integer', format: 'int64' },
    latestRelease: { type: 'string', description: 'The newest release of the channel (a tag).' },
    usableVersions: { type: 'string', description: 'Versions whose release is Ready, e.g. "v2, v3".' },
    summary: {
      type: 'array',
      items: releaseSummarySchema,
      'x-kubernetes-list-type': 'map',
      'x-kubernetes-list-map-keys': ['name'],
    },
    source: sourceStatusSchema,
    rollout: rolloutStatusSchema,
    lastHandledReconcileAt: lastHandledReconcileAtSchema,
    conditions: conditionsSchema,
  },
});
export type ClusterStackStatus = FromSchema<typeof clusterStackStatusSchema>;

export interface ClusterStack {
  apiVersion: typeof API_VERSION;
  kind: 'ClusterStack';
  metadata: ObjectMeta;
  spec: ClusterStackSpec;
  status?: ClusterStackStatus;
}

export const clusterStackCrd = {
  kind: 'ClusterStack',
  plural: 'clusterstacks',
  singular: 'clusterstack',
  shortNames: ['csk'],
  spec: clusterStackSpecSchema,
  status: clusterStackStatusSchema,
  printerColumns: [
    { name: 'Provider', type: 'string', jsonPath: '.spec.provider' },
    { name: 'Stack', type: 'string', jsonPath: '.spec.name' },
    { name: 'K8s', type: 'string', jsonPath: '.spec.kubernetesVersion' },
    { name: 'Channel', type: 'string', jsonPath: '.spec.channel', priority: 1 },
    { name: 'Latest', type: 'string', jsonPath: '.status.latestRelease' },
    { name: 'Usable', type: 'string', jsonPath: '.status.usableVersions' },
    { name: 'Rollout', type: 'string', jsonPath: '.status.rollout.phase', priority: 1 },
    suspendedPrinterColumn,
    ...readyPrinterColumns,
  ],
} as const;
