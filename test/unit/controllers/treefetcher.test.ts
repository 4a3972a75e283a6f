// Issue 31 F5: reads of release sources run off the shared workers, one per key, under a total
// deadline, with slots bounded globally and per namespace and taken round-robin over namespaces.
// Pure: an injected FakeClock and reads whose promises the test settles.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  SOURCE_READ_DEFAULTS,
  withGitHubListingDeadline,
  withListingDeadline,
} from '../../../controller/controllers/sourcereads.ts';
import {
  BackgroundFetcher,
  type FetchJob,
  fetchBackoff,
} from '../../../controller/controllers/treefetcher.ts';
import { FakeClock } from '../../../controller/runtime/clock.ts';
import { DeadlineError, formatDeadline, withDeadline } from '../../../controller/sources/deadline.ts';

/** A read the test settles by hand; records the signal it was given. */
function manual<T>(key: string, namespace: string) {
  let resolve: (v: T) => void = () => undefined;
  let reject: (e: unknown) => void = () => undefined;
  const started: AbortSignal[] = [];
  const job: FetchJob<T> = {
    key,
    namespace,
    what: `reading ${key}`,
    read: (signal) =>
      new Promise<T>((res, rej) => {
        started.push(signal);
        resolve = res;
        reject = rej;
      }),
  };
  return {
    job,
    started,
    resolve: (v: T) => resolve(v),
    reject: (e: unknown) => reject(e),
  };
}

/** Lets settled promises run their callbacks. */
const flush = async (): Promise<void> => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

const DEADLINE = { ms: 60_000, flag: 'source-read-timeout' };

describe('withDeadline', () => {
  it('rejects with a DeadlineError naming the deadline and its flag, and aborts the read, though the read never ends', async () => {
    const clock = new FakeClock();
    let signal: AbortSignal | undefined;
    const p = withDeadline(
      { ms: 300_000, flag: 'source-read-timeout' },
      'reading tag v1 of x',
      (s) => {
        signal = s;
        return new Promise<never>(() => undefined);
      },
      { clock },
    );
    clock.advance(299_999);
    assert.equal(signal?.aborted, false);
    clock.advance(1);
    await assert.rejects(p, (err: unknown) => {
      assert.ok(err instanceof DeadlineError);
      assert.equal(err.reason, 'SourceTimeout');
      assert.equal(err.deadline, 'the 5m deadline of --source-read-timeout');
      assert.equal(
        err.message,
        'reading tag v1 of x did not finish within the 5m deadline of --source-read-timeout',
      );
      return true;
    });
    assert.equal(signal?.aborted, true, 'the read is told to stop (git killed, requests cancelled)');
  });

  it('passes a read that ends in time through and leaves no timer behind', async () => {
    const clock = new FakeClock();
    assert.equal(await withDeadline(DEADLINE, 'x', async () => 42, { clock }), 42);
    assert.equal(clock.pending(), 0);
  });

  it('spells deadlines as the flag takes them', () => {
    assert.equal(formatDeadline(300_000), '5m');
    assert.equal(formatDeadline(45_000), '45s');
    assert.equal(formatDeadline(1500), '1500ms');
  });
});

describe('BackgroundFetcher', () => {
  it('answers at once while the read runs, shares one read per key, and wakes every asker once when it settles', async () => {
    const clock = new FakeClock();
    const f = new BackgroundFetcher<string>({ deadline: DEADLINE, maxConcurrent: 4, clock });
    const r = manual<string>('tree-a', 'ns-a');
    const woken: string[] = [];
    assert.deepEqual(f.request(r.job, { id: 'rel-1', wake: () => woken.push('rel-1') }), {
      state: 'running',
    });
    assert.deepEqual(f.request(r.job, { id: 'rel-1', wake: () => woken.push('rel-1') }), {
      state: 'running',
    });
    assert.deepEqual(f.request(r.job, { id: 'rel-2', wake: () => woken.push('rel-2') }), {
      state: 'running',
    });
    assert.equal(r.started.length, 1, 'one read for the key');
    r.resolve('tree');
    await flush();
    assert.deepEqual(woken.sort(), ['rel-1', 'rel-2']);
    assert.deepEqual(f.request(r.job), { state: 'ready', value: 'tree' });
    // Handed over once; asked again, it is read again (from the disk cache, in the background).
    assert.equal(f.request(r.job).state, 'running');
    assert.equal(r.started.length, 2);
  });

  it('a read past its deadline fails with SourceTimeout naming the deadline, frees its slot, and is not read again before its back-off', async () => {
    const clock = new FakeClock();
    const f = new BackgroundFetcher<string>({
      deadline: DEADLINE,
      maxConcurrent: 1,
      perNamespace: 1,
      clock,
      backoffMs: 10_000,
    });
    const slow = manual<string>('slow', 'ns-a');
    const next = manual<string>('next', 'ns-b');
    let woken = 0;
    f.request(slow.job, { id: 'a', wake: () => woken++ });
    assert.equal(f.request(next.job).state, 'queued', 'the only slot is taken');
    clock.advance(DEADLINE.ms);
    await flush();
    assert.equal(woken, 1);
    assert.equal(slow.started[0]?.aborted, true, 'the slow read is aborted');
    assert.equal(next.started.length, 1, 'the freed slot goes to the next read');
    const failed = f.request(slow.job);
    assert.equal(failed.state, 'failed');
    if (failed.state !== 'failed') return;
    assert.ok(failed.error instanceof DeadlineError);
    assert.match(
      (failed.error as Error).message,
      /did not finish within the 1m deadline of --source-read-timeout/,
    );
    assert.equal(failed.retryAt, clock.now() + 10_000);
    clock.advance(9_999);
    assert.equal(f.request(slow.job).state, 'failed', 'not before the back-off');
    assert.equal(slow.started.length, 1);
    clock.advance(1);
    assert.equal(f.request(slow.job).state, 'queued', 'read again after it (the slot is still busy)');
  });

  it("one namespace's slow reads never take every slot: another namespace's read starts at once", () => {
    const clock = new FakeClock();
    const f = new BackgroundFetcher<string>({ deadline: DEADLINE, maxConcurrent: 4, clock });
    const hostile = Array.from({ length: 10 }, (_, i) => manual<string>(`a-${i}`, 'tenant-a'));
    for (const h of hostile) f.request(h.job);
    assert.equal(hostile.filter((h) => h.started.length > 0).length, 2, 'tenant-a gets half of the slots');
    const benign = manual<string>('b-0', 'tenant-b');
    assert.equal(f.request(benign.job).state, 'running');
    assert.equal(benign.started.length, 1);
    assert.deepEqual(f.stats().runningIn, { 'tenant-a': 2, 'tenant-b': 1 });
  });

  it('takes queued reads round-robin over namespaces', async () => {
    const clock = new FakeClock();
    const f = new BackgroundFetcher<string>({ deadline: DEADLINE, maxConcurrent: 1, perNamespace: 1, clock });
    const first = manual<string>('first', 'x');
    f.request(first.job);
    const order: string[] = [];
    const jobs = [
      manual<string>('a1', 'a'),
      manual<string>('a2', 'a'),
      manual<string>('a3', 'a'),
      manual<string>('b1', 'b'),
      manual<string>('c1', 'c'),
    ];
    for (const j of jobs)
      f.request({
        ...j.job,
        read: (s) => {
          order.push(j.job.key);
          return j.job.read(s);
        },
      });
    first.resolve('done');
    for (let i = 0; i < jobs.length; i++) {
      await flush();
      const running = jobs.find((j) => j.started.length > 0 && !order.slice(0, i).includes(j.job.key));
      running?.resolve('ok');
    }
    await flush();
    assert.deepEqual(order, ['a1', 'b1', 'c1', 'a2', 'a3']);
  });

  it('fails as the read failed (a verdict or an unreachable source), with back-off doubling per failure in a row', async () => {
    const clock = new FakeClock();
    const f = new BackgroundFetcher<string>({ deadline: DEADLINE, maxConcurrent: 2, clock, backoffMs: 1000 });
    const r = manual<string>('k', 'ns');
    f.request(r.job);
    r.reject(new Error('unreachable'));
    await flush();
    const one = f.request(r.job);
    assert.equal(one.state === 'failed' && one.retryAt - clock.now(), 1000);
    clock.advance(1000);
    f.request(r.job);
    r.reject(new Error('unreachable'));
    await flush();
    const two = f.request(r.job);
    assert.equal(two.state === 'failed' && two.retryAt - clock.now(), 2000);
    assert.equal(fetchBackoff(40, 1000, 600_000), 600_000);
  });

  it('keeps a value asked for with keep for every asker until keepMs passes', async () => {
    const clock = new FakeClock();
    const f = new BackgroundFetcher<string>({ deadline: DEADLINE, maxConcurrent: 2, clock, keepMs: 5000 });
    const r = manual<string>('k', 'ns');
    f.request(r.job, undefined, { keep: true });
    r.resolve('tree');
    await flush();
    assert.equal(f.request(r.job, undefined, { keep: true }).state, 'ready');
    clock.advance(4999);
    assert.equal(f.request(r.job, undefined, { keep: true }).state, 'ready');
    clock.advance(1);
    assert.equal(f.request(r.job, undefined, { keep: true }).state, 'running', 'read again once it expired');
  });

  it('stop() aborts the reads in flight and starts no more', async () => {
    const clock = new FakeClock();
    const f = new BackgroundFetcher<string>({ deadline: DEADLINE, maxConcurrent: 1, clock });
    const a = manual<string>('a', 'ns');
    const b = manual<string>('b', 'ns2');
    f.request(a.job);
    f.request(b.job);
    f.stop();
    await flush();
    assert.equal(a.started[0]?.aborted, true);
    assert.equal(b.started.length, 0);
  });
});

describe('listing deadlines (the pollers list through these)', () => {
  it('a listing that never ends fails at --source-list-timeout, its signal aborted', async () => {
    const clock = new FakeClock();
    let signal: AbortSignal | undefined;
    const list = withListingDeadline(
      (_url, _creds, o) => {
        signal = o?.signal;
        return new Promise<never>(() => undefined);
      },
      { listTimeoutMs: 120_000 },
      clock,
    );
    const p = list('oci://registry.example/team/stacks', undefined, { insecure: true });
    clock.advance(120_000);
    await assert.rejects(
      p,
      /listing the tags of oci:\/\/registry.example\/team\/stacks did not finish within the 2m deadline of --source-list-timeout/,
    );
    assert.equal(signal?.aborted, true);
  });

  it('a GitHub Releases listing that never ends fails at the same deadline', async () => {
    const clock = new FakeClock();
    const list = withGitHubListingDeadline(() => new Promise<never>(() => undefined), {}, clock);
    const p = list({ owner: 'team', repo: 'stacks' }, undefined);
    clock.advance(SOURCE_READ_DEFAULTS.listTimeoutMs);
    await assert.rejects(
      p,
      (err: unknown) => err instanceof DeadlineError && /team\/stacks/.test(err.message),
    );
  });
});
