// The ClusterAddon's status: written only when it differs; a fleet read failure marks Ready=False
// and keeps the rest.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AddonStatusWriter } from '../../../../controller/controllers/clusteraddon/addonstatus.ts';
import { FakeClock } from '../../../../controller/runtime/clock.ts';
import { silentLogger } from '../../../../controller/runtime/logging.ts';
import { SourceError } from '../../../../controller/sources/git.ts';
import { notFound, recordingClient } from './fakes.ts';

const signal = new AbortController().signal;
const addon = (status?: object, extra: object = {}) =>
  ({
    metadata: { name: 'a', namespace: 'team', generation: 3, ...extra },
    spec: {},
    ...(status ? { status } : {}),
  }) as never;

describe('AddonStatusWriter', () => {
  it('writes the status only when it differs; a ClusterAddon gone meanwhile is no error', async () => {
    const { calls, client } = recordingClient((_v, args) => {
      if ((args[0] as { metadata: { name: string } }).metadata.name === 'gone') throw notFound();
      return {};
    });
    const w = new AddonStatusWriter({ client, clock: new FakeClock(), log: silentLogger() });
    await w.write(addon({ phase: 'x' }), { status: { phase: 'x' } as never }, signal);
    assert.equal(calls.length, 0);
    await w.write(addon({ phase: 'x' }), { status: { phase: 'y' } as never }, signal);
    assert.deepEqual(calls[0]?.args[0], {
      apiVersion: 'stackflux.io/v1alpha1',
      kind: 'ClusterAddon',
      metadata: { name: 'a', namespace: 'team' },
      status: { phase: 'y' },
    });
    await w.write(
      { metadata: { name: 'gone', namespace: 'team' } } as never,
      { status: { phase: 'y' } as never },
      signal,
    );
  });

  it('a fleet read failure marks Ready=False with its reason and keeps the rest of the status', async () => {
    const { calls, client } = recordingClient();
    const w = new AddonStatusWriter({ client, clock: new FakeClock(), log: silentLogger() });
    const err = new SourceError('AuthFailed', 'denied');
    await w.fleetReadFailed(undefined, err, signal);
    await w.fleetReadFailed(addon({}, { deletionTimestamp: '2025-01-01T00:00:00Z' }), err, signal);
    assert.equal(calls.length, 0, 'nothing to say on a missing or deleted ClusterAddon');
    await w.fleetReadFailed(addon({ fleetCommit: 'c1' }), err, signal);
    const applied = calls[0]?.args[0] as
      | { status: { fleetCommit: string; conditions: object[] } }
      | undefined;
    const status = applied?.status;
    assert.ok(status);
    assert.equal(status.fleetCommit, 'c1');
    assert.deepEqual(
      status.conditions.map((c) => ({ ...c, lastTransitionTime: undefined })),
      [
        {
          type: 'Ready',
          status: 'False',
          reason: 'AuthFailed',
          message: 'fleet repository unavailable, retrying with back-off: denied',
          observedGeneration: 3,
          lastTransitionTime: undefined,
        },
      ],
    );
  });
});
