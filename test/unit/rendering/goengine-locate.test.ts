// Where goengine.wasm is looked for, in order: STACKFLUX_GO_ENGINE, the packaged engine next to the
// running code (dist/goengine/goengine.wasm of a package or the image), the checkout's build cache.
// Pure: the file system is a set of paths.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import {
  type EngineLayout,
  goEngineCheckout,
  locateGoEngine,
  searchGoEngine,
} from '../../../controller/rendering/goengine/locate.ts';

const CACHE = '/home/u/.cache/stackflux/goengine/0123456789abcdef';

function checkoutFiles(root: string): string[] {
  return [join(root, 'hack', 'build-goengine.sh'), join(root, 'hack', 'goengine')];
}

function search(codeRoot: string, files: string[], env: NodeJS.ProcessEnv = {}) {
  const present = new Set(files);
  const layout: EngineLayout = { codeRoot, exists: (p) => present.has(p) };
  const asked: string[] = [];
  const result = searchGoEngine({
    env,
    layout,
    buildDir: (checkout) => {
      asked.push(checkout);
      return CACHE;
    },
  });
  return { result, asked };
}

describe('locating the Go engine', () => {
  it('STACKFLUX_GO_ENGINE comes first, even with a packaged engine and a built checkout', () => {
    const { result, asked } = search(
      '/repo/dist',
      [
        '/elsewhere/goengine.wasm',
        '/repo/dist/goengine/goengine.wasm',
        ...checkoutFiles('/repo'),
        `${CACHE}/goengine.wasm`,
      ],
      { STACKFLUX_GO_ENGINE: '/elsewhere/goengine.wasm' },
    );
    assert.deepEqual(result, { path: '/elsewhere/goengine.wasm' });
    assert.deepEqual(asked, []);
  });

  it('a STACKFLUX_GO_ENGINE that does not exist is an error, not a fallback', () => {
    const { result } = search('/repo/dist', ['/repo/dist/goengine/goengine.wasm'], {
      STACKFLUX_GO_ENGINE: '/missing.wasm',
    });
    assert.ok('error' in result);
    assert.equal(result.error, 'STACKFLUX_GO_ENGINE names /missing.wasm, which does not exist');
    const inCheckout = search('/repo', checkoutFiles('/repo'), {
      STACKFLUX_GO_ENGINE: '/missing.wasm',
    }).result;
    assert.ok('error' in inCheckout);
    assert.match(inCheckout.error, /does not exist; build it with \/repo\/hack\/build-goengine\.sh$/);
  });

  it('an installed package: dist/goengine/goengine.wasm next to the build output, no checkout needed', () => {
    const root = '/proj/node_modules/stackflux/dist';
    const { result, asked } = search(root, [`${root}/goengine/goengine.wasm`]);
    assert.deepEqual(result, { path: `${root}/goengine/goengine.wasm` });
    assert.deepEqual(asked, []);
  });

  it('the container image: /app/dist/goengine/goengine.wasm', () => {
    assert.deepEqual(search('/app/dist', ['/app/dist/goengine/goengine.wasm']).result, {
      path: '/app/dist/goengine/goengine.wasm',
    });
  });

  it('the packaged engine comes before the build cache of a checkout', () => {
    const { result, asked } = search('/repo/dist', [
      '/repo/dist/goengine/goengine.wasm',
      ...checkoutFiles('/repo'),
      `${CACHE}/goengine.wasm`,
    ]);
    assert.deepEqual(result, { path: '/repo/dist/goengine/goengine.wasm' });
    assert.deepEqual(asked, []);
  });

  it("dist/ of a checkout without a packaged engine: the checkout's (dist's parent's) build cache", () => {
    const { result, asked } = search('/repo/dist', [...checkoutFiles('/repo'), `${CACHE}/goengine.wasm`]);
    assert.deepEqual(result, { path: `${CACHE}/goengine.wasm` });
    assert.deepEqual(asked, ['/repo']);
  });

  it("running the TypeScript of a checkout: the checkout's build cache", () => {
    const { result, asked } = search('/repo', [...checkoutFiles('/repo'), `${CACHE}/goengine.wasm`]);
    assert.deepEqual(result, { path: `${CACHE}/goengine.wasm` });
    assert.deepEqual(asked, ['/repo']);
  });

  it('a checkout whose engine is not built: the error names its build script', () => {
    const { result } = search('/repo/dist', checkoutFiles('/repo'));
    assert.ok('error' in result);
    assert.match(result.error, /is not built: run \/repo\/hack\/build-goengine\.sh/);
  });

  it('a package without its engine: the error says it is missing from the installation, not how to build it', () => {
    const { result, asked } = search('/proj/node_modules/stackflux/dist', []);
    assert.ok('error' in result);
    assert.match(
      result.error,
      /missing from this installation: expected \/proj\/node_modules\/stackflux\/dist\/goengine\/goengine\.wasm/,
    );
    assert.doesNotMatch(result.error, /build-goengine/);
    assert.deepEqual(asked, []);
  });

  it('a folder named dist whose parent has no hack/ is not a checkout', () => {
    const exists = (p: string) => p.startsWith('/repo/hack');
    assert.equal(goEngineCheckout({ codeRoot: '/other/dist', exists }), undefined);
    assert.equal(goEngineCheckout({ codeRoot: '/repo/dist', exists }), '/repo');
    assert.equal(goEngineCheckout({ codeRoot: '/repo', exists }), '/repo');
  });

  it('this checkout, from its TypeScript, with an empty cache: an error naming its build script', () => {
    const located = locateGoEngine({ HOME: '/nonexistent-home' });
    assert.ok('error' in located);
    assert.match(located.error, /is not built: run .*hack\/build-goengine\.sh/);
  });
});
