// Fails when the files under controller/ import each other in a circle (issue 34); part of npm run lint.
//   node hack/check-import-cycles.ts [folder …]   default: controller/
// Type-only imports count (hack/lib/importcycles.ts says why). Prints each cycle as a path of files.
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { findCycles, formatCycle, readImportGraph } from './lib/importcycles.ts';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..');
const roots = process.argv.slice(2);
const folders = roots.length > 0 ? roots.map((r) => resolve(r)) : [join(repo, 'controller')];

let cycles = 0;
for (const folder of folders) {
  for (const cycle of findCycles(readImportGraph(folder))) {
    if (cycles === 0) process.stderr.write('import cycles (a -> b: a imports b):\n');
    process.stderr.write(`  ${formatCycle(cycle, repo)}\n`);
    cycles++;
  }
}
if (cycles > 0) {
  process.stderr.write(
    `${cycles} import cycle(s): move what the files share into a module below both (type-only imports count)\n`,
  );
  process.exit(1);
}
