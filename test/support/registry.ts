// Private OCI registries for tests and a push helper that publishes a release exactly as csctl
// does. A private registry is a CNCF Distribution process of its own (own port, own storage,
// stopped by pid) with anonymous, htpasswd (basic) or Docker-token authentication and optional
// push notifications. The token server of the token mode lives here: a small implementation of
// the distribution token spec (GET /token?service=&scope= with optional basic credentials →
// ES256 JWT whose x5c certificate the registry's rootcertbundle holds).
import { execFileSync, spawn } from 'node:child_process';
import { createPrivateKey, randomBytes, sign, X509Certificate } from 'node:crypto';
import { existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { getCACertificates, setDefaultCACertificates } from 'node:tls';
import { fileURLToPath } from 'node:url';
import {
  type RegistryAuthConfig,
  registryAnswers,
  registryConfigYaml,
  registryEnv,
} from '../../hack/lib/registry.ts';
import { freePort } from './e2e.ts';
import { servingCertificate } from './runtimehook.ts';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

let binDir: string | undefined;

/**
 * The bin directory holding `registry`, `csctl-push` and `htpasswd`: the test environment's if it
 * has them (TESTENV_BIN_DIR), else hack/build-testenv.sh's (a no-op when cached).
 */
export function registryBinDir(): string {
  binDir ??= locateBinDir();
  return binDir;
}

function locateBinDir(): string {
  const has = (dir: string | undefined): dir is string =>
    dir !== undefined && ['registry', 'csctl-push', 'htpasswd'].every((b) => existsSync(join(dir, b)));
  const env = process.env.TESTENV_BIN_DIR;
  if (has(env)) return env;
  const out = execFileSync(join(repoRoot, 'hack', 'build-testenv.sh'), {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const bin = out.trim().split('\n').at(-1);
  if (!has(bin))
    throw new Error(`hack/build-testenv.sh gave no bin directory with the registry tools: ${out}`);
  return bin;
}

/**
 * Lets this process's TLS clients, global `fetch` included, trust `caPem` besides the defaults.
 * Node's fetch takes no CA option and NODE_EXTRA_CA_CERTS is read only at start; Node ≥ 24.5's
 * tls.setDefaultCACertificates changes the default store for later connections.
 */
export function trustCa(caPem: string): void {
  const current = getCACertificates('default');
  if (current.includes(caPem)) return;
  setDefaultCACertificates([...current, caPem]);
}

export type RegistryAuth =
  | { kind: 'none' }
  | { kind: 'htpasswd'; user: string; password: string }
  /** Docker token auth; `anonymousPull`: the token server grants pull to requests without credentials. */
  | { kind: 'token'; user: string; password: string; anonymousPull?: boolean };

export interface StartRegistryOptions {
  /** Default: anonymous push and pull. */
  auth?: RegistryAuth;
  /** The registry POSTs an event envelope to `url` for every push and pull (notifications.endpoints). */
  notifications?: { url: string; headers?: Record<string, string> };
  /** HTTPS with a fresh self-signed certificate, its own CA (default), or plain HTTP. */
  tls?: boolean;
}

export interface TestRegistry {
  /** host:port, as an OCI reference names it. */
  host: string;
  /** https://host (or http://host with tls: false). */
  url: string;
  plainHttp: boolean;
  /** CA file (PEM) to trust for the registry (its self-signed certificate); absent over plain HTTP. */
  ca?: string;
  caPem?: string;
  /** Storage, config and log live here. */
  dir: string;
  logFile: string;
  tokenServer?: TokenServer;
  stop(): Promise<void>;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Starts a private registry and resolves once it answers /v2/. */
export async function startRegistry(opts: StartRegistryOptions = {}): Promise<TestRegistry> {
  const bin = registryBinDir();
  const dir = mkdtempSync(join(tmpdir(), 'stackflux-registry-'));
  const useTls = opts.tls ?? true;
  const pki = useTls ? servingCertificate(join(dir, 'pki'), 'stackflux-test-registry') : undefined;
  const host = `127.0.0.1:${await freePort()}`;
  const url = `${useTls ? 'https' : 'http'}://${host}`;
  const auth = opts.auth ?? { kind: 'none' };
  let authConfig: RegistryAuthConfig = { kind: 'none' };
  let tokenServer: TokenServer | undefined;
  if (auth.kind === 'htpasswd') {
    const htpasswdFile = join(dir, 'htpasswd');
    writeFileSync(htpasswdFile, htpasswdLine(bin, auth.user, auth.password), { mode: 0o600 });
    authConfig = { kind: 'htpasswd', htpasswdFile };
  } else if (auth.kind === 'token') {
    tokenServer = await TokenServer.start({
      dir: join(dir, 'token'),
      service: host,
      user: auth.user,
      password: auth.password,
      anonymousPull: auth.anonymousPull ?? false,
      // oras (and Docker) refuse a plain-HTTP realm for a registry reached over HTTPS.
      ...(pki ? { tls: { cert: pki.ca, key: readFileSync(pki.keyFile) } } : {}),
    });
    authConfig = {
      kind: 'token',
      realm: tokenServer.realm,
      service: host,
      issuer: tokenServer.issuer,
      rootCertBundle: tokenServer.certFile,
    };
  }
  const configFile = join(dir, 'config.yml');
  writeFileSync(
    configFile,
    registryConfigYaml({
      addr: host,
      storageDir: join(dir, 'storage'),
      ...(pki ? { tls: { certificate: pki.certFile, key: pki.keyFile } } : {}),
      auth: authConfig,
      ...(opts.notifications ? { notifications: [opts.notifications] } : {}),
    }),
  );
  const logFile = join(dir, 'registry.log');
  const fd = openSync(logFile, 'a');
  const child = spawn(join(bin, 'registry'), ['serve', configFile], {
    detached: true,
    stdio: ['ignore', fd, fd],
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir, ...registryEnv },
  });
  const pid = child.pid;
  if (pid === undefined) throw new Error('could not start the registry');
  let exited = false;
  const exit = new Promise<void>((resolve) =>
    child.once('exit', () => {
      exited = true;
      resolve();
    }),
  );
  const caPem = pki?.ca.toString('utf8');
  const stop = async () => {
    if (!exited) {
      try {
        process.kill(-pid, 'SIGTERM');
      } catch {
        // already gone
      }
      await exit;
    }
    await tokenServer?.stop();
    rmSync(dir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 30_000;
  while (!(await registryAnswers(url, caPem))) {
    if (exited || Date.now() > deadline) {
      const log = readFileSync(logFile, 'utf8').split('\n').slice(-15).join('\n');
      await stop();
      throw new Error(`registry did not answer ${url}/v2/ (${exited ? 'exited' : 'timed out'}):\n${log}`);
    }
    await sleep(100);
  }
  return {
    host,
    url,
    plainHttp: !useTls,
    ...(pki ? { ca: pki.certFile, caPem } : {}),
    dir,
    logFile,
    ...(tokenServer ? { tokenServer } : {}),
    stop,
  };
}

/** One htpasswd line (bcrypt, the only hash the registry accepts) from the htpasswd helper. */
function htpasswdLine(bin: string, user: string, password: string): string {
  return execFileSync(join(bin, 'htpasswd'), [user], { input: password, encoding: 'utf8' });
}

export interface PushCsctlReleaseOptions {
  /** host:port */
  registry: string;
  /** repository path in the registry, e.g. `scs/docker-scs` */
  repository: string;
  /** csctl's release name, e.g. `docker-scs-1-34-v1` */
  tag: string;
  /** Directory holding the release assets, named as csctl names them. */
  dir: string;
  creds?: { user: string; password: string };
  plainHttp?: boolean;
  /** CA file (PEM) to trust for the registry. */
  ca?: string;
  /**
   * Manifest annotations; csctl sets `kubernetesVersion` and `hash`. oras adds
   * org.opencontainers.image.created (the push time) unless given: set it for a reproducible digest.
   */
  annotations?: Record<string, string>;
}

export interface PushedManifest {
  /** sha256:<hex> of the manifest: the release's identity. */
  digest: string;
  mediaType: string;
  size: number;
}

/**
 * Pushes `dir`'s regular files as a csctl cluster-stack artifact (hack/tools/csctl-push: csctl's
 * oras-go calls). Pushing other content under an existing tag moves the tag to the new digest.
 */
export function pushCsctlRelease(opts: PushCsctlReleaseOptions): Promise<PushedManifest> {
  const args = ['--repository', `${opts.registry}/${opts.repository}`, '--tag', opts.tag, '--dir', opts.dir];
  if (opts.plainHttp) args.push('--plain-http');
  if (opts.ca) args.push('--ca', opts.ca);
  for (const [k, v] of Object.entries(opts.annotations ?? {})) args.push('--annotation', `${k}=${v}`);
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME };
  if (opts.creds) {
    env.OCI_USERNAME = opts.creds.user;
    env.OCI_PASSWORD = opts.creds.password;
  }
  const child = spawn(join(registryBinDir(), 'csctl-push'), args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child.stdout.on('data', (c: Buffer) => out.push(c));
  child.stderr.on('data', (c: Buffer) => err.push(c));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => {
      if (code !== 0) {
        reject(new Error(`csctl-push ${opts.repository}:${opts.tag} exited ${code}: ${Buffer.concat(err)}`));
        return;
      }
      resolve(JSON.parse(Buffer.concat(out).toString('utf8')) as PushedManifest);
    });
  });
}

/** Pushes csctl's release assets (file name → bytes, as packageCsctlRelease makes them) to `registry` as csctl does. */
export async function pushCsctlAssets(
  registry: TestRegistry,
  repository: string,
  tag: string,
  assets: ReadonlyMap<string, Uint8Array>,
  creds?: { user: string; password: string },
): Promise<PushedManifest> {
  const dir = mkdtempSync(join(tmpdir(), 'stackflux-csctl-release-'));
  try {
    for (const [name, bytes] of assets) writeFileSync(join(dir, name), bytes);
    return await pushCsctlRelease({
      registry: registry.host,
      repository,
      tag,
      dir,
      ...(registry.plainHttp ? { plainHttp: true } : {}),
      ...(creds !== undefined ? { creds } : {}),
      ...(registry.ca !== undefined ? { ca: registry.ca } : {}),
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// --- Docker token auth ----------------------------------------------------------------------------

export interface TokenRequest {
  at: number;
  method: string;
  /** The user whose credentials were right; undefined: anonymous. */
  user?: string;
  scopes: string[];
  status: number;
  /** What the issued token grants, as `type:name:actions`. */
  granted: string[];
}

interface TokenServerOptions {
  dir: string;
  service: string;
  user: string;
  password: string;
  anonymousPull: boolean;
  /** Serve HTTPS with this certificate (the registry's: a client trusting it trusts both). */
  tls?: { cert: Buffer; key: Buffer };
}

interface Access {
  type: string;
  name: string;
  actions: string[];
}

/** Parses one `type:name:actions` scope; the name may hold ':' (a registry host with a port). */
export function parseScope(scope: string): Access | undefined {
  const first = scope.indexOf(':');
  const last = scope.lastIndexOf(':');
  if (first <= 0 || last === first) return undefined;
  const actions = scope
    .slice(last + 1)
    .split(',')
    .filter(Boolean);
  return { type: scope.slice(0, first), name: scope.slice(first + 1, last), actions };
}

/** The distribution token spec's token endpoint for one user, on 127.0.0.1. */
export class TokenServer {
  readonly requests: TokenRequest[] = [];
  realm = '';
  readonly issuer = 'stackflux-test-token-issuer';
  readonly certFile: string;
  readonly #key: ReturnType<typeof createPrivateKey>;
  readonly #x5c: string;
  readonly #opts: TokenServerOptions;
  #server: Server | undefined;

  private constructor(opts: TokenServerOptions) {
    this.#opts = opts;
    // The registry's rootcertbundle holds this self-signed certificate; tokens carry it as x5c.
    const signer = servingCertificate(opts.dir, 'stackflux-test-token-signer');
    this.certFile = signer.certFile;
    this.#key = createPrivateKey(readFileSync(signer.keyFile));
    this.#x5c = new X509Certificate(signer.ca).raw.toString('base64');
  }

  static async start(opts: TokenServerOptions): Promise<TokenServer> {
    const t = new TokenServer(opts);
    const handle = (req: IncomingMessage, res: ServerResponse) => t.#handle(req, res);
    const server = opts.tls ? createHttpsServer(opts.tls, handle) : createServer(handle);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const addr = server.address();
    t.#server = server;
    const port = typeof addr === 'object' && addr ? addr.port : 0;
    t.realm = `${opts.tls ? 'https' : 'http'}://127.0.0.1:${port}/token`;
    return t;
  }

  stop(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    return new Promise((resolve) => (server ? server.close(() => resolve()) : resolve()));
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    req.resume();
    const url = new URL(req.url ?? '/', 'http://token');
    const scopes = url.searchParams.getAll('scope').flatMap((s) => s.split(' ').filter(Boolean));
    const record = (status: number, granted: string[], user?: string) =>
      this.requests.push({ at: Date.now(), method: req.method ?? '', user, scopes, status, granted });
    if (req.method !== 'GET' || url.pathname !== '/token') {
      record(404, []);
      res.writeHead(404).end();
      return;
    }
    const basic = /^Basic (.+)$/i.exec(req.headers.authorization ?? '')?.[1];
    let user: string | undefined;
    if (basic !== undefined) {
      const [name, ...rest] = Buffer.from(basic, 'base64').toString('utf8').split(':');
      if (name !== this.#opts.user || rest.join(':') !== this.#opts.password) {
        record(401, []);
        res.writeHead(401, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ errors: [{ code: 'UNAUTHORIZED', message: 'wrong user or password' }] }));
        return;
      }
      user = name;
    }
    const allowed =
      user !== undefined ? ['pull', 'push', 'delete', '*'] : this.#opts.anonymousPull ? ['pull'] : [];
    const access = scopes
      .map(parseScope)
      .filter((a): a is Access => a !== undefined)
      .map((a) => ({ ...a, actions: a.actions.filter((x) => allowed.includes(x)) }));
    const token = this.#sign(user ?? '', access);
    record(
      200,
      access.map((a) => `${a.type}:${a.name}:${a.actions.join(',')}`),
      user,
    );
    const issuedAt = new Date().toISOString();
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ token, access_token: token, expires_in: 300, issued_at: issuedAt }));
  }

  #sign(subject: string, access: Access[]): string {
    const now = Math.floor(Date.now() / 1000);
    const b64url = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
    const header = b64url({ typ: 'JWT', alg: 'ES256', x5c: [this.#x5c] });
    const claims = b64url({
      iss: this.issuer,
      sub: subject,
      aud: this.#opts.service,
      exp: now + 300,
      nbf: now - 10,
      iat: now,
      jti: randomBytes(12).toString('hex'),
      access,
    });
    // JWS ES256 wants the raw r||s signature, not DER.
    const signature = sign('sha256', Buffer.from(`${header}.${claims}`), {
      key: this.#key,
      dsaEncoding: 'ieee-p1363',
    });
    return `${header}.${claims}.${signature.toString('base64url')}`;
  }
}
