// What `stackflux convert` prints for the corpus of CSO objects (test/unit/convert/corpus) is
// accepted by the real API server with this branch's ClusterStack CRD, its CEL rules included (one
// source kind, spec.source.oci's URL pattern): server-side dry-run applies of every printed object.
// A source with two kinds is refused the same way, so the check can fail.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { KubeClient, type KubeObject } from '../../../controller/runtime/client.ts';
import { createTestNamespace, deleteTestNamespace } from '../../support/e2e.ts';
import { kubeConfigFrom, testEnv, uniqueName } from '../../support/env.ts';

const CORPUS = join(import.meta.dirname, '..', '..', 'unit', 'convert', 'corpus');

/** Every object a corpus case expects convert to print, by case. */
function printed(): Array<[string, KubeObject]> {
  return readdirSync(CORPUS)
    .sort()
    .flatMap((name) =>
      parseAllDocuments(readFileSync(join(CORPUS, name, 'expected.yaml'), 'utf8')).flatMap((d) => {
        const o = d.toJS() as KubeObject | null;
        return o === null ? [] : [[name, o] as [string, KubeObject]];
      }),
    );
}

describe('stackflux convert output against the real API server', () => {
  let client: KubeClient;
  const namespace = uniqueName('sf-convert-crd');
  const dryRun = (o: KubeObject) =>
    client.apply(
      { ...o, metadata: { ...o.metadata, namespace } },
      { dryRun: true, force: true, fieldManager: 'convert-crd-test' },
    );

  before(async () => {
    client = new KubeClient(kubeConfigFrom(testEnv().kubeconfig), { qps: 100, burst: 100 });
    await createTestNamespace(client, namespace);
  });
  after(async () => {
    await deleteTestNamespace(client, namespace);
    client.close();
  });

  it('accepts every ClusterStack convert prints, OCI sources included', async () => {
    const objects = printed();
    assert.ok(
      objects.some(([, o]) => (o.spec as { source?: { oci?: unknown } })?.source?.oci !== undefined),
      'the corpus prints OCI sources',
    );
    for (const [name, o] of objects) {
      await assert.doesNotReject(dryRun(o), `${name}: ${o.metadata.name}`);
    }
  });

  it('refuses a source with two kinds (the CRD rule the unit test cannot evaluate)', async () => {
    const [, first] =
      printed().find(([, o]) => (o.spec as { source?: { oci?: unknown } })?.source?.oci !== undefined) ?? [];
    assert.ok(first !== undefined);
    const spec = first.spec as { source: Record<string, unknown> };
    const both = {
      ...first,
      spec: { ...spec, source: { ...spec.source, git: { url: 'https://x.example/y.git' } } },
    };
    await assert.rejects(dryRun(both as KubeObject), /exactly one of git, github and oci/);
  });
});
