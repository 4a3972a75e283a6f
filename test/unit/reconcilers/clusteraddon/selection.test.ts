// The select phase alone: which of the release's addons a Cluster gets, in which order, depending on
// which, with which per-cluster values.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ClusterStack } from '../../../../controller/api/clusterstack.ts';
import { contextOf } from '../../../../controller/reconcilers/clusteraddon/context.ts';
import { selectAddons } from '../../../../controller/reconcilers/clusteraddon/selection.ts';
import type { PlannedAddon, Target } from '../../../../controller/reconcilers/clusteraddon/types.ts';
import type { FluxTemplates } from '../../../../controller/releases/flux.ts';

const ctx = contextOf({
  cluster: {},
  namespace: 'team',
  name: 'alpha',
  kustomizations: [],
  branch: undefined,
  fleetSettings: { url: 'https://git.example.com/fleet.git', branchPrefix: 'stackflux/' },
  // The select phase builds no Flux object.
  templates: {} as FluxTemplates,
  now: new Date('2025-01-02T03:04:05Z'),
});

/** a ← b ← c ← d, each depending on the one before; d in the BeforeClusterUpgrade stage. */
const chain: PlannedAddon[] = [
  { name: 'a', dependsOn: [] },
  { name: 'b', dependsOn: ['a'] },
  { name: 'c', dependsOn: ['b'], targetNamespace: 'kube-system' },
  { name: 'd', dependsOn: ['c'], stage: 'BeforeClusterUpgrade' },
];

function target(o: { disabledByStack?: string[]; annotation?: string; values?: unknown }): Target {
  const cluster = {
    metadata: {
      name: 'alpha',
      ...(o.annotation !== undefined
        ? { annotations: { 'stackflux.io/disabled-addons': o.annotation } }
        : {}),
    },
    spec: {
      topology:
        o.values !== undefined ? { variables: [{ name: 'stackfluxAddonValues', value: o.values }] } : {},
    },
  };
  const clusterStack = {
    spec: { addons: (o.disabledByStack ?? []).map((name) => ({ name, enabled: false })) },
  } as unknown as ClusterStack;
  // The select phase reads the Cluster, the ClusterStack's switches and the planned addons.
  return {
    cluster,
    clusterStack,
    addons: chain,
    clusterAddon: { metadata: { name: 'alpha' } },
  } as unknown as Target;
}

describe('selectAddons', () => {
  it("switches addons off by the ClusterStack and the Cluster's annotation; dependents skip them", () => {
    const s = selectAddons(
      ctx,
      target({ disabledByStack: ['b'], annotation: ' c , ,c', values: { a: { x: 1 } } }),
    );
    assert.ok(s.ok);
    assert.deepEqual(s.value.order, [chain[0], chain[3]], 'the planned entries, in apply order, stage kept');
    assert.deepEqual([...s.value.disabled].sort(), ['b', 'c']);
    assert.deepEqual(
      [...s.value.dependencies],
      [
        ['a', []],
        ['d', ['a']],
      ],
    );
    assert.deepEqual(s.value.clusterValues, { a: { x: 1 } });
  });

  it('with nothing switched off, every addon keeps its own dependencies and no values are passed', () => {
    const s = selectAddons(ctx, target({}));
    assert.ok(s.ok);
    assert.deepEqual(
      s.value.order.map((e) => e.name),
      ['a', 'b', 'c', 'd'],
    );
    assert.deepEqual(s.value.dependencies.get('d'), ['c']);
    assert.equal(s.value.clusterValues, undefined);
  });

  it('per-cluster values that are not a mapping by addon stall the reconcile (ValuesInvalid), nothing selected', () => {
    for (const [values, message] of [
      [
        ['cni'],
        'Cluster spec.topology.variables[stackfluxAddonValues].value must be a mapping keyed by addon name',
      ],
      [
        { cni: 'mtu=1400' },
        'Cluster spec.topology.variables[stackfluxAddonValues].value.cni must be a mapping',
      ],
    ] as const) {
      const s = selectAddons(ctx, target({ values }));
      assert.ok(!s.ok);
      const ready = s.result?.status.conditions?.find((c) => c.type === 'Ready');
      assert.deepEqual([ready?.status, ready?.reason, ready?.message], ['False', 'ValuesInvalid', message]);
      assert.equal(s.result?.branch, undefined);
      assert.equal(s.result?.kustomizations, undefined);
    }
  });
});
