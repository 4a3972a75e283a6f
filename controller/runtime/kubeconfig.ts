// Kubeconfig loading without @kubernetes/client-node's KubeConfig on the common paths. Importing
// that package loads its whole generated API (about 85 MB of resident memory, more than half of an
// idle controller), while a controller needs a server, TLS material and a token. This reads
// kubeconfig files (also a $KUBECONFIG list, merged first-wins like kubectl), the in-cluster service
// account (its token file re-read, as kubelet rotates it), tokens, client certificates and basic
// auth. Exec plugins and auth providers (cloud logins) are delegated to the package's KubeConfig,
// imported only for such a kubeconfig.
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, dirname, isAbsolute, join } from 'node:path';
import { parse } from 'yaml';

/** What KubeClient needs of a kubeconfig (the package's KubeConfig has it too). */
export interface KubeConfigSource {
  getCurrentCluster(): { server: string } | null;
  getCurrentUser(): { exec?: unknown; authProvider?: unknown } | null;
  /** Sets ca/cert/key/rejectUnauthorized/servername, headers.Authorization and auth (user:password). */
  applyToHTTPSOptions(opts: Record<string, unknown>): Promise<void>;
}

interface NamedCluster {
  server: string;
  caData?: string;
  caFile?: string;
  skipTLSVerify?: boolean;
  tlsServerName?: string;
  proxyUrl?: string;
}

interface NamedUser {
  token?: string;
  tokenFile?: string;
  certData?: string;
  certFile?: string;
  keyData?: string;
  keyFile?: string;
  username?: string;
  password?: string;
  exec?: unknown;
  authProvider?: unknown;
}

interface RawNamed<T> {
  name?: string;
  cluster?: T;
  user?: T;
  context?: T;
}

const SA_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' && v !== '' ? v : undefined;
}

/** A file named in a kubeconfig, relative to that kubeconfig's folder. */
function resolveIn(dir: string | undefined, file: string | undefined): string | undefined {
  if (file === undefined) return undefined;
  return dir === undefined || isAbsolute(file) ? file : join(dir, file);
}

export class LeanKubeConfig implements KubeConfigSource {
  private readonly clusters = new Map<string, NamedCluster>();
  private readonly users = new Map<string, NamedUser>();
  private readonly contexts = new Map<string, { cluster: string; user: string }>();
  private currentContext = '';
  /** Replays this loading on the package's KubeConfig (exec plugins, auth providers). */
  private replay: (kc: { loadFromFile(f: string): void; loadFromCluster(): void }) => void = () => {};
  private delegate: Promise<KubeConfigSource> | undefined;

  /** Files as kubectl reads them: first file wins per name and for current-context. */
  loadFromFiles(files: string[]): void {
    for (const file of files) {
      const doc: unknown = parse(readFileSync(file, 'utf8'));
      if (!isRecord(doc)) continue;
      const dir = dirname(file);
      for (const c of (doc.clusters ?? []) as Array<RawNamed<Record<string, unknown>>>) {
        const v = c.cluster;
        const server = str(v?.server);
        if (!c.name || !v || server === undefined || this.clusters.has(c.name)) continue;
        this.clusters.set(c.name, {
          server: server.replace(/\/+$/, ''),
          ...(str(v['certificate-authority-data']) ? { caData: str(v['certificate-authority-data']) } : {}),
          ...(str(v['certificate-authority'])
            ? { caFile: resolveIn(dir, str(v['certificate-authority'])) }
            : {}),
          ...(v['insecure-skip-tls-verify'] === true ? { skipTLSVerify: true } : {}),
          ...(str(v['tls-server-name']) ? { tlsServerName: str(v['tls-server-name']) } : {}),
          ...(str(v['proxy-url']) ? { proxyUrl: str(v['proxy-url']) } : {}),
        });
      }
      for (const u of (doc.users ?? []) as Array<RawNamed<Record<string, unknown>>>) {
        const v = u.user ?? {};
        if (!u.name || this.users.has(u.name)) continue;
        const user: NamedUser = {};
        const set = (k: keyof NamedUser, value: unknown): void => {
          if (value !== undefined) (user as Record<string, unknown>)[k] = value;
        };
        set('token', str(v.token));
        set('tokenFile', resolveIn(dir, str(v.tokenFile)));
        set('certData', str(v['client-certificate-data']));
        set('certFile', resolveIn(dir, str(v['client-certificate'])));
        set('keyData', str(v['client-key-data']));
        set('keyFile', resolveIn(dir, str(v['client-key'])));
        set('username', str(v.username));
        set('password', str(v.password));
        set('exec', isRecord(v.exec) ? v.exec : undefined);
        set('authProvider', isRecord(v['auth-provider']) ? v['auth-provider'] : undefined);
        this.users.set(u.name, user);
      }
      for (const c of (doc.contexts ?? []) as Array<RawNamed<Record<string, unknown>>>) {
        const v = c.context;
        if (!c.name || !v || this.contexts.has(c.name)) continue;
        this.contexts.set(c.name, { cluster: str(v.cluster) ?? '', user: str(v.user) ?? '' });
      }
      if (this.currentContext === '' && str(doc['current-context']))
        this.currentContext = str(doc['current-context']) ?? '';
    }
    const list = [...files];
    this.replay = (kc) => {
      if (list.length === 1) kc.loadFromFile(list[0] as string);
      else {
        // The package merges $KUBECONFIG the same way.
        const saved = process.env.KUBECONFIG;
        process.env.KUBECONFIG = list.join(delimiter);
        try {
          (kc as unknown as { loadFromDefault(): void }).loadFromDefault();
        } finally {
          if (saved === undefined) delete process.env.KUBECONFIG;
          else process.env.KUBECONFIG = saved;
        }
      }
    };
  }

  /** The pod's service account: KUBERNETES_SERVICE_HOST/PORT, its CA and (rotated) token file. */
  loadFromCluster(dir = SA_DIR): void {
    const host = process.env.KUBERNETES_SERVICE_HOST ?? '';
    const port = process.env.KUBERNETES_SERVICE_PORT ?? '443';
    const scheme = ['80', '8080', '8001'].includes(port) ? 'http' : 'https';
    const h = host.includes(':') ? `[${host}]` : host;
    this.clusters.set('inCluster', { server: `${scheme}://${h}:${port}`, caFile: join(dir, 'ca.crt') });
    this.users.set('inClusterUser', { tokenFile: join(dir, 'token') });
    this.contexts.set('inClusterContext', { cluster: 'inCluster', user: 'inClusterUser' });
    this.currentContext = 'inClusterContext';
    this.replay = (kc) => kc.loadFromCluster();
  }

  setCurrentContext(name: string): void {
    if (!this.contexts.has(name)) throw new Error(`kubeconfig has no context ${name}`);
    this.currentContext = name;
    const previous = this.replay;
    this.replay = (kc) => {
      previous(kc);
      (kc as unknown as { setCurrentContext(n: string): void }).setCurrentContext(name);
    };
  }

  getCurrentCluster(): NamedCluster | null {
    const ctx = this.contexts.get(this.currentContext);
    return (ctx && this.clusters.get(ctx.cluster)) ?? null;
  }

  getCurrentUser(): NamedUser | null {
    const ctx = this.contexts.get(this.currentContext);
    return (ctx && this.users.get(ctx.user)) ?? null;
  }

  /** Whether this kubeconfig needs the package's KubeConfig (exec plugin, auth provider, proxy). */
  needsDelegate(): boolean {
    const user = this.getCurrentUser();
    return Boolean(user?.exec || user?.authProvider || this.getCurrentCluster()?.proxyUrl);
  }

  async applyToHTTPSOptions(opts: Record<string, unknown>): Promise<void> {
    if (this.needsDelegate()) {
      this.delegate ??= import('@kubernetes/client-node').then(({ KubeConfig }) => {
        const kc = new KubeConfig();
        this.replay(kc);
        return kc as unknown as KubeConfigSource;
      });
      await (await this.delegate).applyToHTTPSOptions(opts);
      return;
    }
    const cluster = this.getCurrentCluster();
    const user = this.getCurrentUser() ?? {};
    const pem = (data: string | undefined, file: string | undefined): Buffer | undefined =>
      data !== undefined ? Buffer.from(data, 'base64') : file !== undefined ? readFileSync(file) : undefined;
    const ca = pem(cluster?.caData, cluster?.caFile);
    const cert = pem(user.certData, user.certFile);
    const key = pem(user.keyData, user.keyFile);
    if (ca) opts.ca = ca;
    if (cert) opts.cert = cert;
    if (key) opts.key = key;
    if (cluster?.skipTLSVerify) opts.rejectUnauthorized = false;
    if (cluster?.tlsServerName) opts.servername = cluster.tlsServerName;
    const headers = isRecord(opts.headers) ? opts.headers : {};
    opts.headers = headers;
    const token = user.tokenFile !== undefined ? readFileSync(user.tokenFile, 'utf8').trim() : user.token;
    if (token) headers.Authorization = `Bearer ${token}`;
    if (user.username !== undefined) opts.auth = `${user.username}:${user.password ?? ''}`;
  }

  /** A token file is re-read (kubelet rotates service account tokens). */
  hasDynamicAuth(): boolean {
    return this.needsDelegate() || this.getCurrentUser()?.tokenFile !== undefined;
  }
}

/**
 * Loads a kubeconfig: explicit path, $KUBECONFIG (a list, merged), the in-cluster service
 * account, ~/.kube/config.
 */
export function loadKubeConfig(opts: { kubeconfig?: string; context?: string } = {}): LeanKubeConfig {
  const kc = new LeanKubeConfig();
  const envList = (process.env.KUBECONFIG ?? '').split(delimiter).filter((f) => f !== '');
  const home = join(process.env.HOME || homedir(), '.kube', 'config');
  if (opts.kubeconfig) {
    kc.loadFromFiles([opts.kubeconfig]);
  } else if (envList.length > 0) {
    kc.loadFromFiles(envList.filter((f) => existsSync(f)));
  } else if (process.env.KUBERNETES_SERVICE_HOST && existsSync(join(SA_DIR, 'token'))) {
    kc.loadFromCluster();
  } else if (existsSync(home)) {
    kc.loadFromFiles([home]);
  }
  if (opts.context) kc.setCurrentContext(opts.context);
  return kc;
}
