// The end of a reconcile: its Events, and when the release is looked at again (in which order).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  recordReleaseEvents,
  requeueOf,
} from '../../../../controller/controllers/clusterstackrelease/outcome.ts';
import type { ReleaseProviderInput } from '../../../../controller/reconcilers/provider.ts';
import { SourceError } from '../../../../controller/sources/git.ts';
import { recordingEvents, release, TAG } from './fakes.ts';

const read = {
  stack: undefined,
  fetchError: undefined,
  renderedClass: undefined,
  pending: false,
  dependenciesUnreachable: false,
};
const ready = (status: string, message?: string) => ({
  conditions: [{ type: 'Ready', status, ...(message ? { message } : {}) }],
});

describe('recordReleaseEvents', () => {
  it('an invalid release, a failed read and a failed render are Warnings', () => {
    const { events, recorder } = recordingEvents();
    recordReleaseEvents(
      recorder,
      release(),
      {
        stack: { ok: false, errors: ['a', 'b'] },
        fetchError: new SourceError('TagNotFound', 'gone'),
        renderedClass: { ok: false, reason: 'RenderFailed', message: 'm' },
      },
      { status: {} as never },
    );
    assert.deepEqual(
      events.map((e) => `${e.type} ${e.reason} ${e.note}`),
      [
        'Warning InvalidRelease a; b',
        `Warning TagNotFound reading tag ${TAG} failed: gone`,
        'Warning RenderFailed m',
      ],
    );
  });

  it('Ready is told once, when it turns True, and not for a release being deleted', () => {
    const { events, recorder } = recordingEvents();
    recordReleaseEvents(recorder, release(), read, { status: ready('True', 'serving') as never });
    recordReleaseEvents(recorder, release({ status: ready('True') as never }), read, {
      status: ready('True') as never,
    });
    recordReleaseEvents(recorder, release({ metadata: { deletionTimestamp: 'x' } }), read, {
      status: ready('True') as never,
    });
    assert.deepEqual(
      events.map((e) => `${e.type} ${e.reason} ${e.note}`),
      ['Normal Ready serving'],
    );
  });
});

describe('requeueOf', () => {
  it('a failed read is thrown before anything else', () => {
    const err = new Error('down');
    assert.throws(() => requeueOf({ ...read, fetchError: err, pending: true }, undefined), err);
  });

  it('pending, then unreachable dependencies, then a class not written, then a provider kind', () => {
    const waiting = {
      template: { state: 'pending' },
      object: { state: 'found' },
    } as unknown as ReleaseProviderInput;
    const failed = { ok: false, reason: 'FleetUnreachable', message: 'm' } as const;
    assert.deepEqual(requeueOf({ ...read, pending: true, dependenciesUnreachable: true }, waiting), {
      requeueAfter: 60_000,
    });
    assert.deepEqual(requeueOf({ ...read, dependenciesUnreachable: true, renderedClass: failed }, waiting), {
      requeueAfter: 60_000,
    });
    assert.deepEqual(requeueOf({ ...read, renderedClass: failed }, waiting), { requeueAfter: 30_000 });
    assert.deepEqual(
      requeueOf({ ...read, renderedClass: { ok: false, reason: 'InvalidRelease', message: 'm' } }, waiting),
      { requeueAfter: 30_000 },
    );
    assert.equal(requeueOf(read, undefined), undefined);
  });
});
