// Issue 31, F4 end to end, the clock and randomness of Go templates: a cluster-stack-operator
// (csctl) release whose addon chart reads `now`, `uuidv4` and `randAlphaNum` and renders a
// ClusterRoleBinding once the clock passes a date (a time bomb). On main the preview rendered at
// one time with one set of random values and the live fan-out at another, so no preview showed
// what rolled out. Now the engine's wall clock reads the release's creation time and its random
// source is seeded per release, Cluster and addon with the installation's key: the impact records
// the render the live fan-out makes, and the Cluster moves to exactly that render without being
// held. The release drops the BeforeClusterUpgrade stage (no workload cluster here to apply it).
import assert from 'node:assert/strict';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import type { ClusterAddon } from '../../controller/api/clusteraddon.ts';
import type { ClusterStack } from '../../controller/api/clusterstack.ts';
import type { ClusterStackRelease } from '../../controller/api/clusterstackrelease.ts';
import { API_VERSION } from '../../controller/api/meta.ts';
import { RENDER_APPROVED_CONDITION, renderDigest } from '../../controller/reconcilers/approvedrender.ts';
import type { KubeObject } from '../../controller/runtime/client.ts';
import { createRepo, type Endpoints } from '../../hack/lib/testenv.ts';
import {
  csoferrolClusterStack,
  cutCsctlRelease,
  servedClusterClass,
  csoferrolTag as tag,
} from '../support/csctl.ts';
import {
  addonCluster,
  ControllerProcess,
  cond,
  createTestNamespace,
  deleteClustersAndAddons,
  deleteTestNamespace,
  e2eSuite,
  fleetBranchFiles,
  fleetCommitsAt,
  initRepo,
  installFixtureCrds,
  push,
  releaseControllerHolds,
  stackflux,
  waitFor,
} from '../support/e2e.ts';

const { env, client, ns, work, repoDir } = e2eSuite('approval-timebomb');
let fleetUrl = '';

type CSK = ClusterStack & KubeObject;
type CSKR = ClusterStackRelease & KubeObject;

/** Reads the clock and the random source; the ClusterRoleBinding only after 2026-12-01. */
const BOMB = `apiVersion: v1
kind: ConfigMap
metadata:
  name: bomb
data:
  now: {{ now | unixEpoch | quote }}
  id: {{ uuidv4 | quote }}
  token: {{ randAlphaNum 24 | quote }}
{{- if gt (now | unixEpoch | atoi) 1796083200 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: everyone-is-admin
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: Group, name: "system:authenticated", apiGroup: rbac.authorization.k8s.io}]
{{- end }}
`;

/** Only the AfterControlPlaneInitialized stage: no BeforeClusterUpgrade to apply to a workload cluster. */
const ONE_STAGE = `apiVersion: clusteraddonconfig.x-k8s.io/v1alpha1
clusterAddonVersion: clusteraddons.clusterstack.x-k8s.io/v1alpha1
addonStages:
  AfterControlPlaneInitialized:
    - name: cni
      action: apply
    - name: metrics
      action: apply
`;

function oneStage(dir: string): void {
  servedClusterClass(dir);
  writeFileSync(join(dir, 'clusteraddon.yaml'), ONE_STAGE);
}

function withBomb(dir: string): void {
  oneStage(dir);
  mkdirSync(join(dir, 'cluster-addon', 'cni', 'templates'), { recursive: true });
  writeFileSync(join(dir, 'cluster-addon', 'cni', 'templates', 'bomb.yaml'), BOMB);
}

describe('F4: Go templates read a clock and randomness fixed per render', { timeout: 20 * 60_000 }, () => {
  let controller: ControllerProcess | undefined;

  before(async () => {
    await createTestNamespace(client, ns);
    // The release's ClusterClass templates (Flux applies them): this file must not depend on
    // another test having installed them first.
    await installFixtureCrds(client, 'capi-template-crds.yaml');
    const repoUrl = await createRepo(env as Endpoints, `${ns}-release`);
    fleetUrl = await createRepo(env as Endpoints, `${ns}-fleet`);
    initRepo(repoDir);
    cutCsctlRelease(repoDir, 'docker-csoferrol-1-30', 'v1', oneStage);
    cutCsctlRelease(repoDir, 'docker-csoferrol-1-30', 'v2', withBomb);
    push(repoDir, repoUrl, tag('v1'), tag('v2'));
    controller = await ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: ns,
      cacheDir: join(work, 'cache'),
      extraArgs: [`--fleet-url=${fleetUrl}`, '--fleet-batch-window=1s'],
    });
    await controller.step(async () => {
      await client.create(
        csoferrolClusterStack(ns, repoUrl, ['v1'], {
          rollout: { strategy: 'Progressive', requireApproval: {} },
        }),
      );
      await client.create(
        addonCluster(ns, 'c1', { podCidr: '10.1.0.0/16', className: tag('v1'), version: 'v1.30.4' }),
      );
      await fleetCommitsAt(client, ns, tag('v1'), 1);
    });
  });

  after(async () => {
    await client
      .mergePatch(API_VERSION, 'ClusterStack', 'csoferrol', ns, { spec: { rollout: { strategy: 'Manual' } } })
      .catch(() => undefined);
    await deleteClustersAndAddons(client, ns, ['c1']);
    await controller?.stop();
    await releaseControllerHolds(client, ns);
    await deleteTestNamespace(client, ns);
    client.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('the impact records the render the live fan-out makes; the time bomb is the same in both', async () => {
    const c = controller;
    assert.ok(c);
    await c.step(async () => {
      await client.mergePatch(API_VERSION, 'ClusterStack', 'csoferrol', ns, {
        spec: { versions: ['v1', 'v2'] },
      });
      await waitFor(
        'the rollout to v2 waits for approval',
        async () => {
          const cs = await client.get<CSK>(API_VERSION, 'ClusterStack', 'csoferrol', ns);
          const r = cs?.status?.rollout;
          return r?.targetRelease === tag('v2') && r.reason === 'WaitingForApproval' ? r : undefined;
        },
        { timeoutMs: 360_000 },
      );
      const v2 = await client.get<CSKR>(API_VERSION, 'ClusterStackRelease', tag('v2'), ns);
      const impact = v2?.status?.impact;
      const recorded = impact?.renders?.[`${ns}/c1`];
      assert.ok(recorded, `the impact records c1's render: ${JSON.stringify(impact)}`);

      const approve = stackflux([
        'rollout',
        'approve',
        'csoferrol',
        '-n',
        ns,
        `--kubeconfig=${env.kubeconfig}`,
      ]);
      assert.equal(approve.status, 0, approve.stderr);
      await fleetCommitsAt(client, ns, tag('v2'), 1);
      const branch = fleetBranchFiles(fleetUrl, `stackflux/${ns}/c1`, join(work, 'branch-c1'));
      assert.equal(renderDigest(branch), recorded, 'c1 rolled out the render its impact recorded');
      const ca = await client.get<ClusterAddon & KubeObject>(API_VERSION, 'ClusterAddon', 'c1', ns);
      assert.equal(cond(ca, RENDER_APPROVED_CONDITION), undefined, 'nothing was held');

      const docs = [...branch.values()].flatMap((text) =>
        parseAllDocuments(text).map((d) => d.toJS() as Record<string, unknown> | null),
      );
      const bomb = docs.find(
        (d) => d?.kind === 'ConfigMap' && (d.metadata as { name?: string } | undefined)?.name === 'bomb',
      );
      assert.ok(bomb, 'the bomb ConfigMap is on the branch');
      const created = Date.parse(v2?.metadata.creationTimestamp ?? '') / 1000;
      assert.equal(
        (bomb.data as { now: string }).now,
        String(created),
        '`now` is the release’s creation time',
      );
      assert.match((bomb.data as { id: string }).id, /^[0-9a-f-]{36}$/);
      const armed = created > 1796083200;
      assert.equal(
        docs.some((d) => d?.kind === 'ClusterRoleBinding'),
        armed,
        'the time bomb goes off in the live render exactly when it went off in the preview',
      );
    });
  });
});
