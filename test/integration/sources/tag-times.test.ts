// Issue 11 defect 6: custom channel releases are ordered by commit time, and a Git listing
// (ls-remote, which has no times) gets them from one shallow fetch of the new custom tags' commits.
// Against the test environment's Git server.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { listTags } from '../../../controller/sources/git.ts';
import { createRepo, type Endpoints } from '../../../hack/lib/testenv.ts';
import { initRepo, required } from '../../support/e2e.ts';
import { uniqueName } from '../../support/env.ts';

const work = mkdtempSync(join(tmpdir(), 'stackflux-tag-times-'));

/** A commit at a fixed committer time (epoch seconds), tagged `tag` (annotated when asked). */
function commitAt(dir: string, time: number, tag: string, annotated = false): void {
  const env = {
    ...process.env,
    GIT_AUTHOR_NAME: 't',
    GIT_AUTHOR_EMAIL: 't@e.st',
    GIT_COMMITTER_NAME: 't',
    GIT_COMMITTER_EMAIL: 't@e.st',
    GIT_AUTHOR_DATE: `@${time} +0000`,
    GIT_COMMITTER_DATE: `@${time} +0000`,
  };
  writeFileSync(join(dir, 'f'), tag);
  execFileSync('git', ['add', '-A'], { cwd: dir, env });
  execFileSync('git', ['commit', '-q', '-m', tag], { cwd: dir, env });
  execFileSync('git', ['tag', ...(annotated ? ['-a', '-m', tag] : []), tag], { cwd: dir, env });
}

describe('listing custom channel tags with commit times', () => {
  after(() => rmSync(work, { recursive: true, force: true }));

  it('reports each custom tag’s commit time (lightweight and annotated); stable tags need none', async () => {
    const url = await createRepo(
      { gitServerUrl: required('GIT_SERVER_URL') } as Endpoints,
      uniqueName('times'),
    );
    const dir = join(work, 'repo');
    initRepo(dir);
    // The newer commit has the smaller hash-like suffix: by name it would lose.
    commitAt(dir, 1_700_000_000, 'docker-ferrol-1-30-v0-sha-f00dbab');
    commitAt(dir, 1_700_000_500, 'docker-ferrol-1-30-v0-sha-0c0ffee', true);
    commitAt(dir, 1_700_000_900, 'docker-ferrol-1-30-v1');
    execFileSync('git', ['push', '-q', '--tags', url, 'HEAD:refs/heads/main'], { cwd: dir });

    const tags = await listTags(url);
    const byTag = new Map(tags.map((t) => [t.tag, t]));
    assert.equal(byTag.get('docker-ferrol-1-30-v0-sha-f00dbab')?.time, 1_700_000_000);
    assert.equal(byTag.get('docker-ferrol-1-30-v0-sha-0c0ffee')?.time, 1_700_000_500);
    assert.equal(byTag.get('docker-ferrol-1-30-v1')?.time, undefined, 'stable tags are ordered by N');
    // Listing again answers from the commit-time cache with the same result.
    assert.deepEqual(await listTags(url), tags);
  });
});
