// The csctl cluster-class render (controller/rendering/clusterclass.ts) against the helm CLI at the
// same pin, run as csctl + CSO run it: csctl writes the release version into Chart.yaml, CSO runs
// `helm template <first four dash-parts> <chart> --namespace <ns>`. The objects stackflux writes
// for Flux must be what helm printed, parsed as Go parses it; also for a stack whose Chart.yaml
// holds csctl's `<< .ClusterClassVersion >>` placeholder, which csctl replaces when it packages.
// npm test: uses no test environment
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import type { ReleaseTree } from '../../../controller/api/release.ts';
import { readReleaseDescription, releasedTree } from '../../../controller/releases/format.ts';
import { parseReleaseTag } from '../../../controller/releases/tags.ts';
import { renderCsctlClusterClass } from '../../../controller/rendering/clusterclass.ts';
import {
  configureGoEngine,
  parseGoYaml,
  runGoEngineCall,
} from '../../../controller/rendering/goengine/index.ts';
import { readStackDir } from '../../../hack/lib/stack-dir.ts';
import { csctlReleasedCopy, PLACEHOLDER_STACK } from '../../support/csctl-substitute.ts';
import { goEngineBuild, runHelm } from '../../support/goengine.ts';

const STACK = join(import.meta.dirname, '..', '..', '..', 'stacks', 'docker-csoferrol-1-30');
const TAG = 'docker-csoferrol-1-30-v3';
const NS = 'tenant-a';

before(() => {
  configureGoEngine({ path: join(goEngineBuild(), 'goengine.wasm') });
});

/** stackflux's render of the cluster-class of `tree` as release `release` (default TAG) into NS. */
function render(tree: ReleaseTree, release = TAG) {
  const tag = parseReleaseTag(release);
  assert.ok(tag.ok);
  const description = readReleaseDescription(tree, tag.value);
  assert.ok(description.ok, JSON.stringify(description));
  const ours = renderCsctlClusterClass((call) => runGoEngineCall(call, 64 * 2 ** 20), {
    tree,
    description: description.value,
    tag: release,
    namespace: NS,
  });
  assert.ok(ours.ok, JSON.stringify(ours));
  return ours;
}

describe('csctl cluster-class: stackflux == helm template as CSO runs it', () => {
  it(`renders ${TAG} into namespace ${NS} exactly as the helm CLI does`, () => {
    const ours = render(readStackDir(STACK));

    const work = mkdtempSync(join(tmpdir(), 'stackflux-csoclass-'));
    cpSync(join(STACK, 'cluster-class'), join(work, 'cluster-class'), { recursive: true });
    const chartYaml = join(work, 'cluster-class', 'Chart.yaml');
    writeFileSync(chartYaml, readFileSync(chartYaml, 'utf8').replace(/^version: .*$/m, 'version: v3'));
    const helm = runHelm(['template', 'docker-csoferrol-1-30', 'cluster-class', '--namespace', NS], work);
    assert.equal(helm.status, 0, helm.stderr);
    const theirs = parseGoYaml(helm.stdout);
    assert.ok(theirs.ok);
    const objects = theirs.documents.filter((d) => d !== null);
    assert.deepEqual(ours.value.objects, objects);
    assert.deepEqual(
      [...ours.value.files.values()].map((f) => JSON.parse(f) as unknown),
      objects,
    );
    const cls = objects.find((o) => (o as { kind?: string }).kind === 'ClusterClass') as {
      metadata: { name: string; labels?: Record<string, string> };
    };
    assert.equal(cls.metadata.name, TAG);
  });

  it('renders a stack with csctl placeholders as helm renders the chart csctl packages from it', () => {
    // Issue 32: the tree as the controller reads the Git tag; helm on the folder csctl create packages.
    const { dir, tag, version, releaseName } = PLACEHOLDER_STACK;
    const ours = render(releasedTree(readStackDir(dir), tag), tag);
    const packaged = csctlReleasedCopy(dir, version);
    const helm = runHelm(['template', releaseName, 'cluster-class', '--namespace', NS], packaged);
    assert.equal(helm.status, 0, helm.stderr);
    const theirs = parseGoYaml(helm.stdout);
    assert.ok(theirs.ok);
    const objects = theirs.documents.filter((d) => d !== null);
    assert.deepEqual(ours.value.objects, objects);
    const cls = objects.find((o) => (o as { kind?: string }).kind === 'ClusterClass') as {
      metadata: { name: string; labels: Record<string, string> };
    };
    assert.equal(cls.metadata.name, tag);
    assert.equal(cls.metadata.labels['cluster-stack/version'], version);
  });

  it('a document ending in a | block keeps its final line break, as CSO reads helm template output', () => {
    const tree = new Map(readStackDir(STACK));
    // A patch template as the last field, as real ClusterClass patches carry them.
    tree.set(
      'cluster-class/templates/z-block.yaml',
      'apiVersion: v1\nkind: Secret\nmetadata:\n  name: {{ .Release.Name }}-block\nstringData:\n  template: |\n    {{ "{{ .builtin.cluster.name }}" }}\n',
    );
    const ours = render(tree);
    const block = ours.value.objects.find((o) => (o as { kind?: string }).kind === 'Secret') as {
      stringData: { template: string };
    };
    assert.equal(block.stringData.template, '{{ .builtin.cluster.name }}\n');
  });
});
