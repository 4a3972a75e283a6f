// Run by test/unit/rendering/isolation.test.ts as a process of its own: renders one heap bomb in a
// RenderPool, then a good template, and prints both results as one JSON line. The test asserts
// that this process lived (a render that exhausts its heap must not abort its parent).
import { RenderPool } from '../../controller/rendering/index.ts';
import { configMap, addonInput as input } from '../unit/rendering/fixtures.ts';

const MiB = 1024 * 1024;
const chunk = 'x'.repeat(4 * MiB - 16);
const each = (n: number) => Array.from({ length: n }, (_, i) => i);

/**
 * Heap bombs that aborted the whole process while renders ran in worker threads: a template's output
 * is a rope of its pieces, and flattening one of hundreds of MiB is a single allocation past the
 * heap, which V8 does not survive in any isolate of the process.
 */
export const BOMBS: Record<string, { files: Record<string, string>; values: Record<string, unknown> }> = {
  'helm-values-scalar': {
    files: {
      'Chart.yaml': 'apiVersion: v2\nname: c\nversion: 1.0.0\n',
      'values.yaml.hbs': 'big: "{{#each Values.items}}{{@root.Values.chunk}}{{/each}}"\n',
    },
    values: { items: each(86), chunk },
  },
  'file-scalar': {
    files: { 'big.yaml.hbs': configMap('  x: "{{#each Values.items}}{{@root.Values.chunk}}{{/each}}"') },
    values: { items: each(120), chunk },
  },
};

const bomb = BOMBS[process.argv[2] ?? ''];
if (bomb === undefined) throw new Error(`unknown bomb "${process.argv[2]}"`);
// An output cap far above the heap: only the memory limit can stop these.
const pool = new RenderPool({ workers: 1, timeoutMs: 120_000, maxMemoryMb: 128, maxOutputBytes: 1024 * MiB });
const hostile = await pool.render(input(bomb.files, bomb.values));
const good = await pool.render(
  input({ 'good.yaml.hbs': configMap('  name: {{Cluster.metadata.name}}') }, {}),
);
await pool.close();
process.stdout.write(`${JSON.stringify({ hostile, good: good.ok })}\n`);
