// Validation by commit: a tree that is a verdict (InvalidRelease) is cached, a failed fetch is not.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ReleaseSourceAccess } from '../../../../controller/controllers/clusterstackrelease/sourceaccess.ts';
import { ReleaseValidator } from '../../../../controller/controllers/clusterstackrelease/validator.ts';
import { parseReleaseTag, type ReleaseTag } from '../../../../controller/releases/tags.ts';
import { SourceError } from '../../../../controller/sources/git.ts';
import type { ReleaseTreeFetcher } from '../../../../controller/sources/releasetree.ts';
import { release, TAG, URL } from './fakes.ts';

const parsed = parseReleaseTag(TAG);
const tag = (parsed.ok ? parsed.value : undefined) as ReleaseTag;

function validator(fail: () => Error) {
  const fetched: string[] = [];
  const fetchTree: ReleaseTreeFetcher = async (source, t, commit, cacheDir, creds) => {
    fetched.push(`${source.url} ${t} ${commit} ${cacheDir} ${JSON.stringify(creds)}`);
    throw fail();
  };
  return { fetched, validator: new ReleaseValidator({ fetchTree, cacheDir: '/cache' }) };
}

describe('ReleaseValidator', () => {
  it('a tree that cannot be a release is a verdict on the commit, cached by commit', async () => {
    const { fetched, validator: v } = validator(() => new SourceError('InvalidRelease', 'a symlink'));
    const src = new ReleaseSourceAccess({ credentials: async () => ({}) }, release());
    const unreachable: string[] = [];
    const first = await v.validate('team-a/r1', src, 'c1', tag, () => unreachable.push('x'));
    assert.deepEqual(first, { ok: false, errors: ['a symlink'] });
    assert.equal(await v.validate('team-a/r1', src, 'c1', tag, () => {}), first);
    assert.deepEqual(fetched, [`${URL} ${TAG} c1 /cache undefined`]);
    await v.validate('team-a/r1', src, 'c2', tag, () => {});
    assert.equal(fetched.length, 2, 'another commit is read');
    assert.deepEqual(unreachable, []);
  });

  it('a failed fetch is thrown and not cached', async () => {
    const { fetched, validator: v } = validator(() => new SourceError('SourceUnavailable', 'down'));
    const src = new ReleaseSourceAccess({ credentials: async () => ({}) }, release());
    await assert.rejects(
      v.validate('team-a/r1', src, 'c1', tag, () => {}),
      /down/,
    );
    await assert.rejects(
      v.validate('team-a/r1', src, 'c1', tag, () => {}),
      /down/,
    );
    assert.equal(fetched.length, 2);
  });
});
