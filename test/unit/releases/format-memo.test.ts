// readReleaseDescription reads a tree once per tag (controller/releases/format.ts): each call must
// still give what a first read gives, frozen so no caller can change it for the next, and another
// tree or tag is read anew.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { readReleaseDescription } from '../../../controller/releases/format.ts';
import { releaseTree } from '../../../controller/releases/tree.ts';
import { readStackDir } from '../../../hack/lib/stack-dir.ts';
import { releaseTag } from '../../support/release-tag.ts';

const STACKS = join(import.meta.dirname, '..', '..', '..', 'stacks');

describe('release descriptions read once per tree and tag', () => {
  it('gives every caller the first read, frozen: a caller cannot change it for the next', () => {
    const tree = readStackDir(join(STACKS, 'docker-ferrol-1-30'));
    const tag = releaseTag('docker-ferrol-1-30-v1');
    const first = readReleaseDescription(tree, tag);
    assert.ok(first.ok, first.ok ? '' : first.errors.join('; '));
    const addons = first.value.addons.map((a) => a.name);
    assert.throws(() => {
      first.value.addons.length = 0; // a caller changing the shared read
    }, TypeError);
    assert.throws(() => {
      (first.value.addons[0] as { name: string }).name = 'changed';
    }, TypeError);
    const second = readReleaseDescription(tree, tag);
    assert.ok(second.ok);
    assert.deepEqual(
      second.value.addons.map((a) => a.name),
      addons,
    );
    assert.equal(second, first, 'the one read, not a copy');
  });

  it('reads another tree, and the same tree under another tag, anew', () => {
    const tree = readStackDir(join(STACKS, 'docker-ferrol-1-30'));
    assert.ok(readReleaseDescription(tree, releaseTag('docker-ferrol-1-30-v1')).ok);
    // stack.yaml says v1: read under v2 it is wrong, and that is not hidden by the v1 read.
    assert.equal(readReleaseDescription(tree, releaseTag('docker-ferrol-1-30-v2')).ok, false);
    const broken = releaseTree(new Map([...tree].filter(([p]) => p !== 'stack.yaml')), new Map());
    assert.equal(readReleaseDescription(broken, releaseTag('docker-ferrol-1-30-v1')).ok, false);
  });
});
