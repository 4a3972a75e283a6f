// Issue 31, F4 end to end on the test environment: what rolls out is what was previewed and
// approved. A Progressive ClusterStack requiring approval of every release; c1 and c2 on v1
// (maxConcurrent 2). v2 adds a template that renders a ClusterRoleBinding (every authenticated
// user cluster-admin) only when the Cluster object shows a resourceVersion: the live informer's
// Cluster has one, the preview's snapshot had none, so on main the impact showed a harmless change
// and the live fan-out wrote the ClusterRoleBinding.
//   - the impact records a render digest per Cluster; approved, c1 moves and its fleet branch is
//     exactly the render the impact recorded (no ClusterRoleBinding: preview and live see one
//     Cluster object);
//   - c2's values change after the impact was computed: its live render differs, so c2 is held
//     (RenderApproved=False, RenderDiffersFromApproved) on v1 and the impact is computed again;
//   - the approval of the older impact does not approve the newer one (c2 waits); approving the
//     new impact moves c2, to the render that impact recorded.
// No Cluster API controllers run and no kubeconfig Secret exists: the fleet branches are the
// outcome (Flux applies nothing into a workload cluster).
import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ClusterAddon } from '../../controller/api/clusteraddon.ts';
import type { ClusterStack } from '../../controller/api/clusterstack.ts';
import type { ClusterStackRelease } from '../../controller/api/clusterstackrelease.ts';
import { API_VERSION } from '../../controller/api/meta.ts';
import { APPROVED_ANNOTATION, APPROVED_IMPACT_ANNOTATION } from '../../controller/api/rollout.ts';
import {
  RENDER_APPROVED_CONDITION,
  RENDER_DIFFERS_REASON,
  renderDigest,
} from '../../controller/reconcilers/approvedrender.ts';
import type { KubeObject } from '../../controller/runtime/client.ts';
import { createRepo, type Endpoints } from '../../hack/lib/testenv.ts';
import {
  addonCluster,
  CAPI,
  ControllerProcess,
  cond,
  createTestNamespace,
  deleteClustersAndAddons,
  deleteTestNamespace,
  e2eSuite,
  ferrolClusterStack,
  ferrolTag,
  fleetBranchFiles,
  fleetCommitsAt,
  initRepo,
  releaseFerrol130,
  stackflux,
  waitFor,
} from '../support/e2e.ts';

const { env, client, ns, work, repoDir } = e2eSuite('approval-binding');
const cacheDir = join(work, 'cache');
let fleetUrl = '';
const CLUSTERS = ['c1', 'c2'];

type CSK = ClusterStack & KubeObject;
type CSKR = ClusterStackRelease & KubeObject;
type CA = ClusterAddon & KubeObject;

/** Renders a ClusterRoleBinding only where the Cluster object shows a resourceVersion. */
const DIVERGENT = `{{#if Cluster.metadata.resourceVersion}}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: everyone-is-admin
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: Group, name: "system:authenticated", apiGroup: rbac.authorization.k8s.io}]
{{/if}}
`;

const v2 = () => client.get<CSKR>(API_VERSION, 'ClusterStackRelease', ferrolTag('v2'), ns);
const addon = (name: string) => client.get<CA>(API_VERSION, 'ClusterAddon', name, ns);
const branchOf = (name: string) =>
  fleetBranchFiles(fleetUrl, `stackflux/${ns}/${name}`, join(work, `branch-${name}`));
const approve = () => {
  const r = stackflux(['rollout', 'approve', 'ferrol', '-n', ns, `--kubeconfig=${env.kubeconfig}`]);
  assert.equal(r.status, 0, r.stderr);
  return r.stderr;
};

describe('F4: the approval binds the previewed render', { timeout: 20 * 60_000 }, () => {
  let controller: ControllerProcess | undefined;

  before(async () => {
    await createTestNamespace(client, ns);
    const repoUrl = await createRepo(env as Endpoints, ns);
    fleetUrl = await createRepo(env as Endpoints, `${ns}-fleet`);
    initRepo(repoDir);
    releaseFerrol130(repoDir, repoUrl, 'v1', {
      version: 'v2',
      edit: (dir) => writeFileSync(join(dir, 'cluster-addon', 'cni', 'escalation.yaml.hbs'), DIVERGENT),
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
          rollout: { strategy: 'Progressive', maxConcurrent: 2, requireApproval: {} },
        }),
      );
      for (const [i, name] of CLUSTERS.entries())
        await client.create(
          addonCluster(ns, name, {
            podCidr: `10.${i + 1}.0.0/16`,
            className: ferrolTag('v1'),
            version: 'v1.30.4',
          }),
        );
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

  it('the previewed render rolls out; a render that differs waits for a new impact and its approval', async () => {
    const c = controller;
    assert.ok(c);
    await c.step(async () => {
      await client.mergePatch(API_VERSION, 'ClusterStack', 'ferrol', ns, {
        spec: { versions: ['v1', 'v2'] },
      });
      await waitFor(
        'the rollout to v2 waits for approval',
        async () => {
          const cs = await client.get<CSK>(API_VERSION, 'ClusterStack', 'ferrol', ns);
          const r = cs?.status?.rollout;
          return r?.targetRelease === ferrolTag('v2') && r.reason === 'WaitingForApproval' ? r : undefined;
        },
        { timeoutMs: 360_000 },
      );
      const first = (await v2())?.status?.impact;
      assert.ok(first?.digest, `the impact has a digest: ${JSON.stringify(first)}`);
      assert.deepEqual(
        Object.keys(first.renders ?? {}).sort(),
        [`${ns}/c1`, `${ns}/c2`],
        'a render per Cluster',
      );

      // c2 changes after its render was previewed: its live render at v2 will differ.
      await client.mergePatch(CAPI, 'Cluster', 'c2', ns, {
        spec: { topology: { variables: [{ name: 'stackfluxAddonValues', value: { cni: { mtu: 1400 } } }] } },
      });
      assert.match(approve(), new RegExp(`impact ${first.digest}`));
      const approved = await v2();
      assert.equal(approved?.metadata.annotations?.[APPROVED_ANNOTATION], ferrolTag('v2'));
      assert.equal(approved?.metadata.annotations?.[APPROVED_IMPACT_ANNOTATION], first.digest);

      // c1: exactly the render the impact recorded, and no ClusterRoleBinding.
      await fleetCommitsAt(client, ns, ferrolTag('v2'), 1);
      const c1 = branchOf('c1');
      assert.equal(renderDigest(c1), first.renders?.[`${ns}/c1`], 'c1 rolled out the previewed render');
      assert.ok(
        ![...c1.values()].some(
          (text) => text.includes('ClusterRoleBinding') && text.includes('everyone-is-admin'),
        ),
        'no ClusterRoleBinding: live and preview see the same Cluster object',
      );

      // c2: held on v1, and the impact is computed again. RenderDiffersFromApproved lasts only
      // until the new impact is written (it can be within one poll of this test, as on a busy
      // machine), so the impact's recompute count is what shows it: nothing but a Cluster held
      // with that reason asks for one.
      const second = await waitFor('the impact is computed again', async () => {
        const i = (await v2())?.status?.impact;
        return i?.digest !== undefined && i.digest !== first.digest ? i : undefined;
      });
      assert.equal(second.recomputed, 1, 'computed again once, for c2 held with RenderDiffersFromApproved');
      const held = await addon('c2');
      assert.equal(held?.status?.release, ferrolTag('v1'), 'c2 stays on v1');
      assert.ok(
        [RENDER_DIFFERS_REASON, 'WaitingForApproval'].includes(
          cond(held, RENDER_APPROVED_CONDITION)?.reason ?? '',
        ),
        `c2 held: ${JSON.stringify(cond(held, RENDER_APPROVED_CONDITION))}`,
      );
      assert.notEqual(
        second.renders?.[`${ns}/c2`],
        first.renders?.[`${ns}/c2`],
        'the new impact has c2’s new render',
      );

      // The approval of the first impact does not approve the second.
      const waiting = await waitFor('c2 waits for the new impact’s approval', async () => {
        const a = await addon('c2');
        return cond(a, RENDER_APPROVED_CONDITION)?.reason === 'WaitingForApproval' ? a : undefined;
      });
      assert.equal(waiting.status?.release, ferrolTag('v1'));
      assert.equal((await v2())?.metadata.annotations?.[APPROVED_IMPACT_ANNOTATION], first.digest);

      approve();
      await waitFor('c2 moves once the new impact is approved', async () =>
        (await addon('c2'))?.status?.release === ferrolTag('v2') ? true : undefined,
      );
      assert.equal(
        renderDigest(branchOf('c2')),
        second.renders?.[`${ns}/c2`],
        'c2 rolled out the approved render',
      );
      assert.equal(cond(await addon('c2'), RENDER_APPROVED_CONDITION), undefined, 'nothing held any more');
    });
  });
});
