// A Helm-chart cluster-class: FleetNotConfigured without a renderer, else a render request naming
// the release, its commit and a tree read at that commit.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ReleaseTree } from '../../../../controller/api/release.ts';
import { renderReleaseClass } from '../../../../controller/controllers/clusterstackrelease/classrender.ts';
import { ReleaseSourceAccess } from '../../../../controller/controllers/clusterstackrelease/sourceaccess.ts';
import type { ReleaseClasses } from '../../../../controller/controllers/clusterstackrelease/types.ts';
import type { StackDescription } from '../../../../controller/releases/format.ts';
import { release, TAG, URL } from './fakes.ts';

const description = {} as StackDescription;
const src = () => new ReleaseSourceAccess({ credentials: async () => ({}) }, release());
const fetchTree = async (_s: unknown, t: string, commit: string) => ({ t, commit }) as unknown as ReleaseTree;

describe('renderReleaseClass', () => {
  it('without a fleet the class cannot be rendered', async () => {
    const got = await renderReleaseClass(
      { fetchTree, cacheDir: '/c' },
      'team-a/r1',
      src(),
      'c1',
      description,
    );
    assert.equal(got.ok, false);
    assert.equal(got.ok === false && got.reason, 'FleetNotConfigured');
  });

  it('asks the renderer for the release at the commit, with a tree read at that commit', async () => {
    const asked: Parameters<ReleaseClasses['render']>[0][] = [];
    const classes = {
      render: async (req: Parameters<ReleaseClasses['render']>[0]) => {
        asked.push(req);
        return { ok: false, reason: 'X', message: 'm' } as const;
      },
      remove: async () => {},
    } as unknown as ReleaseClasses;
    await renderReleaseClass({ classes, fetchTree, cacheDir: '/c' }, 'team-a/r1', src(), 'c1', description);
    const [req] = asked;
    assert.ok(req);
    assert.equal(req.treeKey, `${URL}\nc1\n\n${TAG}`);
    assert.equal(req.namespace, 'team-a');
    assert.equal(req.release, 'r1');
    assert.equal(req.tag, TAG);
    assert.equal(req.description, description);
    assert.deepEqual(await req.tree(), { t: TAG, commit: 'c1' });
  });
});
