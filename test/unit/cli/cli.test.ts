import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { CommandIO } from '../../../controller/cli/command.ts';
import { main } from '../../../controller/cli/main.ts';
import { renderSeedKeyFile } from '../../../controller/cli/render.ts';

const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as {
  version: string;
};

function capture(env: Record<string, string> = {}): { io: CommandIO; out: () => string; err: () => string } {
  let out = '';
  let err = '';
  return {
    io: { stdout: (t) => (out += t), stderr: (t) => (err += t), env },
    out: () => out,
    err: () => err,
  };
}

describe('stackflux CLI', () => {
  it('version prints the package version', async () => {
    const c = capture();
    assert.equal(await main(['version'], c.io), 0);
    assert.match(c.out(), new RegExp(`^stackflux ${pkg.version.replaceAll('.', '\\.')} `));
  });

  it('flags can come from STACKFLUX_* environment variables, explicit flags win', async () => {
    const c = capture({ STACKFLUX_OUTPUT: 'json' });
    assert.equal(await main(['version'], c.io), 0);
    assert.equal(JSON.parse(c.out()).version, pkg.version);
    const d = capture({ STACKFLUX_OUTPUT: 'json' });
    assert.equal(await main(['version', '--output', 'text'], d.io), 0);
    assert.match(d.out(), /^stackflux /);
  });

  it('help lists the commands; every command has --help', async () => {
    const c = capture();
    assert.equal(await main(['help'], c.io), 0);
    assert.match(c.out(), /version\s+Print the stackflux version/);
    const d = capture();
    assert.equal(await main(['version', '--help'], d.io), 0);
    assert.match(d.out(), /Usage: stackflux version/);
    assert.match(d.out(), /STACKFLUX_OUTPUT/);
  });

  it('render --render-seed-key-file: 64 hex digits are the key; an unreadable or other file is a usage error', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'seed-flag-'));
    try {
      const key = join(dir, 'seed.key');
      writeFileSync(key, `${'C3'.repeat(32)}\n`);
      assert.equal(renderSeedKeyFile({ 'render-seed-key-file': key }), 'c3'.repeat(32));
      assert.equal(renderSeedKeyFile({}), undefined, 'without the flag: the process seeds with its own key');
      const bad = join(dir, 'bad.key');
      writeFileSync(bad, 'password\n');
      for (const [file, message] of [
        [bad, /--render-seed-key-file: .*bad\.key does not hold 64 hex digits/],
        [join(dir, 'missing.key'), /--render-seed-key-file: cannot read .*missing\.key/],
      ] as const) {
        const c = capture();
        const args = [
          'render',
          `--input-dir=${dir}`,
          `--output-dir=${join(dir, 'out')}`,
          `--render-seed-key-file=${file}`,
        ];
        assert.equal(await main(args, c.io), 2);
        assert.match(c.err(), message);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('run: the removed single-branch fleet flags and bad fleet settings are usage errors naming the fix', async () => {
    for (const [args, message] of [
      [['--fleet-branch=main'], /--fleet-branch was removed: .*--fleet-branch-prefix/],
      [['--fleet-path=clusters'], /--fleet-path was removed/],
      [['--flux-shards=two'], /--flux-shards must be a positive integer/],
      [['--addon-interval=soon'], /--addon-interval "soon" is not a duration/],
      [['--render-seed-secret=seed'], /--render-seed-secret must be NAMESPACE\/NAME, got "seed"/],
    ] as const) {
      const c = capture();
      assert.equal(await main(['run', '--fleet-url=https://git.example.com/fleet.git', ...args], c.io), 2);
      assert.match(c.err(), message);
    }
  });

  it('run, diff, preview and render check the source flags alike (a usage error naming the flag)', async () => {
    const cases: Array<[string[], RegExp]> = [
      [
        ['run', '--github-api-url=ftp://ghe.example/api'],
        /--github-api-url "ftp:\/\/ghe.example\/api" must be an http\(s\) URL/,
      ],
      [
        ['diff', '--github-api-url=https://user:pw@ghe.example/api'],
        /--github-api-url .* must be an http\(s\) URL without credentials/,
      ],
      [
        ['render', '--input-dir=in', '--output-dir=out', '--github-api-url=ghe.example'],
        /--github-api-url "ghe.example"/,
      ],
      [['run', '--git-timeout=10ms'], /--git-timeout "10ms" is not a duration of at least 1s/],
      [['diff', '--git-timeout=soon'], /--git-timeout "soon"/],
      // Issue 31 F5: the total deadlines of source reads and the background reads' slots.
      [
        ['run', '--source-read-timeout=500ms'],
        /--source-read-timeout "500ms" is not a duration of at least 1s/,
      ],
      [['run', '--source-list-timeout=later'], /--source-list-timeout "later"/],
      [['run', '--source-reads=0'], /--source-reads "0" is not a positive integer/],
      [
        [
          'preview',
          'clusterstack',
          'ferrol',
          '--fleet-url=https://git.example.com/fleet.git',
          '--github-api-url=ftp://x',
        ],
        /--github-api-url "ftp:\/\/x"/,
      ],
    ];
    for (const [args, message] of cases) {
      const c = capture();
      assert.equal(await main(args, c.io), 2, args.join(' '));
      assert.match(c.err(), message);
    }
  });

  it('an unknown command or flag is a usage error (exit 2) that says what is wrong', async () => {
    const c = capture();
    assert.equal(await main(['frobnicate'], c.io), 2);
    assert.match(c.err(), /unknown command "frobnicate"/);
    const d = capture();
    assert.equal(await main(['version', '--nope'], d.io), 2);
    assert.match(d.err(), /nope/);
  });

  it('the package bin runs the CLI as a separate process', () => {
    const out = execFileSync(
      process.execPath,
      [new URL('../../../bin/stackflux.js', import.meta.url).pathname, 'version'],
      {
        encoding: 'utf8',
      },
    );
    assert.match(out, new RegExp(`stackflux ${pkg.version.replaceAll('.', '\\.')}`));
  });
});

describe('stackflux run: client rate limit flags', () => {
  it('--kube-api-qps and --kube-api-burst are listed with Flux’s defaults and their variables', async () => {
    const c = capture();
    assert.equal(await main(['run', '--help'], c.io), 0);
    assert.match(c.out(), /--kube-api-qps string\s.*\(default "50"\) \[STACKFLUX_KUBE_API_QPS\]/);
    assert.match(c.out(), /--kube-api-burst string\s.*\(default "300"\) \[STACKFLUX_KUBE_API_BURST\]/);
  });

  it('a rate limit that is not a positive number is a usage error naming the flag, before any I/O', async () => {
    for (const [args, env, pattern] of [
      [['--kube-api-qps', '0'], {}, /--kube-api-qps must be a number greater than 0, got "0"/],
      [['--kube-api-qps', 'fast'], {}, /--kube-api-qps must be a number greater than 0, got "fast"/],
      [[], { STACKFLUX_KUBE_API_BURST: '2.5' }, /--kube-api-burst must be a positive integer, got "2.5"/],
    ] as const) {
      const c = capture({ ...env, KUBECONFIG: '/nonexistent/kubeconfig' });
      assert.equal(await main(['run', ...args], c.io), 2, c.err());
      assert.match(c.err(), pattern);
    }
  });
});
