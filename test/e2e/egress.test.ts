// Issue 31 F1 end to end: `stackflux run` as a subprocess against the real API server, with the
// test environment's allow-list (127.0.0.1/32) and two tenant registries of its own (small node
// servers on 127.0.0.1, as a tenant's registry would be anywhere):
// - "realm": answers every request 401 with a Bearer realm on 127.0.0.2, a fake cloud metadata
//   endpoint (loopback, not in the allow-list). The metadata endpoint must get no request, and the
//   ClusterStack's SourceReady names the refused realm and the flag.
// - "mismatch": lists a release whose one layer comes back as the metadata answer instead of the
//   bytes its descriptor names (same size). The release gets DigestMismatch, and no event,
//   condition or log line tells the digest of what came back (which let a second manifest accept
//   them) or its content. (A size that differs is not told either: test/unit/sources/oci.test.ts.)
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { ClusterStack } from '../../controller/api/clusterstack.ts';
import { API_VERSION } from '../../controller/api/meta.ts';
import type { KubeObject } from '../../controller/runtime/client.ts';
import { CSCTL_ARTIFACT_TYPE, OCI_MANIFEST, sha256Digest } from '../../controller/sources/oci.ts';
import { createRepo, type Endpoints } from '../../hack/lib/testenv.ts';
import { csoferrolClusterStack, csoferrolTag as tag } from '../support/csctl.ts';
import {
  ControllerProcess,
  cond,
  createTestNamespace,
  deleteTestNamespace,
  e2eSuite,
  releaseControllerHolds,
  waitFor,
} from '../support/e2e.ts';
import {
  METADATA_ANSWER,
  type RecordingServer,
  startMetadataServer,
  startRealmRegistry,
  startServer,
} from '../support/egress.ts';

const { env, client, ns, work } = e2eSuite('egress');
const REPOSITORY = 'scs/stacks';
/**
 * What the mismatch registry sends for the layer: the metadata answer, padded to the size the
 * descriptor names (so only its digest tells it apart — the digest the old message told).
 */
const SERVED = Buffer.from(METADATA_ANSWER.padEnd(4321, ' '));

type CS = ClusterStack & KubeObject;

let controller: ControllerProcess | undefined;
let metadata: RecordingServer;
let realmRegistry: RecordingServer;
let mismatchRegistry: RecordingServer;

async function step(fn: () => Promise<void>): Promise<void> {
  if (controller === undefined) throw new Error('the controller did not start');
  await controller.step(fn);
}

/** A csctl release manifest whose one layer names bytes that are not SERVED. */
function manifest(): { bytes: Buffer; digest: string } {
  const layer = Buffer.from('cluster-addon-values: {}\n'.padEnd(SERVED.byteLength, ' '));
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
          digest: sha256Digest(layer),
          size: layer.byteLength,
          annotations: { 'org.opencontainers.image.title': 'cluster-addon-values.yaml' },
        },
      ],
    }),
  );
  return { bytes, digest: sha256Digest(bytes) };
}

/** The mismatch registry: one release tag, its manifest, and SERVED for every blob. */
function startMismatchRegistry(): Promise<RecordingServer> {
  const m = manifest();
  return startServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    if (path === `/v2/${REPOSITORY}/tags/list`)
      return res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ name: REPOSITORY, tags: [tag('v1')] }));
    if (
      path === `/v2/${REPOSITORY}/manifests/${tag('v1')}` ||
      path === `/v2/${REPOSITORY}/manifests/${m.digest}`
    )
      return res
        .writeHead(200, { 'content-type': OCI_MANIFEST, 'docker-content-digest': m.digest })
        .end(req.method === 'HEAD' ? undefined : m.bytes);
    if (path.startsWith(`/v2/${REPOSITORY}/blobs/`)) return res.writeHead(200).end(SERVED);
    res.writeHead(404, { 'content-type': 'application/json' }).end('{"errors":[{"code":"NAME_UNKNOWN"}]}');
  });
}

const ociStack = (name: string, stackName: string, host: string, versions: string[]): CS => {
  const cs = csoferrolClusterStack(ns, '', versions, {
    name: stackName,
    interval: '5s',
    source: { oci: { url: `oci://${host}/${REPOSITORY}`, insecure: true } },
  });
  return { ...cs, metadata: { name, namespace: ns } };
};

/** Every event, condition and log line the run produced, as text. */
async function everythingSaid(): Promise<string> {
  const events = (await client.list('v1', 'Event', { namespace: ns })).items.map(
    (e) => `${(e as { reason?: string }).reason}: ${(e as { message?: string }).message}`,
  );
  const conditions: string[] = [];
  for (const kind of ['ClusterStack', 'ClusterStackRelease'])
    for (const o of (await client.list(API_VERSION, kind, { namespace: ns })).items)
      conditions.push(JSON.stringify((o as { status?: unknown }).status ?? {}));
  return [...events, ...conditions, ...(controller?.logLines ?? [])].join('\n');
}

describe('F1: a tenant registry cannot make the controller reach inside the platform', {
  timeout: 10 * 60_000,
}, () => {
  before(async () => {
    await createTestNamespace(client, ns);
    metadata = await startMetadataServer();
    realmRegistry = await startRealmRegistry(
      `${metadata.url}/latest/meta-data/iam/security-credentials/node`,
    );
    mismatchRegistry = await startMismatchRegistry();
    controller = await ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: ns,
      cacheDir: `${work}/cache`,
      extraArgs: [
        `--fleet-url=${await createRepo(env as Endpoints, `${ns}-fleet`)}`,
        // What the test environment allows anyway (STACKFLUX_ALLOW_SOURCE_NETWORKS), said here.
        '--allow-source-networks=127.0.0.1/32',
      ],
    });
    await client.create(ociStack('realm', 'csrealm', new URL(realmRegistry.url).host, []));
    await client.create(ociStack('mismatch', 'csoferrol', new URL(mismatchRegistry.url).host, ['v1']));
  });

  after(async () => {
    await controller?.stop();
    await Promise.all([metadata?.close(), realmRegistry?.close(), mismatchRegistry?.close()]);
    await releaseControllerHolds(client, ns);
    await deleteTestNamespace(client, ns);
    client.close();
  });

  it('1. a Bearer realm on 127.0.0.2: refused, named in SourceReady; the metadata endpoint gets nothing', () =>
    step(async () => {
      const c = await waitFor('SourceReady=False EgressRefused on the realm stack', async () => {
        const got = cond(await client.get<CS>(API_VERSION, 'ClusterStack', 'realm', ns), 'SourceReady');
        return got?.status === 'False' && got.reason === 'EgressRefused' ? got : undefined;
      });
      assert.match(
        c.message ?? '',
        new RegExp(
          `the token realm ${metadata.url.replaceAll('.', '\\.')}: 127\\.0\\.0\\.2 is a loopback address, not in --allow-source-networks`,
        ),
      );
      assert.ok(realmRegistry.requests.length > 0, 'the registry itself was asked');
      assert.deepEqual(metadata.requests, [], 'the metadata endpoint got no request');
    }));

  it('2. a layer that is not its descriptor: DigestMismatch, and nothing tells the digest or content of what came back', () =>
    step(async () => {
      await waitFor('a DigestMismatch event for the release', async () =>
        (await client.list('v1', 'Event', { namespace: ns })).items.find(
          (e) =>
            (e as { reason?: string }).reason === 'DigestMismatch' &&
            (e as { involvedObject?: { name?: string } }).involvedObject?.name === tag('v1'),
        ),
      );
      const said = await everythingSaid();
      assert.match(
        said,
        /layer cluster-addon-values\.yaml \(sha256:[0-9a-f]{64}\): the content does not match its digest/,
      );
      assert.ok(!said.includes(sha256Digest(SERVED)), 'the digest of the served bytes is told somewhere');
      assert.ok(!said.includes('ASIAFAKEMETADATA'), 'the served bytes themselves are told somewhere');
      assert.deepEqual(metadata.requests, []);
    }));
});
