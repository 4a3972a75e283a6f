// `stackflux run`: the controller. One Manager (shared informers, leader election, /metrics,
// /healthz, /readyz), the release pipeline controllers, the source pollers and the push webhook.
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { crashAfterCommitHook, setupClusterAddonController } from '../controllers/clusteraddon.ts';
import { parseDuration } from '../controllers/duration.ts';
import { setupImpactController } from '../controllers/impact.ts';
import { setupReleasePipeline } from '../controllers/releasepipeline.ts';
import {
  controllerRenderSeedSecret,
  DEFAULT_RENDER_SEED_SECRET,
  LEGACY_RENDER_SEED_FILE,
  loadRenderSeedKey,
  refText,
  type SecretRef,
} from '../controllers/renderseed.ts';
import { setupRolloutController } from '../controllers/rollout.ts';
import {
  DEFAULT_HOOK_RATE,
  liveStageLookup,
  type RuntimeExtensionServer,
  serveRuntimeExtension,
} from '../controllers/upgradehook.ts';
import { GitFleetWriter } from '../gitops/writer.ts';
import { DEFAULT_BRANCH_PREFIX } from '../reconcilers/clusteraddon.ts';
import { loadFluxTemplates } from '../releases/flux-templates.ts';
import { KubeClient, loadKubeConfig } from '../runtime/client.ts';
import { errorFields, type Logger, newLogger } from '../runtime/logging.ts';
import { Manager } from '../runtime/manager.ts';
import { serveWebhook, type WebhookServer } from '../sources/webhook.ts';
import { type Command, UsageError } from './command.ts';
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
  run: async (flags, _positionals, io) => {
    const v8Flags = tuneHeap();
    const log = newLogger({ level: str(flags['log-level']) || 'info' });
    // Which heap flags apply is otherwise invisible: node's own ones take precedence (heapFlags).
    log.debug({ v8Flags }, 'V8 heap flags set');
    const pollMs = parseDuration(str(flags['poll-interval']));
    if (pollMs === undefined)
      throw new UsageError(`--poll-interval "${str(flags['poll-interval'])}" is not a duration like 5m`);
    const concurrency = positiveInt('concurrency', str(flags.concurrency) || '4');
    const { githubApiUrl } = sourceOptions(flags);
    const sourceReads = sourceReadLimits(flags);
    // Fleet flags are checked before anything connects.
    for (const [flag, why] of Object.entries(REMOVED_FLEET_FLAGS))
      if (str(flags[flag]) !== '') throw new UsageError(`--${flag} was removed: ${why}`);
    const branchPrefix = str(flags['fleet-branch-prefix']) || DEFAULT_BRANCH_PREFIX;
    const fluxShardsText = str(flags['flux-shards']) || '0';
    const fluxShards = fluxShardsText === '0' ? 0 : positiveInt('flux-shards', fluxShardsText);
    const fleetInterval = durationFlag('fleet-interval', str(flags['fleet-interval']));
    const addonInterval = durationFlag('addon-interval', str(flags['addon-interval']));
    const render = renderPoolOptions(flags);
    const tenancy = tenancyPolicy(flags);
    const qps = positiveNumber('kube-api-qps', str(flags['kube-api-qps']) || String(DEFAULT_KUBE_API_QPS));
    const burst = positiveInt(
      'kube-api-burst',
      str(flags['kube-api-burst']) || String(DEFAULT_KUBE_API_BURST),
    );
    let secret = str(flags['webhook-secret']);
    const secretFile = str(flags['webhook-secret-file']);
    if (secret === '' && secretFile !== '') secret = readFileSync(secretFile, 'utf8').trim();
    const webhookAddr = str(flags['webhook-addr']);
    if (webhookAddr !== '' && secret === '')
      throw new UsageError('--webhook-addr needs --webhook-secret or --webhook-secret-file');
    const webhookBodyTimeoutMs = parseDuration(
      durationFlag('webhook-body-timeout', str(flags['webhook-body-timeout']) || '10s') ?? '10s',
    );
    const webhookMaxInFlight = positiveInt(
      'webhook-max-in-flight',
      str(flags['webhook-max-in-flight']) || '64',
    );
    const cacheDir = str(flags['cache-dir']) || defaultCacheDir(io.env);
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

    const kubeconfig = str(flags.kubeconfig);
    const context = str(flags.context);
    const kc = loadKubeConfig({ ...(kubeconfig ? { kubeconfig } : {}), ...(context ? { context } : {}) });
    const client = new KubeClient(kc, { userAgent: 'stackflux', qps, burst });
    const metricsAddr = str(flags['metrics-addr']);
    const healthAddr = str(flags['health-addr']);
    const namespace = str(flags.namespace);
    const shard = str(flags.shard);
    if (shard !== '' && !/^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/.test(shard))
      throw new UsageError(`--shard "${shard}" is not a valid label value`);
    const renderSeedKey =
      str(flags['fleet-url']) !== ''
        ? await renderSeedKeyAtStart(client, renderSeedSecret, cacheDir, log)
        : undefined;
    const manager = new Manager({
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
    manager.installProcessHandlers();
    const fleetUrl = str(flags['fleet-url']);
    const secretFlag = str(flags['fleet-secret']);
    const [secretNs, secretName, ...rest] = secretFlag.split('/');
    if (secretFlag !== '' && (!secretNs || !secretName || rest.length > 0))
      throw new UsageError(`--fleet-secret must be NAMESPACE/NAME, got "${secretFlag}"`);
    const author = { name: 'stackflux', email: 'stackflux@users.noreply.stackflux.io' };
    const pipeline = await setupReleasePipeline(manager, {
      render,
      ...(fleetUrl !== ''
        ? {
            fleet: {
              url: fleetUrl,
              branchPrefix,
              ...(secretNs && secretName ? { secret: { namespace: secretNs, name: secretName } } : {}),
              // Its own local repository: the addon controller's writer keeps the Cluster branches'.
              writer: (prefix, credentials) =>
                new GitFleetWriter({
                  url: fleetUrl,
                  branchPrefix: prefix,
                  cacheDir: join(cacheDir, 'release-classes'),
                  author,
                  ...(credentials !== undefined ? { credentials } : {}),
                }),
            },
          }
        : {}),
      ...(namespace ? { namespace } : {}),
      cacheDir,
      templates,
      defaultPollIntervalMs: pollMs,
      concurrency,
      githubApiUrl,
      tenancy,
      sourceReads,
    });
    let webhook: WebhookServer | undefined;
    if (webhookAddr !== '') {
      webhook = await serveWebhook(webhookAddr, {
        secret,
        trigger: (urls) => pipeline.pollers.trigger(urls),
        triggerOciRepositories: (repositories) => pipeline.pollers.triggerOciRepositories(repositories),
        logger: log,
        limits: {
          maxInFlight: webhookMaxInFlight,
          ...(webhookBodyTimeoutMs !== undefined && webhookBodyTimeoutMs > 0
            ? { bodyTimeoutMs: webhookBodyTimeoutMs }
            : {}),
        },
      });
    }
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
    let extension: RuntimeExtensionServer | undefined;
    if (extensionAddr !== '') {
      try {
        extension = await serveRuntimeExtension(extensionAddr, {
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
    if (fleetUrl !== '') {
      const windowText = str(flags['fleet-batch-window']) || '2s';
      const batchWindowMs = parseDuration(windowText);
      if (batchWindowMs === undefined)
        throw new UsageError(`--fleet-batch-window "${windowText}" is not a duration like 2s`);
      const crashMarker = io.env.STACKFLUX_TEST_CRASH_AFTER_FLEET_COMMIT;
      // Checks the URL and prefix now (a usage error), before anything runs.
      try {
        new GitFleetWriter({ url: fleetUrl, branchPrefix, cacheDir, author });
      } catch (err) {
        throw new UsageError(
          `--fleet-url/--fleet-branch-prefix: ${err instanceof Error ? err.message : String(err)}`,
        );
      }
      await setupClusterAddonController(manager, {
        ...(namespace ? { namespace } : {}),
        fleet: {
          url: fleetUrl,
          branchPrefix,
          ...(secretNs && secretName ? { secret: { namespace: secretNs, name: secretName } } : {}),
          ...(fleetInterval !== undefined ? { interval: fleetInterval } : {}),
          ...(addonInterval !== undefined ? { addonInterval } : {}),
          ...(fluxShards >= 1 ? { fluxShards } : {}),
        },
        writer: (credentials) =>
          new GitFleetWriter({
            url: fleetUrl,
            branchPrefix,
            cacheDir,
            author,
            ...(credentials !== undefined ? { credentials } : {}),
            ...(crashMarker ? { hooks: { afterCommit: crashAfterCommitHook(crashMarker) } } : {}),
          }),
        cacheDir,
        fetchTree: pipeline.fetchTree,
        githubApiUrl,
        templates,
        tenancy,
        concurrency,
        batchWindowMs,
        render,
        renderSeedKey,
      });
      // Progressive rollouts gate on ClusterAddons, so they run where the addon controller runs.
      await setupRolloutController(manager, { ...(namespace ? { namespace } : {}), concurrency });
      // The impact a rollout may wait on is computed where the fleet it compares with is written.
      await setupImpactController(manager, {
        ...(namespace ? { namespace } : {}),
        cacheDir,
        // The pollers' listings and the release controller's tree reads, not reads of its own.
        sources: {
          pollers: pipeline.pollers,
          trees: pipeline.reads.trees,
          fetchTree: pipeline.fetchTree,
          cacheDir,
          githubApiUrl,
        },
        fleet: {
          url: fleetUrl,
          branchPrefix,
          ...(secretNs && secretName ? { secretRef: secretName } : {}),
          ...(fleetInterval !== undefined ? { interval: fleetInterval } : {}),
          ...(addonInterval !== undefined ? { addonInterval } : {}),
          ...(fluxShards >= 1 ? { fluxShards } : {}),
        },
        ...(secretNs && secretName ? { fleetSecret: { namespace: secretNs, name: secretName } } : {}),
        renderSeedKey,
        templates,
        ...(tenancy !== undefined ? { tenancy } : {}),
        render,
      });
    }
    await manager.start();
    log.info(
      {
        servers: manager.serverUrls(),
        webhook: webhook?.url,
        runtimeExtension: extension?.url,
        cacheDir,
        namespace: namespace || '(all)',
        shard: shard || '(none: objects without a shard key)',
        clusterApi: pipeline.clusterApiVersion ?? 'not served',
      },
      'stackflux controller started',
    );
    const reason = await manager.done;
    await webhook?.close().catch((err: unknown) => log.error(errorFields(err), 'closing the webhook'));
    await extension
      ?.close()
      .catch((err: unknown) => log.error(errorFields(err), 'closing the runtime extension'));
    client.close();
    return reason === 'leadership-lost' ? 1 : 0;
  },
};
