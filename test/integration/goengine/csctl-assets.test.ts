// One csctl release published two ways gives the same result: the stack folder as a Git tag holds
// it (read as a Git tree is), and the assets `csctl create` makes of it (packaged by
// test/support/csctl-assets.ts with the real helm CLI, read by releaseTreeFromCsctlAssets). Both
// go through the real render path (release format → renderCsctlClusterClass → renderCsctlAddon on
// the Go engine) and must give an identical ClusterClass and identical per-Cluster addon content,
// for both example stacks (stages layout and old umbrella layout).
// npm test: uses no test environment
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { ReleaseTree } from '../../../controller/api/release.ts';
import { releaseTreeFromCsctlAssets } from '../../../controller/releases/csctl/assets.ts';
import { readReleaseDescription, type StackDescription } from '../../../controller/releases/format.ts';
import { parseReleaseTag } from '../../../controller/releases/tags.ts';
import { binaryFilesOf } from '../../../controller/releases/tree.ts';
import { renderCsctlClusterClass, type SyncGoEngine } from '../../../controller/rendering/clusterclass.ts';
import { DEFAULT_MAX_OUTPUT_BYTES, runGoEngineCall } from '../../../controller/rendering/goengine/index.ts';
import { renderCsctlAddon } from '../../../controller/rendering/index.ts';
import { readStackDir } from '../../../hack/lib/stack-dir.ts';
import { packageCsctlRelease } from '../../support/csctl-assets.ts';

const STACKS = join(import.meta.dirname, '..', '..', '..', 'stacks');
const TAG = 'docker-csoferrol-1-30-v1';
const engine: SyncGoEngine = (call) => runGoEngineCall(call, DEFAULT_MAX_OUTPUT_BYTES);

const cluster = {
  apiVersion: 'cluster.x-k8s.io/v1beta1',
  kind: 'Cluster',
  metadata: { name: 'prod-1', namespace: 'tenant-a', uid: 'u-1' },
  spec: {
    clusterNetwork: { pods: { cidrBlocks: ['10.244.0.0/16'] } },
    controlPlaneEndpoint: { host: '172.18.0.3', port: 6443 },
  },
};

function describe_(tree: ReleaseTree): StackDescription {
  const tag = parseReleaseTag(TAG);
  assert.ok(tag.ok);
  const read = readReleaseDescription(tree, tag.value);
  assert.ok(read.ok, read.ok ? '' : read.errors.join('; '));
  return read.value;
}

/** The ClusterClass files and each addon's rendered files for `cluster`, as the fleet gets them. */
function rendered(tree: ReleaseTree) {
  const description = describe_(tree);
  const cls = renderCsctlClusterClass(engine, { tree, description, tag: TAG, namespace: 'tenant-a' });
  assert.ok(cls.ok, cls.ok ? '' : cls.message);
  const addons = description.addons.map((a) => {
    const r = renderCsctlAddon({
      format: 'csctl',
      tree,
      binary: binaryFilesOf(tree),
      addon: a.name,
      chartPath: a.path,
      ...(a.valuesTemplate !== undefined ? { valuesTemplate: a.valuesTemplate } : {}),
      kubernetesVersion: description.kubernetesVersion,
      cluster,
    });
    assert.ok(r.ok, r.ok ? '' : r.message);
    return { stage: a.stage, name: a.name, action: a.action, files: [...r.files], objects: r.objects };
  });
  return {
    classFiles: [...cls.value.files],
    addons,
    // csctl.yaml's apiVersion and metadata.yaml are in one publication only; the rest must agree.
    description: { ...description, csctl: { layout: description.csctl?.layout } },
  };
}

describe('a csctl release as a Git tag and as csctl assets', () => {
  for (const [layout, dir] of [
    ['stages layout (docker-csoferrol-1-30)', join(STACKS, 'docker-csoferrol-1-30')],
    ['old umbrella layout (docker-csoferrol-1-30-umbrella)', join(STACKS, 'docker-csoferrol-1-30-umbrella')],
  ] as const) {
    it(`${layout}: identical ClusterClass and per-Cluster addon content`, () => {
      const fromGit = rendered(readStackDir(dir));
      const assets = packageCsctlRelease(dir, 'v1');
      const fromAssets = rendered(releaseTreeFromCsctlAssets(assets));
      assert.ok(fromGit.classFiles.length > 0);
      assert.ok(fromGit.addons.every((a) => a.objects.length > 0));
      assert.deepEqual(fromAssets.classFiles, fromGit.classFiles);
      assert.deepEqual(fromAssets.addons, fromGit.addons);
      assert.deepEqual(fromAssets.description, fromGit.description);
    });
  }
});
