// csctl-layout releases for e2e tests: stacks/docker-csoferrol-1-30* copied into a release
// repository and tagged as csctl names them, with the cluster-class edited to a ClusterClass the
// test environment serves (v1beta2) where a test needs its release Ready.
import assert from 'node:assert/strict';
import { cpSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ClusterStack } from '../../controller/api/clusterstack.ts';
import { API_VERSION } from '../../controller/api/meta.ts';
import { readReleaseDescription } from '../../controller/releases/format.ts';
import { parseReleaseTag } from '../../controller/releases/tags.ts';
import { binaryFilesOf } from '../../controller/releases/tree.ts';
import type { KubeObject } from '../../controller/runtime/client.ts';
import { readStackDir } from '../../hack/lib/stack-dir.ts';
import { packageCsctlRelease } from './csctl-assets.ts';
import { CAPI, git, ROOT } from './e2e.ts';
import { csoAddonReference } from './goengine.ts';

/** A release tag of the csoferrol stacks (both layouts are the same stack, docker-csoferrol-1-30). */
export const csoferrolTag = (version: string): string => `docker-csoferrol-1-30-${version}`;

/** v1beta2's ClusterClass over the chart's own templates, through a helper of the chart. */
const V1BETA2_CLASS = `apiVersion: ${CAPI}
kind: ClusterClass
metadata:
  name: {{ include "csoferrol.prefix" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "csoferrol.labels" . | nindent 4 }}
spec:
  infrastructure:
    templateRef:
      {{- include "test.templateRef" (list . "infrastructure.cluster.x-k8s.io/v1beta1" "DockerClusterTemplate" "cluster") | nindent 6 }}
  controlPlane:
    templateRef:
      {{- include "test.templateRef" (list . "controlplane.cluster.x-k8s.io/v1beta1" "KubeadmControlPlaneTemplate" "control-plane") | nindent 6 }}
    machineInfrastructure:
      templateRef:
        {{- include "test.templateRef" (list . "infrastructure.cluster.x-k8s.io/v1beta1" "DockerMachineTemplate" "machine") | nindent 8 }}
  workers:
    machineDeployments:
      - class: default-worker
        bootstrap:
          templateRef:
            {{- include "test.templateRef" (list . "bootstrap.cluster.x-k8s.io/v1beta1" "KubeadmConfigTemplate" "worker") | nindent 12 }}
        infrastructure:
          templateRef:
            {{- include "test.templateRef" (list . "infrastructure.cluster.x-k8s.io/v1beta1" "DockerMachineTemplate" "machine") | nindent 12 }}
`;
const TEMPLATE_REF_HELPER = `
{{- define "test.templateRef" -}}
apiVersion: {{ index . 1 }}
kind: {{ index . 2 }}
name: {{ include "csoferrol.prefix" (index . 0) }}-{{ index . 3 }}
{{- end }}
`;

/**
 * Edits a copied stack's cluster-class chart to a v1beta2 ClusterClass (the test environment
 * serves no v1beta1) over the chart's own helpers and templates.
 */
export function servedClusterClass(dir: string): void {
  writeFileSync(join(dir, 'cluster-class', 'templates', 'cluster-class.yaml'), V1BETA2_CLASS);
  const helpers = join(dir, 'cluster-class', 'templates', '_helpers.tpl');
  writeFileSync(helpers, readFileSync(helpers, 'utf8') + TEMPLATE_REF_HELPER);
}

/**
 * The csctl example stack docker-csoferrol-1-30 (its ClusterClass as the test environment serves
 * it) packaged as `csctl create` does, for tests that publish it as assets (GitHub, OCI); the
 * stack is copied to <work>/stack-<version>.
 */
export function packageCsoferrolRelease(work: string, version: string): Map<string, Uint8Array> {
  const stackCopy = join(work, `stack-${version}`);
  cpSync(join(ROOT, 'stacks', 'docker-csoferrol-1-30'), stackCopy, { recursive: true });
  servedClusterClass(stackCopy);
  return packageCsctlRelease(stackCopy, version);
}

/**
 * Copies stacks/<stack> into <repoDir>/stack (edited), commits and tags it as csctl names the
 * release (docker-csoferrol-1-30-<version>). Returns the tag.
 */
export function cutCsctlRelease(
  repoDir: string,
  stack: string,
  version: string,
  edit?: (dir: string) => void,
): string {
  const target = join(repoDir, 'stack');
  rmSync(target, { recursive: true, force: true });
  cpSync(join(ROOT, 'stacks', stack), target, { recursive: true });
  edit?.(target);
  git(repoDir, 'add', '-A');
  git(repoDir, 'commit', '-q', '--allow-empty', '-m', csoferrolTag(version));
  git(repoDir, 'tag', csoferrolTag(version));
  return csoferrolTag(version);
}

/** The ClusterStack `csoferrol` of the csctl example stacks (docker, 1.30) at `versions` of `repoUrl`'s path stack/. */
export function csoferrolClusterStack(
  ns: string,
  repoUrl: string,
  versions: string[],
  spec: Partial<ClusterStack['spec']> = {},
): ClusterStack & KubeObject {
  return {
    apiVersion: API_VERSION,
    kind: 'ClusterStack',
    metadata: { name: 'csoferrol', namespace: ns },
    spec: {
      noProvider: true,
      provider: 'docker',
      name: 'csoferrol',
      kubernetesVersion: '1.30',
      autoSubscribe: false,
      versions,
      interval: '1m',
      source: { git: { url: repoUrl }, path: 'stack' },
      ...spec,
    },
  };
}

/** What CSO renders for `cluster` from the stack in `dir` released as `tag`: every applied addon's objects. */
export function csoReleaseObjects(
  dir: string,
  tag: string,
  cluster: Record<string, unknown>,
): Record<string, unknown>[] {
  const tree = readStackDir(dir);
  const parsed = parseReleaseTag(tag);
  assert.ok(parsed.ok);
  const read = readReleaseDescription(tree, parsed.value);
  assert.ok(read.ok, read.ok ? '' : read.errors.join('; '));
  const names = [...new Set(read.value.addons.filter((a) => a.action === 'apply').map((a) => a.name))];
  return names.flatMap((name) => {
    const a = read.value.addons.find((x) => x.name === name);
    assert.ok(a);
    return csoAddonReference(dir, {
      format: 'csctl',
      tree,
      binary: binaryFilesOf(tree),
      addon: name,
      chartPath: a.path,
      ...(a.valuesTemplate !== undefined ? { valuesTemplate: a.valuesTemplate } : {}),
      kubernetesVersion: read.value.kubernetesVersion,
      cluster,
    });
  });
}
