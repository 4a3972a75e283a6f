// The BeforeClusterUpgrade runtime extension through its HTTP contract: a real HTTPS server, called
// as Cluster API's runtime client calls it (Discovery, then the hook with ?timeout=10s, trusting
// only the caBundle), hostile requests refused before their body, a rotated certificate picked up;
// and the live lookup against the real API server: the answer follows the Cluster's ClusterAddon
// as the ClusterAddon controller would write it (the test writes the status and says so).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { AddonStatus } from '../../../controller/api/clusteraddon.ts';
import { API_VERSION } from '../../../controller/api/meta.ts';
import { BEFORE_CLUSTER_UPGRADE_PATH, DISCOVERY_PATH } from '../../../controller/api/runtimehooks.ts';
import {
  liveStageLookup,
  type RuntimeExtensionServer,
  serveRuntimeExtension,
} from '../../../controller/controllers/upgradehook.ts';
import type {
  UpgradeStage,
  UpgradeStageLookup,
  UpgradeTarget,
} from '../../../controller/reconcilers/upgradehook.ts';
import { KubeClient } from '../../../controller/runtime/client.ts';
import { installCrds } from '../../../hack/lib/crds.ts';
import { eventually, kubeConfigFrom, testEnv, uniqueName } from '../../support/env.ts';
import { callHook, servingCertificate } from '../../support/runtimehook.ts';
import { rawRequest } from '../../support/webhook.ts';

const RELEASE = 'docker-ferrol-1-31-v2';
const work = mkdtempSync(join(tmpdir(), 'stackflux-hook-'));
after(() => rmSync(work, { recursive: true, force: true }));

/** A BeforeClusterUpgradeRequest as Cluster API v1.14 marshals it (v1beta2 Cluster). */
function upgradeRequest(namespace: string, name: string, className = RELEASE): Record<string, unknown> {
  return {
    kind: 'BeforeClusterUpgradeRequest',
    apiVersion: 'hooks.runtime.cluster.x-k8s.io/v1alpha1',
    cluster: {
      metadata: { name, namespace, uid: '6b1c7c4e-0000-4000-8000-000000000001', generation: 3 },
      spec: {
        controlPlaneRef: { apiGroup: 'controlplane.cluster.x-k8s.io', kind: 'KubeadmControlPlane', name },
        topology: { classRef: { name: className }, version: 'v1.31.2', controlPlane: { replicas: 3 } },
      },
      status: { phase: 'Provisioned' },
    },
    fromKubernetesVersion: 'v1.30.4',
    toKubernetesVersion: 'v1.31.2',
    controlPlaneUpgrades: [{ version: 'v1.31.2' }],
    workersUpgrades: [{ version: 'v1.31.2' }],
  };
}

/** Stages by Cluster name; records what it was asked. */
function recordedLookup(stages: Record<string, UpgradeStage | Error>) {
  const asked: UpgradeTarget[] = [];
  const lookup: UpgradeStageLookup = {
    stageOf: async (target) => {
      asked.push(target);
      const s = stages[target.cluster];
      if (s instanceof Error) throw s;
      return s ?? { kind: 'Pending', why: 'unknown Cluster' };
    },
  };
  return { lookup, asked };
}

describe('runtime extension: HTTP contract', () => {
  const cert = servingCertificate(join(work, 'cert'));
  const { lookup, asked } = recordedLookup({
    waiting: { kind: 'Applied', notReady: ['cni (Progressing)'] },
    ready: { kind: 'Ready' },
    broken: { kind: 'Failed', reason: 'RenderFailed', message: 'addon cni: template error' },
    down: new Error('connect ECONNREFUSED'),
  });
  let server: RuntimeExtensionServer;
  before(async () => {
    server = await serveRuntimeExtension('127.0.0.1:0', {
      lookup,
      certFile: cert.certFile,
      keyFile: cert.keyFile,
      reloadIntervalMs: 0,
    });
  });
  after(() => server.close());

  it('discovery lists the BeforeClusterUpgrade handler as Cluster API validates it', async () => {
    const a = await callHook(
      server.url,
      DISCOVERY_PATH,
      { apiVersion: 'hooks.runtime.cluster.x-k8s.io/v1alpha1', kind: 'DiscoveryRequest' },
      cert.ca,
    );
    assert.equal(a.status, 200);
    assert.equal(a.body.status, 'Success');
    const handlers = a.body.handlers as Array<
      Record<string, unknown> & { requestHook: Record<string, string> }
    >;
    assert.equal(handlers.length, 1);
    const [h] = handlers;
    // Cluster API's defaultAndValidateDiscoveryResponse: DNS-1123 label, 0..30 s, Fail|Ignore, registered hook.
    assert.match(String(h?.name), /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
    assert.ok(Number(h?.timeoutSeconds) >= 0 && Number(h?.timeoutSeconds) <= 30);
    assert.ok(['Fail', 'Ignore'].includes(String(h?.failurePolicy)));
    assert.deepEqual(h?.requestHook, {
      apiVersion: 'hooks.runtime.cluster.x-k8s.io/v1alpha1',
      hook: 'BeforeClusterUpgrade',
    });
    // The handler's path is what Cluster API builds from the discovered name.
    assert.equal(
      BEFORE_CLUSTER_UPGRADE_PATH,
      `/hooks.runtime.cluster.x-k8s.io/v1alpha1/beforeclusterupgrade/${h?.name}`,
    );
  });

  it('answers retry in 10 s naming what is waited for, Success when Ready, Failure when it cannot become Ready', async () => {
    const waiting = await callHook(
      server.url,
      BEFORE_CLUSTER_UPGRADE_PATH,
      upgradeRequest('team-a', 'waiting'),
      cert.ca,
    );
    assert.equal(waiting.status, 200);
    assert.deepEqual(
      [waiting.body.apiVersion, waiting.body.kind, waiting.body.status, waiting.body.retryAfterSeconds],
      ['hooks.runtime.cluster.x-k8s.io/v1alpha1', 'BeforeClusterUpgradeResponse', 'Success', 10],
    );
    assert.match(
      String(waiting.body.message),
      /release docker-ferrol-1-31-v2 to be Ready in Cluster team-a\/waiting: not Ready: cni \(Progressing\)/,
    );
    const ready = await callHook(
      server.url,
      BEFORE_CLUSTER_UPGRADE_PATH,
      upgradeRequest('team-a', 'ready'),
      cert.ca,
    );
    assert.deepEqual([ready.body.status, ready.body.retryAfterSeconds], ['Success', 0]);
    const broken = await callHook(
      server.url,
      BEFORE_CLUSTER_UPGRADE_PATH,
      upgradeRequest('team-a', 'broken'),
      cert.ca,
    );
    assert.deepEqual([broken.body.status, broken.body.retryAfterSeconds], ['Failure', 0]);
    assert.match(
      String(broken.body.message),
      /cannot become Ready in Cluster team-a\/broken: RenderFailed \(/,
    );
    assert.doesNotMatch(
      String(broken.body.message),
      /template error/,
      'a condition message told to any caller',
    );
    const down = await callHook(
      server.url,
      BEFORE_CLUSTER_UPGRADE_PATH,
      upgradeRequest('team-a', 'down'),
      cert.ca,
    );
    assert.deepEqual([down.body.status, down.body.retryAfterSeconds], ['Success', 10]);
    // The API error stays in the controller's log: the caller may be anyone.
    assert.match(
      String(down.body.message),
      /could not be read: reading its ClusterAddon failed \(the controller log says why\)$/,
    );
    const asking = asked.find((t) => t.cluster === 'waiting');
    assert.deepEqual(asking, {
      namespace: 'team-a',
      cluster: 'waiting',
      className: RELEASE,
      release: RELEASE,
      fromKubernetesVersion: 'v1.30.4',
      toKubernetesVersion: 'v1.31.2',
    });
  });

  it('a Cluster whose class is no release is let through without a lookup', async () => {
    const before = asked.length;
    const a = await callHook(
      server.url,
      BEFORE_CLUSTER_UPGRADE_PATH,
      upgradeRequest('team-a', 'other', 'my-own-class'),
      cert.ca,
    );
    assert.deepEqual([a.body.status, a.body.retryAfterSeconds], ['Success', 0]);
    assert.equal(asked.length, before);
  });

  it('a body that is no request gets 200 with status Failure, as Cluster API’s own server answers', async () => {
    for (const body of [
      '{"cluster":',
      '[]',
      JSON.stringify({ ...upgradeRequest('team-a', 'x'), kind: 'DiscoveryRequest' }),
    ]) {
      const a = await callHook(server.url, BEFORE_CLUSTER_UPGRADE_PATH, body, cert.ca);
      assert.equal(a.status, 200);
      assert.equal(a.body.status, 'Failure', String(a.body.message));
    }
  });

  it('refuses other paths, methods and content types, and oversized bodies, before reading them', async () => {
    const post = (path: string, headers: Record<string, string>) =>
      rawRequest(server.url, path, headers, '', 10_000, cert.ca).then((a) => {
        a.socket.destroy();
        return a.status;
      });
    assert.equal(
      await post('/hooks.runtime.cluster.x-k8s.io/v1alpha1/afterclusterupgrade/x', { 'content-length': '2' }),
      404,
    );
    assert.equal(await post(DISCOVERY_PATH, { ':method': 'GET' }), 405);
    assert.equal(
      await post(BEFORE_CLUSTER_UPGRADE_PATH, { 'content-type': 'text/plain', 'content-length': '2' }),
      415,
    );
    assert.equal(await post(BEFORE_CLUSTER_UPGRADE_PATH, { 'content-length': String(64 << 20) }), 413);
    assert.deepEqual(server.stats(), { inFlight: 0, bufferedBytes: 0, reservedBytes: 0 });
  });

  it('speaks only TLS, with the certificate Cluster API was given', async () => {
    const plain = await rawRequest(
      server.url.replace('https:', 'http:'),
      DISCOVERY_PATH,
      { 'content-length': '0' },
      '',
      10_000,
    );
    assert.notEqual(plain.status, 200);
    plain.socket.destroy();
    const stranger = servingCertificate(join(work, 'stranger'));
    await assert.rejects(
      callHook(server.url, DISCOVERY_PATH, {}, stranger.ca),
      /self[- ]signed|unable to verify|certificate/i,
    );
  });
});

describe('runtime extension: lookups are rate-limited per caller and overall (issue 31 F7)', () => {
  it('past the caller’s bucket a call is told to retry in 10 s, without a lookup; the upgrade only waits', async () => {
    const cert = servingCertificate(join(work, 'rate'));
    const { lookup, asked } = recordedLookup({ ready: { kind: 'Ready' } });
    const server = await serveRuntimeExtension('127.0.0.1:0', {
      lookup,
      certFile: cert.certFile,
      keyFile: cert.keyFile,
      reloadIntervalMs: 0,
      // A refill so slow that no token comes back during the test: the burst is all there is.
      rate: { overall: { ratePerSecond: 0.001, burst: 100 }, perKey: { ratePerSecond: 0.001, burst: 3 } },
    });
    try {
      const answers = [];
      for (let i = 0; i < 5; i++)
        answers.push(
          (
            await callHook(
              server.url,
              BEFORE_CLUSTER_UPGRADE_PATH,
              upgradeRequest('team-a', 'ready'),
              cert.ca,
            )
          ).body,
        );
      assert.deepEqual(
        answers.map((a) => [a.status, a.retryAfterSeconds]),
        [
          ['Success', 0],
          ['Success', 0],
          ['Success', 0],
          ['Success', 10],
          ['Success', 10],
        ],
      );
      assert.match(String(answers[4]?.message), /too many BeforeClusterUpgrade calls from this caller/);
      assert.equal(asked.length, 3, 'a throttled call made a lookup');
      // Discovery is no lookup and is not charged.
      assert.equal((await callHook(server.url, DISCOVERY_PATH, {}, cert.ca)).body.status, 'Success');
    } finally {
      await server.close();
    }
  });

  it('all callers together share one bucket', async () => {
    const cert = servingCertificate(join(work, 'rate-all'));
    const { lookup, asked } = recordedLookup({ ready: { kind: 'Ready' } });
    const server = await serveRuntimeExtension('127.0.0.1:0', {
      lookup,
      certFile: cert.certFile,
      keyFile: cert.keyFile,
      reloadIntervalMs: 0,
      rate: { overall: { ratePerSecond: 0.001, burst: 2 }, perKey: { ratePerSecond: 0.001, burst: 100 } },
    });
    try {
      const statuses = [];
      for (let i = 0; i < 3; i++)
        statuses.push(
          (
            await callHook(
              server.url,
              BEFORE_CLUSTER_UPGRADE_PATH,
              upgradeRequest('team-a', 'ready'),
              cert.ca,
            )
          ).body,
        );
      assert.deepEqual(
        statuses.map((a) => a.retryAfterSeconds),
        [0, 0, 10],
      );
      assert.match(String(statuses[2]?.message), /too many BeforeClusterUpgrade calls in all/);
      assert.equal(asked.length, 2);
    } finally {
      await server.close();
    }
  });
});

describe('runtime extension: a rotated certificate', () => {
  it('serves the new certificate once the files change, without a restart', async () => {
    const dir = join(work, 'rotating');
    const first = servingCertificate(dir, 'first');
    const server = await serveRuntimeExtension('127.0.0.1:0', {
      lookup: recordedLookup({}).lookup,
      certFile: first.certFile,
      keyFile: first.keyFile,
      reloadIntervalMs: 50,
    });
    try {
      const before = await callHook(server.url, DISCOVERY_PATH, {}, first.ca);
      const second = servingCertificate(dir, 'second');
      const now = await eventually(
        'the second certificate served',
        () => callHook(server.url, DISCOVERY_PATH, {}, second.ca),
        { timeoutMs: 30_000, intervalMs: 50 },
      );
      assert.notEqual(now.fingerprint, before.fingerprint);
      await assert.rejects(callHook(server.url, DISCOVERY_PATH, {}, first.ca));
    } finally {
      await server.close();
    }
  });
});

describe('runtime extension: live lookup on the real API server', () => {
  let client: KubeClient;
  let server: RuntimeExtensionServer;
  const cert = servingCertificate(join(work, 'live'));
  const ns = uniqueName('sf-hook');
  const name = 'c1';
  const call = async () =>
    (await callHook(server.url, BEFORE_CLUSTER_UPGRADE_PATH, upgradeRequest(ns, name), cert.ca)).body;

  before(async () => {
    client = new KubeClient(kubeConfigFrom(testEnv().kubeconfig), { qps: 100, burst: 100 });
    await installCrds(client);
    await client.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
    server = await serveRuntimeExtension('127.0.0.1:0', {
      lookup: liveStageLookup(client),
      certFile: cert.certFile,
      keyFile: cert.keyFile,
      reloadIntervalMs: 0,
    });
  });
  after(async () => {
    await server?.close();
    await client.delete('v1', 'Namespace', ns).catch(() => undefined);
    client.close();
  });

  /** Writes the ClusterAddon status as the ClusterAddon controller would (no controller runs here). */
  async function writeStatus(status: Record<string, unknown>): Promise<void> {
    const ca = await client.get(API_VERSION, 'ClusterAddon', name, ns);
    await client.applyStatus(
      {
        apiVersion: API_VERSION,
        kind: 'ClusterAddon',
        metadata: { name, namespace: ns },
        status: { observedGeneration: ca?.metadata.generation, ...status },
      },
      { force: true, fieldManager: 'stackflux-hook-test' },
    );
  }
  const ready = (reason = 'Succeeded') => ({
    type: 'Ready',
    status: reason === 'Succeeded' ? 'True' : 'False',
    reason,
    message: reason,
    lastTransitionTime: '2026-01-01T00:00:00Z',
  });
  const addon = (n: string, o: Partial<AddonStatus>): AddonStatus => ({
    name: n,
    ready: true,
    release: RELEASE,
    ...o,
  });

  it('follows the ClusterAddon: pending until it takes up the release, waits for the stage, then lets the upgrade go', async () => {
    const missing = await call();
    assert.deepEqual([missing.status, missing.retryAfterSeconds], ['Success', 10]);
    assert.match(String(missing.message), /ClusterAddon does not exist yet/);

    await client.create({
      apiVersion: API_VERSION,
      kind: 'ClusterAddon',
      metadata: { name, namespace: ns },
      spec: { cluster: name, release: 'docker-ferrol-1-30-v3' },
    });
    assert.match(String((await call()).message), /still at release docker-ferrol-1-30-v3/);

    await client.mergePatch(API_VERSION, 'ClusterAddon', name, ns, { spec: { release: RELEASE } });
    await writeStatus({
      release: RELEASE,
      conditions: [ready('Progressing')],
      addons: [
        addon('ccm', { stage: 'AfterControlPlaneInitialized', ready: false, reason: 'Progressing' }),
        addon('cni', { stage: 'BeforeClusterUpgrade', ready: false, reason: 'Progressing' }),
      ],
    });
    const waiting = await call();
    assert.deepEqual([waiting.status, waiting.retryAfterSeconds], ['Success', 10]);
    assert.match(String(waiting.message), /not Ready: cni \(Progressing\)$/);

    await writeStatus({
      release: RELEASE,
      conditions: [ready('Progressing')],
      addons: [
        addon('ccm', { stage: 'AfterControlPlaneInitialized', ready: false, reason: 'Progressing' }),
        addon('cni', { stage: 'BeforeClusterUpgrade' }),
      ],
    });
    const go = await call();
    assert.deepEqual([go.status, go.retryAfterSeconds], ['Success', 0], String(go.message));
  });

  it('answers Failure with the reason only while the ClusterAddon is Stalled (issue 31 F7)', async () => {
    // A render error's message may quote a tenant's values or a release's files: not for any caller.
    const leak = 'addon cni: template error near "token: s3cr3t-in-values"';
    await writeStatus({
      release: RELEASE,
      conditions: [
        { ...ready('RenderFailed'), message: leak },
        {
          type: 'Stalled',
          status: 'True',
          reason: 'RenderFailed',
          message: leak,
          lastTransitionTime: '2026-01-01T00:00:00Z',
        },
      ],
      addons: [addon('cni', { stage: 'BeforeClusterUpgrade', ready: false, reason: 'RenderFailed' })],
    });
    const a = await call();
    assert.equal(a.status, 'Failure');
    assert.match(String(a.message), /cannot become Ready in Cluster .*: RenderFailed \(/);
    assert.doesNotMatch(String(a.message), /s3cr3t|template error/);
  });
});
