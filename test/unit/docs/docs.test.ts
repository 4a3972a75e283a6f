// Keeps README.md and docs/ honest without a cluster: the flag tables are what hack/gen-docs.ts
// makes from the CLI's flag definitions, every `stackflux <command>` and every flag given to
// stackflux (in command lines and flag tables) exists, every relative link and anchor resolves,
// and the README stays short. (test/integration/readme.test.ts checks the YAML snippets against a
// real API server.)
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { Command } from '../../../controller/cli/command.ts';
import { commands } from '../../../controller/cli/main.ts';
import { docPages, generatedTables, withGeneratedTables } from '../../../hack/lib/flagdocs.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const pages = docPages(root);
const docsOnly = pages.filter((p) => p.startsWith('docs/'));
const text = new Map(pages.map((p) => [p, readFileSync(join(root, p), 'utf8')]));

function page(p: string): string {
  const t = text.get(p);
  assert.ok(t !== undefined, `${p} is read`);
  return t;
}

interface Fence {
  lang: string;
  lines: string[];
}

/** A page split into fenced code blocks and the prose around them (fences blanked out of the prose). */
function parse(markdown: string): { fences: Fence[]; prose: string } {
  const fences: Fence[] = [];
  const prose: string[] = [];
  let open: Fence | undefined;
  for (const line of markdown.split('\n')) {
    const fence = /^\s*(```|~~~)\s*([\w-]*)/.exec(line);
    if (fence) {
      if (open) {
        fences.push(open);
        open = undefined;
      } else open = { lang: fence[2] ?? '', lines: [] };
      prose.push('');
    } else if (open) {
      open.lines.push(line);
      prose.push('');
    } else prose.push(line);
  }
  return { fences, prose: prose.join('\n') };
}

/** Inline code spans of prose (a span may run over a line break, as in Markdown; `\|` of a table cell is `|`). */
function codeSpans(prose: string): string[] {
  return [...prose.matchAll(/(`+)([^`]+?)\1/g)].map((m) =>
    (m[2] ?? '').replace(/\\\|/g, '|').replace(/\s+/g, ' ').trim(),
  );
}

const STACKFLUX = /^(?:npx\s+|npm run stackflux --\s+|node bin\/stackflux\.js\s+)?stackflux\s+(?=[a-z])/;

/** What follows "stackflux " in each command line of a page: shell blocks, `$ ` lines of console blocks, inline code. */
function stackfluxCommandLines(markdown: string): string[] {
  const { fences, prose } = parse(markdown);
  const shellLines = fences.flatMap((f) => {
    if (['sh', 'bash', 'shell'].includes(f.lang)) return f.lines;
    if (f.lang === 'console') return f.lines.filter((l) => l.startsWith('$ ')).map((l) => l.slice(2));
    return [];
  });
  const segments = shellLines
    // A comment offering another command ("# or: npx stackflux install ...") is a command line too.
    .flatMap((l) => [l.replace(/(^|\s)#.*$/, ''), /(?:^|\s)#\s*or:\s*(.*)$/.exec(l)?.[1] ?? ''])
    .flatMap((l) => l.split(/&&|\|\||;|\s\|\s/))
    .map((s) => s.trim());
  return [...segments, ...codeSpans(prose)]
    .filter((s) => STACKFLUX.test(s))
    .map((s) => s.replace(STACKFLUX, ''));
}

function command(name: string): Command | undefined {
  return commands.find((c) => c.name === name);
}

/** Long flag names of a command, --help included. */
function longFlags(c: Command): Set<string> {
  return new Set([...Object.keys(c.flags), 'help']);
}

/** The problems of one command line (the words after "stackflux"): an unknown command or flag. */
function checkCommandLine(line: string): string[] {
  const words = line.split(/\s+/).filter((w) => w !== '');
  const end = words.findIndex((w) => /^(\d?>|\||<$)/.test(w));
  const argv = end < 0 ? words : words.slice(0, end);
  const name = argv[0] ?? '';
  if (name === 'help') return [];
  let c = command(name);
  if (!c) return [`"stackflux ${line}": stackflux has no command "${name}"`];
  const problems: string[] = [];
  for (const word of argv.slice(1)) {
    const w = word.replace(/^[[({"']+/, '');
    if (w === '--') {
      // `stackflux install --export -- FLAGS` passes FLAGS on to `stackflux run`.
      if (c.name !== 'install') break;
      c = command('run');
      if (!c) break;
      continue;
    }
    const long = /^--([a-z0-9][a-z0-9-]*)/i.exec(w);
    const short = /^-([a-zA-Z])(?![\w-])/.exec(w);
    if (long && !longFlags(c).has(long[1] ?? ''))
      problems.push(`"stackflux ${line}": stackflux ${c.name} has no flag --${long[1]}`);
    if (short && short[1] !== 'h' && !Object.values(c.flags).some((f) => f.short === short[1]))
      problems.push(`"stackflux ${line}": stackflux ${c.name} has no flag -${short[1]}`);
  }
  return problems;
}

function cells(row: string): string[] {
  return row
    .trim()
    .replace(/^\|/, '')
    .replace(/\|$/, '')
    .split(/(?<!\\)\|/)
    .map((c) => c.trim());
}

/** Tables of a page's prose: header cells and rows of cells. */
function tables(prose: string): { header: string[]; rows: string[][] }[] {
  const out: { header: string[]; rows: string[][] }[] = [];
  const lines = prose.split('\n');
  for (let i = 0; i + 1 < lines.length; i++) {
    const head = lines[i] ?? '';
    if (!head.trim().startsWith('|') || !/^\s*\|?\s*:?-{3,}/.test(lines[i + 1] ?? '')) continue;
    const rows: string[][] = [];
    let j = i + 2;
    for (; j < lines.length && (lines[j] ?? '').trim().startsWith('|'); j++) rows.push(cells(lines[j] ?? ''));
    out.push({ header: cells(head), rows });
    i = j;
  }
  return out;
}

/**
 * The problems of a page's flag tables: a column headed "flag(s)" or "`stackflux <command>` flag"
 * names flags of that command (`stackflux run` unless the header says), except in a table whose
 * first column names the program (Flux's lockdown flags: only the row "stackflux" is ours).
 */
function checkFlagTables(markdown: string): { problems: string[]; checked: number } {
  const problems: string[] = [];
  let checked = 0;
  for (const { header, rows } of tables(parse(markdown).prose)) {
    const perProgram = /^(controller|program|tool)s?$/i.test(header[0] ?? '');
    for (const [col, h] of header.entries()) {
      const plain = h.replace(/`/g, '').trim();
      const named = /^stackflux ([a-z-]+) flags?$/i.exec(plain);
      if (!named && !/^flags?$/i.test(plain)) continue;
      for (const row of rows) {
        let name = named?.[1] ?? 'run';
        if (perProgram) {
          if ((row[0] ?? '').replace(/[`*]/g, '').trim() !== 'stackflux') continue;
          name = 'run';
        }
        const c = command(name);
        if (!c) {
          problems.push(`table column "${h}": stackflux has no command "${name}"`);
          continue;
        }
        const cell = row[col] ?? '';
        // A whole command line in the cell is checked as one (`stackflux install --export -- --concurrency=8`).
        const spans = codeSpans(cell);
        const lines = spans.filter((s) => STACKFLUX.test(s));
        for (const l of lines) problems.push(...checkCommandLine(l.replace(STACKFLUX, '')));
        const rest = [cell.replace(/`[^`]*`/g, ' '), ...spans.filter((s) => !STACKFLUX.test(s))].join(' ');
        for (const m of rest.matchAll(/(?<![\w-])--([a-z0-9][a-z0-9-]*)/gi)) {
          checked++;
          if (!longFlags(c).has(m[1] ?? ''))
            problems.push(`table column "${h}", row "${row[0]}": stackflux ${c.name} has no flag --${m[1]}`);
        }
      }
    }
  }
  return { problems, checked };
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The anchors of a Markdown file's headings (outside code blocks), a repeated one numbered as GitHub does. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const line of parse(markdown).prose.split('\n')) {
    const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const base = slug(m[1] ?? '');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** Relative link targets of a page's prose (code spans and blocks left out). */
function links(markdown: string): string[] {
  const prose = parse(markdown).prose.replace(/(`+)[^`]+?\1/g, '');
  return [...prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)]
    .map((m) => m[1] ?? '')
    .filter((t) => !/^[a-z][a-z0-9+.-]*:/i.test(t) && !t.startsWith('//'));
}

const anchorsOfFile = new Map<string, Set<string>>();

function anchorsOf(file: string): Set<string> {
  let found = anchorsOfFile.get(file);
  if (found === undefined) {
    found = anchors(readFileSync(file, 'utf8'));
    anchorsOfFile.set(file, found);
  }
  return found;
}

function checkLinks(p: string): string[] {
  const problems: string[] = [];
  for (const target of links(page(p))) {
    const [path = '', anchor] = target.split('#');
    const file = path === '' ? join(root, p) : normalize(join(root, dirname(p), decodeURIComponent(path)));
    const shown = relative(root, file);
    if (relative(root, file).startsWith('..')) {
      problems.push(`${p}: link ${target} leaves the repository`);
      continue;
    }
    if (!existsSync(file)) {
      problems.push(`${p}: link ${target}: no file ${shown}`);
      continue;
    }
    if (anchor === undefined || anchor === '') continue;
    if (!file.endsWith('.md')) {
      problems.push(`${p}: link ${target}: an anchor into ${shown}, which is no Markdown page`);
      continue;
    }
    if (!anchorsOf(file).has(decodeURIComponent(anchor)))
      problems.push(`${p}: link ${target}: ${shown} has no heading #${anchor}`);
  }
  return problems;
}

describe('README.md and docs/', () => {
  it('has the pages', () => {
    assert.ok(docsOnly.includes('docs/README.md'), 'docs/README.md, the index');
    assert.ok(docsOnly.length >= 8, `docs/ has its pages: ${docsOnly.join(', ')}`);
  });

  it('the README stays short: under 300 lines', () => {
    const lines = page('README.md').split('\n').length - 1;
    assert.ok(lines < 300, `README.md has ${lines} lines; move the detail to docs/`);
  });

  it('the flag tables are up to date (run: node hack/gen-docs.ts)', () => {
    assert.ok(
      generatedTables(page('docs/install.md')).includes('run'),
      'docs/install.md has the flags of stackflux run',
    );
    for (const p of pages)
      assert.ok(
        withGeneratedTables(page(p), commands, p) === page(p),
        `the flag tables of ${p} are out of date: run node hack/gen-docs.ts`,
      );
  });

  it('every page is listed in the index docs/README.md', () => {
    const listed = new Set(links(page('docs/README.md')).map((t) => t.split('#')[0]));
    for (const p of docsOnly.filter((d) => d !== 'docs/README.md'))
      assert.ok(listed.has(p.replace('docs/', '')), `docs/README.md links to ${p}`);
  });

  for (const p of pages) {
    describe(p, () => {
      it('names only stackflux commands and flags that exist', () => {
        const shown = stackfluxCommandLines(page(p));
        assert.deepEqual(shown.flatMap(checkCommandLine), []);
      });

      it('its flag tables name only flags that exist', () => {
        assert.deepEqual(checkFlagTables(page(p)).problems, []);
      });

      it('every relative link and anchor resolves', () => {
        assert.deepEqual(checkLinks(p), []);
      });
    });
  }

  it('the checks see what they check', () => {
    const all = pages.map(page);
    assert.ok(all.flatMap(stackfluxCommandLines).length >= 50, 'command lines found');
    assert.ok(all.map((t) => checkFlagTables(t).checked).reduce((a, b) => a + b) >= 80, 'table flags found');
    assert.ok(all.flatMap(links).length >= 50, 'links found');
    // The checks themselves: another tool's flags are not ours, ours are.
    assert.deepEqual(checkCommandLine('run --fleet-url=x --no-such-flag'), [
      '"stackflux run --fleet-url=x --no-such-flag": stackflux run has no flag --no-such-flag',
    ]);
    assert.deepEqual(checkCommandLine('install --export -- --concurrency=8 > x.yaml --nope'), []);
    assert.deepEqual(checkCommandLine('frobnicate -n x').length, 1);
    assert.deepEqual(stackfluxCommandLines('```sh\nkubectl get csk --show-labels | grep x\n```\n'), []);
    assert.deepEqual(
      checkFlagTables(
        '| controller | flags |\n| --- | --- |\n| helm-controller | `--no-cross-namespace-refs` |\n',
      ).problems,
      [],
    );
    assert.equal(
      checkFlagTables('| controller | flags |\n| --- | --- |\n| stackflux | `--no-cross-namespace-refs` |\n')
        .problems.length,
      1,
    );
  });
});
