// Issue 31 F1 for every source client, against real servers: a fake "metadata" endpoint on
// 127.0.0.2 (loopback, not in the allow-list 127.0.0.1/32 the test environment passes) must get no
// request, whether a tenant's registry names it as its Bearer realm or redirects a blob there, a
// repository URL names it, a GitHub asset download or a chart repository redirects to it. Plain
// http follows no redirect. And what came back unverified is never described.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { Agent } from 'undici';
import { withChartDependencies } from '../../../controller/sources/chartrepo.ts';
import { SourceError } from '../../../controller/sources/contract.ts';
import {
  configureEgress,
  egressLookup,
  egressRefusal,
  parseEgressAllowList,
  type Resolver,
} from '../../../controller/sources/egress.ts';
import { fetchReleaseTree, gitEnv, listTags } from '../../../controller/sources/git.ts';
import { GitHubReleases } from '../../../controller/sources/github.ts';
import { GitHubReleaseAssets } from '../../../controller/sources/githubassets.ts';
import {
  CSCTL_ARTIFACT_TYPE,
  OCI_MANIFEST,
  OciClient,
  sha256Digest,
} from '../../../controller/sources/oci.ts';
import { readStackDir } from '../../../hack/lib/stack-dir.ts';
import {
  METADATA_ANSWER,
  type RecordingServer,
  startMetadataServer,
  startRealmRegistry,
  startServer,
} from '../../support/egress.ts';
import { fakeAssets, GitHubFake } from '../../support/githubfake.ts';
import { trustCa } from '../../support/registry.ts';
import { servingCertificate } from '../../support/runtimehook.ts';

const REPO = 'scs/stack';
let metadata: RecordingServer;
let scratch: string;
let tls: { cert: Buffer; key: Buffer };

/** The error a promise rejects with (fails when it resolves). */
async function rejection(p: Promise<unknown>): Promise<SourceError> {
  const err = await p.then(
    () => assert.fail('resolved although the request must be refused'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof SourceError, String(err));
  return err;
}

function refused(err: SourceError, destination: RegExp): void {
  assert.equal(err.reason, 'EgressRefused', err.message);
  assert.match(err.message, destination);
  assert.match(err.message, /not in --allow-source-networks/);
}

/**
 * A csctl release manifest whose one layer has the size and digest of the metadata answer: what a
 * tenant wrote after an error message told them those (the reproduction of F1).
 */
function metadataManifest(): { bytes: Buffer; digest: string; layer: string } {
  const layer = sha256Digest(Buffer.from(METADATA_ANSWER));
  const bytes = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: OCI_MANIFEST,
      artifactType: CSCTL_ARTIFACT_TYPE,
      config: {
        mediaType: 'application/vnd.oci.empty.v1+json',
        digest: sha256Digest(Buffer.from('{}')),
        size: 2,
      },
      layers: [
        {
          mediaType: 'application/vnd.oci.image.layer.v1.tar',
          digest: layer,
          size: Buffer.byteLength(METADATA_ANSWER),
          annotations: { 'org.opencontainers.image.title': 'cluster-addon-values.yaml' },
        },
      ],
    }),
  );
  return { bytes, digest: sha256Digest(bytes), layer };
}

/** A registry serving the manifest above, every blob GET redirected to `blobTo`. */
function redirectingRegistry(blobTo: string, https: boolean): Promise<RecordingServer> {
  const m = metadataManifest();
  return startServer(
    (req, res) => {
      if (req.url === `/v2/${REPO}/manifests/${m.digest}`)
        return res.writeHead(200, { 'content-type': OCI_MANIFEST }).end(m.bytes);
      if (req.url?.startsWith(`/v2/${REPO}/blobs/`))
        return res.writeHead(307, { location: `${blobTo}/latest/meta-data/iam` }).end();
      res.writeHead(404).end();
    },
    https ? tls : undefined,
  );
}

before(async () => {
  // What the test environment passes (hack/lib/testenv.ts TESTENV_SOURCE_NETWORKS).
  configureEgress(parseEgressAllowList('127.0.0.1/32'));
  metadata = await startMetadataServer();
  scratch = mkdtempSync(join(tmpdir(), 'egress-'));
  const pki = servingCertificate(join(scratch, 'pki'), 'egress-test');
  tls = { cert: pki.ca, key: readFileSync(pki.keyFile) };
  trustCa(pki.ca.toString('utf8'));
});
after(async () => {
  await metadata.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('the check holds when the connection is made (DNS rebinding)', () => {
  /** A resolver that answers `first` the first time and `then` every time after, as a rebinding name does. */
  function rebinding(first: string, then: string): Resolver {
    let calls = 0;
    return async () => [{ address: calls++ === 0 ? first : then, family: 4 }];
  }

  it('a name that resolved to an allowed address, then to 127.0.0.2, is refused at the next connection', async () => {
    const allowed = await startServer((_req, res) => res.writeHead(200).end('public answer'));
    // The policy allows the address the first answer names (standing in for a public address).
    const policy = parseEgressAllowList('127.0.0.1/32');
    const agent = new Agent({
      pipelining: 0, // a new connection per request, so each one asks the resolver again
      connect: { lookup: egressLookup(() => policy, rebinding('127.0.0.1', '127.0.0.2')) },
    });
    const port = (url: string): string => new URL(url).port;
    try {
      const ok = await fetch(`http://rebind.example.com:${port(allowed.url)}/`, {
        dispatcher: agent,
        headers: { connection: 'close' },
      } as RequestInit);
      assert.equal(await ok.text(), 'public answer');
      const err = await fetch(`http://rebind.example.com:${port(metadata.url)}/latest/meta-data/`, {
        dispatcher: agent,
      } as RequestInit).then(
        () => assert.fail('connected to the rebound address'),
        (e: unknown) => e,
      );
      const refusal = egressRefusal(err);
      assert.ok(refusal !== undefined, String(err));
      assert.match(refusal.message, /^rebind\.example\.com \(127\.0\.0\.2\) is a loopback address/);
      assert.deepEqual(metadata.requests, []);
    } finally {
      await agent.close();
      await allowed.close();
    }
  });
});

describe('OCI: a tenant registry cannot make the controller reach inside the platform', () => {
  it('a Bearer realm on 127.0.0.2 is refused, with or without credentials; the metadata endpoint gets nothing', async () => {
    const registry = await startRealmRegistry(
      `${metadata.url}/latest/meta-data/iam/security-credentials/role`,
    );
    try {
      const url = `oci://${new URL(registry.url).host}/${REPO}`;
      for (const creds of [undefined, { username: 'tenant', password: 'pw-of-the-tenant' }]) {
        const err = await rejection(new OciClient().listTagNames(url, creds, { insecure: true }));
        refused(
          err,
          new RegExp(
            `the token realm ${metadata.url.replaceAll('.', '\\.')}: 127\\.0\\.0\\.2 is a loopback address`,
          ),
        );
        assert.ok(!err.message.includes('pw-of-the-tenant'));
      }
      assert.ok(registry.requests.length > 0, 'the registry itself (127.0.0.1) was asked');
      assert.deepEqual(metadata.requests, []);
    } finally {
      await registry.close();
    }
  });

  it('a realm named by a cluster-internal or metadata name is refused before any lookup', async () => {
    for (const realm of [
      'http://metadata.google.internal/computeMetadata/v1/',
      'http://kubernetes.default.svc/api',
    ]) {
      const registry = await startRealmRegistry(realm);
      try {
        const err = await rejection(
          new OciClient().listTagNames(`oci://${new URL(registry.url).host}/${REPO}`, undefined, {
            insecure: true,
          }),
        );
        refused(err, /cluster-internal/);
      } finally {
        await registry.close();
      }
    }
  });

  it('a blob redirected to 127.0.0.2 is refused (https registry) and nothing of it is described', async () => {
    const registry = await redirectingRegistry(metadata.url.replace('http:', 'https:'), true);
    try {
      const m = metadataManifest();
      const err = await rejection(
        new OciClient().fetchAssets(`oci://${new URL(registry.url).host}/${REPO}`, m.digest, undefined, {}),
      );
      refused(err, /127\.0\.0\.2 is a loopback address/);
      assert.deepEqual(metadata.requests, []);
    } finally {
      await registry.close();
    }
  });

  it('plain http follows no redirect: a blob redirect of an insecure registry is not followed, even to an allowed host', async () => {
    const storage = await startServer((_req, res) => res.writeHead(200).end(METADATA_ANSWER));
    const registry = await redirectingRegistry(storage.url, false);
    try {
      const err = await rejection(
        new OciClient().fetchAssets(
          `oci://${new URL(registry.url).host}/${REPO}`,
          metadataManifest().digest,
          undefined,
          {
            insecure: true,
          },
        ),
      );
      assert.equal(err.reason, 'InsecureSource');
      assert.match(err.message, /redirects over plain http; not following it/);
      assert.deepEqual(storage.requests, []);
    } finally {
      await registry.close();
      await storage.close();
    }
  });

  it('a blob that is not what its descriptor says is refused without its size or digest', async () => {
    // The registry answers the metadata answer with one byte more than the manifest says.
    const m = metadataManifest();
    const served = `${METADATA_ANSWER} `;
    const registry = await startServer((req, res) => {
      if (req.url === `/v2/${REPO}/manifests/${m.digest}`)
        return res.writeHead(200, { 'content-type': OCI_MANIFEST }).end(m.bytes);
      res.writeHead(200).end(served.replace('fake', 'FAKE'));
    });
    try {
      const err = await rejection(
        new OciClient().fetchAssets(`oci://${new URL(registry.url).host}/${REPO}`, m.digest, undefined, {
          insecure: true,
        }),
      );
      assert.equal(err.reason, 'DigestMismatch');
      const got = Buffer.from(served.replace('fake', 'FAKE'));
      assert.ok(!err.message.includes(sha256Digest(got)), err.message);
      assert.ok(!new RegExp(`\\b${got.byteLength}\\b`).test(err.message), err.message);
    } finally {
      await registry.close();
    }
  });
});

describe('Git: a repository URL that names an internal address is refused before git runs', () => {
  it('http, ssh and scp-like URLs to 127.0.0.2 or link-local; listing and reading', async () => {
    const http = `${metadata.url}/tenant/repo.git`;
    refused(await rejection(listTags(http)), /127\.0\.0\.2 is a loopback address/);
    refused(
      await rejection(fetchReleaseTree(http, 'v1', 'a'.repeat(40), '', join(scratch, 'git-cache'))),
      /127\.0\.0\.2 is a loopback address/,
    );
    refused(await rejection(listTags('git@169.254.169.254:tenant/repo.git')), /link-local/);
    refused(await rejection(listTags('ssh://git@10.0.0.1/repo.git')), /private/);
    assert.deepEqual(metadata.requests, []);
  });
});

describe('Git: the pin makes git connect to the checked address, not resolve again', () => {
  it('a name no DNS knows reaches the checked address through http.curloptResolve', async () => {
    const server = await startServer((_req, res) => res.writeHead(404).end());
    try {
      const url = `http://pinned.invalid:${new URL(server.url).port}/tenant/repo.git`;
      const pin = `pinned.invalid:${new URL(server.url).port}:127.0.0.1`;
      // Not spawnSync: the server that must answer runs in this process.
      const stderr = await promisify(execFile)('git', ['ls-remote', '--', url], {
        env: gitEnv(undefined, url, pin),
      }).then(
        () => assert.fail('ls-remote of a 404 succeeded'),
        (e: { stderr?: string }) => e.stderr ?? '',
      );
      assert.ok(!/Could not resolve host/.test(stderr), stderr);
      assert.ok(server.requests.length > 0, 'git connected to the pinned address');
    } finally {
      await server.close();
    }
  });
});

describe('GitHub: the asset storage redirect and the API go through the same policy', () => {
  let fake: GitHubFake;
  before(async () => {
    fake = await GitHubFake.start();
    // The names make it a csctl release; the bytes are never read (the download is refused).
    const assets = new Map([
      ['metadata.yaml', Buffer.from('apiVersion: metadata.clusterstack.x-k8s.io/v1alpha1\n')],
      ['docker-csoferrol-1-30-cluster-class-v1.tgz', Buffer.from('not read')],
    ]);
    fake.releases = [{ tag: 'docker-csoferrol-1-30-v1', commit: 'a'.repeat(40), assets: fakeAssets(assets) }];
  });
  after(() => fake.stop());

  it('an asset download redirected to 127.0.0.2 is refused; the metadata endpoint gets nothing', async () => {
    const [listed] = await new GitHubReleases({ baseUrl: fake.url }).listTags(
      { owner: 'scs', repo: 'stacks' },
      undefined,
    );
    fake.storageUrl = metadata.url;
    const err = await rejection(
      new GitHubReleaseAssets({ baseUrl: fake.url }).fetchTree(
        { owner: 'scs', repo: 'stacks' },
        'docker-csoferrol-1-30-v1',
        listed?.commit ?? '',
        undefined,
        join(scratch, 'gh-cache'),
      ),
    );
    refused(err, /127\.0\.0\.2 is a loopback address/);
    assert.deepEqual(metadata.requests, []);
  });

  it('an API URL on a refused address is refused too', async () => {
    const err = await rejection(
      new GitHubReleases({ baseUrl: metadata.url }).listTags({ owner: 'scs', repo: 'stacks' }, undefined),
    );
    refused(err, /127\.0\.0\.2 is a loopback address/);
    assert.deepEqual(metadata.requests, []);
  });
});

describe('chart repositories: redirects are checked; plain http follows none', () => {
  const CHART = 'cluster-addon/umbrella/';
  function treeWith(repository: string) {
    const dir = mkdtempSync(join(scratch, 'stack-'));
    mkdirSync(join(dir, CHART), { recursive: true });
    writeFileSync(
      join(dir, CHART, 'Chart.yaml'),
      `apiVersion: v2\nname: umbrella\nversion: v1\ndependencies:\n  - name: alpha\n    version: "1.0.0"\n    repository: ${repository}\n`,
    );
    return readStackDir(dir);
  }
  const options = () => ({
    cacheDir: join(scratch, 'chart-cache'),
    treeKey: `egress\n${Math.random()}`,
    tenancy: { insecureChartHosts: ['127.0.0.1'] },
  });

  it('an https repository whose index redirects to 127.0.0.2 is refused', async () => {
    const repo = await startServer(
      (_req, res) =>
        res.writeHead(302, { location: `${metadata.url.replace('http:', 'https:')}/index.yaml` }).end(),
      tls,
    );
    try {
      const err = await rejection(withChartDependencies(treeWith(`${repo.url}/charts`), [CHART], options()));
      assert.match(err.message, /127\.0\.0\.2 is a loopback address, not in --allow-source-networks/);
      assert.deepEqual(metadata.requests, []);
    } finally {
      await repo.close();
    }
  });

  it('a plain-http repository (in --insecure-chart-hosts) that redirects is not followed, even to an allowed host', async () => {
    const other = await startServer((_req, res) => res.writeHead(200).end('apiVersion: v1\nentries: {}\n'));
    const repo = await startServer((_req, res) =>
      res.writeHead(302, { location: `${other.url}/index.yaml` }).end(),
    );
    try {
      const err = await rejection(withChartDependencies(treeWith(`${repo.url}/charts`), [CHART], options()));
      assert.match(err.message, /redirects over plain http; not following it/);
      assert.deepEqual(other.requests, []);
    } finally {
      await repo.close();
      await other.close();
    }
  });
});
