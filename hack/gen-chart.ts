// Writes the Helm chart charts/stackflux/ from the install definition (controller/cli/chart.ts).
//   node hack/gen-chart.ts          rewrite charts/stackflux/
//   node hack/gen-chart.ts --check  exit 1 if charts/stackflux/ is out of date
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CHART_NAME, chartFiles } from '../controller/cli/chart.ts';

const dir = join(dirname(fileURLToPath(import.meta.url)), '..', 'charts', CHART_NAME);
const files = chartFiles();
const existing = existsSync(dir)
  ? readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((f) => /\.(yaml|json)$/.test(f))
  : [];

if (process.argv.includes('--check')) {
  const stale = [
    ...[...files.keys()].filter(
      (f) => !existing.includes(f) || readFileSync(join(dir, f), 'utf8') !== files.get(f),
    ),
    ...existing.filter((f) => !files.has(f)),
  ];
  if (stale.length > 0) {
    process.stderr.write(
      `charts/${CHART_NAME} is out of date (${stale.join(', ')}): run node hack/gen-chart.ts\n`,
    );
    process.exit(1);
  }
} else {
  for (const f of existing) if (!files.has(f)) rmSync(join(dir, f));
  for (const [f, text] of files) {
    mkdirSync(dirname(join(dir, f)), { recursive: true });
    writeFileSync(join(dir, f), text);
  }
  process.stderr.write(`wrote ${files.size} files to ${dir}\n`);
}
