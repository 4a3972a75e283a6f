import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { describe, it } from 'node:test';
import {
  classifyGitFailure,
  configureGitNetwork,
  gitEnv,
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
      const env = gitEnv();
      assert.equal(env.GIT_HTTP_LOW_SPEED_LIMIT, '1');
      assert.equal(env.GIT_HTTP_LOW_SPEED_TIME, '5');
      assert.ok(gitProcessTimeoutMs() > 5_000);
      assert.throws(() => configureGitNetwork({ stallTimeoutMs: 10 }), /at least 1s/);
    } finally {
      configureGitNetwork({ stallTimeoutMs: before });
    }
  });
});

describe('gitEnv: git runs isolated from anything a release could write (issue 22)', () => {
  const config = (env: Record<string, string>): Map<string, string> => {
    const out = new Map<string, string>();
    for (let i = 0; i < Number(env.GIT_CONFIG_COUNT ?? '0'); i++)
      out.set(env[`GIT_CONFIG_KEY_${i}`] ?? '', env[`GIT_CONFIG_VALUE_${i}`] ?? '');
    return out;
  };

  it('no global or system config; HOME and XDG_CONFIG_HOME an empty private folder that is not the cache', () => {
    const env = gitEnv();
    assert.equal(env.GIT_CONFIG_GLOBAL, '/dev/null');
    assert.equal(env.GIT_CONFIG_NOSYSTEM, '1');
    const home = env.HOME ?? '';
    assert.notEqual(home, process.env.HOME);
    assert.equal(env.XDG_CONFIG_HOME, home);
    assert.ok(!home.includes('stackflux/trees') && !home.endsWith('/stackflux'), home);
    assert.equal(statSync(home).mode & 0o777, 0o700);
    assert.deepEqual(readdirSync(home), []);
    assert.equal(gitEnv().HOME, home, 'one folder per process');
  });

  it('only the https, http and ssh transports, and no redirects', () => {
    const c = config(gitEnv());
    assert.equal(c.get('protocol.allow'), 'never');
    assert.equal(c.get('protocol.https.allow'), 'always');
    assert.equal(c.get('protocol.http.allow'), 'always');
    assert.equal(c.get('protocol.ssh.allow'), 'always');
    assert.equal(c.get('protocol.ext.allow'), undefined);
    assert.equal(c.get('protocol.file.allow'), undefined);
    assert.equal(c.get('http.followRedirects'), 'false');
  });

  it('the credential helper is scoped to the scheme and host of the URL, never global', () => {
    const env = gitEnv({ username: 'u', password: 's3cret' }, 'https://git.example.com:8443/org/repo.git');
    const c = config(env);
    assert.equal(c.get('credential.helper'), undefined);
    assert.ok(c.get('credential.https://git.example.com:8443.helper')?.startsWith('!'));
    assert.equal(env.STACKFLUX_GIT_PROTOCOL, 'https');
    assert.equal(env.STACKFLUX_GIT_HOST, 'git.example.com:8443');
    assert.ok(![...c.values()].some((v) => v.includes('s3cret')), 'the secret is not in the config');
    // ssh: git's credential helpers are for HTTP only; nothing is handed over.
    const ssh = gitEnv({ username: 'u', password: 'p' }, 'ssh://git@example.com/r.git');
    assert.equal(ssh.STACKFLUX_GIT_PASSWORD, undefined);
  });

  it('the helper answers only for its own protocol and host', () => {
    const env = gitEnv({ username: 'user1', password: 's3cret' }, 'http://127.0.0.1:8080/r.git');
    const helper = (config(env).get('credential.http://127.0.0.1:8080.helper') ?? '').slice(1);
    // `f get`: git appends the action to the helper's shell text.
    const run = (input: string) =>
      execFileSync('sh', ['-c', `${helper} get`], { env, input, encoding: 'utf8' });
    assert.equal(run('protocol=http\nhost=127.0.0.1:8080\n\n'), 'username=user1\npassword=s3cret\n');
    assert.equal(run('protocol=http\nhost=127.0.0.2:8080\n\n'), '');
    assert.equal(run('protocol=https\nhost=127.0.0.1:8080\n\n'), '');
  });
});
