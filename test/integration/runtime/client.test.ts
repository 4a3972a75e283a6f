import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  ApiError,
  FIELD_MANAGER,
  isConflict,
  type KubeClient,
  type KubeObject,
  withControllerReference,
} from '../../../controller/runtime/client.ts';
import { type Condition, markReady, markReconciling } from '../../../controller/runtime/conditions.ts';
import { eventually } from '../../support/env.ts';
import { deleteCrd, deleteNamespace, freshNamespace, installWidgetCrd, runtimeClient } from './helpers.ts';

type Widget = KubeObject & {
  spec?: Record<string, unknown>;
  status?: { observedGeneration?: number; conditions?: Condition[] };
};

describe('KubeClient against the real API server', () => {
  let client: KubeClient;
  let ns: string;
  let widget: { apiVersion: string; kind: string; name: string };

  before(async () => {
    client = runtimeClient();
    ns = await freshNamespace(client, 'client');
    widget = await installWidgetCrd(client);
  });

  after(async () => {
    await deleteNamespace(client, ns);
    await deleteCrd(client, widget.name);
    client.close();
  });

  it('discovers plural names and scope for core and custom kinds', async () => {
    const cm = await client.resource('v1', 'ConfigMap');
    assert.equal(cm.plural, 'configmaps');
    assert.equal(cm.namespaced, true);
    const lease = await client.resource('coordination.k8s.io/v1', 'Lease');
    assert.equal(lease.plural, 'leases');
    const w = await client.resource(widget.apiVersion, widget.kind);
    assert.equal(w.plural, 'widgets');
    const nsRes = await client.resource('v1', 'Namespace');
    assert.equal(nsRes.namespaced, false);
    await assert.rejects(client.resource('v1', 'NoSuchKind'), /does not serve kind NoSuchKind/);
  });

  it('server-side applies with field manager "stackflux" and reads back', async () => {
    const cm = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'ssa', namespace: ns },
      data: { a: '1' },
    };
    const created = await client.apply(cm, { force: true });
    assert.equal(created.metadata.uid !== undefined, true);
    const managers = (created.metadata.managedFields ?? []) as Array<{ manager: string; operation: string }>;
    assert.ok(managers.some((m) => m.manager === FIELD_MANAGER && m.operation === 'Apply'));
    await client.apply({ ...cm, data: { a: '2', b: '3' } }, { force: true });
    const got = await client.get<KubeObject & { data?: Record<string, string> }>(
      'v1',
      'ConfigMap',
      'ssa',
      ns,
    );
    assert.deepEqual(got?.data, { a: '2', b: '3' });
    // Fields dropped from our apply are removed (we owned them).
    await client.apply({ ...cm, data: { a: '2' } }, { force: true });
    const again = await client.get<KubeObject & { data?: Record<string, string> }>(
      'v1',
      'ConfigMap',
      'ssa',
      ns,
    );
    assert.deepEqual(again?.data, { a: '2' });
    assert.equal(await client.get('v1', 'ConfigMap', 'missing', ns), undefined);
  });

  it('status and conditions round-trip through the status subresource without bumping generation', async () => {
    const base: Widget = {
      apiVersion: widget.apiVersion,
      kind: widget.kind,
      metadata: { name: 'w1', namespace: ns },
      spec: { size: 1 },
    };
    const created = await client.apply(base, { force: true });
    assert.equal(created.metadata.generation, 1);
    const t0 = new Date('2025-01-01T00:00:00Z');
    const conditions = markReconciling(
      [],
      { reason: 'Progressing', message: 'working', observedGeneration: 1 },
      t0,
    );
    await client.applyStatus<Widget>(
      {
        apiVersion: widget.apiVersion,
        kind: widget.kind,
        metadata: { name: 'w1', namespace: ns },
        status: { observedGeneration: 1, conditions },
      },
      { force: true },
    );
    let got = await client.get<Widget>(widget.apiVersion, widget.kind, 'w1', ns);
    assert.equal(got?.metadata.generation, 1, 'status write does not bump generation');
    assert.deepEqual(got?.status?.conditions, conditions);
    const ready = markReady(
      got?.status?.conditions,
      { message: 'done', observedGeneration: 1 },
      new Date('2025-01-01T00:01:00Z'),
    );
    await client.applyStatus<Widget>(
      {
        apiVersion: widget.apiVersion,
        kind: widget.kind,
        metadata: { name: 'w1', namespace: ns },
        status: { observedGeneration: 1, conditions: ready },
      },
      { force: true },
    );
    got = await client.get<Widget>(widget.apiVersion, widget.kind, 'w1', ns);
    assert.equal(got?.metadata.generation, 1);
    assert.deepEqual(got?.status?.conditions, ready, 'Reconciling removed, Ready=True');
    // A status field in a main-resource apply is ignored by the API server; spec change bumps generation.
    await client.apply({ ...base, spec: { size: 2 } }, { force: true });
    got = await client.get<Widget>(widget.apiVersion, widget.kind, 'w1', ns);
    assert.equal(got?.metadata.generation, 2);
    assert.deepEqual(got?.status?.conditions, ready, 'spec apply leaves status alone');
  });

  it('adds and removes finalizers only against the resourceVersion it read', async () => {
    const cm = await client.apply(
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'fin', namespace: ns }, data: { x: '1' } },
      { force: true },
    );
    const withFin = await client.addFinalizer(cm, 'stackflux.io/test');
    assert.deepEqual(withFin.metadata.finalizers, ['stackflux.io/test']);
    // cm is now stale: its resourceVersion is older than the server's.
    const err = await client.addFinalizer(cm, 'stackflux.io/other').then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(isConflict(err), `expected 409 Conflict, got ${String(err)}`);
    assert.ok(err instanceof ApiError);
    const removed = await client.removeFinalizer(withFin, 'stackflux.io/test');
    assert.deepEqual(removed.metadata.finalizers ?? [], []);
  });

  it('owner references let garbage collection remove dependents of a deleted owner', async () => {
    const owner = await client.apply(
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'owner', namespace: ns }, data: {} },
      { force: true },
    );
    const dependent = withControllerReference(
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'dependent', namespace: ns }, data: {} },
      owner,
    );
    const created = await client.apply(dependent, { force: true });
    assert.equal(created.metadata.ownerReferences?.[0]?.uid, owner.metadata.uid);
    assert.equal(created.metadata.ownerReferences?.[0]?.controller, true);
    assert.equal(created.metadata.ownerReferences?.[0]?.blockOwnerDeletion, true);
    assert.equal(
      await client.delete('v1', 'ConfigMap', 'owner', ns, { propagationPolicy: 'Background' }),
      true,
    );
    await eventually('dependent garbage-collected', async () =>
      (await client.get('v1', 'ConfigMap', 'dependent', ns)) === undefined ? true : undefined,
    );
    assert.equal(await client.delete('v1', 'ConfigMap', 'owner', ns), false, 'already gone');
  });

  it('delete with a stale resourceVersion precondition is refused', async () => {
    const cm = await client.apply(
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'pre', namespace: ns }, data: { v: '1' } },
      { force: true },
    );
    await client.apply(
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'pre', namespace: ns }, data: { v: '2' } },
      { force: true },
    );
    const stale = cm.metadata.resourceVersion;
    assert.ok(stale);
    await assert.rejects(
      client.delete('v1', 'ConfigMap', 'pre', ns, { preconditions: { resourceVersion: stale } }),
      (e: unknown) => isConflict(e),
    );
    assert.equal(
      await client.delete('v1', 'ConfigMap', 'pre', ns, { propagationPolicy: 'Foreground' }),
      true,
    );
  });
});
