// The parts of the Flux v1 API (source.toolkit.fluxcd.io/v1, kustomize.toolkit.fluxcd.io/v1)
// stackflux writes and reads. Field names checked against the CRDs of source-controller and
// kustomize-controller v1.9.
import type { Condition, ObjectMeta } from './meta.ts';

export const FLUX_SOURCE_API_VERSION = 'source.toolkit.fluxcd.io/v1';
export const FLUX_KUSTOMIZE_API_VERSION = 'kustomize.toolkit.fluxcd.io/v1';
export const FLUX_HELM_API_VERSION = 'helm.toolkit.fluxcd.io/v2';

export interface GitRepository {
  apiVersion: typeof FLUX_SOURCE_API_VERSION;
  kind: 'GitRepository';
  metadata: ObjectMeta;
  spec: {
    interval: string;
    url: string;
    ref?: { tag?: string; branch?: string; commit?: string; semver?: string; name?: string };
    secretRef?: { name: string };
    ignore?: string;
    timeout?: string;
    suspend?: boolean;
  };
  status?: {
    observedGeneration?: number;
    conditions?: Condition[];
    /** artifact.revision is "<tag>@sha1:<commit>" for a tag ref. */
    artifact?: { revision?: string; digest?: string; url?: string; path?: string };
  };
}

export interface Kustomization {
  apiVersion: typeof FLUX_KUSTOMIZE_API_VERSION;
  kind: 'Kustomization';
  metadata: ObjectMeta;
  spec: {
    interval: string;
    timeout?: string;
    path?: string;
    prune: boolean;
    wait?: boolean;
    suspend?: boolean;
    targetNamespace?: string;
    sourceRef: { kind: string; name: string; namespace?: string };
    dependsOn?: { name: string; namespace?: string }[];
    kubeConfig?: { secretRef: { name: string; key?: string } };
    deletionPolicy?: 'MirrorPrune' | 'Delete' | 'WaitForTermination' | 'Orphan';
    /** ServiceAccount (same namespace) kustomize-controller impersonates to apply. */
    serviceAccountName?: string;
    /** Objects whose health is checked when `wait` is false (they need not be applied by it). */
    healthChecks?: { apiVersion?: string; kind: string; name: string; namespace?: string }[];
    /** CEL health checks per kind of applied object (kustomize-controller v1.5+). */
    healthCheckExprs?: {
      apiVersion: string;
      kind?: string;
      current: string;
      inProgress?: string;
      failed?: string;
    }[];
  };
  status?: {
    observedGeneration?: number;
    conditions?: Condition[];
    lastAppliedRevision?: string;
    lastAttemptedRevision?: string;
  };
}

/** The parts of a helm.toolkit.fluxcd.io/v2 HelmRelease stackflux reads (helm-controller v1.6). */
export interface HelmRelease {
  apiVersion: typeof FLUX_HELM_API_VERSION;
  kind: 'HelmRelease';
  metadata: ObjectMeta;
  spec: { suspend?: boolean; releaseName?: string; targetNamespace?: string; [key: string]: unknown };
  status?: {
    observedGeneration?: number;
    conditions?: Condition[];
    /** Newest first: the Helm releases helm-controller made (revision, chart version, values digest). */
    history?: {
      name?: string;
      namespace?: string;
      version?: number;
      status?: string;
      chartName?: string;
      chartVersion?: string;
      configDigest?: string;
    }[];
    lastAttemptedRevision?: string;
    lastAttemptedConfigDigest?: string;
  };
}
