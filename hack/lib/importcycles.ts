// The import graph of a source folder and its cycles, for hack/check-import-cycles.ts (issue 34).
//
// Edges are the static module statements only: `import … from '…'`, `import '…'`, `export … from
// '…'`, `import x = require('…')`. `import type` / `export type` and `import { type X }` COUNT: they
// are erased at run time (verbatimModuleSyntax), so a type-only cycle cannot break module
// initialisation, but it still ties the two modules together (neither can be read, moved or
// tested without the other) — and the cycle issue 34 is about, releases/format.ts ↔ native.ts, was
// type-only on one side. Dynamic `import()` is not a module edge and does not count; a cycle is
// fixed by moving the shared part down, not by hiding an edge behind import().
//
// findCycles is pure (a graph in, cycles out); readImportGraph is the only function that reads files.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import ts from 'typescript';

/** File → the files it imports (statically). Every file a node names is a key, possibly with []. */
export type ImportGraph = ReadonlyMap<string, readonly string[]>;

/** The module specifiers of a file's static import and re-export statements, in source order. */
export function staticImportSpecifiers(fileName: string, text: string): string[] {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const specifiers: string[] = [];
  for (const statement of source.statements) {
    let specifier: ts.Expression | undefined;
    if (ts.isImportDeclaration(statement) || ts.isExportDeclaration(statement))
      specifier = statement.moduleSpecifier;
    else if (
      ts.isImportEqualsDeclaration(statement) &&
      ts.isExternalModuleReference(statement.moduleReference)
    )
      specifier = statement.moduleReference.expression;
    if (specifier !== undefined && ts.isStringLiteral(specifier)) specifiers.push(specifier.text);
  }
  return specifiers;
}

/**
 * The file a relative specifier names, or undefined for a package, a `node:` builtin or a file that
 * does not exist (tsc reports that). Specifiers here name the .ts file; a .js one is taken as its .ts.
 */
export function resolveRelativeSpecifier(
  fromFile: string,
  specifier: string,
  exists: (path: string) => boolean,
): string | undefined {
  if (!specifier.startsWith('./') && !specifier.startsWith('../')) return undefined;
  const target = resolve(dirname(fromFile), specifier);
  const candidates = [target];
  if (/\.[cm]?js$/.test(target)) candidates.push(target.replace(/\.([cm]?)js$/, '.$1ts'));
  candidates.push(`${target}.ts`, join(target, 'index.ts'));
  return candidates.find(exists);
}

/**
 * The import graph of every .ts file under `root` (absolute paths), followed into any file outside
 * it they import, so that a cycle through such a file is found too. Non-.ts targets (JSON) are leaves.
 */
export function readImportGraph(root: string): Map<string, string[]> {
  const isFile = (path: string) => existsSync(path) && statSync(path).isFile();
  const graph = new Map<string, string[]>();
  const pending = tsFilesUnder(resolve(root));
  for (let file = pending.pop(); file !== undefined; file = pending.pop()) {
    if (graph.has(file)) continue;
    const imports: string[] = [];
    if (file.endsWith('.ts')) {
      for (const specifier of staticImportSpecifiers(file, readFileSync(file, 'utf8'))) {
        const target = resolveRelativeSpecifier(file, specifier, isFile);
        if (target !== undefined && !imports.includes(target)) imports.push(target);
      }
    }
    graph.set(file, imports);
    for (const target of imports) if (!graph.has(target)) pending.push(target);
  }
  return graph;
}

function tsFilesUnder(dir: string): string[] {
  const files: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) files.push(...tsFilesUnder(path));
    else if (entry.isFile() && entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) files.push(path);
  }
  return files.sort();
}

/**
 * The strongly connected components of a graph that hold a cycle (two or more nodes, or one that
 * imports itself), by Tarjan's algorithm (iterative: no recursion limit). Each component's nodes
 * are sorted; components are sorted by their first node.
 */
export function cyclicComponents(graph: ImportGraph): string[][] {
  const index = new Map<string, number>();
  const lowLink = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const components: string[][] = [];
  let next = 0;
  const successors = (node: string) => graph.get(node) ?? [];

  for (const start of [...graph.keys()].sort()) {
    if (index.has(start)) continue;
    // Each frame: a node and how many of its successors have been visited.
    const frames: { node: string; edge: number }[] = [{ node: start, edge: 0 }];
    index.set(start, next);
    lowLink.set(start, next);
    next++;
    stack.push(start);
    onStack.add(start);
    while (frames.length > 0) {
      const frame = frames[frames.length - 1] as { node: string; edge: number };
      const edges = successors(frame.node);
      if (frame.edge < edges.length) {
        const to = edges[frame.edge++] as string;
        if (!index.has(to)) {
          index.set(to, next);
          lowLink.set(to, next);
          next++;
          stack.push(to);
          onStack.add(to);
          frames.push({ node: to, edge: 0 });
        } else if (onStack.has(to)) {
          lowLink.set(frame.node, Math.min(lowLink.get(frame.node) as number, index.get(to) as number));
        }
        continue;
      }
      frames.pop();
      const parent = frames[frames.length - 1];
      if (parent !== undefined)
        lowLink.set(
          parent.node,
          Math.min(lowLink.get(parent.node) as number, lowLink.get(frame.node) as number),
        );
      if (lowLink.get(frame.node) !== index.get(frame.node)) continue;
      const component: string[] = [];
      let member: string | undefined;
      do {
        member = stack.pop() as string;
        onStack.delete(member);
        component.push(member);
      } while (member !== frame.node);
      if (component.length > 1 || successors(frame.node).includes(frame.node))
        components.push(component.sort());
    }
  }
  return components.sort((a, b) => ((a[0] as string) < (b[0] as string) ? -1 : 1));
}

/**
 * A shortest cycle through `start` within `members` (a cyclic component holding it), as the path
 * start → … → start. Breadth-first, successors in the graph's order.
 */
export function shortestCycleThrough(
  graph: ImportGraph,
  start: string,
  members: readonly string[],
): string[] {
  const inComponent = new Set(members);
  const previous = new Map<string, string>();
  const queue = [start];
  for (let head = 0; head < queue.length; head++) {
    const node = queue[head] as string;
    for (const to of graph.get(node) ?? []) {
      if (!inComponent.has(to)) continue;
      if (to === start) {
        const between: string[] = [];
        for (let at: string | undefined = node; at !== start && at !== undefined; at = previous.get(at))
          between.unshift(at);
        return [start, ...between, start];
      }
      if (previous.has(to)) continue;
      previous.set(to, node);
      queue.push(to);
    }
  }
  throw new Error(`${start} is on no cycle within the component`);
}

/**
 * Every import cycle worth reporting: per cyclic component, a shortest cycle through each of its
 * files, the same cycle found from two of its files given once (rotated to start at its first
 * file in sort order). Each cycle is a path whose last entry is its first.
 */
export function findCycles(graph: ImportGraph): string[][] {
  const cycles: string[][] = [];
  const seen = new Set<string>();
  for (const component of cyclicComponents(graph)) {
    for (const node of component) {
      const cycle = canonicalCycle(shortestCycleThrough(graph, node, component));
      const key = cycle.join('\n');
      if (seen.has(key)) continue;
      seen.add(key);
      cycles.push(cycle);
    }
  }
  return cycles;
}

/** The cycle rotated to start (and end) at its least node. */
function canonicalCycle(cycle: readonly string[]): string[] {
  const ring = cycle.slice(0, -1);
  let least = 0;
  for (let i = 1; i < ring.length; i++) if ((ring[i] as string) < (ring[least] as string)) least = i;
  const rotated = [...ring.slice(least), ...ring.slice(0, least)];
  return [...rotated, rotated[0] as string];
}

/** A cycle as one line of paths relative to `base`, with / as separator. */
export function formatCycle(cycle: readonly string[], base: string): string {
  return cycle.map((file) => relative(base, file).split(sep).join('/')).join(' -> ');
}
