import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeClock } from '../../../controller/runtime/clock.ts';
import { RuntimeMetrics } from '../../../controller/runtime/metrics.ts';
import { WorkQueue } from '../../../controller/runtime/workqueue.ts';

describe('RuntimeMetrics', () => {
  it('exposes the controller-runtime metric names', async () => {
    const m = new RuntimeMetrics();
    m.controller('c', 2).reconciled('success', 0.01);
    m.leaderElection('lease')(true);
    m.queue('c');
    const { body, contentType } = await m.text();
    assert.match(contentType, /text\/plain/);
    for (const name of [
      'controller_runtime_reconcile_total{controller="c",result="success"} 1',
      'controller_runtime_reconcile_errors_total{controller="c"} 0',
      'controller_runtime_reconcile_time_seconds_count{controller="c"} 1',
      'workqueue_depth{name="c"} 0',
      'workqueue_adds_total{name="c"} 0',
      'workqueue_retries_total{name="c"} 0',
      'workqueue_queue_duration_seconds',
      'workqueue_work_duration_seconds',
      'leader_election_master_status{name="lease"} 1',
    ]) {
      assert.ok(body.includes(name), `missing ${name}`);
    }
  });

  it('rest_client_requests_total shows the observed clients’ counts as they are at scrape time', async () => {
    const m = new RuntimeMetrics();
    let counts = [{ method: 'GET', code: 200, count: 3 }];
    m.observeClient({
      requestCounts: () => counts,
      requestCountsByResource: () => [{ method: 'PATCH', resource: 'clusteraddons/status', count: 2 }],
    });
    assert.match((await m.text()).body, /rest_client_requests_total\{method="GET",code="200"\} 3/);
    counts = [
      { method: 'GET', code: 200, count: 5 },
      { method: 'PATCH', code: 409, count: 1 },
    ];
    const { body } = await m.text();
    assert.match(body, /rest_client_requests_total\{method="GET",code="200"\} 5/);
    assert.match(body, /rest_client_requests_total\{method="PATCH",code="409"\} 1/);
    assert.match(body, /stackflux_api_requests_total\{method="PATCH",resource="clusteraddons\/status"\} 2/);
  });

  it('the queue reports adds, depth, retries and durations', async () => {
    const m = new RuntimeMetrics();
    const clock = new FakeClock();
    const q = new WorkQueue({ name: 'q', clock, metrics: m.queue('q') });
    q.add('a');
    q.add('b');
    q.add('a');
    assert.equal(await m.value('workqueue_adds_total', { name: 'q' }), 2);
    assert.equal(await m.value('workqueue_depth', { name: 'q' }), 2);
    clock.advance(2000);
    const k = q.tryGet();
    assert.equal(k, 'a');
    assert.equal(await m.value('workqueue_depth', { name: 'q' }), 1);
    clock.advance(500);
    q.done('a');
    q.addRateLimited('a');
    assert.equal(await m.value('workqueue_retries_total', { name: 'q' }), 1);
    assert.equal(await m.value('workqueue_queue_duration_seconds', { name: 'q' }), 1, 'one observation');
    assert.equal(await m.value('workqueue_work_duration_seconds', { name: 'q' }), 1, 'one observation');
    const { body } = await m.text();
    assert.ok(body.includes('workqueue_queue_duration_seconds_sum{name="q"} 2'));
    assert.ok(body.includes('workqueue_work_duration_seconds_sum{name="q"} 0.5'));
  });

  it('two instances do not share a registry', async () => {
    const a = new RuntimeMetrics();
    const b = new RuntimeMetrics();
    a.controller('x', 1).reconciled('success', 0);
    b.controller('x', 1);
    assert.equal(
      await a.value('controller_runtime_reconcile_total', { controller: 'x', result: 'success' }),
      1,
    );
    assert.equal(
      await b.value('controller_runtime_reconcile_total', { controller: 'x', result: 'success' }),
      0,
    );
  });
});
