// Cluster API Runtime Extension server: Discovery and the BeforeClusterUpgrade hook over HTTPS
// (Cluster API calls extensions only over TLS, trusting spec.clientConfig.caBundle of the
// ExtensionConfig). The hardening is the push webhook's (runtime/bodyserver.ts); the decision is
// pure (reconcilers/upgradehook.ts); this file is the I/O around them: the routes, the live
// lookup of the ClusterAddon, and reloading a rotated certificate.
//
// Cluster API's own server answers 200 with status Failure for a body it cannot read; so does this
// one. What is no hook call at all (another path or method, a body declared larger than maxBody,
// a content type that is not JSON) is refused before the body is read, with an HTTP error.
// Nobody is authenticated (Cluster API sends no credentials by default): the hook only reads, its
// answers name addons and condition reasons of the Cluster asked about (never a condition's
// message, never an API error), and lookups are rate-limited per caller address and overall, so
// whoever reaches the port cannot turn it into a stream of API reads. The chart's NetworkPolicy
// admits only Cluster API's namespace to the port.
import { readFileSync, statSync } from 'node:fs';
import type { SecureContextOptions } from 'node:tls';
import type { ClusterAddon } from '../api/clusteraddon.ts';
import { API_VERSION } from '../api/meta.ts';
import { BEFORE_CLUSTER_UPGRADE_PATH, DISCOVERY_PATH, RETRY_AFTER_SECONDS } from '../api/runtimehooks.ts';
import {
  beforeClusterUpgradeResponse,
  decideBeforeClusterUpgrade,
  discoveryResponse,
  parseBeforeClusterUpgradeRequest,
  stageFromClusterAddon,
  type UpgradeStage,
  type UpgradeStageLookup,
} from '../reconcilers/upgradehook.ts';
import {
  admitLength,
  type BodyAdmission,
  type BodyRequest,
  type BodyRequestHead,
  type BodyResponse,
  type BodyServer,
  type BodyServerLimits,
  headerValue,
  isJsonContentType,
  serveBodies,
} from '../runtime/bodyserver.ts';
import type { KubeClient } from '../runtime/client.ts';
import { errorFields, type Logger, silentLogger } from '../runtime/logging.ts';
import { type RateLimit, TokenBuckets } from '../runtime/tokenbucket.ts';

/** A BeforeClusterUpgradeRequest is one Cluster object (etcd holds at most 1.5 MiB per object). */
export const RUNTIME_EXTENSION_MAX_BODY = 2 << 20;

export const DEFAULT_RUNTIME_EXTENSION_LIMITS: Readonly<BodyServerLimits> = {
  maxBody: RUNTIME_EXTENSION_MAX_BODY,
  bodyBudget: 8 * RUNTIME_EXTENSION_MAX_BODY,
  maxInFlight: 32,
  maxConnections: 128,
  bodyTimeoutMs: 10_000,
  headersTimeoutMs: 10_000,
};

/**
 * Hook calls answered with a lookup: per caller address and overall. Cluster API calls from one
 * address (its controller), once per Cluster being upgraded and reconciled, and waits
 * retryAfterSeconds (10) between calls of a Cluster: 20/s from one caller is 200 Clusters upgrading
 * at once; a caller past it is told to retry, which only delays an upgrade, never lets one through.
 */
export const DEFAULT_HOOK_RATE: Readonly<{ overall: RateLimit; perKey: RateLimit }> = {
  overall: { ratePerSecond: 50, burst: 100 },
  perKey: { ratePerSecond: 20, burst: 40 },
};

/** How often the certificate files are checked for a rotation (cert-manager renews in place). */
export const CERT_RELOAD_INTERVAL_MS = 30_000;

const ROUTES = new Set([DISCOVERY_PATH, BEFORE_CLUSTER_UPGRADE_PATH]);

/** What the head alone decides: the route, POST, a JSON (or no) content type, the declared length. */
export function screenHookRequest(head: BodyRequestHead, maxBody: number): BodyAdmission {
  const refuse = (status: number, error: string): BodyAdmission => ({
    admit: false,
    response: { status, body: { error } },
  });
  if (!ROUTES.has(head.path)) return refuse(404, 'not found');
  if (head.method !== 'POST') return refuse(405, 'use POST');
  // Cluster API's client sets no Content-Type; anything else declared must be JSON.
  const contentType = headerValue(head, 'content-type');
  if (contentType !== undefined && !isJsonContentType(contentType))
    return refuse(415, 'content-type must be application/json');
  return admitLength(head, maxBody, false);
}

/**
 * The answer to a call past the rate limit: 200 with `Success` and `retryAfterSeconds`, the shape
 * by which a blocking hook tells Cluster API to wait and call again (a non-200 answer or `Failure`
 * would be an error on the Cluster and Cluster API's own back-off). The upgrade only waits.
 */
function throttled(which: 'key' | 'overall'): BodyResponse {
  const who = which === 'key' ? 'from this caller' : 'in all';
  return {
    status: 200,
    body: {
      ...beforeClusterUpgradeResponse({
        status: 'Success',
        message: `too many BeforeClusterUpgrade calls ${who}: asked again in ${RETRY_AFTER_SECONDS} s`,
        retryAfterSeconds: RETRY_AFTER_SECONDS,
      }),
    },
  };
}

/** One admitted request → its answer (200 and a hook response, as Cluster API expects). */
export async function handleHookRequest(
  req: BodyRequest,
  lookup: UpgradeStageLookup,
  signal?: AbortSignal,
  limiter?: TokenBuckets,
  onLookupError?: (err: unknown) => void,
): Promise<BodyResponse> {
  if (req.path === DISCOVERY_PATH) return { status: 200, body: { ...discoveryResponse() } };
  // Charged before the body is parsed: a flood costs no parse and no API read.
  const allowed = limiter?.take(req.remoteAddress ?? '') ?? 'ok';
  if (allowed !== 'ok') return throttled(allowed);
  const parsed = parseBeforeClusterUpgradeRequest(req.body);
  if (!parsed.ok)
    return {
      status: 200,
      body: {
        ...beforeClusterUpgradeResponse({ status: 'Failure', message: parsed.message, retryAfterSeconds: 0 }),
      },
    };
  const target = parsed.value;
  let stage: UpgradeStage | undefined;
  if (target.release !== undefined && target.fromKubernetesVersion !== target.toKubernetesVersion) {
    const release = target.release;
    // The answer comes by the deadline even from a lookup that ignores the signal.
    const timedOut = new Promise<UpgradeStage>((resolve) => {
      if (signal === undefined) return;
      const onAbort = () => resolve({ kind: 'Unknown', why: 'the lookup timed out' });
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    });
    // An API error is not told to the caller (who may be anyone): the controller's log has it.
    stage = await Promise.race([lookup.stageOf({ ...target, release }, signal), timedOut]).catch(
      (err: unknown): UpgradeStage => {
        onLookupError?.(err);
        return { kind: 'Unknown', why: 'reading its ClusterAddon failed (the controller log says why)' };
      },
    );
  }
  return {
    status: 200,
    body: { ...beforeClusterUpgradeResponse(decideBeforeClusterUpgrade(target, stage)) },
  };
}

/** The stage as the Cluster's ClusterAddon (same name and namespace as the Cluster) tells it. */
export function liveStageLookup(client: KubeClient): UpgradeStageLookup {
  return {
    stageOf: async (target, signal) =>
      stageFromClusterAddon(
        (await client.get(API_VERSION, 'ClusterAddon', target.cluster, target.namespace, signal)) as
          | ClusterAddon
          | undefined,
        target.release,
      ),
  };
}

export interface RuntimeExtensionOptions {
  lookup: UpgradeStageLookup;
  /** PEM files of the serving certificate and its key (tls.crt/tls.key of a cert-manager Secret). */
  certFile: string;
  keyFile: string;
  limits?: Partial<BodyServerLimits>;
  logger?: Logger;
  /** How often the files are checked for a new certificate; 0: never. */
  reloadIntervalMs?: number;
  /** Lookups per second per caller address and overall (DEFAULT_HOOK_RATE). */
  rate?: { overall: RateLimit; perKey: RateLimit };
}

export interface RuntimeExtensionServer {
  readonly url: string;
  readonly port: number;
  stats: BodyServer['stats'];
  close(): Promise<void>;
}

function readTls(certFile: string, keyFile: string): SecureContextOptions {
  return { cert: readFileSync(certFile), key: readFileSync(keyFile) };
}

function filesStamp(...files: string[]): string {
  return files.map((f) => `${statSync(f).mtimeMs}:${statSync(f).size}`).join(',');
}

export async function serveRuntimeExtension(
  addr: string,
  opts: RuntimeExtensionOptions,
): Promise<RuntimeExtensionServer> {
  const log = (opts.logger ?? silentLogger()).child({ component: 'runtime-extension' });
  const limits: BodyServerLimits = { ...DEFAULT_RUNTIME_EXTENSION_LIMITS, ...opts.limits };
  let stamp = filesStamp(opts.certFile, opts.keyFile);
  const limiter = new TokenBuckets(opts.rate ?? DEFAULT_HOOK_RATE);
  const server = await serveBodies(addr, {
    name: 'runtime-extension',
    limits,
    tls: readTls(opts.certFile, opts.keyFile),
    screen: (head) => screenHookRequest(head, limits.maxBody),
    // A lookup outlives no call: Cluster API gives up after the handler's timeoutSeconds (10).
    handle: (req) =>
      handleHookRequest(req, opts.lookup, AbortSignal.timeout(limits.bodyTimeoutMs), limiter, (err) =>
        log.warn(errorFields(err), 'BeforeClusterUpgrade lookup failed'),
      ),
    busyMessage: 'too many runtime extension requests in flight; retry later',
    logFields: (_req, out) => ({
      hookStatus: out.body.status,
      retryAfterSeconds: out.body.retryAfterSeconds,
      message: out.body.message,
    }),
    logger: opts.logger ?? silentLogger(),
  });
  const reloadMs = opts.reloadIntervalMs ?? CERT_RELOAD_INTERVAL_MS;
  const timer =
    reloadMs > 0
      ? setInterval(() => {
          try {
            const now = filesStamp(opts.certFile, opts.keyFile);
            if (now === stamp) return;
            server.setSecureContext(readTls(opts.certFile, opts.keyFile));
            stamp = now;
            log.info({}, 'serving certificate reloaded');
          } catch (err) {
            // Half-written files (a Secret volume updates atomically, a copy may not): next time.
            log.warn(errorFields(err), 'serving certificate not reloaded');
          }
        }, reloadMs)
      : undefined;
  timer?.unref();
  return {
    url: server.url,
    port: server.port,
    stats: server.stats,
    close: async () => {
      if (timer !== undefined) clearInterval(timer);
      await server.close();
    },
  };
}
