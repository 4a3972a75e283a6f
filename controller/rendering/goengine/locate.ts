// Where goengine.wasm is, first found wins:
//   1. STACKFLUX_GO_ENGINE, an explicit override (a path that must exist);
//   2. the packaged engine next to the running code, <code root>/goengine/goengine.wasm: from the
//      build output that is dist/goengine/goengine.wasm, which `npm pack` (the prepack script,
//      hack/pack-goengine.sh) and the container image (Dockerfile) put there. Users of an
//      installed package or the image have no Go and no hack/, so the engine ships built;
//   3. in a source checkout (hack/ beside the code, or beside dist/ when running the build
//      output), the build cache folder of hack/build-goengine.sh for the sources in this checkout.
//      The key is computed here as the script computes it: sha256 over go.mod, go.sum, the *.go
//      files (names in byte order) and the script, first 16 hex digits.
// Nothing here runs the build (it needs Go and takes minutes); the error says how to build, and
// mentions the build script only where there is one.
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The folder this module's tree hangs from: the checkout when running the TypeScript
 * (controller/rendering/goengine/locate.ts), dist/ when running the build output.
 */
const CODE_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

/** Where the packaged engine sits below the code root (dist/goengine/goengine.wasm in a package). */
export const PACKAGED_ENGINE = join('goengine', 'goengine.wasm');

export interface EngineLayout {
  /** See CODE_ROOT. */
  codeRoot: string;
  exists: (path: string) => boolean;
}

const realLayout: EngineLayout = { codeRoot: CODE_ROOT, exists: existsSync };

/**
 * The source checkout holding hack/build-goengine.sh and hack/goengine/: the code root itself
 * (running the TypeScript) or, running dist/ of a checkout, its parent. Undefined in an installed
 * package or the image, which ship without hack/.
 */
export function goEngineCheckout(layout: EngineLayout = realLayout): string | undefined {
  const candidates = [layout.codeRoot];
  if (basename(layout.codeRoot) === 'dist') candidates.push(dirname(layout.codeRoot));
  return candidates.find(
    (root) =>
      layout.exists(join(root, 'hack', 'build-goengine.sh')) && layout.exists(join(root, 'hack', 'goengine')),
  );
}

/** The cache folder build-goengine.sh builds into, or undefined without the sources (package, image). */
export function goEngineBuildDir(
  env: NodeJS.ProcessEnv = process.env,
  checkout = goEngineCheckout(),
): string | undefined {
  if (checkout === undefined) return undefined;
  const script = join(checkout, 'hack', 'build-goengine.sh');
  const sources = join(checkout, 'hack', 'goengine');
  const goFiles = readdirSync(sources)
    .filter((f) => f.endsWith('.go'))
    .sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  const hash = createHash('sha256');
  for (const file of ['go.mod', 'go.sum', ...goFiles]) hash.update(readFileSync(join(sources, file)));
  hash.update(readFileSync(script));
  const cache = env.XDG_CACHE_HOME || join(env.HOME || homedir(), '.cache');
  return join(cache, 'stackflux', 'goengine', hash.digest('hex').slice(0, 16));
}

export interface EngineSearch {
  env: NodeJS.ProcessEnv;
  layout: EngineLayout;
  /** The checkout's build cache folder (goEngineBuildDir), computed only when the search gets there. */
  buildDir: (checkout: string) => string | undefined;
}

/** The search itself, over injected file checks (the unit tests give it a fake file system). */
export function searchGoEngine(search: EngineSearch): { path: string } | { error: string } {
  const { env, layout } = search;
  const fromEnv = env.STACKFLUX_GO_ENGINE;
  if (fromEnv) {
    if (layout.exists(fromEnv)) return { path: fromEnv };
    const checkout = goEngineCheckout(layout);
    const build =
      checkout === undefined ? '' : `; build it with ${join(checkout, 'hack', 'build-goengine.sh')}`;
    return { error: `STACKFLUX_GO_ENGINE names ${fromEnv}, which does not exist${build}` };
  }
  const packaged = join(layout.codeRoot, PACKAGED_ENGINE);
  if (layout.exists(packaged)) return { path: packaged };
  const checkout = goEngineCheckout(layout);
  if (checkout === undefined) {
    return {
      error:
        `the Go engine (goengine.wasm) is missing from this installation: expected ${packaged} ` +
        '(the package and the container image ship it); reinstall stackflux, or set STACKFLUX_GO_ENGINE ' +
        'to the path of a goengine.wasm',
    };
  }
  const dir = search.buildDir(checkout);
  const built = dir === undefined ? undefined : join(dir, 'goengine.wasm');
  if (built !== undefined && layout.exists(built)) return { path: built };
  return {
    error:
      `the Go engine (goengine.wasm) is not built: run ${join(checkout, 'hack', 'build-goengine.sh')} ` +
      '(needs Go 1.26), or set STACKFLUX_GO_ENGINE to the path of a goengine.wasm',
  };
}

/** The path of goengine.wasm to load, or an error that says how to get it. */
export function locateGoEngine(env: NodeJS.ProcessEnv = process.env): { path: string } | { error: string } {
  return searchGoEngine({ env, layout: realLayout, buildDir: (checkout) => goEngineBuildDir(env, checkout) });
}
