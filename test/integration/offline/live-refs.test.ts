// Issue 31 F6 against the real API server: the snapshot the impact controller and `stackflux
// preview` read (liveSnapshot) follows a Cluster's refs only as the live ClusterAddon controller
// does (api/clusterrefs.ts): a provider's kind in the Cluster's namespace, never a built-in kind
// the tenant's ref names (read with the controller's rights and handed to the release's templates
// as `.InfraCluster`). The test environment serves Cluster only as v1beta2, whose refs need a
// DNS-subdomain apiGroup and have no namespace: a core Secret or another namespace (possible with
// v1beta1 Clusters) cannot be stored here and are covered by test/unit/api/clusterrefs.test.ts and
// the bad-input corpus; `apps` (a Deployment, whose pod template may carry credentials) can.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { liveSnapshot } from '../../../controller/offline/live.ts';
import { clusterRefsIn } from '../../../controller/offline/render.ts';
import type { Snapshot } from '../../../controller/offline/snapshot.ts';
import { World } from '../../../controller/offline/world.ts';
import { KubeClient, type KubeObject } from '../../../controller/runtime/client.ts';
import { installCrds } from '../../../hack/lib/crds.ts';
import { kubeConfigFrom, testEnv, uniqueName } from '../../support/env.ts';
import { installWidgetCrd } from '../runtime/helpers.ts';

const CAPI = 'cluster.x-k8s.io/v1beta2';
const ns = uniqueName('live-refs');
const other = uniqueName('live-refs-other');
const work = mkdtempSync(join(tmpdir(), 'stackflux-live-refs-'));

function cluster(name: string, refs: Record<string, unknown>): KubeObject {
  return {
    apiVersion: CAPI,
    kind: 'Cluster',
    metadata: { name, namespace: ns },
    spec: {
      clusterNetwork: { pods: { cidrBlocks: ['10.244.0.0/16'] } },
      topology: { classRef: { name: 'docker-ferrol-1-30-v1' }, version: 'v1.30.4' },
      ...refs,
    },
  };
}

describe('liveSnapshot follows Cluster refs by the live controller’s rule', { timeout: 120_000 }, () => {
  let client: KubeClient;
  let snapshot: Snapshot;
  let widget = { apiVersion: '', kind: '', name: '' };
  before(async () => {
    client = new KubeClient(kubeConfigFrom(testEnv().kubeconfig), { qps: 200, burst: 200 });
    await installCrds(client);
    widget = await installWidgetCrd(client);
    const group = widget.apiVersion.split('/')[0];
    for (const n of [ns, other])
      await client.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: n } });
    await client.create({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'app', namespace: ns },
      spec: {
        replicas: 0,
        selector: { matchLabels: { app: 'app' } },
        template: {
          metadata: { labels: { app: 'app' } },
          spec: {
            containers: [{ name: 'c', image: 'x', env: [{ name: 'DB_PASSWORD', value: 'SECRETPW' }] }],
          },
        },
      },
    } as KubeObject);
    // A Widget of the same name in another namespace: never the one a Cluster here gets.
    for (const n of [other, ns])
      await client.create({
        apiVersion: widget.apiVersion,
        kind: widget.kind,
        metadata: { name: 'infra', namespace: n },
        spec: { where: n },
      } as KubeObject);
    await client.create(
      cluster('builtin-ref', { controlPlaneRef: { apiGroup: 'apps', kind: 'Deployment', name: 'app' } }),
    );
    await client.create(
      cluster('provider-ref', { infrastructureRef: { apiGroup: group, kind: widget.kind, name: 'infra' } }),
    );
    snapshot = await liveSnapshot(client, { namespace: ns, cacheDir: join(work, 'cache') });
  });
  after(async () => {
    for (const n of [ns, other]) await client.delete('v1', 'Namespace', n).catch(() => undefined);
    await client
      .delete('apiextensions.k8s.io/v1', 'CustomResourceDefinition', widget.name)
      .catch(() => undefined);
    client.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('never reads a built-in kind a Cluster ref names', () => {
    const kinds = [...snapshot.objects.values()].map((o) => `${o.apiVersion}/${o.kind}/${o.metadata.name}`);
    assert.ok(
      !kinds.some((k) => k.startsWith('apps/v1/Deployment/')),
      `a Deployment in the snapshot: ${kinds.join(', ')}`,
    );
    assert.doesNotMatch(JSON.stringify([...snapshot.objects.values()]), /SECRETPW/);
  });

  it('reads a provider kind in the Cluster namespace only, and says why a ref is refused', () => {
    const world = new World(snapshot, new Date());
    const refsOf = (name: string) => {
      const c = [...snapshot.objects.values()].find((o) => o.kind === 'Cluster' && o.metadata.name === name);
      assert.ok(c, `Cluster ${name} in the snapshot`);
      return clusterRefsIn(world, c);
    };
    assert.equal((refsOf('provider-ref').infraCluster?.spec as { where?: string } | undefined)?.where, ns);
    const builtin = refsOf('builtin-ref');
    assert.equal(builtin.controlPlane, undefined);
    assert.match(builtin.refProblems.join('; '), /"apps".*never to built-in kinds/);
    const widgets = [...snapshot.objects.values()].filter((o) => o.kind === widget.kind);
    assert.deepEqual(
      widgets.map((o) => o.metadata.namespace),
      [ns],
    );
  });
});
