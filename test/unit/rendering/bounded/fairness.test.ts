// FairQueues (controller/rendering/bounded/fairness.ts): renders wait per namespace and are taken
// round-robin, the namespace served longest ago first, so one tenant's many renders do not hold up
// another's. The pool's behaviour with real render processes is in ../fairness.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FairQueues } from '../../../../controller/rendering/bounded/fairness.ts';

interface TestJob {
  namespace: string;
  name: string;
}

function queuesWith(...names: string[]): FairQueues<TestJob> {
  const queues = new FairQueues<TestJob>();
  for (const name of names) queues.push({ namespace: name.split('-')[0] ?? '', name });
  return queues;
}

/** Takes every queued job (with `eligible`), in the order the queues give them. */
function takeAll(queues: FairQueues<TestJob>, eligible?: (namespace: string) => boolean): string[] {
  const taken: string[] = [];
  for (let job = queues.take(eligible); job !== undefined; job = queues.take(eligible)) taken.push(job.name);
  return taken;
}

describe('FairQueues', () => {
  it('takes namespaces in turn, each in its order of arrival', () => {
    const queues = queuesWith('a-1', 'a-2', 'a-3', 'b-1', 'c-1', 'c-2');
    assert.deepEqual(takeAll(queues), ['a-1', 'b-1', 'c-1', 'a-2', 'c-2', 'a-3']);
    assert.equal(queues.queued, false);
  });

  it('a namespace never served goes before those served already, whatever arrived first', () => {
    const queues = queuesWith('a-1', 'a-2', 'b-1');
    assert.equal(queues.take()?.name, 'a-1');
    assert.equal(queues.take()?.name, 'b-1');
    queues.push({ namespace: 'c', name: 'c-1' });
    // a waits since before c came, but was served; c never was.
    assert.deepEqual(takeAll(queues), ['c-1', 'a-2']);
  });

  it('a namespace served long ago goes before one served since, even when it queues again later', () => {
    const queues = queuesWith('a-1', 'b-1');
    assert.deepEqual(takeAll(queues), ['a-1', 'b-1']);
    queues.push({ namespace: 'b', name: 'b-2' });
    queues.push({ namespace: 'a', name: 'a-2' });
    assert.deepEqual(takeAll(queues), ['a-2', 'b-2']);
  });

  it('takes only from the namespaces `eligible` allows, and leaves the others waiting', () => {
    const queues = queuesWith('a-1', 'a-2', 'b-1');
    assert.deepEqual(
      takeAll(queues, (namespace) => namespace !== 'a'),
      ['b-1'],
    );
    assert.equal(queues.queued, true);
    assert.equal(
      queues.take(() => false),
      undefined,
    );
    assert.deepEqual(takeAll(queues), ['a-1', 'a-2']);
  });

  it('drain hands back every waiting job and leaves nothing queued', () => {
    const queues = queuesWith('a-1', 'b-1', 'a-2');
    assert.deepEqual(
      queues.drain().map((j) => j.name),
      ['a-1', 'a-2', 'b-1'],
    );
    assert.equal(queues.queued, false);
    assert.equal(queues.take(), undefined);
  });

  it('forgets the turn of the namespace served longest ago past 4,096 namespaces: it counts as never served', () => {
    const queues = new FairQueues<TestJob>();
    for (let i = 0; i <= 4096; i++) {
      queues.push({ namespace: `ns${i}`, name: `ns${i}` });
      queues.take();
    }
    // ns0 (the oldest turn, forgotten) and a new namespace both count as never served: the one
    // that queued first goes first. Remembered, ns0 would wait for the new one.
    queues.push({ namespace: 'ns0', name: 'ns0-again' });
    queues.push({ namespace: 'new', name: 'new-1' });
    assert.deepEqual(takeAll(queues), ['ns0-again', 'new-1']);
    // A recent turn is still known: a namespace never served goes first.
    queues.push({ namespace: 'ns4096', name: 'ns4096-again' });
    queues.push({ namespace: 'other', name: 'other-1' });
    assert.deepEqual(takeAll(queues), ['other-1', 'ns4096-again']);
  });
});
