// A Helm HTTP chart repository for tests: small charts written here, packaged by the real
// `helm package`, indexed by `helm repo index` (relative URLs, sha256 digests), served by a static
// file server on 127.0.0.1 — which is all a Helm HTTP repository is. Plus two paths a hostile
// repository could answer with: /loop redirects to itself forever, /big is larger than any cap.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runHelm } from './goengine.ts';

/** Writes a chart whose one ConfigMap shows the chart's name (an alias shows as the name) and version. */
export function writeChart(dir: string, name: string, version: string): void {
  mkdirSync(join(dir, 'templates'), { recursive: true });
  writeFileSync(join(dir, 'Chart.yaml'), `apiVersion: v2\nname: ${name}\nversion: ${version}\n`);
  writeFileSync(join(dir, 'values.yaml'), 'greeting: hello\n');
  writeFileSync(
    join(dir, 'templates', 'configmap.yaml'),
    [
      'apiVersion: v1',
      'kind: ConfigMap',
      'metadata:',
      '  name: {{ .Chart.Name }}-{{ .Release.Name }}',
      '  namespace: {{ .Release.Namespace }}',
      'data:',
      '  version: {{ .Chart.Version | quote }}',
      '  greeting: {{ .Values.greeting | quote }}',
      '',
    ].join('\n'),
  );
}

/** `helm package` of the chart in `chartDir` into `outDir`; the archive's path. */
export function helmPackage(chartDir: string, outDir: string): string {
  const res = runHelm(['package', chartDir, '--destination', outDir], outDir);
  assert.equal(res.status, 0, res.stderr);
  return res.stdout.trim().split(': ').at(-1) ?? '';
}

/** The static file server (argv: folder, request log, port or 0); prints its port. */
const SERVER = `
const { appendFileSync, readFileSync } = require('node:fs');
const { join, normalize } = require('node:path');
const [dir, log, port] = process.argv.slice(1);
const server = require('node:http').createServer((req, res) => {
  const path = new URL(req.url ?? '/', 'http://x').pathname;
  appendFileSync(log, path + '\\n');
  if (path === '/loop/index.yaml') return res.writeHead(302, { location: '/loop/index.yaml' }).end();
  if (path.startsWith('/slow')) return; // never answers: the client's deadline must end it
  if (path === '/big/index.yaml') {
    res.writeHead(200, { 'content-type': 'text/yaml' });
    return res.end('apiVersion: v1\\n#' + 'x'.repeat(2 * 1024 * 1024) + '\\n');
  }
  const rel = normalize(path).replace(/^\\/charts\\//, '');
  if (!path.startsWith('/charts/') || rel.includes('..')) return res.writeHead(404).end();
  try {
    res.writeHead(200).end(readFileSync(join(dir, rel)));
  } catch {
    res.writeHead(404).end();
  }
});
server.listen(Number(port), '127.0.0.1', () => process.stdout.write(server.address().port + '\\n'));
`;

export interface ChartRepository {
  /** The repository URL (http://127.0.0.1:<port>/charts). */
  url: string;
  /** The folder served at /charts (index.yaml and the archives). */
  dir: string;
  /** Requests the server answered, by path. */
  requests(): string[];
  close(): Promise<void>;
}

/**
 * Packages `charts` (name → versions, written by writeChart) and the charts in `chartDirs` as they
 * are, indexes them and serves them on `port` (0: any free one); close() when done.
 */
export async function serveChartRepository(
  charts: Record<string, string[]>,
  chartDirs: readonly string[] = [],
  port = 0,
): Promise<ChartRepository> {
  const work = mkdtempSync(join(tmpdir(), 'chartrepo-'));
  const dir = join(work, 'charts');
  mkdirSync(dir);
  for (const [name, versions] of Object.entries(charts))
    for (const version of versions) {
      const src = join(work, 'src', `${name}-${version}`);
      writeChart(src, name, version);
      helmPackage(src, dir);
    }
  for (const chartDir of chartDirs) helmPackage(chartDir, dir);
  const indexed = runHelm(['repo', 'index', dir], work);
  assert.equal(indexed.status, 0, indexed.stderr);
  // In a child process: the helm CLI runs synchronously (spawnSync), which would stall a server
  // in this process.
  const log = join(work, 'requests.log');
  writeFileSync(log, '');
  const server = spawn(process.execPath, ['-e', SERVER, dir, log, String(port)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const listening = await new Promise<number>((resolve, reject) => {
    server.once('error', reject);
    server.stdout.once('data', (d: Buffer) => resolve(Number(d.toString().trim())));
  });
  return {
    url: `http://127.0.0.1:${listening}/charts`,
    dir,
    requests: () =>
      readFileSync(log, 'utf8')
        .split('\n')
        .filter((l) => l !== ''),
    close: () =>
      new Promise((resolve) => {
        server.once('exit', () => resolve());
        server.kill();
      }),
  };
}
