// A small unified diff (LCS over lines, 3 lines of context), enough for objects of a few hundred lines.
export function unifiedDiff(aName: string, bName: string, a: string, b: string, context = 3): string {
  if (a === b) return '';
  const al = a === '' ? [] : a.replace(/\n$/, '').split('\n');
  const bl = b === '' ? [] : b.replace(/\n$/, '').split('\n');
  const n = al.length;
  const m = bl.length;
  // lcs[i][j] = LCS length of al[i..] and bl[j..]
  const lcs: Uint32Array[] = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    const row = lcs[i] as Uint32Array;
    const next = lcs[i + 1] as Uint32Array;
    for (let j = m - 1; j >= 0; j--) {
      row[j] =
        al[i] === bl[j] ? (next[j + 1] as number) + 1 : Math.max(next[j] as number, row[j + 1] as number);
    }
  }
  type Op = { t: ' ' | '-' | '+'; line: string; ai: number; bi: number };
  const ops: Op[] = [];
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && al[i] === bl[j]) {
      ops.push({ t: ' ', line: al[i] as string, ai: i, bi: j });
      i++;
      j++;
    } else if (
      i < n &&
      (j >= m || ((lcs[i + 1] as Uint32Array)[j] ?? 0) >= ((lcs[i] as Uint32Array)[j + 1] ?? 0))
    ) {
      ops.push({ t: '-', line: al[i] as string, ai: i, bi: j });
      i++;
    } else {
      ops.push({ t: '+', line: bl[j] as string, ai: i, bi: j });
      j++;
    }
  }
  const out = [`--- ${aName}`, `+++ ${bName}`];
  let k = 0;
  while (k < ops.length) {
    if ((ops[k] as Op).t === ' ') {
      k++;
      continue;
    }
    let start = Math.max(0, k - context);
    let end = k;
    // extend the hunk while changes are within 2*context lines of each other
    for (;;) {
      while (end < ops.length && (ops[end] as Op).t !== ' ') end++;
      let next = end;
      while (next < ops.length && (ops[next] as Op).t === ' ') next++;
      if (next < ops.length && next - end <= 2 * context) end = next;
      else break;
    }
    const stop = Math.min(ops.length, end + context);
    const hunk = ops.slice(start, stop);
    const first = hunk[0] as Op;
    const aLen = hunk.filter((o) => o.t !== '+').length;
    const bLen = hunk.filter((o) => o.t !== '-').length;
    out.push(
      `@@ -${aLen === 0 ? first.ai : first.ai + 1},${aLen} +${bLen === 0 ? first.bi : first.bi + 1},${bLen} @@`,
    );
    for (const o of hunk) out.push(`${o.t}${o.line}`);
    k = stop;
    start = stop;
  }
  return `${out.join('\n')}\n`;
}
