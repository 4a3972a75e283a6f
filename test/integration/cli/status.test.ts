// `stackflux status` against the real API server: an empty namespace, then hand-made objects
// with status (ClusterStack → release → ClusterAddon → addons).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { CommandIO } from '../../../controller/cli/command.ts';
import { main } from '../../../controller/cli/main.ts';
import { KubeClient, type KubeObject } from '../../../controller/runtime/client.ts';
import { installCrds } from '../../../hack/lib/crds.ts';
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

const T = '2025-03-01T10:00:00Z';
const TAG = 'docker-ferrol-1-30-v2';
const COMMIT = 'a'.repeat(40);

describe('stackflux status', () => {
  let client: KubeClient;
  const namespace = uniqueName('sf-status');
  const kubeconfig = () => testEnv().kubeconfig;

  before(async () => {
    client = new KubeClient(kubeConfigFrom(kubeconfig()), { qps: 200, burst: 200 });
    await installCrds(client);
    await client.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } });
  });
  after(async () => {
    await client.delete('v1', 'Namespace', namespace);
    client.close();
  });

  it('says so on an empty namespace (exit 0)', async () => {
    const c = capture();
    assert.equal(await main(['status', '-n', namespace, '--kubeconfig', kubeconfig()], c.io), 0, c.err());
    assert.equal(c.out(), '');
    assert.match(c.err(), new RegExp(`no ClusterStacks.*found in namespace ${namespace}`));
  });

  it('shows stack → release → cluster → addons with READY, REVISION and MESSAGE', async () => {
    const apply = async (obj: KubeObject, status: Record<string, unknown>) => {
      await client.apply(obj, { force: true, fieldManager: 'status-test' });
      await client.applyStatus(
        {
          apiVersion: obj.apiVersion,
          kind: obj.kind,
          metadata: { name: obj.metadata.name ?? '', namespace },
          status,
        },
        { force: true, fieldManager: 'status-test' },
      );
    };
    const cond = (status: string, reason: string, message: string) => [
      { type: 'Ready', status, reason, message, lastTransitionTime: T },
    ];
    await apply(
      {
        apiVersion: 'stackflux.io/v1alpha1',
        kind: 'ClusterStack',
        metadata: { name: 'ferrol', namespace },
        spec: {
          provider: 'docker',
          name: 'ferrol',
          kubernetesVersion: '1.30',
          source: { git: { url: 'https://git.example.com/stacks.git' } },
        },
      },
      { latestRelease: TAG, conditions: cond('True', 'Succeeded', `latest release ${TAG} is Ready`) },
    );
    await apply(
      {
        apiVersion: 'stackflux.io/v1alpha1',
        kind: 'ClusterStackRelease',
        metadata: { name: TAG, namespace },
        spec: {
          clusterStack: 'ferrol',
          tag: TAG,
          version: 'v2',
          clusterClass: TAG,
          kubernetesVersion: '1.30',
          source: { url: 'https://git.example.com/stacks.git' },
        },
      },
      {
        lastAppliedRevision: `${TAG}@sha1:${COMMIT}`,
        conditions: cond('True', 'Succeeded', `ClusterClass ${TAG} applied`),
      },
    );
    await apply(
      {
        apiVersion: 'stackflux.io/v1alpha1',
        kind: 'ClusterAddon',
        metadata: { name: 'prod-1', namespace },
        spec: { cluster: 'prod-1', release: TAG, clusterStack: 'ferrol' },
      },
      {
        release: TAG,
        fleetCommit: 'b'.repeat(40),
        fleetBranch: `stackflux/${namespace}/prod-1`,
        gitRepository: 'prod-1-addons',
        addons: [
          {
            name: 'cni',
            ready: true,
            reason: 'Succeeded',
            message: `applied stackflux/${namespace}/prod-1@sha1:bbbb`,
            lastAppliedRevision: `stackflux/${namespace}/prod-1@sha1:${'b'.repeat(40)}`,
          },
          {
            name: 'metrics',
            ready: false,
            reason: 'HealthCheckFailed',
            message: 'Deployment/kube-system/metrics-server not ready',
          },
        ],
        conditions: cond('False', 'AddonNotReady', `release ${TAG}: not ready: metrics (HealthCheckFailed)`),
      },
    );

    const c = capture();
    assert.equal(await main(['status', '-n', namespace, '--kubeconfig', kubeconfig()], c.io), 0, c.err());
    const lines = c.out().trimEnd().split('\n');
    assert.match(lines[0] ?? '', /^NAME\s+REVISION\s+READY\s+MESSAGE$/);
    assert.match(
      lines[1] ?? '',
      new RegExp(`^clusterstack/ferrol\\s+${TAG}\\s+True\\s+latest release ${TAG} is Ready$`),
    );
    assert.match(
      lines[2] ?? '',
      new RegExp(`^  clusterstackrelease/${TAG}\\s+${TAG}@sha1:${COMMIT}\\s+True\\s+`),
    );
    assert.match(
      lines[3] ?? '',
      new RegExp(
        `^ {4}clusteraddon/prod-1\\s+stackflux/${namespace}/prod-1@sha1:b{12}\\s+False\\s+release .*not ready: metrics`,
      ),
    );
    assert.match(
      lines[4] ?? '',
      new RegExp(`^ {6}addon/cni\\s+stackflux/${namespace}/prod-1@sha1:b{40}\\s+True\\s+applied`),
    );
    assert.match(
      lines[5] ?? '',
      /^ {6}addon\/metrics\s+False\s+Deployment\/kube-system\/metrics-server not ready$/,
    );

    const all = capture();
    assert.equal(await main(['status', '-A', '--kubeconfig', kubeconfig()], all.io), 0, all.err());
    assert.match(all.out(), /^NAMESPACE\s+NAME\s+REVISION\s+READY\s+MESSAGE\n/);
    assert.match(all.out(), new RegExp(`\\n${namespace}\\s+clusterstack/ferrol\\s+`));
  });
});
