import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApiError, type KubeClient, type KubeObject } from '../../../controller/runtime/client.ts';
import { FakeClock } from '../../../controller/runtime/clock.ts';
import { type EventObject, EventRecorder, microTime } from '../../../controller/runtime/events.ts';

interface Call {
  op: 'create' | 'patch';
  name: string;
  namespace: string | undefined;
  body: unknown;
}

function fakeClient(opts: { failCreates?: number; patchNotFound?: boolean } = {}) {
  const calls: Call[] = [];
  let failCreates = opts.failCreates ?? 0;
  const client = {
    create: async (obj: KubeObject) => {
      calls.push({
        op: 'create',
        name: obj.metadata.name ?? '',
        namespace: obj.metadata.namespace,
        body: obj,
      });
      if (failCreates > 0) {
        failCreates -= 1;
        throw new ApiError('POST', '/events', 500, '{"reason":"InternalError","message":"boom"}');
      }
      return obj;
    },
    mergePatch: async (
      _av: string,
      _k: string,
      name: string,
      namespace: string | undefined,
      patch: unknown,
    ) => {
      calls.push({ op: 'patch', name, namespace, body: patch });
      if (opts.patchNotFound) throw new ApiError('PATCH', '/events', 404, '{"reason":"NotFound"}');
      return {} as KubeObject;
    },
  };
  return { client: client as unknown as KubeClient, calls };
}

function bodyOf(c: Call | undefined): EventObject {
  return (c?.body ?? {}) as EventObject;
}

const widget: KubeObject = {
  apiVersion: 'stackflux.io/v1alpha1',
  kind: 'ClusterStack',
  metadata: { name: 'ferrol', namespace: 'team-a', uid: 'u-1' },
};

describe('EventRecorder', () => {
  it('creates an Event with the events.k8s.io/v1 fields', async () => {
    const { client, calls } = fakeClient();
    const clock = new FakeClock(Date.UTC(2024, 0, 2, 3, 4, 5, 678));
    const rec = new EventRecorder({ client, clock, reportingInstance: 'pod-0' });
    await rec.event(widget, 'Normal', 'ReleaseCreated', 'Create', 'created release v1');
    assert.equal(calls.length, 1);
    const ev = calls[0]?.body as EventObject;
    assert.equal(ev.apiVersion, 'events.k8s.io/v1');
    assert.equal(ev.kind, 'Event');
    assert.equal(ev.metadata.namespace, 'team-a');
    assert.match(ev.metadata.name ?? '', /^ferrol\.[0-9a-f]+$/);
    assert.equal(ev.reportingController, 'stackflux');
    assert.equal(ev.reportingInstance, 'pod-0');
    assert.equal(ev.eventTime, '2024-01-02T03:04:05.678000Z');
    assert.deepEqual(ev.regarding, {
      apiVersion: 'stackflux.io/v1alpha1',
      kind: 'ClusterStack',
      name: 'ferrol',
      namespace: 'team-a',
      uid: 'u-1',
    });
    assert.equal(ev.series, undefined);
  });

  it('correlates repeats within the window into one series: first repeat at once, later ones coalesced', async () => {
    const { client, calls } = fakeClient();
    const clock = new FakeClock(Date.UTC(2024, 0, 1));
    const rec = new EventRecorder({ client, clock, windowMs: 60_000, seriesFlushMs: 10_000 });
    await rec.event(widget, 'Warning', 'SourceUnavailable', 'List', 'repo down');
    clock.advance(1_000);
    await rec.event(widget, 'Warning', 'SourceUnavailable', 'List', 'repo down');
    assert.deepEqual(
      calls.map((c) => c.op),
      ['create', 'patch'],
    );
    const name = calls[0]?.name;
    assert.equal(calls[1]?.name, name);
    assert.deepEqual(calls[1]?.body, {
      series: { count: 2, lastObservedTime: microTime(Date.UTC(2024, 0, 1) + 1_000) },
    });
    // Three more repeats: no write until the flush timer fires, then one PATCH with count 5.
    for (let i = 0; i < 3; i++) {
      clock.advance(1_000);
      await rec.event(widget, 'Warning', 'SourceUnavailable', 'List', 'repo down');
    }
    assert.equal(calls.length, 2);
    clock.advance(10_000);
    await rec.flush();
    assert.equal(calls.length, 3);
    assert.equal(calls[2]?.op, 'patch');
    assert.equal(calls[2]?.name, name);
    assert.deepEqual(calls[2]?.body, {
      series: { count: 5, lastObservedTime: microTime(Date.UTC(2024, 0, 1) + 4_000) },
    });
    // flush() with nothing pending writes nothing.
    await rec.flush();
    assert.equal(calls.length, 3);
    assert.equal(rec.size(), 1);
  });

  it('flush() writes a pending count before its timer', async () => {
    const { client, calls } = fakeClient();
    const clock = new FakeClock();
    const rec = new EventRecorder({ client, clock, seriesFlushMs: 30_000 });
    for (let i = 0; i < 4; i++) await rec.event(widget, 'Normal', 'Ready', 'Reconcile', 'ok');
    assert.equal(calls.length, 2);
    await rec.flush();
    assert.equal(calls.length, 3);
    assert.equal(bodyOf(calls[2]).series?.count, 4);
    assert.equal(clock.pending(), 0);
  });

  it('different type, reason, note or object make different Events', async () => {
    const { client, calls } = fakeClient();
    const rec = new EventRecorder({ client, clock: new FakeClock() });
    await rec.event(widget, 'Normal', 'R', 'A', 'n');
    await rec.event(widget, 'Warning', 'R', 'A', 'n');
    await rec.event(widget, 'Normal', 'R2', 'A', 'n');
    await rec.event(widget, 'Normal', 'R', 'A', 'n2');
    await rec.event({ ...widget, metadata: { ...widget.metadata, name: 'other' } }, 'Normal', 'R', 'A', 'n');
    assert.deepEqual(
      calls.map((c) => c.op),
      ['create', 'create', 'create', 'create', 'create'],
    );
    assert.equal(new Set(calls.map((c) => c.name)).size, 5);
  });

  it('a repeat after the window starts a new Event', async () => {
    const { client, calls } = fakeClient();
    const clock = new FakeClock();
    const rec = new EventRecorder({ client, clock, windowMs: 60_000 });
    await rec.event(widget, 'Normal', 'R', 'A', 'n');
    clock.advance(60_001);
    await rec.event(widget, 'Normal', 'R', 'A', 'n');
    assert.deepEqual(
      calls.map((c) => c.op),
      ['create', 'create'],
    );
    assert.equal(bodyOf(calls[1]).series, undefined);
  });

  it('the cache is bounded: the least recently used entry goes first', async () => {
    const { client, calls } = fakeClient();
    const rec = new EventRecorder({ client, clock: new FakeClock(), maxEntries: 2, seriesFlushMs: 0 });
    await rec.event(widget, 'Normal', 'A', 'A', 'n');
    await rec.event(widget, 'Normal', 'B', 'A', 'n');
    await rec.event(widget, 'Normal', 'A', 'A', 'n'); // A is now the most recent
    await rec.event(widget, 'Normal', 'C', 'A', 'n'); // evicts B
    assert.equal(rec.size(), 2);
    await rec.event(widget, 'Normal', 'A', 'A', 'n'); // still correlated
    await rec.event(widget, 'Normal', 'B', 'A', 'n'); // forgotten: new Event
    assert.deepEqual(
      calls.map((c) => `${c.op}:${(c.body as EventObject).reason ?? ''}`),
      ['create:A', 'create:B', 'patch:', 'create:C', 'patch:', 'create:B'],
    );
  });

  it('never rejects: a failed create is logged, and the next repeat creates the Event with its count', async () => {
    const { client, calls } = fakeClient({ failCreates: 1 });
    const rec = new EventRecorder({ client, clock: new FakeClock() });
    await rec.event(widget, 'Warning', 'R', 'A', 'n');
    await rec.event(widget, 'Warning', 'R', 'A', 'n');
    assert.deepEqual(
      calls.map((c) => c.op),
      ['create', 'create'],
    );
    assert.equal(bodyOf(calls[1]).series?.count, 2);
  });

  it('a series PATCH that finds the Event gone creates a new one with the series', async () => {
    const { client, calls } = fakeClient({ patchNotFound: true });
    const rec = new EventRecorder({ client, clock: new FakeClock() });
    await rec.event(widget, 'Normal', 'R', 'A', 'n');
    await rec.event(widget, 'Normal', 'R', 'A', 'n');
    assert.deepEqual(
      calls.map((c) => c.op),
      ['create', 'patch', 'create'],
    );
    assert.equal(bodyOf(calls[2]).series?.count, 2);
    assert.notEqual(calls[2]?.name, calls[0]?.name);
  });

  it('never throws for a malformed object', async () => {
    const { client } = fakeClient();
    const rec = new EventRecorder({ client, clock: new FakeClock() });
    await rec.event({ apiVersion: 'v1', kind: 'X' } as unknown as KubeObject, 'Normal', 'R', 'A', 'n');
  });

  it('microTime has six fractional digits', () => {
    assert.equal(microTime(Date.UTC(2024, 4, 5, 6, 7, 8, 9)), '2024-05-05T06:07:08.009000Z');
  });
});
