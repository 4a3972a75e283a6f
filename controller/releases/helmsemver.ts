// Helm's version constraints (github.com/Masterminds/semver/v3 v3.4.0, the version Helm v3.19.5
// links): how `helm dependency update` reads a Chart.yaml dependency's `version` and which index
// entry it picks. npm's semver differs (comma as AND, `x` ranges, prerelease rules, lenient
// versions like "1.2" and "01.2.3"), and a dependency must resolve to the version Helm picks, so
// this follows Masterminds' code function by function (names kept for comparison).

/** A version as Masterminds' NewVersion reads it (CoerceNewVersion: leading zeros allowed). */
export interface HelmVersion {
  major: bigint;
  minor: bigint;
  patch: bigint;
  pre: string;
  original: string;
}

// Go's \s is ASCII whitespace only.
const S = '[\\t\\n\\f\\r ]';
const LOOSE_VERSION =
  /^v?([0-9]+)(\.[0-9]+)?(\.[0-9]+)?(-([0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*))?(\+([0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*))?$/;
const MAX_UINT64 = (1n << 64n) - 1n;
const NUM = /^[0-9]+$/;
const ALLOWED = /^[0-9A-Za-z-]+$/;

function segment(text: string): bigint | undefined {
  const n = BigInt(text);
  return n > MAX_UINT64 ? undefined : n;
}

/** Masterminds' NewVersion; undefined where it returns an error. */
export function parseHelmVersion(text: string): HelmVersion | undefined {
  const m = LOOSE_VERSION.exec(text);
  if (m === null) return undefined;
  const major = segment(m[1] ?? '0');
  const minor = segment((m[2] ?? '.0').slice(1));
  const patch = segment((m[3] ?? '.0').slice(1));
  if (major === undefined || minor === undefined || patch === undefined) return undefined;
  const pre = m[5] ?? '';
  if (pre !== '') {
    for (const part of pre.split('.')) {
      if (part === '') return undefined;
      if (NUM.test(part) ? part.length > 1 && part[0] === '0' : !ALLOWED.test(part)) return undefined;
    }
  }
  return { major, minor, patch, pre, original: text };
}

function cmp(a: bigint, b: bigint): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function comparePrePart(s: string, o: string): number {
  if (s === o) return 0;
  if (s === '') return -1;
  if (o === '') return 1;
  const sNum = NUM.test(s) && BigInt(s) <= MAX_UINT64;
  const oNum = NUM.test(o) && BigInt(o) <= MAX_UINT64;
  if (!sNum && !oNum) return s > o ? 1 : -1;
  if (!oNum) return -1;
  if (!sNum) return 1;
  return BigInt(s) > BigInt(o) ? 1 : -1;
}

function comparePrerelease(v: string, o: string): number {
  const sp = v.split('.');
  const op = o.split('.');
  for (let i = 0; i < Math.max(sp.length, op.length); i++) {
    const d = comparePrePart(sp[i] ?? '', op[i] ?? '');
    if (d !== 0) return d;
  }
  return 0;
}

/** Masterminds' Version.Compare: -1, 0 or 1 (build metadata ignored). */
export function compareHelmVersions(v: HelmVersion, o: HelmVersion): number {
  const d = cmp(v.major, o.major) || cmp(v.minor, o.minor) || cmp(v.patch, o.patch);
  if (d !== 0) return d;
  if (v.pre === '' && o.pre === '') return 0;
  if (v.pre === '') return 1;
  if (o.pre === '') return -1;
  return comparePrerelease(v.pre, o.pre);
}

interface Constraint {
  con: HelmVersion;
  op: string;
  dirty: boolean;
  minorDirty: boolean;
  patchDirty: boolean;
}

/** Parsed constraints: OR of ANDs, and per OR group whether it names a prerelease. */
export interface HelmConstraints {
  groups: { all: Constraint[]; hasPre: boolean }[];
}

const OPS = '=||!=|>|<|>=|=>|<=|=<|~|~>|\\^';
const CV =
  'v?([0-9|x|X|\\*]+)(\\.[0-9|x|X|\\*]+)?(\\.[0-9|x|X|\\*]+)?' +
  '(-([0-9A-Za-z\\-]+(\\.[0-9A-Za-z\\-]+)*))?' +
  '(\\+([0-9A-Za-z\\-]+(\\.[0-9A-Za-z\\-]+)*))?';
const CONSTRAINT = new RegExp(`^${S}*(${OPS})${S}*(${CV})${S}*$`);
const RANGE = new RegExp(`${S}*(${CV})${S}+-${S}+(${CV})${S}*`, 'g');
const FIND = new RegExp(`(${OPS})${S}*(${CV})`, 'g');
const VALID = new RegExp(`^(${S}*(${OPS})${S}*(${CV})${S}*)((?:${S}+|,${S}*)(${OPS})${S}*(${CV})${S}*)*$`);

const isX = (x: string | undefined): boolean => x === 'x' || x === '*' || x === 'X';

function parseConstraint(text: string): Constraint | undefined {
  const m = CONSTRAINT.exec(text);
  if (m === null) return undefined;
  const op = m[1] ?? '';
  const major = m[3] ?? '';
  const minor = m[4] ?? '';
  const patch = m[5] ?? '';
  const pre = m[6] ?? '';
  let ver = m[2] ?? '';
  let dirty = false;
  let minorDirty = false;
  let patchDirty = false;
  if (isX(major) || major === '') {
    ver = `0.0.0${pre}`;
    dirty = true;
  } else if (isX(minor.replace(/^\./, '')) || minor === '') {
    minorDirty = dirty = true;
    ver = `${major}.0.0${pre}`;
  } else if (isX(patch.replace(/^\./, '')) || patch === '') {
    patchDirty = dirty = true;
    ver = `${major}${minor}.0${pre}`;
  }
  const con = parseHelmVersion(ver);
  return con === undefined ? undefined : { con, op, dirty, minorDirty, patchDirty };
}

/** Masterminds' rewriteRange: "1.2 - 1.4" → ">= 1.2, <= 1.4 ". */
function rewriteRange(text: string): string {
  let out = text;
  for (const m of text.matchAll(RANGE)) out = out.replace(m[0], `>= ${m[1]}, <= ${m[11]} `);
  return out;
}

/** Masterminds' NewConstraint; a reason where it returns an error. */
export function parseHelmConstraint(
  text: string,
): { ok: true; value: HelmConstraints } | { ok: false; reason: string } {
  const groups: HelmConstraints['groups'] = [];
  for (const or of rewriteRange(text).split('||')) {
    if (!VALID.test(or)) return { ok: false, reason: `improper constraint: ${or}` };
    const found = [...or.matchAll(FIND)].map((m) => m[0]);
    const all: Constraint[] = [];
    for (const s of found.length > 0 ? found : [or]) {
      const c = parseConstraint(s);
      if (c === undefined) return { ok: false, reason: `improper constraint: ${s}` };
      all.push(c);
    }
    groups.push({ all, hasPre: all.some((c) => c.con.pre !== '') });
  }
  return { ok: true, value: { groups } };
}

function tilde(v: HelmVersion, c: Constraint): boolean {
  if (compareHelmVersions(v, c.con) < 0) return false;
  if (c.con.major === 0n && c.con.minor === 0n && c.con.patch === 0n && !c.minorDirty && !c.patchDirty)
    return true;
  if (v.major !== c.con.major) return false;
  return v.minor === c.con.minor || c.minorDirty;
}

function caret(v: HelmVersion, c: Constraint): boolean {
  if (compareHelmVersions(v, c.con) < 0) return false;
  if (c.con.major > 0n || c.minorDirty) return v.major === c.con.major;
  if (v.major > 0n) return false;
  if (c.con.minor > 0n || c.patchDirty) return v.minor === c.con.minor;
  if (v.minor > 0n) return false;
  return c.con.patch === v.patch;
}

function notEqual(v: HelmVersion, c: Constraint): boolean {
  if (c.dirty) {
    if (c.con.major !== v.major) return true;
    if (c.con.minor !== v.minor && !c.minorDirty) return true;
    if (c.minorDirty) return false;
    if (c.con.patch !== v.patch && !c.patchDirty) return true;
    if (c.patchDirty) {
      if (v.pre !== '' || c.con.pre !== '') return comparePrerelease(v.pre, c.con.pre) !== 0;
      return false;
    }
  }
  return compareHelmVersions(v, c.con) !== 0;
}

function greaterThan(v: HelmVersion, c: Constraint): boolean {
  if (!c.dirty) return compareHelmVersions(v, c.con) === 1;
  if (v.major > c.con.major) return true;
  if (v.major < c.con.major) return false;
  if (c.minorDirty) return false;
  if (c.patchDirty) return v.minor > c.con.minor;
  return compareHelmVersions(v, c.con) === 1;
}

function lessThanEqual(v: HelmVersion, c: Constraint): boolean {
  if (!c.dirty) return compareHelmVersions(v, c.con) <= 0;
  if (v.major > c.con.major) return false;
  return !(v.major === c.con.major && v.minor > c.con.minor && !c.minorDirty);
}

function check(v: HelmVersion, c: Constraint, includePre: boolean): boolean {
  if (v.pre !== '' && !includePre) return false;
  switch (c.op) {
    case '':
    case '=':
      return c.dirty ? tilde(v, c) : compareHelmVersions(v, c.con) === 0;
    case '!=':
      return notEqual(v, c);
    case '>':
      return greaterThan(v, c);
    case '<':
      return compareHelmVersions(v, c.con) < 0;
    case '>=':
    case '=>':
      return compareHelmVersions(v, c.con) >= 0;
    case '<=':
    case '=<':
      return lessThanEqual(v, c);
    case '~':
    case '~>':
      return tilde(v, c);
    case '^':
      return caret(v, c);
    default:
      return false;
  }
}

/** Masterminds' Constraints.Check. */
export function helmConstraintAllows(cs: HelmConstraints, v: HelmVersion): boolean {
  return cs.groups.some((g) => g.all.every((c) => check(v, c, g.hasPre)));
}
