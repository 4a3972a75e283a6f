// Issue 23 end to end, the ClusterStackRelease side of a cluster-stack-operator (csctl) release:
// stacks/docker-csoferrol-1-30 released as a Git tag, its cluster-class a Helm chart. `stackflux
// run --fleet-url` renders the chart with Helm's engine as CSO does, writes the objects to the
// release's fleet branch, and real Flux applies them: ClusterClass docker-csoferrol-1-30-v1 and its
// templates end up on the management cluster. The test environment serves ClusterClass v1beta2
// only (with its schema), so release v1's chart is edited to a v1beta2 ClusterClass; release v2 is
// the stack as written (v1beta1, as real SCS stacks) and must say that its version is not served.
// The template kinds are installed as schemaless stand-ins (fixtures/capi-template-crds.yaml).
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ClusterStackRelease } from '../../controller/api/clusterstackrelease.ts';
import type { Kustomization } from '../../controller/api/flux.ts';
import { API_VERSION } from '../../controller/api/meta.ts';
import type { KubeObject } from '../../controller/runtime/client.ts';
import { createRepo, type Endpoints } from '../../hack/lib/testenv.ts';
import {
  csoferrolClusterStack,
  cutCsctlRelease,
  servedClusterClass,
  csoferrolTag as tag,
} from '../support/csctl.ts';
import {
  CAPI,
  ControllerProcess,
  cond,
  createTestNamespace,
  deleteTestNamespace,
  e2eSuite,
  git,
  gone,
  initRepo,
  installFixtureCrds,
  push,
  releaseControllerHolds,
} from '../support/e2e.ts';
import { eventually } from '../support/env.ts';

const { env, client, ns, work, repoDir } = e2eSuite('csctl-class');
type CSKR = ClusterStackRelease & KubeObject;

let controller: ControllerProcess | undefined;
let fleetUrl = '';
const release = (v: string) => client.get<CSKR>(API_VERSION, 'ClusterStackRelease', tag(v), ns);

describe('csctl release: the cluster-class chart rendered, written to the fleet, applied by Flux', {
  timeout: 10 * 60_000,
}, () => {
  before(async () => {
    await createTestNamespace(client, ns);
    await installFixtureCrds(client, 'capi-template-crds.yaml');
    const repoUrl = await createRepo(env as Endpoints, `${ns}-release`);
    fleetUrl = await createRepo(env as Endpoints, `${ns}-fleet`);
    initRepo(repoDir);
    cutCsctlRelease(repoDir, 'docker-csoferrol-1-30', 'v1', servedClusterClass);
    cutCsctlRelease(repoDir, 'docker-csoferrol-1-30', 'v2');
    push(repoDir, repoUrl, tag('v1'), tag('v2'));
    controller = await ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: ns,
      cacheDir: join(work, 'cache'),
      extraArgs: [`--fleet-url=${fleetUrl}`],
    });
    await client.create(csoferrolClusterStack(ns, repoUrl, ['v1', 'v2']));
  });

  after(async () => {
    await controller?.stop();
    await releaseControllerHolds(client, ns);
    await deleteTestNamespace(client, ns);
    client.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('ClusterClass docker-csoferrol-1-30-v1 and its templates are applied by Flux from the release branch', async () => {
    await controller?.step(async () => {
      const ready = await eventually(
        `${tag('v1')} Ready`,
        async () => {
          const r = await release('v1');
          return cond(r, 'Ready')?.status === 'True' ? r : undefined;
        },
        { timeoutMs: 300_000 },
      );
      const branch = `stackflux/_releases/${ns}/${tag('v1')}`;
      const tip = git(work, 'ls-remote', fleetUrl, `refs/heads/${branch}`).split('\t')[0];
      assert.match(tip ?? '', /^[0-9a-f]{40}$/, `fleet branch ${branch} exists`);
      assert.equal(ready.status?.revision, `${branch}@sha1:${tip}`);
      const ks = await client.get<Kustomization & KubeObject>(
        'kustomize.toolkit.fluxcd.io/v1',
        'Kustomization',
        tag('v1'),
        ns,
      );
      assert.equal(ks?.status?.lastAppliedRevision, `${branch}@sha1:${tip}`);

      const cc = await client.get<KubeObject & { spec?: Record<string, unknown> }>(
        CAPI,
        'ClusterClass',
        tag('v1'),
        ns,
      );
      assert.ok(cc, 'the ClusterClass is on the management cluster');
      assert.equal(
        cc.metadata.labels?.['cluster-stack/version'],
        'v1',
        '.Chart.Version is the release version',
      );
      assert.equal(cc.metadata.labels?.['app.kubernetes.io/part-of'], 'docker-csoferrol-1-30-cluster-class');
      const templates: Array<[string, string, string]> = [
        ['infrastructure.cluster.x-k8s.io/v1beta1', 'DockerClusterTemplate', 'cluster'],
        ['infrastructure.cluster.x-k8s.io/v1beta1', 'DockerMachineTemplate', 'machine'],
        ['controlplane.cluster.x-k8s.io/v1beta1', 'KubeadmControlPlaneTemplate', 'control-plane'],
        ['bootstrap.cluster.x-k8s.io/v1beta1', 'KubeadmConfigTemplate', 'worker'],
      ];
      for (const [apiVersion, kind, suffix] of templates) {
        const t = await client.get<KubeObject & { spec?: { template?: { spec?: Record<string, unknown> } } }>(
          apiVersion,
          kind,
          `${tag('v1')}-${suffix}`,
          ns,
        );
        assert.ok(t, `${kind} ${tag('v1')}-${suffix} is on the management cluster`);
        if (kind === 'DockerMachineTemplate')
          assert.equal(
            t.spec?.template?.spec?.customImage,
            'kindest/node:v1.30.4',
            "the chart's values.yaml",
          );
      }
    });
  });

  it('a v1beta1 ClusterClass the management cluster does not serve is reported on the release', async () => {
    await controller?.step(async () => {
      const r = await eventually(
        `${tag('v2')} says its ClusterClass version is not served`,
        async () => {
          const got = await release('v2');
          return cond(got, 'Ready')?.reason === 'ClusterClassVersionNotServed' ? got : undefined;
        },
        { timeoutMs: 180_000 },
      );
      assert.equal(cond(r, 'Ready')?.status, 'False');
      assert.match(
        cond(r, 'Ready')?.message ?? '',
        /cluster\.x-k8s\.io\/v1beta1, which the management cluster does not serve/,
      );
      assert.equal(await client.get(CAPI, 'ClusterClass', tag('v2'), ns), undefined);
    });
  });

  it('a release dropped from the ClusterStack takes its fleet branch and Flux prunes its ClusterClass', async () => {
    await controller?.step(async () => {
      await client.mergePatch(API_VERSION, 'ClusterStack', 'csoferrol', ns, { spec: { versions: ['v2'] } });
      await gone(`release ${tag('v1')}`, () => release('v1'), 180_000);
      const branch = `stackflux/_releases/${ns}/${tag('v1')}`;
      assert.equal(
        git(work, 'ls-remote', fleetUrl, `refs/heads/${branch}`),
        '',
        `fleet branch ${branch} deleted`,
      );
      await gone(`ClusterClass ${tag('v1')}`, () => client.get(CAPI, 'ClusterClass', tag('v1'), ns), 180_000);
    });
  });
});
