// Writes the CRD YAML in crds/ from controller/api (the one source of truth).
//   node hack/gen-crds.ts          rewrite crds/
//   node hack/gen-crds.ts --check  exit 1 if crds/ is out of date
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { renderCrdFiles } from '../controller/api/crds.ts';

const dir = join(dirname(fileURLToPath(import.meta.url)), '..', 'crds');
const check = process.argv.includes('--check');
const files = renderCrdFiles();
const existing = existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.yaml')) : [];

if (check) {
  const stale = [
    ...[...files].filter(
      ([name, text]) => !existing.includes(name) || readFileSync(join(dir, name), 'utf8') !== text,
    ),
    ...existing.filter((name) => !files.has(name)).map((name) => [name, ''] as const),
  ].map(([name]) => name);
  if (stale.length > 0) {
    process.stderr.write(`crds/ is out of date (${stale.join(', ')}): run node hack/gen-crds.ts\n`);
    process.exit(1);
  }
} else {
  mkdirSync(dir, { recursive: true });
  for (const name of existing) if (!files.has(name)) rmSync(join(dir, name));
  for (const [name, text] of files) writeFileSync(join(dir, name), text);
  process.stderr.write(`wrote ${files.size} CRDs to ${dir}\n`);
}
