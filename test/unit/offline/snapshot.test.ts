import assert from 'node:assert/strict';
import { cpSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { GitRepository } from '../../../controller/api/flux.ts';
import { parseControllers, RenderError, renderSnapshot } from '../../../controller/offline/render.ts';
import { readSnapshot, SnapshotError } from '../../../controller/offline/snapshot.ts';
import { reconcileClusterStackRelease } from '../../../controller/reconcilers/clusterstackrelease.ts';
import { loadFluxTemplates } from '../../../controller/releases/flux-templates.ts';

const NEW_STACK = new URL('../../golden/new-stack/input', import.meta.url).pathname;

function copy(): string {
  const dir = join(mkdtempSync(join(tmpdir(), 'sf-snap-')), 'input');
  cpSync(NEW_STACK, dir, { recursive: true });
  return dir;
}

function put(dir: string, rel: string, text: string): void {
  mkdirSync(join(dir, rel, '..'), { recursive: true });
  writeFileSync(join(dir, rel), text);
}

function rejects(dir: string, file: string, message: RegExp): void {
  assert.throws(
    () => readSnapshot(dir),
    (err: unknown) => err instanceof SnapshotError && err.file === file && message.test(err.message),
  );
}

describe('snapshot reading', () => {
  it('reads the layout', () => {
    const s = readSnapshot(NEW_STACK);
    assert.deepEqual([...s.objects.keys()], ['namespaces/team-a/stackflux.io/clusterstacks/ferrol']);
    assert.equal(s.sources.length, 1);
    assert.equal(s.sources[0]?.trees.size, 2);
  });

  it('rejects malformed and misplaced files, naming the file', () => {
    let d = copy();
    put(d, 'namespaces/team-a/stackflux.io/clusterstacks/other.yaml', 'a: [\n');
    rejects(d, 'namespaces/team-a/stackflux.io/clusterstacks/other.yaml', /invalid YAML/);
    d = copy();
    put(
      d,
      'namespaces/team-a/stackflux.io/clusterstacks/other.yaml',
      'apiVersion: stackflux.io/v1alpha1\nkind: ClusterStack\nmetadata:\n  name: ferrol\n',
    );
    rejects(d, 'namespaces/team-a/stackflux.io/clusterstacks/other.yaml', /does not match the file name/);
    d = copy();
    put(
      d,
      'cluster/stackflux.io/clusterstacks/x.yaml',
      'apiVersion: stackflux.io/v1alpha1\nkind: ClusterStack\nmetadata:\n  name: x\n',
    );
    rejects(d, 'cluster/stackflux.io/clusterstacks/x.yaml', /namespaced/);
    d = copy();
    put(
      d,
      'namespaces/team-a/core/configmaps/x.yaml',
      'apiVersion: v1\nkind: Secret\nmetadata:\n  name: x\n',
    );
    rejects(d, 'namespaces/team-a/core/configmaps/x.yaml', /belongs in resource directory "secrets"/);
    d = copy();
    put(d, 'objects.yaml', 'a: 1\n');
    rejects(d, 'objects.yaml', /not part of the snapshot layout/);
    d = copy();
    put(d, 'sources/ferrol/tags.yaml', 'url: https://x/y.git\ntags:\n  - tag: a\n    commit: nope\n');
    rejects(d, 'sources/ferrol/tags.yaml', /not a 40-character sha1/);
    d = copy();
    put(
      d,
      'sources/ferrol/tags.yaml',
      `url: https://x/y.git\ntags:\n  - tag: a\n    commit: sha256:${'a'.repeat(63)}\n`,
    );
    rejects(d, 'sources/ferrol/tags.yaml', /not a 40-character sha1, an OCI manifest digest/);
  });

  it('takes an OCI manifest digest and a GitHub assets identity as a release identity', () => {
    const digest = `sha256:${'a'.repeat(64)}`;
    const assets = `github-assets:sha256:${'b'.repeat(64)}`;
    const d = copy();
    put(
      d,
      'sources/ferrol/tags.yaml',
      `url: oci://r.example.com/scs/stacks\ntags:\n  - tag: a\n    commit: ${digest}\n  - tag: b\n    commit: ${assets}\n`,
    );
    const source = readSnapshot(d).sources.find((s) => s.key === 'ferrol');
    assert.ok(source?.listing.ok);
    assert.deepEqual(
      source.listing.tags.map((t) => t.commit),
      [digest, assets],
    );
  });
});

describe('render', () => {
  const templates = loadFluxTemplates();
  const now = new Date('2025-03-02T12:00:00Z');

  it('fails on a mutation outside the declared output resources', () => {
    const rogue: typeof reconcileClusterStackRelease = (input) => {
      const r = reconcileClusterStackRelease(input);
      return {
        ...r,
        gitRepository: { ...r.gitRepository, apiVersion: 'v1', kind: 'Secret' } as unknown as GitRepository,
      };
    };
    assert.throws(
      () =>
        renderSnapshot(readSnapshot(NEW_STACK), {
          now,
          templates,
          reconcilers: { clusterStackRelease: rogue },
        }),
      (err: unknown) =>
        err instanceof RenderError && /core\/secrets is not a declared output/.test(err.message),
    );
  });

  it('reports a hot loop (a reconciler that never stops changing its output)', () => {
    let n = 0;
    const hot: typeof reconcileClusterStackRelease = (input) => {
      const r = reconcileClusterStackRelease(input);
      n++;
      return { ...r, status: { ...r.status, clusters: n } };
    };
    assert.throws(
      () =>
        renderSnapshot(readSnapshot(NEW_STACK), {
          now,
          templates,
          reconcilers: { clusterStackRelease: hot },
        }),
      /no fixed point after 10 rounds.*applyStatus namespaces\/team-a\/stackflux.io\/clusterstackreleases\/docker-ferrol-1-30-v2/,
    );
  });

  it('--controllers syntax', () => {
    assert.deepEqual(
      [...parseControllers('*')],
      ['clusterstack', 'clusterstackrelease', 'clusteraddon', 'rollout'],
    );
    assert.deepEqual(
      [...parseControllers('-clusteraddon')],
      ['clusterstack', 'clusterstackrelease', 'rollout'],
    );
    assert.deepEqual([...parseControllers('clusteraddon')], ['clusteraddon']);
    assert.throws(() => parseControllers('nope'), /unknown controller "nope"/);
  });
});
