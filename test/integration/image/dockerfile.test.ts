// Checks what the Dockerfile claims without a Docker engine: its base images, the paths it
// copies, a non-root numeric user, the entrypoint; and that the production install it makes
// (`npm ci --omit=dev` + the compiled build) runs `stackflux version`.
// npm test: uses no test environment
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { PACKAGED_ENGINE } from '../../../controller/rendering/goengine/locate.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const dockerfile = readFileSync(join(root, 'Dockerfile'), 'utf8');
const lines = dockerfile
  .replace(/\\\n/g, ' ')
  .split('\n')
  .map((l) => l.trim())
  .filter((l) => l !== '' && !l.startsWith('#'));
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };

describe('Dockerfile', () => {
  const work = mkdtempSync(join(tmpdir(), 'stackflux-image-'));
  after(() => rmSync(work, { recursive: true, force: true }));

  it('is multi-stage on Node 24 slim, installs git, runs as a numeric non-root user, entrypoint stackflux run', () => {
    const froms = lines.filter((l) => l.startsWith('FROM '));
    assert.ok(froms.length >= 2, 'multi-stage');
    // Node 24 slim for every stage that builds or runs stackflux; a Go stage only builds the Go
    // engine (goengine.wasm), at the Go version the repository's modules are built with.
    for (const f of froms) assert.match(f, /^FROM (node:24-slim\b|golang:1\.26 AS goengine$)/);
    assert.match(froms.at(-1) ?? '', /^FROM node:24-slim$/, 'the image runs on Node 24 slim');
    assert.ok(
      lines.some((l) => /apt-get install .*\bgit\b/.test(l)),
      'git installed',
    );
    const user = lines.filter((l) => l.startsWith('USER ')).at(-1);
    assert.match(user ?? '', /^USER [1-9][0-9]*(:[0-9]+)?$/, 'numeric non-root user');
    assert.match(lines.find((l) => l.startsWith('ENTRYPOINT')) ?? '', /bin\/stackflux\.js/);
    assert.match(lines.find((l) => l.startsWith('CMD')) ?? '', /"run"/);
    assert.ok(
      lines.some((l) => /npm ci --omit=dev/.test(l)),
      'production dependencies only',
    );
    assert.ok(
      lines.some((l) => l.startsWith('VOLUME') && l.includes('/var/cache/stackflux')),
      'declared cache dir',
    );
  });

  it('copies only paths that exist in the repository or in an earlier stage', () => {
    for (const l of lines.filter((x) => x.startsWith('COPY ') && !x.includes('--from='))) {
      const parts = l.split(/\s+/).slice(1);
      for (const src of parts.slice(0, -1))
        assert.ok(existsSync(join(root, src)), `COPY source ${src} exists`);
    }
    const fromBuild = lines.filter((x) => x.startsWith('COPY --from=build'));
    assert.ok(
      fromBuild.some((l) => l.includes('/src/dist')),
      'the build output is copied',
    );
  });

  it('puts the Go engine where the locator looks next to the build output, as the npm package does', () => {
    const workdir = lines.filter((l) => l.startsWith('WORKDIR ')).at(-1);
    assert.equal(workdir, 'WORKDIR /app');
    assert.ok(
      lines.some((l) => l === 'COPY --from=build /src/dist ./dist'),
      'the build output is /app/dist',
    );
    const engine = lines.find((l) => l.startsWith('COPY --from=goengine '));
    // locate.ts: <code root>/goengine/goengine.wasm, the code root of the build output being dist/
    assert.equal(engine?.split(/\s+/).at(-1), `./${join('dist', PACKAGED_ENGINE)}`);
  });

  it('the production install runs "stackflux version"', () => {
    // The image's build stage: compile with the dev dependencies (this checkout's, linked).
    const build = join(work, 'build');
    const app = join(work, 'app');
    mkdirSync(build);
    mkdirSync(app);
    for (const f of ['package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json']) {
      cpSync(join(root, f), join(build, f));
    }
    cpSync(join(root, 'controller'), join(build, 'controller'), { recursive: true });
    symlinkSync(join(root, 'node_modules'), join(build, 'node_modules'));
    execFileSync(
      process.execPath,
      [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'],
      {
        cwd: build,
        stdio: 'pipe',
      },
    );
    assert.ok(
      existsSync(join(build, 'dist', 'controller', 'cli', 'main.js')),
      'tsc wrote dist/controller/cli/main.js',
    );
    // The deps and final stages: production dependencies only, plus what the final stage copies.
    for (const f of ['package.json', 'package-lock.json']) cpSync(join(root, f), join(app, f));
    execFileSync('npm', ['ci', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund'], {
      cwd: app,
      stdio: 'pipe',
    });
    assert.ok(!existsSync(join(app, 'node_modules', 'typescript')), 'no dev dependencies');
    cpSync(join(build, 'dist'), join(app, 'dist'), { recursive: true });
    for (const d of ['bin', 'crds', 'flux-templates'])
      cpSync(join(root, d), join(app, d), { recursive: true });
    const out = execFileSync(process.execPath, [join(app, 'bin', 'stackflux.js'), 'version'], {
      cwd: app,
      encoding: 'utf8',
    });
    assert.match(out, new RegExp(`^stackflux ${pkg.version.replaceAll('.', '\\.')} `));
  });
});
