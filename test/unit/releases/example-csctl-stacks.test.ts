// The csctl-format example stacks in stacks/ (new stages layout and old umbrella layout) read
// through the release-format interface as the conformance command reads any stack folder, and
// their vendored subcharts are exactly what hack/build-stack-charts.ts builds.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { vendoredCharts } from '../../../hack/build-stack-charts.ts';
import { conformanceReport } from '../../../hack/conformance.ts';

const ROOT = new URL('../../../', import.meta.url).pathname;

async function report(stack: string, version?: string) {
  const r = await conformanceReport(join(ROOT, 'stacks', stack), version === undefined ? {} : { version });
  assert.ok(r.ok, JSON.stringify(r));
  return r;
}

describe('csctl example stacks', () => {
  it('docker-csoferrol-1-30: two stages of two umbrella charts with overwrite.yaml, into kube-system', async () => {
    const r = await report('docker-csoferrol-1-30');
    assert.equal(r.tag, 'docker-csoferrol-1-30-v1');
    const d = r.description;
    assert.deepEqual(
      [d.format, d.provider, d.name, d.kubernetesVersion, d.version],
      ['csctl', 'docker', 'csoferrol', 'v1.30.4', 'v1'],
    );
    assert.deepEqual(d.clusterClass, { kind: 'helm-chart', path: 'cluster-class/' });
    assert.deepEqual(
      d.addons.map(
        (a) =>
          `${a.stage}/${a.name} ${a.action} after [${a.dependsOn}] in ${a.targetNamespace} values ${a.valuesTemplate}`,
      ),
      [
        'AfterControlPlaneInitialized/cni apply after [] in kube-system values cluster-addon/cni/overwrite.yaml',
        'AfterControlPlaneInitialized/metrics apply after [cni] in kube-system values cluster-addon/metrics/overwrite.yaml',
        'BeforeClusterUpgrade/cni apply after [] in kube-system values cluster-addon/cni/overwrite.yaml',
        'BeforeClusterUpgrade/metrics apply after [cni] in kube-system values cluster-addon/metrics/overwrite.yaml',
      ],
    );
    assert.equal(d.addons[2]?.waitForPostCondition?.conditions, 'cniconfig.data.clusterName != ""');
    assert.deepEqual(r.files.binary, [
      'cluster-addon/cni/charts/cni-config-0.1.0.tgz',
      'cluster-addon/metrics/charts/metrics-config-0.1.0.tgz',
    ]);
  });

  it('docker-csoferrol-1-30-umbrella: the old layout, one chart and cluster-addon-values.yaml', async () => {
    const r = await report('docker-csoferrol-1-30-umbrella', 'v2');
    assert.equal(r.tag, 'docker-csoferrol-1-30-v2');
    assert.equal(r.description.csctl?.layout, 'umbrella');
    assert.deepEqual(
      r.description.addons.map((a) => [a.name, a.path, a.valuesTemplate, a.stage]),
      [['cluster-addon', 'cluster-addon/', 'cluster-addon-values.yaml', undefined]],
    );
  });

  it('vendors exactly the archives hack/build-stack-charts.ts builds, laid out as helm package does', () => {
    const built = vendoredCharts();
    assert.equal(built.size, 4);
    for (const [rel, bytes] of built) {
      assert.ok(
        readFileSync(join(ROOT, rel)).equals(bytes),
        `${rel} is stale: run node hack/build-stack-charts.ts`,
      );
      const tar = gunzipSync(bytes);
      const first = tar.subarray(0, 100).toString('ascii').replace(/\0.*$/s, '');
      const chart = rel
        .split('/')
        .at(-1)
        ?.replace(/-\d+\.\d+\.\d+\.tgz$/, '');
      assert.equal(first, `${chart}/Chart.yaml`);
    }
  });
});
