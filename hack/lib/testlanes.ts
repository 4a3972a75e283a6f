// What `npm test` (hack/run-tests.ts) runs where, and what it says at the end; pure.

export interface Lanes {
  /** Use the environment without disrupting it; any number at once. */
  shared: string[];
  /** Apply into the one workload cluster: one at a time. */
  workload: string[];
  /** Restart shared components: alone with the environment, last. */
  disruptive: string[];
  /** Use no environment (test/unit/, and files marked NO_ENVIRONMENT_MARK): beside the disruptive files. */
  unit: string[];
}

/**
 * The line a test file outside test/unit/ carries when it uses no test environment (no API
 * server, Flux, Git server or registry): it runs beside the disruptive files, as the unit tests do.
 */
export const NO_ENVIRONMENT_MARK = '// npm test: uses no test environment';

/** Whether a file's text carries NO_ENVIRONMENT_MARK as a line of its own. */
export function marksNoEnvironment(text: string): boolean {
  return text.split('\n').some((line) => line.trim() === NO_ENVIRONMENT_MARK);
}

export function planLanes(
  files: readonly string[],
  usesNoEnvironment: (file: string) => boolean = () => false,
): Lanes {
  const lanes: Lanes = { shared: [], workload: [], disruptive: [], unit: [] };
  for (const file of files) {
    if (file.endsWith('.disruptive.test.ts')) lanes.disruptive.push(file);
    else if (file.endsWith('.workload.test.ts')) lanes.workload.push(file);
    else if (/(^|\/)test\/unit\//.test(file) || usesNoEnvironment(file)) lanes.unit.push(file);
    else lanes.shared.push(file);
  }
  return lanes;
}

export interface FileResult {
  file: string;
  /** The test runner's exit code. */
  code: number;
  seconds: number;
  /** What the test runner printed (its spec report ends with the ℹ counts). */
  report: string;
}

const COUNTS = ['tests', 'pass', 'fail', 'cancelled', 'skipped', 'todo'] as const;
type Counts = Record<(typeof COUNTS)[number], number>;

/** The ℹ counts at the end of a spec report (zeros where the runner printed none). */
export function reportCounts(report: string): Counts {
  const counts = Object.fromEntries(COUNTS.map((k) => [k, 0])) as Counts;
  for (const k of COUNTS) {
    const all = [...report.matchAll(new RegExp(`^ℹ ${k} (\\d+)$`, 'gm'))];
    const last = all.at(-1);
    if (last !== undefined) counts[k] = Number(last[1]);
  }
  return counts;
}

export interface Summary {
  failed: boolean;
  lines: string[];
}

/** The totals, the files that failed and the longest files, as lines for the log. */
export function summarize(results: readonly FileResult[], longest = 10): Summary {
  const total = Object.fromEntries(COUNTS.map((k) => [k, 0])) as Counts;
  for (const r of results) {
    const c = reportCounts(r.report);
    for (const k of COUNTS) total[k] += c[k];
  }
  const failedFiles = results.filter((r) => r.code !== 0);
  const seconds = results.reduce((s, r) => s + r.seconds, 0);
  const lines = [
    `${results.length} files, ${COUNTS.map((k) => `${k} ${total[k]}`).join(', ')}; ${(seconds / 60).toFixed(1)} min of test files in all`,
    ...failedFiles.map((r) => `failed: ${r.file} (exit ${r.code})`),
    `longest files: ${[...results]
      .sort((a, b) => b.seconds - a.seconds)
      .slice(0, longest)
      .map((r) => `${r.file} ${r.seconds.toFixed(0)}s`)
      .join(', ')}`,
  ];
  return { failed: failedFiles.length > 0, lines };
}
