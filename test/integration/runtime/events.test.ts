import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { KubeClient, KubeObject } from '../../../controller/runtime/client.ts';
import { type EventObject, EventRecorder } from '../../../controller/runtime/events.ts';
import { deleteNamespace, freshNamespace, runtimeClient } from './helpers.ts';

describe('EventRecorder against the real API server', () => {
  let client: KubeClient;
  let ns: string;
  let cm: KubeObject;

  before(async () => {
    client = runtimeClient();
    ns = await freshNamespace(client, 'events');
    cm = await client.create({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'regarded', namespace: ns },
      data: {},
    });
  });

  after(async () => {
    await deleteNamespace(client, ns);
    client.close();
  });

  const eventsOf = async (reason: string): Promise<EventObject[]> => {
    const list = await client.listAll<EventObject>('events.k8s.io/v1', 'Event', { namespace: ns });
    return list.items.filter((e) => e.reason === reason && e.regarding.name === 'regarded');
  };

  it('repeats become one Event with a series count; a different note is another Event', async () => {
    const rec = new EventRecorder({ client, reportingInstance: 'test-instance', seriesFlushMs: 60_000 });
    for (let i = 0; i < 7; i++) {
      await rec.event(cm, 'Warning', 'SourceUnavailable', 'List', 'git.example.com: connection refused');
    }
    await rec.event(cm, 'Warning', 'SourceUnavailable', 'List', 'git.example.com: timeout');
    // Later repeats are coalesced; flush writes the final count.
    await rec.flush();

    const events = await eventsOf('SourceUnavailable');
    assert.equal(events.length, 2, JSON.stringify(events.map((e) => e.note)));
    const repeated = events.find((e) => e.note === 'git.example.com: connection refused');
    assert.ok(repeated);
    assert.equal(repeated.series?.count, 7);
    assert.ok(repeated.series?.lastObservedTime);
    assert.equal(repeated.type, 'Warning');
    assert.equal(repeated.action, 'List');
    assert.equal(repeated.reportingController, 'stackflux');
    assert.equal(repeated.reportingInstance, 'test-instance');
    assert.equal(repeated.regarding.kind, 'ConfigMap');
    assert.equal(repeated.regarding.uid, cm.metadata.uid);
    const single = events.find((e) => e.note === 'git.example.com: timeout');
    assert.ok(single);
    assert.equal(single.series, undefined);

    // The core/v1 view (kubectl describe: "x7 over ...") shows the same Event with its series.
    const core = await client.get<KubeObject & { series?: { count?: number }; reason?: string }>(
      'v1',
      'Event',
      repeated.metadata.name ?? '',
      ns,
    );
    assert.equal(core?.reason, 'SourceUnavailable');
    assert.equal(core?.series?.count, 7);
  });

  it('never throws into the caller when the API server rejects the Event', async () => {
    const rec = new EventRecorder({ client });
    // An object in a namespace that does not exist: the create fails, the call resolves.
    await rec.event(
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x', namespace: `${ns}-missing` } },
      'Normal',
      'Test',
      'Test',
      'no namespace',
    );
  });
});
