// Issue 11 fault matrix, credentials: one `stackflux run` that uses every kind of secret —
// a release repository behind basic auth (Secret username/password) and one with a wrong
// password, the fleet repository behind basic auth (--fleet-secret), a GitHub token and a wrong
// one (the local GitHub fake answers 401), a Cluster kubeconfig Secret, and the controller's own
// kubeconfig; issue 24's release sources: two private OCI registries (htpasswd with a
// username/password Secret and a wrong one; Docker token auth with a kubernetes.io/dockerconfigjson
// Secret, whose release is read blob by blob, and a `token` Secret the registry refuses) and a
// csctl release read from GitHub release assets with the token — then everything the run produced is searched for the secret values, raw and in
// base64 (alone and as a basic-auth `user:password`): the controller's stdout/stderr, every Event
// of the namespace, the whole of every stackflux object and of every Flux object it emitted, and
// every commit of the fleet repository (messages and contents).
// (No Cluster API controllers run here; the Cluster's kubeconfig points at a closed port, so Flux
// applies nothing anywhere and reports the failure in the Kustomizations' status.)
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ClusterStack } from '../../controller/api/clusterstack.ts';
import { API_VERSION, LABEL_ALLOW_PLAIN_HTTP, LABEL_SOURCE_CREDENTIALS } from '../../controller/api/meta.ts';
import { KubeClient, type KubeObject, loadKubeConfig } from '../../controller/runtime/client.ts';
import { createRepo, type Endpoints, workloadKubeconfigSecret } from '../../hack/lib/testenv.ts';
import { csoferrolClusterStack, csoferrolTag, packageCsoferrolRelease } from '../support/csctl.ts';
import {
  addonCluster,
  ControllerProcess,
  cond,
  createTestNamespace,
  e2eEnv,
  ferrolClusterStack,
  freePort,
  git,
  initRepo,
  releaseAddonNamespace,
  releaseFerrol130,
  releaseReaders,
  waitFor,
} from '../support/e2e.ts';
import { uniqueName } from '../support/env.ts';
import { fakeAssets, GitHubFake } from '../support/githubfake.ts';
import { pushCsctlRelease, startRegistry, type TestRegistry } from '../support/registry.ts';

const env = e2eEnv();
const client = new KubeClient(loadKubeConfig({ kubeconfig: env.kubeconfig }));
const ns = uniqueName('credentials');
const work = mkdtempSync(join(tmpdir(), 'stackflux-credentials-'));
const repoDir = join(work, 'release');
const V1 = 'docker-ferrol-1-30-v1';
const { releaseReady } = releaseReaders(client, ns);
const secretValue = (prefix: string) => `${prefix}${randomBytes(12).toString('hex')}`;
const WRONG_PASSWORD = secretValue('wrongpw-');
const GITHUB_TOKEN = secretValue('ghp_');
const BAD_GITHUB_TOKEN = secretValue('ghp_bad');
const KUBE_TOKEN = secretValue('kubetoken-');
const OCI_USER = 'stacker';
const OCI_PASSWORD = secretValue('ocipw-');
const OCI_WRONG_PASSWORD = secretValue('ociwrong-');
const OCI_TOKEN_PASSWORD = secretValue('ocitokenpw-');
const OCI_REGISTRY_TOKEN = secretValue('ociregtoken-');

let controller: ControllerProcess | undefined;
let gh: GitHubFake;
let fleetRepo = '';
let basicRegistry: TestRegistry;
let tokenRegistry: TestRegistry;

type Obj = KubeObject & {
  status?: { conditions?: Array<{ type: string; status: string; reason?: string; message?: string }> };
};

async function step(fn: () => Promise<void>): Promise<void> {
  if (controller === undefined) throw new Error('the controller did not start');
  await controller.step(fn);
}

/** The Secret, labelled to allow its credentials over plain http (issue 31 F12). */
const plainHttp = (s: KubeObject): KubeObject => ({
  ...s,
  metadata: { ...s.metadata, labels: { ...s.metadata.labels, [LABEL_ALLOW_PLAIN_HTTP]: 'true' } },
});

/** A Secret; `source`: labelled for use as a ClusterStack's secretRef (issue 22). */
const secret = (name: string, data: Record<string, string>, source = false): KubeObject => ({
  apiVersion: 'v1',
  kind: 'Secret',
  metadata: { name, namespace: ns, ...(source ? { labels: { [LABEL_SOURCE_CREDENTIALS]: 'true' } } : {}) },
  stringData: data,
});

async function stackCondition(
  name: string,
  type: string,
): Promise<{ status: string; reason?: string } | undefined> {
  return cond(await client.get<Obj>(API_VERSION, 'ClusterStack', name, ns), type);
}

/** A kubeconfig for a cluster at a closed port, authenticating with a bearer token. */
function fakeKubeconfig(port: number): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    `- name: c1\n  cluster:\n    server: https://127.0.0.1:${port}\n    insecure-skip-tls-verify: true`,
    'users:',
    `- name: c1\n  user:\n    token: ${KUBE_TOKEN}`,
    'contexts:',
    '- name: c1\n  context:\n    cluster: c1\n    user: c1',
    'current-context: c1',
    '',
  ].join('\n');
}

/** Every secret value of the run, with the forms it could leak in. */
function secretForms(): Map<string, string> {
  const forms = new Map<string, string>();
  const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
  const add = (name: string, value: string) => {
    forms.set(name, value);
    forms.set(`${name} (base64)`, b64(value));
  };
  add('git password', env.gitServerPassword);
  add('wrong git password', WRONG_PASSWORD);
  add('GitHub token', GITHUB_TOKEN);
  add('wrong GitHub token', BAD_GITHUB_TOKEN);
  add('Cluster kubeconfig token', KUBE_TOKEN);
  add('OCI password', OCI_PASSWORD);
  add('wrong OCI password', OCI_WRONG_PASSWORD);
  add('OCI token registry password', OCI_TOKEN_PASSWORD);
  add('OCI registry token', OCI_REGISTRY_TOKEN);
  forms.set('OCI basic auth', b64(`${OCI_USER}:${OCI_PASSWORD}`));
  forms.set('OCI basic auth (wrong password)', b64(`${OCI_USER}:${OCI_WRONG_PASSWORD}`));
  forms.set('OCI basic auth (token registry)', b64(`${OCI_USER}:${OCI_TOKEN_PASSWORD}`));
  forms.set('dockerconfigjson', b64(dockerConfigJson()));
  forms.set('basic auth', b64(`${env.gitServerUser}:${env.gitServerPassword}`));
  forms.set('basic auth (wrong password)', b64(`${env.gitServerUser}:${WRONG_PASSWORD}`));
  forms.set('basic auth (GitHub token)', b64(`x-access-token:${GITHUB_TOKEN}`));
  // The controller's own kubeconfig: its client key and any token.
  const own = readFileSync(env.kubeconfig, 'utf8');
  for (const m of own.matchAll(/^\s*(client-key-data|token):\s*(\S+)\s*$/gm)) {
    const value = m[2] ?? '';
    if (value.length >= 16) {
      forms.set(`controller kubeconfig ${m[1]}`, value);
      if (m[1] === 'client-key-data')
        forms.set(
          'controller kubeconfig client key (PEM body)',
          Buffer.from(value, 'base64').toString('utf8').split('\n')[1] ?? value,
        );
    }
  }
  return forms;
}

/** The docker login file of the token registry: its `auth` is base64 user:password. */
function dockerConfigJson(): string {
  const auth = Buffer.from(`${OCI_USER}:${OCI_TOKEN_PASSWORD}`).toString('base64');
  return JSON.stringify({ auths: { [tokenRegistry.host]: { auth } } });
}

const csctlAssets = (version: string) => packageCsoferrolRelease(work, version);

async function pushTo(registry: TestRegistry, password: string, version: string): Promise<void> {
  const dir = join(work, `oci-${registry.host.replace(':', '-')}`);
  mkdirSync(dir, { recursive: true });
  for (const [name, bytes] of csctlAssets(version)) writeFileSync(join(dir, name), bytes);
  await pushCsctlRelease({
    registry: registry.host,
    repository: 'scs/csoferrol',
    tag: csoferrolTag(version),
    dir,
    creds: { user: OCI_USER, password },
    plainHttp: true,
  });
}

/** A ClusterStack of the csctl example stack named `name`, at `versions` of `source`. */
function csctlStack(
  name: string,
  versions: string[],
  source: ClusterStack['spec']['source'],
): ClusterStack & KubeObject {
  const cs = csoferrolClusterStack(ns, '', versions, { interval: '3s', source });
  return { ...cs, metadata: { name, namespace: ns } };
}

/** Everything the run produced, as named texts. */
async function everythingProduced(): Promise<Map<string, string>> {
  const texts = new Map<string, string>();
  texts.set('controller output', (controller?.logLines ?? []).join('\n'));
  const events = await client.list('v1', 'Event', { namespace: ns });
  texts.set('Events', JSON.stringify(events.items));
  const kinds: Array<[string, string]> = [
    [API_VERSION, 'ClusterStack'],
    [API_VERSION, 'ClusterStackRelease'],
    [API_VERSION, 'ClusterAddon'],
    ['source.toolkit.fluxcd.io/v1', 'GitRepository'],
    ['kustomize.toolkit.fluxcd.io/v1', 'Kustomization'],
    ['cluster.x-k8s.io/v1beta2', 'ClusterClass'],
  ];
  for (const [apiVersion, kind] of kinds) {
    const list = await client.list(apiVersion, kind, { namespace: ns });
    texts.set(`${kind} objects`, JSON.stringify(list.items));
  }
  const clone = join(work, 'fleet-clone');
  git(work, 'clone', '-q', '--mirror', fleetRepo, clone);
  texts.set('fleet commits', git(clone, 'log', '--all', '-p', '--format=fuller'));
  return texts;
}

describe('credentials appear in no log line, Event, status, Flux object or fleet commit', {
  timeout: 15 * 60_000,
}, () => {
  before(async () => {
    await createTestNamespace(client, ns);
    const repoUrl = await createRepo(env as Endpoints, `${ns}-release`);
    await createRepo(env as Endpoints, `${ns}-fleet`);
    fleetRepo = `${env.gitServerUrl}/${ns}-fleet.git`;
    initRepo(repoDir);
    releaseFerrol130(repoDir, repoUrl, 'v1');
    gh = await GitHubFake.start();
    gh.token = GITHUB_TOKEN;
    gh.releases = [
      { tag: 'docker-ghstack-1-30-v1', commit: 'a'.repeat(40) },
      // Read from its assets with the token (issue 24).
      { tag: csoferrolTag('v2'), commit: 'b'.repeat(40), assets: fakeAssets(csctlAssets('v2')) },
    ];
    basicRegistry = await startRegistry({
      auth: { kind: 'htpasswd', user: OCI_USER, password: OCI_PASSWORD },
      tls: false,
    });
    tokenRegistry = await startRegistry({
      auth: { kind: 'token', user: OCI_USER, password: OCI_TOKEN_PASSWORD },
      tls: false,
    });
    await pushTo(basicRegistry, OCI_PASSWORD, 'v1');
    await pushTo(tokenRegistry, OCI_TOKEN_PASSWORD, 'v1');
    for (const s of [
      secret('git-auth', { username: env.gitServerUser, password: env.gitServerPassword }, true),
      secret('git-wrong', { username: env.gitServerUser, password: WRONG_PASSWORD }, true),
      secret('fleet-auth', { username: env.gitServerUser, password: env.gitServerPassword }),
      secret('github-token', { token: GITHUB_TOKEN }, true),
      secret('github-bad', { token: BAD_GITHUB_TOKEN }, true),
      // The test registries are plain http: their Secrets opt in to it (issue 31 F12).
      plainHttp(secret('oci-basic', { username: OCI_USER, password: OCI_PASSWORD }, true)),
      plainHttp(secret('oci-wrong', { username: OCI_USER, password: OCI_WRONG_PASSWORD }, true)),
      plainHttp(secret('oci-regtoken', { token: OCI_REGISTRY_TOKEN }, true)),
      // The right credentials, but the Secret does not allow plain http: they are not sent.
      secret('oci-no-plain', { username: OCI_USER, password: OCI_PASSWORD }, true),
    ])
      await client.create(s);
    await client.create({
      apiVersion: 'v1',
      kind: 'Secret',
      type: 'kubernetes.io/dockerconfigjson',
      metadata: {
        name: 'oci-docker',
        namespace: ns,
        labels: { [LABEL_SOURCE_CREDENTIALS]: 'true', [LABEL_ALLOW_PLAIN_HTTP]: 'true' },
      },
      stringData: { '.dockerconfigjson': dockerConfigJson() },
    } as KubeObject);
    controller = await ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: ns,
      cacheDir: join(work, 'cache'),
      extraArgs: [
        `--fleet-url=${env.gitServerAuthUrl}/${ns}-fleet.git`,
        `--fleet-secret=${ns}/fleet-auth`,
        '--fleet-batch-window=1s',
        `--github-api-url=${gh.url}`,
      ],
    });
    const authRepo = `${env.gitServerAuthUrl}/${ns}-release.git`;
    const stacks = [
      ferrolClusterStack(ns, 'authed', {
        autoSubscribe: false,
        versions: ['v1'],
        interval: '3s',
        source: { git: { url: authRepo, secretRef: { name: 'git-auth' } }, path: 'ferrol-1-30' },
      }),
      ferrolClusterStack(ns, 'wrongpw', {
        name: 'wrongpw',
        interval: '3s',
        source: { git: { url: authRepo, secretRef: { name: 'git-wrong' } }, path: 'ferrol-1-30' },
      }),
      ferrolClusterStack(ns, 'gh', {
        name: 'ghstack',
        interval: '3s',
        source: { github: { owner: 'acme', repo: 'stacks', secretRef: { name: 'github-token' } } },
      }),
      ferrolClusterStack(ns, 'gh-bad', {
        name: 'ghbad',
        interval: '3s',
        source: { github: { owner: 'acme', repo: 'stacks', secretRef: { name: 'github-bad' } } },
      }),
    ];
    const oci = (registry: TestRegistry, secretName: string) => ({
      oci: { url: `oci://${registry.host}/scs/csoferrol`, secretRef: { name: secretName }, insecure: true },
    });
    stacks.push(
      csctlStack('oci-basic', [], oci(basicRegistry, 'oci-basic')),
      csctlStack('oci-wrong', [], oci(basicRegistry, 'oci-wrong')),
      csctlStack('oci-regtoken', [], oci(tokenRegistry, 'oci-regtoken')),
      csctlStack('oci-no-plain', [], oci(basicRegistry, 'oci-no-plain')),
      // The one OCI stack with a release: v1 read blob by blob with a token from the realm.
      csctlStack('oci-docker', ['v1'], oci(tokenRegistry, 'oci-docker')),
      // v2 of the same stack, from its GitHub release assets.
      csctlStack('gh-assets', ['v2'], {
        github: { owner: 'acme', repo: 'stacks', secretRef: { name: 'github-token' } },
      }),
    );
    for (const s of stacks) await client.create(s);
    const closed = await freePort();
    await client.create(workloadKubeconfigSecret(ns, 'c1', fakeKubeconfig(closed)) as KubeObject);
    await step(async () => {
      await waitFor('v1 Ready (read with the Secret)', () => releaseReady(V1));
      await client.create(
        addonCluster(ns, 'c1', { className: V1, podCidr: '10.20.0.0/16', version: 'v1.30.4' }),
      );
    });
  });

  after(async () => {
    await controller?.stop();
    await gh?.stop();
    await basicRegistry?.stop();
    await tokenRegistry?.stop();
    await releaseAddonNamespace(client, ns);
    client.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('1. the run used every credential and met its failures', () =>
    step(async () => {
      await waitFor('wrong password: AuthenticationFailed', async () =>
        (await stackCondition('wrongpw', 'SourceReady'))?.reason === 'AuthenticationFailed'
          ? true
          : undefined,
      );
      await waitFor('wrong GitHub token: AuthenticationFailed', async () =>
        (await stackCondition('gh-bad', 'SourceReady'))?.reason === 'AuthenticationFailed' ? true : undefined,
      );
      await waitFor('the GitHub token lists', async () =>
        (await stackCondition('gh', 'SourceReady'))?.status === 'True' ? true : undefined,
      );
      assert.ok(
        gh.log.some((r) => r.authorization.includes(GITHUB_TOKEN) && r.status === 200),
        'the token was sent to the GitHub API',
      );
      await waitFor('the basic-auth registry lists', async () =>
        (await stackCondition('oci-basic', 'SourceReady'))?.status === 'True' ? true : undefined,
      );
      await waitFor('the wrong registry password: AuthenticationFailed', async () =>
        (await stackCondition('oci-wrong', 'SourceReady'))?.reason === 'AuthenticationFailed'
          ? true
          : undefined,
      );
      await waitFor('the refused registry token: AuthenticationFailed', async () =>
        (await stackCondition('oci-regtoken', 'SourceReady'))?.reason === 'AuthenticationFailed'
          ? true
          : undefined,
      );
      const noPlain = await waitFor(
        'a Secret without the plain-http opt-in: PlainHttpNotAllowed',
        async () => {
          const c = (
            await client.get<Obj>(API_VERSION, 'ClusterStack', 'oci-no-plain', ns)
          )?.status?.conditions?.find((x) => x.type === 'SourceReady');
          return c?.reason === 'PlainHttpNotAllowed' ? c : undefined;
        },
      );
      assert.match(
        noPlain.message ?? '',
        new RegExp(`Secret ${ns}/oci-no-plain is not labelled ${LABEL_ALLOW_PLAIN_HTTP}: "true"`),
      );
      const pinned = async (version: string, pattern: RegExp) =>
        waitFor(`${csoferrolTag(version)} read and pinned`, async () => {
          const r = await client.get<KubeObject & { status?: { commit?: string } }>(
            API_VERSION,
            'ClusterStackRelease',
            csoferrolTag(version),
            ns,
          );
          return pattern.test(r?.status?.commit ?? '') ? true : undefined;
        });
      await pinned('v1', /^sha256:[0-9a-f]{64}$/);
      assert.ok(
        tokenRegistry.tokenServer?.requests.some((r) => r.user === OCI_USER && r.status === 200),
        'the dockerconfigjson credentials got a token at the realm',
      );
      await pinned('v2', /^github-assets:sha256:[0-9a-f]{64}$/);
      assert.ok(
        gh.log.some((r) => r.path.includes('/releases/assets/') && r.authorization.includes(GITHUB_TOKEN)),
        'the release assets were read with the token',
      );
      await waitFor('the fleet commit pushed with the fleet Secret', async () => {
        const a = await client.get<Obj & { status?: { fleetCommit?: string } }>(
          API_VERSION,
          'ClusterAddon',
          'c1',
          ns,
        );
        return a?.status?.fleetCommit;
      });
      await waitFor('Flux tried the Cluster kubeconfig (a Kustomization reports the failure)', async () => {
        const ks = await client.list<Obj>('kustomize.toolkit.fluxcd.io/v1', 'Kustomization', {
          namespace: ns,
          labelSelector: 'stackflux.io/cluster=c1',
        });
        return ks.items.some((k) => cond(k, 'Ready')?.status === 'False') ? true : undefined;
      });
    }));

  it('2. no secret value, raw or base64, in anything the run produced', () =>
    step(async () => {
      const texts = await everythingProduced();
      assert.ok((texts.get('controller output') ?? '').length > 0);
      // The search finds a secret where there is one: the Secrets themselves (not searched below).
      const forms = secretForms();
      for (const [name, key] of [
        ['git-auth', 'git password (base64)'],
        ['github-token', 'GitHub token (base64)'],
        ['c1-kubeconfig', 'Cluster kubeconfig token'],
        ['oci-basic', 'OCI password (base64)'],
        ['oci-docker', 'dockerconfigjson'],
      ] as const) {
        const obj = await client.get<KubeObject & { data?: Record<string, string> }>(
          'v1',
          'Secret',
          name,
          ns,
        );
        const text = `${JSON.stringify(obj)}\n${Object.values(obj?.data ?? {})
          .map((v) => Buffer.from(v, 'base64').toString('utf8'))
          .join('\n')}`;
        assert.ok(
          text.includes(forms.get(key) ?? '\0'),
          `the search would find the ${key} in Secret ${name}`,
        );
      }
      const leaks: string[] = [];
      for (const [secretName, value] of forms) {
        for (const [where, text] of texts) if (text.includes(value)) leaks.push(`${secretName} in ${where}`);
      }
      assert.deepEqual(leaks, []);
    }));
});
