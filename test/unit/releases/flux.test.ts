import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import {
  addonKustomization,
  addonKustomizationName,
  clusterGitRepositoryName,
  FLUX_TEMPLATE_FILES,
  fleetGitRepository,
  fluxShardOf,
  helmReleaseName,
  ignoreAllBut,
  renderFluxTemplate,
} from '../../../controller/releases/flux.ts';
import { loadFluxTemplates } from '../../../controller/releases/flux-templates.ts';

// The templates are the product under test; reading them is the one fixture read here.
const templates = loadFluxTemplates();
const owner = {
  apiVersion: 'stackflux.io/v1alpha1',
  kind: 'ClusterAddon',
  name: 'prod',
  uid: 'u',
  controller: true,
};

describe('flux templates', () => {
  it('a --flux-templates folder without a template the release added gets the bundled one', () => {
    const dir = mkdtempSync(join(tmpdir(), 'stackflux-templates-'));
    try {
      const own = `# the platform team's own\n${templates.addonKustomization}`;
      writeFileSync(join(dir, FLUX_TEMPLATE_FILES.addonKustomization), own);
      const loaded = loadFluxTemplates(dir);
      assert.equal(loaded.addonKustomization, own);
      assert.equal(loaded.addonPreconditionKustomization, templates.addonPreconditionKustomization);
      assert.equal(loaded.fleetGitRepository, templates.fleetGitRepository);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('addon Kustomization: kubeconfig secret, dependsOn, labels, targetNamespace', () => {
    const k = addonKustomization(templates, {
      cluster: 'prod',
      namespace: 'team',
      addon: 'metrics-server',
      sourceName: 'prod-addons',
      dependsOn: ['cni'],
      targetNamespace: 'kube-system',
      ownerReferences: [owner],
    });
    assert.deepEqual(k, {
      apiVersion: 'kustomize.toolkit.fluxcd.io/v1',
      kind: 'Kustomization',
      metadata: {
        name: 'prod.metrics-server',
        namespace: 'team',
        labels: {
          'app.kubernetes.io/managed-by': 'stackflux',
          'stackflux.io/addon': 'metrics-server',
          'stackflux.io/cluster': 'prod',
        },
        ownerReferences: [owner],
      },
      spec: {
        interval: '5m',
        timeout: '5m',
        path: './metrics-server',
        prune: true,
        wait: true,
        sourceRef: { kind: 'GitRepository', name: 'prod-addons' },
        kubeConfig: { secretRef: { name: 'prod-kubeconfig', key: 'value' } },
        dependsOn: [{ name: 'prod.cni' }],
        targetNamespace: 'kube-system',
      },
    });
  });

  it('addon Kustomization: optional fields are omitted, deletionPolicy passes through', () => {
    const k = addonKustomization(templates, {
      cluster: 'c',
      namespace: 'n',
      addon: 'cni',
      sourceName: 'fleet',
      dependsOn: [],
      deletionPolicy: 'Orphan',
      ownerReferences: [],
    });
    assert.equal(k.spec.dependsOn, undefined);
    assert.equal(k.spec.targetNamespace, undefined);
    assert.equal(k.spec.deletionPolicy, 'Orphan');
  });

  it('addon Kustomization: a ServiceAccount only where it applies to the management cluster (issue 22)', () => {
    const input = {
      cluster: 'c',
      namespace: 'n',
      addon: 'web',
      path: 'web',
      sourceName: 'fleet',
      dependsOn: [],
      serviceAccountName: 'tenant-applier',
      ownerReferences: [],
    };
    const helm = addonKustomization(templates, { ...input, helm: true });
    assert.equal(helm.spec.kubeConfig, undefined);
    assert.equal(helm.spec.serviceAccountName, 'tenant-applier');
    // Through the Cluster's kubeconfig Flux would impersonate it inside the workload cluster.
    const manifests = addonKustomization(templates, input);
    assert.ok(manifests.spec.kubeConfig);
    assert.equal(manifests.spec.serviceAccountName, undefined);
  });

  it("a Cluster's fleet GitRepository tracks its branch, labelled with the Cluster (and a shard)", () => {
    const g = fleetGitRepository(templates, {
      name: 'c1-addons',
      namespace: 'team',
      cluster: 'c1',
      url: 'ssh://git@git.example.com/fleet.git',
      branch: 'stackflux/team/c1',
      secretRef: 'fleet-creds',
      labels: { 'sharding.fluxcd.io/key': 'shard1' },
    });
    assert.deepEqual(g.spec, {
      interval: '5m',
      url: 'ssh://git@git.example.com/fleet.git',
      ref: { branch: 'stackflux/team/c1' },
      secretRef: { name: 'fleet-creds' },
    });
    assert.deepEqual(g.metadata.labels, {
      'app.kubernetes.io/managed-by': 'stackflux',
      'sharding.fluxcd.io/key': 'shard1',
      'stackflux.io/cluster': 'c1',
    });
  });

  it('GitRepository names stay within 63 characters; shards are stable and in range', () => {
    assert.equal(clusterGitRepositoryName('prod-1'), 'prod-1-addons');
    const long = 'a'.repeat(63);
    assert.equal(clusterGitRepositoryName(long).length, 63);
    assert.equal(clusterGitRepositoryName(long), clusterGitRepositoryName(long));
    assert.notEqual(clusterGitRepositoryName(long), clusterGitRepositoryName(`${'a'.repeat(62)}b`));
    assert.equal(fluxShardOf('ns', 'c', undefined), undefined);
    assert.equal(fluxShardOf('ns', 'c', 1), undefined);
    assert.equal(fluxShardOf('ns', 'c', 8), fluxShardOf('ns', 'c', 8));
    assert.match(fluxShardOf('ns', 'c', 8) ?? '', /^shard[0-7]$/);
  });

  it("Helm release names are <cluster>-<addon>, cut with a hash to Helm's 53 characters", () => {
    assert.equal(helmReleaseName('prod-1', 'cni'), 'prod-1-cni');
    const long = helmReleaseName('a'.repeat(40), 'metrics-server');
    assert.equal(long.length, 53);
    assert.match(long, /^a{40}-met-[0-9a-f]{8}$/);
    assert.notEqual(long, helmReleaseName('a'.repeat(40), 'metrics-servers'));
  });

  it('values cannot break the YAML structure', () => {
    const g = fleetGitRepository(templates, {
      name: 'x',
      namespace: 'team',
      cluster: 'c',
      url: 'https://h/r\nspec: {evil: true}',
      branch: '"main"',
    });
    assert.equal(g.spec.url, 'https://h/r\nspec: {evil: true}');
    assert.equal(g.spec.ref?.branch, '"main"');
  });

  it('a missing input is an error naming the template', () => {
    assert.throws(
      () => renderFluxTemplate('a:\n  b: "{{nope}}"\n', {}, 'x.yaml'),
      /flux-templates\/x.yaml: a.b: unknown input "nope"/,
    );
  });

  it('replaces whole placeholders structurally, text placeholders as text, null drops the key', () => {
    assert.deepEqual(
      renderFluxTemplate('a: "x-{{v}}"\nb: "{{o}}"\nc: "{{n}}"\n', { v: 'y', o: { k: [1] }, n: null }),
      {
        a: 'x-y',
        b: { k: [1] },
      },
    );
  });

  it('ignoreAllBut re-includes every ancestor', () => {
    assert.equal(ignoreAllBut(''), undefined);
    assert.equal(ignoreAllBut('.'), undefined);
    assert.equal(ignoreAllBut('a'), '/*\n!/a/\n');
    assert.equal(ignoreAllBut('a/b/'), '/*\n!/a/\n/a/*\n!/a/b/\n');
  });

  it('addon Kustomization names are unambiguous', () => {
    assert.notEqual(addonKustomizationName('a-b', 'c'), addonKustomizationName('a', 'b-c'));
  });
});
