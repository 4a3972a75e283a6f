// CoolDowns (controller/rendering/bounded/cooldown.ts): a template whose renders hit a limit K times
// in a row is refused for the cool-down, so is the template with any values once K different values
// in a row hit one; a render within the limits ends the streak. Timed by an injected clock here;
// the pool's behaviour with real render processes is in ../fairness.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CoolDowns } from '../../../../controller/rendering/bounded/cooldown.ts';
import type { RenderResult } from '../../../../controller/rendering/index.ts';
import { addonInput } from '../fixtures.ts';

const SLIM = addonInput({ 'x.yaml': 'unused' });
const TIMEOUT_MESSAGE =
  'cluster-addon/a/x.yaml: rendering took longer than the time budget of 1s (--render-timeout) and was stopped';
const TIMEOUT: RenderResult = { ok: false, reason: 'LimitExceeded', message: TIMEOUT_MESSAGE };
const GOOD: RenderResult = { ok: true, files: new Map(), objects: [], values: {} };

/** The keys of template `t` rendered with values `v`. */
const keys = (v: string, t = 'ns/a/files') => ({ template: t, withValues: `${t}/${v}` });

function coolDowns(after: number, ms = 60_000) {
  const clock = { now: 1_000_000 };
  return { clock, cd: new CoolDowns({ coolDownAfter: after, coolDownMs: ms }, () => clock.now) };
}

describe('CoolDowns', () => {
  it('refuses a template with the same values after K limit hits in a row, until the cool-down ends', () => {
    const { clock, cd } = coolDowns(3, 60_000);
    for (let i = 0; i < 2; i++) {
      cd.noteResult(keys('v1'), TIMEOUT, false);
      assert.equal(cd.failure(keys('v1'), SLIM), undefined, `hit ${i + 1} of 3`);
    }
    cd.noteResult(keys('v1'), TIMEOUT, false);
    const refused = cd.failure(keys('v1'), SLIM);
    assert.deepEqual(refused, {
      ok: false,
      reason: 'CoolingDown',
      message: `cluster-addon/a/: not rendered until ${new Date(1_060_000).toISOString()}: its renders hit a limit 3 times in a row, last: ${TIMEOUT_MESSAGE}`,
    });
    // Other values of the template: one values' hits do not cool it down for the others.
    assert.equal(cd.failure(keys('v2'), SLIM), undefined);
    clock.now = 1_059_999;
    assert.equal(cd.failure(keys('v1'), SLIM)?.reason, 'CoolingDown');
    clock.now = 1_060_000;
    assert.equal(cd.failure(keys('v1'), SLIM), undefined);
  });

  it('a render within the limits ends the streak; a refusal while cooling does not', () => {
    const { cd } = coolDowns(2);
    cd.noteResult(keys('v1'), TIMEOUT, false);
    cd.noteResult(keys('v1'), GOOD, false);
    cd.noteResult(keys('v1'), TIMEOUT, false);
    assert.equal(cd.failure(keys('v1'), SLIM), undefined, 'one hit after a good render');
    cd.noteResult(keys('v1'), TIMEOUT, false);
    const refused = cd.failure(keys('v1'), SLIM);
    assert.equal(refused?.reason, 'CoolingDown');
    cd.noteResult(keys('v1'), refused as RenderResult, false);
    assert.equal(cd.failure(keys('v1'), SLIM)?.reason, 'CoolingDown');
    // Other failures (a template error) end it, like a good render.
    cd.noteResult(keys('v1'), { ok: false, reason: 'TemplateError', message: 'x' }, false);
    assert.equal(cd.failure(keys('v1'), SLIM), undefined);
  });

  it('K different values in a row hitting a limit refuse the template with any values', () => {
    const { cd } = coolDowns(3);
    cd.noteResult(keys('v1'), TIMEOUT, false);
    cd.noteResult(keys('v2'), TIMEOUT, false);
    assert.equal(cd.failure(keys('v9'), SLIM), undefined, 'two different values of three');
    // The same values again add no different values to the template's streak.
    cd.noteResult(keys('v2'), TIMEOUT, false);
    assert.equal(cd.failure(keys('v9'), SLIM), undefined);
    cd.noteResult(keys('v3'), TIMEOUT, false);
    const refused = cd.failure(keys('v9'), SLIM);
    assert.match(
      refused?.ok === false ? refused.message : '',
      /hit a limit 3 times in a row with different values, last: /,
    );
    // Another template (another namespace, addon or files) is not cooling.
    assert.equal(cd.failure(keys('v9', 'other/a/files'), SLIM), undefined);
  });

  it("with K = 1, one Cluster's values cool down those values only: the template needs two different values", () => {
    const { cd } = coolDowns(1);
    cd.noteResult(keys('v1'), TIMEOUT, false);
    assert.equal(cd.failure(keys('v1'), SLIM)?.reason, 'CoolingDown');
    assert.equal(cd.failure(keys('v2'), SLIM), undefined);
    cd.noteResult(keys('v2'), TIMEOUT, false);
    assert.equal(cd.failure(keys('v3'), SLIM)?.reason, 'CoolingDown');
  });

  it('the failures of a pool shutting down are no limit hits', () => {
    const { cd } = coolDowns(2);
    cd.noteResult(keys('v1'), TIMEOUT, false);
    cd.noteResult(keys('v1'), TIMEOUT, true);
    cd.noteResult(keys('v1'), TIMEOUT, false);
    assert.equal(cd.failure(keys('v1'), SLIM), undefined);
  });
});
