// A csctl release as csctl packages and publishes it (GitHub release assets, one OCI artifact's
// layers) turned into the release tree the csctl format reads, without I/O. What csctl writes
// (csctl pkg/cmd/create.go, pkg/template/package.go):
//
//   <provider>-<name>-<major>-<minor>-cluster-class-<version>.tgz   `helm package` of cluster-class/
//                                   (one top folder, the chart's name; Chart.yaml version = release)
//   <provider>-<name>-<major>-<minor>-cluster-addon-<addon version>.tgz
//                                   stages layout: a plain tar of cluster-addon/'s contents;
//                                   old layout: `helm package` of the umbrella chart cluster-addon/
//   clusteraddon.yaml (stages) or cluster-addon-values.yaml (old layout, already <<templated>>)
//   metadata.yaml, hashes.json      versions / the source hashes csctl compares releases by
//   node-images.yaml, *-node-image-*.tgz   the provider plugin's (read by a provider, not here)
//
// CSO finds the two archives by these names with the versions of metadata.yaml
// (pkg/release/release.go); so does this. The tree is laid out as the stack's source is:
// cluster-class/, cluster-addon/ and the files at the root (no csctl.yaml: the packaged release
// is told apart by its metadata.yaml, controller/releases/csctl/index.ts), so the same release
// published as a Git tag or as assets renders the same. Every archive is hostile input: bounded,
// checked path by path, plain files and folders only (controller/releases/tarball.ts).
import type { ReleaseTree } from '../../api/release.ts';
import { RELEASE_TREE_LIMITS, type ReleaseTreeLimits, SourceError } from '../../sources/contract.ts';
import { pathProblem } from '../paths.ts';
import { readTarGz, TarError, type TarFile } from '../tarball.ts';
import { releaseTreeFromBytes } from '../tree.ts';
import {
  CLUSTER_ADDON_CONFIG_FILE,
  CLUSTER_ADDON_DIR,
  CLUSTER_ADDON_VALUES_FILE,
  CLUSTER_CLASS_DIR,
  METADATA_FILE,
  parseCsctlMetadata,
} from './index.ts';

export const HASHES_FILE = 'hashes.json';
/** The provider plugin's node image list (openstack), beside the release's own assets. */
export const NODE_IMAGES_FILE = 'node-images.yaml';

const CLUSTER_CLASS_ASSET = /^(?<prefix>[a-z0-9][a-z0-9-]*)-cluster-class-(?<version>[^/]+)\.tgz$/;
const CLUSTER_ADDON_ASSET = /^(?<prefix>[a-z0-9][a-z0-9-]*)-cluster-addon-(?<version>[^/]+)\.tgz$/;
const NODE_IMAGE_ASSET = /^[a-z0-9][a-z0-9-]*-node-image-[^/]+\.tgz$/;
const ROOT_FILES = new Set([
  METADATA_FILE,
  HASHES_FILE,
  CLUSTER_ADDON_CONFIG_FILE,
  CLUSTER_ADDON_VALUES_FILE,
]);

/** What a csctl release asset is, by its name as csctl writes it; undefined: not a csctl asset. */
export type CsctlAssetKind = 'cluster-class' | 'cluster-addon' | 'root-file' | 'provider';

export function csctlAssetKind(name: string): CsctlAssetKind | undefined {
  if (ROOT_FILES.has(name)) return 'root-file';
  if (CLUSTER_CLASS_ASSET.test(name)) return 'cluster-class';
  if (CLUSTER_ADDON_ASSET.test(name)) return 'cluster-addon';
  if (name === NODE_IMAGES_FILE || NODE_IMAGE_ASSET.test(name)) return 'provider';
  return undefined;
}

/**
 * Whether a set of asset names is a csctl release (a metadata.yaml and a cluster-class archive):
 * a GitHub release without them is read from its Git tag instead.
 */
export function isCsctlAssetSet(names: Iterable<string>): boolean {
  const all = [...names];
  return all.includes(METADATA_FILE) && all.some((n) => csctlAssetKind(n) === 'cluster-class');
}

function invalid(message: string): SourceError {
  return new SourceError('InvalidRelease', message);
}

/** The files of one archive asset, the asset named in every error. */
function unpack(name: string, bytes: Uint8Array, limits: ReleaseTreeLimits): TarFile[] {
  try {
    // Headers and padding take at most two blocks per entry beyond the files' own bytes.
    return readTarGz(bytes, {
      maxEntries: limits.maxFiles * 2 + 16,
      maxUnpackedBytes: limits.maxBytes + (limits.maxFiles * 2 + 16) * 1024,
    });
  } catch (err) {
    if (err instanceof TarError) throw invalid(`release asset ${name}: ${err.message}`);
    throw err;
  }
}

/** A Helm package's files below its one top folder (the chart), without that folder. */
function chartPackageFiles(name: string, files: TarFile[]): TarFile[] {
  const tops = new Set(files.map((f) => f.path.split('/')[0]));
  const [top] = tops;
  if (tops.size !== 1 || top === undefined || !files.some((f) => f.path === `${top}/Chart.yaml`))
    throw invalid(
      `release asset ${name}: expected a Helm package (one folder holding Chart.yaml), found ${tops.size === 1 ? `folder ${top} without Chart.yaml` : `${tops.size} top-level entries`}`,
    );
  return files.map((f) => ({ path: f.path.slice(top.length + 1), data: f.data }));
}

/**
 * The release tree of a csctl release given as its assets {file name → bytes}. Throws
 * SourceError('InvalidRelease', …) naming the asset and what is wrong: an unknown or missing
 * asset, an archive that is not gzip/tar, an entry that is a link or device or escapes its folder,
 * a tree over `limits`, archive names that do not carry metadata.yaml's versions.
 */
export function releaseTreeFromCsctlAssets(
  assets: ReadonlyMap<string, Uint8Array>,
  limits: ReleaseTreeLimits = RELEASE_TREE_LIMITS,
): ReleaseTree {
  let clusterClass: [string, Uint8Array] | undefined;
  let clusterAddon: [string, Uint8Array] | undefined;
  const rootFiles: [string, Uint8Array][] = [];
  for (const [name, bytes] of [...assets].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const problem = pathProblem(name);
    if (problem !== undefined || name.includes('/'))
      throw invalid(`release asset ${JSON.stringify(name)}: not a plain file name`);
    const kind = csctlAssetKind(name);
    if (kind === undefined)
      throw invalid(
        `release asset ${name} is not one csctl publishes (expected <stack>-cluster-class-<version>.tgz, <stack>-cluster-addon-<version>.tgz, ${[...ROOT_FILES].join(', ')}, node images)`,
      );
    if (kind === 'root-file') rootFiles.push([name, bytes]);
    else if (kind === 'cluster-class' || kind === 'cluster-addon') {
      const held = kind === 'cluster-class' ? clusterClass : clusterAddon;
      if (held !== undefined)
        throw invalid(`release assets ${held[0]} and ${name}: a release has one ${kind} archive`);
      if (kind === 'cluster-class') clusterClass = [name, bytes];
      else clusterAddon = [name, bytes];
    }
  }
  const stages = assets.has(CLUSTER_ADDON_CONFIG_FILE);
  const missing = [
    ...(assets.has(METADATA_FILE) ? [] : [METADATA_FILE]),
    ...(clusterClass === undefined ? ['<stack>-cluster-class-<version>.tgz'] : []),
    ...(clusterAddon === undefined ? ['<stack>-cluster-addon-<version>.tgz'] : []),
    ...(stages || assets.has(CLUSTER_ADDON_VALUES_FILE)
      ? []
      : [`${CLUSTER_ADDON_CONFIG_FILE} or ${CLUSTER_ADDON_VALUES_FILE}`]),
  ];
  if (missing.length > 0 || clusterClass === undefined || clusterAddon === undefined)
    throw invalid(`the csctl release lacks the asset${missing.length > 1 ? 's' : ''} ${missing.join(', ')}`);

  checkAssetNames(assets.get(METADATA_FILE) ?? new Uint8Array(), clusterClass[0], clusterAddon[0]);

  const files: [string, Uint8Array][] = [...rootFiles];
  for (const f of chartPackageFiles(clusterClass[0], unpack(clusterClass[0], clusterClass[1], limits)))
    files.push([`${CLUSTER_CLASS_DIR}${f.path}`, f.data]);
  const addonFiles = unpack(clusterAddon[0], clusterAddon[1], limits);
  // Stages: csctl tars cluster-addon/'s contents; the old layout is a Helm package of it.
  for (const f of stages ? addonFiles : chartPackageFiles(clusterAddon[0], addonFiles))
    files.push([`${CLUSTER_ADDON_DIR}${f.path}`, f.data]);

  const bytes = files.reduce((sum, [, data]) => sum + data.byteLength, 0);
  if (files.length > limits.maxFiles)
    throw invalid(`the csctl release unpacks to ${files.length} files (limit ${limits.maxFiles})`);
  if (bytes > limits.maxBytes)
    throw invalid(`the csctl release unpacks to ${bytes} bytes (limit ${limits.maxBytes})`);
  return releaseTreeFromBytes(files);
}

/**
 * The archive names carry metadata.yaml's versions and one stack prefix ending in its
 * Kubernetes major-minor, as CSO looks them up; a mismatch is a release put together wrongly.
 */
function checkAssetNames(metadataBytes: Uint8Array, classAsset: string, addonAsset: string): void {
  const metadata = parseCsctlMetadata(Buffer.from(metadataBytes).toString('utf8'));
  if (!metadata.ok) throw invalid(`release asset ${METADATA_FILE}: ${metadata.errors.join('; ')}`);
  const m = metadata.value;
  const cls = CLUSTER_CLASS_ASSET.exec(classAsset)?.groups ?? {};
  const addon = CLUSTER_ADDON_ASSET.exec(addonAsset)?.groups ?? {};
  const errors: string[] = [];
  if (cls.version !== m.clusterStack)
    errors.push(
      `release asset ${classAsset}: its version is not ${METADATA_FILE} versions.clusterStack "${m.clusterStack}"`,
    );
  if (addon.version !== m.clusterAddon)
    errors.push(
      `release asset ${addonAsset}: its version is not ${METADATA_FILE} versions.components.clusterAddon "${m.clusterAddon}"`,
    );
  if (cls.prefix !== addon.prefix)
    errors.push(`release assets ${classAsset} and ${addonAsset} name different stacks`);
  const k8s = /^v(\d+)\.(\d+)\./.exec(m.kubernetes);
  if (k8s === null || !cls.prefix?.endsWith(`-${k8s[1]}-${k8s[2]}`))
    errors.push(
      `release asset ${classAsset}: its stack is not for ${METADATA_FILE} versions.kubernetes "${m.kubernetes}"`,
    );
  if (errors.length > 0) throw invalid(errors.join('; '));
}
