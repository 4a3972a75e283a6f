// `stackflux install --export` against the real API server: every object passes a server-side
// dry-run apply (dryRun=All), i.e. what `kubectl apply --dry-run=server -f -` checks.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import type { CommandIO } from '../../../controller/cli/command.ts';
import { main } from '../../../controller/cli/main.ts';
import { KubeClient, type KubeObject } from '../../../controller/runtime/client.ts';
import { kubeConfigFrom, testEnv, uniqueName } from '../../support/env.ts';

function capture(): { io: CommandIO; out: () => string; err: () => string } {
  let out = '';
  let err = '';
  return {
    io: { stdout: (t) => (out += t), stderr: (t) => (err += t), env: {} },
    out: () => out,
    err: () => err,
  };
}

describe('stackflux install --export', () => {
  let client: KubeClient;
  const namespace = uniqueName('sf-install');

  before(async () => {
    client = new KubeClient(kubeConfigFrom(testEnv().kubeconfig), { qps: 200, burst: 200 });
    await client.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } });
  });
  after(async () => {
    await client.delete('v1', 'Namespace', namespace);
    client.close();
  });

  it('prints CRDs, generated RBAC, Deployment and Service that the API server accepts (dry-run)', async () => {
    const c = capture();
    assert.equal(await main(['install', '--export', '--namespace', namespace], c.io), 0, c.err());
    const objects = parseAllDocuments(c.out())
      .map((d) => d.toJS() as KubeObject | null)
      .filter((o): o is KubeObject => o !== null);
    const kinds = objects.map((o) => o.kind);
    for (const k of [
      'Namespace',
      'CustomResourceDefinition',
      'ServiceAccount',
      'ClusterRole',
      'ClusterRoleBinding',
      'Role',
      'RoleBinding',
      'Service',
      'Deployment',
    ]) {
      assert.ok(kinds.includes(k), `missing ${k}`);
    }
    assert.equal(kinds.filter((k) => k === 'CustomResourceDefinition').length, 3);
    const failures: string[] = [];
    for (const obj of objects) {
      try {
        await client.apply(obj, { dryRun: true, force: true, fieldManager: 'stackflux-install-test' });
      } catch (err) {
        failures.push(
          `${obj.kind} ${obj.metadata.name}: ${err instanceof Error ? err.message : String(err)}`,
        );
      }
    }
    assert.deepEqual(failures, []);
  });

  it('the Deployment runs non-root with a read-only root filesystem, probes, requests and a cache emptyDir', async () => {
    const c = capture();
    assert.equal(await main(['install', '--export', '--namespace', namespace], c.io), 0);
    const deployment = parseAllDocuments(c.out())
      .map((d) => d.toJS() as KubeObject)
      .find((o) => o.kind === 'Deployment') as KubeObject & {
      // biome-ignore lint/suspicious/noExplicitAny: a free-form pod spec read in a test
      spec: { template: { spec: Record<string, any> } };
    };
    const pod = deployment.spec.template.spec;
    const container = pod.containers[0];
    assert.equal(pod.securityContext.runAsNonRoot, true);
    assert.equal(container.securityContext.readOnlyRootFilesystem, true);
    assert.equal(container.livenessProbe.httpGet.path, '/healthz');
    assert.equal(container.readinessProbe.httpGet.path, '/readyz');
    assert.ok(container.resources.requests.cpu && container.resources.requests.memory);
    assert.match(container.image, /^ghcr\.io\/stackflux\/stackflux:/);
    assert.ok(
      pod.volumes.some((v: { name: string; emptyDir?: unknown }) => v.name === 'cache' && v.emptyDir),
    );
    assert.ok(container.args.includes('--cache-dir=/cache'));
  });
});
