// Writes the flag tables of README.md and docs/*.md from the CLI's flag definitions (see
// hack/lib/flagdocs.ts for the markers a page puts a table between).
//   node hack/gen-docs.ts          rewrite the tables
//   node hack/gen-docs.ts --check  exit 1 if a table is out of date
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { commands } from '../controller/cli/main.ts';
import { docPages, withGeneratedTables } from './lib/flagdocs.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const check = process.argv.includes('--check');
const pages = docPages(root);

const stale: string[] = [];
for (const page of pages) {
  const text = readFileSync(join(root, page), 'utf8');
  const generated = withGeneratedTables(text, commands, page);
  if (generated === text) continue;
  stale.push(page);
  if (!check) writeFileSync(join(root, page), generated);
}
if (check && stale.length > 0) {
  process.stderr.write(`flag tables out of date in ${stale.join(', ')}: run node hack/gen-docs.ts\n`);
  process.exit(1);
}
if (!check) process.stderr.write(`rewrote the flag tables of ${stale.length} page(s)\n`);
