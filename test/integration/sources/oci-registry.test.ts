// The OCI source against a real registry: the CNCF Distribution registry (v3.1.2, built by
// hack/build-testenv.sh), started by test/support/registry.ts over HTTPS (anonymous, Docker token
// auth with anonymous pull) or plain HTTP (htpasswd, notifications), and once by this file with a
// JWKS-verified token server of its own (the identity-token exchange, which the support token server
// does not speak). Crafted releases (another artifact type, a node image layer) are pushed with
// plain fetch (monolithic blob upload, manifest PUT) in csctl's layout: an image manifest with
// artifactType application/vnd.scs.cluster-stacks.v1 and one layer per asset file named by its
// title annotation; a real one with csctl's own push (pushCsctlRelease).
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash, generateKeyPairSync, sign } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ReleaseTree } from '../../../controller/api/release.ts';
import { releaseTreeFromCsctlAssets } from '../../../controller/releases/csctl/assets.ts';
import { readReleaseDescription } from '../../../controller/releases/format.ts';
import { binaryFilesOf, releaseTreeFromBytes } from '../../../controller/releases/tree.ts';
import { SourceError } from '../../../controller/sources/git.ts';
import { RateLimitedError } from '../../../controller/sources/github.ts';
import {
  CSCTL_ARTIFACT_TYPE,
  fetchOciReleaseTree,
  OCI_MANIFEST,
  OciClient,
  type ReleaseAssets,
  sha256Digest,
} from '../../../controller/sources/oci.ts';
import { SourcePollers } from '../../../controller/sources/poller.ts';
import { releaseTreeFetcher, sourceTagLister } from '../../../controller/sources/releasetree.ts';
import { serveWebhook, type WebhookServer } from '../../../controller/sources/webhook.ts';
import { readStackDir } from '../../../hack/lib/stack-dir.ts';
import { packageCsctlRelease } from '../../support/csctl-assets.ts';
import {
  pushCsctlAssets,
  pushCsctlRelease,
  registryBinDir,
  startRegistry as startTestRegistry,
  type TestRegistry,
  trustCa,
} from '../../support/registry.ts';
import { releaseTag } from '../../support/release-tag.ts';
import { servingCertificate } from '../../support/runtimehook.ts';

const work = mkdtempSync(join(tmpdir(), 'stackflux-oci-'));
const USER = 'stacker';
const PASSWORD = 'stackflux-oci-test';

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const { port } = s.address() as AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
}

interface Registry {
  host: string;
  url: string;
  stop: () => Promise<void>;
}

/** A plain-HTTP registry with the given auth section (the JWKS token describe below). */
async function startJwksRegistry(name: string, auth: string): Promise<Registry> {
  const dir = join(work, name);
  const port = await freePort();
  mkdirSync(join(dir, 'data'), { recursive: true });
  writeFileSync(
    join(dir, 'config.yml'),
    `version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: ${join(dir, 'data')}\nhttp:\n  addr: 127.0.0.1:${port}\n${auth}`,
  );
  const child: ChildProcess = spawn(join(registryBinDir(), 'registry'), ['serve', join(dir, 'config.yml')], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => {
    stderr += c.toString('utf8');
  });
  const host = `127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    const up = await fetch(`http://${host}/v2/`).then(
      () => true,
      () => false,
    );
    if (up) break;
    if (child.exitCode !== null || i > 200) throw new Error(`registry ${name} did not start: ${stderr}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    host,
    url: `http://${host}`,
    stop: async () => {
      child.kill('SIGTERM');
      if (child.exitCode === null) await new Promise((r) => child.once('exit', r));
    },
  };
}

/** Pushes assets as a csctl release artifact; returns the manifest digest. */
async function pushRelease(
  base: string,
  repo: string,
  tag: string,
  assets: Record<string, string | Buffer>,
  authorization?: string,
  artifactType: string = CSCTL_ARTIFACT_TYPE,
): Promise<string> {
  const h: Record<string, string> = authorization !== undefined ? { authorization } : {};
  const pushBlob = async (bytes: Buffer): Promise<string> => {
    const digest = sha256Digest(bytes);
    const start = await fetch(`${base}/v2/${repo}/blobs/uploads/`, { method: 'POST', headers: h });
    assert.equal(start.status, 202, `upload start: ${start.status}`);
    const location = new URL(start.headers.get('location') ?? '', base);
    location.searchParams.set('digest', digest);
    const put = await fetch(location, {
      method: 'PUT',
      headers: { ...h, 'content-type': 'application/octet-stream' },
      body: bytes,
    });
    assert.equal(put.status, 201, `blob put: ${put.status} ${await put.text()}`);
    return digest;
  };
  const empty = Buffer.from('{}');
  const config = { mediaType: 'application/vnd.oci.empty.v1+json', digest: await pushBlob(empty), size: 2 };
  const layers = [];
  for (const [title, content] of Object.entries(assets)) {
    const bytes = Buffer.from(content);
    layers.push({
      mediaType: title.includes('node-image')
        ? 'application/vnd.scs.node-image.layer.v1.tar+gzip'
        : title.endsWith('.tgz')
          ? 'application/vnd.scs.cluster-class.v1.tar+gzip'
          : 'application/vnd.scs.metadata.layer.v1+yaml',
      digest: await pushBlob(bytes),
      size: bytes.length,
      annotations: { 'org.opencontainers.image.title': title },
    });
  }
  const manifest = Buffer.from(
    JSON.stringify({ schemaVersion: 2, mediaType: OCI_MANIFEST, artifactType, config, layers }),
  );
  const res = await fetch(`${base}/v2/${repo}/manifests/${tag}`, {
    method: 'PUT',
    headers: { ...h, 'content-type': OCI_MANIFEST },
    body: manifest,
  });
  assert.equal(res.status, 201, `manifest put: ${res.status} ${await res.text()}`);
  assert.equal(res.headers.get('docker-content-digest'), sha256Digest(manifest));
  return sha256Digest(manifest);
}

/** The assets as a tree, file for file (the real mapping is task "assets"' releaseTreeFromCsctlAssets). */
const identity = (assets: ReleaseAssets): ReleaseTree => releaseTreeFromBytes(assets);

function bytesOf(tree: ReleaseTree, name: string): Buffer {
  const text = tree.get(name);
  return text !== undefined ? Buffer.from(text) : Buffer.from(binaryFilesOf(tree).get(name) ?? []);
}

const TGZ = Buffer.from(Array.from({ length: 3000 }, (_, i) => (i * 7) % 256));
const ASSETS = {
  'metadata.yaml': 'versions:\n  clusterStack: v1\n',
  'docker-ferrol-1-30-cluster-class-v1.tgz': TGZ,
};

after(() => rmSync(work, { recursive: true, force: true }));

describe('OCI source, anonymous registry over HTTPS', () => {
  let registry: TestRegistry;
  let proxy: Server;
  let proxyHost = '';
  let flipDigest = '';
  let limited = false;
  const repo = 'kaas/cluster-stacks';
  const url = () => `oci://${registry.host}/${repo}`;

  before(async () => {
    registry = await startTestRegistry({});
    trustCa(registry.caPem ?? '');
    // A proxy that flips one byte of one blob, or answers 429 while `limited`.
    proxy = createServer(async (req: IncomingMessage, res: ServerResponse) => {
      if (limited) {
        res.writeHead(429, { 'retry-after': '30', 'content-type': 'application/json' });
        res.end('{"errors":[{"code":"TOOMANYREQUESTS","message":"slow down"}]}');
        return;
      }
      const up = await fetch(`${registry.url}${req.url}`, {
        method: req.method ?? 'GET',
        headers: { accept: String(req.headers.accept ?? '*/*') },
        redirect: 'manual',
      });
      const body = Buffer.from(await up.arrayBuffer());
      if (flipDigest !== '' && req.url?.endsWith(`/blobs/${flipDigest}`) && body.length > 0)
        body[body.length - 1] = (body[body.length - 1] ?? 0) ^ 0x01;
      const headers: Record<string, string> = {};
      for (const [k, v] of up.headers) if (k !== 'content-length' && k !== 'content-encoding') headers[k] = v;
      res.writeHead(up.status, headers);
      res.end(req.method === 'HEAD' ? undefined : body);
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', () => r()));
    proxyHost = `127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  });
  after(async () => {
    proxy.close();
    await registry.stop();
  });

  it('lists every tag across pages (more tags than the page size) and resolves release tags to digests', async () => {
    const digests = new Map<string, string>();
    for (let v = 1; v <= 7; v++) {
      const tag = `docker-ferrol-1-30-v${v}`;
      digests.set(tag, await pushRelease(registry.url, repo, tag, { 'metadata.yaml': `v: ${v}\n` }));
    }
    await pushRelease(registry.url, repo, 'latest', { 'metadata.yaml': 'x' });
    const client = new OciClient({ limits: { pageSize: 3 } });
    const tags = await client.listTags(url(), undefined);
    // "latest" is no release tag: counted, not kept (issue 31 F2).
    assert.deepEqual(
      tags.map((t) => t.tag),
      [...digests.keys()].sort(),
    );
    assert.equal((tags as { notKept?: number }).notKept, 1);
    for (const t of tags) assert.equal(t.commit, digests.get(t.tag) ?? '', t.tag);
    // 3 pages of tags/list + one HEAD per release tag.
    assert.equal(client.requests, 3 + 7);
  });

  it('a registry that is down is SourceUnreachable', async () => {
    const err = await new OciClient()
      .listTagNames(`oci://127.0.0.1:${await freePort()}/${repo}`, undefined, { insecure: true })
      .catch((e: unknown) => e);
    assert.ok(err instanceof SourceError, String(err));
    assert.equal(err.reason, 'SourceUnreachable');
    assert.match(err.message, /ECONNREFUSED/);
  });

  it('speaks https unless the source says insecure: a plain-http registry is unreachable without it', async () => {
    const proxied = `oci://${proxyHost}/${repo}`;
    const err = await new OciClient({ limits: { requestTimeoutMs: 5000 } })
      .listTagNames(proxied, undefined)
      .catch((e: unknown) => e);
    assert.ok(err instanceof SourceError, String(err));
    assert.equal(err.reason, 'SourceUnreachable');
    assert.ok((await new OciClient().listTagNames(proxied, undefined, { insecure: true })).length > 0);
  });

  it('reads the artifact by digest: every asset back byte for byte (no node image), then from the cache', async () => {
    const digest = await pushRelease(registry.url, repo, 'docker-ferrol-1-30-v20', {
      ...ASSETS,
      'docker-ferrol-1-30-node-image-v1.tgz': Buffer.alloc(5000, 1),
    });
    const client = new OciClient();
    const cache = join(work, 'cache-read');
    const o = { client, assetsToTree: identity };
    const tree = await fetchOciReleaseTree(url(), 'docker-ferrol-1-30-v20', digest, cache, undefined, o);
    assert.deepEqual([...tree.keys()].sort(), ['metadata.yaml']);
    assert.deepEqual([...binaryFilesOf(tree).keys()], ['docker-ferrol-1-30-cluster-class-v1.tgz']);
    assert.ok(bytesOf(tree, 'docker-ferrol-1-30-cluster-class-v1.tgz').equals(TGZ));
    // The manifest and the two assets: the node image layer is never fetched.
    assert.equal(client.requests, 3);
    assert.equal(tree.get('metadata.yaml'), ASSETS['metadata.yaml']);
    const before = client.requests;
    const again = await fetchOciReleaseTree(url(), 'docker-ferrol-1-30-v20', digest, cache, undefined, o);
    assert.equal(client.requests, before, 'the second read is from the cache');
    assert.ok(bytesOf(again, 'docker-ferrol-1-30-cluster-class-v1.tgz').equals(TGZ));
  });

  it('a moved tag lists its new digest, and the validated digest still reads the old content', async () => {
    const tag = 'docker-ferrol-1-30-v30';
    const first = await pushRelease(registry.url, repo, tag, { 'metadata.yaml': 'first\n' });
    const pollers = new SourcePollers({
      lister: (u) => new OciClient().listTags(u, undefined),
      onChange: () => undefined,
    });
    const ref = { url: url(), namespace: 'ns' };
    pollers.subscribe('ns/cs', { ...ref, intervalMs: 3_600_000 });
    await pollers.idle();
    assert.equal(pollers.commitOf(ref, tag), first);
    const second = await pushRelease(registry.url, repo, tag, { 'metadata.yaml': 'second\n' });
    assert.notEqual(second, first);
    await pollers.refresh('ns/cs');
    assert.equal(pollers.commitOf(ref, tag), second, 'the listing reports where the tag points now');
    pollers.stop();
    const o = { client: new OciClient(), assetsToTree: identity };
    const tree = await fetchOciReleaseTree(url(), tag, first, join(work, 'cache-moved'), undefined, o);
    assert.equal(tree.get('metadata.yaml'), 'first\n');
  });

  it('a flipped byte in a blob is DigestMismatch (not a verdict: read again) naming the asset and its digest', async () => {
    const digest = await pushRelease(registry.url, repo, 'docker-ferrol-1-30-v40', ASSETS);
    flipDigest = sha256Digest(TGZ);
    try {
      const o = { client: new OciClient(), assetsToTree: identity, insecure: true };
      const err = await fetchOciReleaseTree(
        `oci://${proxyHost}/${repo}`,
        'docker-ferrol-1-30-v40',
        digest,
        join(work, 'cache-flip'),
        undefined,
        o,
      ).catch((e: unknown) => e);
      assert.ok(err instanceof SourceError, String(err));
      assert.equal(err.reason, 'DigestMismatch');
      assert.match(
        err.message,
        new RegExp(
          `layer docker-ferrol-1-30-cluster-class-v1\\.tgz \\(${flipDigest}\\): the content does not match its digest`,
        ),
      );
    } finally {
      flipDigest = '';
    }
  });

  it('an artifact that is not a csctl release is InvalidRelease naming its artifact type', async () => {
    const digest = await pushRelease(
      registry.url,
      repo,
      'docker-ferrol-1-30-v50',
      { 'metadata.yaml': 'x' },
      undefined,
      'application/vnd.example.other.v1',
    );
    const o = { client: new OciClient(), assetsToTree: identity };
    const err = await fetchOciReleaseTree(
      url(),
      'docker-ferrol-1-30-v50',
      digest,
      join(work, 'c-type'),
      undefined,
      o,
    ).catch((e: unknown) => e);
    assert.ok(err instanceof SourceError);
    assert.equal(err.reason, 'InvalidRelease');
    assert.match(
      err.message,
      /artifact type "application\/vnd\.example\.other\.v1", not application\/vnd\.scs\.cluster-stacks\.v1/,
    );
  });

  it('a release over the byte limit is InvalidRelease before any blob is read', async () => {
    const digest = await pushRelease(registry.url, repo, 'docker-ferrol-1-30-v60', ASSETS);
    const client = new OciClient({ limits: { maxReleaseBytes: 1000 } });
    const err = await client.fetchAssets(url(), digest, undefined).catch((e: unknown) => e);
    assert.ok(err instanceof SourceError);
    assert.equal(err.reason, 'InvalidRelease');
    assert.match(err.message, /more than the limit of 1000 bytes/);
    assert.equal(client.requests, 1, 'only the manifest was read');
  });

  it('429 with Retry-After is RateLimited with retryAt, and the poller keeps the last good tags', async () => {
    const client = new OciClient();
    const pollers = new SourcePollers({
      lister: (u) => client.listTags(u, undefined, { insecure: true }),
      onChange: () => undefined,
    });
    const ref = { url: `oci://${proxyHost}/${repo}`, namespace: 'ns' };
    pollers.subscribe('ns/limited', { ...ref, intervalMs: 3_600_000 });
    await pollers.idle();
    const good = pollers.commitOf(ref, 'docker-ferrol-1-30-v1');
    assert.match(good ?? '', /^sha256:/);
    limited = true;
    try {
      const t0 = Date.now();
      const err = await client.listTagNames(ref.url, undefined, { insecure: true }).catch((e: unknown) => e);
      assert.ok(err instanceof RateLimitedError, String(err));
      assert.equal(err.reason, 'RateLimited');
      assert.ok(err.retryAt >= t0 + 30_000 - 1000);
      const listing = await (async () => {
        await pollers.refresh('ns/limited');
        return pollers.listing('ns/limited');
      })();
      // The client itself refuses before retryAt: the listing failed, the last good tags stay.
      assert.equal(listing?.ok, false);
      assert.equal(pollers.commitOf(ref, 'docker-ferrol-1-30-v1'), good);
    } finally {
      limited = false;
      pollers.stop();
    }
  });
});

describe('OCI source, htpasswd (Basic) registry', () => {
  let registry: TestRegistry;
  let front: HttpsServer;
  let storage: HttpsServer;
  /** Authorization headers the "storage" host (another origin) received. */
  const storageSaw: Array<string | undefined> = [];
  const repo = 'private/stacks';
  const basic = `Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}`;

  before(async () => {
    registry = await startTestRegistry({
      auth: { kind: 'htpasswd', user: USER, password: PASSWORD },
      tls: false,
    });
    // "storage": another origin serving blobs (as S3 behind a registry does); it fetches them from
    // the registry with its own credentials and records what the client sent.
    // Both https: plain http follows no redirect (issue 31 F1).
    const pki = servingCertificate(join(mkdtempSync(join(tmpdir(), 'oci-front-')), 'pki'), 'oci-front');
    const tls = { cert: pki.ca, key: readFileSync(pki.keyFile) };
    trustCa(pki.ca.toString('utf8'));
    storage = createHttpsServer(tls, async (req, res) => {
      storageSaw.push(req.headers.authorization);
      const up = await fetch(`http://${registry.host}${req.url}`, { headers: { authorization: basic } });
      res.writeHead(up.status);
      res.end(Buffer.from(await up.arrayBuffer()));
    });
    await new Promise<void>((r) => storage.listen(0, '127.0.0.1', () => r()));
    const storageOrigin = `https://127.0.0.1:${(storage.address() as AddressInfo).port}`;
    // "front": the registry, except that blob GETs are redirected to the storage host.
    front = createHttpsServer(tls, async (req, res) => {
      if (
        req.method === 'GET' &&
        /\/blobs\/sha256:/.test(req.url ?? '') &&
        req.headers.authorization !== undefined
      ) {
        res.writeHead(307, { location: `${storageOrigin}${req.url}` });
        res.end();
        return;
      }
      const headers: Record<string, string> = { accept: String(req.headers.accept ?? '*/*') };
      if (req.headers.authorization !== undefined) headers.authorization = req.headers.authorization;
      const up = await fetch(`http://${registry.host}${req.url}`, { method: req.method ?? 'GET', headers });
      const out: Record<string, string> = {};
      for (const [k, v] of up.headers) if (k !== 'content-length' && k !== 'content-encoding') out[k] = v;
      res.writeHead(up.status, out);
      res.end(req.method === 'HEAD' ? undefined : Buffer.from(await up.arrayBuffer()));
    });
    await new Promise<void>((r) => front.listen(0, '127.0.0.1', () => r()));
  });
  after(async () => {
    front.close();
    storage.close();
    await registry.stop();
  });

  it('follows a blob redirect to another host without the Authorization header', async () => {
    const digest = await pushRelease(registry.url, repo, 'docker-ferrol-1-30-v9', ASSETS, basic);
    const frontHost = `127.0.0.1:${(front.address() as AddressInfo).port}`;
    const assets = await new OciClient().fetchAssets(
      `oci://${frontHost}/${repo}`,
      digest,
      { username: USER, password: PASSWORD },
      {},
    );
    assert.ok(Buffer.from(assets.get('docker-ferrol-1-30-cluster-class-v1.tgz') ?? []).equals(TGZ));
    assert.equal(storageSaw.length, 2, 'both blobs came from the storage host');
    assert.deepEqual(storageSaw, [undefined, undefined]);
  });

  it('answers 401, then lists and reads with the right credentials; wrong ones fail without naming them', async () => {
    const digest = await pushRelease(registry.url, repo, 'docker-ferrol-1-30-v1', ASSETS, basic);
    const url = `oci://${registry.host}/${repo}`;
    const anonymous = await new OciClient()
      .listTagNames(url, undefined, { insecure: true })
      .catch((e: unknown) => e);
    assert.ok(anonymous instanceof SourceError);
    assert.equal(anonymous.reason, 'AuthenticationFailed');

    const client = new OciClient();
    const creds = { username: USER, password: PASSWORD };
    const tags = await client.listTags(url, creds, { insecure: true });
    assert.deepEqual(
      tags.find((t) => t.tag === 'docker-ferrol-1-30-v1'),
      { tag: 'docker-ferrol-1-30-v1', commit: digest },
    );
    const assets = await client.fetchAssets(url, digest, creds, { insecure: true });
    assert.ok(Buffer.from(assets.get('docker-ferrol-1-30-cluster-class-v1.tgz') ?? []).equals(TGZ));

    const wrong = await new OciClient()
      .listTagNames(url, { username: USER, password: 'wrong-password-xyz' }, { insecure: true })
      .catch((e: unknown) => e);
    assert.ok(wrong instanceof SourceError);
    assert.equal(wrong.reason, 'AuthenticationFailed');
    assert.doesNotMatch(wrong.message, /wrong-password-xyz/);
  });
});

describe('OCI source, token (Bearer) registry', () => {
  let registry: Registry;
  let tokenServer: Server;
  const repo = 'tokened/stacks';
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const issued: Array<{ scope: string | null; authorized: boolean }> = [];
  const IDENTITY_TOKEN = 'identity-token-from-docker-login';

  /** A JWT for `scope` as Distribution's token auth verifies it (ES256, kid from the JWKS). */
  function jwt(scope: string): string {
    const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
    const [, name = '', actions = ''] = /^repository:(.+):([^:]+)$/.exec(scope) ?? [];
    const now = Math.floor(Date.now() / 1000);
    const body = `${b64({ alg: 'ES256', typ: 'JWT', kid: 'test' })}.${b64({
      iss: 'stackflux-test-issuer',
      sub: USER,
      aud: 'stackflux-test-registry',
      exp: now + 300,
      nbf: now - 10,
      iat: now,
      jti: createHash('sha256').update(`${Math.random()}`).digest('hex'),
      access: name === '' ? [] : [{ type: 'repository', name, actions: actions.split(',') }],
    })}`;
    const signature = sign('sha256', Buffer.from(body), { key: privateKey, dsaEncoding: 'ieee-p1363' });
    return `${body}.${signature.toString('base64url')}`;
  }

  before(async () => {
    // The token server grants any scope to the right Basic credentials, nothing to anyone else.
    // An identity token is exchanged by POST (OAuth2 refresh-token grant), as Docker's auth does.
    tokenServer = createServer(async (req, res) => {
      const u = new URL(req.url ?? '/', 'http://x');
      let scope = u.searchParams.get('scope');
      let authorized =
        req.headers.authorization === `Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}`;
      if (req.method === 'POST') {
        const chunks: Buffer[] = [];
        for await (const c of req) chunks.push(c as Buffer);
        const form = new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
        scope = form.get('scope');
        authorized =
          form.get('grant_type') === 'refresh_token' && form.get('refresh_token') === IDENTITY_TOKEN;
      }
      issued.push({ scope, authorized });
      if (!authorized) {
        res.writeHead(401);
        res.end();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify(
          req.method === 'POST'
            ? { access_token: jwt(scope ?? ''), expires_in: 300 }
            : { token: jwt(scope ?? ''), expires_in: 300 },
        ),
      );
    });
    await new Promise<void>((r) => tokenServer.listen(0, '127.0.0.1', () => r()));
    const realm = `http://127.0.0.1:${(tokenServer.address() as AddressInfo).port}/token`;
    const jwk = { ...publicKey.export({ format: 'jwk' }), kid: 'test', alg: 'ES256', use: 'sig' };
    writeFileSync(join(work, 'jwks.json'), JSON.stringify({ keys: [jwk] }));
    registry = await startJwksRegistry(
      'token',
      `auth:\n  token:\n    realm: ${realm}\n    service: stackflux-test-registry\n    issuer: stackflux-test-issuer\n    jwks: ${join(work, 'jwks.json')}\n`,
    );
  });
  after(async () => {
    tokenServer.close();
    await registry.stop();
  });

  it('gets a token from the realm for the pull scope, caches it, and reads the release', async () => {
    const pushToken = jwt(`repository:${repo}:pull,push`);
    const digest = await pushRelease(
      registry.url,
      repo,
      'docker-ferrol-1-30-v1',
      ASSETS,
      `Bearer ${pushToken}`,
    );
    const url = `oci://${registry.host}/${repo}`;
    const client = new OciClient();
    const creds = { username: USER, password: PASSWORD };
    issued.length = 0;
    const tags = await client.listTags(url, creds, { insecure: true });
    assert.deepEqual(tags, [{ tag: 'docker-ferrol-1-30-v1', commit: digest }]);
    const assets = await client.fetchAssets(url, digest, creds, { insecure: true });
    assert.equal(Buffer.from(assets.get('metadata.yaml') ?? []).toString(), ASSETS['metadata.yaml']);
    assert.deepEqual(issued, [{ scope: `repository:${repo}:pull`, authorized: true }], 'one token, reused');

    const anonymous = await new OciClient()
      .listTagNames(url, undefined, { insecure: true })
      .catch((e: unknown) => e);
    assert.ok(anonymous instanceof SourceError);
    assert.equal(anonymous.reason, 'AuthenticationFailed');
  });

  it('a Secret with username and token: the token refused as the bearer is the password at the realm', async () => {
    const url = `oci://${registry.host}/${repo}`;
    issued.length = 0;
    // As controllers/common.ts reads a Secret with keys username and token.
    const tags = await sourceTagLister({ oci: new OciClient() })(
      url,
      { username: USER, password: PASSWORD, token: PASSWORD },
      { insecure: true },
    );
    assert.deepEqual(
      tags.map((t) => t.tag),
      ['docker-ferrol-1-30-v1'],
    );
    assert.deepEqual(issued, [{ scope: `repository:${repo}:pull`, authorized: true }]);
  });

  it('exchanges the identity token of a dockerconfigjson Secret at the realm', async () => {
    const url = `oci://${registry.host}/${repo}`;
    const dockerConfigJson = JSON.stringify({
      auths: { [registry.host]: { identitytoken: IDENTITY_TOKEN } },
    });
    issued.length = 0;
    const fetchTree = releaseTreeFetcher({ oci: new OciClient(), assetsToTree: identity });
    const lister = sourceTagLister({ oci: new OciClient() });
    const [tag] = await lister(url, { dockerConfigJson }, { insecure: true });
    assert.equal(tag?.tag, 'docker-ferrol-1-30-v1');
    const tree = await fetchTree(
      { url, insecure: true },
      tag?.tag ?? '',
      tag?.commit ?? '',
      join(work, 'cache-identity'),
      { dockerConfigJson },
    );
    assert.equal(tree.get('metadata.yaml'), ASSETS['metadata.yaml']);
    assert.deepEqual(
      issued.map((i) => i.authorized),
      [true, true],
    );
  });
});

describe('OCI source, registry push notifications', () => {
  let registry: TestRegistry;
  let hook: WebhookServer;
  const secret = 'stackflux-registry-hook-secret';
  const repo = 'notified/stacks';
  const pollers = new SourcePollers({
    lister: (u) => new OciClient().listTags(u, undefined, { insecure: true }),
    onChange: () => undefined,
  });

  before(async () => {
    hook = await serveWebhook('127.0.0.1:0', {
      secret,
      trigger: (urls) => pollers.trigger(urls),
      triggerOciRepositories: (repos) => pollers.triggerOciRepositories(repos),
    });
    registry = await startTestRegistry({
      tls: false,
      notifications: { url: `${hook.url}/hooks/push`, headers: { Authorization: `Bearer ${secret}` } },
    });
  });
  after(async () => {
    pollers.stop();
    await registry.stop();
    await hook.close();
  });

  it("a push of a tag re-lists the repository's OCI source at once (the poll interval is an hour)", async () => {
    const ref = { url: `oci://${registry.host}/${repo}`, namespace: 'ns', insecure: true };
    await pushRelease(registry.url, repo, 'docker-ferrol-1-30-v1', { 'metadata.yaml': 'one\n' });
    pollers.subscribe('ns/notified', { ...ref, intervalMs: 3_600_000 });
    await pollers.idle();
    assert.equal(pollers.listCount(ref), 1);
    const digest = await pushRelease(registry.url, repo, 'docker-ferrol-1-30-v2', {
      'metadata.yaml': 'two\n',
    });
    // Waits for the registry's notification (sent asynchronously), not for a time.
    for (let i = 0; pollers.commitOf(ref, 'docker-ferrol-1-30-v2') === undefined; i++) {
      if (i > 600) assert.fail('the push notification never re-listed the source');
      await new Promise((r) => setTimeout(r, 50));
      await pollers.idle();
    }
    assert.equal(pollers.commitOf(ref, 'docker-ferrol-1-30-v2'), digest);
  });
});

describe('OCI source, a release pushed by csctl (its oras-go calls, hack/tools/csctl-push)', () => {
  let registry: TestRegistry;
  const STACK = join(import.meta.dirname, '..', '..', '..', 'stacks', 'docker-csoferrol-1-30');
  const TAG = 'docker-csoferrol-1-30-v1';
  const packaged = packageCsctlRelease(STACK, 'v1');

  before(async () => {
    registry = await startTestRegistry({});
    trustCa(registry.caPem ?? '');
  });
  after(() => registry.stop());

  it('reads the release as the same assets from GitHub read, and describes it as its Git-tag folder', async () => {
    const pushed = await pushCsctlAssets(registry, 'scs/stacks', TAG, packaged);
    const url = `oci://${registry.host}/scs/stacks`;
    const oci = new OciClient();
    const [listed] = await sourceTagLister({ oci })(url, undefined);
    assert.deepEqual(listed, { tag: TAG, commit: pushed.digest });
    // The controllers' fetcher, with the real csctl assets reader.
    const tree = await releaseTreeFetcher({ oci })(
      { url },
      TAG,
      pushed.digest,
      join(work, 'cache-csctl'),
      undefined,
    );
    assert.deepEqual([...tree].sort(), [...releaseTreeFromCsctlAssets(packaged)].sort());
    const fromOci = readReleaseDescription(tree, releaseTag(TAG));
    const fromGit = readReleaseDescription(readStackDir(STACK), releaseTag(TAG));
    assert.ok(fromOci.ok && fromGit.ok, JSON.stringify([fromOci, fromGit]).slice(0, 500));
    assert.deepEqual(fromOci.value.addons, fromGit.value.addons);
    assert.deepEqual(
      [fromOci.value.provider, fromOci.value.name, fromOci.value.kubernetesVersion],
      [fromGit.value.provider, fromGit.value.name, fromGit.value.kubernetesVersion],
    );
  });
});

describe('OCI source, Docker token auth over HTTPS (test/support token server, anonymous pull)', () => {
  let registry: TestRegistry;
  const repo = 'public/stacks';

  before(async () => {
    registry = await startTestRegistry({
      auth: { kind: 'token', user: USER, password: PASSWORD, anonymousPull: true },
    });
    trustCa(registry.caPem ?? '');
  });
  after(() => registry.stop());

  it('answers the Bearer challenge anonymously, and with the credentials when given', async () => {
    const dir = join(work, 'anon-token-release');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'metadata.yaml'), 'versions:\n  clusterStack: v1\n');
    const pushed = await pushCsctlRelease({
      registry: registry.host,
      repository: repo,
      tag: 'docker-ferrol-1-30-v1',
      dir,
      creds: { user: USER, password: PASSWORD },
      ...(registry.ca !== undefined ? { ca: registry.ca } : {}),
    });
    const url = `oci://${registry.host}/${repo}`;
    const tokens = registry.tokenServer;
    assert.ok(tokens);
    const before = tokens.requests.length;
    const anonymous = await new OciClient().listTags(url, undefined);
    assert.deepEqual(anonymous, [{ tag: 'docker-ferrol-1-30-v1', commit: pushed.digest }]);
    const asked = tokens.requests.slice(before);
    assert.equal(asked.length, 1, 'one token for the listing and its HEAD');
    assert.equal(asked[0]?.user, undefined);
    assert.deepEqual(asked[0]?.scopes, [`repository:${repo}:pull`]);

    const withCreds = await new OciClient().fetchAssets(url, pushed.digest, {
      username: USER,
      password: PASSWORD,
    });
    assert.equal(
      Buffer.from(withCreds.get('metadata.yaml') ?? []).toString(),
      'versions:\n  clusterStack: v1\n',
    );
    assert.equal(tokens.requests.at(-1)?.user, USER);
  });
});
