// The ClusterClass names after `stackflux convert`, against what CSO does with the real helm CLI:
// for each version of a CSO ClusterStack, CSO creates ClusterStackRelease
// <provider>-<name>-<k8s>-<version> (clusterstack.New(...).String(), ported as csoReleaseName) and
// runs `helm template <its first four dash-parts> <cluster-class chart, version as csctl wrote it>`;
// the Clusters name the ClusterClass that prints. stackflux, from the converted ClusterStack,
// pins the tag formatReleaseTag gives and renders the cluster-class itself
// (renderCsctlClusterClass). Both must agree on the release and on the ClusterClass, for the
// stable channel and for csctl's hash mode (custom channel, v0-sha.<hash>).
// npm test: uses no test environment
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { convertClusterStacks, csoReleaseName } from '../../../controller/convert/cso.ts';
import { readReleaseDescription } from '../../../controller/releases/format.ts';
import {
  clusterClassNameForTag,
  formatReleaseTag,
  parseReleaseTag,
} from '../../../controller/releases/tags.ts';
import { renderCsctlClusterClass } from '../../../controller/rendering/clusterclass.ts';
import {
  configureGoEngine,
  parseGoYaml,
  runGoEngineCall,
} from '../../../controller/rendering/goengine/index.ts';
import { readStackDir } from '../../../hack/lib/stack-dir.ts';
import { goEngineBuild, runHelm } from '../../support/goengine.ts';

const STACK = join(import.meta.dirname, '..', '..', '..', 'stacks', 'docker-csoferrol-1-30');
const NS = 'tenant-b';
const work = mkdtempSync(join(tmpdir(), 'stackflux-convert-classnames-'));

before(() => {
  configureGoEngine({ path: join(goEngineBuild(), 'goengine.wasm') });
});
after(() => rmSync(work, { recursive: true, force: true }));

/** The ClusterClass CSO applies for ClusterStackRelease `csr` whose csctl version is `version`. */
function csoClusterClassName(csr: string, version: string): string {
  const dir = join(work, csr);
  cpSync(join(STACK, 'cluster-class'), join(dir, 'cluster-class'), { recursive: true });
  const chartYaml = join(dir, 'cluster-class', 'Chart.yaml');
  writeFileSync(chartYaml, readFileSync(chartYaml, 'utf8').replace(/^version: .*$/m, `version: ${version}`));
  const releaseName = csr.split('-').slice(0, 4).join('-');
  const helm = runHelm(['template', releaseName, 'cluster-class', '--namespace', NS], dir);
  assert.equal(helm.status, 0, helm.stderr);
  const parsed = parseGoYaml(helm.stdout);
  assert.ok(parsed.ok);
  const classes = parsed.documents.filter(
    (d): d is { kind: string; metadata: { name: string } } =>
      d !== null && typeof d === 'object' && (d as { kind?: unknown }).kind === 'ClusterClass',
  );
  assert.equal(classes.length, 1);
  return classes[0]?.metadata.name ?? '';
}

/** The ClusterClass stackflux renders for release `tag`. */
function stackfluxClusterClassName(tag: string): string {
  const tree = readStackDir(STACK);
  const parsed = parseReleaseTag(tag);
  assert.ok(parsed.ok, parsed.ok ? '' : parsed.reason);
  const description = readReleaseDescription(tree, parsed.value);
  assert.ok(description.ok, JSON.stringify(description));
  const rendered = renderCsctlClusterClass((call) => runGoEngineCall(call, 64 * 2 ** 20), {
    tree,
    description: description.value,
    tag,
    namespace: NS,
  });
  assert.ok(rendered.ok, JSON.stringify(rendered));
  const cls = rendered.value.objects.find((o) => o.kind === 'ClusterClass') as { metadata: { name: string } };
  return cls.metadata.name;
}

describe('convert keeps the ClusterClass names: CSO (helm CLI) == stackflux (its csctl render)', () => {
  for (const [channel, versions] of [
    ['stable', ['v1', 'v3']],
    ['custom', ['v0-sha.a1b2c3d']],
  ] as const) {
    it(`${channel} channel, versions ${versions.join(', ')}`, () => {
      const cso = {
        apiVersion: 'clusterstack.x-k8s.io/v1alpha1',
        kind: 'ClusterStack',
        metadata: { name: 'docker-csoferrol', namespace: NS },
        spec: {
          provider: 'docker',
          name: 'csoferrol',
          kubernetesVersion: '1.30',
          channel,
          versions,
          noProvider: true,
        },
      };
      const converted = convertClusterStacks([cso], {
        git: { url: 'https://git.example.com/stacks.git' },
        secretName: 'unused',
      });
      assert.deepEqual(converted.problems, []);
      const spec = converted.objects[0]?.spec;
      assert.ok(spec);
      for (const version of spec.versions ?? []) {
        const csr = csoReleaseName(cso.spec.provider, cso.spec.name, cso.spec.kubernetesVersion, version);
        const tag = formatReleaseTag(spec.provider, spec.name, spec.kubernetesVersion, version);
        assert.equal(tag, csr, "stackflux's ClusterStackRelease is CSO's");
        const theirs = csoClusterClassName(csr, version);
        assert.equal(stackfluxClusterClassName(tag), theirs, 'the ClusterClass the Clusters name');
        assert.equal(clusterClassNameForTag(tag), theirs, 'the name stackflux matches Clusters by');
      }
    });
  }
});
