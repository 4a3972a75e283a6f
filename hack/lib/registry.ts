// The CNCF Distribution registry (v3, hack/tools/registry) as the test environment runs it: its
// configuration file and a readiness probe. Used by the shared
// environment (hack/lib/testenv.ts) and by tests that start a private registry
// (test/support/registry.ts).
import { randomBytes } from 'node:crypto';
import { request as httpsRequest } from 'node:https';
import { stringify } from 'yaml';

export type RegistryAuthConfig =
  | { kind: 'none' }
  | { kind: 'htpasswd'; htpasswdFile: string }
  /** Docker token auth: clients fetch a JWT from `realm`; the registry trusts tokens whose x5c chain ends in `rootCertBundle`. */
  | { kind: 'token'; realm: string; service: string; issuer: string; rootCertBundle: string };

export interface RegistryNotificationEndpoint {
  url: string;
  headers?: Record<string, string>;
}

export interface RegistryConfig {
  /** host:port to listen on. */
  addr: string;
  storageDir: string;
  /** Serving certificate and key (PEM files); absent: plain HTTP. */
  tls?: { certificate: string; key: string };
  auth: RegistryAuthConfig;
  notifications?: RegistryNotificationEndpoint[];
}

/** The registry's config.yml (Distribution configuration version 0.1) for `config`. */
export function registryConfigYaml(config: RegistryConfig): string {
  const auth = config.auth;
  const doc: Record<string, unknown> = {
    version: 0.1,
    log: { level: 'info', formatter: 'text', fields: { service: 'registry' } },
    storage: {
      filesystem: { rootdirectory: config.storageDir },
      delete: { enabled: true },
      // Upload purging walks the whole storage every 24 h; pointless for a test registry.
      maintenance: { uploadpurging: { enabled: false } },
    },
    http: {
      addr: config.addr,
      // One fixed secret per config: upload state stays valid across a restart with the same file.
      secret: randomBytes(16).toString('hex'),
      ...(config.tls ? { tls: { certificate: config.tls.certificate, key: config.tls.key } } : {}),
    },
  };
  if (auth.kind === 'htpasswd') doc.auth = { htpasswd: { realm: 'stackflux-test', path: auth.htpasswdFile } };
  if (auth.kind === 'token') {
    doc.auth = {
      token: {
        realm: auth.realm,
        service: auth.service,
        issuer: auth.issuer,
        rootcertbundle: auth.rootCertBundle,
      },
    };
  }
  if (config.notifications?.length) {
    doc.notifications = {
      endpoints: config.notifications.map((n, i) => ({
        name: `endpoint-${i}`,
        url: n.url,
        // The registry's http.Header: every header a list of values.
        headers: Object.fromEntries(Object.entries(n.headers ?? {}).map(([k, v]) => [k, [v]])),
        timeout: '2s',
        threshold: 3,
        backoff: '1s',
      })),
    };
  }
  return stringify(doc);
}

/**
 * The registry process's environment: OpenTelemetry off (Distribution v3 exports traces over
 * OTLP by default and would try to reach a collector).
 */
export const registryEnv: Record<string, string> = {
  OTEL_TRACES_EXPORTER: 'none',
  OTEL_METRICS_EXPORTER: 'none',
  OTEL_LOGS_EXPORTER: 'none',
  OTEL_SDK_DISABLED: 'true',
};

/**
 * Whether the registry at `base` (https:// or http://) answers its API base `/v2/` (200, or 401
 * when it requires credentials: it is serving). `ca` is the PEM the serving certificate chains to.
 */
export function registryAnswers(base: string, ca?: string): Promise<boolean> {
  if (base.startsWith('http://')) {
    return fetch(`${base}/v2/`, { signal: AbortSignal.timeout(2000) }).then(
      (res) => res.status === 200 || res.status === 401,
      () => false,
    );
  }
  return new Promise((resolve) => {
    const req = httpsRequest(`${base}/v2/`, { ca, timeout: 2000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200 || res.statusCode === 401);
    });
    req.on('error', () => resolve(false));
    req.on('timeout', () => req.destroy());
    req.end();
  });
}
