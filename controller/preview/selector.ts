// kubectl's label selector syntax (-l): `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x,y)`,
// `a` (exists) and `!a` (does not exist), comma-separated, as a LabelSelector.
import type { LabelSelector } from '../api/rollout.ts';

const KEY = /^([a-z0-9A-Z]([-a-z0-9A-Z_.]*[a-z0-9A-Z])?\/)?[a-z0-9A-Z]([-a-z0-9A-Z_.]*[a-z0-9A-Z])?$/;
const VALUE = /^([a-z0-9A-Z]([-a-z0-9A-Z_.]*[a-z0-9A-Z])?)?$/;

/** Splits on commas outside parentheses. */
function terms(text: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let current = '';
  for (const ch of text) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      out.push(current);
      current = '';
    } else current += ch;
  }
  out.push(current);
  return out.map((t) => t.trim()).filter((t) => t !== '');
}

function checked(what: string, value: string, pattern: RegExp): string {
  if (!pattern.test(value)) throw new Error(`label selector: "${value}" is not a valid label ${what}`);
  return value;
}

/** Parses a kubectl label selector; throws naming the term that is not one. */
export function parseLabelSelector(text: string): LabelSelector {
  const matchLabels: Record<string, string> = {};
  const matchExpressions: NonNullable<LabelSelector['matchExpressions']> = [];
  for (const term of terms(text)) {
    const set = /^(\S+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(term);
    if (set !== null) {
      const values = (set[3] ?? '')
        .split(',')
        .map((v) => checked('value', v.trim(), VALUE))
        .filter((v) => v !== '');
      matchExpressions.push({
        key: checked('key', set[1] ?? '', KEY),
        operator: set[2] === 'in' ? 'In' : 'NotIn',
        values,
      });
      continue;
    }
    const eq = /^([^!=\s]+)\s*(==|=|!=)\s*(\S*)$/.exec(term);
    if (eq !== null) {
      const key = checked('key', eq[1] ?? '', KEY);
      const value = checked('value', eq[3] ?? '', VALUE);
      if (eq[2] === '!=') matchExpressions.push({ key, operator: 'NotIn', values: [value] });
      else matchLabels[key] = value;
      continue;
    }
    if (term.startsWith('!')) {
      matchExpressions.push({ key: checked('key', term.slice(1).trim(), KEY), operator: 'DoesNotExist' });
      continue;
    }
    matchExpressions.push({ key: checked('key', term, KEY), operator: 'Exists' });
  }
  return {
    ...(Object.keys(matchLabels).length > 0 ? { matchLabels } : {}),
    ...(matchExpressions.length > 0 ? { matchExpressions } : {}),
  };
}
