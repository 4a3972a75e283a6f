// Canonical YAML for everything the offline renderer writes: sorted keys, no anchors/aliases,
// no line folding. The same value always gives the same bytes.
import { parseDocument, stringify } from 'yaml';

export function canonicalYaml(value: unknown): string {
  return stringify(value, { sortMapEntries: true, aliasDuplicateObjects: false, lineWidth: 0 });
}

/** Parses one YAML document strictly (unique keys, no aliases). Throws with a one-line message. */
export function parseOneDocument(text: string): unknown {
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: true });
  const error = doc.errors[0];
  if (error !== undefined) {
    const line = error.linePos?.[0].line;
    throw new Error(`${line === undefined ? '' : `line ${line}: `}${error.message.split('\n')[0]}`);
  }
  return doc.toJS({ maxAliasCount: 0 });
}

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** A deep copy with every object's keys sorted (JSON values). */
export function sortKeys<T>(value: T): T {
  if (Array.isArray(value)) return value.map((v) => sortKeys(v)) as T;
  if (isRecord(value)) {
    return Object.fromEntries(
      Object.keys(value)
        .sort(compareStrings)
        .map((k) => [k, sortKeys(value[k])]),
    ) as T;
  }
  return value;
}
