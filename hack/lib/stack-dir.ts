// A stack folder on disk read as the release tree the controller would fetch at a tag: regular
// files only (no symbolic links), checked paths, the controller's tree limits, binary files kept.
import { lstatSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ReleaseTree } from '../../controller/api/release.ts';
import { CSCTL_FILE, parseCsctlConfig } from '../../controller/releases/csctl/index.ts';
import { pathProblem } from '../../controller/releases/paths.ts';
import { parseStackManifest, STACK_FILE } from '../../controller/releases/stack.ts';
import { formatReleaseTag } from '../../controller/releases/tags.ts';
import { releaseTreeFromBytes } from '../../controller/releases/tree.ts';
import { RELEASE_TREE_LIMITS } from '../../controller/sources/git.ts';

/** The files below dir as a release tree; throws naming the first path that a release may not hold. */
export function readStackDir(dir: string, limits = RELEASE_TREE_LIMITS): ReleaseTree {
  const files: [string, Buffer][] = [];
  let bytes = 0;
  const walk = (rel: string): void => {
    for (const name of readdirSync(rel === '' ? dir : join(dir, rel)).sort()) {
      const path = rel === '' ? name : `${rel}/${name}`;
      const problem = pathProblem(path);
      if (problem !== undefined) throw new Error(problem);
      const st = lstatSync(join(dir, path));
      if (st.isDirectory()) walk(path);
      else if (!st.isFile()) throw new Error(`${path} is not a regular file or folder`);
      else {
        bytes += st.size;
        if (files.length >= limits.maxFiles) throw new Error(`more than ${limits.maxFiles} files`);
        if (bytes > limits.maxBytes) throw new Error(`more than ${limits.maxBytes} bytes`);
        files.push([path, readFileSync(join(dir, path))]);
      }
    }
  };
  walk('');
  return releaseTreeFromBytes(files);
}

/**
 * The tag a stack folder would be released under, from its own files: csctl.yaml (version
 * `version`, as csctl's Chart.yaml versions are placeholders) or stackflux's stack.yaml.
 */
export function tagOfStackDir(tree: ReleaseTree, version = 'v1'): string | undefined {
  const csctl = tree.get(CSCTL_FILE);
  const stack = tree.get(STACK_FILE);
  const csctlConfig = csctl === undefined ? undefined : parseCsctlConfig(csctl);
  if (csctlConfig?.ok === true) {
    const k8s = /^v(\d+\.\d+)\./.exec(csctlConfig.value.kubernetesVersion)?.[1] ?? '';
    return formatReleaseTag(csctlConfig.value.providerType, csctlConfig.value.clusterStackName, k8s, version);
  }
  const manifest = stack === undefined ? undefined : parseStackManifest(stack);
  if (manifest?.ok === true) {
    const k8s = /^v(\d+\.\d+)\./.exec(manifest.value.kubernetesVersion)?.[1] ?? '';
    return formatReleaseTag(manifest.value.provider, manifest.value.name, k8s, manifest.value.version);
  }
  return undefined;
}
