// readReleaseDescription reads a tree once per tag (controller/releases/format.ts): each call must
// still give what a first read gives, as a copy of its own, and another tree or tag is read anew.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { readReleaseDescription } from '../../../controller/releases/format.ts';
import { releaseTree } from '../../../controller/releases/tree.ts';
import { readStackDir } from '../../../hack/lib/stack-dir.ts';
import { releaseTag } from '../../support/release-tag.ts';

const STACKS = join(import.meta.dirname, '..', '..', '..', 'stacks');

describe('release descriptions read once per tree and tag', () => {
  it('gives each caller its own copy of the first read', () => {
    const tree = readStackDir(join(STACKS, 'docker-ferrol-1-30'));
    const tag = releaseTag('docker-ferrol-1-30-v1');
    const first = readReleaseDescription(tree, tag);
    assert.ok(first.ok, first.ok ? '' : first.errors.join('; '));
    const addons = first.value.addons.map((a) => a.name);
    first.value.addons.length = 0; // a caller changing its copy
    const second = readReleaseDescription(tree, tag);
    assert.ok(second.ok);
    assert.deepEqual(
      second.value.addons.map((a) => a.name),
      addons,
    );
    const third = readReleaseDescription(tree, tag);
    assert.ok(third.ok);
    assert.notEqual(second.value, third.value);
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
