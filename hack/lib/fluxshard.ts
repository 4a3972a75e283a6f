// Flux shards in a test environment, as Flux's sharding guide sets them up: the environment's own
// source-, kustomize- and helm-controller restarted with `--watch-label-selector=
// sharding.fluxcd.io/key notin (KEY,…)` (they leave the shards' objects alone; the guide's
// `!sharding.fluxcd.io/key` would also drop objects labelled with stackflux's own --shard key), and
// per shard KEY a second set of those controllers with `--watch-label-selector=
// sharding.fluxcd.io/key=KEY`. Used by tests and
// benches that give one tenant its own Flux (a Namespace labelled stackflux.io/flux-shard=KEY and
// stackflux started with --flux-shards ≥ 1). It restarts the environment's Flux controllers: only
// for an environment no one else is using at the time (a disruptive test, a bench's own env).
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { restartComponent, startProcess } from './testenv.ts';

/** Flux's sharding label. */
export const FLUX_SHARD_KEY_LABEL = 'sharding.fluxcd.io/key';
const SELECTOR_FLAG = '--watch-label-selector=';
const FLUX_CONTROLLERS = ['source-controller', 'kustomize-controller', 'helm-controller'] as const;

interface Command {
  binary: string;
  args: string[];
  env: Record<string, string>;
}

function commandOf(stateDir: string, name: string): Command | undefined {
  const file = join(stateDir, 'pids', `${name}.cmd.json`);
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Command) : undefined;
}

function writeCommand(stateDir: string, name: string, cmd: Command): void {
  writeFileSync(join(stateDir, 'pids', `${name}.cmd.json`), JSON.stringify(cmd));
}

function healthUrlOf(args: string[]): string | undefined {
  const addr = args.find((a) => a.startsWith('--health-addr='))?.slice('--health-addr='.length);
  return addr !== undefined ? `http://${addr}/readyz` : undefined;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/**
 * The command line of a shard's controller, from the environment's own: its own ports and storage,
 * watching only objects labelled sharding.fluxcd.io/key=<shard>.
 */
export async function shardCommand(base: Command, shard: string, stateDir: string): Promise<Command> {
  const args: string[] = [];
  for (const arg of base.args) {
    if (arg.startsWith(SELECTOR_FLAG)) continue;
    const [flag] = arg.split('=', 1);
    if (flag === '--metrics-addr' || flag === '--health-addr') {
      args.push(`${flag}=127.0.0.1:${await freePort()}`);
    } else if (flag === '--storage-path') {
      const dir = join(stateDir, `source-storage-${shard}`);
      mkdirSync(dir, { recursive: true });
      args.push(`--storage-path=${dir}`);
    } else if (flag === '--storage-addr' || flag === '--storage-adv-addr') {
    } else {
      args.push(arg);
    }
  }
  if (base.args.some((a) => a.startsWith('--storage-addr='))) {
    const port = await freePort();
    args.push(`--storage-addr=127.0.0.1:${port}`, `--storage-adv-addr=127.0.0.1:${port}`);
  }
  args.push(`${SELECTOR_FLAG}${FLUX_SHARD_KEY_LABEL}=${shard}`);
  return { ...base, args };
}

async function waitHealthy(url: string, pid: number, name: string): Promise<void> {
  const deadline = Date.now() + 90_000;
  while (Date.now() < deadline) {
    try {
      process.kill(pid, 0);
    } catch {
      throw new Error(`${name} exited before answering ${url}`);
    }
    const ok = await fetch(url, { signal: AbortSignal.timeout(2_000) }).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`${name}: ${url} did not answer within 90 s`);
}

/**
 * Restarts the environment's Flux controllers so that they leave these shards' objects alone
 * (none: watching everything again, as `hack/testenv up` starts them).
 */
async function excludeShards(stateDir: string, shards: readonly string[]): Promise<void> {
  const selector =
    shards.length > 0 ? [`${SELECTOR_FLAG}${FLUX_SHARD_KEY_LABEL} notin (${shards.join(',')})`] : [];
  for (const name of FLUX_CONTROLLERS) {
    const cmd = commandOf(stateDir, name);
    if (cmd === undefined) continue;
    const args = [...cmd.args.filter((a) => !a.startsWith(SELECTOR_FLAG)), ...selector];
    if (JSON.stringify(args) === JSON.stringify(cmd.args)) continue;
    writeCommand(stateDir, name, { ...cmd, args });
    await restartComponent(stateDir, name, healthUrlOf(args));
  }
}

export interface FluxShard {
  shard: string;
  /** Component names (pids/<name>.pid) of this shard's controllers. */
  components: string[];
  /** Stops this shard's controllers (by pid) and forgets them. */
  stop(): Promise<void>;
}

/** Starts one shard's source-, kustomize- (and helm-, where the env runs it) controller. */
export async function startFluxShard(stateDir: string, shard: string): Promise<FluxShard> {
  const components: string[] = [];
  const stop = async (): Promise<void> => {
    for (const name of components) {
      const pidFile = join(stateDir, 'pids', `${name}.pid`);
      if (!existsSync(pidFile)) continue;
      const pid = Number(readFileSync(pidFile, 'utf8'));
      try {
        process.kill(-pid, 'SIGTERM');
      } catch {
        // already gone
      }
      for (let i = 0; i < 100; i++) {
        try {
          process.kill(pid, 0);
        } catch {
          break;
        }
        await new Promise((r) => setTimeout(r, 50));
      }
      rmSync(pidFile, { force: true });
      rmSync(join(stateDir, 'pids', `${name}.cmd.json`), { force: true });
    }
  };
  try {
    for (const base of FLUX_CONTROLLERS) {
      const cmd = commandOf(stateDir, base);
      if (cmd === undefined) continue;
      const name = `${base}-${shard}`;
      const sharded = await shardCommand(cmd, shard, stateDir);
      const started = startProcess(stateDir, name, sharded.binary, sharded.args, sharded.env);
      components.push(name);
      const health = healthUrlOf(sharded.args);
      if (health !== undefined) await waitHealthy(health, started.pid, name);
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return { shard, components, stop };
}

export interface ShardedFlux {
  shards: FluxShard[];
  /** Stops the shards' controllers and restarts the environment's own without the selector. */
  restore(): Promise<void>;
}

/**
 * Shards the environment's Flux: its own controllers leave sharded objects alone, and each of
 * `shards` gets its own controllers. restore() undoes both.
 */
export async function shardFlux(stateDir: string, shards: readonly string[]): Promise<ShardedFlux> {
  const started: FluxShard[] = [];
  const restore = async (): Promise<void> => {
    for (const s of started) await s.stop();
    await excludeShards(stateDir, []);
  };
  try {
    await excludeShards(stateDir, shards);
    for (const shard of shards) started.push(await startFluxShard(stateDir, shard));
  } catch (err) {
    await restore();
    throw err;
  }
  return { shards: started, restore };
}
