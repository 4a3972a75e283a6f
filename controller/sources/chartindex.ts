// A chart repository's index.yaml read in a child process: a real index is megabytes of YAML
// (about a second per 2 MB here), which must not hold the controller's event loop (Lease
// renewal, /healthz) or its heap; a child under a heap cap and a deadline costs only itself, as
// the render processes do (../rendering/bounded.ts). Input: the index on stdin, the wanted
// charts as JSON in argv; output: the picks as JSON on stdout.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { type IndexPick, pickIndexEntries } from '../releases/chartdeps.ts';

const SELF = fileURLToPath(import.meta.url);
/** The parser's heap: the largest index allowed (CHART_FETCH_LIMITS) parses well within it. */
const MAX_HEAP_MB = 512;

/** The entries Helm picks for `wanted` from `index`, read by a child process within `timeoutMs`. */
export function pickFromIndex(
  index: Uint8Array,
  wanted: readonly { name: string; version: string }[],
  timeoutMs: number,
): Promise<IndexPick[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [`--max-old-space-size=${MAX_HEAP_MB}`, SELF, JSON.stringify(wanted)],
      {
        stdio: ['pipe', 'pipe', 'ignore'],
        timeout: timeoutMs,
      },
    );
    const out: Buffer[] = [];
    child.stdout.on('data', (d: Buffer) => out.push(d));
    child.stdin.on('error', () => undefined);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      if (code === 0) {
        try {
          resolve(JSON.parse(Buffer.concat(out).toString('utf8')) as IndexPick[]);
          return;
        } catch {
          // fall through: no usable answer
        }
      }
      const why =
        signal === 'SIGTERM'
          ? `not read within ${timeoutMs / 1000} s`
          : 'could not be read (too large or malformed)';
      resolve(wanted.map(() => ({ ok: false, reason: `index.yaml ${why}` })));
    });
    child.stdin.end(index);
  });
}

if (import.meta.main) {
  const wanted = JSON.parse(process.argv[2] ?? '[]') as { name: string; version: string }[];
  const chunks: Buffer[] = [];
  process.stdin.on('data', (d: Buffer) => chunks.push(d));
  process.stdin.on('end', () => {
    process.stdout.write(JSON.stringify(pickIndexEntries(Buffer.concat(chunks).toString('utf8'), wanted)));
  });
}
