// Node prints "WASI is an experimental feature" when node:wasi is loaded. The CLI's commands and
// the render processes must not print it: a command that renders nothing does not load node:wasi,
// and loading the engine holds back that one warning (and only that one).
// npm test: uses no test environment
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { goEngineBuild } from '../../support/goengine.ts';

const root = fileURLToPath(new URL('../../../', import.meta.url));

function node(args: string[], env: Record<string, string> = {}) {
  const r = spawnSync(process.execPath, args, {
    cwd: root,
    encoding: 'utf8',
    env: { ...process.env, ...env },
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('Node warnings of the Go engine', () => {
  it('a CLI command prints no ExperimentalWarning', () => {
    const r = node([join(root, 'bin/stackflux.js'), 'status', '--help']);
    assert.equal(r.status, 0, r.stderr);
    assert.doesNotMatch(r.stderr, /ExperimentalWarning|WASI/);
  });

  it('rendering through the engine prints no WASI warning; other warnings still print', () => {
    const script = `
      const { configureGoEngine, goTemplate } = await import('./controller/rendering/goengine/index.ts');
      configureGoEngine({ path: process.env.ENGINE });
      const r = goTemplate('{{ .a }}', { a: 'ok' });
      process.stdout.write(JSON.stringify(r));
      process.emitWarning('a warning of someone else', 'ExperimentalWarning');
    `;
    const r = node(['--input-type=module', '-e', script], { ENGINE: join(goEngineBuild(), 'goengine.wasm') });
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), { ok: true, output: 'ok' });
    assert.doesNotMatch(r.stderr, /WASI/);
    assert.match(r.stderr, /a warning of someone else/);
  });
});
