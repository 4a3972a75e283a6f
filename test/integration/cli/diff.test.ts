// `stackflux diff` against the real API server: a ClusterStack with no releases yet shows the
// release, its GitRepository and Kustomization as additions (exit 1); --export-snapshot writes a
// snapshot that `render` accepts.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { CommandIO } from '../../../controller/cli/command.ts';
import { main } from '../../../controller/cli/main.ts';
import { KubeClient, type KubeObject } from '../../../controller/runtime/client.ts';
import { installCrds } from '../../../hack/lib/crds.ts';
import { kubeConfigFrom, testEnv, uniqueName } from '../../support/env.ts';

function capture(): { io: CommandIO; out: () => string; err: () => string } {
  let out = '';
  let err = '';
  return {
    io: { stdout: (t) => (out += t), stderr: (t) => (err += t), env: {} },
    out: () => out,
    err: () => err,
  };
}

const SOURCES = new URL('../../golden/new-stack/input', import.meta.url).pathname;

describe('stackflux diff', () => {
  let client: KubeClient;
  const namespace = uniqueName('sf-diff');
  before(async () => {
    client = new KubeClient(kubeConfigFrom(testEnv().kubeconfig), { qps: 200, burst: 200 });
    await installCrds(client);
    await client.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } });
    await client.apply(
      {
        apiVersion: 'stackflux.io/v1alpha1',
        kind: 'ClusterStack',
        metadata: { name: 'ferrol', namespace },
        spec: {
          noProvider: true,
          provider: 'docker',
          name: 'ferrol',
          kubernetesVersion: '1.30',
          source: { git: { url: 'https://git.example.com/stacks/ferrol.git' } },
        },
      } as KubeObject,
      { force: true, fieldManager: 'diff-test' },
    );
  });
  after(async () => {
    await client.delete('v1', 'Namespace', namespace);
    client.close();
  });

  it('prints a unified diff per object render would change, exit 1; the exported snapshot renders', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sf-diff-'));
    const c = capture();
    const args = ['diff', '-n', namespace, '--kubeconfig', testEnv().kubeconfig, '--sources-dir', SOURCES];
    const rc = await main(
      [...args, '--now', '2025-03-02T12:00:00Z', '--export-snapshot', join(dir, 'snap')],
      c.io,
    );
    assert.equal(rc, 1, c.err());
    const tag = 'docker-ferrol-1-30-v2';
    for (const path of [
      `stackflux.io/clusterstackreleases/${tag}`,
      `source.toolkit.fluxcd.io/gitrepositories/${tag}`,
      `kustomize.toolkit.fluxcd.io/kustomizations/${tag}`,
    ]) {
      assert.match(c.out(), new RegExp(`\\+\\+\\+ render/namespaces/${namespace}/${path}\\n@@ -0,0 \\+1,`));
    }
    // The ClusterStack exists: its status is a change, not an addition.
    assert.match(
      c.out(),
      new RegExp(`--- live/namespaces/${namespace}/stackflux.io/clusterstacks/ferrol\\n`),
    );
    assert.match(c.out(), /\+status:/);

    const r = capture();
    const out = join(dir, 'out');
    const renderArgs = [
      'render',
      '--input-dir',
      join(dir, 'snap'),
      '--output-dir',
      out,
      '--check-fixed-point',
    ];
    assert.equal(await main([...renderArgs, '--now', '2025-03-02T12:00:00Z'], r.io), 0, r.err());
  });
});
