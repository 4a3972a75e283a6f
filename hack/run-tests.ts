// `npm test`: builds the test environment if it is not cached, starts one environment for
// the whole run, runs every test file with node's test runner, and stops the environment.
// Arguments narrow the run to some test files. A running environment named by
// STACKFLUX_TESTENV_DIR is reused and left running (fast local loop). Files named
// *.workload.test.ts apply the same objects into the one workload cluster (Flux's prune skips
// an object another Kustomization has re-labelled), so they run one at a time, in a lane beside
// the other files. Files named *.disruptive.test.ts (they restart shared components) run last,
// one at a time.
import { spawn } from 'node:child_process';
import { existsSync, globSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { down, envVars, isRunning, readEndpoints, up } from './lib/testenv.ts';

const log = (m: string) => process.stderr.write(`run-tests: ${m}\n`);
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
  const disruptive = testFiles.filter((f) => f.endsWith('.disruptive.test.ts'));
  const workload = testFiles.filter((f) => f.endsWith('.workload.test.ts'));
  const shared = testFiles.filter((f) => !disruptive.includes(f) && !workload.includes(f));
  // Two lanes at once (two files in flight, as many as the machine's two cores carry), then the
  // disruptive files alone.
  const lanes = await Promise.all([runFiles(shared, 1, env), runFiles(workload, 1, env)]);
  const last = await runFiles(disruptive, 1, env);
  status = [...lanes, last].find((code) => code !== 0) ?? 0;
} catch (err) {
  log(`test environment failed: ${err instanceof Error ? err.message : String(err)}`);
  log(`component logs are in ${stateDir}/logs`);
} finally {
  if (!reuse) await down(stateDir, log);
}
process.exit(status);

/** Runs files with node's test runner; resolves with its exit code (0 for no files). */
async function runFiles(files: string[], concurrency: number, env: NodeJS.ProcessEnv): Promise<number> {
  if (files.length === 0) return 0;
  // Asynchronous, so this process keeps reaping the environment's processes (a test that
  // restarts a component kills one of our children) while the tests run.
  const child = spawn(
    process.execPath,
    ['--test', `--test-concurrency=${concurrency}`, '--test-timeout=600000', ...files],
    { stdio: 'inherit', env },
  );
  return new Promise<number>((resolve) => child.on('exit', (c) => resolve(c ?? 1)));
}
