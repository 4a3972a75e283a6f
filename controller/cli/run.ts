// `stackflux run`: the controller. One Manager (shared informers, leader election, /metrics,
// /healthz, /readyz), the release pipeline controllers, the source pollers and the push webhook.
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import {
  type ClusterAddonControllerOptions,
  crashAfterCommitHook,
  setupClusterAddonController,
} from '../controllers/clusteraddon.ts';
import { parseDuration } from '../controllers/duration.ts';
import { type ImpactControllerOptions, setupImpactController } from '../controllers/impact.ts';
import {
  type ReleasePipeline,
  type ReleasePipelineOptions,
  setupReleasePipeline,
} from '../controllers/releasepipeline.ts';
import {
  controllerRenderSeedSecret,
  DEFAULT_RENDER_SEED_SECRET,
  LEGACY_RENDER_SEED_FILE,
  loadRenderSeedKey,
  refText,
  type SecretRef,
} from '../controllers/renderseed.ts';
import { setupRolloutController } from '../controllers/rollout.ts';
import type { SourceReadLimits } from '../controllers/sourcereads.ts';
import {
  DEFAULT_HOOK_RATE,
  liveStageLookup,
  type RuntimeExtensionServer,
  serveRuntimeExtension,
} from '../controllers/upgradehook.ts';
import { GitFleetWriter } from '../gitops/writer.ts';
import { DEFAULT_BRANCH_PREFIX } from '../reconcilers/clusteraddon.ts';
import type { FluxTemplates } from '../releases/flux.ts';
import { loadFluxTemplates } from '../releases/flux-templates.ts';
import type { TenancyPolicy } from '../releases/tenancy.ts';
import type { RenderPoolOptions } from '../rendering/index.ts';
import { KubeClient, loadKubeConfig } from '../runtime/client.ts';
import { errorFields, type Logger, newLogger } from '../runtime/logging.ts';
import { Manager } from '../runtime/manager.ts';
import { serveWebhook, type WebhookServer } from '../sources/webhook.ts';
import { type Command, type CommandIO, type FlagValues, UsageError } from './command.ts';
import { renderLimitFlags, renderPoolOptions } from './renderlimits.ts';
import { sourceFlags, sourceOptions } from './sourceflags.ts';
import { sourceReadFlags, sourceReadLimits } from './sourcereadflags.ts';
import { tenancyFlags, tenancyPolicy } from './tenancyflags.ts';

export function defaultCacheDir(env: Readonly<Record<string, string | undefined>>): string {
  const base = env.XDG_CACHE_HOME || join(env.HOME || homedir(), '.cache');
  return join(base, 'stackflux');
}

function str(v: string | boolean | undefined): string {
  return typeof v === 'string' ? v : '';
}

function positiveInt(name: string, v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new UsageError(`--${name} must be a positive integer, got "${v}"`);
  return n;
}

function positiveNumber(name: string, v: string): number {
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n) || n <= 0)
    throw new UsageError(`--${name} must be a number greater than 0, got "${v}"`);
  return n;
}

/** Flux's controllers' defaults (--kube-api-qps 50, --kube-api-burst 300). */
export const DEFAULT_KUBE_API_QPS = 50;
export const DEFAULT_KUBE_API_BURST = 300;

/** A Flux duration flag (checked like the CRDs check intervals), or undefined when unset. */
function durationFlag(name: string, v: string): string | undefined {
  if (v === '') return undefined;
  if (parseDuration(v) === undefined) throw new UsageError(`--${name} "${v}" is not a duration like 10m`);
  return v;
}

/** Flags of the per-namespace single-branch fleet layout, removed with the per-Cluster branches. */
const REMOVED_FLEET_FLAGS: Readonly<Record<string, string>> = {
  'fleet-branch':
    'every Cluster now has its own branch <prefix><namespace>/<cluster>; set --fleet-branch-prefix (default "stackflux/") instead',
  'fleet-path': "a Cluster's addons are at the root of its own branch; drop --fleet-path",
};

/**
 * V8 flags `stackflux run` sets at start, each unless node was started with its own (either
 * spelling, or its --no- form). V8 reads both whenever it collects, so setting them at run time
 * works; flags fixed when the heap is set up (--max-semi-space-size) stay the image's (Dockerfile).
 *
 * - --heap-growing-percent=10: the old generation is collected once it has grown by a tenth since
 *   the last full collection. That is V8's own factor when allocation is slow (a fan-out paced by
 *   the client rate limit), but V8 raises it up to 4x when allocation is fast (the initial LIST, a
 *   release moving every Cluster at once), and every cache update leaves the replaced object as
 *   old-generation garbage.
 * - --optimize-for-size: a full collection then moves the objects off every page that is a fifth
 *   free (up to 6 MB each time). By default V8 compacts a page only once most of it is free (70 %,
 *   later a threshold from its measured compaction speed). A release move replaces every cached
 *   object in random order, which leaves every page partly free, so few pages qualified and the
 *   committed heap grew by a third over its live data (README, Memory). Given to node at start-up
 *   the flag also sets up a smaller young generation; set here it comes after the heap's set-up.
 */
export function heapFlags(execArgv: readonly string[]): string[] {
  const given = (name: string) => {
    const re = new RegExp(`^--(no-)?${name.replaceAll('-', '[-_]')}(=|$)`);
    return execArgv.some((a) => re.test(a));
  };
  const flags: string[] = [];
  if (!given('heap-growing-percent')) flags.push('--heap-growing-percent=10');
  if (!given('optimize-for-size')) flags.push('--optimize-for-size');
  return flags;
}

/** Sets heapFlags(process.execArgv); returns what it set. */
export function tuneHeap(execArgv: readonly string[] = process.execArgv): string[] {
  const flags = heapFlags(execArgv);
  for (const f of flags) setFlagsFromString(f);
  return flags;
}

/**
 * The installation's render seed key, shared by the live renders and the impact's (so a preview
 * renders what rolls out) and kept in the cluster (so a restart or another replica renders the
 * same generated values). Read before anything runs: a refused Secret ends the process here, with
 * no informer or timer left to keep it alive.
 */
async function renderSeedKeyAtStart(
  client: KubeClient,
  ref: SecretRef,
  cacheDir: string,
  log: Logger,
): Promise<string> {
  try {
    const loaded = await loadRenderSeedKey(client, ref, {
      legacyKeyFile: join(cacheDir, LEGACY_RENDER_SEED_FILE),
    });
    log.info({ secret: refText(ref), origin: loaded.origin }, 'render seed key loaded');
    return loaded.key;
  } catch (err) {
    client.close();
    throw err;
  }
}

export const runCommand: Command = {
  name: 'run',
  summary: 'Run the controller (ClusterStack → ClusterStackRelease → Flux)',
  flags: {
    kubeconfig: {
      type: 'string',
      description: 'path of a kubeconfig (default: $KUBECONFIG, in-cluster, ~/.kube/config)',
    },
    context: { type: 'string', description: 'kubeconfig context to use' },
    namespace: { type: 'string', description: 'watch only this namespace (default: all)' },
    'metrics-addr': {
      type: 'string',
      description: 'listen address of /metrics; empty disables it',
      default: ':8080',
    },
    'health-addr': {
      type: 'string',
      description: 'listen address of /healthz and /readyz; empty disables it',
      default: ':8081',
    },
    'webhook-addr': {
      type: 'string',
      description: 'listen address of the push webhook (POST /hooks/push); empty disables it',
      default: '',
    },
    'webhook-secret': { type: 'string', description: 'secret of the push webhook (HMAC key / bearer token)' },
    'webhook-secret-file': { type: 'string', description: 'file holding the webhook secret' },
    'webhook-body-timeout': {
      type: 'string',
      description: 'a webhook body not received this long after its headers is answered 408 and closed',
      default: '10s',
    },
    'webhook-max-in-flight': {
      type: 'string',
      description: 'webhook requests read at once (more get 503); their bodies share 8 MiB',
      default: '64',
    },
    'runtime-extension-addr': {
      type: 'string',
      description:
        "listen address of Cluster API's runtime extension (HTTPS: Discovery and the BeforeClusterUpgrade hook); empty disables it",
      default: '',
    },
    'runtime-extension-tls-cert': {
      type: 'string',
      description: 'PEM certificate of the runtime extension (reloaded when the file changes)',
      default: '/etc/stackflux/runtime-extension/tls.crt',
    },
    'runtime-extension-tls-key': {
      type: 'string',
      description: 'PEM private key of the runtime extension certificate',
      default: '/etc/stackflux/runtime-extension/tls.key',
    },
    'runtime-extension-qps': {
      type: 'string',
      description:
        'BeforeClusterUpgrade lookups per second, all callers together (burst twice that); past it the caller is told to retry in 10 s',
      default: String(DEFAULT_HOOK_RATE.overall.ratePerSecond),
    },
    'runtime-extension-qps-per-caller': {
      type: 'string',
      description: 'BeforeClusterUpgrade lookups per second from one caller address (burst twice that)',
      default: String(DEFAULT_HOOK_RATE.perKey.ratePerSecond),
    },
    'cache-dir': {
      type: 'string',
      description: 'cache of release trees (default $XDG_CACHE_HOME/stackflux, else ~/.cache/stackflux)',
    },
    'render-seed-secret': {
      type: 'string',
      description: `NAMESPACE/NAME of the Secret (key "key") holding the installation's render seed key, which seeds the random values templates generate (genCA, randAlpha, …); created when absent (default: ${DEFAULT_RENDER_SEED_SECRET} in --leader-election-namespace)`,
    },
    'poll-interval': {
      type: 'string',
      description: 'how often a source is listed when its ClusterStack sets no interval',
      default: '5m',
    },
    ...sourceFlags,
    ...sourceReadFlags,
    'leader-elect': {
      type: 'boolean',
      description: 'elect a leader on a Lease before reconciling',
      default: false,
    },
    'leader-election-namespace': {
      type: 'string',
      description: 'namespace of the leader election Lease',
      default: 'flux-system',
    },
    'leader-election-id': {
      type: 'string',
      description: 'name of the leader election Lease',
      default: 'stackflux-controller',
    },
    shard: {
      type: 'string',
      description:
        'reconcile only objects labelled sharding.fluxcd.io/key=KEY (without it: only objects with no shard key); the Lease is <leader-election-id>-KEY',
    },
    concurrency: { type: 'string', description: 'concurrent reconciles per controller', default: '4' },
    'kube-api-qps': {
      type: 'string',
      description: 'client-side limit of API requests per second (watches are not limited); Flux’s default',
      default: String(DEFAULT_KUBE_API_QPS),
    },
    'kube-api-burst': {
      type: 'string',
      description: 'requests allowed at once above --kube-api-qps; Flux’s default',
      default: String(DEFAULT_KUBE_API_BURST),
    },
    'log-level': { type: 'string', description: 'debug, info, warn or error', default: 'info' },
    'fleet-url': { type: 'string', description: 'fleet repository URL (addon controller)' },
    'fleet-branch-prefix': {
      type: 'string',
      description: "prefix of each Cluster's fleet branch <prefix><namespace>/<cluster> (addon controller)",
      default: DEFAULT_BRANCH_PREFIX,
    },
    'fleet-secret': {
      type: 'string',
      description: 'NS/NAME of the fleet repository Secret (addon controller)',
    },
    'fleet-interval': {
      type: 'string',
      description:
        "Flux interval of each Cluster's fleet GitRepository (a push requests a fetch at once; default 5m)",
    },
    'addon-interval': {
      type: 'string',
      description:
        "Flux (drift) interval of the addon Kustomizations (default: the ClusterStack's interval, else 5m)",
    },
    'flux-shards': {
      type: 'string',
      description:
        "spread each Cluster's GitRepository and addon Kustomizations over N Flux shards (label sharding.fluxcd.io/key=shard0..shardN-1; 1: no hashed label). With N ≥ 1 a Namespace labelled stackflux.io/flux-shard=KEY puts its Clusters on Flux shard KEY instead. Not --shard, which shards stackflux itself",
      default: '0',
    },
    'fleet-branch': { type: 'string', description: 'REMOVED: see --fleet-branch-prefix' },
    'fleet-path': { type: 'string', description: 'REMOVED: addons are at the root of each Cluster branch' },
    'fleet-batch-window': {
      type: 'string',
      description: 'how long fleet writes are collected into one commit, from the first change waiting',
      default: '2s',
    },
    'flux-templates': {
      type: 'string',
      description:
        'folder of the Flux object templates (default: the bundled ones; a file it lacks is the bundled one)',
    },
    ...renderLimitFlags,
    ...tenancyFlags,
  },
  run: (flags, _positionals, io) => runController(flags, io),
};

/** The controller's settings read from its flags (all checked before anything connects). */
interface RunSettings {
  pollMs: number;
  concurrency: number;
  githubApiUrl: string;
  sourceReads: SourceReadLimits;
  fleetLayout: FleetLayout;
  render: RenderPoolOptions;
  tenancy: TenancyPolicy;
  qps: number;
  burst: number;
  webhook: WebhookSettings;
  cacheDir: string;
  renderSeedSecret: SecretRef;
  templates: FluxTemplates;
}

/** How the fleet is laid out: the flags that need no repository to check. */
interface FleetLayout {
  branchPrefix: string;
  fluxShards: number;
  fleetInterval: string | undefined;
  addonInterval: string | undefined;
}

interface WebhookSettings {
  secret: string;
  addr: string;
  bodyTimeoutMs: number | undefined;
  maxInFlight: number;
}

/** The fleet repository of the addon controller (`url` empty: no addon controller). */
interface FleetRepository {
  url: string;
  /** The Secret of its credentials, when --fleet-secret names one. */
  secret: { namespace: string; name: string } | undefined;
}

const FLEET_AUTHOR = { name: 'stackflux', email: 'stackflux@users.noreply.stackflux.io' };

/**
 * `stackflux run`: checks the flags, starts the release pipeline, the webhook, the runtime
 * extension and (with a fleet) the controllers that write it, then runs until the manager stops.
 */
async function runController(flags: FlagValues, io: CommandIO): Promise<number> {
  const v8Flags = tuneHeap();
  const log = newLogger({ level: str(flags['log-level']) || 'info' });
  // Which heap flags apply is otherwise invisible: node's own ones take precedence (heapFlags).
  log.debug({ v8Flags }, 'V8 heap flags set');
  const settings = runSettings(flags, io.env);
  const client = kubeClient(flags, settings);
  const namespace = str(flags.namespace);
  const shard = shardFlag(flags);
  const renderSeedKey =
    str(flags['fleet-url']) !== ''
      ? await renderSeedKeyAtStart(client, settings.renderSeedSecret, settings.cacheDir, log)
      : undefined;
  const manager = newManager(flags, client, log, shard);
  manager.installProcessHandlers();
  let started: StartedComponents;
  try {
    started = await startComponents(manager, flags, io, { settings, client, log, namespace, renderSeedKey });
  } catch (err) {
    // What the start had begun (informers, pollers, servers) would keep the process alive after
    // the error is printed: a controller that cannot start exits, as controller-runtime's manager
    // does, so its Pod restarts with the error in its log.
    setTimeout(() => process.exit(), 500).unref();
    throw err;
  }
  const { webhook, extension, pipeline } = started;
  log.info(
    {
      servers: manager.serverUrls(),
      webhook: webhook?.url,
      runtimeExtension: extension?.url,
      cacheDir: settings.cacheDir,
      namespace: namespace || '(all)',
      shard: shard || '(none: objects without a shard key)',
      clusterApi: pipeline.clusterApiVersion ?? 'not served',
    },
    'stackflux controller started',
  );
  const reason = await manager.done;
  await closeServers(log, webhook, extension);
  client.close();
  return reason === 'leadership-lost' ? 1 : 0;
}

interface StartedComponents {
  webhook: WebhookServer | undefined;
  extension: RuntimeExtensionServer | undefined;
  pipeline: Awaited<ReturnType<typeof setupReleasePipeline>>;
}

/** The release pipeline, the webhook, the runtime extension and the fleet controllers, then the manager. */
async function startComponents(
  manager: Manager,
  flags: FlagValues,
  io: CommandIO,
  ctx: {
    settings: RunSettings;
    client: KubeClient;
    log: Logger;
    namespace: string;
    renderSeedKey: string | undefined;
  },
): Promise<StartedComponents> {
  const { settings, client, log, namespace, renderSeedKey } = ctx;
  const fleet = fleetRepository(flags);
  const pipeline = await setupReleasePipeline(manager, releasePipelineOptions(settings, fleet, namespace));
  const webhook = await startWebhook(settings.webhook, pipeline, log);
  const extension = await startRuntimeExtension(flags, client, log);
  if (fleet.url !== '')
    await setupFleetControllers(manager, flags, io.env, {
      settings,
      fleet,
      pipeline,
      namespace,
      renderSeedKey,
    });
  await manager.start();
  return { webhook, extension, pipeline };
}

async function closeServers(
  log: Logger,
  webhook: WebhookServer | undefined,
  extension: RuntimeExtensionServer | undefined,
): Promise<void> {
  await webhook?.close().catch((err: unknown) => log.error(errorFields(err), 'closing the webhook'));
  await extension
    ?.close()
    .catch((err: unknown) => log.error(errorFields(err), 'closing the runtime extension'));
}

/** Reads and checks the flags that need nothing running, in the order they are reported. */
function runSettings(flags: FlagValues, env: CommandIO['env']): RunSettings {
  const pollMs = parseDuration(str(flags['poll-interval']));
  if (pollMs === undefined)
    throw new UsageError(`--poll-interval "${str(flags['poll-interval'])}" is not a duration like 5m`);
  const concurrency = positiveInt('concurrency', str(flags.concurrency) || '4');
  const { githubApiUrl } = sourceOptions(flags);
  const sourceReads = sourceReadLimits(flags);
  const fleetLayout = fleetLayoutOf(flags);
  const render = renderPoolOptions(flags);
  const tenancy = tenancyPolicy(flags);
  const qps = positiveNumber('kube-api-qps', str(flags['kube-api-qps']) || String(DEFAULT_KUBE_API_QPS));
  const burst = positiveInt('kube-api-burst', str(flags['kube-api-burst']) || String(DEFAULT_KUBE_API_BURST));
  const webhook = webhookSettings(flags);
  const cacheDir = str(flags['cache-dir']) || defaultCacheDir(env);
  const renderSeedSecret = controllerRenderSeedSecret(
    str(flags['render-seed-secret']),
    str(flags['leader-election-namespace']),
  );
  if (renderSeedSecret === undefined)
    throw new UsageError(
      `--render-seed-secret must be NAMESPACE/NAME, got "${str(flags['render-seed-secret'])}"`,
    );
  const templatesDir = str(flags['flux-templates']);
  const templates = templatesDir ? loadFluxTemplates(templatesDir) : loadFluxTemplates();
  return {
    pollMs,
    concurrency,
    githubApiUrl,
    sourceReads,
    fleetLayout,
    render,
    tenancy,
    qps,
    burst,
    webhook,
    cacheDir,
    renderSeedSecret,
    templates,
  };
}

function fleetLayoutOf(flags: FlagValues): FleetLayout {
  // Fleet flags are checked before anything connects.
  for (const [flag, why] of Object.entries(REMOVED_FLEET_FLAGS))
    if (str(flags[flag]) !== '') throw new UsageError(`--${flag} was removed: ${why}`);
  const branchPrefix = str(flags['fleet-branch-prefix']) || DEFAULT_BRANCH_PREFIX;
  const fluxShardsText = str(flags['flux-shards']) || '0';
  const fluxShards = fluxShardsText === '0' ? 0 : positiveInt('flux-shards', fluxShardsText);
  const fleetInterval = durationFlag('fleet-interval', str(flags['fleet-interval']));
  const addonInterval = durationFlag('addon-interval', str(flags['addon-interval']));
  return { branchPrefix, fluxShards, fleetInterval, addonInterval };
}

function webhookSettings(flags: FlagValues): WebhookSettings {
  let secret = str(flags['webhook-secret']);
  const secretFile = str(flags['webhook-secret-file']);
  if (secret === '' && secretFile !== '') secret = readFileSync(secretFile, 'utf8').trim();
  const addr = str(flags['webhook-addr']);
  if (addr !== '' && secret === '')
    throw new UsageError('--webhook-addr needs --webhook-secret or --webhook-secret-file');
  const bodyTimeoutMs = parseDuration(
    durationFlag('webhook-body-timeout', str(flags['webhook-body-timeout']) || '10s') ?? '10s',
  );
  const maxInFlight = positiveInt('webhook-max-in-flight', str(flags['webhook-max-in-flight']) || '64');
  return { secret, addr, bodyTimeoutMs, maxInFlight };
}

function kubeClient(flags: FlagValues, settings: RunSettings): KubeClient {
  const kubeconfig = str(flags.kubeconfig);
  const context = str(flags.context);
  const kc = loadKubeConfig({ ...(kubeconfig ? { kubeconfig } : {}), ...(context ? { context } : {}) });
  return new KubeClient(kc, { userAgent: 'stackflux', qps: settings.qps, burst: settings.burst });
}

/** --shard, a label value or empty. */
function shardFlag(flags: FlagValues): string {
  const shard = str(flags.shard);
  if (shard !== '' && !/^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/.test(shard))
    throw new UsageError(`--shard "${shard}" is not a valid label value`);
  return shard;
}

function newManager(flags: FlagValues, client: KubeClient, log: Logger, shard: string): Manager {
  const metricsAddr = str(flags['metrics-addr']);
  const healthAddr = str(flags['health-addr']);
  return new Manager({
    client,
    logger: log,
    ...(shard ? { shard } : {}),
    ...(metricsAddr ? { metricsAddr } : {}),
    ...(healthAddr ? { healthAddr } : {}),
    ...(flags['leader-elect'] === true
      ? {
          leaderElection: {
            name: str(flags['leader-election-id']) || 'stackflux-controller',
            namespace: str(flags['leader-election-namespace']) || 'flux-system',
          },
        }
      : {}),
  });
}

function fleetRepository(flags: FlagValues): FleetRepository {
  const url = str(flags['fleet-url']);
  const secretFlag = str(flags['fleet-secret']);
  const [secretNs, secretName, ...rest] = secretFlag.split('/');
  if (secretFlag !== '' && (!secretNs || !secretName || rest.length > 0))
    throw new UsageError(`--fleet-secret must be NAMESPACE/NAME, got "${secretFlag}"`);
  return { url, secret: secretNs && secretName ? { namespace: secretNs, name: secretName } : undefined };
}

function releasePipelineOptions(
  settings: RunSettings,
  fleet: FleetRepository,
  namespace: string,
): ReleasePipelineOptions {
  const { cacheDir } = settings;
  return {
    render: settings.render,
    ...(fleet.url !== ''
      ? {
          fleet: {
            url: fleet.url,
            branchPrefix: settings.fleetLayout.branchPrefix,
            ...(fleet.secret !== undefined ? { secret: fleet.secret } : {}),
            // Its own local repository: the addon controller's writer keeps the Cluster branches'.
            writer: (prefix, credentials) =>
              new GitFleetWriter({
                url: fleet.url,
                branchPrefix: prefix,
                cacheDir: join(cacheDir, 'release-classes'),
                author: FLEET_AUTHOR,
                ...(credentials !== undefined ? { credentials } : {}),
              }),
          },
        }
      : {}),
    ...(namespace ? { namespace } : {}),
    cacheDir,
    templates: settings.templates,
    defaultPollIntervalMs: settings.pollMs,
    concurrency: settings.concurrency,
    githubApiUrl: settings.githubApiUrl,
    tenancy: settings.tenancy,
    sourceReads: settings.sourceReads,
  };
}

/** The push webhook, when --webhook-addr is set. */
async function startWebhook(
  webhook: WebhookSettings,
  pipeline: ReleasePipeline,
  log: Logger,
): Promise<WebhookServer | undefined> {
  if (webhook.addr === '') return undefined;
  return serveWebhook(webhook.addr, {
    secret: webhook.secret,
    trigger: (urls) => pipeline.pollers.trigger(urls),
    triggerOciRepositories: (repositories) => pipeline.pollers.triggerOciRepositories(repositories),
    logger: log,
    limits: {
      maxInFlight: webhook.maxInFlight,
      ...(webhook.bodyTimeoutMs !== undefined && webhook.bodyTimeoutMs > 0
        ? { bodyTimeoutMs: webhook.bodyTimeoutMs }
        : {}),
    },
  });
}

/** Cluster API's runtime extension, when --runtime-extension-addr is set. */
async function startRuntimeExtension(
  flags: FlagValues,
  client: KubeClient,
  log: Logger,
): Promise<RuntimeExtensionServer | undefined> {
  const extensionAddr = str(flags['runtime-extension-addr']);
  const hookQps = positiveInt('runtime-extension-qps', str(flags['runtime-extension-qps']));
  const hookQpsPerCaller = positiveInt(
    'runtime-extension-qps-per-caller',
    str(flags['runtime-extension-qps-per-caller']),
  );
  const hookRate = {
    overall: { ratePerSecond: hookQps, burst: 2 * hookQps },
    perKey: { ratePerSecond: hookQpsPerCaller, burst: 2 * hookQpsPerCaller },
  };
  if (extensionAddr === '') return undefined;
  try {
    return await serveRuntimeExtension(extensionAddr, {
      lookup: liveStageLookup(client),
      certFile: str(flags['runtime-extension-tls-cert']),
      keyFile: str(flags['runtime-extension-tls-key']),
      logger: log,
      rate: hookRate,
    });
  } catch (err) {
    throw new UsageError(
      `--runtime-extension-*: cannot serve on ${extensionAddr}: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
}

/** What the controllers that write the fleet are set up from. */
interface FleetControllerInputs {
  settings: RunSettings;
  fleet: FleetRepository;
  pipeline: ReleasePipeline;
  namespace: string;
  renderSeedKey: string | undefined;
}

/** The controllers that write the fleet: ClusterAddons, the rollouts that gate on them, impacts. */
async function setupFleetControllers(
  manager: Manager,
  flags: FlagValues,
  env: CommandIO['env'],
  inputs: FleetControllerInputs,
): Promise<void> {
  const { settings, fleet, namespace } = inputs;
  const batchWindowMs = fleetBatchWindowMs(flags);
  const crashMarker = env.STACKFLUX_TEST_CRASH_AFTER_FLEET_COMMIT;
  checkFleetWriter(fleet.url, settings.fleetLayout.branchPrefix, settings.cacheDir);
  await setupClusterAddonController(manager, {
    ...clusterAddonOptions(inputs, crashMarker),
    batchWindowMs,
  });
  // Progressive rollouts gate on ClusterAddons, so they run where the addon controller runs.
  await setupRolloutController(manager, {
    ...(namespace ? { namespace } : {}),
    concurrency: settings.concurrency,
  });
  // The impact a rollout may wait on is computed where the fleet it compares with is written.
  await setupImpactController(manager, impactOptions(inputs));
}

function fleetBatchWindowMs(flags: FlagValues): number {
  const windowText = str(flags['fleet-batch-window']) || '2s';
  const batchWindowMs = parseDuration(windowText);
  if (batchWindowMs === undefined)
    throw new UsageError(`--fleet-batch-window "${windowText}" is not a duration like 2s`);
  return batchWindowMs;
}

/** Checks the URL and prefix now (a usage error), before anything runs. */
function checkFleetWriter(url: string, branchPrefix: string, cacheDir: string): void {
  try {
    new GitFleetWriter({ url, branchPrefix, cacheDir, author: FLEET_AUTHOR });
  } catch (err) {
    throw new UsageError(
      `--fleet-url/--fleet-branch-prefix: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
}

/** The ClusterAddon controller's options but its batch window (a flag checked first). */
function clusterAddonOptions(
  { settings, fleet, pipeline, namespace, renderSeedKey }: FleetControllerInputs,
  crashMarker: string | undefined,
): Omit<ClusterAddonControllerOptions, 'batchWindowMs'> {
  const { branchPrefix, fleetInterval, addonInterval, fluxShards } = settings.fleetLayout;
  const { cacheDir } = settings;
  return {
    ...(namespace ? { namespace } : {}),
    fleet: {
      url: fleet.url,
      branchPrefix,
      ...(fleet.secret !== undefined ? { secret: fleet.secret } : {}),
      ...(fleetInterval !== undefined ? { interval: fleetInterval } : {}),
      ...(addonInterval !== undefined ? { addonInterval } : {}),
      ...(fluxShards >= 1 ? { fluxShards } : {}),
    },
    writer: (credentials) =>
      new GitFleetWriter({
        url: fleet.url,
        branchPrefix,
        cacheDir,
        author: FLEET_AUTHOR,
        ...(credentials !== undefined ? { credentials } : {}),
        ...(crashMarker ? { hooks: { afterCommit: crashAfterCommitHook(crashMarker) } } : {}),
      }),
    cacheDir,
    fetchTree: pipeline.fetchTree,
    githubApiUrl: settings.githubApiUrl,
    templates: settings.templates,
    tenancy: settings.tenancy,
    concurrency: settings.concurrency,
    render: settings.render,
    renderSeedKey,
  };
}

function impactOptions({
  settings,
  fleet,
  pipeline,
  namespace,
  renderSeedKey,
}: FleetControllerInputs): ImpactControllerOptions {
  const { branchPrefix, fleetInterval, addonInterval, fluxShards } = settings.fleetLayout;
  const { cacheDir, tenancy } = settings;
  return {
    ...(namespace ? { namespace } : {}),
    cacheDir,
    // The pollers' listings and the release controller's tree reads, not reads of its own.
    sources: {
      pollers: pipeline.pollers,
      trees: pipeline.reads.trees,
      fetchTree: pipeline.fetchTree,
      cacheDir,
      githubApiUrl: settings.githubApiUrl,
    },
    fleet: {
      url: fleet.url,
      branchPrefix,
      ...(fleet.secret !== undefined ? { secretRef: fleet.secret.name } : {}),
      ...(fleetInterval !== undefined ? { interval: fleetInterval } : {}),
      ...(addonInterval !== undefined ? { addonInterval } : {}),
      ...(fluxShards >= 1 ? { fluxShards } : {}),
    },
    ...(fleet.secret !== undefined ? { fleetSecret: fleet.secret } : {}),
    renderSeedKey,
    templates: settings.templates,
    ...(tenancy !== undefined ? { tenancy } : {}),
    render: settings.render,
  };
}
