import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ClusterStack } from '../../../controller/api/clusterstack.ts';
import type { ClusterStackRelease } from '../../../controller/api/clusterstackrelease.ts';
import type { Condition } from '../../../controller/api/meta.ts';
import {
  type ClusterStackInput,
  type ClusterUse,
  clusterUse,
  reconcileClusterStack,
  type SourceListing,
} from '../../../controller/reconcilers/clusterstack.ts';
import { notKeptOf, sieveTags } from '../../../controller/sources/listing.ts';

const now = new Date('2025-01-02T03:04:05.678Z');
const T = '2025-01-02T03:04:05Z';
const URL = 'https://git.example.com/stacks.git';

function stack(
  spec: Partial<ClusterStack['spec']> = {},
  meta: Partial<ClusterStack['metadata']> = {},
): ClusterStack {
  return {
    apiVersion: 'stackflux.io/v1alpha1',
    kind: 'ClusterStack',
    metadata: { name: 'ferrol', namespace: 'team', uid: 'csk-uid', generation: 1, ...meta },
    spec: {
      noProvider: true,
      provider: 'docker',
      name: 'ferrol',
      kubernetesVersion: '1.30',
      channel: 'stable',
      autoSubscribe: true,
      source: { git: { url: URL, secretRef: { name: 'git-creds' } }, path: 'stacks/ferrol' },
      ...spec,
    },
  };
}

function release(tag: string, ready: boolean | 'failed' | undefined): ClusterStackRelease {
  const conditions: Condition[] =
    ready === undefined
      ? []
      : [
          {
            type: 'Ready',
            status: ready === true ? 'True' : 'False',
            reason: ready === true ? 'Succeeded' : 'InvalidRelease',
            message:
              ready === true
                ? 'applied'
                : 'stack.yaml: kubernetesVersion "v1.31.2" does not match the tag\'s 1.30',
            lastTransitionTime: T,
          },
        ];
  return {
    apiVersion: 'stackflux.io/v1alpha1',
    kind: 'ClusterStackRelease',
    metadata: {
      name: tag,
      namespace: 'team',
      generation: 1,
      ownerReferences: [
        {
          apiVersion: 'stackflux.io/v1alpha1',
          kind: 'ClusterStack',
          name: 'ferrol',
          uid: 'csk-uid',
          controller: true,
        },
      ],
    },
    spec: {
      clusterStack: 'ferrol',
      tag,
      version: 'v?',
      clusterClass: tag,
      kubernetesVersion: '1.30',
      source: { url: URL },
    },
    status: { observedGeneration: 1, conditions },
  };
}

const ok = (tags: string[]): SourceListing => ({ ok: true, tags, listedAt: T });

function run(p: Partial<ClusterStackInput>): ReturnType<typeof reconcileClusterStack> {
  return reconcileClusterStack({
    clusterStack: stack(),
    listing: ok([]),
    releases: [],
    clusters: [],
    now,
    ...p,
  });
}

const names = (r: { apply: ClusterStackRelease[] }): string[] => r.apply.map((a) => a.metadata.name);
const cond = (r: ReturnType<typeof run>, type: string) => r.status.conditions?.find((c) => c.type === type);

const acceptance1Tags = [
  'docker-ferrol-1-30-v1',
  'docker-ferrol-1-30-v2',
  'docker-other-1-30-v9',
  'docker-ferrol-1-31-v5',
  'docker-ferrol-1-30-v2-broken',
  'docker-ferrol-1-30-vX',
  'docker-ferrol-1-30-v02',
  'v1.0.0',
];

describe('reconcileClusterStack', () => {
  it('acceptance 1: autoSubscribe → exactly the latest release; malformed tags counted', () => {
    const r = run({ listing: ok(acceptance1Tags) });
    assert.deepEqual(names(r), ['docker-ferrol-1-30-v2']);
    assert.deepEqual(r.delete, []);
    const [v2] = r.apply;
    assert.ok(v2);
    assert.deepEqual(v2.metadata, {
      name: 'docker-ferrol-1-30-v2',
      namespace: 'team',
      labels: {
        'app.kubernetes.io/managed-by': 'stackflux',
        'stackflux.io/clusterstack': 'ferrol',
        'stackflux.io/release': 'docker-ferrol-1-30-v2',
      },
      ownerReferences: [
        {
          apiVersion: 'stackflux.io/v1alpha1',
          kind: 'ClusterStack',
          name: 'ferrol',
          uid: 'csk-uid',
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    });
    assert.deepEqual(v2.spec, {
      clusterStack: 'ferrol',
      tag: 'docker-ferrol-1-30-v2',
      version: 'v2',
      clusterClass: 'docker-ferrol-1-30-v2',
      kubernetesVersion: '1.30',
      source: { url: URL, secretRef: { name: 'git-creds' }, path: 'stacks/ferrol' },
      interval: '5m',
      timeout: '5m',
    });
    assert.equal(r.status.source?.tags, 8);
    assert.equal(r.status.source?.matching, 2);
    assert.equal(r.status.source?.malformed, 3);
    assert.deepEqual(
      r.status.source?.malformedTags?.map((m) => m.tag),
      ['docker-ferrol-1-30-v02', 'docker-ferrol-1-30-v2-broken', 'docker-ferrol-1-30-vX'],
    );
    assert.equal(cond(r, 'SourceReady')?.status, 'True');
    assert.equal(cond(r, 'Ready')?.status, 'Unknown');
    assert.equal(cond(r, 'Reconciling')?.status, 'True');
    assert.equal(r.status.latestRelease, undefined, 'not Ready yet');
  });

  it('issue 31 F2: a sieved listing (release tags and look-alikes kept, the rest counted) reports the same counts', () => {
    const listed = [...acceptance1Tags, ...Array.from({ length: 1000 }, (_, i) => `build-${i}`)];
    const full = run({ listing: ok(listed) });
    const kept = sieveTags(listed.map((tag) => ({ tag })));
    assert.equal(kept.length, 7, 'v1.0.0 and the builds are not kept');
    const sieved = run({
      listing: { ok: true, tags: kept.map((t) => t.tag), notKept: notKeptOf(kept), listedAt: T },
    });
    assert.deepEqual(sieved.status.source, full.status.source);
    assert.deepEqual(names(sieved), names(full));
    assert.match(
      cond(sieved, 'SourceReady')?.message ?? '',
      /listed 1008 tags: 2 releases of this stack, 3 malformed \(1001 tags that are not release tags were counted, not kept\)/,
    );
  });

  it('acceptance 1: once v2 is Ready, the ClusterStack is Ready with latest v2', () => {
    const r = run({ listing: ok(acceptance1Tags), releases: [release('docker-ferrol-1-30-v2', true)] });
    assert.deepEqual(names(r), ['docker-ferrol-1-30-v2']);
    assert.equal(r.status.latestRelease, 'docker-ferrol-1-30-v2');
    assert.equal(r.status.usableVersions, 'v2');
    assert.equal(cond(r, 'Ready')?.status, 'True');
    assert.equal(cond(r, 'Reconciling'), undefined);
    assert.equal(r.status.observedGeneration, 1);
    assert.deepEqual(r.status.summary, [
      {
        name: 'docker-ferrol-1-30-v2',
        version: 'v2',
        ready: true,
        reason: 'Succeeded',
        message: 'applied',
        latest: true,
        pinned: false,
        inUse: false,
        clusters: 0,
      },
    ]);
  });

  it('acceptance 2: a new tag keeps the previous latest until the new one is Ready (no gap)', () => {
    const tags = ok(['docker-ferrol-1-30-v1', 'docker-ferrol-1-30-v2', 'docker-ferrol-1-30-v3']);
    const v2 = release('docker-ferrol-1-30-v2', true);
    const before = run({ listing: tags, releases: [v2] });
    assert.deepEqual(names(before), ['docker-ferrol-1-30-v2', 'docker-ferrol-1-30-v3']);
    assert.deepEqual(before.delete, []);
    assert.equal(before.status.latestRelease, 'docker-ferrol-1-30-v2');

    const progressing = run({ listing: tags, releases: [v2, release('docker-ferrol-1-30-v3', undefined)] });
    assert.deepEqual(progressing.delete, []);

    const after = run({ listing: tags, releases: [v2, release('docker-ferrol-1-30-v3', true)] });
    assert.deepEqual(names(after), ['docker-ferrol-1-30-v3']);
    assert.deepEqual(after.delete, ['docker-ferrol-1-30-v2']);
    assert.equal(after.status.latestRelease, 'docker-ferrol-1-30-v3');
    assert.equal(cond(after, 'Ready')?.status, 'True');
  });

  it('orders v10 after v9', () => {
    const r = run({ listing: ok(['docker-ferrol-1-30-v9', 'docker-ferrol-1-30-v10']) });
    assert.deepEqual(names(r), ['docker-ferrol-1-30-v10']);
  });

  it('acceptance 3: an in-use release stays; it is collected when the Cluster is gone', () => {
    const tags = ok(['docker-ferrol-1-30-v3', 'docker-ferrol-1-30-v4']);
    const releases = [release('docker-ferrol-1-30-v3', true), release('docker-ferrol-1-30-v4', true)];
    const clusters: ClusterUse[] = [{ name: 'prod', className: 'docker-ferrol-1-30-v3' }];
    const used = run({ listing: tags, releases, clusters });
    assert.deepEqual(names(used), ['docker-ferrol-1-30-v3', 'docker-ferrol-1-30-v4']);
    assert.deepEqual(used.delete, []);
    assert.deepEqual(
      used.status.summary?.map((s) => [s.name, s.inUse, s.clusters, s.latest]),
      [
        ['docker-ferrol-1-30-v3', true, 1, false],
        ['docker-ferrol-1-30-v4', false, 0, true],
      ],
    );
    assert.equal(used.status.usableVersions, 'v3, v4');

    const gone = run({ listing: tags, releases, clusters: [] });
    assert.deepEqual(names(gone), ['docker-ferrol-1-30-v4']);
    assert.deepEqual(gone.delete, ['docker-ferrol-1-30-v3']);
  });

  it('counts the Clusters of each release in a fleet of 30,000, others and other namespaces left out', () => {
    const tags = ok(['docker-ferrol-1-30-v3', 'docker-ferrol-1-30-v4']);
    const releases = [release('docker-ferrol-1-30-v3', true), release('docker-ferrol-1-30-v4', true)];
    const clusters: ClusterUse[] = Array.from({ length: 30_000 }, (_, i) => {
      const name = `c-${i}`;
      if (i % 3 === 0) return { name, className: 'docker-ferrol-1-30-v3' };
      if (i % 3 === 1) return { name, className: 'docker-ferrol-1-30-v4' };
      return i % 2 === 0
        ? { name, className: 'docker-other-1-30-v1' }
        : { name, className: 'docker-ferrol-1-30-v3', classNamespace: 'elsewhere' };
    });
    const r = run({ listing: tags, releases, clusters });
    assert.deepEqual(
      r.status.summary?.map((s) => [s.name, s.inUse, s.clusters]),
      [
        ['docker-ferrol-1-30-v3', true, 10_000],
        ['docker-ferrol-1-30-v4', true, 10_000],
      ],
    );
    assert.deepEqual(r.delete, []);
  });

  it('in use wins even when the tag disappeared from the repository', () => {
    const r = run({
      listing: ok(['docker-ferrol-1-30-v4']),
      releases: [release('docker-ferrol-1-30-v3', true), release('docker-ferrol-1-30-v4', true)],
      clusters: [{ name: 'prod', className: 'docker-ferrol-1-30-v3' }],
    });
    assert.deepEqual(names(r), ['docker-ferrol-1-30-v4']);
    assert.deepEqual(r.delete, []);
  });

  it('ignores Clusters of other stacks, versions, channels and namespaces', () => {
    const r = run({
      listing: ok(['docker-ferrol-1-30-v2']),
      clusters: [
        { name: 'a', className: 'docker-other-1-30-v1' },
        { name: 'b', className: 'docker-ferrol-1-31-v1' },
        { name: 'c', className: 'my-own-class' },
        { name: 'd', className: 'docker-ferrol-1-30-v1', classNamespace: 'elsewhere' },
        { name: 'e', className: 'docker-ferrol-1-30-v0-sha.abc' },
      ],
    });
    assert.deepEqual(names(r), ['docker-ferrol-1-30-v2']);
  });

  // Issue 11 defect 2: garbage collection is fail-closed.
  it('deletes nothing while not every Cluster can be seen, and says why', () => {
    const tags = ok(['docker-ferrol-1-30-v3', 'docker-ferrol-1-30-v4']);
    const releases = [release('docker-ferrol-1-30-v3', true), release('docker-ferrol-1-30-v4', true)];
    const r = run({
      listing: tags,
      releases,
      clusters: [],
      inUseUnknown: { reason: 'ClusterAPINotServed', message: 'no Cluster kind served' },
    });
    assert.deepEqual(r.delete, [], 'v3 might be in use by a Cluster the controller cannot see');
    const gc = cond(r, 'GarbageCollection');
    assert.equal(gc?.status, 'False');
    assert.equal(gc?.reason, 'ClusterAPINotServed');
    assert.match(gc?.message ?? '', /no Cluster kind served; kept until then: docker-ferrol-1-30-v3/);
    assert.deepEqual(
      r.status.summary?.map((s) => s.name),
      ['docker-ferrol-1-30-v3', 'docker-ferrol-1-30-v4'],
    );
    assert.equal(cond(r, 'Ready')?.status, 'True', 'releasing goes on; only deletion waits');
    // Complete again: v3 is collected and the condition goes.
    const done = run({
      listing: tags,
      releases,
      clusters: [],
      clusterStack: { ...stack(), status: r.status },
    });
    assert.deepEqual(done.delete, ['docker-ferrol-1-30-v3']);
    assert.equal(cond(done, 'GarbageCollection'), undefined);
  });

  it('a changed kubernetesVersion or channel never deletes a release a Cluster uses; it stays in the summary', () => {
    const releases = [release('docker-ferrol-1-30-v3', true), release('docker-ferrol-1-30-v4', true)];
    const clusters: ClusterUse[] = [{ name: 'prod', className: 'docker-ferrol-1-30-v3' }];
    const tags = ok([
      'docker-ferrol-1-30-v3',
      'docker-ferrol-1-30-v4',
      'docker-ferrol-1-31-v1',
      'docker-ferrol-1-30-v0-rc-1',
    ]);
    for (const spec of [{ kubernetesVersion: '1.31' }, { channel: 'custom' as const }]) {
      const r = run({ clusterStack: stack(spec), listing: tags, releases, clusters });
      assert.deepEqual(r.delete, ['docker-ferrol-1-30-v4'], JSON.stringify(spec));
      const kept = r.status.summary?.find((s) => s.name === 'docker-ferrol-1-30-v3');
      assert.equal(kept?.inUse, true, JSON.stringify(spec));
      assert.equal(kept?.clusters, 1);
    }
  });

  it('custom channel: the latest release is the tag of the newest commit (listing times)', () => {
    const listing: SourceListing = {
      ok: true,
      tags: ['docker-ferrol-1-30-v0-sha-f00dbab', 'docker-ferrol-1-30-v0-sha-0c0ffee'],
      times: { 'docker-ferrol-1-30-v0-sha-f00dbab': 100, 'docker-ferrol-1-30-v0-sha-0c0ffee': 200 },
      listedAt: T,
    };
    const r = run({ clusterStack: stack({ channel: 'custom' }), listing });
    assert.deepEqual(names(r), ['docker-ferrol-1-30-v0-sha-0c0ffee']);
    assert.equal(r.status.summary?.find((s) => s.latest)?.name, 'docker-ferrol-1-30-v0-sha-0c0ffee');
  });

  // Issue 11 defect 5: a least-privilege ServiceAccount for cluster-class/.
  it('passes spec.serviceAccountName on to its releases', () => {
    const r = run({
      clusterStack: stack({ serviceAccountName: 'release-applier' }),
      listing: ok(['docker-ferrol-1-30-v1']),
    });
    assert.equal(r.apply[0]?.spec.serviceAccountName, 'release-applier');
    assert.equal(
      run({ listing: ok(['docker-ferrol-1-30-v1']) }).apply[0]?.spec.serviceAccountName,
      undefined,
    );
  });

  it('acceptance 4: pinned versions without autoSubscribe → only those; others deleted', () => {
    const r = run({
      clusterStack: stack({ versions: ['v1'], autoSubscribe: false }),
      listing: ok(['docker-ferrol-1-30-v1', 'docker-ferrol-1-30-v2']),
      releases: [release('docker-ferrol-1-30-v2', true)],
    });
    assert.deepEqual(names(r), ['docker-ferrol-1-30-v1']);
    assert.deepEqual(r.delete, ['docker-ferrol-1-30-v2']);
    assert.equal(r.status.summary?.find((s) => s.name === 'docker-ferrol-1-30-v1')?.pinned, true);
  });

  it('pinned ∪ latest', () => {
    const r = run({
      clusterStack: stack({ versions: ['v1'] }),
      listing: ok(['docker-ferrol-1-30-v1', 'docker-ferrol-1-30-v2', 'docker-ferrol-1-30-v3']),
    });
    assert.deepEqual(names(r), ['docker-ferrol-1-30-v1', 'docker-ferrol-1-30-v3']);
  });

  it('a pinned version without a tag is reported, the others proceed', () => {
    const r = run({
      clusterStack: stack({ versions: ['v1', 'v7'], autoSubscribe: false }),
      listing: ok(['docker-ferrol-1-30-v1']),
    });
    assert.deepEqual(names(r), ['docker-ferrol-1-30-v1']);
    assert.equal(cond(r, 'Ready')?.status, 'False');
    assert.equal(cond(r, 'Ready')?.reason, 'VersionNotFound');
    assert.match(cond(r, 'Ready')?.message ?? '', /v7 not found .*docker-ferrol-1-30-v7/);
  });

  it('custom channel: pinned and in-use custom releases, dot-form ClusterClass', () => {
    const tags = ok([
      'docker-ferrol-1-30-v2',
      'docker-ferrol-1-30-v0-sha-abc1234',
      'docker-ferrol-1-30-v0-sha-def5678',
    ]);
    const r = run({
      clusterStack: stack({ channel: 'custom', autoSubscribe: false, versions: ['v0-sha.def5678'] }),
      listing: tags,
      clusters: [{ name: 'dev', className: 'docker-ferrol-1-30-v0-sha.abc1234' }],
    });
    assert.deepEqual(names(r), ['docker-ferrol-1-30-v0-sha-abc1234', 'docker-ferrol-1-30-v0-sha-def5678']);
    assert.equal(r.apply[0]?.spec.clusterClass, 'docker-ferrol-1-30-v0-sha.abc1234');
    assert.equal(r.apply[0]?.spec.version, 'v0-sha.abc1234');
  });

  it('acceptance 6: source unreachable → condition says so, nothing deleted, nothing changed', () => {
    const releases = [release('docker-ferrol-1-30-v2', true), release('docker-ferrol-1-30-v3', true)];
    const r = run({
      listing: { ok: false, reason: 'ListFailed', message: 'connection refused', lastListedAt: T },
      releases,
    });
    assert.deepEqual(r.apply, []);
    assert.deepEqual(r.delete, []);
    assert.equal(cond(r, 'SourceReady')?.status, 'False');
    assert.equal(cond(r, 'SourceReady')?.reason, 'ListFailed');
    assert.equal(cond(r, 'Ready')?.status, 'False');
    assert.equal(cond(r, 'Ready')?.reason, 'SourceUnavailable');
    assert.match(cond(r, 'Ready')?.message ?? '', /connection refused; existing releases are kept/);
    assert.equal(r.status.source?.lastListedTime, T);
    assert.equal(r.status.latestRelease, 'docker-ferrol-1-30-v3');
  });

  it('acceptance 6: comes back → reconciliation resumes', () => {
    const down = run({
      listing: { ok: false, reason: 'ListFailed', message: 'connection refused' },
      releases: [release('docker-ferrol-1-30-v2', true)],
    });
    const up = run({
      clusterStack: { ...stack(), status: down.status },
      listing: ok(['docker-ferrol-1-30-v2']),
      releases: [release('docker-ferrol-1-30-v2', true)],
    });
    assert.deepEqual(names(up), ['docker-ferrol-1-30-v2']);
    assert.equal(cond(up, 'SourceReady')?.status, 'True');
    assert.equal(cond(up, 'Ready')?.status, 'True');
  });

  it('not listed yet → nothing deleted, Reconciling', () => {
    const r = run({ listing: undefined, releases: [release('docker-ferrol-1-30-v2', true)] });
    assert.deepEqual(r.apply, []);
    assert.deepEqual(r.delete, []);
    assert.equal(cond(r, 'SourceReady')?.status, 'Unknown');
    assert.equal(cond(r, 'Reconciling')?.status, 'True');
  });

  it('acceptance 7: an invalid release is Ready=False and named; others unaffected', () => {
    const r = run({
      clusterStack: stack({ versions: ['v1'] }),
      listing: ok(['docker-ferrol-1-30-v1', 'docker-ferrol-1-30-v2']),
      releases: [release('docker-ferrol-1-30-v1', true), release('docker-ferrol-1-30-v2', 'failed')],
    });
    assert.deepEqual(names(r), ['docker-ferrol-1-30-v1', 'docker-ferrol-1-30-v2']);
    assert.deepEqual(r.delete, []);
    assert.equal(cond(r, 'Ready')?.reason, 'ReleaseNotReady');
    assert.match(cond(r, 'Ready')?.message ?? '', /docker-ferrol-1-30-v2: stack.yaml: kubernetesVersion/);
    assert.equal(r.status.usableVersions, 'v1');
  });

  it('no matching release → NoReleaseFound', () => {
    const r = run({ listing: ok(['docker-other-1-30-v1']) });
    assert.deepEqual(r.apply, []);
    assert.equal(cond(r, 'Ready')?.reason, 'NoReleaseFound');
  });

  it('a deleting ClusterStack deletes unused releases and keeps used ones', () => {
    const r = run({
      clusterStack: stack({}, { deletionTimestamp: T }),
      listing: ok(['docker-ferrol-1-30-v2', 'docker-ferrol-1-30-v3']),
      releases: [release('docker-ferrol-1-30-v2', true), release('docker-ferrol-1-30-v3', true)],
      clusters: [{ name: 'prod', className: 'docker-ferrol-1-30-v2' }],
    });
    assert.deepEqual(r.apply, []);
    assert.deepEqual(r.delete, ['docker-ferrol-1-30-v3']);
    assert.match(cond(r, 'Ready')?.message ?? '', /kept until their Clusters move: docker-ferrol-1-30-v2/);
  });

  it('suspend → no changes', () => {
    const r = run({
      clusterStack: stack({ suspend: true }),
      listing: ok(['docker-ferrol-1-30-v3']),
      releases: [release('docker-ferrol-1-30-v2', true)],
    });
    assert.deepEqual(r.apply, []);
    assert.deepEqual(r.delete, []);
    assert.equal(cond(r, 'Ready')?.reason, 'Suspended');
  });

  it('suspend keeps what the last listing returned (SourceReady, source counts): nothing is listed', () => {
    const before = run({ listing: ok(['docker-ferrol-1-30-v2', 'docker-ferrol-1-30-vX']) });
    const suspended = stack({ suspend: true }, { generation: 2 });
    suspended.status = before.status;
    const r = run({
      clusterStack: suspended,
      listing: undefined,
      releases: [release('docker-ferrol-1-30-v2', true)],
    });
    assert.deepEqual(r.status.source, before.status.source);
    assert.deepEqual(cond(r, 'SourceReady'), cond(before, 'SourceReady'));
    assert.equal(cond(r, 'Ready')?.reason, 'Suspended');
    assert.equal(cond(r, 'Ready')?.observedGeneration, 2);
    assert.equal(r.status.observedGeneration, 2);
    assert.match(cond(r, 'Ready')?.message ?? '', /stackflux resume clusterstack ferrol -n team/);
  });

  it('acknowledges reconcile.fluxcd.io/requestedAt in status.lastHandledReconcileAt (Flux meta.ReconcileRequestStatus)', () => {
    const requested = stack(
      {},
      { annotations: { 'reconcile.fluxcd.io/requestedAt': '2025-01-02T03:04:00.123456789Z' } },
    );
    const r = run({ clusterStack: requested, listing: ok(['docker-ferrol-1-30-v2']) });
    assert.equal(r.status.lastHandledReconcileAt, '2025-01-02T03:04:00.123456789Z');
    // Without an annotation there is nothing to acknowledge; a previous value is kept.
    assert.equal(run({}).status.lastHandledReconcileAt, undefined);
    const handled = stack();
    handled.status = { lastHandledReconcileAt: 'earlier' };
    assert.equal(run({ clusterStack: handled }).status.lastHandledReconcileAt, 'earlier');
  });

  it('a suspended ClusterStack does not acknowledge a reconcile request (as Flux skips suspended objects)', () => {
    const cs = stack({ suspend: true }, { annotations: { 'reconcile.fluxcd.io/requestedAt': 'new' } });
    cs.status = { lastHandledReconcileAt: 'old' };
    const r = run({ clusterStack: cs, listing: undefined });
    assert.equal(r.status.lastHandledReconcileAt, 'old');
  });

  it('leaves releases of other ClusterStacks alone', () => {
    const foreign = release('docker-ferrol-1-30-v1', true);
    foreign.metadata.ownerReferences = [
      {
        apiVersion: 'stackflux.io/v1alpha1',
        kind: 'ClusterStack',
        name: 'other',
        uid: 'x',
        controller: true,
      },
    ];
    const r = run({ listing: ok(['docker-ferrol-1-30-v2']), releases: [foreign] });
    assert.deepEqual(r.delete, []);
  });

  it('github sources use the https clone URL', () => {
    const r = run({
      clusterStack: stack({ source: { github: { owner: 'acme', repo: 'stacks' } } }),
      listing: ok(['docker-ferrol-1-30-v2']),
    });
    assert.deepEqual(r.apply[0]?.spec.source, { url: 'https://github.com/acme/stacks.git' });
  });

  it('is a fixed point: reconciling again over its own status changes nothing', () => {
    const input = { listing: ok(acceptance1Tags), releases: [release('docker-ferrol-1-30-v2', true)] };
    const first = run(input);
    const second = run({
      ...input,
      clusterStack: { ...stack(), status: first.status },
      now: new Date('2030-01-01T00:00:00Z'),
    });
    assert.deepEqual(second, first);
  });

  it('is deterministic regardless of input order', () => {
    const releases = [release('docker-ferrol-1-30-v3', true), release('docker-ferrol-1-30-v4', undefined)];
    const clusters = [
      { name: 'b', className: 'docker-ferrol-1-30-v3' },
      { name: 'a', className: 'docker-ferrol-1-30-v3' },
    ];
    const tags = ['docker-ferrol-1-30-v4', 'docker-ferrol-1-30-v3', 'x'];
    const a = run({ listing: ok(tags), releases, clusters });
    const b = run({
      listing: ok([...tags].reverse()),
      releases: [...releases].reverse(),
      clusters: [...clusters].reverse(),
    });
    assert.deepEqual(a, b);
  });
});

describe('clusterUse', () => {
  it('reads v1beta2 classRef', () => {
    assert.deepEqual(
      clusterUse({
        metadata: { name: 'c' },
        spec: { topology: { classRef: { name: 'docker-ferrol-1-30-v2' } } },
      }),
      { name: 'c', className: 'docker-ferrol-1-30-v2' },
    );
    assert.deepEqual(
      clusterUse({
        metadata: { name: 'c' },
        spec: { topology: { classRef: { name: 'k', namespace: 'ns' } } },
      }),
      { name: 'c', className: 'k', classNamespace: 'ns' },
    );
  });

  it('reads v1beta1 class', () => {
    assert.deepEqual(
      clusterUse({ metadata: { name: 'c' }, spec: { topology: { class: 'docker-ferrol-1-30-v2' } } }),
      {
        name: 'c',
        className: 'docker-ferrol-1-30-v2',
      },
    );
  });

  it('returns undefined without a topology', () => {
    assert.equal(clusterUse({ metadata: { name: 'c' }, spec: {} }), undefined);
    assert.equal(clusterUse({ metadata: { name: 'c' }, spec: { topology: {} } }), undefined);
    assert.equal(clusterUse(null), undefined);
    assert.equal(clusterUse({ spec: { topology: { class: 'x' } } }), undefined);
  });
});
