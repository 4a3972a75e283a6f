// Template helpers for addon authors. Argument order follows Sprig / Helm (`indent 4 text`,
// `default "fallback" value`, `required "message" value`, `semverCompare ">=1.30" version`)
// so templates moved over from Cluster API's Helm addon provider read the same.
// All helpers are pure and deterministic (sorted keys in toYaml/toJson).
import semver from 'semver';
import { stringify as yamlStringify } from 'yaml';
import { cidrHost, cidrNetmask, cidrNetwork, cidrPrefix } from './cidr.ts';
import { formatBytes, MAX_HELPER_OUTPUT, MAX_INDENT_WIDTH } from './limits.ts';

/** Object.prototype's own names plus `prototype`: never reachable from a template. */
export const FORBIDDEN_NAMES: ReadonlySet<string> = new Set([
  ...Object.getOwnPropertyNames(Object.prototype),
  'prototype',
]);

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A deep copy with object keys sorted (code point order), for deterministic serialisation. */
export function sortKeysDeep(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeysDeep);
  if (isPlainObject(value)) {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value).sort()) out[key] = sortKeysDeep(value[key]);
    return out;
  }
  return value;
}

function describe(value: unknown): string {
  if (value === undefined) return 'undefined';
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

function scalarText(helper: string, value: unknown): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint')
    return String(value);
  throw new Error(`${helper} expects a string, got ${describe(value)}`);
}

function count(helper: string, value: unknown): number {
  const n = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 0) {
    throw new Error(`${helper} expects a non-negative integer width, got ${JSON.stringify(value)}`);
  }
  return n;
}

/** YAML without the trailing newline; keys sorted; no line folding. */
export function toYaml(value: unknown): string {
  if (value === undefined) throw new Error('toYaml got undefined');
  return yamlStringify(sortKeysDeep(value), { lineWidth: 0 }).replace(/\n$/, '');
}

/** Compact JSON with sorted keys. */
export function toJson(value: unknown): string {
  if (value === undefined) throw new Error('toJson got undefined');
  return JSON.stringify(sortKeysDeep(value));
}

/**
 * Prefix every non-empty line with `width` spaces (empty lines stay empty). Bounded: at most
 * MAX_INDENT_WIDTH spaces, and the result at most MAX_HELPER_OUTPUT, checked before it is built.
 */
export function indent(width: unknown, text: unknown): string {
  const n = count('indent', width);
  if (n > MAX_INDENT_WIDTH) {
    throw new Error(`indent width ${n} exceeds the limit of ${MAX_INDENT_WIDTH}`);
  }
  const source = scalarText('indent', text);
  const lines = source.split('\n');
  if (source.length + n * lines.length > MAX_HELPER_OUTPUT) {
    throw new Error(`indent would produce more than the limit of ${formatBytes(MAX_HELPER_OUTPUT)}`);
  }
  const pad = ' '.repeat(n);
  return lines.map((line) => (line === '' ? line : pad + line)).join('\n');
}

/** A newline, then `indent`. */
export function nindent(width: unknown, text: unknown): string {
  return `\n${indent(width, text)}`;
}

/** `value` unless it is undefined or null; then `fallback`. (false, 0 and "" are kept, unlike Sprig.) */
export function defaultValue(fallback: unknown, value: unknown): unknown {
  return value === undefined || value === null ? fallback : value;
}

/** `value`, or fail the render with `message` when it is undefined, null or "". */
export function required(message: unknown, value: unknown): unknown {
  if (value === undefined || value === null || value === '') {
    throw new Error(`required: ${typeof message === 'string' ? message : JSON.stringify(message)}`);
  }
  return value;
}

export function b64enc(value: unknown): string {
  return Buffer.from(scalarText('b64enc', value), 'utf8').toString('base64');
}

/** A double-quoted scalar that is valid YAML (and JSON) for any string: `quote "a\"b"` → `"a\"b"`. */
export function quote(value: unknown): string {
  if (value === null || value === undefined) return '""';
  return JSON.stringify(scalarText('quote', value));
}

function parseVersion(version: unknown): semver.SemVer {
  const text = scalarText('semverCompare', version);
  const parsed = semver.parse(text) ?? semver.coerce(text, { includePrerelease: true });
  if (!parsed) throw new Error(`semverCompare: "${text}" is not a version`);
  return parsed;
}

/**
 * Whether `version` satisfies `constraint`. npm range syntax; a comma means AND as in Helm
 * (">=1.30.0, <1.31.0"). Pre-release versions are included ("v1.31.0-rc.1" satisfies ">=1.30").
 */
export function semverCompare(constraint: unknown, version: unknown): boolean {
  const range = scalarText('semverCompare', constraint).replaceAll(',', ' ');
  if (semver.validRange(range) === null)
    throw new Error(`semverCompare: "${range}" is not a version constraint`);
  return semver.satisfies(parseVersion(version), range, { includePrerelease: true });
}

/** Handlebars truthiness: undefined, null, false, "", 0 and [] are false. */
export function truthy(value: unknown): boolean {
  if (Array.isArray(value)) return value.length > 0;
  return Boolean(value);
}

export function eq(a: unknown, b: unknown): boolean {
  return a === b;
}

/** Own property `key` of `object`, or undefined. Never a prototype member. */
export function lookup(object: unknown, key: unknown): unknown {
  if (typeof key !== 'string' && typeof key !== 'number') {
    throw new Error(`lookup expects a string or number key, got ${describe(key)}`);
  }
  const name = String(key);
  if (FORBIDDEN_NAMES.has(name)) throw new Error(`lookup: access to "${name}" is not allowed`);
  if (typeof object !== 'object' || object === null) return undefined;
  return Object.hasOwn(object, name) ? (object as Record<string, unknown>)[name] : undefined;
}

export { cidrHost, cidrNetmask, cidrNetwork, cidrPrefix };

/** A helper as registered: positional arguments only (the Handlebars options object is dropped). */
export type PlainHelper = (...args: unknown[]) => unknown;

interface HelperSpec {
  fn: PlainHelper;
  /** Number of positional arguments; undefined = variadic (at least one). */
  arity?: number;
  /**
   * Lenient helpers test for presence: a missing field in their arguments is `undefined`
   * instead of a strict-mode error. Every other helper's arguments are looked up strictly.
   */
  lenient?: boolean;
}

export const HELPERS: ReadonlyMap<string, HelperSpec> = new Map<string, HelperSpec>([
  ['toYaml', { fn: (v) => toYaml(v), arity: 1 }],
  ['toJson', { fn: (v) => toJson(v), arity: 1 }],
  ['indent', { fn: (n, s) => indent(n, s), arity: 2 }],
  ['nindent', { fn: (n, s) => nindent(n, s), arity: 2 }],
  ['default', { fn: (f, v) => defaultValue(f, v), arity: 2, lenient: true }],
  ['required', { fn: (m, v) => required(m, v), arity: 2, lenient: true }],
  ['b64enc', { fn: (v) => b64enc(v), arity: 1 }],
  ['quote', { fn: (v) => quote(v), arity: 1 }],
  ['cidrHost', { fn: (c, n) => cidrHost(scalarText('cidrHost', c), n), arity: 2 }],
  ['cidrPrefix', { fn: (c) => cidrPrefix(scalarText('cidrPrefix', c)), arity: 1 }],
  ['cidrNetmask', { fn: (c) => cidrNetmask(scalarText('cidrNetmask', c)), arity: 1 }],
  ['cidrNetwork', { fn: (c) => cidrNetwork(scalarText('cidrNetwork', c)), arity: 1 }],
  ['semverCompare', { fn: (c, v) => semverCompare(c, v), arity: 2 }],
  ['eq', { fn: (a, b) => eq(a, b), arity: 2 }],
  ['ne', { fn: (a, b) => !eq(a, b), arity: 2 }],
  ['and', { fn: (...args) => args.every(truthy), lenient: true }],
  ['or', { fn: (...args) => args.some(truthy), lenient: true }],
  ['not', { fn: (v) => !truthy(v), arity: 1, lenient: true }],
  ['lookup', { fn: (o, k) => lookup(o, k), arity: 2 }],
]);

/** Handlebars built-in block helpers that test for presence keep lenient arguments. */
export const LENIENT_BUILTINS: ReadonlySet<string> = new Set(['if', 'unless', 'with']);
