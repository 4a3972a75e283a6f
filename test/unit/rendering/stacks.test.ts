// The example stacks in stacks/: every addon renders against a sample v1beta2 Cluster, the
// output carries that Cluster's values, and each release is self-consistent.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Ajv } from 'ajv';
import { parse, parseAllDocuments } from 'yaml';
import type { ReleaseTree, StackManifest } from '../../../controller/api/release.ts';
import {
  checkAddonGraph,
  type KubernetesObject,
  type RenderSuccess,
  renderAddon,
} from '../../../controller/rendering/index.ts';
import { closedSchema } from '../../support/crd-schema.ts';
import { sampleCluster } from './fixtures.ts';

const STACKS = fileURLToPath(new URL('../../../stacks/', import.meta.url));

function walk(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path, out);
    else out.push(path);
  }
  return out;
}

function readTree(root: string): ReleaseTree {
  return new Map(
    walk(root).map((path) => [relative(root, path).split(sep).join('/'), readFileSync(path, 'utf8')]),
  );
}

// stackflux-format stacks (stack.yaml); the csctl-format examples are read by
// test/unit/releases/example-csctl-stacks.test.ts until their renderers are wired.
const stackDirs = readdirSync(STACKS)
  .filter(
    (name) => statSync(join(STACKS, name)).isDirectory() && existsSync(join(STACKS, name, 'stack.yaml')),
  )
  .sort();

function byKind(objects: KubernetesObject[], kind: string, name?: string): KubernetesObject {
  const found = objects.find((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
  assert.ok(found, `no ${kind}${name ? ` ${name}` : ''} in the output`);
  return found;
}

function data(object: KubernetesObject): Record<string, string> {
  return object.data as Record<string, string>;
}

function clusterClassCrd(): string | undefined {
  const candidates = [
    process.env.CAPI_CRDS,
    join(process.env.HOME ?? '/root', 'go/pkg/mod/sigs.k8s.io/cluster-api@v1.14.2/core/config/crd/bases'),
  ];
  for (const dir of candidates) {
    const file = dir && join(dir, 'cluster.x-k8s.io_clusterclasses.yaml');
    if (file && existsSync(file)) return file;
  }
  return undefined;
}

describe('example stacks', () => {
  it('there are at least two', () => {
    assert.ok(stackDirs.length >= 2, `found ${stackDirs.join(', ')}`);
  });

  for (const dir of stackDirs) {
    describe(dir, () => {
      const tree = readTree(join(STACKS, dir));
      const stack = parse(tree.get('stack.yaml') ?? '') as StackManifest;
      const [major, minor] = stack.kubernetesVersion.replace(/^v/, '').split('.');
      const release = `${stack.provider}-${stack.name}-${major}-${minor}-${stack.version}`;

      it('stack.yaml is consistent with the folder, the addons and the ClusterClass', () => {
        assert.equal(stack.apiVersion, 'stackflux.io/v1alpha1');
        assert.equal(stack.kind, 'Stack');
        assert.match(stack.kubernetesVersion, /^v\d+\.\d+\.\d+$/);
        assert.match(stack.version, /^v\d+$|^v0-[a-z0-9.-]+$/);
        assert.equal(dir, `${stack.provider}-${stack.name}-${major}-${minor}`);
        assert.deepEqual(checkAddonGraph(stack), []);
        const folders = new Set(
          [...tree.keys()].filter((p) => p.startsWith('cluster-addon/')).map((p) => p.split('/')[1]),
        );
        assert.deepEqual([...folders].sort(), stack.addons.map((a) => a.name).sort());
        const classes = [...tree]
          .filter(([path]) => path.startsWith('cluster-class/'))
          .flatMap(([, text]) => parseAllDocuments(text).map((d) => d.toJS() as KubernetesObject));
        const clusterClass = byKind(classes, 'ClusterClass');
        assert.equal(clusterClass.metadata.name, release, 'the ClusterClass is named after the release tag');
        for (const doc of classes) assert.equal(doc.apiVersion, 'cluster.x-k8s.io/v1beta2');
      });

      it('the ClusterClass validates against the Cluster API v1beta2 CRD schema', () => {
        const crdFile = clusterClassCrd();
        assert.ok(
          crdFile,
          'Cluster API CRDs not found: run hack/build-testenv.sh (downloads sigs.k8s.io/cluster-api) or set CAPI_CRDS',
        );
        const crd = parse(readFileSync(crdFile, 'utf8'));
        const version = crd.spec.versions.find((v: { name: string }) => v.name === 'v1beta2');
        const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
        const validate = ajv.compile(closedSchema(version.schema.openAPIV3Schema) as object);
        for (const [path, text] of tree) {
          if (!path.startsWith('cluster-class/')) continue;
          for (const doc of parseAllDocuments(text)) {
            const object = doc.toJS();
            assert.ok(validate(object), `${path}: ${ajv.errorsText(validate.errors)}`);
          }
        }
      });

      for (const { name } of stack.addons) {
        it(`addon ${name} renders for a Cluster and carries its values`, () => {
          const cluster = sampleCluster({
            name: 'workload-7',
            podCidr: '10.42.0.0/16',
            host: '172.18.0.9',
            port: 7443,
          });
          cluster.spec.topology.version = stack.kubernetesVersion;
          const result = renderAddon({ tree, stack, addon: name, cluster });
          if (!result.ok) assert.fail(`${result.reason}: ${result.message}`);
          if (result.helm !== undefined) {
            checkHelmAddon(name, result, tree);
            return;
          }
          assert.ok(result.objects.length > 0);
          for (const object of result.objects) {
            assert.ok(
              !['Deployment', 'DaemonSet', 'StatefulSet', 'APIService', 'Pod'].includes(object.kind),
              `${object.kind} needs running Pods`,
            );
          }
          const rendered = [...result.files.values()].join('\n');
          assert.ok(!rendered.includes('[object Object]'));
          checkAddon(name, result);
        });
      }
    });
  }
});

function checkAddon(name: string, result: RenderSuccess): void {
  const { objects } = result;
  switch (name) {
    case 'cni': {
      const config = data(byKind(objects, 'ConfigMap', 'ferrol-cni-config'));
      assert.equal(config.podCIDR, '10.42.0.0/16');
      assert.equal(config.podGateway, '10.42.0.1');
      assert.equal(config.KUBERNETES_SERVICE_HOST, '172.18.0.9');
      assert.equal(config.KUBERNETES_SERVICE_PORT, '7443');
      assert.equal(config.clusterName, 'workload-7');
      assert.equal(config.clusterDNS, '10.128.0.10');
      const netConf = JSON.parse(config['net-conf.json'] ?? '');
      assert.deepEqual(netConf, { Network: '10.42.0.0/16', Backend: { Type: 'vxlan' }, MTU: 1450 });
      JSON.parse(config['cni-conf.json'] ?? '');
      byKind(objects, 'ServiceAccount', 'ferrol-cni');
      byKind(objects, 'ClusterRole', 'ferrol-cni');
      break;
    }
    case 'cloud-config': {
      const secret = data(byKind(objects, 'Secret', 'cloud-config'));
      assert.equal(Buffer.from(secret['cluster-name'] ?? '', 'base64').toString(), 'workload-7');
      const info = data(byKind(objects, 'ConfigMap'));
      assert.match(info['cloud.conf'] ?? '', /cluster-name = workload-7\n/);
      assert.match(info['cloud.conf'] ?? '', /api-server-endpoint = 172\.18\.0\.9:7443\n/);
      break;
    }
    case 'csi': {
      const storageClass = byKind(objects, 'StorageClass');
      assert.deepEqual(storageClass.parameters, { clusterName: 'workload-7' });
      byKind(objects, 'CSIDriver');
      break;
    }
    case 'metrics-server': {
      const service = byKind(objects, 'Service', 'metrics-server');
      assert.equal(service.metadata.labels?.['cluster.x-k8s.io/cluster-name'], 'workload-7');
      byKind(objects, 'ServiceAccount', 'metrics-server');
      byKind(objects, 'ClusterRoleBinding', 'system:metrics-server');
      break;
    }
    default:
      assert.fail(`no expectations for addon ${name}: add them to this test`);
  }
}

/** A Helm-chart addon of an example: its values for the sample Cluster, and a chart with no Pods. */
function checkHelmAddon(name: string, result: RenderSuccess, tree: ReleaseTree): void {
  assert.equal(name, 'inventory', `no expectations for Helm addon ${name}: add them to this test`);
  assert.deepEqual(result.helm?.chart, {
    source: 'tree',
    path: 'cluster-addon/inventory',
    name: 'ferrol-inventory',
    version: '0.1.0',
  });
  assert.deepEqual(result.helm?.values, {
    clusterName: 'workload-7',
    podCIDR: '10.42.0.0/16',
    owner: 'platform',
    tier: 'standard',
  });
  // The workload cluster of the tests has no kubelet: Helm's wait needs objects ready on creation.
  const templates = [...tree].filter(([p]) => p.startsWith('cluster-addon/inventory/templates/'));
  assert.ok(templates.length > 0);
  for (const [path, text] of templates) {
    const kind = /^kind: (\S+)$/m.exec(text)?.[1];
    assert.ok(kind !== undefined && ['ConfigMap', 'ServiceAccount'].includes(kind), `${path}: ${kind}`);
  }
}

describe('example stack values', () => {
  const tree = readTree(join(STACKS, 'docker-ferrol-1-30'));
  const stack = parse(tree.get('stack.yaml') ?? '') as StackManifest;
  it('central values win over per-cluster values and the cni schema rejects bad ones', () => {
    const cluster = sampleCluster();
    const result = renderAddon({
      tree,
      stack,
      addon: 'cni',
      cluster,
      clusterValues: {
        cni: { mtu: 1400, backend: 'host-gw', extraEnv: { HTTP_PROXY: 'http://proxy:3128' } },
      },
      centralValues: { cni: { mtu: 1380 } },
    });
    if (!result.ok) assert.fail(result.message);
    const config = data(byKind(result.objects, 'ConfigMap', 'ferrol-cni-config'));
    assert.deepEqual(JSON.parse(config['net-conf.json'] ?? ''), {
      Network: '192.168.0.0/16',
      Backend: { Type: 'host-gw' },
      MTU: 1380,
    });
    assert.equal(config.HTTP_PROXY, 'http://proxy:3128');
    const bad = renderAddon({ tree, stack, addon: 'cni', cluster, clusterValues: { cni: { mtu: 100 } } });
    assert.equal(bad.ok, false);
    assert.match(
      bad.ok ? '' : bad.message,
      /cluster-addon\/cni\/values\.schema\.json: Values\.mtu must be >= 1280/,
    );
  });
});
