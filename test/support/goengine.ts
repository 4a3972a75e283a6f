// The Go engine's builds for tests: hack/build-goengine.sh (a no-op when cached) gives the folder
// with goengine.wasm, goengine-native and the real helm CLI at the same pins.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

let built: string | undefined;

/** The build folder (builds it on a fresh machine; needs Go). */
export function goEngineBuild(): string {
  built ??= execFileSync(join(repoRoot, 'hack', 'build-goengine.sh'), {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  })
    .trim()
    .split('\n')
    .at(-1);
  if (!built) throw new Error('hack/build-goengine.sh printed no folder');
  return built;
}

/** One request through goengine-native: the parsed JSON response. */
export function runNative(request: object, maxOutputBytes = 0): Record<string, unknown> {
  const res = spawnSync(join(goEngineBuild(), 'goengine-native'), [String(maxOutputBytes)], {
    input: JSON.stringify(request),
    maxBuffer: 256 * 2 ** 20,
  });
  if (res.status !== 0) throw new Error(`goengine-native failed: ${res.stderr.toString()}`);
  return JSON.parse(res.stdout.toString()) as Record<string, unknown>;
}

const helmHome = mkdtempSync(join(tmpdir(), 'stackflux-helm-home-'));

/** The real helm CLI in cwd, with its configuration and caches in an empty temp folder. */
export function runHelm(args: string[], cwd: string): { status: number; stdout: string; stderr: string } {
  const res = spawnSync(join(goEngineBuild(), 'helm'), args, {
    cwd,
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: helmHome,
      HELM_CACHE_HOME: join(helmHome, 'cache'),
      HELM_CONFIG_HOME: join(helmHome, 'config'),
      HELM_DATA_HOME: join(helmHome, 'data'),
    },
    maxBuffer: 256 * 2 ** 20,
  });
  return { status: res.status ?? -1, stdout: res.stdout.toString(), stderr: res.stderr.toString() };
}
