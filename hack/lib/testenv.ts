// The local test environment: a management cluster (etcd, kube-apiserver,
// kube-controller-manager), a workload cluster (etcd, kube-apiserver), Flux's
// source-controller, kustomize-controller and helm-controller, a smart-HTTP Git server and an OCI
// registry (CNCF Distribution, HTTPS with the environment's CA, anonymous push and pull), all as
// processes on 127.0.0.1. Binaries (and the `flux` and `kubectl` CLIs) come from
// hack/build-testenv.sh (built from pinned Go modules).
import { execFileSync, spawn } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments, stringify } from 'yaml';
import { registryAnswers, registryConfigYaml, registryEnv } from './registry.ts';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

export interface Endpoints {
  stateDir: string;
  kubeconfig: string;
  workloadKubeconfig: string;
  workloadClusterName: string;
  workloadNamespace: string;
  gitServerUrl: string;
  gitServerAuthUrl: string;
  gitServerUser: string;
  gitServerPassword: string;
  sourceControllerStorage: string;
  sourceControllerHealth: string;
  kustomizeControllerHealth: string;
  /** helm-controller's health address (absent when the bin directory has no helm-controller). */
  helmControllerHealth?: string;
  /** The bin directory: the `flux` and `kubectl` CLIs next to the components (absent in older environments). */
  binDir?: string;
  /** Cluster API CRD folder in the Go module cache. */
  capiCrds: string;
  /** The management cluster's etcd client URL (tests force compaction through it). */
  etcdUrl: string;
  /** The OCI registry's host:port (HTTPS, anonymous push and pull; absent in older environments). */
  registry?: string;
  /** The CA file (PEM) the registry's serving certificate chains to. */
  registryCa?: string;
}

export type Log = (message: string) => void;

export function defaultStateDir(): string {
  return (
    process.env.STACKFLUX_TESTENV_DIR ?? join(tmpdir(), `stackflux-testenv-${process.getuid?.() ?? 'user'}`)
  );
}

/**
 * Runs hack/build-testenv.sh and hack/build-goengine.sh (each a no-op when cached) and returns the
 * test binaries' directory. The Go engine is the product's (csctl releases render with it), built
 * here so that `npm test` and `npm run demo` on a fresh machine have it.
 */
export function buildBinaries(log: Log): string {
  log('building/locating test binaries (cold build takes several minutes)…');
  execFileSync(join(repoRoot, 'hack', 'build-goengine.sh'), { stdio: ['ignore', 'ignore', 'inherit'] });
  const out = execFileSync(join(repoRoot, 'hack', 'build-testenv.sh'), {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const bin = out.trim().split('\n').at(-1);
  if (!bin || !existsSync(join(bin, '.complete')))
    throw new Error(`build-testenv.sh did not report a bin directory: ${out}`);
  return bin;
}

function readPathsEnv(bin: string): Record<string, string> {
  const result: Record<string, string> = {};
  for (const line of readFileSync(join(bin, 'paths.env'), 'utf8').split('\n')) {
    const eq = line.indexOf('=');
    if (eq > 0) result[line.slice(0, eq)] = line.slice(eq + 1);
  }
  return result;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  // A killed child of a still-running parent stays a zombie until the parent reaps it; it
  // answers signal 0 but is gone (its port is free, it will never serve again).
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return true;
  }
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

interface Started {
  name: string;
  pid: number;
  log: string;
}

export function startProcess(
  stateDir: string,
  name: string,
  binary: string,
  args: string[],
  env: Record<string, string> = {},
): Started {
  const logFile = join(stateDir, 'logs', `${name}.log`);
  const fd = openSync(logFile, 'a');
  const child = spawn(binary, args, {
    detached: true,
    stdio: ['ignore', fd, fd],
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? stateDir, ...env },
  });
  if (child.pid === undefined) throw new Error(`could not start ${name} (${binary})`);
  child.unref();
  writeFileSync(join(stateDir, 'pids', `${name}.pid`), String(child.pid));
  // Remembered so a test can restart a component with exactly the same command line.
  writeFileSync(join(stateDir, 'pids', `${name}.cmd.json`), JSON.stringify({ binary, args, env }));
  return { name, pid: child.pid, log: logFile };
}

function stoppedMarker(stateDir: string, name: string): string {
  return join(stateDir, 'pids', `${name}.stopped`);
}

/** Kills one component (SIGKILL) and waits until it is gone. */
async function killComponent(stateDir: string, name: string): Promise<void> {
  const pid = Number(readFileSync(join(stateDir, 'pids', `${name}.pid`), 'utf8'));
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // already gone
  }
  while (pidAlive(pid)) await sleep(50);
}

/**
 * Stops one component on purpose (e.g. kustomize-controller while a benchmark times stackflux
 * alone): the environment still counts as running; `startComponent` / `restartComponent` bring
 * it back with the same command line.
 */
export async function stopComponent(stateDir: string, name: string): Promise<void> {
  writeFileSync(stoppedMarker(stateDir, name), '');
  await killComponent(stateDir, name);
}

/** Whether a component was stopped on purpose (stopComponent) and not started again. */
export function isStopped(stateDir: string, name: string): boolean {
  return existsSync(stoppedMarker(stateDir, name));
}

/** Starts a component stopped by stopComponent again (a restart if it is running). */
export function startComponent(stateDir: string, name: string, healthUrl?: string): Promise<void> {
  return restartComponent(stateDir, name, healthUrl);
}

/**
 * Kills one component (SIGKILL: a crash, not a clean shutdown) and starts it again with the
 * same command line; resolves once it answers its health URL again.
 */
export async function restartComponent(stateDir: string, name: string, healthUrl?: string): Promise<void> {
  const cmd = JSON.parse(readFileSync(join(stateDir, 'pids', `${name}.cmd.json`), 'utf8')) as {
    binary: string;
    args: string[];
    env: Record<string, string>;
  };
  await killComponent(stateDir, name);
  rmSync(stoppedMarker(stateDir, name), { force: true });
  // The component listens on the port it had; an outgoing connection of any process may have taken
  // that port as its ephemeral local port since the kill. Then it exits at once: start it again.
  let proc = startProcess(stateDir, name, cmd.binary, cmd.args, cmd.env);
  for (let attempt = 1; attempt < 10; attempt++) {
    await sleep(1_500);
    if (pidAlive(proc.pid) || !/address already in use/.test(tail(proc.log, 5))) break;
    await sleep(attempt * 1_000);
    proc = startProcess(stateDir, name, cmd.binary, cmd.args, cmd.env);
  }
  const endpoints = readEndpoints(stateDir);
  if (name.endsWith('kube-apiserver') && endpoints) {
    const api = name === 'kube-apiserver' ? endpoints.kubeconfig : endpoints.workloadKubeconfig;
    const url = /server: (\S+)/.exec(readFileSync(api, 'utf8'))?.[1] ?? '';
    const token = /token: (\S+)/.exec(readFileSync(api, 'utf8'))?.[1] ?? '';
    const ca = readFileSync(join(stateDir, 'pki', 'ca.crt'), 'utf8');
    await waitFor(
      proc,
      '/readyz',
      async () => (await kubeRequest({ url, ca, token }, 'GET', '/readyz')).status === 200,
    );
  } else if (name === 'registry' && endpoints?.registry) {
    const ca = readFileSync(join(stateDir, 'pki', 'ca.crt'), 'utf8');
    await waitFor(proc, '/v2/', () => registryAnswers(`https://${endpoints.registry}`, ca));
  } else if (healthUrl) {
    await waitFor(proc, healthUrl, () => httpOk(healthUrl));
  }
}

function tail(file: string, lines = 15): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/** Polls check() until it returns true; fails with the component's log tail if it dies or times out. */
async function waitFor(
  proc: Started,
  what: string,
  check: () => Promise<boolean>,
  timeoutMs = 90_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!pidAlive(proc.pid)) {
      throw new Error(`${proc.name} exited before ${what}; last lines of ${proc.log}:\n${tail(proc.log)}`);
    }
    if (await check().catch(() => false)) return;
    await sleep(250);
  }
  throw new Error(
    `${proc.name}: timed out after ${timeoutMs / 1000}s waiting for ${what}; see ${proc.log}:\n${tail(proc.log)}`,
  );
}

async function httpOk(url: string): Promise<boolean> {
  const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
  return res.ok;
}

interface ApiServer {
  url: string;
  ca: string;
  token: string;
}

/** A minimal HTTPS call to a kube-apiserver (the testenv must not depend on the code it tests). */
export function kubeRequest(
  api: ApiServer,
  method: string,
  path: string,
  body?: string,
  contentType = 'application/json',
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      `${api.url}${path}`,
      {
        method,
        ca: api.ca,
        headers: {
          authorization: `Bearer ${api.token}`,
          'content-type': contentType,
          accept: 'application/json',
        },
        timeout: 10_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }),
        );
      },
    );
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error(`timeout ${method} ${path}`)));
    if (body !== undefined) req.write(body);
    req.end();
  });
}

function kubeconfigYaml(name: string, api: ApiServer, user = 'admin'): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      {
        name,
        cluster: { server: api.url, 'certificate-authority-data': Buffer.from(api.ca).toString('base64') },
      },
    ],
    users: [{ name: user, user: { token: api.token } }],
    contexts: [{ name, context: { cluster: name, user } }],
    'current-context': name,
  });
}

function makePki(dir: string): void {
  mkdirSync(dir, { recursive: true });
  const openssl = (args: string[]) =>
    execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  openssl([
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    'ca.key',
    '-out',
    'ca.crt',
    '-days',
    '3650',
    '-subj',
    '/CN=stackflux-testenv-ca',
  ]);
  openssl([
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    'serving.key',
    '-out',
    'serving.csr',
    '-subj',
    '/CN=kube-apiserver',
  ]);
  writeFileSync(
    join(dir, 'san.ext'),
    'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n',
  );
  openssl([
    'x509',
    '-req',
    '-in',
    'serving.csr',
    '-CA',
    'ca.crt',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    'serving.crt',
    '-days',
    '3650',
    '-extfile',
    'san.ext',
  ]);
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  writeFileSync(join(dir, 'sa.key'), privateKey.export({ type: 'pkcs1', format: 'pem' }));
  writeFileSync(join(dir, 'sa.pub'), publicKey.export({ type: 'spki', format: 'pem' }));
}

async function startEtcd(stateDir: string, bin: string, name: string): Promise<string> {
  const [client, peer] = [await freePort(), await freePort()];
  const peerUrl = `http://127.0.0.1:${peer}`;
  const clientUrl = `http://127.0.0.1:${client}`;
  const proc = startProcess(stateDir, name, join(bin, 'etcd'), [
    `--name=${name}`,
    `--data-dir=${join(stateDir, name)}`,
    `--listen-client-urls=${clientUrl}`,
    `--advertise-client-urls=${clientUrl}`,
    `--listen-peer-urls=${peerUrl}`,
    `--initial-advertise-peer-urls=${peerUrl}`,
    `--initial-cluster=${name}=${peerUrl}`,
    '--unsafe-no-fsync=true',
    '--quota-backend-bytes=4294967296',
  ]);
  await waitFor(proc, 'health', () => httpOk(`${clientUrl}/health`));
  return clientUrl;
}

async function startApiServer(
  stateDir: string,
  bin: string,
  name: string,
  etcdUrl: string,
  token: string,
): Promise<ApiServer & { port: number }> {
  const pki = join(stateDir, 'pki');
  const port = await freePort();
  writeFileSync(join(pki, `${name}-tokens.csv`), `${token},admin,admin-uid,"system:masters"\n`);
  const proc = startProcess(stateDir, name, join(bin, 'kube-apiserver'), [
    `--etcd-servers=${etcdUrl}`,
    `--cert-dir=${join(stateDir, `${name}-certs`)}`,
    `--tls-cert-file=${join(pki, 'serving.crt')}`,
    `--tls-private-key-file=${join(pki, 'serving.key')}`,
    `--client-ca-file=${join(pki, 'ca.crt')}`,
    `--secure-port=${port}`,
    '--bind-address=127.0.0.1',
    '--advertise-address=127.0.0.1',
    // Since 1.37 the endpoint reconciler refuses a loopback advertise address; Kubernetes' own
    // test server (cmd/kube-apiserver/app/testing) disables it the same way.
    '--endpoint-reconciler-type=none',
    '--service-cluster-ip-range=10.96.0.0/16',
    '--allow-privileged=true',
    '--authorization-mode=RBAC',
    `--token-auth-file=${join(pki, `${name}-tokens.csv`)}`,
    `--service-account-issuer=https://${name}.stackflux.test`,
    `--service-account-key-file=${join(pki, 'sa.pub')}`,
    `--service-account-signing-key-file=${join(pki, 'sa.key')}`,
    '--enable-priority-and-fairness=false',
    '--profiling=false',
  ]);
  const api = {
    url: `https://127.0.0.1:${port}`,
    ca: readFileSync(join(pki, 'ca.crt'), 'utf8'),
    token,
    port,
  };
  await waitFor(proc, '/readyz', async () => (await kubeRequest(api, 'GET', '/readyz')).status === 200);
  return api;
}

async function applyManifest(api: ApiServer, doc: Record<string, unknown>): Promise<void> {
  const meta = doc.metadata as { name: string; namespace?: string };
  const kind = String(doc.kind);
  const apiVersion = String(doc.apiVersion);
  const plural: Record<string, string> = {
    CustomResourceDefinition: 'customresourcedefinitions',
    Namespace: 'namespaces',
    Secret: 'secrets',
  };
  const resource = plural[kind];
  if (!resource) throw new Error(`testenv cannot apply kind ${kind}`);
  const base = apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
  const ns = meta.namespace ? `/namespaces/${meta.namespace}` : '';
  const path = `${base}${ns}/${resource}/${meta.name}?fieldManager=stackflux-testenv&force=true`;
  const res = await kubeRequest(api, 'PATCH', path, JSON.stringify(doc), 'application/apply-patch+yaml');
  if (res.status >= 300)
    throw new Error(`apply ${kind} ${meta.name}: HTTP ${res.status}: ${res.body.slice(0, 500)}`);
}

/** Cluster API's ExtensionConfig CRD (runtime.cluster.x-k8s.io), among the CRDs the environment applies. */
export const EXTENSION_CONFIG_CRD = 'extensionconfigs.runtime.cluster.x-k8s.io';

/** Cluster API CRDs declare several versions converted by a webhook that does not run here: serve only the storage version. */
export function storageVersionOnly(crd: Record<string, unknown>): Record<string, unknown> {
  const spec = crd.spec as { versions: Array<{ storage?: boolean; served?: boolean }>; conversion?: unknown };
  const versions = spec.versions.filter((v) => v.storage === true).map((v) => ({ ...v, served: true }));
  return { ...crd, spec: { ...spec, versions, conversion: { strategy: 'None' } } };
}

export function readCrds(dir: string, only?: Set<string>): Record<string, unknown>[] {
  const docs: Record<string, unknown>[] = [];
  for (const file of readdirSync(dir).sort()) {
    if (!file.endsWith('.yaml')) continue;
    for (const d of parseAllDocuments(readFileSync(join(dir, file), 'utf8'))) {
      const obj = d.toJS() as Record<string, unknown> | null;
      if (obj?.kind !== 'CustomResourceDefinition') continue;
      const name = (obj.metadata as { name: string }).name;
      if (only && !only.has(name)) continue;
      docs.push(obj);
    }
  }
  return docs;
}

async function waitEstablished(api: ApiServer, names: string[]): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (const name of names) {
    for (;;) {
      const res = await kubeRequest(
        api,
        'GET',
        `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`,
      );
      const conds =
        res.status === 200
          ? ((JSON.parse(res.body).status?.conditions ?? []) as Array<{ type: string; status: string }>)
          : [];
      if (conds.some((c) => c.type === 'Established' && c.status === 'True')) break;
      if (Date.now() > deadline) throw new Error(`CRD ${name} not established after 60s`);
      await sleep(200);
    }
  }
}

export function endpointsFile(stateDir: string): string {
  return join(stateDir, 'endpoints.json');
}

export function readEndpoints(stateDir: string): Endpoints | undefined {
  try {
    return JSON.parse(readFileSync(endpointsFile(stateDir), 'utf8')) as Endpoints;
  } catch {
    return undefined;
  }
}

export function componentPids(stateDir: string): Array<{ name: string; pid: number; alive: boolean }> {
  const dir = join(stateDir, 'pids');
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith('.pid'))
    .sort()
    .map((f) => {
      const pid = Number(readFileSync(join(dir, f), 'utf8'));
      return { name: f.replace(/\.pid$/, ''), pid, alive: pidAlive(pid) };
    });
}

/** Running if every recorded component is alive (or stopped on purpose) and the endpoints were written. */
export function isRunning(stateDir: string): boolean {
  const pids = componentPids(stateDir);
  return (
    pids.length > 0 &&
    pids.every((p) => p.alive || isStopped(stateDir, p.name)) &&
    readEndpoints(stateDir) !== undefined
  );
}

export function envShPath(stateDir: string): string {
  return join(stateDir, 'env.sh');
}

/** What the controller's --allow-source-networks allows in the test environment (envVars, demo, bench). */
export const TESTENV_SOURCE_NETWORKS = '127.0.0.1/32';

export function envVars(e: Endpoints): Record<string, string> {
  return {
    STACKFLUX_TESTENV_DIR: e.stateDir,
    KUBECONFIG: e.kubeconfig,
    WORKLOAD_KUBECONFIG: e.workloadKubeconfig,
    WORKLOAD_CLUSTER_NAME: e.workloadClusterName,
    WORKLOAD_CLUSTER_NAMESPACE: e.workloadNamespace,
    GIT_SERVER_URL: e.gitServerUrl,
    GIT_SERVER_AUTH_URL: e.gitServerAuthUrl,
    GIT_SERVER_USER: e.gitServerUser,
    GIT_SERVER_PASSWORD: e.gitServerPassword,
    FLUX_SOURCE_CONTROLLER_STORAGE: e.sourceControllerStorage,
    FLUX_SOURCE_CONTROLLER_HEALTH: e.sourceControllerHealth,
    FLUX_KUSTOMIZE_CONTROLLER_HEALTH: e.kustomizeControllerHealth,
    CAPI_CRDS: e.capiCrds,
    ETCD_URL: e.etcdUrl,
    // Every server of the environment listens on 127.0.0.1, which the outbound policy refuses
    // unless allowed (sources/egress.ts); the rest of 127/8 stays refused, so tests of the refusal
    // put their "internal" servers on 127.0.0.2.
    STACKFLUX_ALLOW_SOURCE_NETWORKS: TESTENV_SOURCE_NETWORKS,
    ...(e.helmControllerHealth ? { FLUX_HELM_CONTROLLER_HEALTH: e.helmControllerHealth } : {}),
    ...(e.registry ? { STACKFLUX_TESTENV_REGISTRY: e.registry } : {}),
    ...(e.registryCa ? { STACKFLUX_TESTENV_REGISTRY_CA: e.registryCa } : {}),
    ...(e.binDir
      ? {
          TESTENV_BIN_DIR: e.binDir,
          FLUX_BIN: join(e.binDir, 'flux'),
          KUBECTL_BIN: join(e.binDir, 'kubectl'),
        }
      : {}),
  };
}

/** env.sh: the variables of envVars(), and the bin directory (flux, kubectl) first on PATH. */
export function envSh(e: Endpoints): string {
  const lines = Object.entries(envVars(e)).map(([k, v]) => `export ${k}='${v}'`);
  if (e.binDir) lines.push(`export PATH='${e.binDir}':"$PATH"`);
  return `${lines.join('\n')}\n`;
}

/** Starts every component; call down() first if a previous environment is half alive. */
export async function up(stateDir: string, log: Log): Promise<Endpoints> {
  const bin = buildBinaries(log);
  const paths = readPathsEnv(bin);
  for (const sub of ['logs', 'pids', 'pki', 'git', 'source-storage', 'registry'])
    mkdirSync(join(stateDir, sub), { recursive: true });
  const pki = join(stateDir, 'pki');
  makePki(pki);
  const token = randomBytes(24).toString('hex');

  log('starting etcd + kube-apiserver (management, workload)…');
  const [mgmtEtcd, workloadEtcd] = await Promise.all([
    startEtcd(stateDir, bin, 'etcd'),
    startEtcd(stateDir, bin, 'workload-etcd'),
  ]);
  const [mgmt, workload] = await Promise.all([
    startApiServer(stateDir, bin, 'kube-apiserver', mgmtEtcd, token),
    startApiServer(stateDir, bin, 'workload-kube-apiserver', workloadEtcd, token),
  ]);
  const kubeconfig = join(stateDir, 'kubeconfig');
  const workloadKubeconfig = join(stateDir, 'workload.kubeconfig');
  writeFileSync(kubeconfig, kubeconfigYaml('stackflux-testenv', mgmt), { mode: 0o600 });
  writeFileSync(workloadKubeconfig, kubeconfigYaml('workload', workload), { mode: 0o600 });

  log('starting kube-controller-manager…');
  const kcmPort = await freePort();
  const kcm = startProcess(stateDir, 'kube-controller-manager', join(bin, 'kube-controller-manager'), [
    `--kubeconfig=${kubeconfig}`,
    `--authentication-kubeconfig=${kubeconfig}`,
    `--authorization-kubeconfig=${kubeconfig}`,
    '--controllers=garbagecollector,namespace,serviceaccount,serviceaccount-token,clusterrole-aggregation',
    `--service-account-private-key-file=${join(pki, 'sa.key')}`,
    `--root-ca-file=${join(pki, 'ca.crt')}`,
    '--leader-elect=false',
    '--bind-address=127.0.0.1',
    `--secure-port=${kcmPort}`,
    `--cert-dir=${join(stateDir, 'kcm-certs')}`,
    '--concurrent-gc-syncs=5',
  ]);

  log('applying Flux and Cluster API CRDs…');
  // ExtensionConfig: `stackflux install --runtime-extension` registers the BeforeClusterUpgrade hook.
  const capiNames = new Set([
    'clusters.cluster.x-k8s.io',
    'clusterclasses.cluster.x-k8s.io',
    EXTENSION_CONFIG_CRD,
  ]);
  // helm-controller only where the bin directory has it (built since Flux 2.9.5's pins).
  const withHelm = paths.FLUX_HELM_CRDS !== undefined && existsSync(join(bin, 'helm-controller'));
  const crds = [
    ...readCrds(String(paths.FLUX_SOURCE_CRDS)),
    ...readCrds(String(paths.FLUX_KUSTOMIZE_CRDS)),
    ...(withHelm ? readCrds(String(paths.FLUX_HELM_CRDS)) : []),
    ...readCrds(String(paths.CAPI_CRDS), capiNames).map(storageVersionOnly),
  ];
  for (const crd of crds) await applyManifest(mgmt, crd);
  await waitEstablished(
    mgmt,
    crds.map((c) => (c.metadata as { name: string }).name),
  );
  await applyManifest(mgmt, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'flux-system' } });

  log(`starting Flux source-controller, kustomize-controller${withHelm ? ', helm-controller' : ''}…`);
  const [storagePort, scMetrics, scHealth, kcMetrics, kcHealth, hcMetrics, hcHealth] = await Promise.all([
    freePort(),
    freePort(),
    freePort(),
    freePort(),
    freePort(),
    freePort(),
    freePort(),
  ]);
  const fluxEnv = { KUBECONFIG: kubeconfig, RUNTIME_NAMESPACE: 'flux-system' };
  const sc = startProcess(
    stateDir,
    'source-controller',
    join(bin, 'source-controller'),
    [
      `--storage-path=${join(stateDir, 'source-storage')}`,
      `--storage-addr=127.0.0.1:${storagePort}`,
      `--storage-adv-addr=127.0.0.1:${storagePort}`,
      `--metrics-addr=127.0.0.1:${scMetrics}`,
      `--health-addr=127.0.0.1:${scHealth}`,
      '--log-level=info',
      '--concurrent=4',
      '--requeue-dependency=5s',
    ],
    fluxEnv,
  );
  const kc = startProcess(
    stateDir,
    'kustomize-controller',
    join(bin, 'kustomize-controller'),
    [
      `--metrics-addr=127.0.0.1:${kcMetrics}`,
      `--health-addr=127.0.0.1:${kcHealth}`,
      '--log-level=info',
      '--concurrent=8',
      '--requeue-dependency=5s',
    ],
    fluxEnv,
  );
  const hc = withHelm
    ? startProcess(
        stateDir,
        'helm-controller',
        join(bin, 'helm-controller'),
        [
          `--metrics-addr=127.0.0.1:${hcMetrics}`,
          `--health-addr=127.0.0.1:${hcHealth}`,
          '--log-level=info',
          '--concurrent=4',
          '--requeue-dependency=5s',
        ],
        fluxEnv,
      )
    : undefined;

  log('starting Git server (smart HTTP)…');
  const [gitPort, gitAuthPort] = [await freePort(), await freePort()];
  const gitRoot = join(stateDir, 'git');
  const git = startProcess(stateDir, 'gitserver', join(bin, 'gitserver'), [
    `--root=${gitRoot}`,
    `--listen=127.0.0.1:${gitPort}`,
  ]);
  const gitUser = 'stackflux';
  const gitPassword = randomBytes(12).toString('hex');
  const gitAuth = startProcess(stateDir, 'gitserver-auth', join(bin, 'gitserver'), [
    `--root=${gitRoot}`,
    `--listen=127.0.0.1:${gitAuthPort}`,
    `--user=${gitUser}`,
    `--password=${gitPassword}`,
  ]);

  // The registry serves the kube-apiserver's certificate (SAN 127.0.0.1, from the environment's CA).
  const registryAddr = `127.0.0.1:${await freePort()}`;
  const registryConfig = join(stateDir, 'registry.yml');
  const withRegistry = existsSync(join(bin, 'registry'));
  if (withRegistry) {
    log('starting OCI registry (Distribution)…');
    writeFileSync(
      registryConfig,
      registryConfigYaml({
        addr: registryAddr,
        storageDir: join(stateDir, 'registry'),
        tls: { certificate: join(pki, 'serving.crt'), key: join(pki, 'serving.key') },
        auth: { kind: 'none' },
      }),
    );
  }
  const registry = withRegistry
    ? startProcess(stateDir, 'registry', join(bin, 'registry'), ['serve', registryConfig], registryEnv)
    : undefined;
  const caPem = readFileSync(join(pki, 'ca.crt'), 'utf8');

  await Promise.all([
    waitFor(kcm, '/healthz', () => kcmHealthy(kcmPort)),
    ...(registry ? [waitFor(registry, '/v2/', () => registryAnswers(`https://${registryAddr}`, caPem))] : []),
    waitFor(sc, '/readyz', () => httpOk(`http://127.0.0.1:${scHealth}/readyz`)),
    waitFor(kc, '/readyz', () => httpOk(`http://127.0.0.1:${kcHealth}/readyz`)),
    ...(hc ? [waitFor(hc, '/readyz', () => httpOk(`http://127.0.0.1:${hcHealth}/readyz`))] : []),
    waitFor(git, '/healthz', () => httpOk(`http://127.0.0.1:${gitPort}/healthz`)),
    waitFor(gitAuth, '/healthz', () => httpOk(`http://127.0.0.1:${gitAuthPort}/healthz`)),
  ]);

  // The workload cluster's admin kubeconfig, stored the way Cluster API stores it.
  const workloadClusterName = 'workload';
  const workloadNamespace = 'default';
  await applyManifest(
    mgmt,
    workloadKubeconfigSecret(
      workloadNamespace,
      workloadClusterName,
      kubeconfigYaml(workloadClusterName, workload),
    ),
  );

  const endpoints: Endpoints = {
    stateDir,
    kubeconfig,
    workloadKubeconfig,
    workloadClusterName,
    workloadNamespace,
    gitServerUrl: `http://127.0.0.1:${gitPort}`,
    gitServerAuthUrl: `http://127.0.0.1:${gitAuthPort}`,
    gitServerUser: gitUser,
    gitServerPassword: gitPassword,
    sourceControllerStorage: `http://127.0.0.1:${storagePort}`,
    sourceControllerHealth: `http://127.0.0.1:${scHealth}`,
    kustomizeControllerHealth: `http://127.0.0.1:${kcHealth}`,
    ...(hc ? { helmControllerHealth: `http://127.0.0.1:${hcHealth}` } : {}),
    binDir: bin,
    capiCrds: String(paths.CAPI_CRDS),
    etcdUrl: mgmtEtcd,
    ...(registry ? { registry: registryAddr, registryCa: join(pki, 'ca.crt') } : {}),
  };
  writeFileSync(join(stateDir, 'versions.env'), readFileSync(join(bin, 'paths.env'), 'utf8'));
  writeFileSync(endpointsFile(stateDir), JSON.stringify(endpoints, null, 2));
  writeFileSync(envShPath(stateDir), envSh(endpoints));
  return endpoints;
}

/** kube-controller-manager serves /healthz with a self-signed certificate of its own. */
async function kcmHealthy(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const req = httpsRequest(
      `https://127.0.0.1:${port}/healthz`,
      { rejectUnauthorized: false, timeout: 2000 },
      (res) => {
        res.resume();
        resolve(res.statusCode === 200);
      },
    );
    req.on('error', () => resolve(false));
    req.end();
  });
}

export function workloadKubeconfigSecret(
  namespace: string,
  cluster: string,
  kubeconfig: string,
): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'cluster.x-k8s.io/secret',
    metadata: {
      name: `${cluster}-kubeconfig`,
      namespace,
      labels: { 'cluster.x-k8s.io/cluster-name': cluster },
    },
    data: { value: Buffer.from(kubeconfig).toString('base64') },
  };
}

/** Stops every recorded process (SIGTERM, then SIGKILL after a grace period) and forgets them. */
export async function down(stateDir: string, log: Log): Promise<void> {
  const procs = componentPids(stateDir);
  for (const p of procs) {
    if (!p.alive) continue;
    try {
      process.kill(-p.pid, 'SIGTERM');
    } catch {
      try {
        process.kill(p.pid, 'SIGTERM');
      } catch {
        // already gone
      }
    }
  }
  const deadline = Date.now() + 5_000;
  while (Date.now() < deadline && procs.some((p) => pidAlive(p.pid))) await sleep(100);
  for (const p of procs) {
    if (pidAlive(p.pid)) {
      log(`${p.name} (pid ${p.pid}) still running 5 s after SIGTERM; sending SIGKILL`);
      try {
        process.kill(-p.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
  while (procs.some((p) => pidAlive(p.pid))) await sleep(50);
  rmSync(join(stateDir, 'pids'), { recursive: true, force: true });
  rmSync(endpointsFile(stateDir), { force: true });
  rmSync(envShPath(stateDir), { force: true });
  log(`stopped ${procs.filter((p) => p.alive).length} processes`);
}

/** Creates a bare repository on the Git server if missing; returns its clone URL. */
export async function createRepo(e: Endpoints, name: string): Promise<string> {
  const res = await fetch(`${e.gitServerUrl}/-/repos/${encodeURIComponent(name)}`, { method: 'POST' });
  if (!res.ok) throw new Error(`creating repo ${name}: HTTP ${res.status} ${await res.text()}`);
  return `${e.gitServerUrl}/${name.replace(/\.git$/, '')}.git`;
}
