// ClusterStackRelease (cskr): one release (tag) of a ClusterStack, named after the tag, owned by
// the ClusterStack. It owns the Flux GitRepository + Kustomization that apply the release's
// cluster-class/ to the management cluster, and mirrors the Kustomization's readiness.

import { OCI_URL_PATTERN, REPO_URL_PATTERN, SERVICE_ACCOUNT_NAME_SCHEMA } from './clusterstack.ts';
import {
  type API_VERSION,
  conditionsSchema,
  durationSchema,
  localObjectReferenceSchema,
  type ObjectMeta,
  readyPrinterColumns,
} from './meta.ts';
import { type FromSchema, schema } from './schema.ts';

export const clusterStackReleaseSpecSchema = schema({
  type: 'object',
  required: ['clusterStack', 'tag', 'version', 'clusterClass', 'kubernetesVersion', 'source'],
  properties: {
    clusterStack: { type: 'string', description: 'Name of the owning ClusterStack.' },
    tag: { type: 'string', description: 'The Git tag of the release (= this object name).' },
    version: { type: 'string', description: 'Stack version, e.g. v3 or v0-sha.abc1234.' },
    clusterClass: { type: 'string', description: 'Name of the ClusterClass the release ships.' },
    kubernetesVersion: { type: 'string', description: 'Kubernetes major.minor, e.g. "1.30".' },
    source: {
      type: 'object',
      description: 'Copied from the ClusterStack: where the release is fetched from.',
      required: ['url'],
      properties: {
        url: { type: 'string', pattern: `${REPO_URL_PATTERN}|${OCI_URL_PATTERN}` },
        secretRef: localObjectReferenceSchema,
        path: { type: 'string' },
        insecure: { type: 'boolean', description: 'An OCI source over plain http.' },
      },
    },
    providerRef: {
      type: 'object',
      description:
        'Copied from the ClusterStack: the <Provider>ClusterStackReleaseTemplate the provider object ' +
        '(its kind without "Template", named after this release) is made from. Absent: no provider object.',
      required: ['apiVersion', 'kind', 'name'],
      properties: {
        apiVersion: { type: 'string' },
        kind: { type: 'string' },
        name: { type: 'string' },
      },
    },
    interval: durationSchema,
    timeout: durationSchema,
    suspend: { type: 'boolean' },
    serviceAccountName: SERVICE_ACCOUNT_NAME_SCHEMA,
  },
});
export type ClusterStackReleaseSpec = FromSchema<typeof clusterStackReleaseSpecSchema>;

/**
 * Most times the impact of one commit is computed again for a held Cluster: a render that differs
 * every time (a release reading randomness the engine cannot fix) must not keep the impact
 * controller's one worker busy for ever.
 */
export const MAX_IMPACT_RECOMPUTES = 3;

/** Most Clusters named in status.impact.failing (the count is always whole). */
export const MAX_IMPACT_LISTED = 20;

export const releaseImpactSchema = schema({
  type: 'object',
  description:
    'What moving the Clusters of a Progressive ClusterStack to this release changes on their fleet ' +
    'branches (stackflux preview, computed once when the release becomes the rollout target).',
  required: ['commit', 'computedAt'],
  properties: {
    commit: { type: 'string', description: 'status.commit of the release the impact was computed for.' },
    computedAt: { type: 'string', format: 'date-time' },
    clusters: { type: 'integer', minimum: 0, description: 'Clusters that would move to this release.' },
    clustersAffected: {
      type: 'integer',
      minimum: 0,
      description: 'Clusters whose fleet branch would change.',
    },
    objectsAdded: { type: 'integer', minimum: 0 },
    objectsChanged: { type: 'integer', minimum: 0 },
    objectsRemoved: { type: 'integer', minimum: 0 },
    clustersFailing: {
      type: 'integer',
      minimum: 0,
      description: 'Clusters that would fail to render this release.',
    },
    failing: {
      type: 'array',
      maxItems: MAX_IMPACT_LISTED,
      items: { type: 'string' },
      description: '<namespace>/<name>: <reason> of the first Clusters that would fail to render.',
    },
    error: {
      type: 'string',
      description: 'Why the impact could not be computed (the counts are then absent).',
    },
    renders: {
      type: 'object',
      additionalProperties: { type: 'string' },
      description:
        '<namespace>/<name> → digest of the fleet branch files the preview rendered for that Cluster at this release. ' +
        'The live render of a Cluster moving to this release must have the same digest, else the Cluster is held ' +
        '(ClusterAddon condition RenderApproved=False, reason RenderDiffersFromApproved) and the impact is computed again.',
    },
    recomputed: {
      type: 'integer',
      minimum: 0,
      description:
        'Times the impact of this commit was computed again because a live render differed from the recorded one (at most 3).',
    },
    digest: {
      type: 'string',
      description:
        'Digest of this impact (commit, counts and renders): the approval names it ' +
        '(annotation rollout.stackflux.io/approved-impact), so approving an older impact does not approve a newer one.',
    },
  },
});
export type ReleaseImpact = FromSchema<typeof releaseImpactSchema>;

export const clusterStackReleaseStatusSchema = schema({
  type: 'object',
  properties: {
    observedGeneration: { type: 'integer', format: 'int64' },
    commit: {
      type: 'string',
      description:
        'The commit the tag resolves to (sha1 hex); for a release read from GitHub release assets, github-assets:sha256:<digest of its csctl assets>; ' +
        'for a release read from an OCI registry, the manifest digest sha256:<hex>.',
    },
    kubernetesVersion: { type: 'string', description: 'Full Kubernetes version from stack.yaml.' },
    revision: { type: 'string', description: 'Expected Flux revision, <tag>@sha1:<commit>.' },
    lastAppliedRevision: { type: 'string', description: "The Kustomization's lastAppliedRevision." },
    gitRepository: { type: 'string', description: 'Name of the owned Flux GitRepository.' },
    kustomization: { type: 'string', description: 'Name of the owned Flux Kustomization.' },
    clusters: { type: 'integer', minimum: 0, description: 'Clusters that use the ClusterClass.' },
    beforeClusterUpgradeAddons: {
      type: 'array',
      maxItems: 256,
      items: { type: 'string' },
      description:
        "Addons the release's BeforeClusterUpgrade stage applies (cluster-stack-operator format, " +
        'clusteraddon.yaml); absent when it has none. A Progressive rollout applies them before it moves a Cluster.',
    },
    provider: {
      type: 'object',
      description: 'The provider object of this release and whether its provider has made it ready.',
      required: ['apiVersion', 'kind', 'name', 'ready'],
      properties: {
        apiVersion: { type: 'string' },
        kind: { type: 'string' },
        name: { type: 'string' },
        ready: { type: 'boolean' },
      },
    },
    impact: releaseImpactSchema,
    conditions: conditionsSchema,
  },
});
export type ClusterStackReleaseStatus = FromSchema<typeof clusterStackReleaseStatusSchema>;

/** The field manager of status.impact (the release controller owns the rest of the status). */
export const IMPACT_FIELD_MANAGER = 'stackflux-impact';

/** A release status without status.impact (what the release controller writes and compares). */
export function withoutImpact(status: ClusterStackReleaseStatus | undefined): ClusterStackReleaseStatus {
  const { impact: _i, ...rest } = status ?? {};
  return rest;
}

export interface ClusterStackRelease {
  apiVersion: typeof API_VERSION;
  kind: 'ClusterStackRelease';
  metadata: ObjectMeta;
  spec: ClusterStackReleaseSpec;
  status?: ClusterStackReleaseStatus;
}

export const clusterStackReleaseCrd = {
  kind: 'ClusterStackRelease',
  plural: 'clusterstackreleases',
  singular: 'clusterstackrelease',
  shortNames: ['cskr'],
  spec: clusterStackReleaseSpecSchema,
  status: clusterStackReleaseStatusSchema,
  printerColumns: [
    { name: 'ClusterStack', type: 'string', jsonPath: '.spec.clusterStack' },
    { name: 'K8s', type: 'string', jsonPath: '.status.kubernetesVersion' },
    { name: 'Commit', type: 'string', jsonPath: '.status.commit', priority: 1 },
    ...readyPrinterColumns,
  ],
} as const;
