// Fails when a function under controller/ is longer than 150 lines (issue 34); part of
// npm run lint. A long function is split into named collaborators (see controllers/clusteraddon/).
//   node hack/check-function-length.ts [--max N] [--top N] [folder or file …]   default: controller/
// Prints each long function as file:line, name and length; --top N lists the N longest (no failure).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type FunctionLength, functionLengths, longFunctions } from './lib/functionlength.ts';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
let max = 150;
let top: number | undefined;
const roots: string[] = [];
for (let i = 0; i < args.length; i++) {
  const a = args[i] ?? '';
  if (a === '--max') max = Number(args[++i]);
  else if (a === '--top') top = Number(args[++i]);
  else roots.push(a);
}
const folders = roots.length > 0 ? roots.map((r) => resolve(r)) : [join(repo, 'controller')];

function tsFiles(folder: string): string[] {
  if (!statSync(folder).isDirectory()) return [folder];
  return readdirSync(folder)
    .sort()
    .flatMap((entry) => {
      const path = join(folder, entry);
      if (statSync(path).isDirectory()) return tsFiles(path);
      return entry.endsWith('.ts') && !entry.endsWith('.d.ts') ? [path] : [];
    });
}

const all: (FunctionLength & { file: string })[] = [];
for (const folder of folders) {
  for (const file of tsFiles(folder)) {
    for (const f of functionLengths(file, readFileSync(file, 'utf8'))) all.push({ ...f, file });
  }
}
const show = (f: FunctionLength & { file: string }): string =>
  `  ${relative(repo, f.file)}:${f.line} ${f.name} (${f.lines} lines)\n`;

if (top !== undefined) {
  for (const f of longFunctions(all, 0).slice(0, top)) process.stdout.write(show(f));
} else {
  const long = longFunctions(all, max);
  if (long.length > 0) {
    process.stderr.write(`functions longer than ${max} lines:\n`);
    for (const f of long) process.stderr.write(show(f));
    process.stderr.write(`${long.length} long function(s): split them into named collaborators\n`);
    process.exit(1);
  }
}
