// Issue 11 defect 3 end to end: `stackflux run` as a subprocess while one Cluster's values turn a
// template of the release into four nested #each over 100 items (10^8 iterations, ~half a minute of
// blocked event loop before). The render runs in a worker with a 2 s budget: that Cluster's
// ClusterAddon ends Ready=False RenderFailed naming the file and the limit (then, the template
// cooling down after one hit, RenderCoolingDown naming it too), another Cluster of the
// same release gets its fleet commit meanwhile, and /healthz answers every probe.
// The controller's Flux objects point at no workload kubeconfig (nothing is applied there).
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ClusterAddon } from '../../controller/api/clusteraddon.ts';
import type { ClusterStackRelease } from '../../controller/api/clusterstackrelease.ts';
import { API_VERSION } from '../../controller/api/meta.ts';
import { KubeClient, type KubeObject, loadKubeConfig } from '../../controller/runtime/client.ts';
import { createRepo, type Endpoints } from '../../hack/lib/testenv.ts';
import {
  CAPI,
  ControllerProcess,
  cond,
  createTestNamespace,
  cutRelease,
  e2eEnv,
  ferrolClusterStack,
  initRepo,
  push,
  releaseAddonNamespace,
} from '../support/e2e.ts';
import { eventually, uniqueName } from '../support/env.ts';

const env = e2eEnv();
const client = new KubeClient(loadKubeConfig({ kubeconfig: env.kubeconfig }));
const ns = uniqueName('render-limits');
const work = mkdtempSync(join(tmpdir(), 'stackflux-render-limits-'));
const repoDir = join(work, 'release');
const tag = 'docker-ferrol-1-30-v1';
type CA = ClusterAddon & KubeObject;

/** A Cluster of the release; `loop` (per-cluster values of cloud-config) feeds the nested #each. */
function cluster(name: string, loop: number[]): KubeObject {
  return {
    apiVersion: CAPI,
    kind: 'Cluster',
    metadata: { name, namespace: ns },
    spec: {
      clusterNetwork: { pods: { cidrBlocks: ['10.244.0.0/16'] } },
      controlPlaneEndpoint: { host: `${name}.example.internal`, port: 6443 },
      topology: {
        classRef: { name: tag },
        version: 'v1.30.4',
        variables: [{ name: 'stackfluxAddonValues', value: { 'cloud-config': { loop } } }],
      },
    },
  };
}

let controller: ControllerProcess | undefined;

describe('render limits: a hostile template does not hold up the controller', {
  timeout: 10 * 60_000,
}, () => {
  before(async () => {
    await createTestNamespace(client, ns);
    const repoUrl = await createRepo(env as Endpoints, `${ns}-release`);
    const fleetUrl = await createRepo(env as Endpoints, `${ns}-fleet`);
    initRepo(repoDir);
    cutRelease(repoDir, 'stack', {
      example: 'docker-ferrol-1-30',
      k8s: '1-30',
      version: 'v1',
      edit: (dir) => {
        const f = join(dir, 'cluster-addon', 'cloud-config', 'cloud-config.yaml.hbs');
        const each = '{{#each @root.Values.loop}}';
        writeFileSync(
          f,
          readFileSync(f, 'utf8').replace(
            '  cloud.conf: |',
            `  loop: "${each}${each}${each}${each}.{{/each}}{{/each}}{{/each}}{{/each}}"\n  cloud.conf: |`,
          ),
        );
        writeFileSync(
          join(dir, 'cluster-addon', 'cloud-config', 'values.yaml'),
          'region: r\nzone: z\nloadBalancerNetwork: n\nloop: []\n',
        );
      },
    });
    push(repoDir, repoUrl, tag);
    controller = await ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: ns,
      cacheDir: join(work, 'cache'),
      extraArgs: [
        `--fleet-url=${fleetUrl}`,
        '--fleet-batch-window=1s',
        '--render-timeout=2s',
        '--render-workers=2',
        // One hit cools the template down (issue 22 row 10), so the next reconcile shows it.
        '--render-cooldown-after=1',
      ],
    });
    await client.create(
      ferrolClusterStack(ns, 'ferrol', {
        versions: ['v1'],
        autoSubscribe: false,
        source: { git: { url: repoUrl }, path: 'stack' },
      }),
    );
    await eventually('release resolved', async () => {
      const r = await client.get<ClusterStackRelease & KubeObject>(
        API_VERSION,
        'ClusterStackRelease',
        tag,
        ns,
      );
      return r?.status?.commit !== undefined ? r : undefined;
    });
  });

  after(async () => {
    await controller?.stop();
    await releaseAddonNamespace(client, ns);
    client.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('stops the hostile render with RenderFailed (then RenderCoolingDown) naming the limit, renders the other Cluster, /healthz stays OK', async () => {
    const c = controller as ControllerProcess;
    await c.step(async () => {
      const healthz = c.readyzUrl.replace(/\/readyz$/, '/healthz');
      const probes: number[] = [];
      let probing = true;
      const prober = (async () => {
        while (probing) {
          // A blocked event loop answers nothing; a generous timeout still tells that apart.
          const res = await fetch(healthz, { signal: AbortSignal.timeout(15_000) }).catch(() => undefined);
          probes.push(res?.status ?? 0);
          await new Promise((r) => setTimeout(r, 250));
        }
      })();
      try {
        await client.create(
          cluster(
            'hostile',
            Array.from({ length: 100 }, (_, i) => i),
          ),
        );
        await client.create(cluster('good', []));
        const hostile = await eventually(
          'hostile ClusterAddon RenderFailed or RenderCoolingDown',
          async () => {
            const ca = await client.get<CA>(API_VERSION, 'ClusterAddon', 'hostile', ns);
            // It is reconciled again at once; one hit has cooled its template down by then.
            const reason = cond(ca, 'Ready')?.reason;
            return reason === 'RenderFailed' || reason === 'RenderCoolingDown' ? ca : undefined;
          },
          { timeoutMs: 180_000 },
        );
        const ready = cond(hostile, 'Ready');
        assert.equal(ready?.status, 'False');
        assert.match(
          ready?.message ?? '',
          /addon cloud-config: (cluster-addon\/cloud-config\/: not rendered until \S+: its renders hit a limit 1 times in a row, last: )?cluster-addon\/cloud-config\/cloud-config\.yaml\.hbs: rendering took longer than the time budget of 2s \(--render-timeout\) and was stopped/,
        );
        assert.equal(hostile.status?.fleetCommit, undefined, 'nothing of the hostile Cluster was committed');
        const good = await eventually(
          'good ClusterAddon has its fleet commit',
          async () => {
            const ca = await client.get<CA>(API_VERSION, 'ClusterAddon', 'good', ns);
            return ca?.status?.fleetCommit !== undefined ? ca : undefined;
          },
          { timeoutMs: 180_000 },
        );
        assert.match(good.status?.fleetCommit ?? '', /^[0-9a-f]{40}$/);
      } finally {
        probing = false;
        await prober;
      }
      assert.ok(probes.length > 0);
      assert.deepEqual(
        probes.filter((s) => s !== 200),
        [],
        'every /healthz probe answered 200 while the hostile template rendered',
      );
      assert.ok(c.running, 'the controller did not restart');
    });
  });

  it('does not render the hostile template again while it cools down: RenderCoolingDown naming the limit (issue 22)', async () => {
    const c = controller as ControllerProcess;
    await c.step(async () => {
      // A change of the Cluster that the template does not read: the ClusterAddon is reconciled.
      await client.mergePatch(CAPI, 'Cluster', 'hostile', ns, { metadata: { labels: { poke: '1' } } });
      const hostile = await eventually(
        'hostile ClusterAddon RenderCoolingDown',
        async () => {
          const ca = await client.get<CA>(API_VERSION, 'ClusterAddon', 'hostile', ns);
          return cond(ca, 'Ready')?.reason === 'RenderCoolingDown' ? ca : undefined;
        },
        { timeoutMs: 120_000 },
      );
      const ready = cond(hostile, 'Ready');
      assert.equal(ready?.status, 'False');
      assert.match(
        ready?.message ?? '',
        /addon cloud-config: cluster-addon\/cloud-config\/: not rendered until \S+: its renders hit a limit \d+ times in a row, last: cluster-addon\/cloud-config\/cloud-config\.yaml\.hbs: rendering took longer than the time budget of 2s \(--render-timeout\)/,
      );
      assert.equal(
        hostile.status?.fleetCommit,
        undefined,
        'still nothing of the hostile Cluster was committed',
      );
      // The other Cluster renders the same template with its own values: not cooling down.
      await client.mergePatch(CAPI, 'Cluster', 'good', ns, { metadata: { labels: { poke: '1' } } });
      const good = await client.get<CA>(API_VERSION, 'ClusterAddon', 'good', ns);
      assert.notEqual(cond(good, 'Ready')?.reason, 'RenderCoolingDown');
      assert.match(good?.status?.fleetCommit ?? '', /^[0-9a-f]{40}$/);
      assert.ok(c.running, 'the controller did not restart');
    });
  });
});
