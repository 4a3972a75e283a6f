// Issue 31 F5 end to end: one tenant's slow source does not hold the shared workers. Tenant A's
// release repository is reached through a fault proxy that drips every fetch (ten bytes a second:
// git's own low-speed check never ends it, F11), so each of its release tags' trees is read for
// ever; A has more such tags than the release controller has workers (--concurrency=2). Tenant
// B, in another namespace, then publishes a release: it is read, validated and becomes Ready
// while A's still hang. Once --source-read-timeout passes, each of A's releases says so: Ready
// Unknown, reason SourceTimeout, the message naming the deadline and the flag. `stackflux run
// --shard=<own key>` over all namespaces (the shard keeps it to this file's objects); B reads its
// repository directly. (No Cluster API controllers run: a release is Ready once Flux applied its
// ClusterClass.)
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { API_VERSION } from '../../controller/api/meta.ts';
import { SHARD_LABEL } from '../../controller/runtime/manager.ts';
import { createRepo, type Endpoints } from '../../hack/lib/testenv.ts';
import {
  ControllerProcess,
  type CSKR,
  cond,
  controllerSteps,
  createTestNamespace,
  e2eSuite,
  ferrolTag,
  initRepo,
  pinnedFerrolStack,
  releaseAddonNamespace,
  releaseFerrol130,
  releaseReaders,
  waitFor,
} from '../support/e2e.ts';
import { FaultProxy } from '../support/git-fault-proxy.ts';

const { env, client, ns: nsA, work, repoDir } = e2eSuite('slow-src');
const nsB = `${nsA}-b`;
const shard = nsA;
/** --concurrency: the release controller's workers. */
const WORKERS = 2;
/** A's release tags whose trees drip: more than the workers. */
const SLOW = ['v1', 'v2', 'v3', 'v4'];
/** --source-read-timeout: long enough for B to be read and applied meanwhile. */
const DEADLINE_S = 45;
const a = releaseReaders(client, nsA);
const b = releaseReaders(client, nsB);
let controller: ControllerProcess | undefined;
let proxy: FaultProxy;
let repoB = '';
const step = controllerSteps(() => controller);

const sharded = <T extends { metadata: { labels?: Record<string, string> } }>(o: T): T => {
  o.metadata.labels = { ...o.metadata.labels, [SHARD_LABEL]: shard };
  return o;
};

/** A's releases that exist and are not applied (no pinned commit, not Ready). */
async function hangingInA(): Promise<CSKR[]> {
  const out: CSKR[] = [];
  for (const v of SLOW) {
    const r = await a.cskr(ferrolTag(v));
    if (r !== undefined && r.status?.commit === undefined && cond(r, 'Ready')?.status !== 'True') out.push(r);
  }
  return out;
}

describe("one tenant's slow source does not hold the shared workers", { timeout: 15 * 60_000 }, () => {
  before(async () => {
    await createTestNamespace(client, nsA);
    await client.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: nsB } });
    const repoA = await createRepo(env as Endpoints, `${nsA}-release`);
    repoB = await createRepo(env as Endpoints, `${nsB}-release`);
    initRepo(repoDir);
    releaseFerrol130(repoDir, repoA, ...SLOW);
    const dirB = join(work, 'repo-b');
    initRepo(dirB);
    releaseFerrol130(dirB, repoB, 'v1');
    proxy = await FaultProxy.start(env.gitServerUrl);
    // Listings pass (A's tags are known at once); every fetch of a tree drips.
    await proxy.set('drip-fetch');
    controller = await ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: '',
      cacheDir: join(work, 'cache'),
      concurrency: WORKERS,
      extraArgs: [
        `--shard=${shard}`,
        // Without a total deadline only the stall timeouts bound a read: git is killed after this
        // long without output (+15 s), an OCI request after 60 s each, up to 2,000 layers. A long
        // one here stands for the OCI case, so only the total deadline can end A's reads in time.
        '--git-timeout=10m',
        `--source-read-timeout=${DEADLINE_S}s`,
        '--source-reads=2',
      ],
    });
    await client.create(sharded(pinnedFerrolStack(nsA, proxy.proxied(repoA), SLOW)));
  });

  after(async () => {
    await controller?.stop();
    await proxy?.stop();
    for (const n of [nsB, nsA]) await releaseAddonNamespace(client, n);
    client.close();
  });

  it("1. A's release trees drip; B's new release is read and becomes Ready meanwhile", () =>
    step(async () => {
      await waitFor(`A's ${SLOW.length} releases created, none applied`, async () =>
        (await hangingInA()).length === SLOW.length ? true : undefined,
      );
      await waitFor("A's trees are being fetched (dripping)", async () =>
        proxy.held > 0 ? true : undefined,
      );
      const started = Date.now();
      await client.create(sharded(pinnedFerrolStack(nsB, repoB, ['v1'])));
      const ready = await waitFor("B's release Ready", () => b.releaseReady(ferrolTag('v1')));
      assert.ok(ready.status?.commit, "B's release is pinned to the commit it validated");
      // A's reads still hang (at least all but the one or two whose deadline may have passed).
      const hanging = await hangingInA();
      assert.ok(
        hanging.length >= SLOW.length - 1,
        `A's releases still not applied when B's was Ready (${(Date.now() - started) / 1000}s): ${hanging.length}`,
      );
      for (const r of hanging) {
        const c = cond(r, 'Ready');
        assert.notEqual(c?.status, 'True');
        assert.ok(
          c?.reason === 'ArtifactNotReady' || c?.reason === 'SourceTimeout',
          `${r.metadata.name}: ${c?.reason} ${c?.message}`,
        );
      }
    }));

  it("2. after --source-read-timeout each of A's releases names the deadline; nothing of them is applied", () =>
    step(async () => {
      const seen = new Map<string, string>();
      await waitFor(
        "every one of A's releases SourceTimeout once",
        async () => {
          for (const v of SLOW) {
            const c = cond(await a.cskr(ferrolTag(v)), 'Ready');
            if (c?.reason === 'SourceTimeout') seen.set(v, c.message ?? '');
          }
          return seen.size === SLOW.length ? true : undefined;
        },
        { timeoutMs: (SLOW.length + 2) * DEADLINE_S * 1000 },
      );
      for (const [v, message] of seen) {
        assert.match(
          message,
          new RegExp(
            `SourceTimeout: not finished within the ${DEADLINE_S}s deadline of --source-read-timeout`,
          ),
          v,
        );
      }
      for (const v of SLOW) {
        const r = await a.cskr(ferrolTag(v));
        assert.equal(r?.status?.commit, undefined, `${v} is not pinned to anything`);
        assert.equal(await a.clusterClass(ferrolTag(v)), undefined, `no ClusterClass of ${v}`);
      }
      const events = (await client.list('v1', 'Event', { namespace: nsA })).items.filter(
        (e) => (e as { reason?: string }).reason === 'SourceTimeout',
      );
      assert.ok(events.length > 0, 'a SourceTimeout Warning event');
      assert.match(
        (events[0] as { message?: string }).message ?? '',
        /did not finish within the 45s deadline of --source-read-timeout/,
      );
      // B is untouched.
      assert.ok(await b.releaseReady(ferrolTag('v1')));
      assert.ok(await client.get(API_VERSION, 'ClusterStack', 'ferrol', nsB));
    }));
});
