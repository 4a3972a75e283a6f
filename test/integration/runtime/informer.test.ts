import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { KubeClient } from '../../../controller/runtime/client.ts';
import { Informer, objectKey } from '../../../controller/runtime/informer.ts';
import { eventually, testEnv, uniqueName } from '../../support/env.ts';
import {
  type ConfigMap,
  deleteCrd,
  deleteNamespace,
  diff,
  freshNamespace,
  inParallel,
  installWidgetCrd,
  mirror,
  rng,
  runtimeClient,
  snapshot,
} from './helpers.ts';

describe('Informer against the real API server', () => {
  let client: KubeClient;
  let ns: string;

  before(async () => {
    client = runtimeClient();
    ns = await freshNamespace(client, 'informer');
  });

  after(async () => {
    await deleteNamespace(client, ns);
    client.close();
  });

  it('mirrors 1,000 creates/updates/deletes exactly, through a forced restart from a stale resourceVersion', async (t) => {
    const inf = new Informer<ConfigMap>({ client, apiVersion: 'v1', kind: 'ConfigMap', namespace: ns });
    t.after(() => inf.stop());
    // A second mirror built only from the event handlers: what controllers see.
    const fromEvents = new Map<string, string>();
    let handlerAdds = 0;
    let handlerDeletes = 0;
    inf.addEventHandler({
      onAdd: (o) => {
        handlerAdds += 1;
        fromEvents.set(objectKey(o), o.metadata.resourceVersion ?? '');
      },
      onUpdate: (_old, o) => fromEvents.set(objectKey(o), o.metadata.resourceVersion ?? ''),
      onDelete: (o) => {
        handlerDeletes += 1;
        fromEvents.delete(objectKey(o));
      },
    });
    inf.start();
    await inf.waitForSync();
    assert.ok(inf.hasSynced());
    const staleRv = inf.lastResourceVersion();
    assert.ok(staleRv);

    const random = rng(42);
    const live = new Set<string>();
    let created = 0;
    const ops: Array<() => Promise<void>> = [];
    // 1,000 operations: 500 creates, 300 updates, 200 deletes, interleaved in waves.
    const plan: Array<'create' | 'update' | 'delete'> = [
      ...Array<'create'>(500).fill('create'),
      ...Array<'update'>(300).fill('update'),
      ...Array<'delete'>(200).fill('delete'),
    ];
    let ran = 0;
    const runWave = async (kinds: Array<'create' | 'update' | 'delete'>): Promise<void> => {
      ops.length = 0;
      const used = new Set<string>(); // one operation per name per wave: they run concurrently
      for (const kind of kinds) {
        if (kind === 'create') {
          const name = `cm-${created++}`;
          live.add(name);
          ops.push(async () => {
            await client.create({
              apiVersion: 'v1',
              kind: 'ConfigMap',
              metadata: { name, namespace: ns },
              data: { v: '0' },
            });
          });
        } else {
          const names = [...live].filter((n) => !used.has(n));
          const name = names[Math.floor(random() * names.length)];
          if (!name) continue;
          used.add(name);
          if (kind === 'delete') {
            live.delete(name);
            ops.push(async () => {
              await client.delete('v1', 'ConfigMap', name, ns);
            });
          } else {
            const v = String(Math.floor(random() * 1e9));
            ops.push(async () => {
              await client.mergePatch('v1', 'ConfigMap', name, ns, { data: { v } });
            });
          }
        }
      }
      // Updates and deletes of one wave touch distinct-enough objects; run 20 at a time.
      await inParallel(ops, 20, (op) => op());
      ran += ops.length;
    };
    // Shuffle the plan into waves of 100 where creates come before their updates/deletes.
    const creates = plan.filter((p) => p === 'create');
    const rest = plan.filter((p) => p !== 'create').sort(() => random() - 0.5);
    for (let wave = 0; wave < 10; wave++) {
      const kinds = [...creates.splice(0, 50), ...rest.splice(0, 50)];
      // Creates of the wave first so updates/deletes can target them; avoid touching a name twice at once.
      await runWave(kinds.filter((k) => k === 'create'));
      const others = kinds.filter((k) => k !== 'create');
      for (let i = 0; i < others.length; i += 10) await runWave(others.slice(i, i + 10));
      if (wave === 5) {
        // Break the watch and resume it from a much older resourceVersion: the server either replays
        // history from there (kube-apiserver >= 1.3x serves it from etcd while not compacted) or
        // answers 410 and the informer relists. Either way the mirror must end exact.
        inf.restartWatch(staleRv);
      }
    }
    assert.equal(ran, 1000);

    await eventually('cache equals a fresh LIST', async () => {
      const want = await snapshot(client, ns);
      return diff(want, mirror(inf)) === undefined && diff(want, fromEvents) === undefined ? true : undefined;
    });
    const want = await snapshot(client, ns);
    assert.equal(diff(want, mirror(inf)), undefined, 'cache vs LIST');
    assert.equal(diff(want, fromEvents), undefined, 'handler-built mirror vs LIST');
    assert.ok(inf.stats.watches >= 2, `the watch was restarted (stats ${JSON.stringify(inf.stats)})`);
    assert.ok(handlerAdds >= 500 && handlerDeletes >= 200);
    for (const o of inf.list()) assert.equal(o.metadata.managedFields, undefined, 'managedFields stripped');
    await inf.stop();
  });

  it('stop() right after sync ends at once, within the 30 s shutdown budget, not at the watch timeout', async () => {
    // stop() can land between the relist and the watch request; the watch must still end.
    for (let i = 0; i < 5; i++) {
      const inf = new Informer<ConfigMap>({ client, apiVersion: 'v1', kind: 'ConfigMap', namespace: ns });
      inf.start();
      await inf.waitForSync();
      let timer: ReturnType<typeof setTimeout> | undefined;
      const outcome = await Promise.race([
        inf.stop().then(() => 'stopped'),
        new Promise<string>((r) => {
          timer = setTimeout(() => r('still running after 30 s'), 30_000);
        }),
      ]);
      clearTimeout(timer);
      assert.equal(outcome, 'stopped', `round ${i}`);
    }
  });

  it('indexes objects and keeps indexes up to date on update and delete', async (t) => {
    const inf = new Informer<ConfigMap>({
      client,
      apiVersion: 'v1',
      kind: 'ConfigMap',
      namespace: ns,
      labelSelector: 'idx=yes',
    });
    t.after(() => inf.stop());
    inf.addIndexer('byClass', (o) => (o.data?.class ? [o.data.class] : []));
    inf.start();
    await inf.waitForSync();
    const mk = (name: string, cls: string) =>
      client.apply(
        {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name, namespace: ns, labels: { idx: 'yes' } },
          data: { class: cls },
        },
        { force: true },
      );
    await mk('i1', 'gold');
    await mk('i2', 'gold');
    await mk('i3', 'silver');
    const names = (cls: string) =>
      inf
        .byIndex('byClass', cls)
        .map((o) => o.metadata.name)
        .sort()
        .join(',');
    await eventually('index filled', async () =>
      names('gold') === 'i1,i2' && names('silver') === 'i3' ? true : undefined,
    );
    await mk('i2', 'silver');
    await client.delete('v1', 'ConfigMap', 'i1', ns);
    await eventually('index updated', async () =>
      names('gold') === '' && names('silver') === 'i2,i3' ? true : undefined,
    );
    await inf.stop();
  });

  it('keeps retrying while its resource does not exist yet, then syncs and mirrors it', async (t) => {
    // The informer starts before the CRD exists: discovery fails and it must keep retrying, not stop.
    const group = `${uniqueName('late')}.test.stackflux.io`;
    const inf = new Informer({
      client,
      apiVersion: `${group}/v1`,
      kind: 'Widget',
      namespace: ns,
      backoffInitialMs: 50,
      backoffMaxMs: 200,
    });
    t.after(() => inf.stop());
    inf.start();
    await eventually('a few failed attempts', async () => (inf.stats.errors >= 2 ? true : undefined));
    assert.equal(inf.hasSynced(), false);
    // installWidgetCrd makes its own group; mirror that: create the CRD for *this* group instead.
    const crd = await installWidgetCrdIn(client, group);
    await inf.waitForSync();
    await client.apply(
      { apiVersion: `${group}/v1`, kind: 'Widget', metadata: { name: 'late-1', namespace: ns }, spec: {} },
      { force: true },
    );
    await eventually('widget mirrored', async () => (inf.getByName('late-1', ns) ? true : undefined));
    await inf.stop();
    await deleteCrd(client, crd);
  });

  it('relists after 410 Gone when its resourceVersion was compacted away, and stays exact', async (t) => {
    // Forcing a 410 needs history to be compacted; the only way from a test is etcd's compaction API.
    const etcd = testEnv().etcdUrl;
    const inf = new Informer<ConfigMap>({
      client,
      apiVersion: 'v1',
      kind: 'ConfigMap',
      namespace: ns,
      labelSelector: 'gone=yes',
    });
    t.after(() => inf.stop());
    inf.start();
    await inf.waitForSync();
    const staleRv = inf.lastResourceVersion();
    assert.ok(staleRv);
    const mk = (name: string) =>
      client.apply(
        {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name, namespace: ns, labels: { gone: 'yes' } },
          data: { n: name },
        },
        { force: true },
      );
    for (let i = 0; i < 20; i++) await mk(`g-${i}`);
    // Compact etcd up to now: every older resourceVersion is gone from the server.
    const now = (await client.list('v1', 'ConfigMap', { namespace: ns, limit: 1 })).metadata.resourceVersion;
    assert.ok(now);
    const res = await fetch(`${etcd}/v3/kv/compaction`, {
      method: 'POST',
      body: JSON.stringify({ revision: now, physical: true }),
    });
    assert.equal(res.status, 200, await res.text());
    for (let i = 0; i < 5; i++) await client.delete('v1', 'ConfigMap', `g-${i}`, ns);
    // The informer's own start version may still sit in the API server's in-memory watch cache, so
    // resume from the oldest version there is: neither the cache nor (compacted) etcd has it.
    assert.ok(staleRv);
    inf.restartWatch('1');
    await eventually('410 seen and relisted', async () =>
      inf.stats.gone >= 1 && inf.stats.lists >= 2 ? true : undefined,
    );
    await eventually('cache equals a fresh LIST', async () => {
      const list = await client.listAll<ConfigMap>('v1', 'ConfigMap', {
        namespace: ns,
        labelSelector: 'gone=yes',
      });
      const want = new Map(list.items.map((o) => [objectKey(o), o.metadata.resourceVersion ?? '']));
      return diff(want, mirror(inf)) === undefined ? true : undefined;
    });
    assert.equal(inf.size(), 15);
  });
});

async function installWidgetCrdIn(client: KubeClient, group: string): Promise<string> {
  const info = await installWidgetCrd(client, group);
  return info.name;
}
