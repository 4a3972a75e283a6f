// Handlebars for addon templates: an isolated environment, strict lookups with errors that
// name the file, line and full path, no HTML escaping, no prototype access.
//
// How strictness works. Handlebars' own `strict` mode only checks the LAST segment of a
// mustache path ("x" not defined in [object Object]), throws a bare TypeError when an earlier
// segment is missing, and does not check helper arguments at all. So before compiling we
// rewrite the template's AST: every data path `a.b.c` becomes a call of a private path helper
// with the head `a` (resolved by Handlebars, so `this`, `../`, `@root` and block params keep
// their meaning) and an index into a per-template table holding the remaining segments, the
// original text and the source position. The path helper walks own properties only and
//   - in mustache position and in arguments of ordinary helpers: a missing segment is an error
//     "<file>:<line>:<column>: <path up to the missing segment> is not defined";
//   - in arguments of presence-testing helpers (`default`, `required`, `and`, `or`, `not`, and
//     the built-in `if`, `unless`, `with`): a missing segment yields `undefined`. This is how
//     `{{default "x" Values.a.b}}` and `{{#if Values.optional}}` coexist with strict mode.
// The template is still compiled with `strict: true`, which covers what is not rewritten
// (e.g. `{{#Values.list}}` sections).
//
// Prototype access: path segments and `lookup` keys named like Object.prototype members
// (`__proto__`, `constructor`, `toString`, ...) or `prototype` are rejected when the template
// is compiled; the path helper only follows own properties, and Handlebars' runtime
// prototype protection stays on.
import Handlebars from 'handlebars';
import { FORBIDDEN_NAMES, HELPERS, LENIENT_BUILTINS } from './helpers.ts';
import { formatBytes, MAX_HELPER_OUTPUT } from './limits.ts';

const PATH_HELPER = '__stackfluxPath';

/**
 * A template failure with its position (line and column 1-based). `message` is complete:
 * `<file>:<line>:<column>: <detail>`.
 */
export class TemplateError extends Error {
  readonly file: string;
  readonly line: number | undefined;
  readonly column: number | undefined;

  constructor(file: string, line: number | undefined, column: number | undefined, detail: string) {
    const where = line === undefined ? file : `${file}:${line}${column === undefined ? '' : `:${column}`}`;
    super(`${where}: ${detail}`);
    this.name = 'TemplateError';
    this.file = file;
    this.line = line;
    this.column = column;
  }
}

interface Position {
  line: number;
  column: number;
}

interface SourceLocation {
  start: Position;
  end: Position;
}

/** A failure inside a helper, before the file is known. */
class HelperFailure extends Error {
  readonly loc: SourceLocation | undefined;

  constructor(message: string, loc: SourceLocation | undefined) {
    super(message);
    this.loc = loc;
  }
}

// The subset of the Handlebars AST we rewrite (the published typings are loose).
interface AstNode {
  type: string;
  loc: SourceLocation;
}
interface PathExpression extends AstNode {
  type: 'PathExpression';
  data: boolean;
  depth: number;
  parts: string[];
  original: string;
}
interface NumberLiteral extends AstNode {
  type: 'NumberLiteral';
  value: number;
  original: number;
}
interface HashPair extends AstNode {
  key: string;
  value: AstNode;
}
interface Hash extends AstNode {
  pairs: HashPair[];
}
interface CallNode extends AstNode {
  path: AstNode;
  params: AstNode[];
  hash?: Hash;
}
interface BlockNode extends CallNode {
  program?: ProgramNode;
  inverse?: ProgramNode;
}
interface ProgramNode extends AstNode {
  body: AstNode[];
}

interface PathInfo {
  /** How the head is shown, e.g. `Cluster`, `this.name`, `@root`. */
  head: string;
  segments: string[];
  strict: boolean;
  /** In `{{path}}` position: the value is written out, so it must not be an object. */
  output: boolean;
  line: number;
  column: number;
}

/** 1-based column of a Handlebars location (Handlebars counts from 0). */
function column(loc: SourceLocation | undefined): number | undefined {
  return loc === undefined ? undefined : loc.start.column + 1;
}

interface HelperOptionsWithLoc {
  loc?: SourceLocation;
}

function isOptions(value: unknown): value is HelperOptionsWithLoc {
  return typeof value === 'object' && value !== null && 'hash' in value && 'data' in value;
}

function createEnvironment(): typeof Handlebars {
  const env = Handlebars.create();
  // `log` writes to the console; `lookup` is replaced by an own-properties-only version.
  env.unregisterHelper('log');
  env.unregisterHelper('lookup');
  for (const [name, spec] of HELPERS) {
    env.registerHelper(name, (...args: unknown[]) => {
      const options = args.pop();
      const loc = isOptions(options) ? options.loc : undefined;
      if (spec.arity !== undefined && args.length !== spec.arity) {
        throw new HelperFailure(`${name} takes ${spec.arity} argument(s), got ${args.length}`, loc);
      }
      if (spec.arity === undefined && args.length === 0) {
        throw new HelperFailure(`${name} takes at least one argument`, loc);
      }
      try {
        const result = spec.fn(...args);
        if (typeof result === 'string' && result.length > MAX_HELPER_OUTPUT) {
          throw new Error(`${name} produced more than the limit of ${formatBytes(MAX_HELPER_OUTPUT)}`);
        }
        return result;
      } catch (error) {
        if (error instanceof TemplateError) throw error;
        const message = error instanceof Error ? error.message : String(error);
        throw new HelperFailure(message.startsWith(`${name}`) ? message : `${name}: ${message}`, loc);
      }
    });
  }
  return env;
}

const env = createEnvironment();

const KNOWN_HELPERS: Record<string, boolean> = { [PATH_HELPER]: true };
for (const name of HELPERS.keys()) KNOWN_HELPERS[name] = true;
for (const name of ['if', 'unless', 'with', 'each']) KNOWN_HELPERS[name] = true;

const COMPILE_OPTIONS = {
  strict: true,
  noEscape: true,
  knownHelpers: KNOWN_HELPERS,
  knownHelpersOnly: false,
  data: true,
};

function isHelperName(name: string | undefined): boolean {
  return name !== undefined && (Object.hasOwn(KNOWN_HELPERS, name) || name === 'helperMissing');
}

function isLenient(helper: string | undefined): boolean {
  if (helper === undefined) return false;
  return HELPERS.get(helper)?.lenient === true || LENIENT_BUILTINS.has(helper);
}

function isPath(node: AstNode | undefined): node is PathExpression {
  return node?.type === 'PathExpression';
}

function segmentText(segment: string): string {
  return /^[A-Za-z_$][\w$-]*$/.test(segment) ? segment : `[${segment}]`;
}

function joinPath(head: string, segments: readonly string[]): string {
  return [head, ...segments.map(segmentText)].join('.');
}

/** Rewrites one template's AST (see the header comment). */
class Rewriter {
  readonly file: string;
  readonly infos: PathInfo[] = [];

  constructor(file: string) {
    this.file = file;
  }

  fail(node: AstNode, detail: string): never {
    throw new TemplateError(this.file, node.loc?.start.line, column(node.loc), detail);
  }

  /** A call of a helper we do not have fails now, with its name, rather than at render time. */
  checkHelper(node: CallNode): void {
    if (!isPath(node.path)) return;
    const name = node.path.parts[0];
    const simple = !node.path.data && node.path.depth === 0 && node.path.parts.length === 1;
    if (!simple || !isHelperName(name)) {
      this.fail(node, `unknown helper "${node.path.original}"`);
    }
  }

  checkNames(path: PathExpression): void {
    for (const part of path.parts) {
      if (FORBIDDEN_NAMES.has(part)) {
        this.fail(path, `access to "${part}" is not allowed (in ${path.original})`);
      }
    }
  }

  /** The call `(__stackfluxPath head <id>)` replacing `path`, or undefined to keep it as is. */
  pathCall(
    path: PathExpression,
    strict: boolean,
    output: boolean,
  ): { head: AstNode; id: NumberLiteral } | undefined {
    this.checkNames(path);
    const first = path.parts[0];
    if (first === undefined) return undefined; // `this`, `.`, `..`
    if (path.data && path.parts.length === 1) return undefined; // @index, @key, @root
    const scoped = /^\.|this\b/.test(path.original);
    const prefix = path.data
      ? '@'
      : `${'../'.repeat(path.depth)}${scoped && path.depth === 0 ? 'this.' : ''}`;
    const head: PathExpression = { ...path, parts: [first], original: `${prefix}${first}` };
    const info: PathInfo = {
      head: head.original,
      segments: path.parts.slice(1),
      strict,
      output,
      line: path.loc.start.line,
      column: path.loc.start.column + 1,
    };
    this.infos.push(info);
    const index = this.infos.length - 1;
    const id: NumberLiteral = { type: 'NumberLiteral', value: index, original: index, loc: path.loc };
    return { head, id };
  }

  helperPath(loc: SourceLocation): PathExpression {
    return {
      type: 'PathExpression',
      data: false,
      depth: 0,
      parts: [PATH_HELPER],
      original: PATH_HELPER,
      loc,
    };
  }

  expression(node: AstNode, lenient: boolean): AstNode {
    if (isPath(node)) {
      const call = this.pathCall(node, !lenient, false);
      if (!call) return node;
      const sub: CallNode = {
        type: 'SubExpression',
        path: this.helperPath(node.loc),
        params: [call.head, call.id],
        loc: node.loc,
      };
      return sub;
    }
    if (node.type === 'SubExpression') {
      this.checkHelper(node as CallNode);
      this.call(node as CallNode);
    }
    return node;
  }

  /** Rewrites the arguments of a helper call (mustache, block or sub-expression). */
  call(node: CallNode): void {
    const name = isPath(node.path) ? node.path.parts[0] : undefined;
    if (isPath(node.path)) this.checkNames(node.path);
    const lenient = isLenient(name);
    node.params = node.params.map((param) => this.expression(param, lenient));
    if (node.hash) {
      for (const pair of node.hash.pairs) pair.value = this.expression(pair.value, lenient);
    }
  }

  mustache(node: CallNode): void {
    const hasArguments = node.params.length > 0 || (node.hash?.pairs.length ?? 0) > 0;
    if (!isPath(node.path)) return; // a literal, e.g. {{"text"}}
    if (hasArguments) {
      this.checkHelper(node);
      this.call(node);
      return;
    }
    const path = node.path;
    const simple =
      !path.data && path.depth === 0 && path.parts.length === 1 && !/^\.|this\b/.test(path.original);
    if (simple && isHelperName(path.parts[0])) return; // {{helper}} without arguments
    const call = this.pathCall(path, true, true);
    if (!call) return;
    node.path = this.helperPath(path.loc);
    node.params = [call.head, call.id];
  }

  program(program: ProgramNode | undefined): void {
    if (!program) return;
    for (const statement of program.body) {
      switch (statement.type) {
        case 'MustacheStatement':
          this.mustache(statement as CallNode);
          break;
        case 'BlockStatement': {
          const block = statement as BlockNode;
          const name = isPath(block.path) ? block.path.parts[0] : undefined;
          if (block.params.length > 0 || (block.hash?.pairs.length ?? 0) > 0) this.checkHelper(block);
          if (isHelperName(name) || block.params.length > 0) this.call(block);
          else if (isPath(block.path)) this.checkNames(block.path);
          this.program(block.program);
          this.program(block.inverse);
          break;
        }
        case 'ContentStatement':
        case 'CommentStatement':
          break;
        case 'PartialStatement':
        case 'PartialBlockStatement':
          this.fail(statement, 'partials are not supported in addon templates');
          break;
        default:
          this.fail(statement, `${statement.type} is not supported in addon templates`);
      }
    }
  }
}

function describeType(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

function pathHelper(file: string, infos: readonly PathInfo[]) {
  return (head: unknown, id: unknown): unknown => {
    const info = typeof id === 'number' ? infos[id] : undefined;
    if (!info) throw new Error('internal: unknown path id');
    const missing = (depth: number, parent: unknown): TemplateError => {
      const upTo = joinPath(info.head, info.segments.slice(0, depth));
      const whole = joinPath(info.head, info.segments);
      let detail = `${upTo} is not defined`;
      if (depth > 0 && (parent === null || typeof parent !== 'object')) {
        detail = `${upTo} is not defined (${joinPath(info.head, info.segments.slice(0, depth - 1))} is ${describeType(parent)})`;
      }
      if (upTo !== whole) detail += ` (in ${whole})`;
      return new TemplateError(file, info.line, info.column, detail);
    };
    if (head === undefined) {
      if (!info.strict) return undefined;
      throw missing(0, undefined);
    }
    let current: unknown = head;
    for (let i = 0; i < info.segments.length; i++) {
      const segment = info.segments[i] as string;
      const container = typeof current === 'string' ? Object(current) : current;
      if (typeof container !== 'object' || container === null || !Object.hasOwn(container, segment)) {
        if (!info.strict) return undefined;
        throw missing(i + 1, current);
      }
      current = (container as Record<string, unknown>)[segment];
    }
    if (info.output && typeof current === 'object' && current !== null) {
      throw new TemplateError(
        file,
        info.line,
        info.column,
        `${joinPath(info.head, info.segments)} is ${describeType(current)}; write it with toYaml or toJson`,
      );
    }
    return current;
  };
}

interface CompiledTemplate {
  template: HandlebarsTemplateDelegate;
  infos: PathInfo[];
}

const cache = new Map<string, CompiledTemplate>();
const CACHE_LIMIT = 512;

function compile(file: string, source: string): CompiledTemplate {
  const key = `${file}\u0000${source}`;
  const hit = cache.get(key);
  if (hit) return hit;
  let ast: ProgramNode;
  try {
    ast = env.parse(source) as unknown as ProgramNode;
  } catch (error) {
    throw toTemplateError(file, error);
  }
  const rewriter = new Rewriter(file);
  rewriter.program(ast);
  const template = env.compile(ast, COMPILE_OPTIONS);
  const compiled = { template, infos: rewriter.infos };
  if (cache.size >= CACHE_LIMIT) {
    const oldest = cache.keys().next();
    if (!oldest.done) cache.delete(oldest.value);
  }
  cache.set(key, compiled);
  return compiled;
}

function numberProp(error: object, name: string): number | undefined {
  const value: unknown = (error as Record<string, unknown>)[name];
  return typeof value === 'number' ? value : undefined;
}

function toTemplateError(file: string, error: unknown): TemplateError {
  if (error instanceof TemplateError) return error;
  if (error instanceof HelperFailure) {
    return new TemplateError(file, error.loc?.start.line, column(error.loc), error.message);
  }
  if (error instanceof Error) {
    const parseError = /^Parse error on line (\d+):\n[^\n]*\n[^\n]*\n(.*)$/s.exec(error.message);
    if (parseError) {
      return new TemplateError(file, Number(parseError[1]), undefined, `parse error: ${parseError[2]}`);
    }
    const line = numberProp(error, 'lineNumber');
    const col = numberProp(error, 'column');
    // Handlebars appends " - line:column" itself; keep its text otherwise.
    const detail = error.message.replace(/ - \d+:\d+$/, '').replace(/\n/g, ' ');
    return new TemplateError(file, line, col === undefined ? undefined : col + 1, detail);
  }
  return new TemplateError(file, undefined, undefined, String(error));
}

/** Renders one template. Throws TemplateError naming `file` (and line, column, path when known). */
export function renderTemplate(file: string, source: string, context: Record<string, unknown>): string {
  try {
    const { template, infos } = compile(file, source);
    return template(context, {
      helpers: { [PATH_HELPER]: pathHelper(file, infos) },
      allowProtoMethodsByDefault: false,
      allowProtoPropertiesByDefault: false,
    });
  } catch (error) {
    throw toTemplateError(file, error);
  }
}
