// Issue 24 item 2 end to end: one csctl release (stacks/docker-csoferrol-1-30, its ClusterClass
// edited to the v1beta2 the test environment serves) published as a Git tag and as GitHub release
// assets (packaged as `csctl create` does, served by a local server speaking the GitHub API, the
// downloads redirected to a second "storage" origin). `stackflux run --github-api-url=<fake>
// --fleet-url` reads the first from Git and the second from its assets; both releases become Ready
// and their fleet branches hold the identical rendered ClusterClass, which real Flux applies. The
// token reaches the API only, never the storage host. Then an asset is replaced on the release:
// the release reports TagMoved and keeps what was validated.
import assert from 'node:assert/strict';
import { cpSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ClusterStackRelease } from '../../controller/api/clusterstackrelease.ts';
import { API_VERSION, LABEL_SOURCE_CREDENTIALS } from '../../controller/api/meta.ts';
import type { KubeObject } from '../../controller/runtime/client.ts';
import { createRepo, type Endpoints } from '../../hack/lib/testenv.ts';
import {
  csoferrolClusterStack,
  cutCsctlRelease,
  servedClusterClass,
  csoferrolTag as tag,
} from '../support/csctl.ts';
import { packageCsctlRelease } from '../support/csctl-assets.ts';
import {
  CAPI,
  ControllerProcess,
  cond,
  createTestNamespace,
  deleteTestNamespace,
  e2eSuite,
  fleetBranchFiles,
  gone,
  initRepo,
  installFixtureCrds,
  push,
  releaseControllerHolds,
} from '../support/e2e.ts';
import { eventually } from '../support/env.ts';
import { fakeAssets, GitHubFake } from '../support/githubfake.ts';

const { env, client, ns, work, repoDir } = e2eSuite('csctl-gh-assets');
type CSKR = ClusterStackRelease & KubeObject;
const TOKEN = 'ghp_assetsE2eToken0123456789';
const ROOT = join(import.meta.dirname, '..', '..');

let controller: ControllerProcess | undefined;
let gh: GitHubFake;
let fleetUrl = '';
let repoUrl = '';
const release = () => client.get<CSKR>(API_VERSION, 'ClusterStackRelease', tag('v1'), ns);

/** The files of the release's fleet branch at its tip. */
const fleetFiles = (name: string): Map<string, string> =>
  fleetBranchFiles(fleetUrl, `stackflux/_releases/${ns}/${tag('v1')}`, join(work, `fleet-${name}`));

async function readyRelease(what: string): Promise<CSKR> {
  return eventually(
    `${tag('v1')} Ready (${what})`,
    async () => {
      const r = await release();
      return cond(r, 'Ready')?.status === 'True' ? r : undefined;
    },
    { timeoutMs: 300_000 },
  );
}

describe('a csctl release as GitHub release assets: read from its assets, identical to the Git tag', {
  timeout: 15 * 60_000,
}, () => {
  before(async () => {
    await createTestNamespace(client, ns);
    await installFixtureCrds(client, 'capi-template-crds.yaml');
    repoUrl = await createRepo(env as Endpoints, `${ns}-release`);
    fleetUrl = await createRepo(env as Endpoints, `${ns}-fleet`);
    initRepo(repoDir);
    cutCsctlRelease(repoDir, 'docker-csoferrol-1-30', 'v1', servedClusterClass);
    push(repoDir, repoUrl, tag('v1'));

    const stackCopy = join(work, 'stack-v1');
    cpSync(join(ROOT, 'stacks', 'docker-csoferrol-1-30'), stackCopy, { recursive: true });
    servedClusterClass(stackCopy);
    gh = await GitHubFake.start();
    gh.token = TOKEN;
    gh.releases = [
      { tag: tag('v1'), commit: '0'.repeat(40), assets: fakeAssets(packageCsctlRelease(stackCopy, 'v1')) },
    ];
    await client.create({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'github-token', namespace: ns, labels: { [LABEL_SOURCE_CREDENTIALS]: 'true' } },
      stringData: { token: TOKEN },
    });
    controller = await ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: ns,
      cacheDir: join(work, 'cache'),
      extraArgs: [`--fleet-url=${fleetUrl}`, `--github-api-url=${gh.url}`],
    });
  });

  after(async () => {
    await controller?.stop();
    await gh?.stop();
    await releaseControllerHolds(client, ns);
    await deleteTestNamespace(client, ns);
    client.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('the Git tag and the GitHub assets give the same rendered ClusterClass, applied by Flux', async () => {
    await controller?.step(async () => {
      await client.create(csoferrolClusterStack(ns, repoUrl, ['v1']));
      await readyRelease('from the Git tag');
      const fromGit = fleetFiles('git');
      assert.ok(
        [...fromGit.keys()].some((p) => p.includes('clusterclass')),
        [...fromGit.keys()].join(', '),
      );

      await client.delete(API_VERSION, 'ClusterStack', 'csoferrol', ns);
      await gone(`release ${tag('v1')}`, release, 180_000);
      await gone(
        'ClusterStack csoferrol',
        () => client.get(API_VERSION, 'ClusterStack', 'csoferrol', ns),
        180_000,
      );

      const storageBefore = gh.storageLog.length;
      await client.create(
        csoferrolClusterStack(ns, repoUrl, ['v1'], {
          source: { github: { owner: 'scs', repo: 'cluster-stacks', secretRef: { name: 'github-token' } } },
        }),
      );
      const ready = await readyRelease('from the GitHub release assets');
      assert.match(ready.status?.commit ?? '', /^github-assets:sha256:[0-9a-f]{64}$/);
      assert.equal(
        ready.spec.source.url,
        `${gh.url}/scs/cluster-stacks.git`,
        'the clone URL follows the API host',
      );
      const fromAssets = fleetFiles('assets');
      assert.deepEqual([...fromAssets.keys()], [...fromGit.keys()]);
      for (const [path, content] of fromGit) assert.equal(fromAssets.get(path), content, path);
      assert.ok(await client.get(CAPI, 'ClusterClass', tag('v1'), ns), 'Flux applied the ClusterClass');

      const storage = gh.storageLog.slice(storageBefore);
      assert.ok(storage.length >= 5, 'the assets were downloaded from the storage origin');
      assert.ok(
        storage.every((r) => r.authorization === ''),
        'no Authorization header to the storage host',
      );
      assert.ok(
        gh.log.some((r) => r.path.includes('/releases/assets/') && r.authorization === `Bearer ${TOKEN}`),
      );
    });
  });

  it('a replaced asset is reported as a moved release and nothing of it is applied', async () => {
    await controller?.step(async () => {
      const validated = (await release())?.status?.commit ?? '';
      const name = gh.releases[0]?.assets?.find((a) => a.name.includes('-cluster-class-'))?.name ?? '';
      const bytes = gh.releases[0]?.assets?.find((a) => a.name === name)?.bytes ?? new Uint8Array();
      gh.replaceAsset(tag('v1'), name, bytes);
      const moved = await eventually(
        `${tag('v1')} TagMoved`,
        async () => {
          const r = await release();
          return cond(r, 'Ready')?.reason === 'TagMoved' ? r : undefined;
        },
        { timeoutMs: 240_000 },
      );
      assert.equal(moved.status?.commit, validated, 'still pinned to what was validated');
      assert.match(cond(moved, 'Ready')?.message ?? '', /github-assets:sha256:/);
      assert.ok(await client.get(CAPI, 'ClusterClass', tag('v1'), ns), 'the validated ClusterClass stays');
      assert.ok(
        !(controller?.logLines ?? []).some((l) => l.includes(TOKEN)),
        'the token is in no log line (debug level)',
      );
    });
  });
});
