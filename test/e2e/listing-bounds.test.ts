// Issue 31 F2 end to end: a registry a tenant names cannot exhaust the controller's memory. One
// `stackflux run` (its heap capped at 384 MB, as a small pod would run it) against the real test
// environment, with three hostile ClusterStacks on a fake registry on 127.0.0.1
// (test/support/hostile-listing.ts): two repositories listing 100 pages of three 1 MB tags each
// (300 MB apiece, every page under the old 4 MiB page limit), one listing half a million strings
// that are not tags; and a benign ClusterStack on the test Git server. The controller must stay the
// same process (no crash, no restart) with a bounded RSS while the hostile sources are listed again
// and again; each huge source gets SourceReady=False ListingTooLarge naming it and the limit, the
// invalid one is listed with its tags counted, not kept; the benign ClusterStack becomes Ready.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ClusterStack } from '../../controller/api/clusterstack.ts';
import { API_VERSION } from '../../controller/api/meta.ts';
import type { KubeObject } from '../../controller/runtime/client.ts';
import { createRepo, type Endpoints } from '../../hack/lib/testenv.ts';
import {
  ControllerProcess,
  cond,
  createTestNamespace,
  deleteTestNamespace,
  e2eSuite,
  ferrolClusterStack,
  initRepo,
  pinnedFerrolStack,
  releaseControllerHolds,
  releaseFerrol130,
  sleep,
  waitFor,
} from '../support/e2e.ts';
import { HostileRegistry, invalidTags, longTags } from '../support/hostile-listing.ts';

const { env, client, ns, work, repoDir } = e2eSuite('listing-bounds');
const MB = 1024 * 1024;
/** The controller's heap limit (--max-old-space-size) and the RSS it must stay under. */
const HEAP_MB = 384;
const RSS_LIMIT = 640 * MB;
/** How long the hostile sources are listed again and again while RSS is sampled. */
const WINDOW_MS = 30_000;
const HUGE = ['hugea', 'hugeb'];

type CS = ClusterStack & KubeObject;

let controller: ControllerProcess | undefined;
let registry: HostileRegistry;
let pid: number | undefined;

const stack = (name: string): Promise<CS | undefined> =>
  client.get<CS>(API_VERSION, 'ClusterStack', name, ns);

/** The controller's resident set (bytes), from /proc. */
function rss(p: number): number {
  const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${p}/status`, 'utf8'))?.[1];
  return Number(kb) * 1024;
}

const GONE = Symbol('the controller exited');

/** waitFor that gives up at once when the controller process is gone (a crash is the failure). */
async function whileAlive<T>(what: string, fn: () => Promise<T | undefined>): Promise<T> {
  // waitFor retries a throwing check until its timeout: the exit ends the wait as a value instead.
  const v = await waitFor<T | typeof GONE>(what, async () => (controller?.running !== true ? GONE : fn()));
  if (v === GONE) throw new Error(`the controller exited: ${controller?.logTail(20)}`);
  return v;
}

async function step(fn: () => Promise<void>): Promise<void> {
  if (controller === undefined) throw new Error('the controller did not start');
  await controller.step(fn);
}

describe('a tenant’s registry cannot exhaust the controller’s memory (issue 31 F2)', {
  timeout: 15 * 60_000,
}, () => {
  before(async () => {
    await createTestNamespace(client, ns);
    const repoUrl = await createRepo(env as Endpoints, `${ns}-release`);
    const fleetUrl = await createRepo(env as Endpoints, `${ns}-fleet`);
    initRepo(repoDir);
    releaseFerrol130(repoDir, repoUrl, 'v1');
    registry = await HostileRegistry.start({
      page: (i, repository) => {
        if (repository.endsWith('/invalid')) return i === 0 ? invalidTags(500_000) : undefined;
        return i < 100 ? longTags(3, 1_000_000, 3 * i) : undefined;
      },
    });
    controller = await ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: ns,
      cacheDir: join(work, 'cache'),
      extraArgs: [`--fleet-url=${fleetUrl}`, '--fleet-batch-window=1s'],
      env: { NODE_OPTIONS: `--max-old-space-size=${HEAP_MB}` },
    });
    pid = controller.pid;
    const hostile = (name: string, repository: string): CS =>
      ferrolClusterStack(ns, name, {
        name,
        interval: '5s',
        source: { oci: { url: registry.url(repository), insecure: true } },
      });
    for (const name of HUGE) await client.create(hostile(name, `tenant/${name}`));
    await client.create(hostile('invalid', 'tenant/invalid'));
    await client.create(pinnedFerrolStack(ns, repoUrl, ['v1']));
  });

  after(async () => {
    await controller?.stop();
    await registry?.stop();
    await releaseControllerHolds(client, ns);
    await deleteTestNamespace(client, ns);
    client.close();
  });

  it('the huge listings fail with ListingTooLarge naming the source and the limit', () =>
    step(async () => {
      for (const name of HUGE) {
        const c = await whileAlive(`${name}: SourceReady=False ListingTooLarge`, async () => {
          const got = cond(await stack(name), 'SourceReady');
          return got?.status === 'False' && got.reason === 'ListingTooLarge' ? got : undefined;
        });
        assert.ok(c.message?.includes(registry.url(`tenant/${name}`)), `names the source: ${c.message}`);
        assert.match(c.message ?? '', /more than 4194304 bytes/);
      }
    }));

  it('the listing of half a million invalid tags keeps none of them and says how many were counted', () =>
    step(async () => {
      const c = await whileAlive('invalid: SourceReady=True with the count', async () => {
        const got = cond(await stack('invalid'), 'SourceReady');
        return got?.status === 'True' ? got : undefined;
      });
      assert.match(c.message ?? '', /500000 tags that are not release tags were counted, not kept/);
      const source = (await stack('invalid'))?.status?.source;
      assert.equal(source?.tags, 500_000);
      assert.equal(source?.matching, 0);
    }));

  it('the benign ClusterStack becomes Ready meanwhile', () =>
    step(async () => {
      await whileAlive('ferrol Ready', async () =>
        cond(await stack('ferrol'), 'Ready')?.status === 'True' ? true : undefined,
      );
    }));

  it('listed again and again, the controller stays the same process with a bounded RSS', () =>
    step(async () => {
      assert.ok(pid !== undefined);
      const pagesBefore = registry.pagesSent;
      let most = 0;
      for (const end = Date.now() + WINDOW_MS; Date.now() < end; ) {
        assert.ok(controller?.running, `the controller exited: ${controller?.logTail(20)}`);
        assert.equal(controller?.pid, pid, 'no restart');
        most = Math.max(most, rss(pid));
        await sleep(500);
      }
      assert.ok(registry.pagesSent - pagesBefore >= 2, 'the hostile sources were listed again meanwhile');
      assert.ok(most < RSS_LIMIT, `RSS reached ${(most / MB).toFixed(0)} MB`);
      process.stderr.write(`# listing-bounds: controller RSS at most ${(most / MB).toFixed(0)} MB\n`);
      // The last good state of the benign stack holds; the hostile ones still say why.
      assert.equal(cond(await stack('ferrol'), 'Ready')?.status, 'True');
      for (const name of HUGE)
        assert.equal(cond(await stack(name), 'SourceReady')?.reason, 'ListingTooLarge');
    }));
});
