// Proof the test environment is real: Flux pulls a tag from the loopback Git server and
// applies it INTO the workload cluster through a Cluster API-style kubeconfig Secret, prunes
// on the next tag, and kube-controller-manager garbage-collects owned objects.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ApiException, type KubernetesObject, PatchStrategy } from '@kubernetes/client-node';
import { createRepo, workloadKubeconfigSecret } from '../../hack/lib/testenv.ts';
import { git } from '../support/e2e.ts';
import { clients, eventually, testEnv, uniqueName } from '../support/env.ts';

interface FluxStatus {
  status?: {
    lastAppliedRevision?: string;
    conditions?: Array<{ type: string; status: string; message?: string }>;
  };
}

const env = testEnv();
const { mgmt, workload } = clients(env);
const ns = uniqueName('foundation');
const workloadNs = `${ns}-apps`;
const work = mkdtempSync(join(tmpdir(), 'stackflux-foundation-'));

function configMapYaml(name: string): string {
  return `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${name}\n  namespace: ${workloadNs}\ndata:\n  from: stackflux-foundation\n`;
}

async function readOrUndefined<T extends KubernetesObject>(
  api: typeof mgmt,
  obj: KubernetesObject,
): Promise<T | undefined> {
  try {
    return (await api.read(obj as T & { metadata: { name: string } })) as T;
  } catch (err) {
    if (err instanceof ApiException && err.code === 404) return undefined;
    throw err;
  }
}

const gitRepository = {
  apiVersion: 'source.toolkit.fluxcd.io/v1',
  kind: 'GitRepository',
  metadata: { name: 'release', namespace: ns },
};
const kustomization = {
  apiVersion: 'kustomize.toolkit.fluxcd.io/v1',
  kind: 'Kustomization',
  metadata: { name: 'apps', namespace: ns },
};
const workloadConfigMap = (name: string) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name, namespace: workloadNs },
});

async function appliedRevision(): Promise<string | undefined> {
  const k = await readOrUndefined<KubernetesObject & FluxStatus>(mgmt, kustomization);
  const ready = k?.status?.conditions?.find((c) => c.type === 'Ready');
  return ready?.status === 'True' ? k?.status?.lastAppliedRevision : undefined;
}

describe('test environment: Flux applies Git tags into the workload cluster', () => {
  let repoUrl = '';

  before(async () => {
    repoUrl = await createRepo(env, ns);
    await mgmt.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
    // Cluster API stores a workload cluster's admin kubeconfig as <cluster>-kubeconfig, key "value".
    const secret = workloadKubeconfigSecret(ns, 'wl', readFileSync(env.workloadKubeconfig, 'utf8'));
    await mgmt.create(secret as KubernetesObject);
    git(work, 'init', '-q', '-b', 'main');
  });

  after(async () => {
    rmSync(work, { recursive: true, force: true });
    await mgmt.delete({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } }).catch(() => undefined);
  });

  it('applies tag v1 into the workload cluster and reports v1@sha1:<commit>', async () => {
    writeFileSync(
      join(work, 'namespace.yaml'),
      `apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ${workloadNs}\n`,
    );
    writeFileSync(join(work, 'a.yaml'), configMapYaml('a'));
    git(work, 'add', '.');
    git(work, 'commit', '-q', '-m', 'v1');
    git(work, 'tag', 'v1');
    git(work, 'push', '-q', repoUrl, 'main', 'v1');
    const commit = git(work, 'rev-parse', 'HEAD');

    await mgmt.create({
      ...gitRepository,
      spec: { url: repoUrl, interval: '1m', ref: { tag: 'v1' } },
    } as KubernetesObject);
    await mgmt.create({
      ...kustomization,
      spec: {
        interval: '1m',
        path: './',
        prune: true,
        sourceRef: { kind: 'GitRepository', name: 'release' },
        kubeConfig: { secretRef: { name: 'wl-kubeconfig', key: 'value' } },
        timeout: '1m',
      },
    } as KubernetesObject);

    const cm = await eventually('ConfigMap a in the workload cluster', () =>
      readOrUndefined(workload, workloadConfigMap('a')),
    );
    assert.equal(
      (cm as KubernetesObject & { data?: Record<string, string> }).data?.from,
      'stackflux-foundation',
    );
    const mgmtCopy = await readOrUndefined(mgmt, workloadConfigMap('a'));
    assert.equal(
      mgmtCopy,
      undefined,
      'the ConfigMap must land in the workload cluster, not the management cluster',
    );
    assert.equal(await eventually('Kustomization Ready at v1', appliedRevision), `v1@sha1:${commit}`);
  });

  it('moves to tag v2: prunes the removed object and applies the new one', async () => {
    git(work, 'rm', '-q', 'a.yaml');
    writeFileSync(join(work, 'b.yaml'), configMapYaml('b'));
    git(work, 'add', '.');
    git(work, 'commit', '-q', '-m', 'v2');
    git(work, 'tag', 'v2');
    git(work, 'push', '-q', repoUrl, 'main', 'v2');
    const commit = git(work, 'rev-parse', 'HEAD');

    await mgmt.patch(
      { ...gitRepository, spec: { ref: { tag: 'v2' } } } as KubernetesObject,
      undefined,
      undefined,
      undefined,
      undefined,
      PatchStrategy.MergePatch,
    );
    assert.equal(
      await eventually('Kustomization Ready at v2', async () => {
        const rev = await appliedRevision();
        return rev?.startsWith('v2@') ? rev : undefined;
      }),
      `v2@sha1:${commit}`,
    );
    assert.ok(await readOrUndefined(workload, workloadConfigMap('b')), 'ConfigMap b applied');
    await eventually('ConfigMap a pruned', async () =>
      (await readOrUndefined(workload, workloadConfigMap('a'))) ? undefined : true,
    );
  });

  it('garbage-collects an object whose owner is deleted (kube-controller-manager)', async () => {
    const owner: KubernetesObject = await mgmt.create({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'owner', namespace: ns },
    } as KubernetesObject);
    const uid = owner.metadata?.uid;
    assert.ok(uid);
    await mgmt.create({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name: 'child',
        namespace: ns,
        ownerReferences: [
          {
            apiVersion: 'v1',
            kind: 'ConfigMap',
            name: 'owner',
            uid,
            blockOwnerDeletion: true,
            controller: true,
          },
        ],
      },
    } as KubernetesObject);
    await mgmt.delete(
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'owner', namespace: ns } },
      undefined,
      undefined,
      undefined,
      undefined,
      'Background',
    );
    const child = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'child', namespace: ns } };
    await eventually(
      'child garbage-collected',
      async () => ((await readOrUndefined(mgmt, child)) ? undefined : true),
      { timeoutMs: 60_000 },
    );
  });
});
