// The pure parts of reading GitHub release assets: the identity of an assets release (which
// assets count, what changes it) and where a GitHub repository is cloned from for an API root
// (github.com for api.github.com; GitHub Enterprise Server: the API's own host).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ClusterStack } from '../../../controller/api/clusterstack.ts';
import { sourceUrl } from '../../../controller/reconcilers/clusterstack.ts';
import {
  githubCloneOrigin,
  githubCloneUrl,
  parseGithubCloneUrl,
} from '../../../controller/releases/githuburl.ts';
import {
  type GitHubAsset,
  githubAssetsIdentity,
  isGitHubAssetsIdentity,
  releaseAssetsOf,
} from '../../../controller/sources/githubassets.ts';

const asset = (name: string, id: number, o: Partial<GitHubAsset> = {}): GitHubAsset => ({
  id,
  name,
  size: 100,
  updated_at: '2026-01-01T00:00:00Z',
  ...o,
});
const release = [
  asset('metadata.yaml', 1),
  asset('docker-x-1-30-cluster-class-v1.tgz', 2),
  asset('docker-x-1-30-cluster-addon-v1.tgz', 3),
  asset('clusteraddon.yaml', 4),
];

describe('githubAssetsIdentity', () => {
  it('is a prefixed sha256, independent of listing order and of assets that are not read', () => {
    const id = githubAssetsIdentity(release);
    assert.match(id, /^github-assets:sha256:[0-9a-f]{64}$/);
    assert.ok(isGitHubAssetsIdentity(id));
    assert.ok(!isGitHubAssetsIdentity('a'.repeat(40)));
    assert.equal(githubAssetsIdentity([...release].reverse()), id);
    assert.equal(
      githubAssetsIdentity([...release, asset('README.md', 9), asset('node-images.yaml', 10)]),
      id,
    );
  });

  it('changes when a csctl asset is replaced (new id, size or time) or added', () => {
    const id = githubAssetsIdentity(release);
    const swap = (o: Partial<GitHubAsset>) =>
      githubAssetsIdentity([{ ...asset('metadata.yaml', 1), ...o }, ...release.slice(1)]);
    assert.notEqual(swap({ id: 11 }), id);
    assert.notEqual(swap({ size: 101 }), id);
    assert.notEqual(swap({ updated_at: '2026-01-02T00:00:00Z' }), id);
    assert.notEqual(githubAssetsIdentity([...release, asset('hashes.json', 12)]), id);
  });

  it('keeps only well-formed asset entries of a release', () => {
    assert.deepEqual(releaseAssetsOf({ assets: [{ id: 1, name: 'a' }, release[0], null] }), [release[0]]);
    assert.deepEqual(releaseAssetsOf({}), []);
  });
});

describe('GitHub clone URLs follow the API root', () => {
  it('api.github.com clones from github.com; GitHub Enterprise from its API host', () => {
    assert.equal(githubCloneOrigin(), 'https://github.com');
    assert.equal(githubCloneUrl('o', 'r', 'https://api.github.com'), 'https://github.com/o/r.git');
    assert.equal(
      githubCloneUrl('o', 'r', 'https://ghe.example.com/api/v3'),
      'https://ghe.example.com/o/r.git',
    );
    assert.equal(githubCloneUrl('o', 'r', 'http://127.0.0.1:8080/'), 'http://127.0.0.1:8080/o/r.git');
    assert.deepEqual(
      parseGithubCloneUrl('https://ghe.example.com/o/r.git', 'https://ghe.example.com/api/v3'),
      {
        owner: 'o',
        repo: 'r',
      },
    );
    assert.equal(
      parseGithubCloneUrl('https://github.com/o/r.git', 'https://ghe.example.com/api/v3'),
      undefined,
    );
    assert.equal(parseGithubCloneUrl('https://github.com/o/r/x.git'), undefined);
  });

  it("a ClusterStack's github source URL is the clone URL on the configured GitHub", () => {
    const cs = {
      apiVersion: 'stackflux.io/v1alpha1',
      kind: 'ClusterStack',
      metadata: { name: 'x', namespace: 'n' },
      spec: {
        provider: 'docker',
        name: 'x',
        kubernetesVersion: '1.30',
        source: { github: { owner: 'o', repo: 'r' } },
      },
    } as ClusterStack;
    assert.equal(sourceUrl(cs), 'https://github.com/o/r.git');
    assert.equal(sourceUrl(cs, 'https://ghe.example.com/api/v3'), 'https://ghe.example.com/o/r.git');
  });
});
