// csctl's placeholders replaced as `csctl create` replaces them, by plain string replacement:
// independent of the controller's scanner (controller/releases/csctl/placeholders.ts), so tests
// can compare what the controller makes of a stack folder with what csctl would have released.
import { isUtf8 } from 'node:buffer';
import { cpSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ReleaseTree } from '../../controller/api/release.ts';
import { binaryFilesOf, releaseTree } from '../../controller/releases/tree.ts';

/** csctl's three placeholders in `text` replaced with `version` (first stable or hash-mode release). */
export function csctlSubstituted(text: string, version: string): string {
  return text
    .replaceAll('<< .ClusterClassVersion >>', version)
    .replaceAll('<< .ClusterAddonVersion >>', version)
    .replaceAll('<< .NodeImageVersion >>', version);
}

/** Whether csctl create releases `path` (relative to the stack folder) templated (old layout). */
function releasedByCsctl(path: string): boolean {
  return (
    path.startsWith('cluster-class/') ||
    path.startsWith('cluster-addon/') ||
    path === 'cluster-addon-values.yaml'
  );
}

/**
 * A copy of the stack folder `dir` as csctl create releases it at `version` (old layout): in a
 * temporary folder, placeholders replaced in the text files of cluster-class/, cluster-addon/ and
 * cluster-addon-values.yaml. Returns the copy's path.
 */
export function csctlReleasedCopy(dir: string, version: string): string {
  const copy = mkdtempSync(join(tmpdir(), 'csctl-released-'));
  cpSync(dir, copy, { recursive: true });
  for (const path of readdirSync(copy, { recursive: true, encoding: 'utf8' })) {
    const file = join(copy, path);
    if (!statSync(file).isFile() || !releasedByCsctl(path.split('\\').join('/'))) continue;
    const bytes = readFileSync(file);
    if (isUtf8(bytes)) writeFileSync(file, csctlSubstituted(bytes.toString('utf8'), version));
  }
  return copy;
}

/**
 * The stack folder `prefix` of `tree` as csctl create releases it at `version`: placeholders
 * replaced in its cluster-class/, cluster-addon/ and cluster-addon-values.yaml (the old layout's;
 * the fixtures using this have no clusteraddon.yaml), every other file as it is.
 */
export function csctlReleasedFolder(tree: ReleaseTree, prefix: string, version: string): ReleaseTree {
  const released = (path: string): boolean =>
    path.startsWith(prefix) && releasedByCsctl(path.slice(prefix.length));
  const text = new Map([...tree].map(([p, t]) => [p, released(p) ? csctlSubstituted(t, version) : t]));
  return releaseTree(text, binaryFilesOf(tree));
}

/** The stack folder of the golden case csctl-placeholders (old layout with csctl's placeholders), its tag and version. */
export const PLACEHOLDER_STACK = {
  dir: join(
    import.meta.dirname,
    '..',
    'golden/csctl-placeholders/input/sources/csolegacy/trees/docker-csolegacy-1-30-v2/providers/docker/csolegacy/1-30',
  ),
  tag: 'docker-csolegacy-1-30-v2',
  version: 'v2',
  releaseName: 'docker-csolegacy-1-30',
  kubernetesVersion: 'v1.30.4',
} as const;
