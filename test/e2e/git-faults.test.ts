// Issue 11 fault matrix, Git part: the release repository and the fleet repository unreachable
// (connection refused), stalled (a proxy that stops answering mid-response) and refusing pushes
// (the receive-pack POST answered 403). `stackflux run` as a subprocess against the real test
// environment; stackflux reaches both repositories only through a FaultProxy
// (test/support/git-fault-proxy.ts) in front of the test Git server, so the proxy's log and the
// controller's log count its attempts. For each fault: the ClusterStack / ClusterAddon condition
// names the reason and the repository, attempts back off (far fewer than the interval would
// allow), nothing existing is deleted (releases, Flux objects, fleet branches), and removing the
// fault recovers without a restart. --git-timeout=5s keeps the stalls short.
// (No Cluster API controllers run here: the Cluster is a plain object naming the ClusterClass; it
// has no kubeconfig Secret, so Flux applies nothing into a workload cluster.)
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ClusterAddon } from '../../controller/api/clusteraddon.ts';
import type { ClusterStack } from '../../controller/api/clusterstack.ts';
import { API_VERSION } from '../../controller/api/meta.ts';
import { KubeClient, type KubeObject, loadKubeConfig } from '../../controller/runtime/client.ts';
import { createRepo, type Endpoints } from '../../hack/lib/testenv.ts';
import {
  addonCluster,
  CAPI,
  ControllerProcess,
  cond,
  createTestNamespace,
  e2eEnv,
  git,
  initRepo,
  pinnedFerrolStack,
  releaseAddonNamespace,
  releaseFerrol130,
  releaseReaders,
  sleep,
  waitFor,
} from '../support/e2e.ts';
import { uniqueName } from '../support/env.ts';
import { FaultProxy, type ProxyRequest } from '../support/git-fault-proxy.ts';

const env = e2eEnv();
const client = new KubeClient(loadKubeConfig({ kubeconfig: env.kubeconfig }));
const ns = uniqueName('git-faults');
const work = mkdtempSync(join(tmpdir(), 'stackflux-git-faults-'));
const repoDir = join(work, 'release');
const V1 = 'docker-ferrol-1-30-v1';
const { cskr, releaseReady } = releaseReaders(client, ns);
/** Seconds without a byte before a git operation fails (--git-timeout). */
const STALL_S = 5;
/** How long each fault is held while attempts are counted. */
const WINDOW_MS = 24_000;

type CS = ClusterStack & KubeObject;
type CA = ClusterAddon & KubeObject;

let controller: ControllerProcess | undefined;
let releaseProxy: FaultProxy;
let fleetProxy: FaultProxy;
let fleetUrl = '';

async function step(fn: () => Promise<void>): Promise<void> {
  if (controller === undefined) throw new Error('the controller did not start');
  await controller.step(fn);
}

const stack = (): Promise<CS | undefined> => client.get<CS>(API_VERSION, 'ClusterStack', 'ferrol', ns);
const addon = (): Promise<CA | undefined> => client.get<CA>(API_VERSION, 'ClusterAddon', 'c1', ns);
const branch = `stackflux/${ns}/c1`;

/** The fleet branch's tip on the real server (not through the proxy). */
function fleetTip(): string | undefined {
  const line = git(work, 'ls-remote', '--heads', fleetUrl, branch);
  return line === '' ? undefined : line.split('\t')[0];
}

/** What must survive every fault: releases, the Flux objects stackflux made, the fleet branch. */
async function inventory(): Promise<string[]> {
  const names: string[] = [];
  const kinds: Array<[string, string]> = [
    [API_VERSION, 'ClusterStackRelease'],
    [API_VERSION, 'ClusterAddon'],
    ['source.toolkit.fluxcd.io/v1', 'GitRepository'],
    ['kustomize.toolkit.fluxcd.io/v1', 'Kustomization'],
  ];
  for (const [apiVersion, kind] of kinds) {
    for (const o of (await client.list(apiVersion, kind, { namespace: ns })).items) {
      if (o.metadata.deletionTimestamp === undefined) names.push(`${kind}/${o.metadata.name}`);
    }
  }
  names.push(`branch/${branch}${fleetTip() === undefined ? ' (missing)' : ''}`);
  return names.sort();
}

/** stackflux's own requests (git CLI, its smart-HTTP push), not Flux's (go-git). */
const fromStackflux = (r: ProxyRequest): boolean => /^git\//.test(r.userAgent);

/** Log lines of the controller with this message since `from` (epoch ms). */
function logged(msg: string, from: number, to: number): number {
  return (controller?.logLines ?? []).filter((line) => {
    try {
      const l = JSON.parse(line) as { msg?: string; time?: string | number };
      const at = typeof l.time === 'number' ? l.time : Date.parse(l.time ?? '');
      return l.msg === msg && at >= from && at < to;
    } catch {
      return false;
    }
  }).length;
}

async function sourceCondition(reason: string): Promise<string> {
  return waitFor(`ClusterStack SourceReady=False ${reason}`, async () => {
    const c = cond(await stack(), 'SourceReady');
    return c?.status === 'False' && c.reason === reason ? (c.message ?? '') : undefined;
  });
}

async function sourceRecovered(): Promise<void> {
  await waitFor('ClusterStack SourceReady=True again', async () =>
    cond(await stack(), 'SourceReady')?.status === 'True' ? true : undefined,
  );
}

async function addonCondition(reason: string): Promise<string> {
  return waitFor(`ClusterAddon Ready=False ${reason}`, async () => {
    const c = cond(await addon(), 'Ready');
    return c?.status === 'False' && c.reason === reason ? (c.message ?? '') : undefined;
  });
}

let cidr = 10;
/** A change of the Cluster that changes its rendered addons (the cni config holds the pod CIDR). */
async function changeCluster(): Promise<void> {
  cidr += 1;
  await client.mergePatch(CAPI, 'Cluster', 'c1', ns, {
    spec: { clusterNetwork: { pods: { cidrBlocks: [`10.${cidr}.0.0/16`] } } },
  });
}

/** The fleet branch moves past `old` and the ClusterAddon records the new commit. */
async function fleetRecovered(old: string | undefined): Promise<void> {
  await waitFor('the fleet commit lands once the fault is gone', async () => {
    const tip = fleetTip();
    const a = await addon();
    return tip !== undefined && tip !== old && a?.status?.fleetCommit === tip ? true : undefined;
  });
}

describe('Git faults: release and fleet repositories refused, stalled, refusing pushes', {
  timeout: 20 * 60_000,
}, () => {
  let baseline: string[] = [];

  before(async () => {
    await createTestNamespace(client, ns);
    const repoUrl = await createRepo(env as Endpoints, `${ns}-release`);
    fleetUrl = await createRepo(env as Endpoints, `${ns}-fleet`);
    releaseProxy = await FaultProxy.start(env.gitServerUrl);
    fleetProxy = await FaultProxy.start(env.gitServerUrl);
    initRepo(repoDir);
    releaseFerrol130(repoDir, repoUrl, 'v1');
    controller = await ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: ns,
      cacheDir: join(work, 'cache'),
      extraArgs: [
        `--fleet-url=${fleetProxy.proxied(fleetUrl)}`,
        '--fleet-batch-window=1s',
        `--git-timeout=${STALL_S}s`,
      ],
    });
    const cs = pinnedFerrolStack(ns, releaseProxy.proxied(repoUrl), ['v1']);
    cs.spec.interval = '2s';
    await client.create(cs);
    await step(async () => {
      await waitFor('v1 Ready', () => releaseReady(V1));
      await client.create(
        addonCluster(ns, 'c1', { className: V1, podCidr: `10.${cidr}.0.0/16`, version: 'v1.30.4' }),
      );
      await fleetRecovered(undefined);
      await waitFor('the Cluster GitRepository and addon Kustomizations exist', async () => {
        const inv = await inventory();
        return inv.some((n) => n.startsWith('Kustomization/')) && inv.includes('GitRepository/c1-addons')
          ? inv
          : undefined;
      });
      baseline = await inventory();
    });
  });

  after(async () => {
    await controller?.stop();
    await releaseProxy?.stop();
    await fleetProxy?.stop();
    await releaseAddonNamespace(client, ns);
    client.close();
    rmSync(work, { recursive: true, force: true });
  });

  /** Holds the fault for the window; returns when it started and ended. */
  async function hold(): Promise<{ from: number; to: number }> {
    const from = Date.now();
    await sleep(WINDOW_MS);
    return { from, to: Date.now() };
  }

  it('1. release repository refuses connections: SourceUnreachable, back-off, nothing deleted, recovery', () =>
    step(async () => {
      await releaseProxy.set('refuse');
      const message = await sourceCondition('SourceUnreachable');
      assert.ok(message.includes(releaseProxy.url), `names the repository: ${message}`);
      const w = await hold();
      // Every 2 s without back-off: 12 listings in the window; with it 2, 4, 8, 16 s apart.
      const attempts = logged('listing the source failed', w.from, w.to);
      assert.ok(attempts >= 1 && attempts <= 6, `${attempts} listings in ${WINDOW_MS / 1000}s`);
      assert.deepEqual(await inventory(), baseline, 'nothing deleted');
      assert.ok(await cskr(V1), 'the release is kept');
      await releaseProxy.set('pass');
      await sourceRecovered();
    }));

  it('2. release repository stalls mid-response: SourceTimeout within the git timeout, back-off, recovery', () =>
    step(async () => {
      await releaseProxy.set('stall');
      const message = await sourceCondition('SourceTimeout');
      assert.ok(message.includes(releaseProxy.url), `names the repository: ${message}`);
      const w = await hold();
      const lists = releaseProxy.requests(w.from, w.to, (r) => fromStackflux(r) && /info\/refs/.test(r.path));
      // Each listing ends after STALL_S (a stall holds no worker for ever: a second one starts),
      // then the next waits 2, 4, 8 s.
      assert.ok(lists.length >= 2 && lists.length <= 5, `${lists.length} listings in the window`);
      assert.deepEqual(await inventory(), baseline, 'nothing deleted');
      await releaseProxy.set('pass');
      await sourceRecovered();
    }));

  it('3. fleet repository refuses connections: FleetUnreachable, back-off, branch kept, recovery', () =>
    step(async () => {
      const old = fleetTip();
      await fleetProxy.set('refuse');
      await changeCluster();
      const message = await addonCondition('FleetUnreachable');
      assert.ok(message.includes(fleetProxy.url), `names the repository: ${message}`);
      const w = await hold();
      // Without back-off a write every batch window (1 s) plus its fetch; with it 1, 2, 4, 8 s apart.
      const writes = logged('fleet write failed; retrying with backoff', w.from, w.to);
      assert.ok(writes <= 6, `${writes} failed writes in ${WINDOW_MS / 1000}s`);
      assert.equal(fleetTip(), old, 'the branch is untouched');
      assert.deepEqual(await inventory(), baseline, 'nothing deleted');
      await fleetProxy.set('pass');
      await fleetRecovered(old);
    }));

  it('4. fleet repository stalls mid-response: FleetTimeout, back-off, branch kept, recovery', () =>
    step(async () => {
      await fleetProxy.set('stall');
      await changeCluster();
      const message = await addonCondition('FleetTimeout');
      assert.ok(message.includes(fleetProxy.url), `names the repository: ${message}`);
      const w = await hold();
      const calls = fleetProxy.requests(w.from, w.to, fromStackflux);
      assert.ok(calls.length <= 6, `${calls.length} fleet requests in the window`);
      assert.deepEqual(await inventory(), baseline, 'nothing deleted');
      await fleetProxy.set('pass');
      // The stalled push may have reached the server (the proxy forwarded it and hid the answer):
      // either way the branch ends at a commit the ClusterAddon records.
      await waitFor('the ClusterAddon records the branch tip again', async () => {
        const tip = fleetTip();
        const a = await addon();
        return tip !== undefined &&
          a?.status?.fleetCommit === tip &&
          cond(a, 'Ready')?.reason !== 'FleetTimeout'
          ? true
          : undefined;
      });
    }));

  it('5. fleet repository refuses the push (HTTP 403): PushRefused, back-off, branch kept, recovery', () =>
    step(async () => {
      const old = fleetTip();
      await fleetProxy.set('reject-push', 403);
      await changeCluster();
      const message = await addonCondition('PushRefused');
      assert.ok(message.includes(fleetProxy.url), `names the repository: ${message}`);
      assert.match(message, /HTTP 403/);
      const w = await hold();
      const pushes = fleetProxy.requests(
        w.from,
        w.to,
        (r) => r.method === 'POST' && /git-receive-pack$/.test(r.path),
      );
      assert.ok(pushes.length >= 1 && pushes.length <= 5, `${pushes.length} pushes in the window`);
      assert.equal(fleetTip(), old, 'the branch is untouched');
      assert.deepEqual(await inventory(), baseline, 'nothing deleted');
      await fleetProxy.set('pass');
      await fleetRecovered(old);
      const ready = cond(await addon(), 'Ready');
      assert.notEqual(ready?.reason, 'PushRefused');
    }));
});
