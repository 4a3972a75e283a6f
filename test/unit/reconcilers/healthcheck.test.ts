// The cost-limited CEL health check (controller/reconcilers/healthcheck.ts): parsed once and
// checked from its AST, never evaluated to find out whether it is valid or too costly.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { parse } from 'yaml';
import {
  cachedHealthChecks,
  compileHealthCheck,
  evaluateHealthCheck,
  healthCheckProblem,
  MAX_COST,
} from '../../../controller/reconcilers/healthcheck.ts';
import { nestedAll } from '../../support/cel.ts';

describe('CEL health check limits (celhook)', () => {
  it('refuses six nested .all over 20 items without evaluating it', () => {
    const problem = healthCheckProblem(nestedAll(6));
    assert.equal(problem?.reason, 'HealthCheckTooCostly');
    assert.match(problem?.message ?? '', new RegExp(`more than the limit of ${MAX_COST}`));
    const r = evaluateHealthCheck(nestedAll(6), { cluster: {}, clusterAddon: {} });
    assert.equal(r.outcome, 'refused');
    assert.equal(r.outcome === 'refused' ? r.problem.reason : '', 'HealthCheckTooCostly');
    // Two levels are fine and evaluate.
    assert.equal(healthCheckProblem(nestedAll(2)), undefined);
    assert.deepEqual(evaluateHealthCheck(nestedAll(2), { cluster: {}, clusterAddon: {} }), {
      outcome: 'value',
      value: true,
    });
  });

  it('refuses an evaluation whose cost over the actual input is over the limit', () => {
    const expression = 'cluster.items.all(a, cluster.items.all(b, a != b || a == b))';
    assert.equal(healthCheckProblem(expression), undefined, 'cheap over the assumed 20 items');
    const big = { cluster: { items: Array.from({ length: 5000 }, (_, i) => i) }, clusterAddon: {} };
    const r = evaluateHealthCheck(expression, big);
    assert.equal(r.outcome, 'refused');
    assert.match(r.outcome === 'refused' ? r.problem.message : '', /lists up to 5000 items/);
    const small = { cluster: { items: [1, 2, 3] }, clusterAddon: {} };
    assert.deepEqual(evaluateHealthCheck(expression, small), { outcome: 'value', value: true });
  });

  it('a syntax error comes from the parser; an evaluation error over empty input is no error', () => {
    const problem = healthCheckProblem('cluster.status.phase == ');
    assert.equal(problem?.reason, 'InvalidHealthCheck');
    assert.match(problem?.message ?? '', /^spec\.rollout\.healthCheck\.expression: /);
    // Valid syntax over fields the input may lack: only evaluation would fail, so it is accepted.
    assert.equal(healthCheckProblem('cluster.status.phase == "Provisioned"'), undefined);
    const r = evaluateHealthCheck('cluster.status.phase == "Provisioned"', { cluster: {}, clusterAddon: {} });
    assert.equal(r.outcome, 'error');
  });

  it('refuses functions whose cost no bound covers, and concatenated lists count in full', () => {
    for (const fn of [
      'cluster.a.matches("(a+)+$")',
      'cluster.a.split(",").size() > 0',
      'bytes(cluster.a).json()',
    ])
      assert.equal(healthCheckProblem(fn)?.reason, 'InvalidHealthCheck', fn);
    // Four nested .all over an input list: cheap over 20 items (160,000 steps), but over the
    // list joined five times (100 items) 10^8 steps, so the `+` counts.
    const once = 'cluster.l';
    const fiveTimes = `(${Array(5).fill('cluster.l').join(' + ')})`;
    const nested = (l: string) => {
      let e = 'true';
      for (let i = 0; i < 4; i++) e = `${l}.all(v${i}, ${e})`;
      return e;
    };
    assert.equal(healthCheckProblem(nested(once)), undefined);
    const e = nested(fiveTimes);
    assert.equal(healthCheckProblem(e)?.reason, 'HealthCheckTooCostly');
  });

  it('parses an expression once and keeps a bounded cache', () => {
    const e = 'cluster.metadata.name != ""';
    assert.equal(compileHealthCheck(e), compileHealthCheck(e), 'the same compiled program');
    for (let i = 0; i < 500; i++) compileHealthCheck(`cluster.metadata.generation > ${i}`);
    assert.ok(cachedHealthChecks() <= 128, `cache holds ${cachedHealthChecks()}`);
  });

  it('the CRD limits the expression length', () => {
    const crd = parse(
      readFileSync(new URL('../../../crds/clusterstacks.stackflux.io.yaml', import.meta.url), 'utf8'),
    );
    const spec = crd.spec.versions[0].schema.openAPIV3Schema.properties.spec;
    const expression = spec.properties.rollout.properties.healthCheck.properties.expression;
    assert.equal(expression.maxLength, 1024);
    assert.equal(healthCheckProblem(`${'true && '.repeat(128)}true`)?.reason, 'InvalidHealthCheck');
  });
});
