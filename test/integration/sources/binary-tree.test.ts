// Vendored Helm charts (charts/*.tgz of csctl stacks) reach the renderer byte for byte: read from
// Git objects, written to and read back from the release cache unchanged, and counted by the
// tree's size limit like any file. Against the test environment's Git server.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import { binaryFilesOf } from '../../../controller/releases/tree.ts';
import { fetchReleaseTree } from '../../../controller/sources/git.ts';
import { createRepo, type Endpoints } from '../../../hack/lib/testenv.ts';
import { assertInvalid } from '../../support/crafted-tree.ts';
import { git, initRepo, required } from '../../support/e2e.ts';
import { uniqueName } from '../../support/env.ts';

const work = mkdtempSync(join(tmpdir(), 'stackflux-binary-tree-'));
const repoDir = join(work, 'repo');
// Every byte value, so that no decoding step can pass unnoticed.
const chart = gzipSync(Buffer.from(Array.from({ length: 4096 }, (_, i) => i % 256)));
const CHART = 'cluster-addon/cni/charts/cilium-1.0.0.tgz';
let url = '';
let commit = '';

describe('binary files of a release tree', () => {
  before(async () => {
    url = await createRepo({ gitServerUrl: required('GIT_SERVER_URL') } as Endpoints, uniqueName('bin'));
    initRepo(repoDir);
    const s = join(repoDir, 's');
    mkdirSync(join(s, 'cluster-addon', 'cni', 'charts'), { recursive: true });
    writeFileSync(join(s, 'csctl.yaml'), 'config: {}\n');
    writeFileSync(join(s, CHART), chart);
    git(repoDir, 'add', '-A');
    git(repoDir, 'commit', '-q', '-m', 'binary');
    git(repoDir, 'tag', 'bin');
    commit = git(repoDir, 'rev-parse', 'HEAD');
    git(repoDir, 'push', '-q', '--tags', url, 'HEAD:refs/heads/main');
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  it('reads a .tgz as bytes beside the text files, and the same again from the cache', async () => {
    const cache = join(work, 'c');
    const tree = await fetchReleaseTree(url, 'bin', commit, 's', cache);
    assert.deepEqual([...tree.keys()], ['csctl.yaml']);
    assert.ok(Buffer.from(binaryFilesOf(tree).get(CHART) ?? []).equals(chart));
    // The second read comes from the published cache entry on disk.
    const again = await fetchReleaseTree(url, 'bin', commit, 's', cache);
    assert.notEqual(again, tree);
    assert.deepEqual([...again], [...tree]);
    assert.ok(Buffer.from(binaryFilesOf(again).get(CHART) ?? []).equals(chart));
  });

  it('counts binary files toward the size limit', async () => {
    await assertInvalid(
      fetchReleaseTree(url, 'bin', commit, 's', join(work, 'c-small'), undefined, {
        maxFiles: 10,
        maxBytes: chart.length,
      }),
      /more than the limit of \d+ bytes/,
    );
  });
});
