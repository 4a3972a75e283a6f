// Issue 11, the fault matrix for processes and the API server: a fan-out of 100 Clusters (one
// fleet branch each, a first render) with
//   - no fault (the reference end state),
//   - the management kube-apiserver killed and started again halfway: no controller restart,
//   - the controller SIGKILLed at seeded points and started again until done (seeds 1, 2, 3),
//   - two replicas with leader election, the leader SIGKILLed halfway,
// each ending in the reference end state: the same ClusterAddon statuses (release, condition
// reasons, addons), GitRepositories, addon Kustomizations and fleet tree ids, with one commit per
// branch holding every addon (no duplicate, no partial commit).
// Disruptive (runs alone, last): it kills kube-apiserver and stops kustomize-controller for the
// whole file (stackflux is under test, not Flux: no addon is applied, so ClusterAddons wait for
// their Kustomizations; the end state compares what stackflux decided), and starts it again after.
// One namespace and one set of Clusters serve every run; between runs what stackflux wrote is
// removed (resetFanout) and the next run pushes into a fleet repository of its own.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { API_VERSION } from '../../controller/api/meta.ts';
import { KubeClient, type KubeObject, loadKubeConfig } from '../../controller/runtime/client.ts';
import { createRepo, isStopped, startComponent, stopComponent } from '../../hack/lib/testenv.ts';
import { rng } from '../integration/runtime/helpers.ts';
import { ControllerProcess, releaseControllerHolds, sleep, waitFor } from '../support/e2e.ts';
import { testEnv, uniqueName } from '../support/env.ts';
import {
  type EndState,
  type Fanout,
  FleetMirror,
  fanoutController,
  fleetProblems,
  KUSTOMIZE_API,
  resetFanout,
  SOURCE_API,
  settledEndState,
  setupFanout,
} from '../support/fanout.ts';

// 100, not the 200 of issue 11: every claim here (the same end state after a fault at a seeded
// point of the fan-out, no duplicate or partial commit) needs the fan-out under way when the fault
// strikes, which the slow client below ensures at either size, and this file is the longest of the
// disruptive ones that run alone at the end of npm test (CI time on two cores).
const N = 100;
const KC = 'kustomize-controller';
const PUSHED = 'fleet branches pushed';
const e = testEnv();
const client = new KubeClient(loadKubeConfig({ kubeconfig: e.kubeconfig }), { qps: 500, burst: 500 });
const ns = uniqueName('fault-matrix');
let f: Fanout;
let reference: EndState | undefined;
const running: ControllerProcess[] = [];
let runs = 0;
// One run is a fan-out of N Clusters (three controller starts for a kill test): 6–10 min each
// measured on 2 cores shared with six other test environments (load ~30), above node --test's
// default of 10 min per test.
const LONG = { timeout: 1_500_000 };
/** Started again at the end only if this file stopped it. */
let kcWasStopped = false;

/** A fresh fleet repository and cache directory for one run. */
async function freshRun(
  label: string,
): Promise<{ fleetUrl: string; fleet: FleetMirror; cache: () => string }> {
  // A run that failed left its controllers running: stop them and undo what they wrote, so one
  // failure does not make every later run fight a stray controller until its timeout.
  if (running.length > 0) {
    for (const c of running.splice(0)) await c.stop();
    await resetFanout(client, f);
  }
  runs += 1;
  const fleetUrl = await createRepo(e, `${ns}-fleet-${runs}-${label}`);
  const caches = mkdtempSync(join(f.work, `cache-${runs}-`));
  let n = 0;
  return { fleetUrl, fleet: new FleetMirror(fleetUrl), cache: () => join(caches, String(n++)) };
}

async function start(
  fleetUrl: string,
  cacheDir: string,
  extraArgs: string[] = [],
): Promise<ControllerProcess> {
  const c = await ControllerProcess.start(fanoutController(f, fleetUrl, cacheDir, extraArgs));
  running.push(c);
  return c;
}

/** Stops every controller of the run, then removes what it wrote. */
async function endRun(fleet: FleetMirror): Promise<void> {
  for (const c of running.splice(0)) await c.stop();
  fleet.remove();
  await resetFanout(client, f);
}

/** Waits (showing c's log tail on failure) until c logged `msg` `count` times. */
async function untilLogged(c: ControllerProcess, msg: string, count = 1): Promise<void> {
  await c.step(async () => {
    await waitFor(`${count}× "${msg}" logged`, async () =>
      c.logged(msg).length >= count ? true : undefined,
    );
  });
}

/** How many fleet branches exist now (the fan-out's progress as the fleet shows it). */
function branchesNow(fleet: FleetMirror): number {
  fleet.fetch();
  return Object.keys(fleet.trees()).length;
}

/** The end state of this run must be the reference's; the fleet a clean first render. */
async function assertReferenceEndState(
  fleetUrl: string,
  fleet: FleetMirror,
  controllers: ControllerProcess[],
): Promise<void> {
  const want = reference;
  if (want === undefined) throw new Error('the reference run did not complete');
  const wanted = JSON.stringify(want);
  const got = await settledEndState(client, f, fleetUrl, fleet, {
    until: (s) => JSON.stringify(s) === wanted,
  }).catch(async (err: unknown) => {
    for (const c of controllers) process.stderr.write(`\n--- log tail ---\n${c.logTail(60)}\n`);
    // Shows the difference when the run settled somewhere else.
    const s = await settledEndState(client, f, fleetUrl, fleet, { timeoutMs: 60_000 }).catch(() => undefined);
    if (s !== undefined) assert.deepEqual(s, want);
    throw err;
  });
  assert.deepEqual(got, want);
  assert.deepEqual(fleetProblems(fleet, got), []);
}

// Every faulted run's client is slow (10 requests a second) so that the fan-out is still under way
// when its fault strikes: on an idle machine the first fleet batch at the default rate can already
// hold all the Clusters. The rate does not change what the end state must be.
const SLOW_CLIENT = ['--kube-api-qps=10', '--kube-api-burst=10'];

describe(`fault matrix: a fan-out of ${N} Clusters`, () => {
  before(async () => {
    kcWasStopped = isStopped(e.stateDir, KC);
    await stopComponent(e.stateDir, KC);
    f = await setupFanout(client, e, ns, N, readFileSync(e.workloadKubeconfig, 'utf8'));
  });

  after(async () => {
    for (const c of running.splice(0)) await c.stop();
    await releaseControllerHolds(client, ns, 32);
    await client.delete('v1', 'Namespace', ns).catch(() => undefined);
    if (!kcWasStopped)
      await startComponent(e.stateDir, KC).catch((err: unknown) =>
        process.stderr.write(`starting ${KC} again: ${String(err)}\n`),
      );
    if (f !== undefined) rmSync(f.work, { recursive: true, force: true });
    client.close();
  });

  it('without faults: the reference end state, one commit per branch with every addon', LONG, async () => {
    const { fleetUrl, fleet, cache } = await freshRun('reference');
    const c = await start(fleetUrl, cache());
    await c.step(async () => {
      reference = await settledEndState(client, f, fleetUrl, fleet);
      assert.deepEqual(fleetProblems(fleet, reference), []);
    });
    await endRun(fleet);
  });

  it(
    'kube-apiserver killed and started again halfway: the same end state without a controller restart',
    LONG,
    async () => {
      const { fleetUrl, fleet, cache } = await freshRun('apiserver');
      const c = await start(fleetUrl, cache(), SLOW_CLIENT);
      await c.step(async () => {
        // Halfway: once the first batch is in the fleet.
        await untilLogged(c, PUSHED);
        const before = branchesNow(fleet);
        await stopComponent(e.stateDir, 'kube-apiserver');
        await sleep(5_000); // the API server is away for a while, not just a reconnect
        await startComponent(e.stateDir, 'kube-apiserver');
        assert.ok(
          before < N,
          `the fan-out was still running when the API server died (${before}/${N} branches)`,
        );
        await assertReferenceEndState(fleetUrl, fleet, [c]);
        assert.ok(c.running, 'the controller did not exit');
      });
      await endRun(fleet);
    },
  );

  // Seeded kill points: the first kill after a delay of 1–12 s from /readyz, the second after the
  // k-th fleet push (k 1–2) of the restarted process plus 0–1.5 s; the third process finishes.
  for (const seed of [1, 2, 3]) {
    it(
      `controller SIGKILLed twice at seeded points (seed ${seed}): the same end state, no duplicate or partial commit`,
      LONG,
      async () => {
        const random = rng(seed);
        const { fleetUrl, fleet, cache } = await freshRun(`kill-${seed}`);
        const cacheDir = cache(); // a restarted container keeps its volume
        const firstDelay = 1_000 + Math.floor(random() * 11_000);
        const k = 1 + Math.floor(random() * 2);
        const secondDelay = Math.floor(random() * 1_500);
        const killedAt: number[] = [];

        const first = await start(fleetUrl, cacheDir, SLOW_CLIENT);
        await sleep(firstDelay);
        killedAt.push(branchesNow(fleet));
        await first.kill();

        const second = await start(fleetUrl, cacheDir, SLOW_CLIENT);
        // (or the end of the fan-out, should it need fewer pushes: then the kill lands after it)
        await second.step(async () => {
          await waitFor(`push ${k} of the restarted controller`, async () =>
            second.logged(PUSHED).length >= k || branchesNow(fleet) >= N ? true : undefined,
          );
        });
        await sleep(secondDelay);
        killedAt.push(branchesNow(fleet));
        await second.kill();

        const third = await start(fleetUrl, cacheDir);
        await third.step(async () => {
          assert.ok(
            killedAt[0] !== undefined && killedAt[0] < N,
            `first kill before the fan-out was done (${killedAt[0]}/${N})`,
          );
          await assertReferenceEndState(fleetUrl, fleet, [first, second, third]);
        });
        process.stderr.write(`seed ${seed}: killed at ${killedAt.join(' and ')} of ${N} branches\n`);
        await endRun(fleet);
      },
    );
  }

  it(
    'two replicas with leader election: one writes at a time; the leader killed, the other takes over and finishes',
    LONG,
    async () => {
      const { fleetUrl, fleet, cache } = await freshRun('leader');
      const lease = 'fault-matrix';
      const args = [
        '--leader-elect',
        `--leader-election-namespace=${ns}`,
        `--leader-election-id=${lease}`,
        ...SLOW_CLIENT,
      ];
      const a = await start(fleetUrl, cache(), args);
      await untilLogged(a, 'became leader');
      const b = await start(fleetUrl, cache(), args);
      await untilLogged(a, PUSHED);

      // Standing by, B wrote nothing but its Lease attempts (its own request counts).
      const writesOf = async (c: ControllerProcess) =>
        (
          await c.samples('stackflux_api_requests_total', (l) =>
            ['POST', 'PUT', 'PATCH', 'DELETE'].includes(l.method ?? ''),
          )
        )
          .filter((s) => s.labels.resource !== 'leases' && s.value > 0)
          .map((s) => `${s.labels.method} ${s.labels.resource}: ${s.value}`);
      assert.deepEqual(await writesOf(b), [], 'the standby wrote nothing');
      assert.equal(b.logged(PUSHED).length, 0, 'the standby pushed nothing');

      const branchesAtKill = branchesNow(fleet);
      const killedAt = Date.now();
      await a.kill();
      let took = 0;
      await b.step(async () => {
        took = await waitFor('replica B leads', async () => b.logged('became leader')[0]?.at, {
          timeoutMs: 120_000,
        });
      });
      await b.step(() => assertReferenceEndState(fleetUrl, fleet, [a, b]));
      assert.ok(branchesAtKill < N, `the leader died halfway (${branchesAtKill}/${N} branches)`);

      // B wrote only as leader: its first push after it took the lease.
      const bPushes = b.logged(PUSHED);
      assert.ok(bPushes.length > 0, 'B finished the fan-out');
      assert.ok((bPushes[0]?.at ?? 0) >= took, 'B pushed only after it led');
      // Nobody wrote between A's death and B's takeover: stackflux's managedFields times (seconds).
      const stale = await writesBetween(killedAt + 1_000, took - 1_000);
      assert.deepEqual(stale, [], 'no stackflux write while nobody led');
      // Handover within the Lease duration (15 s) plus the standby's retry period (2 s, jittered):
      // measured on the test's clock, with 10 s of room for a loaded machine.
      assert.ok(took - killedAt <= 15_000 + 2_400 + 10_000, `B took over ${took - killedAt} ms after A died`);
      await endRun(fleet);
    },
  );
});

/** Objects with a stackflux managedFields entry time strictly inside (from, to), ms since the epoch. */
async function writesBetween(from: number, to: number): Promise<string[]> {
  if (to <= from) return [];
  const out: string[] = [];
  for (const [apiVersion, kind] of [
    [API_VERSION, 'ClusterAddon'],
    [KUSTOMIZE_API, 'Kustomization'],
    [SOURCE_API, 'GitRepository'],
  ] as const) {
    const list = await client.listAll<KubeObject>(apiVersion, kind, { namespace: ns });
    for (const o of list.items)
      for (const m of (o.metadata.managedFields ?? []) as Array<{ manager?: string; time?: string }>) {
        const t = Date.parse(m.time ?? '');
        if (m.manager === 'stackflux' && t > from && t < to)
          out.push(`${kind} ${o.metadata.name} at ${m.time}`);
      }
  }
  return out;
}
