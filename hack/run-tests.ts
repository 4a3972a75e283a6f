// `npm test`: builds the test environment if it is not cached, starts one environment for
// the whole run, runs every test file with node's test runner, and stops the environment.
// Arguments narrow the run to some test files. A running environment named by
// STACKFLUX_TESTENV_DIR is reused and left running (fast local loop). Files named
// *.disruptive.test.ts (they restart shared components) run last, one at a time.
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
  const shared = testFiles.filter((f) => !disruptive.includes(f));
  const runs: Array<[string, string[]]> = [
    ['2', shared],
    ['1', disruptive],
  ];
  status = 0;
  for (const [concurrency, files] of runs) {
    if (files.length === 0) continue;
    // Asynchronous, so this process keeps reaping the environment's processes (a test that
    // restarts a component kills one of our children) while the tests run.
    const child = spawn(
      process.execPath,
      ['--test', `--test-concurrency=${concurrency}`, '--test-timeout=600000', ...files],
      { stdio: 'inherit', env },
    );
    const code = await new Promise<number>((resolve) => child.on('exit', (c) => resolve(c ?? 1)));
    if (code !== 0) status = code;
  }
} catch (err) {
  log(`test environment failed: ${err instanceof Error ? err.message : String(err)}`);
  log(`component logs are in ${stateDir}/logs`);
} finally {
  if (!reuse) await down(stateDir, log);
}
process.exit(status);
