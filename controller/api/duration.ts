// Go-style durations ("30s", "5m", "1h30m", "500ms"), as used by Flux and the CRDs' interval fields.

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Milliseconds of a Go duration; undefined when it does not parse or is not positive. */
export function parseDuration(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const s = text.trim();
  if (s === '' || !/^(\d+(\.\d+)?(ms|s|m|h))+$/.test(s)) return undefined;
  let total = 0;
  for (const m of s.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)) {
    total += Number(m[1]) * (UNIT_MS[m[2] ?? ''] ?? 0);
  }
  return total > 0 ? Math.round(total) : undefined;
}

/** Like parseDuration, but "0s" (and any zero duration) is 0 instead of undefined. */
export function parseDurationOrZero(text: string | undefined): number | undefined {
  if (text !== undefined && /^(0+(\.0+)?(ms|s|m|h))+$/.test(text.trim())) return 0;
  return parseDuration(text);
}
