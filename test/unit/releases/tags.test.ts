import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  classifyTags,
  clusterClassNameForTag,
  compareNatural,
  compareReleaseTags,
  formatReleaseTag,
  latestRelease,
  parseReleaseTag,
  parseStackVersion,
  type ReleaseSelector,
  type ReleaseTag,
  releaseOrder,
  tagForClusterClassName,
  toDashForm,
} from '../../../controller/releases/tags.ts';

function parsed(tag: string): ReleaseTag {
  const r = parseReleaseTag(tag);
  if (!r.ok) throw new Error(`${tag}: ${r.reason}`);
  return r.value;
}

function reason(tag: string): string {
  const r = parseReleaseTag(tag);
  if (r.ok) throw new Error(`${tag} parsed but should not`);
  return r.reason;
}

const stable: ReleaseSelector = {
  provider: 'docker',
  name: 'ferrol',
  kubernetesVersion: '1.30',
  channel: 'stable',
};
const custom: ReleaseSelector = { ...stable, channel: 'custom' };

describe('parseReleaseTag', () => {
  it('parses a stable tag', () => {
    assert.deepEqual(parsed('docker-ferrol-1-30-v3'), {
      tag: 'docker-ferrol-1-30-v3',
      provider: 'docker',
      name: 'ferrol',
      kubernetesMajor: 1,
      kubernetesMinor: 30,
      kubernetesVersion: '1.30',
      channel: 'stable',
      major: 3,
      version: 'v3',
      clusterClassName: 'docker-ferrol-1-30-v3',
    });
  });

  it('parses a custom channel tag and uses the dot form for the ClusterClass', () => {
    assert.deepEqual(parsed('docker-ferrol-1-30-v0-sha-abc1234'), {
      tag: 'docker-ferrol-1-30-v0-sha-abc1234',
      provider: 'docker',
      name: 'ferrol',
      kubernetesMajor: 1,
      kubernetesMinor: 30,
      kubernetesVersion: '1.30',
      channel: 'custom',
      major: 0,
      custom: { channel: 'sha', suffix: 'abc1234' },
      version: 'v0-sha.abc1234',
      clusterClassName: 'docker-ferrol-1-30-v0-sha.abc1234',
    });
  });

  it('parses multi-digit numbers', () => {
    const t = parsed('openstack-scs-1-9-v123');
    assert.equal(t.kubernetesVersion, '1.9');
    assert.equal(t.major, 123);
    assert.equal(parsed('a-b-2-0-v1').kubernetesVersion, '2.0');
  });

  const bad: [string, RegExp][] = [
    ['docker-ferrol-1-30', /4 dash-separated parts/],
    ['docker-ferrol-1-30-v3-rc1', /6 dash-separated parts/],
    ['docker-ferrol-1-30-v0-sha-abc-def', /8 dash-separated parts/],
    ['docker-ferrol-1.30-v3-x', /Kubernetes major version "1.30"/],
    ['docker-ferrol-1-30-3', /version "3" is not v<N>/],
    ['docker-ferrol-1-30-v', /version "v" is not v<N>/],
    ['docker-ferrol-1-30-vx', /version "vx"/],
    ['docker-ferrol-1-30-v01', /version "v01"/],
    ['docker-ferrol-1-30-V3', /version "V3"/],
    ['docker-ferrol-01-30-v3', /Kubernetes major version "01"/],
    ['docker-ferrol-1-030-v3', /Kubernetes minor version "030"/],
    ['docker-ferrol-0-30-v3', /major version 0/],
    ['docker-ferrol-1-x-v3', /Kubernetes minor version "x"/],
    ['Docker-ferrol-1-30-v3', /provider "Docker"/],
    ['docker-fer_rol-1-30-v3', /name "fer_rol"/],
    ['-ferrol-1-30-v3', /provider is empty/],
    ['docker--1-30-v3', /name is empty/],
    ['docker-ferrol-1-30-v0', /v0 is only valid with a custom channel/],
    ['docker-ferrol-1-30-v1-sha-abc1234', /custom channel tag must use v0, not v1/],
    ['docker-ferrol-1-30-v0-sha-ABC1234', /channel suffix "ABC1234"/],
    ['docker-ferrol-1-30-v0--abc1234', /channel is empty/],
    ['docker-ferrol-1-30-v0-sha-', /channel suffix is empty/],
    ['docker-ferrol-1-30-v0-sha.abc-1234', /channel "sha.abc"/],
    [`docker-${'x'.repeat(60)}-1-30-v1`, /at most 63/],
    ['', /1 dash-separated parts/],
  ];
  for (const [tag, re] of bad) {
    it(`rejects ${JSON.stringify(tag)}`, () => assert.match(reason(tag), re));
  }

  it('accepts a tag of exactly 63 characters', () => {
    const tag = `d-${'n'.repeat(63 - 'd--1-30-v1'.length)}-1-30-v1`;
    assert.equal(tag.length, 63);
    assert.equal(parsed(tag).tag, tag);
  });
});

describe('tag ↔ ClusterClass name', () => {
  it('maps stable names to themselves', () => {
    assert.equal(clusterClassNameForTag('docker-ferrol-1-30-v3'), 'docker-ferrol-1-30-v3');
    assert.equal(tagForClusterClassName('docker-ferrol-1-30-v3')?.tag, 'docker-ferrol-1-30-v3');
  });

  it('maps custom suffix dash ↔ dot', () => {
    assert.equal(
      clusterClassNameForTag('docker-ferrol-1-30-v0-sha-abc1234'),
      'docker-ferrol-1-30-v0-sha.abc1234',
    );
    assert.equal(
      tagForClusterClassName('docker-ferrol-1-30-v0-sha.abc1234')?.tag,
      'docker-ferrol-1-30-v0-sha-abc1234',
    );
  });

  it('round-trips', () => {
    for (const tag of ['docker-ferrol-1-30-v3', 'docker-ferrol-1-30-v0-sha-abc1234', 'p-n-1-9-v10']) {
      const cc = clusterClassNameForTag(tag);
      assert.ok(cc !== undefined);
      assert.equal(tagForClusterClassName(cc)?.tag, tag);
    }
  });

  it('does not treat other names as release classes', () => {
    assert.equal(clusterClassNameForTag('v1.2.3'), undefined);
    assert.equal(tagForClusterClassName('quick-start'), undefined);
    assert.equal(
      tagForClusterClassName('docker-ferrol-1-30-v0-sha-abc1234'),
      undefined,
      'dash form is not a class',
    );
    assert.equal(tagForClusterClassName('docker-ferrol-1-30-v3.1'), undefined);
    assert.equal(tagForClusterClassName('docker-ferrol-1-30-v1-sha.abc'), undefined);
  });

  it('formats tags from stack versions in both forms', () => {
    assert.equal(formatReleaseTag('docker', 'ferrol', '1.30', 'v3'), 'docker-ferrol-1-30-v3');
    assert.equal(
      formatReleaseTag('docker', 'ferrol', '1.30', 'v0-sha.abc1234'),
      'docker-ferrol-1-30-v0-sha-abc1234',
    );
    assert.equal(
      formatReleaseTag('docker', 'ferrol', '1.30', 'v0-sha-abc1234'),
      'docker-ferrol-1-30-v0-sha-abc1234',
    );
    assert.equal(toDashForm('v10'), 'v10');
  });

  it('parses stack versions', () => {
    assert.deepEqual(parseStackVersion('v3'), { ok: true, value: { channel: 'stable', major: 3 } });
    assert.deepEqual(parseStackVersion('v0-sha.abc'), {
      ok: true,
      value: { channel: 'custom', major: 0, custom: { channel: 'sha', suffix: 'abc' } },
    });
    assert.deepEqual(parseStackVersion('v0-sha-abc'), parseStackVersion('v0-sha.abc'));
    assert.equal(parseStackVersion('v0').ok, false);
    assert.equal(parseStackVersion('v2-sha.abc').ok, false);
    assert.equal(parseStackVersion('3').ok, false);
  });
});

describe('ordering', () => {
  it('orders stable versions numerically (v10 > v9 > v2)', () => {
    const tags = [
      'docker-ferrol-1-30-v10',
      'docker-ferrol-1-30-v2',
      'docker-ferrol-1-30-v9',
      'docker-ferrol-1-30-v1',
    ];
    const sorted = tags.map(parsed).sort(compareReleaseTags);
    assert.deepEqual(
      sorted.map((t) => t.version),
      ['v1', 'v2', 'v9', 'v10'],
    );
  });

  it('orders custom suffixes numerically when numeric, else by string', () => {
    const sorted = [
      'docker-ferrol-1-30-v0-rc-10',
      'docker-ferrol-1-30-v0-rc-9',
      'docker-ferrol-1-30-v0-sha-bbb',
      'docker-ferrol-1-30-v0-sha-aaa',
    ]
      .map(parsed)
      .sort(compareReleaseTags);
    assert.deepEqual(
      sorted.map((t) => t.version),
      ['v0-rc.9', 'v0-rc.10', 'v0-sha.aaa', 'v0-sha.bbb'],
    );
  });

  it('is a total order that is stable across input order', () => {
    const tags = ['docker-ferrol-1-30-v0-sha-abc', 'docker-ferrol-1-30-v2', 'docker-ferrol-1-30-v1'].map(
      parsed,
    );
    const a = [...tags].sort(compareReleaseTags).map((t) => t.tag);
    const b = [...tags]
      .reverse()
      .sort(compareReleaseTags)
      .map((t) => t.tag);
    assert.deepEqual(a, b);
    assert.deepEqual(a, ['docker-ferrol-1-30-v0-sha-abc', 'docker-ferrol-1-30-v1', 'docker-ferrol-1-30-v2']);
  });
});

// Issue 11 defect 6: custom channel ordering.
describe('custom channel ordering', () => {
  const sign = (n: number) => Math.sign(n);
  const assertTotalOrder = (cmp: (a: ReleaseTag, b: ReleaseTag) => number, tags: ReleaseTag[]) => {
    for (const a of tags) {
      assert.equal(cmp(a, a), 0, `${a.tag} = itself`);
      for (const b of tags) {
        assert.equal(sign(cmp(a, b)) + sign(cmp(b, a)), 0, `antisymmetric: ${a.tag} ${b.tag}`);
        for (const c of tags) {
          if (cmp(a, b) < 0 && cmp(b, c) < 0)
            assert.ok(cmp(a, c) < 0, `transitive: ${a.tag} < ${b.tag} < ${c.tag}`);
        }
      }
    }
  };

  it('orders rc-9 < rc-10 < rc-10a, transitively (a total order)', () => {
    const tags = ['rc-10a', 'rc-9', 'rc-10', 'rc-9b', 'rc-010', 'sha-f00dbab', 'sha-0c0ffee'].map((s) =>
      parsed(`docker-ferrol-1-30-v0-${s}`),
    );
    assertTotalOrder(compareReleaseTags, tags);
    const rc = tags.filter((t) => t.custom?.channel === 'rc').sort(compareReleaseTags);
    assert.deepEqual(
      rc.map((t) => t.custom?.suffix),
      ['9', '9b', '010', '10', '10a'],
    );
    assert.ok(compareNatural('9', '10a') < 0, 'rc-9 < rc-10a');
  });

  it('latest of a custom channel is the newest commit, not the largest string', () => {
    const times = {
      'docker-ferrol-1-30-v0-sha-f00dbab': 1_700_000_000,
      'docker-ferrol-1-30-v0-sha-0c0ffee': 1_700_000_500,
    };
    const r = classifyTags(Object.keys(times), custom, times);
    assert.equal(latestRelease(r)?.tag, 'docker-ferrol-1-30-v0-sha-0c0ffee');
    // Without times it is the channel/suffix order (deterministic, not by time).
    assert.equal(
      latestRelease(classifyTags(Object.keys(times), custom))?.tag,
      'docker-ferrol-1-30-v0-sha-f00dbab',
    );
  });

  it('with times: a total order; equal times by channel and suffix; unknown times first', () => {
    const times = new Map([
      ['docker-ferrol-1-30-v0-rc-10a', 300],
      ['docker-ferrol-1-30-v0-rc-9', 300],
      ['docker-ferrol-1-30-v0-sha-aaa', 100],
      ['docker-ferrol-1-30-v0-rc-10', 200],
    ]);
    const tags = [...times.keys(), 'docker-ferrol-1-30-v0-zzz-1', 'docker-ferrol-1-30-v2'].map(parsed);
    const order = releaseOrder(times);
    assertTotalOrder(order, tags);
    const sorted = (list: ReleaseTag[]) => [...list].sort(order).map((t) => t.tag);
    assert.deepEqual(sorted(tags), [
      'docker-ferrol-1-30-v0-zzz-1',
      'docker-ferrol-1-30-v0-sha-aaa',
      'docker-ferrol-1-30-v0-rc-10',
      'docker-ferrol-1-30-v0-rc-9',
      'docker-ferrol-1-30-v0-rc-10a',
      'docker-ferrol-1-30-v2',
    ]);
    assert.deepEqual(sorted([...tags].reverse()), sorted(tags));
  });
});

describe('classifyTags', () => {
  // Acceptance 1: v1 and v2 of one stack, another stack, another Kubernetes version, look-alikes.
  const repoTags = [
    'docker-ferrol-1-30-v2',
    'docker-ferrol-1-30-v1',
    'docker-ferrol-1-30-v10',
    'docker-other-1-30-v5',
    'openstack-ferrol-1-30-v1',
    'docker-ferrol-1-31-v7',
    'docker-ferrol-1-29-v1',
    'docker-ferrol-1-30-v0-sha-abc1234',
    'docker-ferrol-1-30-v3-broken',
    'docker-ferrol-1-30-vX',
    'docker-ferrol-1.30-v4',
    'docker-ferrol-1-30-v05',
    'docker-ferrol-1-31-vbad',
    'docker-ferrolx-1-30-v1',
    'v1.0.0',
    'latest',
    'docker-ferrol-1-30-v2',
  ];

  it('returns this stack’s stable releases in numeric order, ignored and malformed tags', () => {
    const r = classifyTags(repoTags, stable);
    assert.deepEqual(
      r.releases.map((t) => t.tag),
      ['docker-ferrol-1-30-v1', 'docker-ferrol-1-30-v2', 'docker-ferrol-1-30-v10'],
    );
    assert.equal(latestRelease(r)?.tag, 'docker-ferrol-1-30-v10');
    assert.deepEqual(r.ignored, [
      'docker-ferrol-1-29-v1',
      'docker-ferrol-1-30-v0-sha-abc1234',
      'docker-ferrol-1-31-v7',
      'docker-ferrol-1-31-vbad',
      'docker-ferrolx-1-30-v1',
      'docker-other-1-30-v5',
      'latest',
      'openstack-ferrol-1-30-v1',
      'v1.0.0',
    ]);
    assert.deepEqual(
      r.malformed.map((m) => m.tag),
      [
        'docker-ferrol-1-30-v05',
        'docker-ferrol-1-30-v3-broken',
        'docker-ferrol-1-30-vX',
        'docker-ferrol-1.30-v4',
      ],
    );
    for (const m of r.malformed) assert.ok(m.reason.length > 0);
  });

  it('selects the custom channel', () => {
    const r = classifyTags(repoTags, custom);
    assert.deepEqual(
      r.releases.map((t) => t.tag),
      ['docker-ferrol-1-30-v0-sha-abc1234'],
    );
    assert.ok(r.ignored.includes('docker-ferrol-1-30-v2'));
    assert.equal(r.malformed.length, 4);
  });

  it('selects another Kubernetes version', () => {
    const r = classifyTags(repoTags, { ...stable, kubernetesVersion: '1.31' });
    assert.deepEqual(
      r.releases.map((t) => t.tag),
      ['docker-ferrol-1-31-v7'],
    );
    assert.deepEqual(
      r.malformed.map((m) => m.tag),
      ['docker-ferrol-1-31-vbad', 'docker-ferrol-1.30-v4'],
    );
  });

  it('handles an empty list and a list with only unrelated tags', () => {
    assert.deepEqual(classifyTags([], stable), { releases: [], ignored: [], malformed: [] });
    const r = classifyTags(['main', 'v2'], stable);
    assert.equal(r.releases.length, 0);
    assert.equal(latestRelease(r), undefined);
    assert.deepEqual(r.ignored, ['main', 'v2']);
  });

  it('reports a look-alike with a dash in the name as malformed', () => {
    const r = classifyTags(['docker-ferrol-extra-1-30-v1'], stable);
    assert.equal(r.malformed.length, 1);
  });

  it('is deterministic regardless of input order', () => {
    assert.deepEqual(classifyTags([...repoTags].reverse(), stable), classifyTags(repoTags, stable));
  });
});
