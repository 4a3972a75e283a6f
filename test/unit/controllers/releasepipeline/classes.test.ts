// The ClusterClass versions served (asked at most every TTL) and the fleet writer (made once,
// again after a failure).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  fleetClassWriter,
  SERVED_VERSIONS_TTL_MS,
  servedClassVersions,
} from '../../../../controller/controllers/releasepipeline/classes.ts';
import type { PipelineFleet } from '../../../../controller/controllers/releasepipeline/types.ts';
import type { FleetWriter } from '../../../../controller/gitops/branches.ts';
import type { KubeClient } from '../../../../controller/runtime/client.ts';
import type { Clock } from '../../../../controller/runtime/clock.ts';

describe('servedClassVersions', () => {
  it('keeps the versions the server serves, asking again only after the TTL', async () => {
    let now = 1_000;
    const clock = { now: () => now } as Clock;
    const asked: string[] = [];
    const client = {
      resource: async (v: string) => {
        asked.push(v);
        if (v.endsWith('v1beta2')) throw new Error('not served');
        return {} as never;
      },
    };
    const served = servedClassVersions(client, clock);
    assert.deepEqual(await served(), ['cluster.x-k8s.io/v1beta1']);
    now += SERVED_VERSIONS_TTL_MS - 1;
    await served();
    assert.equal(asked.length, 2);
    now += 1;
    await served();
    assert.equal(asked.length, 4);
  });
});

describe('fleetClassWriter', () => {
  it('makes the writer once, for the release branches, and again after a failure', async () => {
    const made: string[] = [];
    let fail = true;
    const fleet = {
      url: 'https://git.example/fleet.git',
      branchPrefix: 'stackflux/',
      writer: (prefix: string, creds: unknown) => {
        made.push(`${prefix} ${JSON.stringify(creds)}`);
        if (fail) throw new Error('no fleet');
        return {} as FleetWriter;
      },
    } as PipelineFleet;
    const writer = fleetClassWriter({} as KubeClient, fleet);
    await assert.rejects(writer(), /no fleet/);
    fail = false;
    const w = await writer();
    assert.equal(await writer(), w);
    assert.equal(made.length, 2);
    assert.match(made[0] ?? '', /^stackflux\/\S+\/ undefined$/);
  });
});
