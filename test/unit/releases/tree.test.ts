// Release trees keep non-UTF-8 files (vendored charts) byte for byte beside the text files.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import {
  binaryFilesOf,
  mapTreePaths,
  releaseTree,
  releaseTreeFromBytes,
  treeFileBytes,
} from '../../../controller/releases/tree.ts';

const tgz = gzipSync('a chart');

describe('release trees with binary files', () => {
  it('sorts files by content: UTF-8 is text, anything else bytes', () => {
    const tree = releaseTreeFromBytes([
      ['csctl.yaml', Buffer.from('config: {}\n')],
      ['cluster-addon/cni/charts/cilium-1.0.0.tgz', tgz],
      ['notes/ü.txt', Buffer.from('grüße\n')],
    ]);
    assert.deepEqual(
      [...tree],
      [
        ['csctl.yaml', 'config: {}\n'],
        ['notes/ü.txt', 'grüße\n'],
      ],
    );
    assert.deepEqual([...binaryFilesOf(tree)], [['cluster-addon/cni/charts/cilium-1.0.0.tgz', tgz]]);
  });

  it('is a plain text map when there are no binary files', () => {
    const text = new Map([['a.yaml', 'a: 1\n']]);
    assert.equal(releaseTree(text), text);
    assert.equal(binaryFilesOf(text).size, 0);
  });

  it('moves and filters paths of text and binary files alike', () => {
    const tree = releaseTree(
      new Map([
        ['s/a.yaml', 'a'],
        ['other.yaml', 'o'],
      ]),
      new Map([['s/c.tgz', tgz]]),
    );
    const moved = mapTreePaths(tree, (p) => (p.startsWith('s/') ? p.slice(2) : undefined));
    assert.deepEqual([...moved], [['a.yaml', 'a']]);
    assert.deepEqual([...binaryFilesOf(moved)], [['c.tgz', tgz]]);
  });

  it('gives every file as bytes, and reads back to the same tree', () => {
    const tree = releaseTree(new Map([['a.yaml', 'ä: 1\n']]), new Map([['c.tgz', tgz]]));
    const again = releaseTreeFromBytes(treeFileBytes(tree));
    assert.deepEqual([...again], [...tree]);
    assert.deepEqual([...binaryFilesOf(again)], [...binaryFilesOf(tree)]);
  });
});
