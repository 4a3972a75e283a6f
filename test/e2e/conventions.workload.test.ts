// Issue 12 item 2 end to end: Flux's conventions on stackflux's own objects, against the real test
// environment with `stackflux run` as a subprocess and NO push webhook (the ClusterStack polls
// once an hour): reconcile.fluxcd.io/requestedAt lists the source at once and is acknowledged in
// status.lastHandledReconcileAt; spec.suspend stops a new tag from creating a release until resume;
// `stackflux get|reconcile|suspend|resume` as a user types them; and `kubectl wait
// --for=condition=Ready` on the three kinds (kubectl from $KUBECTL_BIN or PATH; the kstatus
// semantics are also checked from the API: observedGeneration == generation, Ready True for it).
// The steps share state and run in order.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ClusterAddon } from '../../controller/api/clusteraddon.ts';
import type { ClusterStack } from '../../controller/api/clusterstack.ts';
import type { GitRepository } from '../../controller/api/flux.ts';
import { API_VERSION, RECONCILE_REQUEST_ANNOTATION } from '../../controller/api/meta.ts';
import { KubeClient, type KubeObject, loadKubeConfig } from '../../controller/runtime/client.ts';
import { createRepo, type Endpoints, workloadKubeconfigSecret } from '../../hack/lib/testenv.ts';
import {
  CAPI,
  ControllerProcess,
  type CSKR,
  cond,
  createTestNamespace,
  e2eEnv,
  ferrolClusterStack,
  initRepo,
  releaseAddonNamespace,
  releaseFerrol130,
  releaseReaders,
  required,
  stackflux,
  waitFor,
} from '../support/e2e.ts';
import { uniqueName } from '../support/env.ts';

const env = { ...e2eEnv(), workloadKubeconfig: required('WORKLOAD_KUBECONFIG') };
const client = new KubeClient(loadKubeConfig({ kubeconfig: env.kubeconfig }));
const ns = uniqueName('conventions');
const work = mkdtempSync(join(tmpdir(), 'stackflux-conventions-'));
const repoDir = join(work, 'repo');
const cacheDir = join(work, 'cache');
const tag = (v: string) => `docker-ferrol-1-30-${v}`;
const SOURCE = 'source.toolkit.fluxcd.io/v1';
const KUSTOMIZE = 'kustomize.toolkit.fluxcd.io/v1';

type CSK = ClusterStack & KubeObject;
type CA = ClusterAddon & KubeObject;

let controller: ControllerProcess | undefined;
async function step(fn: () => Promise<void>): Promise<void> {
  if (controller === undefined) throw new Error('the controller did not start');
  await controller.step(fn);
}

const csk = (): Promise<CSK | undefined> => client.get<CSK>(API_VERSION, 'ClusterStack', 'ferrol', ns);
const { cskr, releaseReady } = releaseReaders(client, ns);

/** `stackflux ARGS` against the test cluster; fails the test on a non-zero exit unless allowed. */
function cli(args: string[], expectStatus = 0): { stdout: string; stderr: string } {
  const r = stackflux(args, { KUBECONFIG: env.kubeconfig });
  assert.equal(
    r.status,
    expectStatus,
    `stackflux ${args.join(' ')} exited ${r.status}:\n${r.stderr}${r.stdout}`,
  );
  return r;
}

/** The rows of a `stackflux get` table (cells split on flux's tab separators). */
function table(stdout: string): Record<string, string>[] {
  const [header, ...rows] = stdout
    .trimEnd()
    .split('\n')
    .map((l) => l.split('\t').map((c) => c.trim()));
  assert.ok(header, 'a header row');
  return rows.map((cells) => Object.fromEntries(header.map((h, i) => [h, cells[i] ?? ''])));
}

// --- kubectl wait ------------------------------------------------------------------------------
/** kubectl from $KUBECTL_BIN or PATH; undefined when the environment has none. */
function kubectlBin(): string | undefined {
  if (process.env.KUBECTL_BIN) return process.env.KUBECTL_BIN;
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    const candidate = join(dir, 'kubectl');
    if (spawnSync(candidate, ['version', '--client'], { encoding: 'utf8' }).status === 0) return candidate;
  }
  return undefined;
}
const kubectl = kubectlBin();
const kubectlRuns: string[] = [];

/**
 * `kubectl wait --for=condition=Ready` on the object (when kubectl exists), and the semantics
 * kstatus computes from the API in any case: status.observedGeneration == metadata.generation and
 * a Ready=True condition observed for that generation.
 */
async function waitReadyAsKubectl(resource: string, kind: string, name: string): Promise<void> {
  if (kubectl !== undefined) {
    const out = execFileSync(
      kubectl,
      ['wait', '--for=condition=Ready', `${resource}/${name}`, '-n', ns, '--timeout=180s'],
      { encoding: 'utf8', env: { ...process.env, KUBECONFIG: env.kubeconfig } },
    );
    assert.match(out, /condition met/);
    kubectlRuns.push(`${resource}/${name}`);
  }
  const obj = await client.get<KubeObject & { status?: { observedGeneration?: number } }>(
    API_VERSION,
    kind,
    name,
    ns,
  );
  assert.ok(obj, `${kind} ${name} exists`);
  const generation = obj.metadata.generation;
  assert.equal(typeof generation, 'number', `${kind} ${name} has metadata.generation`);
  assert.equal(
    obj.status?.observedGeneration,
    generation,
    `${kind} ${name}: observedGeneration == generation`,
  );
  const ready = cond(obj as { status?: { conditions?: { type: string; status: string }[] } }, 'Ready') as
    | { status: string; observedGeneration?: number }
    | undefined;
  assert.equal(ready?.status, 'True', `${kind} ${name} Ready=True`);
  assert.equal(ready?.observedGeneration, generation, `${kind} ${name}: Ready observed for this generation`);
}

// --- the steps -------------------------------------------------------------------------------
describe("Flux's conventions on stackflux objects: requestedAt, suspend, get/reconcile verbs, kubectl wait", {
  timeout: 15 * 60_000,
}, () => {
  let repoUrl = '';

  before(async () => {
    await createTestNamespace(client, ns);
    repoUrl = await createRepo(env as Endpoints, ns);
    const fleetUrl = await createRepo(env as Endpoints, `${ns}-fleet`);
    initRepo(repoDir);
    releaseFerrol130(repoDir, repoUrl, 'v1');
    controller = await ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: ns,
      cacheDir,
      extraArgs: [`--fleet-url=${fleetUrl}`, '--fleet-batch-window=1s'],
    });
    // Listed when created, then once an hour: nothing but a request lists it again in this test.
    await client.create(
      ferrolClusterStack(ns, 'ferrol', {
        interval: '1h',
        source: { git: { url: repoUrl }, path: 'ferrol-1-30' },
      }),
    );
    await waitFor('release v1 Ready', () => releaseReady(tag('v1')));
  });

  after(async () => {
    await controller?.stop();
    await releaseAddonNamespace(client, ns);
    client.close();
    rmSync(work, { recursive: true, force: true });
    process.stderr.write(
      kubectl !== undefined
        ? `kubectl wait ran (${kubectl}) on: ${kubectlRuns.join(', ')}\n`
        : 'no kubectl in this environment: checked kstatus semantics from the API only\n',
    );
  });

  it('1. requestedAt lists the source at once: a just-pushed tag appears without webhook or poll; lastHandledReconcileAt acknowledges it', () =>
    step(async () => {
      await waitFor('ClusterStack Ready on v1', async () => {
        const c = await csk();
        return cond(c, 'Ready')?.status === 'True' && c?.status?.latestRelease === tag('v1') ? c : undefined;
      });
      releaseFerrol130(repoDir, repoUrl, 'v2');
      const token = `e2e-${Date.now()}`;
      await client.mergePatch(API_VERSION, 'ClusterStack', 'ferrol', ns, {
        metadata: { annotations: { [RECONCILE_REQUEST_ANNOTATION]: token } },
      });
      const acknowledged = await waitFor('lastHandledReconcileAt == the request', async () => {
        const c = await csk();
        return c?.status?.lastHandledReconcileAt === token ? c : undefined;
      });
      // The reconcile that acknowledged the request had listed the source first: v2 is in its view.
      assert.ok(
        acknowledged.status?.summary?.some((s) => s.name === tag('v2')),
        `v2 in the acknowledged status: ${JSON.stringify(acknowledged.status?.summary)}`,
      );
      assert.ok(await cskr(tag('v2')), 'ClusterStackRelease v2 created by the requested reconcile');
      await waitFor('release v2 Ready', () => releaseReady(tag('v2')));
    }));

  it('2. stackflux suspend: a new tag creates no release, a request is not acknowledged; status and get show it', () =>
    step(async () => {
      const s = cli(['suspend', 'clusterstack', 'ferrol', '-n', ns]);
      assert.match(s.stderr, /✔ ClusterStack suspended/);
      releaseFerrol130(repoDir, repoUrl, 'v3');
      // A request together with a spec change: once the status is for that generation, the
      // controller reconciled the suspended ClusterStack after the push (not suspended, this
      // reconcile would have listed v3 and created its release, as step 1 showed).
      const before = await csk();
      await client.mergePatch(API_VERSION, 'ClusterStack', 'ferrol', ns, {
        metadata: { annotations: { [RECONCILE_REQUEST_ANNOTATION]: 'while-suspended' } },
        spec: { interval: '59m' },
      });
      const suspended = await waitFor(
        'suspended ClusterStack reconciled for its new generation',
        async () => {
          const c = await csk();
          const gen = c?.metadata.generation;
          return gen !== undefined &&
            gen > (before?.metadata.generation ?? 0) &&
            c?.status?.observedGeneration === gen
            ? c
            : undefined;
        },
      );
      assert.equal(cond(suspended, 'Ready')?.reason, 'Suspended');
      assert.match(cond(suspended, 'Ready')?.message ?? '', /stackflux resume clusterstack ferrol/);
      assert.notEqual(suspended.status?.lastHandledReconcileAt, 'while-suspended');
      assert.equal(await cskr(tag('v3')), undefined, 'no release while suspended');
      assert.ok(await cskr(tag('v2')), 'existing releases stay');

      const rows = table(cli(['get', 'clusterstacks', '-n', ns]).stdout);
      assert.deepEqual(
        rows.map((r) => [r.NAME, r.SUSPENDED]),
        [['ferrol', 'True']],
      );
      // flux reconcile refuses a suspended object; so does stackflux.
      const refused = cli(['reconcile', 'clusterstack', 'ferrol', '-n', ns], 1);
      assert.match(refused.stderr, /resource is suspended/);
    }));

  it('3. stackflux resume requests a reconcile and waits: v3 is picked up and Ready', () =>
    step(async () => {
      const r = cli(['resume', 'clusterstack', 'ferrol', '-n', ns, '--timeout', '5m']);
      assert.match(r.stderr, /► resuming ClusterStack ferrol in .* namespace/);
      assert.match(r.stderr, /✔ ClusterStack reconciliation completed/);
      assert.match(r.stderr, new RegExp(`✔ latest release ${tag('v3')} is Ready`));
      const c = await csk();
      assert.equal(c?.spec.suspend, false);
      assert.equal(
        c?.status?.lastHandledReconcileAt,
        c?.metadata.annotations?.[RECONCILE_REQUEST_ANNOTATION],
      );
      assert.equal(cond(await cskr(tag('v3')), 'Ready')?.status, 'True');
    }));

  it('4. stackflux get clusterstacks|releases [-A] prints flux get columns', () =>
    step(async () => {
      const stacks = table(cli(['get', 'clusterstacks', '-n', ns]).stdout);
      assert.deepEqual(stacks, [
        {
          NAME: 'ferrol',
          REVISION: tag('v3'),
          SUSPENDED: 'False',
          READY: 'True',
          MESSAGE: `latest release ${tag('v3')} is Ready`,
        },
      ]);
      const out = cli(['get', 'releases', '-A']).stdout;
      assert.match(
        out.split('\n')[0] ?? '',
        /^NAMESPACE\s*\tNAME\s*\tREVISION\s*\tSUSPENDED\s*\tREADY\s*\tMESSAGE$/,
      );
      const releases = table(out).filter((r) => r.NAMESPACE === ns);
      const v3 = (await cskr(tag('v3'))) as CSKR;
      assert.ok(
        releases.some(
          (r) =>
            r.NAME === tag('v3') &&
            // A commit-pinned GitRepository's revision is refs/tags/<tag>@sha1:<commit> (Flux).
            r.REVISION === `refs/tags/${tag('v3')}@sha1:${v3.status?.commit}` &&
            r.READY === 'True',
        ),
      );
      const none = cli(['get', 'addons', '-n', ns]);
      assert.equal(none.stdout, '');
      assert.match(none.stderr, new RegExp(`no ClusterAddon objects found in ${ns} namespace`));
    }));

  it('5. stackflux reconcile clusterstack --with-source asks Flux to fetch the release sources first', () =>
    step(async () => {
      const r = cli(['reconcile', 'clusterstack', 'ferrol', '-n', ns, '--with-source']);
      const gitRepository = (await cskr(tag('v3')))?.status?.gitRepository ?? '';
      assert.notEqual(gitRepository, '');
      assert.match(r.stderr, new RegExp(`► annotating GitRepository ${gitRepository} in ${ns} namespace`));
      assert.match(r.stderr, new RegExp(`✔ fetched revision refs/tags/${tag('v3')}@sha1:[0-9a-f]{40}`));
      assert.ok(
        r.stderr.indexOf('GitRepository reconciliation completed') <
          r.stderr.indexOf('► annotating ClusterStack'),
        'the source first, then the ClusterStack',
      );
      const repo = await client.get<
        GitRepository & KubeObject & { status?: { lastHandledReconcileAt?: string } }
      >(SOURCE, 'GitRepository', gitRepository, ns);
      assert.ok(repo?.metadata.annotations?.[RECONCILE_REQUEST_ANNOTATION]);
      assert.equal(
        repo?.status?.lastHandledReconcileAt,
        repo?.metadata.annotations?.[RECONCILE_REQUEST_ANNOTATION],
      );
      const c = await csk();
      assert.equal(
        c?.status?.lastHandledReconcileAt,
        c?.metadata.annotations?.[RECONCILE_REQUEST_ANNOTATION],
      );
    }));

  it('6. a ClusterAddon: reconcile re-renders, passes the request to its Flux sources, acknowledges it', () =>
    step(async () => {
      const text = readFileSync(env.workloadKubeconfig, 'utf8');
      await client.create(workloadKubeconfigSecret(ns, 'c1', text) as KubeObject);
      await client.create({
        apiVersion: CAPI,
        kind: 'Cluster',
        metadata: { name: 'c1', namespace: ns },
        spec: {
          clusterNetwork: { pods: { cidrBlocks: ['10.244.0.0/16'] } },
          controlPlaneEndpoint: { host: 'c1.example.internal', port: 6443 },
          topology: { classRef: { name: tag('v3') }, version: 'v1.30.4' },
        },
      });
      await waitFor('ClusterAddon c1 Ready', async () => {
        const ca = await client.get<CA>(API_VERSION, 'ClusterAddon', 'c1', ns);
        return cond(ca, 'Ready')?.status === 'True' ? ca : undefined;
      });
      const r = cli(['reconcile', 'clusteraddon', 'c1', '-n', ns]);
      assert.match(r.stderr, /✔ ClusterAddon reconciliation completed/);
      const ca = await client.get<CA>(API_VERSION, 'ClusterAddon', 'c1', ns);
      const token = ca?.metadata.annotations?.[RECONCILE_REQUEST_ANNOTATION];
      assert.ok(token);
      assert.equal(ca?.status?.lastHandledReconcileAt, token);
      // Every Flux source its Kustomizations read got the same request.
      const ks = await client.list<KubeObject & { spec: { sourceRef: { kind: string; name: string } } }>(
        KUSTOMIZE,
        'Kustomization',
        { namespace: ns, labelSelector: 'stackflux.io/cluster=c1' },
      );
      const sources = new Set(ks.items.map((k) => `${k.spec.sourceRef.kind}/${k.spec.sourceRef.name}`));
      assert.ok(sources.size > 0);
      for (const s of sources) {
        const [kind = '', name = ''] = s.split('/');
        const src = await client.get(SOURCE, kind, name, ns);
        assert.equal(
          src?.metadata.annotations?.[RECONCILE_REQUEST_ANNOTATION],
          token,
          `${s} got the request`,
        );
      }
    }));

  it('7. kubectl wait --for=condition=Ready works on ClusterStack, ClusterStackRelease and ClusterAddon', () =>
    step(async () => {
      await waitReadyAsKubectl('clusterstacks.stackflux.io', 'ClusterStack', 'ferrol');
      await waitReadyAsKubectl('clusterstackreleases.stackflux.io', 'ClusterStackRelease', tag('v3'));
      await waitReadyAsKubectl('clusteraddons.stackflux.io', 'ClusterAddon', 'c1');
    }));
});
