// The CEL health check of a Progressive rollout (spec.rollout.healthCheck.expression), with a cost
// limit. cel-js has structural parse limits but no evaluation cost limit, and an evaluation runs on
// the controller's one thread: six nested `.all` over 20 items are 64 million steps (seconds of a
// stalled event loop for every tenant). So an expression is parsed once (cached by its text) and
// its cost is estimated from the AST before it is ever evaluated, the way Kubernetes estimates the
// cost of CEL validation rules:
//   - a comprehension (all, exists, exists_one, map, filter) costs its range size times its body;
//   - the range size is bounded by the largest list or map of the input (`cluster`,
//     `clusterAddon`) or list/map literal, times (1 + the number of `+` in the expression), since
//     `+` is the only way to make a list longer than its parts;
//   - an operator or function call costs in proportion to the data it may walk (the longest string
//     and the number of values of the input: deep equality, `in`, string search).
// The estimate is checked twice: when the spec is read, with ASSUMED_INPUT sizes (so a costly
// expression is reported at once, before any Cluster moves), and before each evaluation, with the
// sizes of the actual input (a sound bound: nothing is evaluated whose bound is over MAX_COST).
// Functions whose cost no such bound covers are refused: matches (a JavaScript regular expression
// can backtrack exponentially), split and json (they make lists and maps out of a string).
import { type ASTNode, Environment } from '@marcbachmann/cel-js';
import { MAX_HEALTH_CHECK_LENGTH as MAX_EXPRESSION_LENGTH } from '../api/rollout.ts';
/** Most estimated cost units one evaluation may take (a unit is about one AST node evaluated). */
export const MAX_COST = 1_000_000;
/** Input sizes assumed when the spec is checked before any Cluster is seen. */
export const ASSUMED_INPUT: InputSizes = { items: 20, chars: 256, values: 256 };
/** Compiled expressions kept (ClusterStacks share the cache; the oldest go first). */
const CACHE_SIZE = 128;
/** Characters (or input values) an operator may walk per cost unit. */
const CHARS_PER_UNIT = 64;

const REFUSED_FUNCTIONS: Readonly<Record<string, string>> = {
  matches: 'a regular expression can backtrack without bound',
  split: 'it makes a list as long as a string',
  json: 'it makes a map as large as a string',
};
const COMPREHENSIONS = new Set(['all', 'exists', 'exists_one', 'map', 'filter']);
const STEP_OPS = new Set<string>([
  'value',
  'id',
  '.',
  '.?',
  '[]',
  '[?]',
  '&&',
  '||',
  '?:',
  '!_',
  '-_',
  'list',
  'map',
]);
const SCALAR_OPS = new Set<string>(['<', '<=', '>', '>=', '-', '*', '/', '%']);

// Parse limits: an expression of MAX_EXPRESSION_LENGTH characters stays far inside them; maxDepth
// also bounds the recursion of the estimate below.
const environment = new Environment({
  unlistedVariablesAreDyn: true,
  limits: {
    maxAstNodes: MAX_EXPRESSION_LENGTH,
    maxDepth: 32,
    maxListElements: 256,
    maxMapEntries: 256,
    maxCallArguments: 8,
  },
});

/** The sizes of an input that bound what an evaluation over it can cost. */
export interface InputSizes {
  /** Largest list or map (number of elements or keys). */
  items: number;
  /** Longest string. */
  chars: number;
  /** Number of values (every scalar, list and map). */
  values: number;
}

/** What the AST alone says about the sizes it can make (computed once per expression). */
interface Shape {
  plusCount: number;
  largestLiteral: number;
  longestStringLiteral: number;
  joins: boolean;
}

export interface CompiledHealthCheck {
  readonly expression: string;
  readonly program: (context: Record<string, unknown>) => unknown;
  readonly ast: ASTNode;
  readonly shape: Shape;
}

export type HealthCheckProblem = {
  reason: 'InvalidHealthCheck' | 'HealthCheckTooCostly';
  message: string;
};

const FIELD = 'spec.rollout.healthCheck.expression';
const cache = new Map<string, CompiledHealthCheck | HealthCheckProblem>();

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function children(node: ASTNode): ASTNode[] {
  switch (node.op) {
    case 'value':
    case 'id':
      return [];
    case '.':
    case '.?':
      return [node.args[0]];
    case '!_':
    case '-_':
      return [node.args];
    case 'call':
      return node.args[1];
    case 'rcall':
      return [node.args[1], ...node.args[2]];
    case 'list':
      return node.args;
    case 'map':
      return node.args.flat();
    default:
      return [...node.args];
  }
}

function functionName(node: ASTNode): string | undefined {
  return node.op === 'call' || node.op === 'rcall' ? node.args[0] : undefined;
}

function shapeOf(ast: ASTNode): Shape | HealthCheckProblem {
  const shape: Shape = { plusCount: 0, largestLiteral: 0, longestStringLiteral: 0, joins: false };
  const stack = [ast];
  for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
    const fn = functionName(node);
    const refused = fn === undefined ? undefined : REFUSED_FUNCTIONS[fn];
    if (refused !== undefined)
      return { reason: 'InvalidHealthCheck', message: `${FIELD}: ${fn}() is not allowed: ${refused}` };
    if (fn === 'join') shape.joins = true;
    if (node.op === '+') shape.plusCount += 1;
    if (node.op === 'list' || node.op === 'map')
      shape.largestLiteral = Math.max(shape.largestLiteral, node.args.length);
    if (node.op === 'value' && typeof node.args === 'string')
      shape.longestStringLiteral = Math.max(shape.longestStringLiteral, node.args.length);
    stack.push(...children(node));
  }
  return shape;
}

/** How many compiled expressions the cache holds (at most CACHE_SIZE). */
export function cachedHealthChecks(): number {
  return cache.size;
}

/** Parses and checks an expression once; later calls with the same text reuse the result. */
export function compileHealthCheck(expression: string): CompiledHealthCheck | HealthCheckProblem {
  const hit = cache.get(expression);
  if (hit !== undefined) {
    cache.delete(expression); // re-inserted below: most recently used last
    cache.set(expression, hit);
    return hit;
  }
  const compiled = compileUncached(expression);
  if (cache.size >= CACHE_SIZE) {
    const oldest = cache.keys().next().value;
    if (oldest !== undefined) cache.delete(oldest);
  }
  // Only short texts are cached, so the cache holds at most CACHE_SIZE × MAX_EXPRESSION_LENGTH.
  if (expression.length <= MAX_EXPRESSION_LENGTH) cache.set(expression, compiled);
  return compiled;
}

function compileUncached(expression: string): CompiledHealthCheck | HealthCheckProblem {
  if (expression.length > MAX_EXPRESSION_LENGTH)
    return {
      reason: 'InvalidHealthCheck',
      message: `${FIELD} is ${expression.length} characters long, more than the limit of ${MAX_EXPRESSION_LENGTH}`,
    };
  let parsed: ReturnType<Environment['parse']>;
  try {
    parsed = environment.parse(expression);
  } catch (err) {
    return { reason: 'InvalidHealthCheck', message: `${FIELD}: ${messageOf(err)}` };
  }
  const shape = shapeOf(parsed.ast);
  if ('reason' in shape) return shape;
  return { expression, program: parsed, ast: parsed.ast, shape };
}

/** The sizes of an input (one walk over it; JSON objects from the API server have no cycles). */
export function inputSizes(input: unknown): InputSizes {
  const sizes: InputSizes = { items: 0, chars: 0, values: 0 };
  const stack: unknown[] = [input];
  while (stack.length > 0) {
    const v = stack.pop();
    sizes.values += 1;
    if (typeof v === 'string') sizes.chars = Math.max(sizes.chars, v.length);
    else if (Array.isArray(v)) {
      sizes.items = Math.max(sizes.items, v.length);
      for (const x of v) stack.push(x); // not push(...v): a huge list would overflow the call
    } else if (typeof v === 'object' && v !== null) {
      const entries = Object.entries(v);
      sizes.items = Math.max(sizes.items, entries.length);
      for (const [k, x] of entries) {
        sizes.chars = Math.max(sizes.chars, k.length);
        stack.push(x);
      }
    }
  }
  return sizes;
}

/** An upper bound of the cost of evaluating the expression over an input of these sizes. */
export function estimateCost(compiled: CompiledHealthCheck, input: InputSizes): number {
  const { plusCount, largestLiteral, longestStringLiteral, joins } = compiled.shape;
  const range = Math.max(input.items, largestLiteral, 1) * (1 + plusCount);
  const chars = Math.max(input.chars, longestStringLiteral) * (1 + plusCount) * (joins ? range : 1);
  // `in`, equality, `+` and function calls may walk a whole list or structure; ordering and
  // arithmetic compare scalars (strings at most `chars` long); the rest is one step.
  const walk = 1 + range + Math.ceil((chars + input.values) / CHARS_PER_UNIT);
  const compare = 1 + Math.ceil(chars / CHARS_PER_UNIT);
  const cost = (node: ASTNode): number => {
    const fn = functionName(node);
    const parts = children(node);
    if (node.op === 'rcall' && fn !== undefined && COMPREHENSIONS.has(fn)) {
      // receiver once; iteration variable, predicate and transform once per element of the range
      const [receiver, ...body] = parts;
      return (receiver === undefined ? 0 : cost(receiver)) + range * (1 + sum(body.map(cost)));
    }
    const own = STEP_OPS.has(node.op) || fn === 'has' ? 1 : SCALAR_OPS.has(node.op) ? compare : walk;
    return own + sum(parts.map(cost));
  };
  return cost(compiled.ast);
}

function sum(xs: readonly number[]): number {
  return xs.reduce((a, b) => a + b, 0);
}

function tooCostly(cost: number, what: string): HealthCheckProblem {
  return {
    reason: 'HealthCheckTooCostly',
    message: `${FIELD} may cost ${cost.toExponential(2)} units ${what}, more than the limit of ${MAX_COST}: nest fewer comprehensions (all, exists, map, filter) or iterate shorter lists`,
  };
}

/** Why the expression cannot be used (syntax, length, refused function, cost), or undefined. */
export function healthCheckProblem(expression: string | undefined): HealthCheckProblem | undefined {
  if (expression === undefined || expression.trim() === '') return undefined;
  const compiled = compileHealthCheck(expression);
  if ('reason' in compiled) return compiled;
  const cost = estimateCost(compiled, ASSUMED_INPUT);
  return cost > MAX_COST ? tooCostly(cost, `over lists of ${ASSUMED_INPUT.items} items`) : undefined;
}

export type HealthCheckResult =
  | { outcome: 'value'; value: unknown }
  | { outcome: 'error'; message: string }
  | { outcome: 'refused'; problem: HealthCheckProblem };

/** Evaluates the expression over the input, unless its cost bound over this input is over MAX_COST. */
export function evaluateHealthCheck(expression: string, input: Record<string, unknown>): HealthCheckResult {
  const compiled = compileHealthCheck(expression);
  if ('reason' in compiled) return { outcome: 'refused', problem: compiled };
  const sizes = inputSizes(input);
  const cost = estimateCost(compiled, sizes);
  if (cost > MAX_COST)
    return {
      outcome: 'refused',
      problem: tooCostly(cost, `over this input (lists up to ${sizes.items} items, ${sizes.values} values)`),
    };
  try {
    return { outcome: 'value', value: compiled.program(input) };
  } catch (err) {
    return { outcome: 'error', message: messageOf(err) };
  }
}
