// hack/lib/release-repo.ts cuts releases of both formats from stacks/ into one repository, as the
// demo does: a csctl stack is tagged as csctl names it with its files unchanged byte for byte
// (vendored charts included), a native stack is renamed to the release; each tag reads back
// through the release-format interface. Real git, a local bare repository (no test environment).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { readReleaseDescription } from '../../controller/releases/format.ts';
import { parseReleaseTag } from '../../controller/releases/tags.ts';
import { cutRelease } from '../../hack/lib/release-repo.ts';
import { readStackDir } from '../../hack/lib/stack-dir.ts';
import { ROOT } from '../support/e2e.ts';

const work = mkdtempSync(join(tmpdir(), 'stackflux-release-repo-'));
const bare = join(work, 'releases.git');
execFileSync('git', ['init', '-q', '--bare', bare]);
const cut = (stack: string, path: string, version: string, edit?: (dir: string) => void) =>
  cutRelease({
    repoUrl: bare,
    workdir: join(work, 'clone'),
    stackDir: join(ROOT, 'stacks', stack),
    path,
    version,
    ...(edit ? { edit } : {}),
  });

/** The stack folder `path` as tag `tag` holds it, read back from the bare repository as release `release`. */
function atTag(tag: string, path: string, release = tag) {
  const dir = mkdtempSync(join(work, `checkout-${tag}-`));
  execFileSync('git', ['clone', '-q', '--branch', tag, bare, dir]);
  const tree = readStackDir(join(dir, path));
  const parsed = parseReleaseTag(release);
  assert.ok(parsed.ok, `${release} parses`);
  const read = readReleaseDescription(tree, parsed.value);
  assert.ok(read.ok, read.ok ? '' : read.errors.join('; '));
  return { tree, description: read.value, dir: join(dir, path) };
}

describe('cutRelease: both release formats into one repository', () => {
  after(() => rmSync(work, { recursive: true, force: true }));

  it('tags a csctl stack as csctl names it, its files unchanged, the edit applied', () => {
    const { tag } = cut('docker-csoferrol-1-30', 'providers/docker/csoferrol', 'v1', (dir) =>
      writeFileSync(join(dir, 'cluster-class', 'templates', 'extra.yaml'), '# added by the edit\n'),
    );
    assert.equal(tag, 'docker-csoferrol-1-30-v1');
    const { tree, description, dir } = atTag(tag, 'providers/docker/csoferrol');
    assert.equal(description.format, 'csctl');
    assert.equal(description.version, 'v1');
    assert.equal(description.csctl?.layout, 'stages');
    const source = readStackDir(join(ROOT, 'stacks', 'docker-csoferrol-1-30'));
    assert.deepEqual(
      [...tree.keys()].sort(),
      [...source.keys(), 'cluster-class/templates/extra.yaml'].sort(),
    );
    for (const path of source.keys())
      assert.ok(
        readFileSync(join(dir, path)).equals(
          readFileSync(join(ROOT, 'stacks', 'docker-csoferrol-1-30', path)),
        ),
        `${path} byte for byte`,
      );
  });

  it('renames a native stack to its release beside it, leaving the csctl stack as it was', () => {
    const { tag } = cut('docker-ferrol-1-30', 'providers/docker/ferrol', 'v2');
    assert.equal(tag, 'docker-ferrol-1-30-v2');
    const { description, dir } = atTag(tag, 'providers/docker/ferrol');
    assert.equal(description.format, 'native');
    assert.equal(description.version, 'v2');
    assert.match(
      readFileSync(join(dir, 'cluster-class', 'cluster-class.yaml'), 'utf8'),
      /docker-ferrol-1-30-v2/,
    );
    const csctl = atTag(tag, 'providers/docker/csoferrol', 'docker-csoferrol-1-30-v1');
    assert.equal(csctl.description.format, 'csctl');
    assert.deepEqual(csctl.tree, atTag('docker-csoferrol-1-30-v1', 'providers/docker/csoferrol').tree);
  });
});
