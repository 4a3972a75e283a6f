// Where goengine.wasm is: STACKFLUX_GO_ENGINE (the image sets it), else the build cache folder
// of hack/build-goengine.sh for the sources in this checkout. The key is computed here as the
// script computes it: sha256 over go.mod, go.sum, the *.go files (names in byte order) and the
// script, first 16 hex digits.
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const BUILD_SCRIPT = join(repoRoot, 'hack', 'build-goengine.sh');
const SOURCES = join(repoRoot, 'hack', 'goengine');

/** The cache folder build-goengine.sh builds into, or undefined without the sources (an image). */
export function goEngineBuildDir(env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (!existsSync(BUILD_SCRIPT) || !existsSync(SOURCES)) return undefined;
  const goFiles = readdirSync(SOURCES)
    .filter((f) => f.endsWith('.go'))
    .sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  const hash = createHash('sha256');
  for (const file of ['go.mod', 'go.sum', ...goFiles]) hash.update(readFileSync(join(SOURCES, file)));
  hash.update(readFileSync(BUILD_SCRIPT));
  const cache = env.XDG_CACHE_HOME || join(env.HOME || homedir(), '.cache');
  return join(cache, 'stackflux', 'goengine', hash.digest('hex').slice(0, 16));
}

/** The path of goengine.wasm to load, or an error that says how to get it. */
export function locateGoEngine(env: NodeJS.ProcessEnv = process.env): { path: string } | { error: string } {
  const fromEnv = env.STACKFLUX_GO_ENGINE;
  if (fromEnv) {
    return existsSync(fromEnv)
      ? { path: fromEnv }
      : {
          error: `STACKFLUX_GO_ENGINE names ${fromEnv}, which does not exist; build it with hack/build-goengine.sh`,
        };
  }
  const dir = goEngineBuildDir(env);
  const path = dir === undefined ? undefined : join(dir, 'goengine.wasm');
  if (path !== undefined && existsSync(path)) return { path };
  return {
    error:
      'the Go engine (goengine.wasm) is not built: run hack/build-goengine.sh (needs Go 1.26), ' +
      'or set STACKFLUX_GO_ENGINE to the path of a goengine.wasm',
  };
}
