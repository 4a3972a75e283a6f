// The flag tables of docs/, made from the CLI's own flag definitions (the ones `stackflux <command>
// --help` prints), so a flag added, renamed or given a new default shows in the docs the way the
// CRDs follow controller/api. hack/gen-docs.ts writes them; test/unit/docs/ fails when they are stale.
//
// A page asks for a table with a pair of markers; everything between them is generated:
//
//   <!-- BEGIN GENERATED: stackflux run flags (node hack/gen-docs.ts) -->
//   <!-- END GENERATED -->
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { type Command, envName, type FlagSpec } from '../../controller/cli/command.ts';

const BEGIN = /<!-- BEGIN GENERATED: stackflux (\S+) flags \(node hack\/gen-docs\.ts\) -->\n/g;
const END = '<!-- END GENERATED -->';

/** The pages a newcomer reads, relative to the repository `root`: the README, then docs/*.md in order. */
export function docPages(root: string): string[] {
  const docs = readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => `docs/${f}`);
  return ['README.md', ...docs];
}

/** Text shown as is in a Markdown table cell: no HTML, emphasis, links or cell breaks. */
export function escapeCell(text: string): string {
  return text.replace(/[\\`*_[\]<>|]/g, (c) => `\\${c}`);
}

function defaultOf(spec: FlagSpec): string {
  if (spec.default === undefined || spec.default === '') return '';
  return `\`${String(spec.default)}\``;
}

function flagLabel(name: string, spec: FlagSpec): string {
  return `\`${spec.short ? `-${spec.short}, ` : ''}--${name}${spec.type === 'string' ? ' string' : ''}\``;
}

/** The Markdown table of a command's flags, in the order --help lists them. */
export function flagTable(command: Command): string {
  const rows = Object.entries(command.flags).map(
    ([name, spec]) =>
      `| ${flagLabel(name, spec)} | ${defaultOf(spec)} | \`${envName(name)}\` | ${escapeCell(spec.description)} |`,
  );
  return [
    '| flag | default | environment variable | meaning |',
    '| --- | --- | --- | --- |',
    ...rows,
    '',
  ].join('\n');
}

/** The page with every generated table between its markers made anew; throws on an unknown command or a missing end marker. */
export function withGeneratedTables(text: string, commands: readonly Command[], page = 'the page'): string {
  let out = '';
  let from = 0;
  for (const m of text.matchAll(BEGIN)) {
    const start = (m.index ?? 0) + m[0].length;
    if (start < from) continue;
    const end = text.indexOf(END, start);
    if (end < 0) throw new Error(`${page}: "${m[0].trim()}" has no "${END}"`);
    const command = commands.find((c) => c.name === m[1]);
    if (!command) throw new Error(`${page}: no stackflux command "${m[1]}" for a flag table`);
    out += text.slice(from, start) + flagTable(command);
    from = end;
  }
  return out + text.slice(from);
}

/** The commands whose flag tables a page holds. */
export function generatedTables(text: string): string[] {
  return [...text.matchAll(BEGIN)].map((m) => m[1] ?? '');
}
