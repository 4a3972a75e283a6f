// `node hack/build-stack-charts.ts [--check]`: packs the local subcharts of the example csctl
// stacks (hack/stack-charts/<chart>/) into the stacks' vendored charts/<chart>-<version>.tgz, as
// `helm package` lays them out (every file below a top folder named after the chart). csctl
// stacks vendor their subcharts so (SCS commits charts/*.tgz), and a renderer then needs no
// dependency resolution. The archives are byte-for-byte reproducible (sorted entries, zero
// times and owners, fixed modes), so the committed files can be checked: --check fails when one
// differs from what this script builds.
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { parse } from 'yaml';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const SOURCES = join(root, 'hack', 'stack-charts');

/** Where each subchart is vendored: stack folder → chart folders (relative to the stack) → subcharts. */
export const VENDORED: Readonly<Record<string, Readonly<Record<string, readonly string[]>>>> = {
  'docker-csoferrol-1-30': {
    'cluster-addon/cni': ['cni-config'],
    'cluster-addon/metrics': ['metrics-config'],
  },
  'docker-csoferrol-1-30-umbrella': { 'cluster-addon': ['cni-config', 'metrics-config'] },
};

function files(dir: string, prefix = ''): string[] {
  return readdirSync(dir)
    .sort()
    .flatMap((e) =>
      statSync(join(dir, e)).isDirectory() ? files(join(dir, e), `${prefix}${e}/`) : [`${prefix}${e}`],
    );
}

/** One ustar header block: a regular file, or (tests of hostile archives) another entry type. */
export function header(path: string, size: number, type = '0', linkName = ''): Buffer {
  const h = Buffer.alloc(512);
  const put = (at: number, len: number, s: string) => h.write(s, at, len, 'ascii');
  const octal = (at: number, len: number, n: number) =>
    put(at, len, `${n.toString(8).padStart(len - 1, '0')}\0`);
  if (Buffer.byteLength(path) > 100) throw new Error(`${path}: longer than 100 bytes`);
  put(0, 100, path);
  octal(100, 8, 0o644);
  octal(108, 8, 0);
  octal(116, 8, 0);
  octal(124, 12, size);
  octal(136, 12, 0);
  put(148, 8, '        ');
  put(156, 1, type);
  put(157, 100, linkName);
  put(257, 6, 'ustar\0');
  put(263, 2, '00');
  const sum = h.reduce((a, b) => a + b, 0);
  put(148, 8, `${sum.toString(8).padStart(6, '0')}\0 `);
  return h;
}

/** The chart folder as a reproducible .tgz, entries below `<chart name>/`; and its file name. */
export function packChart(dir: string): { name: string; bytes: Buffer } {
  const chart = parse(readFileSync(join(dir, 'Chart.yaml'), 'utf8')) as { name: string; version: string };
  const blocks: Buffer[] = [];
  for (const f of files(dir)) {
    const content = readFileSync(join(dir, f));
    blocks.push(
      header(`${chart.name}/${f}`, content.length),
      content,
      Buffer.alloc((512 - (content.length % 512)) % 512),
    );
  }
  blocks.push(Buffer.alloc(1024));
  return { name: `${chart.name}-${chart.version}.tgz`, bytes: gzipSync(Buffer.concat(blocks), { level: 9 }) };
}

/** Every vendored archive: path (relative to the repository) → bytes. */
export function vendoredCharts(): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  for (const [stack, charts] of Object.entries(VENDORED))
    for (const [chartDir, subcharts] of Object.entries(charts))
      for (const sub of subcharts) {
        const { name, bytes } = packChart(join(SOURCES, sub));
        out.set(join('stacks', stack, chartDir, 'charts', name), bytes);
      }
  return out;
}

if (import.meta.main) {
  const check = process.argv.includes('--check');
  let stale = 0;
  for (const [rel, bytes] of vendoredCharts()) {
    const full = join(root, rel);
    const same = existsSync(full) && readFileSync(full).equals(bytes);
    if (check) {
      if (!same) {
        stale += 1;
        process.stderr.write(`${rel} differs from what hack/build-stack-charts.ts builds\n`);
      }
    } else if (!same) {
      mkdirSync(dirname(full), { recursive: true });
      writeFileSync(full, bytes);
      process.stdout.write(`wrote ${rel}\n`);
    }
  }
  if (stale > 0) process.exit(1);
}
