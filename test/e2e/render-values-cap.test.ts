// Issue 22 row 4 end to end: `stackflux run` as a subprocess while a Helm addon's values.yaml.hbs
// renders one 350 MB scalar for one Cluster (10,000 copies of a 35 KB value of values.yaml; before,
// it reached the controller's thread, blocked it for seconds and took its RSS to 1.9 GB, an OOM
// kill under the install manifest's 1 Gi). Now the render process stops it on --render-max-output:
// that Cluster's ClusterAddon ends Ready=False RenderFailed naming the file and the cap, another
// Cluster of the release (whose values make the scalar empty) gets its fleet commit, the controller
// is not restarted and its peak RSS (VmHWM) stays far below the scalar.
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
  addonCluster,
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
const ns = uniqueName('render-cap');
const work = mkdtempSync(join(tmpdir(), 'stackflux-render-cap-'));
const repoDir = join(work, 'release');
const tag = 'docker-ferrol-1-31-v1';
type CA = ClusterAddon & KubeObject;
/** Peak RSS the controller may reach: its own working set, far below the 350 MB scalar. */
const MAX_CONTROLLER_HWM_MB = 600;

/** VmHWM (peak resident set) of a process, in MB. */
function peakRssMb(pid: number): number {
  const m = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  assert.ok(m, `no VmHWM for pid ${pid}`);
  return Number(m[1]) / 1024;
}

let controller: ControllerProcess | undefined;

describe('render output cap: a Helm values template rendering a huge scalar', {
  timeout: 10 * 60_000,
}, () => {
  before(async () => {
    await createTestNamespace(client, ns);
    const repoUrl = await createRepo(env as Endpoints, `${ns}-release`);
    const fleetUrl = await createRepo(env as Endpoints, `${ns}-fleet`);
    initRepo(repoDir);
    cutRelease(repoDir, 'stack', {
      example: 'docker-ferrol-1-31',
      k8s: '1-31',
      version: 'v1',
      edit: (dir) => {
        // Only the Helm addon `inventory`, its values template writing `chunk` items² times.
        for (const addon of ['cni', 'cloud-config', 'csi', 'metrics-server']) {
          rmSync(join(dir, 'cluster-addon', addon), { recursive: true });
        }
        const inventory = join(dir, 'cluster-addon', 'inventory');
        rmSync(join(inventory, 'values.schema.json'));
        const items = Array.from({ length: 100 }, (_, i) => i).join(', ');
        writeFileSync(join(inventory, 'values.yaml'), `items: [${items}]\nchunk: "${'x'.repeat(35_000)}"\n`);
        writeFileSync(
          join(inventory, 'values.yaml.hbs'),
          'big: "{{#each Values.items}}{{#each @root.Values.items}}{{@root.Values.chunk}}{{/each}}{{/each}}"\n',
        );
        const stack = readFileSync(join(dir, 'stack.yaml'), 'utf8').replace(/^addons:[\s\S]*$/m, '');
        writeFileSync(
          join(dir, 'stack.yaml'),
          `${stack}addons:\n  - name: inventory\n    targetNamespace: ${ns}\n`,
        );
      },
    });
    push(repoDir, repoUrl, tag);
    controller = await ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: ns,
      cacheDir: join(work, 'cache'),
      extraArgs: [`--fleet-url=${fleetUrl}`, '--fleet-batch-window=1s'],
    });
    await client.create(
      ferrolClusterStack(ns, 'ferrol', {
        kubernetesVersion: '1.31',
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

  it('fails that ClusterAddon on the output cap, renders the other Cluster, and the controller RSS stays bounded', async (t) => {
    const c = controller as ControllerProcess;
    await c.step(async () => {
      const pid = c.pid;
      assert.ok(pid !== undefined);
      const version = 'v1.31.2';
      await client.create(addonCluster(ns, 'huge', { podCidr: '10.244.0.0/16', className: tag, version }));
      await client.create(
        addonCluster(ns, 'small', {
          podCidr: '10.245.0.0/16',
          className: tag,
          version,
          values: { inventory: { items: [] } },
        }),
      );
      const huge = await eventually(
        'huge ClusterAddon RenderFailed',
        async () => {
          const ca = await client.get<CA>(API_VERSION, 'ClusterAddon', 'huge', ns);
          return cond(ca, 'Ready')?.reason === 'RenderFailed' ? ca : undefined;
        },
        { timeoutMs: 180_000 },
      );
      const ready = cond(huge, 'Ready');
      assert.equal(ready?.status, 'False');
      assert.match(
        ready?.message ?? '',
        /addon inventory: cluster-addon\/inventory\/values\.yaml\.hbs \(rendered\): the addon's output exceeds the limit of 8 MiB \(--render-max-output\)/,
      );
      assert.equal(huge.status?.fleetCommit, undefined, 'nothing of that Cluster was committed');
      const small = await eventually(
        'small ClusterAddon has its fleet commit',
        async () => {
          const ca = await client.get<CA>(API_VERSION, 'ClusterAddon', 'small', ns);
          return ca?.status?.fleetCommit !== undefined ? ca : undefined;
        },
        { timeoutMs: 180_000 },
      );
      assert.match(small.status?.fleetCommit ?? '', /^[0-9a-f]{40}$/);
      assert.ok(c.running, 'the controller did not restart');
      assert.equal(c.pid, pid, 'the same controller process');
      const hwm = peakRssMb(pid);
      t.diagnostic(`controller VmHWM ${hwm.toFixed(0)} MB`);
      assert.ok(
        hwm < MAX_CONTROLLER_HWM_MB,
        `the controller's peak RSS was ${hwm.toFixed(0)} MB (bound ${MAX_CONTROLLER_HWM_MB} MB)`,
      );
    });
  });
});
