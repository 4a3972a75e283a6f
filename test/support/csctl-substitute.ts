// csctl's placeholders replaced as `csctl create` replaces them, by plain string replacement:
// independent of the controller's scanner (controller/releases/csctl/placeholders.ts), so tests
// can compare what the controller makes of a stack folder with what csctl would have released.
import type { ReleaseTree } from '../../controller/api/release.ts';
import { binaryFilesOf, releaseTree } from '../../controller/releases/tree.ts';

/** csctl's three placeholders in `text` replaced with `version` (first stable or hash-mode release). */
export function csctlSubstituted(text: string, version: string): string {
  return text
    .replaceAll('<< .ClusterClassVersion >>', version)
    .replaceAll('<< .ClusterAddonVersion >>', version)
    .replaceAll('<< .NodeImageVersion >>', version);
}

/**
 * The stack folder `prefix` of `tree` as csctl create releases it at `version`: placeholders
 * replaced in its cluster-class/, cluster-addon/ and cluster-addon-values.yaml (the old layout's;
 * the fixtures using this have no clusteraddon.yaml), every other file as it is.
 */
export function csctlReleasedFolder(tree: ReleaseTree, prefix: string, version: string): ReleaseTree {
  const released = (path: string): boolean =>
    ['cluster-class/', 'cluster-addon/'].some((dir) => path.startsWith(`${prefix}${dir}`)) ||
    path === `${prefix}cluster-addon-values.yaml`;
  const text = new Map([...tree].map(([p, t]) => [p, released(p) ? csctlSubstituted(t, version) : t]));
  return releaseTree(text, binaryFilesOf(tree));
}
