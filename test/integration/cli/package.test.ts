// The package as users get it: `npm pack` (its prepack builds dist/ and puts the Go engine in it),
// `npm install <tarball>` into an empty folder, then the installed `stackflux render` of a csctl
// stack (test/golden/csctl-class: its cluster-class is a Helm chart, rendered by the Go engine) on
// a PATH with node and no Go, and a HOME with no build cache: the engine must come from the package.
// No Kubernetes; the npm registry must be reachable (the package's dependencies). Slow: the pack
// compiles the TypeScript and the install downloads the dependencies (about 2 minutes here).
// It packs a copy of the checkout's files in a temporary folder: the prepack rewrites dist/, which
// must not happen to the checkout under a running test suite.
// npm test: uses no test environment
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { diffFiles } from '../../../controller/offline/golden.ts';
import { readFiles } from '../../../controller/offline/output.ts';

const REPO = new URL('../../../', import.meta.url).pathname;
const CASE = join(REPO, 'test', 'golden', 'csctl-class');
/** What `npm pack` needs: package.json's files, the build's inputs, the engine's build inputs. */
const PACK_INPUTS = [
  'package.json',
  'package-lock.json',
  'README.md',
  'tsconfig.json',
  'tsconfig.build.json',
  'bin',
  'controller',
  'crds',
  'flux-templates',
  'hack/build-goengine.sh',
  'hack/pack-goengine.sh',
  'hack/goengine',
];

/** node's folder, /usr/bin and /bin: a PATH without Go (asserted), as on a user's machine. */
function pathWithoutGo(): string {
  const dirs = [dirname(process.execPath), '/usr/bin', '/bin'];
  for (const d of dirs)
    assert.ok(!existsSync(join(d, 'go')), `${d} holds a go binary; this test needs a PATH without Go`);
  return dirs.join(':');
}

describe('the npm package', { timeout: 15 * 60_000 }, () => {
  const work = mkdtempSync(join(tmpdir(), 'sf-package-'));
  const src = join(work, 'src');
  const app = join(work, 'app');
  let tarball = '';

  before(() => {
    for (const p of PACK_INPUTS) cpSync(join(REPO, p), join(src, p), { recursive: true });
    // tsc for the prepack, not copied
    symlinkSync(join(REPO, 'node_modules'), join(src, 'node_modules'), 'dir');
    const packDir = join(work, 'pack');
    mkdirSync(packDir);
    execFileSync('npm', ['pack', '--pack-destination', packDir], {
      cwd: src,
      stdio: 'pipe', // npm's notices only in the error of a failed command
      maxBuffer: 64 * 2 ** 20,
    });
    const [name] = readdirSync(packDir).filter((f) => f.endsWith('.tgz'));
    assert.ok(name, 'npm pack wrote no tarball');
    tarball = join(packDir, name);
    mkdirSync(app);
    writeFileSync(
      join(app, 'package.json'),
      `${JSON.stringify({ name: 'sf-package-user', private: true })}\n`,
    );
    execFileSync('npm', ['install', '--no-audit', '--no-fund', '--offline=false', tarball], {
      cwd: app,
      stdio: 'pipe', // npm's notices only in the error of a failed command
      maxBuffer: 64 * 2 ** 20,
    });
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  it('holds the build output and the Go engine, and no hack/, test/ or TypeScript sources', () => {
    const listed = execFileSync('tar', ['-tzf', tarball], { encoding: 'utf8' }).split('\n').filter(Boolean);
    assert.ok(
      listed.includes('package/dist/goengine/goengine.wasm'),
      'dist/goengine/goengine.wasm is packed',
    );
    assert.ok(listed.includes('package/dist/controller/cli/main.js'));
    assert.ok(listed.includes('package/bin/stackflux.js'));
    assert.ok(listed.includes('package/flux-templates/release-gitrepository.yaml'));
    for (const f of listed)
      assert.doesNotMatch(f, /^package\/(hack|test|controller|stacks|node_modules)\//, f);
    // postpack took the engine out of the copy's dist/ again
    assert.ok(!existsSync(join(src, 'dist', 'goengine')));
  });

  it('`stackflux render` of the installed package renders a csctl stack with no Go and no build cache', () => {
    const installed = join(app, 'node_modules', 'stackflux');
    assert.ok(!existsSync(join(installed, 'hack')));
    const home = join(work, 'home');
    mkdirSync(home);
    const out = join(work, 'out');
    const run = spawnSync(
      join(app, 'node_modules', '.bin', 'stackflux'),
      [
        'render',
        '--input-dir',
        join(CASE, 'input'),
        '--output-dir',
        out,
        '--now',
        '2025-03-02T12:00:00Z',
        '--controllers',
        'clusterstack,clusterstackrelease',
      ],
      // No STACKFLUX_GO_ENGINE, no XDG_CACHE_HOME, an empty HOME: only the packaged engine.
      { cwd: app, env: { PATH: pathWithoutGo(), HOME: home }, encoding: 'utf8' },
    );
    assert.equal(run.status, 0, `stackflux render failed:\n${run.stderr}${run.stdout}`);
    assert.match(run.stderr, /rendered 6 mutation\(s\), 1 fleet branch\(es\) changed/);
    const got = readFiles(out);
    const branch = 'fleet/branches/stackflux/_releases/team-a/docker-csoferrol-1-30-v1';
    const clusterClass = got.get(`${branch}/000-clusterclass-docker-csoferrol-1-30-v1.yaml`);
    assert.ok(clusterClass, 'the ClusterClass rendered from the Helm chart is on the release branch');
    assert.equal((JSON.parse(clusterClass) as { kind: string }).kind, 'ClusterClass');
    for (const kind of ['dockerclustertemplate', 'dockermachinetemplate', 'kubeadmconfigtemplate']) {
      assert.ok(
        [...got.keys()].some((k) => k.startsWith(`${branch}/`) && k.includes(`-${kind}-`)),
        `${kind} on the release branch`,
      );
    }
    assert.deepEqual(
      diffFiles(readFiles(join(CASE, 'expected')), got),
      [],
      'output differs from the golden case',
    );
  });
});
