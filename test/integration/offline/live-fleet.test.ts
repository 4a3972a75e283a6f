// The live snapshot's read of the fleet repository (readFleet) against the test environment's Git
// server: a namespace without fleet branches is an empty fleet, not a failure (git fetch exits 1
// without a word when no branch matches); its branches' files once they exist.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { readFleet } from '../../../controller/offline/live.ts';
import { createRepo, type Endpoints } from '../../../hack/lib/testenv.ts';
import { testEnv, uniqueName } from '../../support/env.ts';

const env = testEnv();
const work = mkdtempSync(join(tmpdir(), 'live-fleet-'));
const git = (...args: string[]) =>
  execFileSync('git', ['-C', work, '-c', 'user.name=t', '-c', 'user.email=t@example.com', ...args], {
    encoding: 'utf8',
  });

describe('liveSnapshot: reading the fleet repository', { timeout: 120_000 }, () => {
  after(() => rmSync(work, { recursive: true, force: true }));

  it('an empty fleet repository, then one with branches of other namespaces only: no files, no error', async () => {
    const url = await createRepo(env as Endpoints, uniqueName('live-fleet'));
    assert.deepEqual(await readFleet(url, ['stackflux/ns-a/']), { files: new Map(), tips: new Map() });
    git('init', '-q', '-b', 'main');
    writeFileSync(join(work, 'addons.yaml'), 'kind: ConfigMap\n');
    git('add', '.');
    git('commit', '-q', '-m', 'b');
    git('push', '-q', url, 'main:refs/heads/stackflux/ns-b/c1');
    assert.deepEqual(await readFleet(url, ['stackflux/ns-a/']), { files: new Map(), tips: new Map() });
    const b = await readFleet(url, ['stackflux/ns-b/']);
    assert.deepEqual([...b.files], [['stackflux/ns-b/c1/addons.yaml', 'kind: ConfigMap\n']]);
    assert.deepEqual([...b.tips.keys()], ['stackflux/ns-b/c1']);
  });

  it('a fleet repository that does not exist is still an error', async () => {
    await assert.rejects(
      readFleet(`${(env as Endpoints).gitServerUrl}/no-such-repo-${Date.now()}.git`, ['stackflux/x/']),
      /reading the fleet repository/,
    );
  });
});
