// `npm test`: builds the test environment if it is not cached, starts one environment for
// the whole run, runs every test file with node's test runner, and stops the environment.
// Arguments narrow the run to some test files. A running environment named by
// STACKFLUX_TESTENV_DIR is reused and left running (fast local loop).
//
// Two slots (the machine's two cores), each file in its own `node --test` process:
//   - first the files that use the environment: *.workload.test.ts apply the same objects into
//     the one workload cluster (Flux's prune skips an object another Kustomization has
//     re-labelled), so at most one of them runs at a time; a slot that finishes one takes the next
//     (their chain is as long as the other files together, so it never waits), the other slot
//     and any gap take the other files;
//   - then the *.disruptive.test.ts files (they restart shared components), one at a time, while
//     the other slot runs the files that use no environment: test/unit/, and files carrying the
//     line `// npm test: uses no test environment` (hack/lib/testlanes.ts).
// Each file's report is printed whole when it ends, then a summary of all of them.
import { spawn } from 'node:child_process';
import { existsSync, globSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { down, envVars, isRunning, readEndpoints, up } from './lib/testenv.ts';
import { type FileResult, marksNoEnvironment, planLanes, summarize } from './lib/testlanes.ts';

const runStarted = Date.now();
/** Each line carries the minutes since the run began, so the tail of a CI log tells the time. */
const log = (m: string) =>
  process.stderr.write(`run-tests [${((Date.now() - runStarted) / 60_000).toFixed(1)} min]: ${m}\n`);
// A file that runs longer than this is stopped and counts as failed, with what it printed so far:
// a hung file then names itself instead of running CI into its limit. The longest file takes
// about 14 minutes on a loaded machine.
const FILE_LIMIT_MS = Number(process.env.STACKFLUX_TEST_FILE_LIMIT_MIN ?? 25) * 60_000;
// While files run, a line every few minutes names them and how long each has run.
const HEARTBEAT_MS = 5 * 60_000;
const inFlight = new Map<string, number>();
const heartbeat = setInterval(() => {
  const now = Date.now();
  const running = [...inFlight].map(([f, t]) => `${f} (${((now - t) / 60_000).toFixed(1)} min)`);
  if (running.length > 0) log(`running: ${running.join(', ')}`);
}, HEARTBEAT_MS);
heartbeat.unref();
const files = process.argv.slice(2);
const testFiles = files.length > 0 ? files : globSync('test/{unit,integration,e2e}/**/*.test.ts').sort();
if (testFiles.length === 0) {
  log('no test files found');
  process.exit(1);
}

const reuseDir = process.env.STACKFLUX_TESTENV_DIR;
const reuse = reuseDir !== undefined && existsSync(reuseDir) && isRunning(reuseDir);
const stateDir = reuse && reuseDir ? reuseDir : mkdtempSync(join(tmpdir(), 'stackflux-test-'));
let status = 1;
try {
  const started = Date.now();
  const endpoints = reuse ? readEndpoints(stateDir) : await up(stateDir, log);
  if (!endpoints) throw new Error(`cannot read the test environment in ${stateDir}`);
  log(
    `${reuse ? 'reusing' : 'started'} test environment in ${((Date.now() - started) / 1000).toFixed(1)}s (${stateDir})`,
  );
  const env = { ...process.env, ...envVars(endpoints) };
  const plan = planLanes(testFiles, (file) => marksNoEnvironment(readFileSync(file, 'utf8')));
  const run = (file: string) => runFile(file, env);
  const results: FileResult[] = [];
  // Phase 1: the files that use the environment without disrupting it.
  const workload = [...plan.workload];
  const shared = [...plan.shared];
  let workloadRunning = false;
  const nextOfPhase1 = (): { file: string; workload: boolean } | undefined => {
    if (!workloadRunning && workload.length > 0) return { file: workload.shift() as string, workload: true };
    const file = shared.shift();
    return file === undefined ? undefined : { file, workload: false };
  };
  const phase1Slot = async () => {
    for (let next = nextOfPhase1(); next !== undefined; next = nextOfPhase1()) {
      if (next.workload) workloadRunning = true;
      try {
        results.push(await run(next.file));
      } finally {
        if (next.workload) workloadRunning = false;
      }
    }
  };
  await Promise.all([phase1Slot(), phase1Slot()]);
  // Phase 2: the disruptive files alone with the environment, the unit tests beside them.
  const unit = [...plan.unit];
  const disruptive = [...plan.disruptive];
  const phase2Slot = async (own: string[]) => {
    for (let file = own.shift() ?? unit.shift(); file !== undefined; file = own.shift() ?? unit.shift())
      results.push(await run(file));
  };
  await Promise.all([phase2Slot(disruptive), phase2Slot([])]);
  const summary = summarize(results);
  for (const line of summary.lines) log(line);
  status = summary.failed ? 1 : 0;
} catch (err) {
  log(`test environment failed: ${err instanceof Error ? err.message : String(err)}`);
  log(`component logs are in ${stateDir}/logs`);
} finally {
  if (!reuse) await down(stateDir, log);
}
process.exit(status);

/** Runs one file with node's test runner; its report is printed whole once it ends. */
async function runFile(file: string, env: NodeJS.ProcessEnv): Promise<FileResult> {
  const started = Date.now();
  log(`${file}: started`);
  inFlight.set(file, started);
  // --test-force-exit: a file whose tests have ended is not kept alive by a timer or socket it
  // left open (the runner would wait for ever).
  // Asynchronous, so this process keeps reaping the environment's processes (a test that
  // restarts a component kills one of our children) while the tests run. Its own process group,
  // so a file over its limit is stopped with whatever it started.
  const child = spawn(process.execPath, ['--test', '--test-timeout=600000', '--test-force-exit', file], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env,
    detached: true,
  });
  const out: Buffer[] = [];
  child.stdout.on('data', (b: Buffer) => out.push(b));
  child.stderr.on('data', (b: Buffer) => out.push(b));
  let overLimit = false;
  const limit = setTimeout(() => {
    overLimit = true;
    try {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }, FILE_LIMIT_MS);
  // 'exit', not 'close': a process the file started and left running may hold the pipes open.
  // What is still buffered is read for a moment after the exit.
  const exitCode = await new Promise<number>((resolve) => child.on('exit', (c) => resolve(c ?? 1)));
  clearTimeout(limit);
  await new Promise<void>((resolve) => {
    const grace = setTimeout(resolve, 2000);
    let open = [child.stdout, child.stderr].filter((s) => !s.closed).length;
    if (open === 0) {
      clearTimeout(grace);
      resolve();
      return;
    }
    const closed = () => {
      open -= 1;
      if (open === 0) {
        clearTimeout(grace);
        resolve();
      }
    };
    for (const s of [child.stdout, child.stderr]) if (!s.closed) s.once('close', closed);
  });
  child.stdout.destroy();
  child.stderr.destroy();
  inFlight.delete(file);
  const code = overLimit ? 124 : exitCode;
  const report = Buffer.concat(out).toString('utf8');
  process.stdout.write(report.endsWith('\n') || report === '' ? report : `${report}\n`);
  const seconds = (Date.now() - started) / 1000;
  const verdict =
    code === 0
      ? 'passed'
      : overLimit
        ? `FAILED (stopped after ${FILE_LIMIT_MS / 60_000} min)`
        : `FAILED (exit ${code})`;
  log(`${file}: ${verdict} in ${seconds.toFixed(1)}s`);
  return { file, code, seconds, report };
}
