import { readFileSync } from 'node:fs';

interface PackageJson {
  version: string;
}

function readPackageVersion(): string {
  // Works from the source tree (controller/) and from the build output (dist/controller/).
  for (const rel of ['../package.json', '../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(rel, import.meta.url), 'utf8')) as PackageJson;
      if (typeof pkg.version === 'string') return pkg.version;
    } catch {
      // try the next location
    }
  }
  return '0.0.0-unknown';
}

export const version = readPackageVersion();
