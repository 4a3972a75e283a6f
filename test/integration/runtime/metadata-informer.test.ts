// Metadata-only informers (PartialObjectMetadata) against the real API server: a controller that
// only needs to know which Secrets exist keeps neither their data nor their type, and still sees
// every create, label change and delete. Also: the default transform drops kubectl's
// last-applied copy, which the API server stores and returns with the object.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { KubeClient, KubeObject } from '../../../controller/runtime/client.ts';
import { Informer, LAST_APPLIED_ANNOTATION } from '../../../controller/runtime/informer.ts';
import { eventually } from '../../support/env.ts';
import { deleteNamespace, freshNamespace, runtimeClient } from './helpers.ts';

type Secret = KubeObject & { data?: Record<string, string>; type?: string };

const secret = (ns: string, name: string, labels: Record<string, string> = {}): Secret => ({
  apiVersion: 'v1',
  kind: 'Secret',
  type: 'cluster.x-k8s.io/secret',
  metadata: { name, namespace: ns, labels },
  data: { value: Buffer.from(`kubeconfig of ${name}`).toString('base64') },
});

describe('metadata-only informer against the real API server', () => {
  let client: KubeClient;
  let ns: string;

  before(async () => {
    client = runtimeClient();
    ns = await freshNamespace(client, 'metainf');
  });

  after(async () => {
    await deleteNamespace(client, ns);
    client.close();
  });

  it('lists and watches Secrets as metadata: names, labels and resourceVersions, never data', async (t) => {
    await client.create(secret(ns, 'a-kubeconfig', { 'cluster.x-k8s.io/cluster-name': 'a' }));
    const inf = new Informer<Secret>({
      client,
      apiVersion: 'v1',
      kind: 'Secret',
      namespace: ns,
      metadataOnly: true,
    });
    t.after(() => inf.stop());
    const seen: string[] = [];
    inf.addEventHandler({
      onAdd: (o) => seen.push(`add ${o.metadata.name}`),
      onUpdate: (_o, n) => seen.push(`update ${n.metadata.name} ${n.metadata.labels?.tier ?? ''}`),
      onDelete: (o) => seen.push(`delete ${o.metadata.name}`),
    });
    inf.start();
    await inf.waitForSync();

    // From the LIST: metadata only, with the informer's kind (not PartialObjectMetadata).
    const listed = inf.getByName('a-kubeconfig', ns);
    assert.ok(listed, 'the listed Secret is cached');
    assert.equal(listed.kind, 'Secret');
    assert.equal(listed.apiVersion, 'v1');
    assert.equal(listed.metadata.labels?.['cluster.x-k8s.io/cluster-name'], 'a');
    assert.equal(listed.data, undefined, 'no data from a metadata LIST');
    assert.equal(listed.type, undefined, 'no type either: only metadata crosses the wire');

    // From the WATCH: create, update, delete arrive as metadata too.
    await client.create(secret(ns, 'b-kubeconfig'));
    await eventually('b-kubeconfig cached', async () => inf.getByName('b-kubeconfig', ns));
    const watched = inf.getByName('b-kubeconfig', ns);
    assert.equal(watched?.data, undefined, 'no data from a metadata WATCH');
    assert.equal(watched?.kind, 'Secret');
    const live = await client.get<Secret>('v1', 'Secret', 'b-kubeconfig', ns);
    assert.equal(watched?.metadata.resourceVersion, live?.metadata.resourceVersion);
    assert.ok(live?.data?.value, 'the Secret itself does hold data');

    await client.mergePatch('v1', 'Secret', 'b-kubeconfig', ns, { metadata: { labels: { tier: 'gold' } } });
    await eventually('label change seen', async () =>
      inf.getByName('b-kubeconfig', ns)?.metadata.labels?.tier === 'gold' ? true : undefined,
    );
    await client.delete('v1', 'Secret', 'a-kubeconfig', ns);
    await eventually('delete seen', async () =>
      inf.getByName('a-kubeconfig', ns) === undefined ? true : undefined,
    );
    assert.deepEqual(seen, [
      'add a-kubeconfig',
      'add b-kubeconfig',
      'update b-kubeconfig gold',
      'delete a-kubeconfig',
    ]);
  });

  it('a metadata-only and a full informer of one kind are separate shared informers', async () => {
    const { SharedInformers } = await import('../../../controller/runtime/informer.ts');
    const shared = new SharedInformers({ client });
    const full = shared.informerFor('v1', 'Secret', { namespace: ns });
    const meta = shared.informerFor('v1', 'Secret', { namespace: ns, metadataOnly: true });
    assert.notEqual(full, meta);
    assert.equal(shared.informerFor('v1', 'Secret', { namespace: ns, metadataOnly: true }), meta);
  });

  it('cached objects do not keep kubectl’s last-applied-configuration; other annotations stay', async (t) => {
    const body = JSON.stringify({ big: 'x'.repeat(2000) });
    await client.create({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name: 'applied-by-kubectl',
        namespace: ns,
        annotations: { [LAST_APPLIED_ANNOTATION]: body, 'example.com/keep': 'yes' },
      },
      data: { a: 'b' },
    });
    const inf = new Informer<KubeObject>({ client, apiVersion: 'v1', kind: 'ConfigMap', namespace: ns });
    t.after(() => inf.stop());
    inf.start();
    await inf.waitForSync();
    const cached = inf.getByName('applied-by-kubectl', ns);
    assert.deepEqual(cached?.metadata.annotations, { 'example.com/keep': 'yes' });
    assert.equal(cached?.metadata.managedFields, undefined);
    const live = await client.get('v1', 'ConfigMap', 'applied-by-kubectl', ns);
    assert.equal(live?.metadata.annotations?.[LAST_APPLIED_ANNOTATION], body, 'the server keeps it');
  });
});
