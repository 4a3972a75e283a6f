import { readFileSync } from 'node:fs';
import {
  buildBinaries,
  componentPids,
  createRepo,
  defaultStateDir,
  down,
  envShPath,
  isRunning,
  isStopped,
  readEndpoints,
  restartComponent,
  startComponent,
  stopComponent,
  up,
} from './testenv.ts';

const usage = `Usage: hack/testenv <command> [--dir STATE_DIR]

Commands:
  build        build (or locate cached) binaries; prints the bin directory
  up           start everything, wait until ready; prints the env.sh path last
  down         stop every process this environment started
  status       show each component's pid and whether it is alive
  repo NAME    create a bare repo on the Git server if missing; prints its clone URL
  restart NAME kill one component (see status) and start it again with the same flags
  stop NAME    stop one component on purpose (e.g. kustomize-controller); "start NAME" brings it back
  start NAME   start a component stopped with "stop NAME"
  env          print the env.sh path of the running environment

State directory: --dir, else $STACKFLUX_TESTENV_DIR, else a per-user folder in $TMPDIR.
Source the env.sh that "up" prints to get KUBECONFIG, WORKLOAD_KUBECONFIG, GIT_SERVER_URL,
STACKFLUX_TESTENV_REGISTRY (host:port, HTTPS) and STACKFLUX_TESTENV_REGISTRY_CA, ...
`;

const log = (m: string) => process.stderr.write(`testenv: ${m}\n`);

async function run(argv: string[]): Promise<number> {
  const dirAt = argv.indexOf('--dir');
  let stateDir = defaultStateDir();
  if (dirAt >= 0) {
    const value = argv[dirAt + 1];
    if (!value) throw new Error('--dir needs a value');
    stateDir = value;
    argv.splice(dirAt, 2);
  }
  const [command, ...rest] = argv;
  switch (command) {
    case 'build':
      process.stdout.write(`${buildBinaries(log)}\n`);
      return 0;
    case 'up': {
      if (isRunning(stateDir)) {
        log(`already running in ${stateDir}; reusing it`);
        process.stdout.write(`${envShPath(stateDir)}\n`);
        return 0;
      }
      if (componentPids(stateDir).some((p) => p.alive)) {
        log('a previous environment is half alive; stopping it first');
        await down(stateDir, log);
      }
      const started = Date.now();
      try {
        await up(stateDir, log);
      } catch (err) {
        log(`failed: ${err instanceof Error ? err.message : String(err)}`);
        await down(stateDir, log);
        return 1;
      }
      log(`ready in ${((Date.now() - started) / 1000).toFixed(1)}s; logs in ${stateDir}/logs`);
      process.stdout.write(`${envShPath(stateDir)}\n`);
      return 0;
    }
    case 'down':
      await down(stateDir, log);
      return 0;
    case 'status': {
      const pids = componentPids(stateDir);
      if (pids.length === 0) {
        process.stdout.write(`not running (${stateDir})\n`);
        return 1;
      }
      for (const p of pids)
        process.stdout.write(
          `${p.name.padEnd(26)} pid ${String(p.pid).padEnd(8)} ${p.alive ? 'running' : isStopped(stateDir, p.name) ? 'stopped (start NAME)' : 'DEAD'}\n`,
        );
      const ok = isRunning(stateDir);
      process.stdout.write(
        ok
          ? `env: ${envShPath(stateDir)}\n`
          : 'environment is not healthy: run "hack/testenv down" then "up"\n',
      );
      return ok ? 0 : 1;
    }
    case 'repo': {
      const name = rest[0];
      const endpoints = readEndpoints(stateDir);
      if (!name) throw new Error('usage: hack/testenv repo NAME');
      if (!endpoints || !isRunning(stateDir))
        throw new Error(`no running environment in ${stateDir}: run "hack/testenv up"`);
      process.stdout.write(`${await createRepo(endpoints, name)}\n`);
      return 0;
    }
    case 'restart':
    case 'stop':
    case 'start': {
      const name = rest[0];
      if (!name || !componentPids(stateDir).some((p) => p.name === name)) {
        throw new Error(
          `usage: hack/testenv ${command} NAME (one of: ${componentPids(stateDir)
            .map((p) => p.name)
            .join(', ')})`,
        );
      }
      if (command === 'stop') await stopComponent(stateDir, name);
      else if (command === 'start') await startComponent(stateDir, name);
      else await restartComponent(stateDir, name);
      log(`${command === 'stop' ? 'stopped' : command === 'start' ? 'started' : 'restarted'} ${name}`);
      return 0;
    }
    case 'env':
      if (!isRunning(stateDir)) throw new Error(`no running environment in ${stateDir}`);
      process.stdout.write(readFileSync(envShPath(stateDir), 'utf8'));
      return 0;
    case undefined:
    case 'help':
    case '--help':
      process.stdout.write(usage);
      return 0;
    default:
      process.stderr.write(`unknown command ${command}\n${usage}`);
      return 2;
  }
}

try {
  process.exitCode = await run(process.argv.slice(2));
} catch (err) {
  log(err instanceof Error ? err.message : String(err));
  process.exitCode = 1;
}
