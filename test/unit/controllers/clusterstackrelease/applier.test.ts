// The order of a reconcile's writes: the in-use finalizer first, then the owned objects and the
// status, a deleted release's class branch, and the finalizer last; a release gone stops it all.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FINALIZER_RELEASE_IN_USE } from '../../../../controller/api/meta.ts';
import { ReleaseApplier } from '../../../../controller/controllers/clusterstackrelease/applier.ts';
import type { ReleaseClasses } from '../../../../controller/controllers/clusterstackrelease/types.ts';
import type { ClusterStackReleaseResult } from '../../../../controller/reconcilers/clusterstackrelease.ts';
import { notFound, recordingClient, recordingEvents, release } from './fakes.ts';

const signal = new AbortController().signal;
const none = { gitRepository: undefined, kustomization: undefined, provider: undefined };
const gitRepository = {
  apiVersion: 'source.toolkit.fluxcd.io/v1',
  kind: 'GitRepository',
  metadata: { name: 'r1', namespace: 'team-a' },
  spec: { url: 'u', ref: { branch: 'b' } },
};
const result = (patch: Partial<ClusterStackReleaseResult> = {}): ClusterStackReleaseResult =>
  ({
    finalizers: [FINALIZER_RELEASE_IN_USE],
    status: { commit: 'c1' },
    ...patch,
  }) as ClusterStackReleaseResult;

describe('ReleaseApplier', () => {
  it('puts the finalizer on first, then applies the objects and the status', async () => {
    const { calls, client } = recordingClient();
    const applier = new ReleaseApplier({ client });
    const ok = await applier.apply(release(), result({ gitRepository } as never), none, signal);
    assert.equal(ok, true);
    assert.deepEqual(
      calls.map((c) => c.verb),
      ['mergePatch', 'apply', 'applyStatus'],
    );
    assert.deepEqual(calls[0]?.args[4], {
      metadata: { finalizers: [FINALIZER_RELEASE_IN_USE], resourceVersion: '7' },
    });
  });

  it('a release gone while its finalizer is added: nothing else is written', async () => {
    const { calls, client } = recordingClient((verb) => {
      if (verb === 'mergePatch') throw notFound();
      return {};
    });
    const ok = await new ReleaseApplier({ client }).apply(
      release(),
      result({ gitRepository } as never),
      none,
      signal,
    );
    assert.equal(ok, false);
    assert.deepEqual(
      calls.map((c) => c.verb),
      ['mergePatch'],
    );
  });

  it('writes nothing when the finalizers and the status are as wanted (status.impact aside)', async () => {
    const { calls, client } = recordingClient();
    const rel = release({
      metadata: { finalizers: [FINALIZER_RELEASE_IN_USE] },
      status: { commit: 'c1', impact: { x: 1 } } as never,
    });
    assert.equal(await new ReleaseApplier({ client }).apply(rel, result(), none, signal), true);
    assert.deepEqual(calls, []);
  });

  it('a deleted release no longer in use: its class branch goes, then the finalizer comes off last', async () => {
    const { calls, client } = recordingClient();
    const removed: string[] = [];
    const classes = {
      remove: async (ns: string, name: string) => void removed.push(`${ns}/${name}`),
    } as unknown as ReleaseClasses;
    const rel = release({
      metadata: { finalizers: [FINALIZER_RELEASE_IN_USE], deletionTimestamp: '2026-01-01T00:00:00Z' },
      status: { commit: 'c1' } as never,
    });
    const current = { ...none, gitRepository: gitRepository as never };
    await new ReleaseApplier({ client, classes }).apply(rel, result({ finalizers: [] }), current, signal);
    assert.deepEqual(removed, ['team-a/r1']);
    assert.deepEqual(
      calls.map((c) => c.verb),
      ['mergePatch'],
    );
    assert.deepEqual(calls[0]?.args[4], { metadata: { finalizers: [], resourceVersion: '7' } });
  });

  it('tells of a provider object it created', async () => {
    const { client } = recordingClient();
    const { events, recorder } = recordingEvents();
    const providerObject = { apiVersion: 'p/v1', kind: 'DockerThing', metadata: { name: 'o1' } };
    const rel = release({
      metadata: { finalizers: [FINALIZER_RELEASE_IN_USE] },
      status: { commit: 'c1' } as never,
    });
    await new ReleaseApplier({ client, recorder }).apply(
      rel,
      result({ providerObject } as never),
      none,
      signal,
    );
    assert.deepEqual(
      events.map((e) => e.reason),
      ['ProviderObjectCreated'],
    );
  });
});
