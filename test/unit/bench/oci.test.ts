// The OCI bench's summary of push → Ready times (test/bench/oci.ts): p50 and max as it reports them.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { summary } from '../../bench/oci.ts';

describe('oci bench: summary of push → Ready times', () => {
  it('takes the middle value of an odd count and the maximum, whatever the order', () => {
    assert.deepEqual(summary([2022.6, 1942.7, 2320.4, 1937.1, 2103.9]), { p50Ms: 2022.6, maxMs: 2320.4 });
  });

  it('takes the mean of the two middle values of an even count', () => {
    assert.deepEqual(summary([4000, 1000, 3000, 2000]), { p50Ms: 2500, maxMs: 4000 });
  });
});
