// Issue 22 rows 3 and 12 at the command line: `stackflux render` takes the same tenancy flags as
// `stackflux run` (offline = live) and `stackflux install` passes them to the controller; bad
// values are usage errors naming the flag.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { main } from '../../../controller/cli/main.ts';
import { captureIO } from '../../support/cli.ts';

const GOLDEN = new URL('../../golden/', import.meta.url).pathname;
const work = mkdtempSync(join(tmpdir(), 'stackflux-tenancy-'));

// biome-ignore lint/suspicious/noExplicitAny: Kustomization bodies read back from the render output
type Doc = Record<string, any>;
const kustomization = (out: string, ns: string, name: string): Doc =>
  parseYaml(
    readFileSync(
      join(out, 'apply/namespaces', ns, 'kustomize.toolkit.fluxcd.io/kustomizations', `${name}.body.yaml`),
      'utf8',
    ),
  ) as Doc;

async function render(input: string, name: string, extra: string[]): Promise<string> {
  const out = join(work, name);
  const c = captureIO();
  const code = await main(
    [
      'render',
      '--input-dir',
      join(GOLDEN, input, 'input'),
      '--output-dir',
      out,
      '--now',
      '2025-03-02T12:00:00Z',
      ...extra,
    ],
    c.io,
  );
  assert.equal(code, 0, c.err());
  return out;
}

describe('tenancy flags (issue 22)', () => {
  after(() => rmSync(work, { recursive: true, force: true }));

  it('render --default-service-account: the release Kustomization and Helm addon Kustomizations impersonate it, kubeConfig ones do not', async () => {
    const full = await render('full-pipeline', 'full', ['--default-service-account=tenant-applier']);
    assert.equal(
      kustomization(full, 'team-a', 'docker-ferrol-1-30-v1').spec.serviceAccountName,
      'tenant-applier',
    );
    const cni = kustomization(full, 'team-a', 'prod-1.cni');
    assert.ok(cni.spec.kubeConfig, 'a manifest addon applies through the kubeconfig');
    assert.equal(cni.spec.serviceAccountName, undefined);

    const helm = await render('helm-addon-render', 'helm', ['--default-service-account=tenant-applier']);
    const helmKs = readFileSync(
      join(
        helm,
        'apply/namespaces/team-a/kustomize.toolkit.fluxcd.io/kustomizations/prod-1.podinfo.helm.body.yaml',
      ),
      'utf8',
    );
    assert.equal((parseYaml(helmKs) as Doc).spec.serviceAccountName, 'tenant-applier');

    const unset = await render('full-pipeline', 'unset', []);
    assert.equal(kustomization(unset, 'team-a', 'docker-ferrol-1-30-v1').spec.serviceAccountName, undefined);
  });

  it('render --allowed-chart-hosts: a chart from another host is InvalidRelease on the ClusterAddon', async () => {
    const out = await render('helm-addon-render', 'allow', ['--allowed-chart-hosts=charts.example.com']);
    const results = readFileSync(join(out, 'results.yaml'), 'utf8');
    assert.match(results, /InvalidRelease/);
    assert.match(results, /host ghcr\.io is not in --allowed-chart-hosts \(charts\.example\.com\)/);
  });

  it('bad flag values are usage errors naming the flag', async () => {
    for (const [flag, re] of [
      [
        '--default-service-account=Not_A_Name',
        /--default-service-account "Not_A_Name" is not a ServiceAccount name/,
      ],
      [
        '--allowed-chart-hosts=https://x.example',
        /--allowed-chart-hosts: "https:\/\/x\.example" is not a host name/,
      ],
      ['--allowed-chart-hosts=a.example,x.example:5000', /"x\.example:5000" is not a host name/],
    ] as const) {
      const c = captureIO();
      const code = await main(
        [
          'render',
          '--input-dir',
          join(GOLDEN, 'full-pipeline', 'input'),
          '--output-dir',
          join(work, 'bad'),
          flag,
        ],
        c.io,
      );
      assert.notEqual(code, 0);
      assert.match(c.err(), re);
    }
  });

  it('install --export passes the flags to the controller', async () => {
    const c = captureIO();
    const code = await main(
      [
        'install',
        '--export',
        '--default-service-account=tenant-applier',
        '--allowed-chart-hosts=ghcr.io,*.example.com',
      ],
      c.io,
    );
    assert.equal(code, 0, c.err());
    assert.match(c.out(), /- --default-service-account=tenant-applier\n/);
    assert.match(c.out(), /- --allowed-chart-hosts=ghcr\.io,\*\.example\.com\n/);
  });
});
