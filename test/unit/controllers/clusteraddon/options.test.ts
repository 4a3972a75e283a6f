// The fleet settings each Cluster's reconcile reads, from the controller's options.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fleetSettingsOf, fluxShardsOn } from '../../../../controller/controllers/clusteraddon/options.ts';

describe('fleetSettingsOf', () => {
  it('defaults the branch prefix and leaves unset options out', () => {
    assert.deepEqual(fleetSettingsOf({ url: 'https://git/fleet.git' }), {
      url: 'https://git/fleet.git',
      branchPrefix: 'stackflux/',
    });
  });

  it('names the Secret, the intervals and the Flux shards when set (shards from 1)', () => {
    const fleet = {
      url: 'u',
      branchPrefix: 'p/',
      secret: { namespace: 'system', name: 'fleet-creds' },
      interval: '5m',
      addonInterval: '10m',
      fluxShards: 2,
    };
    assert.deepEqual(fleetSettingsOf(fleet), {
      url: 'u',
      branchPrefix: 'p/',
      secretRef: 'fleet-creds',
      interval: '5m',
      addonInterval: '10m',
      fluxShards: 2,
    });
    assert.equal(fluxShardsOn({ url: 'u', fluxShards: 0 }), false);
    assert.equal(fleetSettingsOf({ url: 'u', fluxShards: 0 }).fluxShards, undefined);
  });
});
