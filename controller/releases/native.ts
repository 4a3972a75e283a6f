// stackflux's own release format behind the release-format interface: stack.yaml (stack.ts,
// unchanged), a plain YAML cluster-class/, Handlebars values.
import { isMap, parseDocument } from 'yaml';
import type { ReleaseTree, StackManifest } from '../api/release.ts';
import type { DescribedAddon, ReleaseFormat, StackDescription } from './description.ts';
import { addonDependencies, CLUSTER_ADDON_DIR, CLUSTER_CLASS_DIR, readRelease, STACK_FILE } from './stack.ts';

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
  // Any stack.yaml may be native (so a broken one gets stack.yaml's errors, as before there were
  // two formats); only stackflux's by content is certain: another format's own file (csctl.yaml
  // beside SCS's stack.yaml) wins over the rest.
  claims(tree) {
    const text = tree.get(STACK_FILE);
    if (text === undefined) return undefined;
    return isStackfluxStackFile(text) ? 'certain' : 'possible';
  },
  read(tree, tag) {
    const read = readRelease(tree, tag);
    return read.ok ? { ok: true, value: describeManifest(read.value, tree) } : read;
  },
};
