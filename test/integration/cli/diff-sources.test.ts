// `stackflux diff` reads release sources as `stackflux run` does (one dispatch by source kind,
// controller/sources/releasetree.ts), against the real API server: an OCI source in a private
// registry (TLS, htpasswd; the credentials from the ClusterStack's labelled Secret) is listed with
// the manifest digest as the release's identity and its artifact read; a GitHub source is listed
// through the Releases API of --github-api-url (a local GitHub, test/support/githubfake.ts) and
// read from its csctl release assets, its release pointing at that GitHub's clone URL; neither is
// listed with `git ls-remote`. The exported snapshot shows what diff read.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { LABEL_SOURCE_CREDENTIALS } from '../../../controller/api/meta.ts';
import { main } from '../../../controller/cli/main.ts';
import { readSnapshot, type SourceData } from '../../../controller/offline/snapshot.ts';
import { releaseTreeFromCsctlAssets } from '../../../controller/releases/csctl/assets.ts';
import { githubCloneUrl } from '../../../controller/releases/githuburl.ts';
import { KubeClient, type KubeObject } from '../../../controller/runtime/client.ts';
import { isGitHubAssetsIdentity } from '../../../controller/sources/githubassets.ts';
import { installCrds } from '../../../hack/lib/crds.ts';
import { captureIO } from '../../support/cli.ts';
import { packageCsctlRelease } from '../../support/csctl-assets.ts';
import { kubeConfigFrom, testEnv, uniqueName } from '../../support/env.ts';
import { fakeAssets, GitHubFake } from '../../support/githubfake.ts';
import { pushCsctlAssets, startRegistry, type TestRegistry, trustCa } from '../../support/registry.ts';

const STACK = join(import.meta.dirname, '..', '..', '..', 'stacks', 'docker-csoferrol-1-30');
const TAG = 'docker-csoferrol-1-30-v1';
const USER = 'puller';
const PASSWORD = 'diff-sources-registry-password';
const TOKEN = 'ghp_diffSourcesToken123';
const REPO = { owner: 'scs', repo: 'stacks' };

/** The ClusterStack `stack` over `source`, with a labelled Secret `creds` of `data`. */
async function stackWithSecret(
  client: KubeClient,
  namespace: string,
  source: Record<string, unknown>,
  data: Record<string, string>,
): Promise<void> {
  await client.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } });
  await client.create({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'creds', namespace, labels: { [LABEL_SOURCE_CREDENTIALS]: 'true' } },
    stringData: data,
  } as KubeObject);
  await client.apply(
    {
      apiVersion: 'stackflux.io/v1alpha1',
      kind: 'ClusterStack',
      metadata: { name: 'stack', namespace },
      spec: {
        noProvider: true,
        provider: 'docker',
        name: 'csoferrol',
        kubernetesVersion: '1.30',
        source,
      },
    } as KubeObject,
    { force: true, fieldManager: 'diff-sources-test' },
  );
}

describe('stackflux diff reads OCI and GitHub-assets sources as run does', () => {
  let client: KubeClient;
  let registry: TestRegistry;
  let github: GitHubFake;
  const work = mkdtempSync(join(tmpdir(), 'sf-diff-sources-'));
  const packaged = packageCsctlRelease(STACK, 'v1');
  const ociNamespace = uniqueName('sf-diff-oci');
  const githubNamespace = uniqueName('sf-diff-gh');

  before(async () => {
    client = new KubeClient(kubeConfigFrom(testEnv().kubeconfig), { qps: 200, burst: 200 });
    await installCrds(client);
    registry = await startRegistry({ auth: { kind: 'htpasswd', user: USER, password: PASSWORD } });
    trustCa(registry.caPem ?? '');
    github = await GitHubFake.start();
    github.token = TOKEN;
    github.releases = [{ tag: TAG, commit: 'a'.repeat(40), assets: fakeAssets(packaged) }];
  });
  after(async () => {
    for (const ns of [ociNamespace, githubNamespace])
      await client.delete('v1', 'Namespace', ns).catch(() => undefined);
    client.close();
    await registry.stop();
    await github.stop();
    rmSync(work, { recursive: true, force: true });
  });

  /** Runs diff over one namespace and returns its output and the one source of its exported snapshot. */
  async function diff(namespace: string, extra: string[]): Promise<{ out: string; source: SourceData }> {
    const c = captureIO();
    const snap = join(work, `snap-${namespace}`);
    const rc = await main(
      [
        'diff',
        '-n',
        namespace,
        // The registry and the GitHub fake are on loopback, which sources may reach only when allowed.
        '--allow-source-networks=127.0.0.1/32',
        '--kubeconfig',
        testEnv().kubeconfig,
        '--cache-dir',
        join(work, `cache-${namespace}`),
        '--now',
        '2026-01-02T12:00:00Z',
        '--export-snapshot',
        snap,
        ...extra,
      ],
      c.io,
    );
    assert.equal(rc, 1, c.err());
    const sources = readSnapshot(snap).sources;
    assert.equal(sources.length, 1, JSON.stringify(sources.map((s) => s.url)));
    const [source] = sources;
    assert.ok(source !== undefined);
    return { out: c.out(), source };
  }

  it('an OCI source: listed by digest with the Secret’s credentials, the artifact read', async () => {
    const pushed = await pushCsctlAssets(registry, 'scs/stacks', TAG, packaged, {
      user: USER,
      password: PASSWORD,
    });
    const url = `oci://${registry.host}/scs/stacks`;
    await stackWithSecret(
      client,
      ociNamespace,
      { oci: { url, secretRef: { name: 'creds' } } },
      {
        username: USER,
        password: PASSWORD,
      },
    );

    const { out, source } = await diff(ociNamespace, []);
    assert.equal(source.url, url);
    assert.ok(source.listing.ok, JSON.stringify(source.listing));
    assert.deepEqual(
      source.listing.tags.map((t) => [t.tag, t.commit]),
      [[TAG, pushed.digest]],
    );
    assert.deepEqual(
      [...(source.trees.get(TAG) ?? new Map())].map(([p]) => p).sort(),
      [...releaseTreeFromCsctlAssets(packaged)].map(([p]) => p).sort(),
      'the tree read from the artifact',
    );
    assert.match(
      out,
      new RegExp(`\\+\\+\\+ render/namespaces/${ociNamespace}/stackflux.io/clusterstackreleases/${TAG}\\n`),
    );
    assert.ok(!out.includes(PASSWORD), 'no credential in the diff');
  });

  it('a GitHub source: listed through --github-api-url, read from its csctl assets', async () => {
    await stackWithSecret(
      client,
      githubNamespace,
      { github: { ...REPO, secretRef: { name: 'creds' } } },
      {
        token: TOKEN,
      },
    );
    const before = github.log.length;
    const { out, source } = await diff(githubNamespace, ['--github-api-url', github.url]);
    const cloneUrl = githubCloneUrl(REPO.owner, REPO.repo, github.url);
    assert.equal(source.url, cloneUrl);
    assert.ok(source.listing.ok, JSON.stringify(source.listing));
    const [listed] = source.listing.tags;
    assert.equal(listed?.tag, TAG);
    assert.ok(isGitHubAssetsIdentity(listed?.commit ?? ''), `identity ${listed?.commit}`);
    assert.deepEqual(
      [...(source.trees.get(TAG) ?? new Map())].map(([p]) => p).sort(),
      [...releaseTreeFromCsctlAssets(packaged)].map(([p]) => p).sort(),
      'the tree read from the release assets',
    );
    const requests = github.log.slice(before);
    assert.ok(
      requests.some((r) => r.path.startsWith(`/repos/${REPO.owner}/${REPO.repo}/releases`)),
      JSON.stringify(requests.map((r) => r.path)),
    );
    assert.ok(
      requests.every((r) => r.authorization === `Bearer ${TOKEN}` || r.authorization === `token ${TOKEN}`),
    );
    // The release as the controller started with the same flag would create it.
    assert.match(out, new RegExp(`\\+\\s+url: ${cloneUrl.replace(/[.]/g, '\\.')}\\n`));

    // The exported snapshot renders offline with the same flag (the source is found by that
    // GitHub's clone URL); without it the ClusterStack names github.com's, which it does not hold.
    const release = join('apply', 'namespaces', githubNamespace, 'stackflux.io', 'clusterstackreleases');
    const renderTo = async (name: string, flags: string[]): Promise<string | undefined> => {
      const r = captureIO();
      const to = join(work, name);
      const args = ['render', '--input-dir', join(work, `snap-${githubNamespace}`), '--output-dir', to];
      assert.equal(await main([...args, '--now', '2026-01-02T12:00:00Z', ...flags], r.io), 0, r.err());
      const body = join(to, release, `${TAG}.body.yaml`);
      return existsSync(body) ? readFileSync(body, 'utf8') : undefined;
    };
    assert.match(
      (await renderTo('rendered', ['--github-api-url', github.url])) ?? '',
      new RegExp(`url: ${cloneUrl}`),
    );
    assert.equal(await renderTo('rendered-github-com', []), undefined);
  });
});
