// How a preview reads: a summary table with one row per group of Clusters whose change is
// identical (1,000 Clusters with the same change are one row with a count), the ClusterClass change
// once, the failures with their reasons, and on request unified diffs per group and object.
import { unifiedDiff } from '../offline/unified.ts';
import type { ClassDiff } from './clusterclass.ts';
import type { ClusterPreview, PreviewResult } from './core.ts';
import type { ObjectChange } from './objects.ts';

function table(rows: string[][]): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  return rows
    .map((r) =>
      r
        .map((c, i) => c.padEnd(widths[i] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

function counts(objects: readonly ObjectChange[]): string {
  const n = (k: ObjectChange['change']) => objects.filter((o) => o.change === k).length;
  return `+${n('added')} ~${n('changed')} -${n('removed')}`;
}

function classLine(d: ClassDiff): string {
  const head = `ClusterClass ${d.from} → ${d.to} (names of ${d.from} read as ${d.to})`;
  if (d.failure !== undefined)
    return `${head}: not compared, release ${d.failure.release}: ${d.failure.reason}: ${d.failure.message}`;
  const objects = d.objects.map(
    (o) => `  ${o.change === 'added' ? '+' : o.change === 'removed' ? '-' : '~'} ${o.id}`,
  );
  if (d.objects.length === 0) return `${head}: no change besides the name`;
  return [`${head}: objects ${counts(d.objects)}`, ...objects].join('\n');
}

/** Members of each group, in the order of the result. */
function groupMembers(result: PreviewResult): ClusterPreview[][] {
  const out: ClusterPreview[][] = result.groups.map(() => []);
  for (const c of result.clusters) out[c.group]?.push(c);
  return out;
}

function whoOf(members: readonly ClusterPreview[]): string {
  const first = members[0];
  if (first === undefined) return '';
  const name = `${first.namespace}/${first.name}`;
  return members.length > 1 ? `${name} (+${members.length - 1} more)` : name;
}

function resultOf(c: ClusterPreview): string {
  if (c.failure !== undefined) return `FAILED ${c.failure.reason}`;
  return c.outcome;
}

/** The summary: header, ClusterClass change, one row per group, then every failure's message. */
export function summaryText(result: PreviewResult): string {
  const { clusterStack, release } = result;
  const lines = [
    `ClusterStack ${clusterStack.namespace}/${clusterStack.name} → ${release}: ${plural(result.clusters.length, 'Cluster')}, ${plural(result.groups.length, 'distinct change')}, ${result.failed} failing to render`,
  ];
  for (const d of result.clusterClass) lines.push(classLine(d));
  if (result.clusters.length === 0) return `${lines.join('\n')}\nno Cluster would move\n`;
  const rows = [['CLUSTERS', 'COUNT', 'WAVE', 'FROM', 'ADDONS', 'OBJECTS', 'VALUES', 'RESULT']];
  const groups = groupMembers(result);
  for (const members of groups) {
    const c = members[0];
    if (c === undefined) continue;
    const waves = [...new Set(members.map((m) => m.wave))].join(',');
    const addons = [...c.addonsAdded.map((a) => `+${a}`), ...c.addonsRemoved.map((a) => `-${a}`)].join(' ');
    const values = c.values.map((v) => `${v.addon}(${v.paths.length})`).join(' ');
    rows.push([
      whoOf(members),
      String(members.length),
      waves,
      c.from,
      addons || '-',
      c.failure !== undefined ? '-' : counts(c.objects),
      values || '-',
      resultOf(c),
    ]);
  }
  lines.push(table(rows));
  for (const members of groups) {
    const failure = members[0]?.failure;
    if (failure === undefined) continue;
    lines.push(
      `${members.map((m) => `${m.namespace}/${m.name}`).join(', ')}: ${failure.reason}: ${failure.message}`,
    );
  }
  return `${lines.join('\n')}\n`;
}

function objectDiff(o: ObjectChange): string {
  return unifiedDiff(`a/${o.addon}/${o.id}`, `b/${o.addon}/${o.id}`, o.before, o.after);
}

/** Unified diffs: the ClusterClass once, then per group of identical Clusters per object. */
export function diffText(result: PreviewResult): string {
  const out: string[] = [];
  for (const d of result.clusterClass) {
    if (d.objects.length === 0) continue;
    out.push(`### ClusterClass ${d.from} → ${d.to}\n`);
    for (const o of d.objects) out.push(objectDiff(o));
  }
  for (const members of groupMembers(result)) {
    const c = members[0];
    if (c === undefined || c.objects.length === 0) continue;
    const first = `${c.namespace}/${c.name}`;
    const more =
      members.length > 1 ? ` (+${members.length - 1} more with the same change; the diff of ${first})` : '';
    out.push(`### ${first}${more}\n`);
    for (const o of c.objects) out.push(objectDiff(o));
  }
  return out.join('');
}

/** The result for machines (stable key order as built). */
export function jsonText(result: PreviewResult): string {
  return `${JSON.stringify(result, null, 2)}\n`;
}
