// Reads off the reconcile: awaited without background reads, else ready / failed / ReadPending;
// and what of a failed read the condition shows.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  failureForCondition,
  fetchFailureOf,
  ReadPending,
  readOffWorker,
} from '../../../../controller/controllers/clusterstackrelease/backgroundreads.ts';
import type { FetchState } from '../../../../controller/controllers/treefetcher.ts';
import { DeadlineError } from '../../../../controller/sources/deadline.ts';
import { SourceError } from '../../../../controller/sources/git.ts';

const job = { key: 'k', namespace: 'ns', what: 'reading tag t of u', read: async () => 'tree' };
const fetcher = (state: FetchState<string>) => {
  const asked: string[] = [];
  return {
    asked,
    request: (j: { key: string }, w?: { id: string }) => {
      asked.push(`${j.key} by ${w?.id}`);
      return state;
    },
  };
};

describe('readOffWorker', () => {
  it('awaits the read itself without a background fetcher', async () => {
    assert.equal(await readOffWorker(undefined, job, () => {}), 'tree');
  });

  it('hands out a ready value, throws a failure, and throws ReadPending while queued or running', async () => {
    const ready = fetcher({ state: 'ready', value: 'cached' });
    assert.equal(await readOffWorker(ready, job, () => {}), 'cached');
    assert.deepEqual(ready.asked, ['k by k']);
    const boom = new Error('boom');
    await assert.rejects(
      readOffWorker(fetcher({ state: 'failed', error: boom, retryAt: 0 }), job, () => {}),
      boom,
    );
    await assert.rejects(
      readOffWorker(fetcher({ state: 'queued' }), job, () => {}),
      ReadPending,
    );
    await assert.rejects(
      readOffWorker(fetcher({ state: 'running' }), job, () => {}),
      /reading tag t of u/,
    );
  });
});

describe('failureForCondition', () => {
  it('a SourceError keeps its reason, anything else is SourceUnavailable', () => {
    assert.deepEqual(failureForCondition(new SourceError('TagNotFound', 'no tag')), {
      reason: 'TagNotFound',
    });
    assert.deepEqual(failureForCondition('text'), { reason: 'SourceUnavailable' });
    assert.equal(fetchFailureOf(new Error('down')).message, 'down');
  });

  it('a deadline shows which deadline, in stable text', () => {
    const err = new DeadlineError('reading tag t', 300_000, 'source-read-timeout');
    const got = failureForCondition(err);
    assert.equal(got.reason, 'SourceTimeout');
    assert.match(got.hint ?? '', /^not finished within the .* deadline of --source-read-timeout$/);
  });
});
