// The pure half of `helm dependency update` (controller/releases/chartdeps.ts, helmsemver.ts):
// Masterminds semver constraints as its documentation states them, when Helm updates at all,
// which archives it drops, what it refuses, and IndexFile.Get's pick. The versions Helm actually
// picks are checked against the real helm CLI in test/integration/sources/chart-dependencies.test.ts.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { ReleaseTree } from '../../../controller/api/release.ts';
import {
  archiveChartName,
  chartArchiveUrl,
  chartIndexUrl,
  dependencyUpdateOf,
  pickIndexEntry,
} from '../../../controller/releases/chartdeps.ts';
import {
  helmConstraintAllows,
  parseHelmConstraint,
  parseHelmVersion,
} from '../../../controller/releases/helmsemver.ts';
import { releaseTree } from '../../../controller/releases/tree.ts';

const ROOT = join(import.meta.dirname, '..', '..', '..');
const CNI_CONFIG = readFileSync(
  join(ROOT, 'stacks', 'docker-csoferrol-1-30', 'cluster-addon', 'cni', 'charts', 'cni-config-0.1.0.tgz'),
);

function allows(constraint: string, version: string): boolean {
  const c = parseHelmConstraint(constraint);
  assert.ok(c.ok, constraint);
  const v = parseHelmVersion(version);
  assert.ok(v, version);
  return helmConstraintAllows(c.value, v);
}

describe('Helm version constraints (Masterminds semver v3)', () => {
  it('tilde, caret, x ranges, hyphen ranges, comma AND, || OR', () => {
    assert.deepEqual(
      ['1.2.3', '1.2.9', '1.3.0'].map((v) => allows('~1.2.3', v)),
      [true, true, false],
    );
    assert.deepEqual(
      ['1.2.3', '1.9.0', '2.0.0'].map((v) => allows('^1.2.3', v)),
      [true, true, false],
    );
    assert.deepEqual(
      ['0.2.3', '0.2.9', '0.3.0'].map((v) => allows('^0.2.3', v)),
      [true, true, false],
    );
    assert.deepEqual(
      ['1.2.0', '1.2.77', '1.3.0'].map((v) => allows('1.2.x', v)),
      [true, true, false],
    );
    assert.deepEqual(
      ['1.2.0', '1.4.5', '1.4.6'].map((v) => allows('1.2 - 1.4.5', v)),
      [true, true, false],
    );
    assert.deepEqual(
      ['1.1.9', '1.2.0', '3.0.0'].map((v) => allows('>= 1.2, < 3.0.0', v)),
      [false, true, false],
    );
    assert.deepEqual(
      ['2.5.0', '4.2.3'].map((v) => allows('>= 1.2 < 2.0.0 || >= 4.2.3', v)),
      [false, true],
    );
    assert.deepEqual(
      ['11.1.0', '12.0.0'].map((v) => allows('>11', v)),
      [false, true],
    );
  });

  it('a prerelease matches only a constraint (group) that names one', () => {
    assert.equal(allows('>=1.2.0', '1.3.0-rc.1'), false);
    assert.equal(allows('*', '1.3.0-rc.1'), false);
    assert.equal(allows('>=1.2.0-0', '1.3.0-rc.1'), true);
    assert.equal(allows('>=1.2.0-0 || <1', '1.3.0-rc.1'), true);
    assert.equal(allows('<1 || >=1.2.0', '1.3.0-rc.1'), false);
  });

  it("lenient versions as NewVersion reads them; bad constraints give Masterminds' reason", () => {
    assert.deepEqual(parseHelmVersion('v1.2'), {
      major: 1n,
      minor: 2n,
      patch: 0n,
      pre: '',
      original: 'v1.2',
    });
    assert.equal(parseHelmVersion('01.2.3')?.major, 1n);
    assert.equal(parseHelmVersion('1.2.3-01'), undefined, 'numeric prerelease part with a leading zero');
    assert.equal(parseHelmVersion('latest'), undefined);
    const bad = parseHelmConstraint('>= one');
    assert.deepEqual(bad, { ok: false, reason: 'improper constraint: >= one' });
  });
});

describe('when helm dependency update fetches, and what', () => {
  const chart = (
    deps: string,
    files: [string, string][] = [],
    archives: [string, Uint8Array][] = [],
  ): ReleaseTree =>
    releaseTree(
      new Map([
        ['addon/Chart.yaml', `apiVersion: v2\nname: addon\nversion: v1\ndependencies:\n${deps}`],
        ...files,
      ]),
      new Map(archives),
    );

  it('nothing when every dependency is in charts/ (archive by the name inside it, or a folder)', () => {
    const tree = chart(
      '  - name: cni-config\n    version: 0.1.0\n    repository: https://charts.example.com\n  - name: local\n    version: 1.0.0\n',
      [['addon/charts/local/Chart.yaml', 'name: local\nversion: 1.0.0\n']],
      [['addon/charts/renamed.tgz', CNI_CONFIG]],
    );
    assert.deepEqual(dependencyUpdateOf(tree, 'addon/'), { ok: true, value: undefined });
    assert.equal(archiveChartName(CNI_CONFIG), 'cni-config');
  });

  it('one missing: every remote dependency fetched, remote archives dropped, local ones kept', () => {
    const tree = chart(
      '  - name: cni-config\n    version: ~0.1\n    repository: https://charts.example.com\n  - name: cilium\n    alias: cni\n    version: 1.18.1\n    repository: https://helm.cilium.io/\n  - name: local\n    version: 1.0.0\n',
      [['addon/charts/local/Chart.yaml', 'name: local\nversion: 1.0.0\n']],
      [['addon/charts/cni-config-0.1.0.tgz', CNI_CONFIG]],
    );
    assert.deepEqual(dependencyUpdateOf(tree, 'addon/'), {
      ok: true,
      value: {
        chartDir: 'addon',
        fetch: [
          { name: 'cni-config', version: '~0.1', repository: 'https://charts.example.com' },
          { name: 'cilium', version: '1.18.1', repository: 'https://helm.cilium.io/' },
        ],
        drop: ['addon/charts/cni-config-0.1.0.tgz'],
      },
    });
  });

  it('refuses what it cannot fetch, naming each dependency and what to do', () => {
    const r = dependencyUpdateOf(
      chart(
        '  - name: a\n    version: 1.0.0\n    repository: oci://r.example.com/charts\n  - name: b\n    version: 1.0.0\n    repository: file://../b\n  - name: c\n    version: 1.0.0\n    repository: "@stable"\n  - name: d\n    version: ">= one"\n    repository: https://x.example.com\n  - name: e\n    version: 1.0.0\n',
      ),
      'addon',
    );
    assert.equal(r.ok, false);
    const errors = r.ok ? [] : r.errors;
    assert.equal(errors.length, 5);
    assert.match(
      errors[0] ?? '',
      /dependencies\[0\] \(a\): OCI repository .* not resolved yet; vendor the chart as charts\/a-<version>\.tgz/,
    );
    assert.match(
      errors[1] ?? '',
      /dependencies\[1\] \(b\): file:\/\/\.\.\/b: file:\/\/ dependencies are not resolved/,
    );
    assert.match(
      errors[2] ?? '',
      /dependencies\[2\] \(c\): repository "@stable" is not an http\(s\):\/\/ chart repository URL/,
    );
    assert.match(
      errors[3] ?? '',
      /dependencies\[3\] \(d\): version ">= one" is not a Helm version constraint/,
    );
    assert.match(errors[4] ?? '', /dependencies\[4\] \(e\): no repository and no chart e in charts\//);
  });
});

describe('the index entry Helm picks (IndexFile.Get)', () => {
  const index = `apiVersion: v1
entries:
  x:
    - { version: 1.2.0, urls: [x-1.2.0.tgz], digest: aa }
    - { version: 1.10.0, urls: [x-1.10.0.tgz], digest: bb }
    - { version: 2.0.0-rc.1, urls: [x-2.0.0-rc.1.tgz], digest: cc }
    - { version: not-semver, urls: [x.tgz], digest: dd }
`;
  it('the highest version the constraint allows (semver order, not text order); an exact string first', () => {
    const pick = (v: string) => {
      const r = pickIndexEntry(index, 'x', v);
      return r.ok ? r.entry.version : r.reason;
    };
    assert.equal(pick('^1'), '1.10.0');
    assert.equal(pick(''), '1.10.0');
    assert.equal(pick('2.0.0-rc.1'), '2.0.0-rc.1');
    assert.equal(pick('>=3'), 'no version of x matches ">=3"');
    assert.equal(pickIndexEntry(index, 'y', '*').ok, false);
    assert.deepEqual(pickIndexEntry('entries: {}', 'x', '*'), {
      ok: false,
      reason: 'index.yaml has no apiVersion: not a chart repository index',
    });
  });

  it('URLs as Helm resolves them', () => {
    assert.equal(chartIndexUrl('https://helm.cilium.io/'), 'https://helm.cilium.io/index.yaml');
    assert.equal(
      chartArchiveUrl('https://h.example.com/charts', 'x-1.0.0.tgz'),
      'https://h.example.com/charts/x-1.0.0.tgz',
    );
    assert.equal(
      chartArchiveUrl('https://h.example.com/charts/', 'https://cdn.example.com/x.tgz'),
      'https://cdn.example.com/x.tgz',
    );
  });
});
