// A csctl addon's waitForPostCondition / waitForPreCondition as Flux health check expressions
// (controller/reconcilers/waitcondition.ts): the mapped expression, evaluated over one object as
// kustomize-controller does (its top-level fields as variables), gives what the cluster-stack-
// operator's expression gives over the same object bound to its key; what cannot be mapped says why.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Environment } from '@marcbachmann/cel-js';
import {
  type AppliedObject,
  postConditionHealthChecks,
  preConditionHealthChecks,
  withoutKey,
} from '../../../controller/reconcilers/waitcondition.ts';
import type { WaitForCondition } from '../../../controller/releases/description.ts';

const cel = new Environment({ unlistedVariablesAreDyn: true });
const CNI_CONFIG: AppliedObject = {
  apiVersion: 'v1',
  kind: 'ConfigMap',
  name: 'cni-config',
  namespace: 'kube-system',
};
const condition = (
  conditions: string,
  objects = [{ key: 'cniconfig', ...CNI_CONFIG }],
): WaitForCondition => ({
  objects,
  conditions,
});
const configMap = (name: string, data: Record<string, string>) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name, namespace: 'kube-system' },
  data,
});

describe('waitForPostCondition as Flux health checks', () => {
  it("maps the example stack's condition to a ConfigMap expression guarded to cni-config", () => {
    const checks = postConditionHealthChecks(
      [condition('cniconfig.data.clusterName != ""')],
      [CNI_CONFIG, { ...CNI_CONFIG, name: 'other' }],
    );
    assert.deepEqual(checks.unmapped, []);
    assert.deepEqual(checks.exprs, [
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        current:
          '(metadata.name == "cni-config" && metadata.namespace == "kube-system" ? (data.clusterName != "") : true)',
      },
    ]);
  });

  it('evaluates over the object as CSO evaluates over its key, and leaves other objects of the kind ready', () => {
    const text = 'cniconfig.data.clusterName != "" && size(cniconfig.data) >= 1';
    const [expr] = postConditionHealthChecks([condition(text)], [CNI_CONFIG]).exprs;
    assert.ok(expr);
    const cases: Record<string, string>[] = [
      { clusterName: 'c1' },
      { clusterName: '' },
      { clusterName: 'x', more: 'y' },
    ];
    for (const data of cases) {
      const object = configMap('cni-config', data);
      assert.equal(
        cel.evaluate(expr.current, object),
        cel.evaluate(text, { cniconfig: object }),
        JSON.stringify(data),
      );
    }
    assert.equal(cel.evaluate(expr.current, configMap('unrelated', {})), true);
  });

  it('rewrites only the key itself: not inside strings, not as a field name', () => {
    assert.deepEqual(withoutKey(`k.data.a == "k.data" && k.data.k == 'k.' && x.k == r"k.b"`, 'k'), {
      ok: true,
      text: `data.a == "k.data" && data.k == 'k.' && x.k == r"k.b"`,
    });
    assert.deepEqual(withoutKey('k . metadata.name == """k.x"""', 'k'), {
      ok: true,
      text: 'metadata.name == """k.x"""',
    });
  });

  it('joins two conditions on objects of one kind into one expression', () => {
    const other = { ...CNI_CONFIG, name: 'b' };
    const checks = postConditionHealthChecks(
      [condition('cniconfig.data.a == "1"'), condition('k.data.b == "2"', [{ key: 'k', ...other }])],
      [CNI_CONFIG, other],
    );
    assert.equal(checks.exprs.length, 1);
    const current = checks.exprs[0]?.current ?? '';
    assert.equal(cel.evaluate(current, configMap('cni-config', { a: '1' })), true);
    assert.equal(cel.evaluate(current, configMap('cni-config', { a: '0' })), false);
    assert.equal(cel.evaluate(current, configMap('b', { b: '2' })), true);
    assert.equal(cel.evaluate(current, configMap('b', { b: '0' })), false);
  });

  it('says why a condition cannot be a Flux health check', () => {
    const deployment = { apiVersion: 'apps/v1', kind: 'Deployment', name: 'd', namespace: 'kube-system' };
    const cases: Array<[WaitForCondition, AppliedObject[], RegExp]> = [
      [
        condition('a.data.x == b.data.x', [
          { key: 'a', ...CNI_CONFIG },
          { key: 'b', ...CNI_CONFIG, name: 'other' },
        ]),
        [CNI_CONFIG],
        /reads 2 objects; Flux checks one object at a time/,
      ],
      [
        condition('cniconfig.data.x == "1"'),
        [],
        /ConfigMap kube-system\/cni-config is not an object this addon applies/,
      ],
      [
        condition('cniconfig["data"].x == "1"'),
        [CNI_CONFIG],
        /uses cniconfig other than as cniconfig.<field>/,
      ],
      [condition('has(cniconfig.data)'), [CNI_CONFIG], /has\(cniconfig.data\) has no form/],
      [condition('cniconfig.data.x == '), [CNI_CONFIG], /does not parse/],
      // It would run in kustomize-controller, which every tenant shares: bounded like a rollout check.
      [
        condition(`cniconfig.data.x == "${'y'.repeat(1100)}"`),
        [CNI_CONFIG],
        /characters long, more than the limit of 1024/,
      ],
      [
        condition(
          'cniconfig.data.l.all(a, cniconfig.data.l.all(b, cniconfig.data.l.all(c, cniconfig.data.l.all(d, cniconfig.data.l.all(e, cniconfig.data.l.all(f, true))))))',
        ),
        [CNI_CONFIG],
        /may cost .* units over lists of 20 items, more than the limit of 1000000/,
      ],
      [
        condition('d.status.readyReplicas > 0', [{ key: 'd', ...deployment }]),
        [deployment, { ...deployment, name: 'e' }],
        /applies other Deployment objects/,
      ],
    ];
    for (const [c, applied, why] of cases) {
      const checks = postConditionHealthChecks([c], applied);
      assert.deepEqual(checks.exprs, [], c.conditions);
      assert.equal(checks.unmapped.length, 1, c.conditions);
      assert.match(checks.unmapped[0] ?? '', why);
      assert.ok(checks.unmapped[0]?.startsWith(`"${c.conditions}": `));
    }
    // has() over a deeper field keeps a field selection, so it maps.
    assert.equal(
      postConditionHealthChecks([condition('has(cniconfig.data.x)')], [CNI_CONFIG]).unmapped.length,
      0,
    );
  });
});

describe('waitForPreCondition as the health checks of a gate Kustomization', () => {
  const GATE = { key: 'gate', apiVersion: 'v1', kind: 'ConfigMap', name: 'gate', namespace: 'kube-system' };

  it('checks the condition objects themselves (not applied by anyone), each with its guarded expression', () => {
    const checks = preConditionHealthChecks([condition('gate.data.ready == "yes"', [GATE])]);
    assert.deepEqual(checks.unmapped, []);
    assert.deepEqual(checks.healthChecks, [
      { apiVersion: 'v1', kind: 'ConfigMap', name: 'gate', namespace: 'kube-system' },
    ]);
    const [expr] = checks.exprs;
    assert.ok(expr);
    for (const data of [{ ready: 'yes' }, { ready: 'no' }, { ready: '' }]) {
      const object = configMap('gate', data);
      assert.equal(
        cel.evaluate(expr.current, object),
        cel.evaluate('gate.data.ready == "yes"', { gate: object }),
        JSON.stringify(data),
      );
    }
  });

  it('gates on two objects of one kind, neither one taking the other’s expression; a cluster-scoped object has no namespace', () => {
    const deployment = { apiVersion: 'apps/v1', kind: 'Deployment', namespace: 'kube-system' };
    const checks = preConditionHealthChecks([
      condition('d.status.readyReplicas > 0', [{ key: 'd', name: 'd', ...deployment }]),
      condition('e.status.readyReplicas > 1', [{ key: 'e', name: 'e', ...deployment }]),
      condition('n.status.phase == "Active"', [
        { key: 'n', apiVersion: 'v1', kind: 'Namespace', name: 'team', namespace: '' },
      ]),
      // The same object twice is checked once.
      condition('d.status.replicas > 0', [{ key: 'd', name: 'd', ...deployment }]),
    ]);
    assert.deepEqual(checks.unmapped, []);
    assert.deepEqual(checks.healthChecks, [
      { apiVersion: 'apps/v1', kind: 'Deployment', name: 'd', namespace: 'kube-system' },
      { apiVersion: 'apps/v1', kind: 'Deployment', name: 'e', namespace: 'kube-system' },
      { apiVersion: 'v1', kind: 'Namespace', name: 'team' },
    ]);
    const byKind = new Map(checks.exprs.map((e) => [e.kind, e.current]));
    const deploy = (name: string, readyReplicas: number) => ({
      metadata: { name, namespace: 'kube-system' },
      status: { readyReplicas, replicas: readyReplicas },
    });
    const current = byKind.get('Deployment') ?? '';
    assert.equal(cel.evaluate(current, deploy('d', 1)), true);
    assert.equal(cel.evaluate(current, deploy('d', 0)), false);
    assert.equal(cel.evaluate(current, deploy('e', 1)), false);
    assert.equal(cel.evaluate(current, deploy('e', 2)), true);
    assert.equal(byKind.get('Namespace'), '(metadata.name == "team" ? (status.phase == "Active") : true)');
  });

  it('says why a condition cannot gate, and checks none of its objects', () => {
    const cases: Array<[WaitForCondition, RegExp]> = [
      [
        condition('a.data.x == b.data.x', [GATE, { ...GATE, key: 'b', name: 'other' }]),
        /reads 2 objects; Flux checks one object at a time/,
      ],
      [condition('gate["data"].x == "1"', [GATE]), /uses gate other than as gate.<field>/],
      [condition(`gate.data.x == "${'y'.repeat(1100)}"`, [GATE]), /more than the limit of 1024/],
      [
        condition(
          'gate.data.l.all(a, gate.data.l.all(b, gate.data.l.all(c, gate.data.l.all(d, gate.data.l.all(e, gate.data.l.all(f, true))))))',
          [GATE],
        ),
        /more than the limit of 1000000/,
      ],
      [condition('gate.data.x == "1"', [{ ...GATE, name: 'a/../b' }]), /name is not an object name/],
      [
        condition('gate.data.x == "1"', [{ ...GATE, namespace: 'Kube System' }]),
        /namespace is not a DNS label/,
      ],
      [condition('gate.data.x == "1"', [{ ...GATE, kind: 'Config Map' }]), /kind is not a Kubernetes kind/],
      [condition('gate.data.x == "1"', [{ ...GATE, apiVersion: '../v1' }]), /apiVersion is not/],
      [condition('', [GATE]), /does not parse/],
    ];
    for (const [c, why] of cases) {
      const checks = preConditionHealthChecks([c]);
      assert.deepEqual(checks.exprs, [], c.conditions);
      assert.deepEqual(checks.healthChecks, [], c.conditions);
      assert.equal(checks.unmapped.length, 1, c.conditions);
      assert.match(checks.unmapped[0] ?? '', why, c.conditions);
    }
  });
});
