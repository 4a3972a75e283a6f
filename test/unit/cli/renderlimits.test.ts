// The cool-down flags of the render pool (issue 22 row 10).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { UsageError } from '../../../controller/cli/command.ts';
import { renderPoolOptions } from '../../../controller/cli/renderlimits.ts';

describe('render cool-down flags', () => {
  it('--render-cooldown-after and --render-cooldown set the pool options', () => {
    const options = renderPoolOptions({ 'render-cooldown-after': '5', 'render-cooldown': '10m' });
    assert.equal(options.coolDownAfter, 5);
    assert.equal(options.coolDownMs, 600_000);
  });

  it('bad values are usage errors naming the flag', () => {
    assert.throws(
      () => renderPoolOptions({ 'render-cooldown-after': '0' }),
      (e: unknown) => {
        return (
          e instanceof UsageError && /--render-cooldown-after must be a positive integer/.test(e.message)
        );
      },
    );
    assert.throws(
      () => renderPoolOptions({ 'render-cooldown': 'soon' }),
      (e: unknown) => {
        return e instanceof UsageError && /--render-cooldown "soon" is not a duration/.test(e.message);
      },
    );
  });
});
