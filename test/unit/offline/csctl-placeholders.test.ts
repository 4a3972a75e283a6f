// Issue 32: a csctl stack folder at a Git tag renders offline as csctl create would have released
// it. The golden cases csctl-placeholders (csctl's `<< .ClusterClassVersion >>` placeholders) and
// csctl-stale-metadata (an earlier release's metadata.yaml in the folder) render exactly as the same
// snapshot whose tree was first turned into what csctl releases: placeholders replaced by the test's
// own plain replacement, the folder's metadata.yaml left out (csctl writes its own).
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { ReleaseTree } from '../../../controller/api/release.ts';
import { readGoldenCase, renderCase } from '../../../controller/offline/golden.ts';
import { readSnapshot, type Snapshot } from '../../../controller/offline/snapshot.ts';
import { loadFluxTemplates } from '../../../controller/releases/flux-templates.ts';
import { binaryFilesOf, releaseTree } from '../../../controller/releases/tree.ts';
import { csctlReleasedFolder } from '../../support/csctl-substitute.ts';

const GOLDEN = join(import.meta.dirname, '..', '..', 'golden');
const templates = loadFluxTemplates();

/** The case's snapshot with the tree at `tag` replaced by `edit` of it. */
function withTree(snapshot: Snapshot, tag: string, edit: (tree: ReleaseTree) => ReleaseTree): Snapshot {
  return {
    ...snapshot,
    sources: snapshot.sources.map((s) => {
      const tree = s.trees.get(tag);
      return tree === undefined ? s : { ...s, trees: new Map([...s.trees, [tag, edit(tree)]]) };
    }),
  };
}

function caseNamed(name: string) {
  const c = readGoldenCase(join(GOLDEN, name), name);
  return { c, snapshot: readSnapshot(join(c.dir, 'input')) };
}

describe('offline render of csctl stack folders, as csctl releases them', () => {
  it('a folder with csctl placeholders renders as the folder with them replaced by the tag version', () => {
    const { c, snapshot } = caseNamed('csctl-placeholders');
    const tag = 'docker-csolegacy-1-30-v2';
    const folder = 'providers/docker/csolegacy/1-30/';
    const source = snapshot.sources[0]?.trees.get(tag);
    assert.ok(source);
    const released = csctlReleasedFolder(source, folder, 'v2');
    assert.notDeepEqual([...released], [...source], 'the fixture holds placeholders');
    assert.ok(![...released.values()].some((t) => t.includes('<< .')), 'csctl would replace them all');

    const rendered = renderCase(c, templates, { snapshot });
    const reference = renderCase(c, templates, { snapshot: withTree(snapshot, tag, () => released) });
    assert.deepEqual(rendered, reference);
    const branchFiles = [...rendered.keys()].filter((f) => f.startsWith('fleet/branches/'));
    assert.ok(
      branchFiles.includes(
        'fleet/branches/stackflux/_releases/team-a/docker-csolegacy-1-30-v2/000-clusterclass-docker-csolegacy-1-30-v2.yaml',
      ),
    );
    assert.ok(branchFiles.some((f) => f.startsWith('fleet/branches/stackflux/team-a/prod-1/cluster-addon/')));
    for (const [file, content] of rendered)
      assert.ok(!content.includes('<< '), `${file} holds a placeholder`);
  });

  it('a folder whose metadata.yaml names another version renders as the folder without it', () => {
    const { c, snapshot } = caseNamed('csctl-stale-metadata');
    const tag = 'docker-csostale-1-30-v3';
    const metadata = 'providers/docker/csostale/1-30/metadata.yaml';
    assert.match(snapshot.sources[0]?.trees.get(tag)?.get(metadata) ?? '', /clusterStack: v2/);
    const withoutMetadata = (tree: ReleaseTree) =>
      releaseTree(new Map([...tree].filter(([p]) => p !== metadata)), binaryFilesOf(tree));

    const rendered = renderCase(c, templates, { snapshot });
    assert.deepEqual(
      rendered,
      renderCase(c, templates, { snapshot: withTree(snapshot, tag, withoutMetadata) }),
    );
    assert.ok(
      rendered.has(
        'fleet/branches/stackflux/_releases/team-a/docker-csostale-1-30-v3/000-clusterclass-docker-csostale-1-30-v3.yaml',
      ),
    );
  });
});
