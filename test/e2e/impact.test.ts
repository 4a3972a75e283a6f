// Issue 25 part 3 (impact and approval), on the test environment: 4 Clusters on v1 of a Progressive
// ClusterStack with spec.rollout.requireApproval {maxClustersFailing: 0}; c4 sets the cni MTU to
// 9000, which v2's values schema refuses (maximum 1500). When v2 becomes the rollout target:
//   - the live controller writes v2's status.impact, and it is the summary of the preview
//     `stackflux preview clusterstack ferrol --release v2` makes (c4 failing with ValuesInvalid);
//   - the rollout waits (Waiting/WaitingForApproval, the numbers in its message), no Cluster moves;
//   - `stackflux rollout approve ferrol` annotates v2 and the first Cluster moves.
// No Cluster API controllers run: nothing here needs a Cluster's status (the test stops at the
// first move); no kubeconfig Secret exists, so Flux applies nothing into the workload cluster.
import assert from 'node:assert/strict';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ClusterStack } from '../../controller/api/clusterstack.ts';
import type { ClusterStackRelease } from '../../controller/api/clusterstackrelease.ts';
import { API_VERSION } from '../../controller/api/meta.ts';
import { APPROVED_ANNOTATION, ROLLOUT_ANNOTATIONS } from '../../controller/api/rollout.ts';
import type { PreviewResult } from '../../controller/preview/core.ts';
import { impactSummary } from '../../controller/preview/impact.ts';
import type { KubeObject } from '../../controller/runtime/client.ts';
import { createRepo, type Endpoints } from '../../hack/lib/testenv.ts';
import {
  addonCluster,
  CAPI,
  ControllerProcess,
  createTestNamespace,
  deleteClustersAndAddons,
  deleteTestNamespace,
  e2eSuite,
  ferrolClusterStack,
  ferrolTag,
  fleetCommitsAt,
  initRepo,
  releaseFerrol130,
  stackflux,
  waitFor,
} from '../support/e2e.ts';

const { env, client, ns, work, repoDir } = e2eSuite('impact');
const cacheDir = join(work, 'cache');
let fleetUrl = '';
const CLUSTERS = ['c1', 'c2', 'c3', 'c4'];

type CSK = ClusterStack & KubeObject;
type CSKR = ClusterStackRelease & KubeObject;

describe('impact of a new rollout target and the approval gate', { timeout: 20 * 60_000 }, () => {
  let controller: ControllerProcess | undefined;

  before(async () => {
    await createTestNamespace(client, ns);
    const repoUrl = await createRepo(env as Endpoints, ns);
    fleetUrl = await createRepo(env as Endpoints, `${ns}-fleet`);
    initRepo(repoDir);
    releaseFerrol130(repoDir, repoUrl, 'v1', {
      version: 'v2',
      edit: (dir) => {
        const schema = join(dir, 'cluster-addon', 'cni', 'values.schema.json');
        writeFileSync(schema, readFileSync(schema, 'utf8').replace('"maximum": 9000', '"maximum": 1500'));
      },
    });
    controller = await ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: ns,
      cacheDir,
      extraArgs: [`--fleet-url=${fleetUrl}`, '--fleet-batch-window=1s'],
    });
    await controller.step(async () => {
      await client.create(
        ferrolClusterStack(ns, 'ferrol', {
          source: { git: { url: repoUrl }, path: 'ferrol-1-30' },
          autoSubscribe: false,
          versions: ['v1'],
          rollout: { strategy: 'Progressive', requireApproval: { maxClustersFailing: 0 } },
        }),
      );
      for (const [i, name] of CLUSTERS.entries())
        await client.create(
          addonCluster(ns, name, {
            podCidr: `10.${i + 1}.0.0/16`,
            className: ferrolTag('v1'),
            version: 'v1.30.4',
            ...(name === 'c4' ? { values: { cni: { mtu: 9000 } } } : {}),
          }),
        );
      // The fleet branches hold v1 before v2 is announced: the impact compares with them.
      await fleetCommitsAt(client, ns, ferrolTag('v1'), CLUSTERS.length);
    });
  });

  after(async () => {
    await client
      .mergePatch(API_VERSION, 'ClusterStack', 'ferrol', ns, { spec: { rollout: { strategy: 'Manual' } } })
      .catch(() => undefined);
    await deleteClustersAndAddons(client, ns, CLUSTERS);
    await controller?.stop();
    await deleteTestNamespace(client, ns);
    client.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('v2 as target: status.impact is the preview, the rollout waits for approval, approve moves', async () => {
    const c = controller;
    assert.ok(c);
    await c.step(async () => {
      await client.mergePatch(API_VERSION, 'ClusterStack', 'ferrol', ns, {
        spec: { versions: ['v1', 'v2'] },
      });
      const waiting = await waitFor(
        'the rollout to v2 waits for approval',
        async () => {
          const cs = await client.get<CSK>(API_VERSION, 'ClusterStack', 'ferrol', ns);
          const r = cs?.status?.rollout;
          return r?.targetRelease === ferrolTag('v2') && r.reason === 'WaitingForApproval' ? r : undefined;
        },
        { timeoutMs: 360_000 },
      );
      assert.equal(waiting.phase, 'Waiting');
      assert.match(waiting.message ?? '', /1 > maxClustersFailing 0/);
      assert.match(waiting.message ?? '', new RegExp(`failing: ${ns}/c4: ValuesInvalid`));
      for (const name of CLUSTERS) {
        const cl = await client.get(CAPI, 'Cluster', name, ns);
        assert.equal(cl?.metadata.annotations?.[ROLLOUT_ANNOTATIONS.to], undefined, `${name} did not move`);
      }

      const v2 = await client.get<CSKR>(API_VERSION, 'ClusterStackRelease', ferrolTag('v2'), ns);
      const impact = v2?.status?.impact;
      assert.ok(impact, 'status.impact written');
      assert.equal(impact.commit, v2?.status?.commit);
      assert.equal(impact.clusters, 4);
      assert.equal(impact.clustersFailing, 1);
      assert.deepEqual(impact.failing, [`${ns}/c4: ValuesInvalid`]);

      const cli = stackflux([
        'preview',
        'clusterstack',
        'ferrol',
        '-n',
        ns,
        `--release=${ferrolTag('v2')}`,
        `--kubeconfig=${env.kubeconfig}`,
        `--fleet-url=${fleetUrl}`,
        `--cache-dir=${cacheDir}-cli`,
        '-o',
        'json',
      ]);
      assert.equal(cli.status, 1, cli.stderr);
      const preview = JSON.parse(cli.stdout) as PreviewResult;
      const { computedAt: _t, ...expected } = impactSummary(preview, impact.commit, new Date());
      const { computedAt: _c, ...got } = impact;
      assert.deepEqual(got, expected, 'the status.impact is the summary of the CLI preview');

      const approve = stackflux(['rollout', 'approve', 'ferrol', '-n', ns, `--kubeconfig=${env.kubeconfig}`]);
      assert.equal(approve.status, 0, approve.stderr);
      assert.match(approve.stderr, /1 failing to render/);
      const approved = await client.get<CSKR>(API_VERSION, 'ClusterStackRelease', ferrolTag('v2'), ns);
      assert.equal(approved?.metadata.annotations?.[APPROVED_ANNOTATION], ferrolTag('v2'));
      const moved = await waitFor(
        'the first Cluster moves to v2 once approved',
        async () => {
          for (const name of CLUSTERS) {
            const cl = await client.get(CAPI, 'Cluster', name, ns);
            if (cl?.metadata.annotations?.[ROLLOUT_ANNOTATIONS.to] === ferrolTag('v2')) return name;
          }
          return undefined;
        },
        { timeoutMs: 120_000 },
      );
      assert.equal(moved, 'c1');
      writeFileSync(
        join(process.env.PREVIEW_OUTPUT_DIR ?? work, 'impact.txt'),
        `${JSON.stringify(impact, null, 2)}\n${waiting.message ?? ''}\n${approve.stderr}`,
      );
    });
  });
});
