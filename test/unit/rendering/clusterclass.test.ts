// The checks of a rendered csctl cluster-class (controller/rendering/clusterclass.ts), over an
// engine that answers with given manifests (the rendering itself is checked against the helm CLI
// in test/integration/goengine/clusterclass.test.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parse } from 'yaml';
import type { StackDescription } from '../../../controller/releases/description.ts';
import {
  csctlReleaseName,
  renderCsctlClusterClass,
  type SyncGoEngine,
} from '../../../controller/rendering/clusterclass.ts';
import type { GoEngineCall } from '../../../controller/rendering/goengine/index.ts';

const TAG = 'docker-csoferrol-1-30-v1';
const NS = 'team';
const description = {
  format: 'csctl',
  provider: 'docker',
  name: 'csoferrol',
  kubernetesVersion: 'v1.30.4',
  version: 'v1',
  addons: [],
  clusterClass: { kind: 'helm-chart', path: 'cluster-class/' },
  valuesTemplating: 'go-template',
} satisfies StackDescription;

const CLASS = `apiVersion: cluster.x-k8s.io/v1beta1\nkind: ClusterClass\nmetadata:\n  name: ${TAG}\n  namespace: ${NS}\n`;
const TEMPLATE = `apiVersion: infrastructure.cluster.x-k8s.io/v1beta1\nkind: DockerMachineTemplate\nmetadata:\n  name: ${TAG}-machine\n`;

/** An engine whose helm template prints `manifests` (path → YAML); YAML parsed by the yaml package. */
function engineOf(manifests: Record<string, string>, calls: GoEngineCall[] = []): SyncGoEngine {
  return (call) => {
    calls.push(call);
    if (call.op === 'helmTemplate')
      return {
        ok: true,
        stdout: '',
        manifests: Object.entries(manifests).map(([path, content]) => ({ path, content })),
      };
    if (call.op === 'parseGoYaml') return { ok: true, documents: [parse(call.text) as unknown] };
    return { ok: false, error: 'unexpected call' };
  };
}

const render = (engine: SyncGoEngine, served?: string[]) =>
  renderCsctlClusterClass(engine, {
    tree: new Map([
      ['cluster-class/Chart.yaml', 'name: x\n'],
      ['csctl.yaml', ''],
    ]),
    description,
    tag: TAG,
    namespace: NS,
    ...(served !== undefined ? { servedClassVersions: served } : {}),
  });

describe('csctl cluster-class rendering', () => {
  it('the release name is the first four dash-parts of the tag', () => {
    assert.equal(csctlReleaseName('docker-csoferrol-1-30-v1'), 'docker-csoferrol-1-30');
    assert.equal(csctlReleaseName('openstack-scs2-1-34-v0-sha.abc'), 'openstack-scs2-1-34');
  });

  it("asks Helm for the chart under cluster-class/ with CSO's release name, namespace and version", () => {
    const calls: GoEngineCall[] = [];
    render(engineOf({ 'c/templates/a.yaml': CLASS }, calls));
    const helm = calls.find((c) => c.op === 'helmTemplate');
    assert.ok(helm?.op === 'helmTemplate');
    assert.equal(helm.request.releaseName, 'docker-csoferrol-1-30');
    assert.equal(helm.request.namespace, NS);
    assert.equal(helm.request.chartVersion, 'v1');
    assert.equal(helm.request.values, undefined);
    assert.deepEqual([...(helm.request.files as Map<string, unknown>).keys()], ['Chart.yaml']);
  });

  it('writes each object as JSON, one file each, in Helm order', () => {
    const r = render(engineOf({ 'c/templates/a.yaml': CLASS, 'c/templates/b.yaml': TEMPLATE }));
    assert.ok(r.ok, JSON.stringify(r));
    assert.deepEqual(
      [...r.value.files.keys()],
      [`000-clusterclass-${TAG}.yaml`, `001-dockermachinetemplate-${TAG}-machine.yaml`],
    );
    assert.equal(JSON.parse(r.value.files.get(`000-clusterclass-${TAG}.yaml`) ?? '').metadata.name, TAG);
    assert.equal(r.value.classApiVersion, 'cluster.x-k8s.io/v1beta1');
  });

  it('a chart without the ClusterClass named after the tag is InvalidRelease naming what it found', () => {
    const r = render(engineOf({ 'c/templates/a.yaml': CLASS.replace(`name: ${TAG}`, 'name: other') }));
    assert.ok(!r.ok);
    assert.equal(r.reason, 'InvalidRelease');
    assert.match(r.message, new RegExp(`no ClusterClass named ${TAG}.*found ClusterClass other`));
  });

  it('an object of another namespace or a cluster-scoped one is InvalidRelease naming its file', () => {
    const other = render(
      engineOf({
        'c/templates/a.yaml': CLASS,
        'c/templates/x.yaml': `${TEMPLATE}  namespace: kube-system\n`,
      }),
    );
    assert.ok(!other.ok);
    assert.equal(other.reason, 'InvalidRelease');
    assert.match(
      other.message,
      /cluster-class\/templates\/x\.yaml: DockerMachineTemplate .* namespace kube-system/,
    );
    const crb = render(
      engineOf({
        'c/templates/a.yaml': CLASS,
        'c/templates/rbac.yaml':
          'apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: own\n',
      }),
    );
    assert.ok(!crb.ok);
    assert.match(
      crb.message,
      /cluster-class\/templates\/rbac\.yaml: ClusterRoleBinding own is cluster-scoped/,
    );
  });

  it('a render failure names the chart; an engine limit is LimitExceeded', () => {
    const failed = render(() => ({ ok: false, error: 'template: x/templates/a.yaml:3: bad' }));
    assert.ok(!failed.ok);
    assert.equal(failed.reason, 'RenderFailed');
    assert.match(failed.message, /^cluster-class\/ \(helm template docker-csoferrol-1-30\): template: /);
    const limited = render(() => ({ ok: false, reason: 'LimitExceeded', message: 'took longer than 10s' }));
    assert.ok(!limited.ok);
    assert.equal(limited.reason, 'LimitExceeded');
  });

  it('a ClusterClass version the management cluster does not serve is reported as such', () => {
    const r = render(engineOf({ 'c/templates/a.yaml': CLASS }), ['cluster.x-k8s.io/v1beta2']);
    assert.ok(!r.ok);
    assert.equal(r.reason, 'ClusterClassVersionNotServed');
    assert.match(
      r.message,
      /v1beta1, which the management cluster does not serve \(it serves cluster\.x-k8s\.io\/v1beta2\)/,
    );
    assert.ok(render(engineOf({ 'c/templates/a.yaml': CLASS }), ['cluster.x-k8s.io/v1beta1']).ok);
  });
});
