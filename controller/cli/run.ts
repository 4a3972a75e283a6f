// `stackflux run`: the controller. One Manager (shared informers, leader election, /metrics,
// /healthz, /readyz), the release pipeline controllers, the source pollers and the push webhook.
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { crashAfterCommitHook, setupClusterAddonController } from '../controllers/clusteraddon.ts';
import { parseDuration } from '../controllers/duration.ts';
import { setupReleasePipeline } from '../controllers/releasepipeline.ts';
import { loadFluxTemplates } from '../releases/flux-templates.ts';
import { KubeClient, loadKubeConfig } from '../runtime/client.ts';
import { errorFields, newLogger } from '../runtime/logging.ts';
import { Manager } from '../runtime/manager.ts';
import { serveWebhook, type WebhookServer } from '../sources/webhook.ts';
import { type Command, UsageError } from './command.ts';

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
    'cache-dir': {
      type: 'string',
      description: 'cache of release trees (default $XDG_CACHE_HOME/stackflux, else ~/.cache/stackflux)',
    },
    'poll-interval': {
      type: 'string',
      description: 'how often a source is listed when its ClusterStack sets no interval',
      default: '5m',
    },
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
    'fleet-branch': {
      type: 'string',
      description: 'fleet repository branch (addon controller)',
      default: 'main',
    },
    'fleet-secret': {
      type: 'string',
      description: 'NS/NAME of the fleet repository Secret (addon controller)',
    },
    'fleet-path': {
      type: 'string',
      description:
        'folder in the fleet repository holding <namespace>/<cluster>/<addon>/ (default: the root)',
      default: '',
    },
    'fleet-batch-window': {
      type: 'string',
      description: 'how long fleet writes are collected into one commit (debounce)',
      default: '2s',
    },
    'flux-templates': {
      type: 'string',
      description: 'folder of the Flux object templates (default: the bundled ones)',
    },
  },
  run: async (flags, _positionals, io) => {
    const log = newLogger({ level: str(flags['log-level']) || 'info' });
    const pollMs = parseDuration(str(flags['poll-interval']));
    if (pollMs === undefined)
      throw new UsageError(`--poll-interval "${str(flags['poll-interval'])}" is not a duration like 5m`);
    const concurrency = positiveInt('concurrency', str(flags.concurrency) || '4');
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
    const cacheDir = str(flags['cache-dir']) || defaultCacheDir(io.env);
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
    const pipeline = await setupReleasePipeline(manager, {
      ...(namespace ? { namespace } : {}),
      cacheDir,
      templates,
      defaultPollIntervalMs: pollMs,
      concurrency,
    });
    let webhook: WebhookServer | undefined;
    if (webhookAddr !== '') {
      webhook = await serveWebhook(webhookAddr, {
        secret,
        trigger: (urls) => pipeline.pollers.trigger(urls),
        logger: log,
      });
    }
    const fleetUrl = str(flags['fleet-url']);
    if (fleetUrl !== '') {
      const windowText = str(flags['fleet-batch-window']) || '2s';
      const batchWindowMs = parseDuration(windowText);
      if (batchWindowMs === undefined)
        throw new UsageError(`--fleet-batch-window "${windowText}" is not a duration like 2s`);
      const secretFlag = str(flags['fleet-secret']);
      const [secretNs, secretName, ...rest] = secretFlag.split('/');
      if (secretFlag !== '' && (!secretNs || !secretName || rest.length > 0))
        throw new UsageError(`--fleet-secret must be NAMESPACE/NAME, got "${secretFlag}"`);
      await setupClusterAddonController(manager, {
        ...(namespace ? { namespace } : {}),
        fleet: {
          url: fleetUrl,
          branch: str(flags['fleet-branch']) || 'main',
          pathPrefix: str(flags['fleet-path']),
          ...(secretNs && secretName ? { secret: { namespace: secretNs, name: secretName } } : {}),
        },
        cacheDir,
        templates,
        concurrency,
        batchWindowMs,
        ...(io.env.STACKFLUX_TEST_CRASH_AFTER_FLEET_COMMIT
          ? { hooks: crashAfterCommitHook(io.env.STACKFLUX_TEST_CRASH_AFTER_FLEET_COMMIT) }
          : {}),
      });
    }
    await manager.start();
    log.info(
      {
        servers: manager.serverUrls(),
        webhook: webhook?.url,
        cacheDir,
        namespace: namespace || '(all)',
        shard: shard || '(none: objects without a shard key)',
        clusterApi: pipeline.clusterApiVersion ?? 'not served',
      },
      'stackflux controller started',
    );
    const reason = await manager.done;
    await webhook?.close().catch((err: unknown) => log.error(errorFields(err), 'closing the webhook'));
    client.close();
    return reason === 'leadership-lost' ? 1 : 0;
  },
};
