// After a push, Flux is asked to fetch the GitRepositories of the Clusters whose branch moved.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { requestFleetFetch } from '../../../../controller/controllers/clusteraddon/fluxfetch.ts';
import { FakeClock } from '../../../../controller/runtime/clock.ts';
import { silentLogger } from '../../../../controller/runtime/logging.ts';
import { notFound, recordingClient } from './fakes.ts';

describe('requestFleetFetch', () => {
  it('annotates only existing GitRepositories with requestedAt; a deleted one is no error', async () => {
    const { calls, client } = recordingClient((_verb, args) => {
      if (args[3] === 'gone') throw notFound();
      return {};
    });
    const clock = new FakeClock(Date.parse('2026-01-02T03:04:05Z'));
    const repos = new Set(['team/a-addons', 'gone/b-addons']);
    await requestFleetFetch(
      {
        client,
        gitRepository: (key) => (repos.has(key) ? ({ metadata: { name: key } } as never) : undefined),
        clock,
        log: silentLogger(),
      },
      ['team/a', 'gone/b', 'team/none'],
    );
    assert.deepEqual(
      calls.map((c) => c.args.slice(0, 5)),
      [
        [
          'source.toolkit.fluxcd.io/v1',
          'GitRepository',
          'a-addons',
          'team',
          { metadata: { annotations: { 'reconcile.fluxcd.io/requestedAt': '2026-01-02T03:04:05Z' } } },
        ],
        [
          'source.toolkit.fluxcd.io/v1',
          'GitRepository',
          'b-addons',
          'gone',
          { metadata: { annotations: { 'reconcile.fluxcd.io/requestedAt': '2026-01-02T03:04:05Z' } } },
        ],
      ],
    );
  });
});
