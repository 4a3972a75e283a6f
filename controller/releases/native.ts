// stackflux's own release format behind the release-format interface: stack.yaml (stack.ts,
// unchanged), a plain YAML cluster-class/, Handlebars values.
import { isMap, parseDocument } from 'yaml';
import type { ReleaseTree, StackManifest } from '../api/release.ts';
import type { DescribedAddon, StackDescription } from './description.ts';
import type { ReleaseFormat } from './format.ts';
import { addonDependencies, CLUSTER_ADDON_DIR, CLUSTER_CLASS_DIR, readRelease, STACK_FILE } from './stack.ts';

/** The file whose presence makes a tree a csctl (cluster-stack-operator) stack. */
const CSCTL_FILE = 'csctl.yaml';

/**
 * Whether stack.yaml is stackflux's by content: apiVersion stackflux.io/… or kind Stack. SCS's
 * own stack.yaml (provider, clusterStackName, kubernetesVersion, addons) has neither.
 */
export function isStackfluxStackFile(text: string): boolean {
  const doc = parseDocument(text, { prettyErrors: false });
  if (!isMap(doc.contents)) return false;
  const apiVersion = doc.get('apiVersion');
  return (
    (typeof apiVersion === 'string' && apiVersion.startsWith('stackflux.io/')) || doc.get('kind') === 'Stack'
  );
}

/** The description of a valid stack.yaml. */
export function describeManifest(manifest: StackManifest, tree: ReleaseTree): StackDescription {
  const deps = addonDependencies(manifest);
  const addons = manifest.addons.map((a): DescribedAddon => {
    const path = `${CLUSTER_ADDON_DIR}${a.name}/`;
    return {
      name: a.name,
      action: 'apply',
      dependsOn: deps.get(a.name) ?? [],
      ...(a.targetNamespace !== undefined ? { targetNamespace: a.targetNamespace } : {}),
      path,
      content: a.chart !== undefined || tree.has(`${path}Chart.yaml`) ? 'helm-chart' : 'files',
      ...(a.chart !== undefined ? { chart: a.chart } : {}),
    };
  });
  return {
    format: 'native',
    provider: manifest.provider,
    name: manifest.name,
    kubernetesVersion: manifest.kubernetesVersion,
    version: manifest.version,
    addons,
    clusterClass: { kind: 'yaml-folder', path: CLUSTER_CLASS_DIR },
    valuesTemplating: 'handlebars',
    manifest,
  };
}

export const nativeFormat: ReleaseFormat = {
  name: 'native',
  // Without a csctl.yaml every tree is read as native, as before there were two formats (so a
  // broken or missing stack.yaml gets stack.yaml's errors); beside one, only a stackflux stack.yaml.
  claims(tree) {
    const text = tree.get(STACK_FILE);
    if (text === undefined) return false;
    return !tree.has(CSCTL_FILE) || isStackfluxStackFile(text);
  },
  read(tree, tag) {
    const read = readRelease(tree, tag);
    return read.ok ? { ok: true, value: describeManifest(read.value, tree) } : read;
  },
};
