// The fleet bench's csctl/native comparison (test/bench/fleet.ts): issue 23's 1.2x fan-out target.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { csctlComparisons } from '../../bench/fleet.ts';

describe('fleet bench: csctl fan-out against native', () => {
  it('pairs the native and the csctl run of each N and checks the ratio against 1.2x', () => {
    const runs = [
      { n: 100, stack: 'native', fanout: { seconds: 10 } },
      { n: 100, stack: 'csctl', fanout: { seconds: 12 } },
      { n: 1000, stack: 'native', fanout: { seconds: 50 } },
      { n: 1000, stack: 'csctl', fanout: { seconds: 61 } },
    ];
    assert.deepEqual(csctlComparisons(runs), [
      { n: 100, nativeSeconds: 10, csctlSeconds: 12, ratio: 1.2, met: true },
      { n: 1000, nativeSeconds: 50, csctlSeconds: 61, ratio: 1.22, met: false },
    ]);
  });

  it('compares nothing without both stacks at one N, or when a fan-out did not complete', () => {
    assert.deepEqual(
      csctlComparisons([
        { n: 100, fanout: { seconds: 10 } },
        { n: 1000, stack: 'csctl', fanout: { seconds: 12 } },
        { n: 200, stack: 'native', fanout: { seconds: 10 } },
        { n: 200, stack: 'csctl', fanout: { seconds: 900, timedOut: 'timed out' } },
      ]),
      [],
    );
  });
});
