// The flux-style verbs' pure parts: kind words, the `get` table, and the reconcile wait test.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fluxRows, formatFluxTable, resolveKind } from '../../../controller/cli/get.ts';
import { main } from '../../../controller/cli/main.ts';
import { reconcileOutcome } from '../../../controller/cli/reconcile.ts';
import type { KubeObject } from '../../../controller/runtime/client.ts';
import { captureIO as capture } from '../../support/cli.ts';

const T = '2026-01-01T00:00:00Z';
const ready = (status: 'True' | 'False' | 'Unknown', message: string, reason = 'Succeeded') => ({
  type: 'Ready',
  status,
  reason,
  message,
  lastTransitionTime: T,
});

describe('CLI kind words', () => {
  it('accept the plural, singular, kind and short name', () => {
    for (const w of ['clusterstacks', 'clusterstack', 'csk', 'ClusterStack'])
      assert.equal(resolveKind(w).kind, 'ClusterStack');
    for (const w of ['releases', 'cskr', 'clusterstackreleases'])
      assert.equal(resolveKind(w).kind, 'ClusterStackRelease');
    for (const w of ['addons', 'caddon', 'clusteraddon']) assert.equal(resolveKind(w).kind, 'ClusterAddon');
    assert.throws(
      () => resolveKind('kustomizations'),
      /unknown kind "kustomizations": clusterstacks\|releases\|addons/,
    );
    assert.throws(() => resolveKind(undefined), /a kind is required/);
  });
});

describe('stackflux get table', () => {
  const csk = (ns: string, name: string, extra: Record<string, unknown>): KubeObject =>
    ({
      apiVersion: 'stackflux.io/v1alpha1',
      kind: 'ClusterStack',
      metadata: { name, namespace: ns },
      ...extra,
    }) as KubeObject;
  const objects = [
    csk('team-b', 'ferrol', {
      spec: { suspend: true },
      status: {
        latestRelease: 'docker-ferrol-1-30-v2',
        conditions: [ready('True', 'latest release docker-ferrol-1-30-v2 is Ready')],
      },
    }),
    csk('team-a', 'ferrol', {
      spec: {},
      status: { conditions: [ready('False', 'cannot list\nhttps://x', 'SourceUnavailable')] },
    }),
    csk('team-a', 'alpha', { spec: {} }),
  ];

  it('has flux get columns, sorted by namespace and name; SUSPENDED from spec.suspend', () => {
    const rows = fluxRows('ClusterStack', objects);
    assert.deepEqual(
      rows.map((r) => [r.namespace, r.name, r.revision, r.suspended, r.ready]),
      [
        ['team-a', 'alpha', '', 'False', 'Unknown'],
        ['team-a', 'ferrol', '', 'False', 'False'],
        ['team-b', 'ferrol', 'docker-ferrol-1-30-v2', 'True', 'True'],
      ],
    );
    assert.equal(rows[1]?.message, 'cannot list https://x', 'one line per row');
    const table = formatFluxTable(rows, { allNamespaces: true });
    const lines = table
      .trimEnd()
      .split('\n')
      .map((l) => l.split('\t').map((c) => c.trim()));
    assert.deepEqual(lines[0], ['NAMESPACE', 'NAME', 'REVISION', 'SUSPENDED', 'READY', 'MESSAGE']);
    assert.deepEqual(lines[3], [
      'team-b',
      'ferrol',
      'docker-ferrol-1-30-v2',
      'True',
      'True',
      'latest release docker-ferrol-1-30-v2 is Ready',
    ]);
    const oneNs = formatFluxTable(rows.slice(0, 1), { allNamespaces: false, noHeader: true });
    assert.deepEqual(
      oneNs.split('\t').map((c) => c.trim()),
      ['alpha', '', 'False', 'Unknown', 'not reconciled yet'],
    );
  });

  it('releases show the applied revision; addons the revision all their addons applied', () => {
    const [rel] = fluxRows('ClusterStackRelease', [
      {
        apiVersion: 'stackflux.io/v1alpha1',
        kind: 'ClusterStackRelease',
        metadata: { name: 'docker-ferrol-1-30-v2', namespace: 'ns' },
        spec: { tag: 'docker-ferrol-1-30-v2' },
        status: {
          lastAppliedRevision: `docker-ferrol-1-30-v2@sha1:${'a'.repeat(40)}`,
          conditions: [ready('True', 'applied')],
        },
      } as KubeObject,
    ]);
    assert.equal(rel?.revision, `docker-ferrol-1-30-v2@sha1:${'a'.repeat(40)}`);
    const addon = (addons: { name: string; ready: boolean; lastAppliedRevision?: string }[]) =>
      ({
        apiVersion: 'stackflux.io/v1alpha1',
        kind: 'ClusterAddon',
        metadata: { name: 'c1', namespace: 'ns' },
        spec: { cluster: 'c1' },
        status: { fleetCommit: 'b'.repeat(40), addons },
      }) as KubeObject;
    const same = `main@sha1:${'c'.repeat(40)}`;
    assert.equal(
      fluxRows('ClusterAddon', [
        addon([
          { name: 'cni', ready: true, lastAppliedRevision: same },
          { name: 'csi', ready: true, lastAppliedRevision: same },
        ]),
      ])[0]?.revision,
      same,
    );
    assert.equal(
      fluxRows('ClusterAddon', [
        addon([
          { name: 'cni', ready: true, lastAppliedRevision: same },
          { name: 'csi', ready: false },
        ]),
      ])[0]?.revision,
      `sha1:${'b'.repeat(40)}`,
    );
  });
});

describe('reconcile wait (flux reconcile semantics)', () => {
  const obj = (status: Record<string, unknown>, generation = 3) =>
    ({
      apiVersion: 'stackflux.io/v1alpha1',
      kind: 'ClusterStack',
      metadata: { name: 'x', generation },
      status,
    }) as KubeObject;

  it('waits for the request to be handled, for the current generation, and for the end of progress', () => {
    const v = '2026-01-01T00:00:01.000Z';
    assert.equal(
      reconcileOutcome(
        obj({ lastHandledReconcileAt: 'older', observedGeneration: 3, conditions: [ready('True', 'ok')] }),
        v,
      ).done,
      false,
    );
    assert.equal(
      reconcileOutcome(
        obj({ lastHandledReconcileAt: v, observedGeneration: 2, conditions: [ready('True', 'ok')] }),
        v,
      ).done,
      false,
    );
    const progressing = [
      ready('Unknown', 'waiting', 'Progressing'),
      { ...ready('True', 'waiting', 'Progressing'), type: 'Reconciling' },
    ];
    assert.equal(
      reconcileOutcome(obj({ lastHandledReconcileAt: v, observedGeneration: 3, conditions: progressing }), v)
        .done,
      false,
    );
    assert.deepEqual(
      reconcileOutcome(
        obj({
          lastHandledReconcileAt: v,
          observedGeneration: 3,
          conditions: [ready('True', 'latest release v2 is Ready')],
        }),
        v,
      ),
      {
        done: true,
        ready: true,
        message: 'latest release v2 is Ready',
      },
    );
    assert.deepEqual(
      reconcileOutcome(
        obj({
          lastHandledReconcileAt: v,
          observedGeneration: 3,
          conditions: [ready('False', 'cannot list', 'SourceUnavailable')],
        }),
        v,
      ),
      { done: true, ready: false, message: 'cannot list' },
    );
    const stalled = [
      ready('False', 'bad spec', 'Invalid'),
      { ...ready('True', 'bad spec', 'Invalid'), type: 'Stalled' },
    ];
    assert.deepEqual(
      reconcileOutcome(obj({ lastHandledReconcileAt: v, observedGeneration: 3, conditions: stalled }), v),
      {
        done: true,
        ready: false,
        message: 'bad spec',
      },
    );
  });
});

describe('verbs: usage', () => {
  it('every verb has --help with its usage line and examples', async () => {
    for (const [verb, usage] of [
      ['get', /Usage: stackflux get clusterstacks\|releases\|addons \[-A\]/],
      ['reconcile', /Usage: stackflux reconcile clusterstack\|clusteraddon NAME .*--with-source/],
      ['suspend', /Usage: stackflux suspend clusterstack NAME/],
      ['resume', /Usage: stackflux resume clusterstack NAME/],
    ] as const) {
      const c = capture();
      assert.equal(await main([verb, '--help'], c.io), 0);
      assert.match(c.out(), usage);
      assert.match(c.out(), /Examples:\n {2}stackflux /);
    }
  });

  it('a missing kind or name, or a kind the verb does not take, is a usage error (exit 2)', async () => {
    const cases: [string[], RegExp][] = [
      [['get'], /a kind is required/],
      [['reconcile', 'clusterstack'], /ClusterStack name is required/],
      [['suspend', 'release', 'x'], /unknown kind "release": clusterstacks/],
      [['reconcile', 'csk', 'x', '--timeout', 'soon'], /--timeout soon is not a duration/],
    ];
    for (const [argv, message] of cases) {
      const c = capture();
      assert.equal(await main(argv, c.io), 2, argv.join(' '));
      assert.match(c.err(), message);
    }
  });
});
