import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  classifyGitFailure,
  configureGitNetwork,
  credentialEnv,
  gitNetwork,
  gitProcessTimeoutMs,
  parseCatFileBatch,
  parseLsRemoteTags,
  parseLsTree,
  SourceError,
  scrub,
  validateRepoUrl,
} from '../../../controller/sources/git.ts';

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
      // Issue 11 defect 7: a user or host starting with "-" would reach git or ssh as an option.
      '-u@h:r',
      'a@-oProxyCommand:r',
      'ssh://-oProxyCommand=touch/r',
      'ssh://-u@h/r',
      'https://-h/r.git',
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

  it('parses ls-tree -z -l records, keeping modes, sizes and odd names', () => {
    const out = Buffer.from(
      [
        '100644 blob aaaa      12\tstack.yaml',
        '120000 blob bbbb       7\tcluster-addon/cni/a b\tc.yaml',
        '160000 commit cccc       -\tcluster-addon/sub',
        '',
      ].join('\0'),
    );
    assert.deepEqual(parseLsTree(out), [
      { mode: '100644', type: 'blob', oid: 'aaaa', size: 12, path: 'stack.yaml' },
      { mode: '120000', type: 'blob', oid: 'bbbb', size: 7, path: 'cluster-addon/cni/a b\tc.yaml' },
      { mode: '160000', type: 'commit', oid: 'cccc', size: undefined, path: 'cluster-addon/sub' },
    ]);
  });

  it('parses cat-file --batch output, contents with newlines included', () => {
    const out = Buffer.from('aaaa blob 4\na\nb\n\nbbbb blob 0\n\n');
    assert.deepEqual(
      parseCatFileBatch(out, 2).map((b) => b.toString()),
      ['a\nb\n', ''],
    );
    assert.throws(() => parseCatFileBatch(Buffer.from('cccc missing\n'), 1), /missing/);
  });
});

describe("classifyGitFailure: the reason from git's words, never from a URL or port", () => {
  it('a closed port whose number contains 401, 403 or 404 is unreachable, not an auth failure', () => {
    for (const port of [44013, 40312, 34041]) {
      const msg = `fatal: unable to access 'http://127.0.0.1:${port}/nothing.git/': Failed to connect to 127.0.0.1 port ${port} after 0 ms: Couldn't connect to server`;
      assert.equal(classifyGitFailure(msg), 'SourceUnreachable', msg);
    }
  });

  it('a repository whose URL says "timeout" or "not-found" is judged by the error, not the name', () => {
    const msg =
      "fatal: unable to access 'https://git.example/timeout-not-found.git/': Could not resolve host: git.example";
    assert.equal(classifyGitFailure(msg), 'SourceUnreachable');
  });

  it('names refused credentials, missing repositories and stalls as git reports them', () => {
    assert.equal(
      classifyGitFailure("fatal: Authentication failed for 'http://127.0.0.1:8080/r.git/'"),
      'AuthenticationFailed',
    );
    assert.equal(
      classifyGitFailure("fatal: unable to access 'https://h/r.git/': The requested URL returned error: 403"),
      'AuthenticationFailed',
    );
    assert.equal(classifyGitFailure("fatal: repository 'https://h/r.git/' not found"), 'RepositoryNotFound');
    assert.equal(
      classifyGitFailure("fatal: unable to access 'https://h/r.git/': The requested URL returned error: 404"),
      'RepositoryNotFound',
    );
    assert.equal(
      classifyGitFailure(
        "fatal: unable to access 'https://h/r.git/': Operation too slow. Less than 1 bytes/sec",
      ),
      'SourceTimeout',
    );
  });
});

describe('git network timeouts (--git-timeout)', () => {
  it('a stall of the configured length aborts git (low-speed limit), and the process is killed a little later', () => {
    const before = gitNetwork.stallTimeoutMs;
    try {
      configureGitNetwork({ stallTimeoutMs: 5_000 });
      const env = credentialEnv(undefined);
      assert.equal(env.GIT_HTTP_LOW_SPEED_LIMIT, '1');
      assert.equal(env.GIT_HTTP_LOW_SPEED_TIME, '5');
      assert.ok(gitProcessTimeoutMs() > 5_000);
      assert.throws(() => configureGitNetwork({ stallTimeoutMs: 10 }), /at least 1s/);
    } finally {
      configureGitNetwork({ stallTimeoutMs: before });
    }
  });
});
