// `stackflux install --export` against the real API server: every object passes a server-side
// dry-run apply (dryRun=All), i.e. what `kubectl apply --dry-run=server -f -` checks.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import type { CommandIO } from '../../../controller/cli/command.ts';
import { main } from '../../../controller/cli/main.ts';
import { KubeClient, type KubeObject } from '../../../controller/runtime/client.ts';
import { EXTENSION_CONFIG_CRD, readCrds, storageVersionOnly } from '../../../hack/lib/testenv.ts';
import { eventually, kubeConfigFrom, testEnv, uniqueName } from '../../support/env.ts';

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
      'NetworkPolicy',
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

  it('--runtime-extension: the ExtensionConfig, Service port and mounted certificate the API server accepts (dry-run)', async () => {
    // Environments started before the ExtensionConfig CRD was among testenv's get it here, as testenv applies it.
    if (
      (await client.get('apiextensions.k8s.io/v1', 'CustomResourceDefinition', EXTENSION_CONFIG_CRD)) ===
      undefined
    ) {
      const [crd] = readCrds(testEnv().capiCrds, new Set([EXTENSION_CONFIG_CRD])).map(storageVersionOnly);
      assert.ok(crd, `${EXTENSION_CONFIG_CRD} in CAPI_CRDS`);
      await client.apply(crd as KubeObject, { force: true, fieldManager: 'stackflux-testenv' });
    }
    const c = capture();
    assert.equal(
      await main(['install', '--export', '--namespace', namespace, '--runtime-extension', 'secret'], c.io),
      0,
      c.err(),
    );
    const objects = parseAllDocuments(c.out())
      .map((d) => d.toJS() as KubeObject | null)
      .filter((o): o is KubeObject => o !== null);
    assert.equal(objects.filter((o) => o.kind === 'Certificate' || o.kind === 'Issuer').length, 0);
    // biome-ignore lint/suspicious/noExplicitAny: free-form objects read in a test
    const find = (kind: string) => objects.find((o) => o.kind === kind) as any;
    const extension = find('ExtensionConfig');
    assert.deepEqual(extension.spec.clientConfig.service, {
      name: 'stackflux-controller',
      namespace,
      port: 443,
    });
    assert.equal(
      extension.metadata.annotations['runtime.cluster.x-k8s.io/inject-ca-from-secret'],
      `${namespace}/stackflux-controller-runtime-extension-cert`,
    );
    const port = find('Service').spec.ports.find((p: { port: number }) => p.port === 443);
    assert.equal(port.targetPort, 'https-hooks');
    const pod = find('Deployment').spec.template.spec;
    assert.ok(pod.containers[0].ports.some((p: { name: string }) => p.name === 'https-hooks'));
    assert.ok(pod.containers[0].args.includes('--runtime-extension-addr=:9443'));
    assert.deepEqual(pod.volumes.find((v: { name: string }) => v.name === 'runtime-extension-cert').secret, {
      secretName: 'stackflux-controller-runtime-extension-cert',
    });
    await eventually(
      'the ExtensionConfig and the rest pass a server-side dry-run',
      async () => {
        for (const obj of objects)
          await client.apply(obj, { dryRun: true, force: true, fieldManager: 'stackflux-install-test' });
        return true;
      },
      { timeoutMs: 60_000 },
    );
  });

  it('--runtime-extension cert-manager adds a self-signed Issuer and a Certificate for the Service', async () => {
    const c = capture();
    assert.equal(
      await main(
        ['install', '--export', '--namespace', namespace, '--runtime-extension', 'cert-manager'],
        c.io,
      ),
      0,
    );
    const objects = parseAllDocuments(c.out()).map((d) => d.toJS() as KubeObject);
    // biome-ignore lint/suspicious/noExplicitAny: free-form objects read in a test
    const certificate = objects.find((o) => o.kind === 'Certificate') as any;
    assert.ok(objects.some((o) => o.kind === 'Issuer'));
    assert.deepEqual(certificate.spec.dnsNames, [
      `stackflux-controller.${namespace}.svc`,
      `stackflux-controller.${namespace}.svc.cluster.local`,
    ]);
    assert.equal(certificate.spec.secretName, 'stackflux-controller-runtime-extension-cert');
    const bad = capture();
    assert.equal(await main(['install', '--export', '--runtime-extension', 'self'], bad.io), 2);
    assert.match(bad.err(), /--runtime-extension must be cert-manager or secret/);
  });

  it('the NetworkPolicy with every port, Cluster API peers and an egress allow-list is served (issue 31 F9)', async () => {
    // The API server validates and stores it (server-side apply); the test environment has no CNI,
    // so nothing enforces it here: what each peer may reach is not measured.
    const c = capture();
    assert.equal(
      await main(
        [
          'install',
          '--export',
          '--namespace',
          namespace,
          '--runtime-extension=secret',
          '--network-policy-runtime-extension-namespaces=capi-system,*',
          '--network-policy-egress-cidrs=10.0.0.0/8,2001:db8::/32',
        ],
        c.io,
      ),
      0,
      c.err(),
    );
    const policy = parseAllDocuments(c.out())
      .map((d) => d.toJS() as KubeObject)
      .find((o) => o.kind === 'NetworkPolicy');
    assert.ok(policy);
    const stored = await client.apply(policy, { force: true, fieldManager: 'stackflux-install-test' });
    // biome-ignore lint/suspicious/noExplicitAny: a free-form object read in a test
    const spec = (stored as any).spec;
    assert.deepEqual(spec.policyTypes, ['Ingress', 'Egress']);
    assert.deepEqual(
      spec.ingress.map((r: { ports: { port: unknown }[] }) => r.ports[0]?.port),
      ['http-webhook', 'https-hooks', 'http-metrics'],
    );
    assert.deepEqual(spec.egress.at(-1).to, [
      { ipBlock: { cidr: '10.0.0.0/8' } },
      { ipBlock: { cidr: '2001:db8::/32' } },
    ]);
  });
});
