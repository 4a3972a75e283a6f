import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseLsRemoteTags, SourceError, scrub, validateRepoUrl } from '../../../controller/sources/git.ts';

describe('git release source: pure parts', () => {
  it('peels annotated tags: the ^{} commit wins over the tag object id', () => {
    const out = [
      '1111111111111111111111111111111111111111\trefs/tags/docker-ferrol-1-30-v1',
      'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\trefs/tags/docker-ferrol-1-30-v2',
      'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\trefs/tags/docker-ferrol-1-30-v2^{}',
      'cccccccccccccccccccccccccccccccccccccccc\trefs/heads/main',
      '',
    ].join('\n');
    assert.deepEqual(parseLsRemoteTags(out), [
      { tag: 'docker-ferrol-1-30-v1', commit: '1111111111111111111111111111111111111111' },
      { tag: 'docker-ferrol-1-30-v2', commit: 'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb' },
    ]);
  });

  it('accepts only http(s) and ssh URLs without embedded credentials', () => {
    for (const ok of [
      'https://git.example/stacks.git',
      'http://127.0.0.1:8080/s.git',
      'ssh://git@h/s.git',
      'git@github.com:org/s.git',
    ]) {
      assert.doesNotThrow(() => validateRepoUrl(ok), ok);
    }
    for (const bad of [
      'file:///tmp/x',
      'git://h/s.git',
      'ext::sh -c id',
      '/tmp/repo',
      'https://user:pw@h/s.git',
    ]) {
      assert.throws(
        () => validateRepoUrl(bad),
        (err: unknown) => err instanceof SourceError && err.reason === 'InvalidURL',
        bad,
      );
    }
  });

  it('scrubs credentials from error text', () => {
    const text =
      "fatal: unable to access 'https://alice:s3cret@h/r.git/': The requested URL returned error: 403 (s3cret)";
    const out = scrub(text, { username: 'alice', password: 's3cret' });
    assert.doesNotMatch(out, /s3cret/);
    assert.doesNotMatch(out, /alice/);
    assert.match(out, /403/);
  });
});
