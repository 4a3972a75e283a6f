// `npm run bench -- oci`: the OCI release source against its Git baseline, measured in the same run
// (issue 24). Private Distribution registries (test/support/registry.ts), the test environment's
// Git server, and for the second part the controller (`stackflux run`) against the real API server.
//  listing  one poll of an OCI repository with --tags release tags (one csctl artifact pushed by
//           csctl's own push, the other tags put on the same manifest through the distribution API:
//           a listing reads tags and manifest digests, not content, so 199 more pushes would only
//           cost setup time), through OciFaultProxy for requests and body bytes; beside it the
//           same --tags tags in a Git repository listed by listTags (git ls-remote) through the
//           Git fault proxy. Then the second poll (nothing changed) of both.
//  notify   tag push → ClusterStackRelease Ready, --pushes times: a csctl release pushed to a
//           registry that notifies the controller's webhook (Bearer secret), beside the same
//           release cut as a Git tag, pushed, and announced by a signed GitHub-style push event to
//           the same webhook (baseline). The ClusterStack's interval is an hour, so only the
//           notification explains a release appearing. Each kind runs in a namespace and
//           controller of its own (release names are tag names). Ready needs the rendered
//           ClusterClass in the fleet and Flux applying it, as in test/e2e/csctl-class.test.ts.
// The figures are p50/max and ratios OCI/Git; nothing is asserted (a bench, not a test).
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { ClusterStack } from '../../controller/api/clusterstack.ts';
import { API_VERSION } from '../../controller/api/meta.ts';
import { listTags } from '../../controller/sources/git.ts';
import { OciClient } from '../../controller/sources/oci.ts';
import { signBody } from '../../controller/sources/webhook.ts';
import { createRepo, down, isStopped } from '../../hack/lib/testenv.ts';
import {
  csoferrolClusterStack,
  csoferrolTag,
  cutCsctlRelease,
  servedClusterClass,
} from '../support/csctl.ts';
import { packageCsctlRelease } from '../support/csctl-assets.ts';
import {
  ControllerProcess,
  type CSKR,
  cond,
  createTestNamespace,
  deleteTestNamespace,
  git,
  initRepo,
  installFixtureCrds,
  push,
  ROOT,
  releaseControllerHolds,
} from '../support/e2e.ts';
import { FaultProxy } from '../support/git-fault-proxy.ts';
import { OciFaultProxy } from '../support/oci-fault-proxy.ts';
import { pushCsctlRelease, startRegistry, type TestRegistry } from '../support/registry.ts';
import { benchResults, type Env, environment, table, waitUntil } from './fleet.ts';

const STACK = join(ROOT, 'stacks', 'docker-csoferrol-1-30');
const REPOSITORY = 'bench/csoferrol';
const WEBHOOK_SECRET = 'stackflux-bench-oci-webhook';
/** The Flux controllers a release's Ready waits on (its ClusterClass applied from the fleet). */
const FLUX = ['source-controller', 'kustomize-controller'];
/** How long the control waits for a release published without its notification. */
const CONTROL_MS = 30_000;
const log = (m: string): void => {
  process.stderr.write(`bench oci ${new Date().toISOString().slice(11, 19)}: ${m}\n`);
};
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const now = (): number => performance.now();
const ms = (x: number): number => Math.round(x * 10) / 10;

const usage = `Usage: npm run bench -- oci [flags]
  --tags N              release tags in the listed repositories (default 200)
  --pushes N            tag pushes timed to Ready per source kind (default 5)
  --scenarios LIST      of listing,notify (default both)
  --out FILE            JSON results (default bench-results/oci-<date>.json)
  --timeout-minutes M   give up on one wait after M minutes (default 10)
`;

interface Options {
  tags: number;
  pushes: number;
  scenarios: Set<string>;
  out: string;
  timeoutMs: number;
}

function options(argv: string[]): Options | undefined {
  const { values } = parseArgs({
    args: argv,
    options: {
      tags: { type: 'string', default: '200' },
      pushes: { type: 'string', default: '5' },
      scenarios: { type: 'string', default: 'listing,notify' },
      out: { type: 'string', default: '' },
      'timeout-minutes': { type: 'string', default: '10' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) return undefined;
  const positive = (name: string, text: string): number => {
    const n = Number(text);
    if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} ${text}: not a positive integer`);
    return n;
  };
  const date = new Date().toISOString().replaceAll(':', '').slice(0, 15);
  return {
    tags: positive('tags', values.tags),
    pushes: positive('pushes', values.pushes),
    scenarios: new Set(values.scenarios.split(',').map((s) => s.trim())),
    out: values.out || join(ROOT, 'bench-results', `oci-${date}.json`),
    timeoutMs: Number(values['timeout-minutes']) * 60_000,
  };
}

/** The release tags v1..vN of the csoferrol stack. */
const releaseTags = (n: number): string[] => Array.from({ length: n }, (_, i) => csoferrolTag(`v${i + 1}`));

/** One poll: wall time, what the proxy saw (requests by method, body bytes, every byte sent), tags with a commit. */
export interface Poll {
  ms: number;
  requests: number;
  byMethod: Record<string, number>;
  bodyBytes: number;
  wireBytes: number;
  tags: number;
}

interface CountingProxy {
  log: Array<{ method: string; bytes: number }>;
  readonly wireBytes: number;
}

/** Times `list` and reads what it cost from a proxy's log (entries appended since `mark`). */
async function poll(list: () => Promise<Array<{ commit: string }>>, proxy: CountingProxy): Promise<Poll> {
  const mark = proxy.log.length;
  const wire = proxy.wireBytes;
  const t0 = now();
  const tags = await list();
  const elapsed = now() - t0;
  // Both proxies finish an entry's byte count when the answer ends; let the last one close.
  await sleep(200);
  const seen = proxy.log.slice(mark);
  const byMethod: Record<string, number> = {};
  for (const r of seen) byMethod[r.method] = (byMethod[r.method] ?? 0) + 1;
  return {
    ms: ms(elapsed),
    requests: seen.length,
    byMethod,
    bodyBytes: seen.reduce((sum, r) => sum + r.bytes, 0),
    wireBytes: proxy.wireBytes - wire,
    tags: tags.filter((t) => t.commit !== '').length,
  };
}

/** Writes the assets of release `version` of the stack (ClusterClass served by the test environment) to a new folder. */
function releaseAssetsDir(work: string, version: string): string {
  const stack = join(work, `stack-${version}`);
  cpSync(STACK, stack, { recursive: true });
  servedClusterClass(stack);
  const dir = join(work, `assets-${version}`);
  mkdirSync(dir, { recursive: true });
  for (const [name, bytes] of packageCsctlRelease(stack, version)) writeFileSync(join(dir, name), bytes);
  return dir;
}

/** Puts the manifest `digest` of the registry's repository under each of `tags` (distribution API, no blobs moved). */
async function tagManifest(registry: TestRegistry, digest: string, mediaType: string, tags: string[]) {
  const base = `${registry.url}/v2/${REPOSITORY}/manifests`;
  const res = await fetch(`${base}/${digest}`, { headers: { accept: mediaType } });
  if (!res.ok) throw new Error(`GET manifest ${digest}: HTTP ${res.status}`);
  const manifest = Buffer.from(await res.arrayBuffer());
  for (const tag of tags) {
    const put = await fetch(`${base}/${tag}`, {
      method: 'PUT',
      headers: { 'content-type': mediaType },
      body: manifest,
    });
    if (put.status !== 201) throw new Error(`PUT manifest ${tag}: HTTP ${put.status} ${await put.text()}`);
  }
}

// --- 1. listing ---------------------------------------------------------------------------------
async function listing(env: Env, o: Options, work: string): Promise<Record<string, unknown>> {
  const tags = releaseTags(o.tags);
  const registry = await startRegistry({ tls: false });
  const ociProxy = await OciFaultProxy.start(registry.url);
  const gitProxy = await FaultProxy.start(env.e.gitServerUrl);
  try {
    log(`OCI: one csctl release pushed by csctl-push, then ${o.tags - 1} more tags on its manifest…`);
    const pushed = await pushCsctlRelease({
      registry: registry.host,
      repository: REPOSITORY,
      tag: tags[0] as string,
      dir: releaseAssetsDir(work, 'v1'),
      plainHttp: true,
    });
    await tagManifest(registry, pushed.digest, pushed.mediaType, tags.slice(1));

    log(`Git: ${o.tags} tags in a repository of the test environment's Git server…`);
    const repoDir = join(work, 'listing-repo');
    initRepo(repoDir);
    cutCsctlRelease(repoDir, 'docker-csoferrol-1-30', 'v1', servedClusterClass);
    for (const t of tags.slice(1)) git(repoDir, 'tag', t);
    const repoUrl = await createRepo(env.e, `bench-oci-listing-${process.pid}`);
    git(repoDir, 'push', '-q', repoUrl, 'HEAD:refs/heads/main', '--tags');

    const ociUrl = `oci://${ociProxy.host}/${REPOSITORY}`;
    // One client, as the controller has: its second poll may reuse what the first learnt.
    const oci = new OciClient();
    const ociPoll = () => poll(() => oci.listTags(ociUrl, undefined, { insecure: true }), ociProxy);
    const gitPoll = () => poll(() => listTags(gitProxy.proxied(repoUrl)), gitProxy);
    log('first and second poll of each…');
    const git1 = await gitPoll();
    const oci1 = await ociPoll();
    const git2 = await gitPoll();
    const oci2 = await ociPoll();
    return {
      tags: o.tags,
      setup: `OCI: 1 push (csctl-push) + ${o.tags - 1} manifest PUTs of the same manifest; Git: 1 commit, ${o.tags} lightweight tags`,
      oci: { first: oci1, second: oci2 },
      git: { first: git1, second: git2 },
    };
  } finally {
    await gitProxy.stop();
    await ociProxy.stop();
    await registry.stop();
  }
}

// --- 2. push → Ready through the notification ----------------------------------------------------
interface Kind {
  name: 'oci' | 'git';
  /**
   * Publishes release `version`: one tag push and its notification (Git: the webhook call; OCI:
   * the registry's, through a relay); `notify: false` publishes it with the notification withheld.
   */
  publish(version: string, notify?: boolean): Promise<void>;
  /** Notifications that reached the webhook (OCI: the registry's events through the relay). */
  notifications(): number;
  source: ClusterStack['spec']['source'];
  stop(): Promise<void>;
}

async function notifyRun(
  env: Env,
  o: Options,
  work: string,
  which: 'oci' | 'git',
): Promise<Record<string, unknown>> {
  const { client, e } = env;
  const ns = `bench-oci-${which}-${process.pid}`;
  await createTestNamespace(client, ns);
  await installFixtureCrds(client, 'capi-template-crds.yaml');
  const fleetUrl = await createRepo(e, `${ns}-fleet`);
  const controller = await ControllerProcess.start({
    kubeconfig: e.kubeconfig,
    namespace: ns,
    cacheDir: join(work, `cache-${which}`),
    webhookSecret: WEBHOOK_SECRET,
    concurrency: 4,
    extraArgs: [`--fleet-url=${fleetUrl}`, '--log-level=info'],
  });
  const hook = controller.webhookUrl;
  let kind: Kind | undefined;
  try {
    kind = which === 'oci' ? await ociKind(work, hook) : await gitKind(env, work, ns, hook);
    const release = (v: string) => client.get<CSKR>(API_VERSION, 'ClusterStackRelease', csoferrolTag(v), ns);
    const ready = async (v: string): Promise<boolean> => cond(await release(v), 'Ready')?.status === 'True';
    // A timeout names the release's Ready condition: what it waited on (Flux stopped by another
    // bench in a shared environment shows as the fleet's Kustomization not applied).
    const untilReady = (v: string, everyMs: number) =>
      controller.step(() =>
        waitUntil(`${which} ${v} Ready`, o.timeoutMs, () => ready(v), everyMs).catch(async (err: unknown) => {
          const c = cond(await release(v), 'Ready');
          throw new Error(
            `${String(err)}; Ready: ${c ? `${c.status} ${c.reason}: ${c.message}` : 'no condition'}`,
          );
        }),
      );
    // v1 Ready before the clock runs: the render processes and Flux's objects exist.
    await kind.publish('v1');
    await client.create(
      csoferrolClusterStack(ns, '', [], { autoSubscribe: true, interval: '1h', source: kind.source }),
    );
    log(`${which}: waiting for v1 Ready (untimed warm-up)…`);
    await untilReady('v1', 200);
    const samples: Array<{ version: string; pushMs: number; readyMs: number }> = [];
    for (let i = 2; i <= o.pushes + 1; i++) {
      const v = `v${i}`;
      const t0 = now();
      await kind.publish(v);
      const pushed = now();
      await untilReady(v, 50);
      samples.push({ version: v, pushMs: ms(pushed - t0), readyMs: ms(now() - t0) });
      log(`${which}: ${v} Ready ${ms(now() - t0)} ms after the push began (push ${ms(pushed - t0)} ms)`);
    }
    // The control: a release published with its notification withheld does not appear within
    // CONTROL_MS (the interval is an hour), so the notification is what made the others appear.
    const control = `v${o.pushes + 2}`;
    await kind.publish(control, false);
    await sleep(CONTROL_MS);
    const appeared = (await release(control)) !== undefined;
    log(
      `${which}: control ${control} without its notification: ${appeared ? 'APPEARED' : 'absent'} after ${CONTROL_MS / 1000} s`,
    );
    return {
      namespace: ns,
      samples,
      ...summary(samples.map((s) => s.readyMs)),
      notificationsReceived: kind.notifications(),
      control: { version: control, waitedMs: CONTROL_MS, appeared },
    };
  } finally {
    await controller.stop();
    await releaseControllerHolds(client, ns);
    await deleteTestNamespace(client, ns);
    await kind?.stop();
  }
}

async function ociKind(work: string, hook: string): Promise<Kind> {
  // The registry notifies through a relay (the OCI fault proxy used as a plain forwarder), so the
  // control can withhold a notification: 503 to the registry, nothing forwarded.
  const target = new URL(hook);
  const relay = await OciFaultProxy.start(target.origin);
  const registry = await startRegistry({
    tls: false,
    notifications: {
      url: `${relay.url}${target.pathname}`,
      headers: { Authorization: `Bearer ${WEBHOOK_SECRET}` },
    },
  });
  return {
    name: 'oci',
    source: { oci: { url: `oci://${registry.host}/${REPOSITORY}`, insecure: true } },
    notifications: () => relay.requests((r) => r.fault === 'pass' && r.status === 202).length,
    async publish(version, notify = true) {
      relay.set(notify ? 'pass' : 'unavailable');
      await pushCsctlRelease({
        registry: registry.host,
        repository: REPOSITORY,
        tag: csoferrolTag(version),
        dir: releaseAssetsDir(join(work, 'notify-oci'), version),
        plainHttp: true,
      });
    },
    async stop() {
      await registry.stop();
      await relay.stop();
    },
  };
}

async function gitKind(env: Env, work: string, ns: string, hook: string): Promise<Kind> {
  const repoUrl = await createRepo(env.e, `${ns}-release`);
  const repoDir = join(work, 'notify-git');
  initRepo(repoDir);
  let sent = 0;
  return {
    name: 'git',
    source: { git: { url: repoUrl }, path: 'stack' },
    notifications: () => sent,
    async publish(version, notify = true) {
      const tag = cutCsctlRelease(repoDir, 'docker-csoferrol-1-30', version, servedClusterClass);
      push(repoDir, repoUrl, tag);
      if (!notify) return;
      // What a Git host sends after the push: a signed GitHub push event.
      const body = JSON.stringify({ ref: `refs/tags/${tag}`, repository: { clone_url: repoUrl } });
      const res = await fetch(hook, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-github-event': 'push',
          'x-hub-signature-256': signBody(WEBHOOK_SECRET, body),
        },
        body,
      });
      if (res.status !== 202)
        throw new Error(`push webhook answered HTTP ${res.status}: ${await res.text()}`);
      sent++;
    },
    stop: async () => undefined,
  };
}

export function summary(values: number[]): { p50Ms: number; maxMs: number } {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  const p50 =
    sorted.length % 2 === 1 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
  return { p50Ms: ms(p50), maxMs: ms(sorted.at(-1) ?? 0) };
}

// --- the report -----------------------------------------------------------------------------------
const ratio = (a: number | undefined, b: number | undefined): string =>
  a === undefined || b === undefined || b === 0 ? '–' : `${(a / b).toFixed(2)}x`;

function report(results: Record<string, unknown>): string {
  const lines = ['stackflux OCI source benchmark (ratios are OCI / Git, both measured in this run)', ''];
  const l = results.listing as
    | { tags: number; setup: string; oci: Record<string, Poll>; git: Record<string, Poll> }
    | undefined;
  if (l !== undefined) {
    const rows: Array<Array<string | number | undefined>> = [
      [
        'poll',
        'source',
        'ms',
        'requests',
        'body bytes',
        'bytes sent',
        'release tags',
        'ms ratio',
        'requests ratio',
        'bytes sent ratio',
      ],
    ];
    const methods = (p: Poll) =>
      Object.entries(p.byMethod)
        .map(([m, k]) => `${k} ${m}`)
        .join(', ');
    for (const which of ['first', 'second'] as const) {
      const [g, c] = [l.git[which], l.oci[which]];
      if (g === undefined || c === undefined) continue;
      rows.push([which, `Git (${methods(g)})`, g.ms, g.requests, g.bodyBytes, g.wireBytes, g.tags]);
      rows.push([
        which,
        `OCI (${methods(c)})`,
        c.ms,
        c.requests,
        c.bodyBytes,
        c.wireBytes,
        c.tags,
        ratio(c.ms, g.ms),
        ratio(c.requests, g.requests),
        ratio(c.wireBytes, g.wireBytes),
      ]);
    }
    lines.push(`one poll of a repository with ${l.tags} release tags (${l.setup})`, table(rows), '');
  }
  const n = results.notify as
    | Record<string, { p50Ms: number; maxMs: number; samples: unknown[] }>
    | undefined;
  if (n?.git !== undefined || n?.oci !== undefined) {
    const rows: Array<Array<string | number | undefined>> = [
      ['source', 'pushes', 'p50 ms', 'max ms', 'p50 ratio', 'max ratio'],
    ];
    if (n.git) rows.push(['Git tag + push webhook', n.git.samples.length, n.git.p50Ms, n.git.maxMs]);
    if (n.oci)
      rows.push([
        'OCI push + registry notification',
        n.oci.samples.length,
        n.oci.p50Ms,
        n.oci.maxMs,
        ratio(n.oci.p50Ms, n.git?.p50Ms),
        ratio(n.oci.maxMs, n.git?.maxMs),
      ]);
    for (const k of ['git', 'oci'] as const) {
      const r = n[k] as
        | { notificationsReceived?: number; control?: { version: string; appeared: boolean } }
        | undefined;
      if (r?.control === undefined) continue;
      lines.push(
        `${k}: ${r.notificationsReceived} notifications accepted by the webhook; control ${r.control.version} published without its notification: ${r.control.appeared ? 'APPEARED (something else listed the source)' : `not there after ${CONTROL_MS / 1000} s`}`,
      );
    }
    lines.push(
      'tag push → ClusterStackRelease Ready (ClusterStack interval 1h: only the notification explains it)',
      table(rows),
    );
  }
  return lines.join('\n');
}

export async function runOciBench(argv: string[]): Promise<number> {
  const o = options(argv);
  if (o === undefined) {
    process.stdout.write(usage);
    return 0;
  }
  const env = await environment();
  const work = mkdtempSync(join(tmpdir(), 'stackflux-bench-oci-'));
  const { results, save } = benchResults(o.out, { options: { ...o, scenarios: [...o.scenarios] } });
  try {
    if (o.scenarios.has('listing')) {
      results.listing = await listing(env, o, work);
      save();
    }
    if (o.scenarios.has('notify')) {
      // Ready needs Flux: a shared environment's Flux may be stopped by another bench for a while.
      const fluxStopped = () => FLUX.filter((c) => isStopped(env.e.stateDir, c));
      if (fluxStopped().length > 0) log(`${fluxStopped().join(', ')} stopped (another run?); waiting…`);
      await waitUntil('Flux running', o.timeoutMs, () => fluxStopped().length === 0, 1_000);
      const notify: Record<string, unknown> = {};
      results.notify = notify;
      for (const which of ['git', 'oci'] as const) {
        log(`${which}: ${o.pushes} pushes to Ready…`);
        notify[which] = await notifyRun(env, o, work, which);
        save();
      }
    }
    process.stdout.write(`${report(results)}\n\nJSON: ${o.out}\n`);
    return 0;
  } catch (err) {
    save();
    log(`failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    return 1;
  } finally {
    env.client.close();
    if (env.owned) await down(env.e.stateDir, log);
    rmSync(work, { recursive: true, force: true });
  }
}
