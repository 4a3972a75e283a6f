// Issue 11 fault matrix, GitHub part: `stackflux run --github-api-url=<local fake>` as a subprocess
// against the real API server, with a ClusterStack whose source is spec.source.github. The fake
// (test/support/githubfake.ts) speaks the Releases and tags API the lister reads, one item per
// page, and answers 304 / 403 and 429 with rate-limit headers / 5xx / a next page that fails / a
// body cut short. For each: the ClusterStack's SourceReady condition names the reason (the limit
// and its reset for a rate limit), no request is made before the reset, the last good list is
// kept (no ClusterStackRelease deleted; with autoSubscribe a half list would make v1 the latest
// and collect v2), and the listing recovers by itself.
// (The release trees would be cloned from github.com, which is not reachable here: the releases
// exist but are not Ready; this file is about the listing.)
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ClusterStack } from '../../controller/api/clusterstack.ts';
import { API_VERSION, LABEL_SOURCE_CREDENTIALS } from '../../controller/api/meta.ts';
import { KubeClient, type KubeObject, loadKubeConfig } from '../../controller/runtime/client.ts';
import {
  ControllerProcess,
  cond,
  createTestNamespace,
  e2eEnv,
  ferrolClusterStack,
  releaseAddonNamespace,
  releaseReaders,
  sleep,
  sourceReadiness,
  waitFor,
} from '../support/e2e.ts';
import { uniqueName } from '../support/env.ts';
import { GitHubFake, type GitHubRequest } from '../support/githubfake.ts';

const env = e2eEnv();
const client = new KubeClient(loadKubeConfig({ kubeconfig: env.kubeconfig }));
const ns = uniqueName('github-faults');
const work = mkdtempSync(join(tmpdir(), 'stackflux-github-faults-'));
const { cskr } = releaseReaders(client, ns);
const V1 = 'docker-ferrol-1-30-v1';
const V2 = 'docker-ferrol-1-30-v2';
const TOKEN = 'ghp_faultsFakeToken0123456789';
/** How long a persistent fault is held while requests are counted. */
const WINDOW_MS = 20_000;

type CS = ClusterStack & KubeObject;
let controller: ControllerProcess | undefined;
let gh: GitHubFake;

async function step(fn: () => Promise<void>): Promise<void> {
  if (controller === undefined) throw new Error('the controller did not start');
  await controller.step(fn);
}

const stack = (): Promise<CS | undefined> => client.get<CS>(API_VERSION, 'ClusterStack', 'ferrol', ns);
const releasesPath = (r: GitHubRequest): boolean => /\/releases/.test(r.path);
// Requests of the REST API only: release trees are cloned from the API's host (as on GitHub
// Enterprise), and the fake answers those clones 404 — they are no API requests to rate-limit.
const apiRequest = (r: GitHubRequest): boolean => r.path.startsWith('/repos/');

const { failed: sourceFalse, recovered: sourceRecovered } = sourceReadiness(stack);

/** Both releases exist and neither is being deleted. */
async function bothKept(): Promise<void> {
  for (const name of [V1, V2]) {
    const r = await cskr(name);
    assert.ok(r, `${name} was deleted`);
    assert.equal(r.metadata.deletionTimestamp, undefined, `${name} is being deleted`);
  }
}

/** The first request answered `status` since `from`. */
async function firstAnswered(status: number, from: number): Promise<GitHubRequest> {
  return waitFor(`a request answered ${status}`, async () =>
    gh.requests(from, Number.POSITIVE_INFINITY, (r) => apiRequest(r) && r.status === status).at(0),
  );
}

describe('GitHub source faults: rate limits, 304, 5xx, truncated pages', { timeout: 15 * 60_000 }, () => {
  before(async () => {
    await createTestNamespace(client, ns);
    gh = await GitHubFake.start();
    gh.token = TOKEN;
    gh.releases = [
      { tag: V1, commit: '1'.repeat(40) },
      { tag: V2, commit: '2'.repeat(40) },
    ];
    await client.create({
      apiVersion: 'v1',
      kind: 'Secret',
      // Labelled: stackflux sends a ClusterStack's Secret only with its owner's consent (issue 22).
      metadata: { name: 'github-token', namespace: ns, labels: { [LABEL_SOURCE_CREDENTIALS]: 'true' } },
      stringData: { token: TOKEN },
    });
    controller = await ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: ns,
      cacheDir: join(work, 'cache'),
      extraArgs: [`--github-api-url=${gh.url}`],
    });
    await client.create(
      ferrolClusterStack(ns, 'ferrol', {
        autoSubscribe: true,
        versions: ['v1'],
        interval: '2s',
        source: {
          github: { owner: 'acme', repo: ns, secretRef: { name: 'github-token' } },
          path: 'ferrol-1-30',
        },
      }),
    );
    await step(async () => {
      await waitFor('both releases created', async () =>
        (await cskr(V1)) !== undefined && (await cskr(V2)) !== undefined ? true : undefined,
      );
      await sourceRecovered();
    });
  });

  after(async () => {
    await controller?.stop();
    await gh?.stop();
    await releaseAddonNamespace(client, ns);
    client.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('1. an unchanged repository is answered 304 from the ETag cache and stays listed', () =>
    step(async () => {
      const from = Date.now();
      await waitFor('several 304 answers', async () =>
        gh.requests(from, Number.POSITIVE_INFINITY, (r) => r.status === 304).length >= 4 ? true : undefined,
      );
      assert.equal(
        gh.requests(from, Date.now(), (r) => r.status === 200).length,
        0,
        'every page came from the cache',
      );
      assert.equal(cond(await stack(), 'SourceReady')?.status, 'True');
      await bothKept();
    }));

  it('2. 403 with x-ratelimit-remaining 0: RateLimited with the reset in status, no request before it', () =>
    step(async () => {
      const reset = Math.ceil(Date.now() / 1000) + 15;
      const from = Date.now();
      gh.set('rate-limit', { param: reset, once: true });
      const limited = await firstAnswered(403, from);
      const message = await sourceFalse('RateLimited');
      assert.match(message, /rate limit/);
      assert.ok(message.includes(new Date(reset * 1000).toISOString()), `names the reset: ${message}`);
      await bothKept();
      const next = await waitFor('the next request, after the reset', async () =>
        gh.requests(limited.at + 1, Number.POSITIVE_INFINITY, apiRequest).at(0),
      );
      assert.ok(next.at >= reset * 1000, `asked ${(reset * 1000 - next.at) / 1000}s before the reset`);
      await sourceRecovered();
      await bothKept();
    }));

  it('3. 429 with retry-after: RateLimited, waits retry-after, recovers', () =>
    step(async () => {
      const from = Date.now();
      gh.set('retry-after', { param: 12, once: true });
      const limited = await firstAnswered(429, from);
      await sourceFalse('RateLimited');
      await bothKept();
      const next = await waitFor('the next request, after retry-after', async () =>
        gh.requests(limited.at + 1, Number.POSITIVE_INFINITY, apiRequest).at(0),
      );
      // retry-after counts from when the controller read the answer, a little after it was sent.
      assert.ok(next.at - limited.at >= 11_000, `asked again after ${(next.at - limited.at) / 1000}s`);
      await sourceRecovered();
    }));

  it('4. 503 on every request: SourceUnreachable naming the status, back-off, last list kept, recovery', () =>
    step(async () => {
      gh.set('server-error');
      const message = await sourceFalse('SourceUnreachable');
      assert.match(message, /HTTP 503/);
      assert.match(message, new RegExp(`acme/${ns}`));
      const from = Date.now();
      await sleep(WINDOW_MS);
      // Every 2 s without back-off: 10 listings in the window; with it 2, 4, 8, 16 s apart.
      const lists = gh.requests(from, Date.now(), releasesPath).length;
      assert.ok(lists <= 5, `${lists} listings in ${WINDOW_MS / 1000}s`);
      await bothKept();
      gh.set('ok');
      await sourceRecovered();
    }));

  it('5. a next page that fails: the listing fails instead of shrinking, v2 (on page 2) is kept', () =>
    step(async () => {
      const from = Date.now();
      gh.set('next-page-fails');
      await firstAnswered(500, from);
      const message = await sourceFalse('SourceUnreachable');
      assert.match(message, /HTTP 500/);
      await sleep(5_000);
      await bothKept();
      gh.set('ok');
      await sourceRecovered();
      await bothKept();
    }));

  it('6. a body cut short: the listing fails, nothing is deleted, recovery', () =>
    step(async () => {
      gh.set('cut-body');
      await sourceFalse('SourceUnreachable');
      await bothKept();
      gh.set('ok');
      await sourceRecovered();
      await bothKept();
    }));
});
