// A csctl release packaged as `csctl create` writes it (csctl pkg/cmd/create.go,
// pkg/template/package.go), for tests that publish the same release as assets (GitHub release
// assets, OCI layers) and as a Git tag. Our own implementation of those steps:
//   1. copy the stack, replacing csctl's `<< .ClusterClassVersion >>`, `<< .ClusterAddonVersion >>`,
//      `<< .NodeImageVersion >>` placeholders (in text files; csctl does it in every file);
//   2. set `version` of cluster-class/Chart.yaml (release version) and of cluster-addon/Chart.yaml
//      (addon version, old layout; csctl globs only that one file);
//   3. `helm package` (the real helm CLI) of cluster-class/ → <chart name>-<version>.tgz;
//      stages layout: a gzipped tar of cluster-addon/'s contents →
//      <provider>-<name>-<major>-<minor>-cluster-addon-<addon version>.tgz; old layout: `helm package`
//      of cluster-addon/;
//   4. clusteraddon.yaml (as in the stack, untemplated) or cluster-addon-values.yaml (templated),
//      metadata.yaml and hashes.json (csctl's hashes are of the stack's folders; here a sha256 of
//      the files, which nothing but csctl's next release compares).
import assert from 'node:assert/strict';
import { isUtf8 } from 'node:buffer';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { helmPackage } from './chartrepo.ts';
import { csctlSubstituted } from './csctl-substitute.ts';

function filesBelow(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((p) => statSync(join(dir, p)).isFile())
    .sort();
}

function setChartVersion(chartYaml: string, version: string): void {
  const doc = parseYaml(readFileSync(chartYaml, 'utf8')) as Record<string, unknown>;
  doc.version = version;
  writeFileSync(chartYaml, stringifyYaml(doc));
}

function dirHash(dir: string): string {
  const h = createHash('sha256');
  for (const p of filesBelow(dir))
    h.update(p)
      .update('\0')
      .update(readFileSync(join(dir, p)));
  return h.digest('hex');
}

/**
 * The assets of release `version` (e.g. "v1") of the csctl stack in `stackDir`: {file name → bytes}.
 * The addon and node image versions are the release version (csctl's first stable release).
 */
export function packageCsctlRelease(stackDir: string, version: string): Map<string, Uint8Array> {
  const csctl = parseYaml(readFileSync(join(stackDir, 'csctl.yaml'), 'utf8')) as {
    config: { kubernetesVersion: string; clusterStackName: string; provider: { type: string } };
  };
  const { kubernetesVersion, clusterStackName, provider } = csctl.config;
  const [major, minor] = kubernetesVersion.replace(/^v/, '').split('.');
  const stack = `${provider.type}-${clusterStackName}-${major}-${minor}`;
  const work = mkdtempSync(join(tmpdir(), 'csctl-assets-'));
  try {
    const src = join(work, 'stack');
    cpSync(stackDir, src, { recursive: true });
    for (const p of filesBelow(src)) {
      const bytes = readFileSync(join(src, p));
      if (!isUtf8(bytes)) continue;
      writeFileSync(join(src, p), csctlSubstituted(bytes.toString('utf8'), version));
    }
    const stages = filesBelow(src).includes('clusteraddon.yaml');
    setChartVersion(join(src, 'cluster-class', 'Chart.yaml'), version);
    if (!stages) setChartVersion(join(src, 'cluster-addon', 'Chart.yaml'), version);

    const out = join(work, 'release');
    mkdirSync(out);
    helmPackage(join(src, 'cluster-class'), out);
    if (stages) {
      const addonDir = join(src, 'cluster-addon');
      const entries = readdirSync(addonDir).sort();
      const tar = spawnSync(
        'tar',
        [
          '-czf',
          join(out, `${stack}-cluster-addon-${version}.tgz`),
          '--sort=name',
          '--owner=0',
          '--group=0',
          '--mtime=@0',
          '-C',
          addonDir,
          ...entries,
        ],
        { encoding: 'utf8' },
      );
      assert.equal(tar.status, 0, tar.stderr);
      cpSync(join(src, 'clusteraddon.yaml'), join(out, 'clusteraddon.yaml'));
    } else {
      helmPackage(join(src, 'cluster-addon'), out);
      cpSync(join(src, 'cluster-addon-values.yaml'), join(out, 'cluster-addon-values.yaml'));
    }
    writeFileSync(
      join(out, 'metadata.yaml'),
      stringifyYaml({
        apiVersion: 'metadata.clusterstack.x-k8s.io/v1alpha1',
        versions: {
          clusterStack: version,
          kubernetes: kubernetesVersion,
          components: { clusterAddon: version, nodeImage: version },
        },
      }),
    );
    writeFileSync(
      join(out, 'hashes.json'),
      JSON.stringify(
        {
          clusterStack: dirHash(src),
          clusterAddonDir: dirHash(join(src, 'cluster-addon')),
          clusterAddonValues: stages
            ? ''
            : createHash('sha256')
                .update(readFileSync(join(src, 'cluster-addon-values.yaml')))
                .digest('hex'),
        },
        null,
        2,
      ),
    );
    const assets = new Map<string, Uint8Array>();
    for (const p of filesBelow(out)) assets.set(basename(p), readFileSync(join(out, p)));
    return assets;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
