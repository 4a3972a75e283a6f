// What every OCI test of issue 24 stands on, against real Distribution registry processes: the
// csctl push helper writes the artifact csctl writes (read back with plain fetch), htpasswd and
// Docker-token authentication challenge and admit as a registry does, push notifications reach a
// listener, and the fault proxy's faults are what a client sees.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { gzipSync } from 'node:zlib';
import { eventually, uniqueName } from '../../support/env.ts';
import { OciFaultProxy, type OciProxyRequest } from '../../support/oci-fault-proxy.ts';
import { pushCsctlRelease, startRegistry, type TestRegistry, trustCa } from '../../support/registry.ts';

const MANIFEST = 'application/vnd.oci.image.manifest.v1+json';
// csctl's pkg/cmd/mediatype.go, by the file names csctl's getMediaType maps.
const csctlMediaTypes: Record<string, string> = {
  'clusteraddon.yaml': 'application/vnd.scs.cluster-addon.config.layer.v1+yaml',
  'metadata.yaml': 'application/vnd.scs.metadata.layer.v1+yaml',
  'node-images.yaml': 'application/vnd.scs.node-image.config.layer.v1+yaml',
  'hashes.json': 'application/vnd.scs.hashes.layer.v1+yaml',
  'docker-scs-1-34-cluster-addon-v1.tgz': 'application/vnd.scs.cluster-addon.layer.v1.tar+gzip',
  'docker-scs-1-34-cluster-class-v1.tgz': 'application/vnd.scs.cluster-class.v1.tar+gzip',
};

const work = mkdtempSync(join(tmpdir(), 'stackflux-registry-test-'));
const stops: Array<() => Promise<void>> = [];
after(async () => {
  for (const stop of stops.reverse()) await stop();
  rmSync(work, { recursive: true, force: true });
});

async function registry(opts: Parameters<typeof startRegistry>[0] = {}): Promise<TestRegistry> {
  const r = await startRegistry(opts);
  stops.push(r.stop);
  if (r.caPem) trustCa(r.caPem);
  return r;
}

/** A release directory as csctl writes it; `salt` changes the content (a moved tag). */
function releaseAssets(name: string, salt = ''): string {
  const dir = join(work, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'metadata.yaml'), `versions:\n  clusterStack: v1\n  kubernetes: v1.34.1\n${salt}`);
  writeFileSync(join(dir, 'clusteraddon.yaml'), 'apiVersion: clusteraddonconfig.x-k8s.io/v1alpha1\n');
  writeFileSync(join(dir, 'node-images.yaml'), 'apiVersion: nodeimages\n');
  writeFileSync(join(dir, 'hashes.json'), '{"clusterStack":"abcdef123"}\n');
  // The registry stores bytes; a gzip stream is enough to stand for the charts.
  writeFileSync(join(dir, 'docker-scs-1-34-cluster-addon-v1.tgz'), gzipSync(`addon${salt}`));
  writeFileSync(join(dir, 'docker-scs-1-34-cluster-class-v1.tgz'), gzipSync(`class${salt}`));
  return dir;
}

interface Manifest {
  mediaType: string;
  artifactType: string;
  layers: Array<{ mediaType: string; digest: string; size: number; annotations: Record<string, string> }>;
  annotations: Record<string, string>;
}

async function getManifest(
  base: string,
  repo: string,
  ref: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; digest: string | null; manifest?: Manifest }> {
  const res = await fetch(`${base}/v2/${repo}/manifests/${ref}`, {
    headers: { accept: MANIFEST, ...headers },
  });
  const body = await res.text();
  return {
    status: res.status,
    digest: res.headers.get('docker-content-digest'),
    ...(res.ok ? { manifest: JSON.parse(body) as Manifest } : {}),
  };
}

const sha256 = (b: Uint8Array) => `sha256:${createHash('sha256').update(b).digest('hex')}`;
const basic = (user: string, password: string) =>
  `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

describe('the csctl push helper', () => {
  let reg: TestRegistry;
  before(async () => {
    reg = await registry();
  });

  it('writes an image manifest v1.1 with csctl artifact type, media types, titles and annotations', async () => {
    const repo = `scs/${uniqueName('push')}`;
    const dir = releaseAssets('push');
    const pushed = await pushCsctlRelease({
      registry: reg.host,
      repository: repo,
      tag: 'docker-scs-1-34-v1',
      dir,
      ca: reg.ca,
      annotations: { kubernetesVersion: 'v1.34.1', hash: 'abcdef1' },
    });
    assert.match(pushed.digest, /^sha256:[0-9a-f]{64}$/);
    const got = await getManifest(reg.url, repo, 'docker-scs-1-34-v1');
    assert.equal(got.status, 200);
    assert.equal(got.digest, pushed.digest);
    const m = got.manifest as Manifest;
    assert.equal(m.mediaType, MANIFEST);
    assert.equal(m.artifactType, 'application/vnd.scs.cluster-stacks.v1');
    assert.deepEqual(
      Object.fromEntries(m.layers.map((l) => [l.annotations['org.opencontainers.image.title'], l.mediaType])),
      csctlMediaTypes,
    );
    assert.equal(m.annotations.kubernetesVersion, 'v1.34.1');
    assert.equal(m.annotations.hash, 'abcdef1');
    assert.ok(m.annotations['org.opencontainers.image.created'], 'oras stamps the creation time');
    const addon = m.layers.find((l) =>
      l.annotations['org.opencontainers.image.title']?.includes('cluster-addon'),
    );
    const blob = new Uint8Array(
      await (await fetch(`${reg.url}/v2/${repo}/blobs/${addon?.digest}`)).arrayBuffer(),
    );
    assert.equal(sha256(blob), addon?.digest);
    assert.deepEqual(Buffer.from(blob), gzipSync('addon'));
  });

  it('moves a tag to a new digest when other content is pushed under it; the old digest stays readable', async () => {
    const repo = `scs/${uniqueName('moved')}`;
    const tag = 'docker-scs-1-34-v2';
    // A fixed creation time: otherwise oras stamps the push time and every push has its own digest.
    const created = { 'org.opencontainers.image.created': '2026-01-01T00:00:00Z' };
    const push = (dir: string) =>
      pushCsctlRelease({ registry: reg.host, repository: repo, tag, dir, ca: reg.ca, annotations: created });
    const first = await push(releaseAssets('moved-a'));
    const again = await push(releaseAssets('moved-a'));
    assert.equal(again.digest, first.digest, 'the same content and created time give the same digest');
    const moved = await push(releaseAssets('moved-b', '# moved\n'));
    assert.notEqual(moved.digest, first.digest);
    assert.equal((await getManifest(reg.url, repo, tag)).digest, moved.digest);
    assert.equal((await getManifest(reg.url, repo, first.digest)).status, 200);
  });
});

describe('htpasswd authentication', () => {
  const user = 'publisher';
  const password = 'pw-with:colon';
  let reg: TestRegistry;
  before(async () => {
    reg = await registry({ auth: { kind: 'htpasswd', user, password } });
  });

  it('answers 401 with a Basic challenge, and 200 with the credentials', async () => {
    const anon = await fetch(`${reg.url}/v2/`);
    assert.equal(anon.status, 401);
    assert.match(anon.headers.get('www-authenticate') ?? '', /^Basic realm="stackflux-test"/);
    assert.equal(
      (await fetch(`${reg.url}/v2/`, { headers: { authorization: basic(user, 'wrong') } })).status,
      401,
    );
    assert.equal(
      (await fetch(`${reg.url}/v2/`, { headers: { authorization: basic(user, password) } })).status,
      200,
    );
  });

  it('takes a push with the credentials and refuses one without', async () => {
    const repo = `scs/${uniqueName('basic')}`;
    const dir = releaseAssets('basic');
    await assert.rejects(
      pushCsctlRelease({ registry: reg.host, repository: repo, tag: 'v1', dir, ca: reg.ca }),
      /basic credential not found/,
    );
    const pushed = await pushCsctlRelease({
      registry: reg.host,
      repository: repo,
      tag: 'v1',
      dir,
      ca: reg.ca,
      creds: { user, password },
    });
    const got = await getManifest(reg.url, repo, 'v1', { authorization: basic(user, password) });
    assert.equal(got.digest, pushed.digest);
  });
});

describe('Docker token authentication', () => {
  const user = 'robot';
  const password = 'token-secret';
  let reg: TestRegistry;
  before(async () => {
    reg = await registry({ auth: { kind: 'token', user, password, anonymousPull: true } });
  });

  /** Follows the registry's Bearer challenge for `scope` to a token. */
  async function token(scope: string, authorization?: string): Promise<{ status: number; token?: string }> {
    const challenge = (await fetch(`${reg.url}/v2/`)).headers.get('www-authenticate') ?? '';
    const realm = /realm="([^"]+)"/.exec(challenge)?.[1] ?? '';
    const service = /service="([^"]+)"/.exec(challenge)?.[1] ?? '';
    const url = `${realm}?service=${encodeURIComponent(service)}&scope=${encodeURIComponent(scope)}`;
    const res = await fetch(url, authorization ? { headers: { authorization } } : {});
    return {
      status: res.status,
      ...(res.ok ? { token: ((await res.json()) as { token: string }).token } : {}),
    };
  }

  it('challenges with the token realm and service, and a pushed release is pulled with a bearer token', async () => {
    const challenge = (await fetch(`${reg.url}/v2/`)).headers.get('www-authenticate') ?? '';
    assert.match(challenge, /^Bearer realm="https:\/\/127\.0\.0\.1:\d+\/token",service="127\.0\.0\.1:\d+"/);
    const repo = `scs/${uniqueName('token')}`;
    const pushed = await pushCsctlRelease({
      registry: reg.host,
      repository: repo,
      tag: 'v1',
      dir: releaseAssets('token'),
      ca: reg.ca,
      creds: { user, password },
    });
    assert.ok(
      reg.tokenServer?.requests.some(
        (r) => r.user === user && r.granted.includes(`repository:${repo}:pull,push`),
      ),
      'the push went through the token server with the credentials',
    );
    const authed = await token(`repository:${repo}:pull`, basic(user, password));
    const got = await getManifest(reg.url, repo, 'v1', { authorization: `Bearer ${authed.token}` });
    assert.equal(got.digest, pushed.digest);
    assert.equal((await getManifest(reg.url, repo, 'v1')).status, 401, 'no token, no manifest');
  });

  it('grants anonymous pull but not push, and refuses wrong credentials', async () => {
    const repo = `scs/${uniqueName('anon')}`;
    await pushCsctlRelease({
      registry: reg.host,
      repository: repo,
      tag: 'v1',
      dir: releaseAssets('anon'),
      ca: reg.ca,
      creds: { user, password },
    });
    const anon = await token(`repository:${repo}:pull,push`);
    assert.equal(anon.status, 200);
    const bearer = { authorization: `Bearer ${anon.token}` };
    assert.equal((await getManifest(reg.url, repo, 'v1', bearer)).status, 200);
    const upload = await fetch(`${reg.url}/v2/${repo}/blobs/uploads/`, { method: 'POST', headers: bearer });
    assert.equal(upload.status, 401);
    await assert.rejects(
      pushCsctlRelease({
        registry: reg.host,
        repository: repo,
        tag: 'v2',
        dir: releaseAssets('anon'),
        ca: reg.ca,
      }),
      /401|unauthorized|denied/i,
    );
    assert.equal((await token(`repository:${repo}:pull`, basic(user, 'wrong'))).status, 401);
  });
});

describe('push notifications', () => {
  const received: Array<{ headers: Record<string, unknown>; body: unknown }> = [];
  let listener: Server;
  let reg: TestRegistry;
  before(async () => {
    listener = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received.push({ headers: req.headers, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) });
        res.end();
      });
    });
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    const addr = listener.address();
    const port = typeof addr === 'object' && addr ? addr.port : 0;
    stops.push(() => new Promise<void>((resolve) => listener.close(() => resolve())));
    reg = await registry({
      notifications: {
        url: `http://127.0.0.1:${port}/events`,
        headers: { 'X-Stackflux-Test': 'hook-secret' },
      },
    });
  });

  it('POSTs a push event naming repository, tag, digest and media type to the endpoint', async (t) => {
    const repo = `scs/${uniqueName('notify')}`;
    const tag = 'docker-scs-1-34-v3';
    const pushed = await pushCsctlRelease({
      registry: reg.host,
      repository: repo,
      tag,
      dir: releaseAssets('notify'),
      ca: reg.ca,
    });
    interface Event {
      action: string;
      target: { repository: string; digest: string; tag?: string; mediaType: string };
      request: { method: string; host: string };
    }
    const delivery = await eventually(
      'the manifest push event',
      async () =>
        received.find((r) =>
          (r.body as { events: Event[] }).events.some((e) => e.action === 'push' && e.target.tag === tag),
        ),
      { timeoutMs: 30_000 },
    );
    const event = (delivery.body as { events: Event[] }).events.find((e) => e.target.tag === tag) as Event;
    t.diagnostic(`notification event: ${JSON.stringify(event)}`);
    assert.equal(delivery.headers['x-stackflux-test'], 'hook-secret');
    assert.match(
      String(delivery.headers['content-type']),
      /application\/vnd\.docker\.distribution\.events\.v\d\+json/,
    );
    assert.equal(event.target.repository, repo);
    assert.equal(event.target.digest, pushed.digest);
    assert.equal(event.target.mediaType, MANIFEST);
    assert.equal(event.request.method, 'PUT');
    assert.equal(event.request.host, reg.host);
  });
});

describe('the OCI fault proxy', () => {
  let reg: TestRegistry;
  let proxy: OciFaultProxy;
  const repo = `scs/${uniqueName('fault')}`;
  let manifest: Manifest;
  let digest = '';
  before(async () => {
    reg = await registry();
    proxy = await OciFaultProxy.start(reg.url, reg.caPem);
    stops.push(() => proxy.stop());
    // Through the proxy: upload Locations must name the proxy for the push to pass through it.
    digest = (
      await pushCsctlRelease({
        registry: proxy.host,
        repository: repo,
        tag: 'v1',
        dir: releaseAssets('fault'),
        plainHttp: true,
      })
    ).digest;
    manifest = (await getManifest(reg.url, repo, 'v1')).manifest as Manifest;
  });

  it('forwarded the whole push through itself', () => {
    assert.equal(proxy.requests((r) => r.method === 'PUT' && r.path.includes('/manifests/v1')).length, 1);
    // Six assets and the empty config blob, each uploaded through the proxy.
    assert.equal(proxy.requests((r) => r.method === 'PUT' && r.path.includes('/blobs/uploads/')).length, 7);
  });

  it('answers 429 with Retry-After, 503 and 401 while set, for as many requests as told', async () => {
    proxy.set('rate-limit', { retryAfterSeconds: 7, times: 1 });
    const limited = await fetch(`${proxy.url}/v2/${repo}/manifests/v1`, { headers: { accept: MANIFEST } });
    assert.equal(limited.status, 429);
    assert.equal(limited.headers.get('retry-after'), '7');
    assert.equal(
      (await getManifest(proxy.url, repo, 'v1')).digest,
      digest,
      'times: 1 lets the next one pass',
    );

    proxy.set('unavailable');
    assert.equal((await getManifest(proxy.url, repo, 'v1')).status, 503);
    proxy.set('unauthorized');
    const denied = await fetch(`${proxy.url}/v2/`);
    assert.equal(denied.status, 401);
    assert.match(denied.headers.get('www-authenticate') ?? '', /^Basic /);
    proxy.set('pass');
    assert.equal((await getManifest(proxy.url, repo, 'v1')).status, 200);
  });

  it('holds a request without an answer while hanging, and drops it when switched back', async () => {
    proxy.set('hang');
    const outcome = fetch(`${proxy.url}/v2/${repo}/manifests/v1`, { headers: { accept: MANIFEST } }).then(
      (r) => `answered ${r.status}`,
      () => 'connection dropped',
    );
    await eventually('the request to hang', async () => (proxy.hanging === 1 ? true : undefined), {
      timeoutMs: 10_000,
      intervalMs: 20,
    });
    proxy.set('pass');
    assert.equal(await outcome, 'connection dropped');
    const last = await eventually('the hung request logged', async () =>
      proxy.requests((r) => r.fault === 'hang').at(-1),
    );
    assert.equal(last.status, 0);
  });

  it('stalls a blob download midway: status and part of the body, then nothing until switched back', async () => {
    const layer = manifest.layers[0];
    assert.ok(layer);
    proxy.set('stall');
    const res = await fetch(`${proxy.url}/v2/${repo}/blobs/${layer.digest}`);
    assert.equal(res.status, 200, 'the headers arrive');
    const reader = res.body?.getReader();
    const first = await reader?.read();
    assert.ok(first?.value && first.value.length > 0 && first.value.length < layer.size);
    const rest = reader?.read().then(
      () => 'more body',
      () => 'connection dropped',
    );
    assert.equal(proxy.hanging, 1);
    proxy.set('pass');
    assert.equal(await rest, 'connection dropped');
  });

  it('corrupts blob bytes (digest mismatch) but not manifests, and logs requests and bytes', async () => {
    const layer = manifest.layers[0];
    assert.ok(layer);
    const blobPath = `/v2/${repo}/blobs/${layer.digest}`;
    const logged = proxy.log.length;
    proxy.set('corrupt-blob', { times: 1 });
    assert.equal((await getManifest(proxy.url, repo, 'v1')).digest, digest, 'manifests are not touched');
    const bad = new Uint8Array(await (await fetch(`${proxy.url}${blobPath}`)).arrayBuffer());
    assert.equal(bad.length, layer.size);
    assert.notEqual(sha256(bad), layer.digest);
    const good = new Uint8Array(await (await fetch(`${proxy.url}${blobPath}`)).arrayBuffer());
    assert.equal(sha256(good), layer.digest);
    const isBlobGet = (r: OciProxyRequest) => r.method === 'GET' && r.path === blobPath;
    const blobGets = proxy.log.slice(logged).filter(isBlobGet);
    assert.deepEqual(
      blobGets.map((r) => [r.fault, r.status, r.bytes]),
      [
        ['corrupt-blob', 200, layer.size],
        ['pass', 200, layer.size],
      ],
    );
    assert.equal(
      proxy.bytes((r) => isBlobGet(r) && r.fault !== 'stall'),
      2 * layer.size,
    );
  });
});
