import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parse as parseYaml } from 'yaml';
import type { ClusterAddon } from '../../../controller/api/clusteraddon.ts';
import type { ClusterStack } from '../../../controller/api/clusterstack.ts';
import type { ClusterStackRelease } from '../../../controller/api/clusterstackrelease.ts';
import type { HelmRelease, Kustomization } from '../../../controller/api/flux.ts';
import type { Condition } from '../../../controller/api/meta.ts';
import type { ReleaseTree } from '../../../controller/api/release.ts';
import { PREPARING_PHASE, ROLLOUT_ANNOTATIONS } from '../../../controller/api/rollout.ts';
import { refBackoffMs } from '../../../controller/controllers/clusteraddon.ts';
import type { BranchState } from '../../../controller/gitops/branches.ts';
import { branchTreeIds } from '../../../controller/gitops/objects.ts';
import {
  branchCommitMessage,
  type ClusterAddonInput,
  type ClusterAddonResult,
  clusterAddonReconcileInputs,
  clusterStackAddonInputs,
  csctlAddonPlan,
  enabledDependencies,
  FINALIZER_FLEET_CLEANUP,
  type FleetSettings,
  Reason,
  reconcileClusterAddon,
  releaseAddonInputs,
} from '../../../controller/reconcilers/clusteraddon.ts';
import { reconcileClusterStack } from '../../../controller/reconcilers/clusterstack.ts';
import { servedClusterNames } from '../../../controller/reconcilers/sharing.ts';
import { EMPTY_KUSTOMIZATION, type FluxTemplates } from '../../../controller/releases/flux.ts';
import { loadFluxTemplates } from '../../../controller/releases/flux-templates.ts';
import { readReleaseDescription } from '../../../controller/releases/format.ts';
import { parseReleaseTag } from '../../../controller/releases/tags.ts';
import { binaryFilesOf, releaseTree } from '../../../controller/releases/tree.ts';
import {
  type AddonRenderInput,
  isCsctlAddonInput,
  renderAnyAddon,
} from '../../../controller/rendering/index.ts';
import { readStackDir } from '../../../hack/lib/stack-dir.ts';

// The templates are the product under test; reading them is the one fixture read here.
const templates: FluxTemplates = loadFluxTemplates();
const now = new Date('2025-01-02T03:04:05Z');
const NS = 'team';
const V1 = 'docker-ferrol-1-30-v1';
const V2 = 'docker-ferrol-1-30-v2';
const fleetSettings: FleetSettings = {
  url: 'https://git.example.com/fleet.git',
  branchPrefix: 'stackflux/',
  secretRef: 'fleet-auth',
};
const BRANCH = 'stackflux/team/alpha';

// ---- Release trees, built in memory.

function stackYaml(version: string, addons: string): string {
  return `apiVersion: stackflux.io/v1alpha1
kind: Stack
provider: docker
name: ferrol
kubernetesVersion: v1.30.4
version: ${version}
addons:
${addons}`;
}

const cniTemplate = `apiVersion: v1
kind: ConfigMap
metadata:
  name: cni-config
data:
  clusterName: {{quote Cluster.metadata.name}}
  podCIDR: {{quote Cluster.spec.clusterNetwork.pods.cidrBlocks.[0]}}
  apiHost: {{quote Cluster.spec.controlPlaneEndpoint.host}}
  apiPort: {{quote Cluster.spec.controlPlaneEndpoint.port}}
  mtu: {{quote Values.mtu}}
  backend: {{quote Values.backend}}
`;
const cniSchema = JSON.stringify({
  type: 'object',
  additionalProperties: false,
  properties: { mtu: { type: 'integer', minimum: 1280, maximum: 9000 }, backend: { type: 'string' } },
});
const saYaml = `apiVersion: v1
kind: ServiceAccount
metadata:
  name: cni
`;
const csiYaml = `apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata:
  name: csi.example.com
`;
const metricsTemplate = `apiVersion: v1
kind: Service
metadata:
  name: metrics-server
  labels:
    cluster: {{quote Cluster.metadata.name}}
spec:
  ports:
    - port: {{Values.port}}
`;

function tree(files: Record<string, string>): ReleaseTree {
  return new Map(Object.entries(files).sort(([a], [b]) => (a < b ? -1 : 1)));
}

/** v1: cni (ConfigMap + ServiceAccount), csi (depends on cni), metrics-server (after csi). */
const treeV1 = tree({
  'stack.yaml': stackYaml(
    'v1',
    `  - name: cni
    targetNamespace: kube-system
  - name: csi
    dependsOn: [cni]
  - name: metrics-server
    targetNamespace: kube-system
`,
  ),
  'cluster-class/cluster-class.yaml': 'apiVersion: cluster.x-k8s.io/v1beta2\nkind: ClusterClass\n',
  'cluster-addon/cni/config.yaml.hbs': cniTemplate,
  'cluster-addon/cni/serviceaccount.yaml': saYaml,
  'cluster-addon/cni/values.yaml': 'mtu: 1450\nbackend: vxlan\n',
  'cluster-addon/cni/values.schema.json': cniSchema,
  'cluster-addon/csi/csidriver.yaml': csiYaml,
  'cluster-addon/metrics-server/service.yaml.hbs': metricsTemplate,
  'cluster-addon/metrics-server/values.yaml': 'port: 443\n',
});

/** v2: cni drops its ServiceAccount, csi is gone, dns is new. */
const treeV2 = tree({
  'stack.yaml': stackYaml(
    'v2',
    `  - name: cni
    targetNamespace: kube-system
  - name: metrics-server
    targetNamespace: kube-system
  - name: dns
    dependsOn: [cni]
`,
  ),
  'cluster-class/cluster-class.yaml': 'apiVersion: cluster.x-k8s.io/v1beta2\nkind: ClusterClass\n',
  'cluster-addon/cni/config.yaml.hbs': cniTemplate,
  'cluster-addon/cni/values.yaml': 'mtu: 1450\nbackend: vxlan\n',
  'cluster-addon/cni/values.schema.json': cniSchema,
  'cluster-addon/metrics-server/service.yaml.hbs': metricsTemplate,
  'cluster-addon/metrics-server/values.yaml': 'port: 443\n',
  'cluster-addon/dns/configmap.yaml':
    'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: coredns\ndata:\n  a: b\n',
});

// ---- Objects.

interface ClusterOptions {
  name?: string;
  podCidr?: string;
  release?: string;
  v1beta1?: boolean;
  disabled?: string;
  values?: unknown;
  deleting?: boolean;
}

function cluster(o: ClusterOptions = {}): Record<string, unknown> {
  const name = o.name ?? 'alpha';
  const release = o.release ?? V1;
  return {
    apiVersion: o.v1beta1 ? 'cluster.x-k8s.io/v1beta1' : 'cluster.x-k8s.io/v1beta2',
    kind: 'Cluster',
    metadata: {
      name,
      namespace: NS,
      uid: `uid-${name}`,
      ...(o.disabled !== undefined ? { annotations: { 'stackflux.io/disabled-addons': o.disabled } } : {}),
      ...(o.deleting ? { deletionTimestamp: '2025-01-02T00:00:00Z' } : {}),
    },
    spec: {
      clusterNetwork: { pods: { cidrBlocks: [o.podCidr ?? '192.168.0.0/16'] } },
      controlPlaneEndpoint: { host: `${name}.example.com`, port: 6443 },
      topology: {
        ...(o.v1beta1 ? { class: release } : { classRef: { name: release } }),
        version: 'v1.30.4',
        ...(o.values !== undefined ? { variables: [{ name: 'stackfluxAddonValues', value: o.values }] } : {}),
      },
    },
  };
}

function releaseObject(tag: string): ClusterStackRelease {
  return {
    apiVersion: 'stackflux.io/v1alpha1',
    kind: 'ClusterStackRelease',
    metadata: { name: tag, namespace: NS, uid: `uid-${tag}` },
    spec: {
      clusterStack: 'ferrol',
      tag,
      version: tag.slice(tag.lastIndexOf('-') + 1),
      clusterClass: tag,
      kubernetesVersion: '1.30',
      source: { url: 'https://git.example.com/stacks.git' },
    },
  };
}

function clusterStack(spec: Partial<ClusterStack['spec']> = {}): ClusterStack {
  return {
    apiVersion: 'stackflux.io/v1alpha1',
    kind: 'ClusterStack',
    metadata: { name: 'ferrol', namespace: NS, uid: 'uid-csk' },
    spec: {
      provider: 'docker',
      name: 'ferrol',
      kubernetesVersion: '1.30',
      source: { git: { url: 'https://git.example.com/stacks.git' } },
      ...spec,
    },
  };
}

function existingAddon(name = 'alpha', extra: Partial<ClusterAddon['metadata']> = {}): ClusterAddon {
  return {
    apiVersion: 'stackflux.io/v1alpha1',
    kind: 'ClusterAddon',
    metadata: {
      name,
      namespace: NS,
      uid: `ca-${name}`,
      generation: 1,
      finalizers: [FINALIZER_FLEET_CLEANUP],
      ...extra,
    },
    spec: { cluster: name, release: V1 },
  };
}

const trees: Record<string, ReleaseTree> = { [V1]: treeV1, [V2]: treeV2 };

function baseInput(o: ClusterOptions = {}, over: Partial<ClusterAddonInput> = {}): ClusterAddonInput {
  const name = o.name ?? 'alpha';
  const tag = o.release ?? V1;
  return {
    cluster: cluster(o),
    namespace: NS,
    name,
    clusterAddon: existingAddon(name),
    release: releaseObject(tag),
    tree: trees[tag],
    clusterStack: clusterStack(),
    kustomizations: [],
    branch: undefined,
    fleetSettings,
    templates,
    now,
    ...over,
  };
}

function must(r: ClusterAddonResult | undefined): ClusterAddonResult {
  assert.ok(r, 'expected a result');
  return r;
}

function cond(r: ClusterAddonResult, type: string): Condition | undefined {
  return r.status.conditions?.find((c) => c.type === type);
}

/** The branch state of `files` as the writer would report it after a commit. */
function stateOf(files: ReadonlyMap<string, string>, commit: string): BranchState {
  const ids = branchTreeIds(files);
  return { commit, tree: ids.tree, addons: ids.addons };
}

/** The branch change's files grouped by addon folder (null: the branch is deleted). */
function folders(r: ClusterAddonResult): Map<string, Map<string, string>> | null | undefined {
  const files = r.branch?.files;
  if (files === undefined || files === null) return files === null ? null : undefined;
  const out = new Map<string, Map<string, string>>();
  for (const [path, text] of files) {
    const slash = path.indexOf('/');
    const addon = path.slice(0, slash);
    const folder = out.get(addon) ?? new Map<string, string>();
    folder.set(path.slice(slash + 1), text);
    out.set(addon, folder);
  }
  return out;
}

// ---- A tiny world: the API server, Flux and the fleet repo as the runtime would feed them back.

interface World {
  cluster: Record<string, unknown> | undefined;
  clusterAddon: ClusterAddon | undefined;
  kustomizations: Map<string, Kustomization>;
  /** The Cluster's branch: its files and state (undefined: no branch). */
  files: Map<string, string> | undefined;
  branch: BranchState | undefined;
  commits: number;
}

function newWorld(c: Record<string, unknown>): World {
  return {
    cluster: c,
    clusterAddon: undefined,
    kustomizations: new Map(),
    files: undefined,
    branch: undefined,
    commits: 0,
  };
}

function worldInput(w: World, name: string, over: Partial<ClusterAddonInput> = {}): ClusterAddonInput {
  const tag = w.clusterAddon?.spec.release ?? V1;
  const use = (w.cluster?.spec as { topology?: { classRef?: { name: string } } } | undefined)?.topology
    ?.classRef?.name;
  const release = use ?? tag;
  return {
    cluster: w.cluster,
    namespace: NS,
    name,
    ...(w.clusterAddon !== undefined ? { clusterAddon: w.clusterAddon } : {}),
    release: releaseObject(release),
    ...(trees[release] !== undefined ? { tree: trees[release] } : {}),
    clusterStack: clusterStack(),
    kustomizations: [...w.kustomizations.values()],
    branch: w.branch,
    fleetSettings,
    templates,
    now,
    ...over,
  };
}

/** Applies a result as the runtime would (branch write, SSA, deletes, patches, status), then lets Flux apply. */
function applyResult(w: World, r: ClusterAddonResult, flux = true): void {
  if (r.branch !== undefined) {
    assert.equal(r.branch.branch, BRANCH);
    if (r.branch.files === null) {
      w.files = undefined;
      w.branch = undefined;
    } else {
      w.commits++;
      w.files = new Map(r.branch.files);
      w.branch = stateOf(w.files, String(w.commits).padStart(40, '0'));
    }
  }
  if (r.clusterAddon !== undefined && w.clusterAddon === undefined) {
    w.clusterAddon = {
      ...structuredClone(r.clusterAddon),
      metadata: { ...structuredClone(r.clusterAddon.metadata), uid: 'ca-uid', generation: 1 },
    };
  } else if (r.clusterAddon !== undefined && w.clusterAddon !== undefined) {
    w.clusterAddon = {
      ...w.clusterAddon,
      metadata: { ...w.clusterAddon.metadata, labels: r.clusterAddon.metadata.labels },
      spec: structuredClone(r.clusterAddon.spec),
    };
  }
  if (w.clusterAddon !== undefined) {
    w.clusterAddon = {
      ...w.clusterAddon,
      metadata: { ...w.clusterAddon.metadata, finalizers: [...r.finalizers] },
      status: structuredClone(r.status),
    };
    if (w.clusterAddon.metadata.deletionTimestamp !== undefined && r.finalizers.length === 0) {
      w.clusterAddon = undefined;
      w.kustomizations.clear(); // garbage collection of owned objects
    }
  }
  for (const k of r.kustomizations ?? []) {
    const old = w.kustomizations.get(k.metadata.name);
    w.kustomizations.set(k.metadata.name, {
      ...structuredClone(k),
      ...(old?.status ? { status: old.status } : {}),
    });
  }
  for (const n of r.deleteKustomizations) w.kustomizations.delete(n);
  for (const p of r.patches) {
    const k = w.kustomizations.get(p.name);
    if (k) k.spec = { ...k.spec, ...(p.patch.spec as object) };
  }
  if (flux && w.branch !== undefined) {
    for (const k of w.kustomizations.values()) {
      k.status = {
        lastAppliedRevision: `${BRANCH}@sha1:${w.branch.commit}`,
        conditions: [
          {
            type: 'Ready',
            status: 'True',
            reason: 'ReconciliationSucceeded',
            message: 'ok',
            lastTransitionTime: '2025-01-01T00:00:00Z',
          },
        ],
      };
    }
  }
}

/** True when applying `r` to `w` would change nothing. */
function noChanges(w: World, r: ClusterAddonResult): boolean {
  if (r.branch !== undefined || r.deleteKustomizations.length > 0 || r.patches.length > 0) return false;
  for (const k of r.kustomizations ?? []) {
    const old = w.kustomizations.get(k.metadata.name);
    if (old === undefined) return false;
    const { status: _s, ...rest } = old;
    if (JSON.stringify(rest) !== JSON.stringify(k)) return false;
  }
  if (w.clusterAddon === undefined) return r.clusterAddon === undefined;
  if (JSON.stringify(w.clusterAddon.status) !== JSON.stringify(r.status)) return false;
  if (JSON.stringify(w.clusterAddon.metadata.finalizers) !== JSON.stringify(r.finalizers)) return false;
  if (r.clusterAddon && JSON.stringify(r.clusterAddon.spec) !== JSON.stringify(w.clusterAddon.spec))
    return false;
  return true;
}

/** Reconciles until nothing changes (at most `max` rounds); returns the rounds it took. */
function converge(w: World, name: string, over: Partial<ClusterAddonInput> = {}, max = 8): number {
  for (let i = 1; i <= max; i++) {
    const r = reconcileClusterAddon(worldInput(w, name, over));
    if (r === undefined || noChanges(w, r)) return i;
    applyResult(w, r);
  }
  assert.fail(`no fixed point after ${max} rounds`);
}

// ---- Tests.

describe('reconcileClusterAddon: ownership', () => {
  it('ignores a Cluster whose class is not a cluster stack release', () => {
    const c = cluster();
    (c.spec as { topology: unknown }).topology = { classRef: { name: 'my-own-class' } };
    assert.equal(reconcileClusterAddon(baseInput({}, { cluster: c, clusterAddon: undefined })), undefined);
    const noTopology = cluster();
    delete (noTopology.spec as { topology?: unknown }).topology;
    assert.equal(
      reconcileClusterAddon(baseInput({}, { cluster: noTopology, clusterAddon: undefined })),
      undefined,
    );
  });

  it('creates the ClusterAddon first (owned by the Cluster, with the finalizer), nothing else', () => {
    const r = must(reconcileClusterAddon(baseInput({ v1beta1: true }, { clusterAddon: undefined })));
    assert.deepEqual(r.clusterAddon?.metadata.ownerReferences, [
      {
        apiVersion: 'cluster.x-k8s.io/v1beta1',
        kind: 'Cluster',
        name: 'alpha',
        uid: 'uid-alpha',
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
    assert.deepEqual(r.clusterAddon?.spec, { cluster: 'alpha', release: V1, clusterStack: 'ferrol' });
    assert.equal(r.clusterAddon?.metadata.labels?.['stackflux.io/release'], V1);
    assert.deepEqual(r.finalizers, [FINALIZER_FLEET_CLEANUP]);
    assert.equal(r.branch, undefined);
    assert.equal(r.kustomizations, undefined);
    assert.equal(cond(r, 'Reconciling')?.reason, Reason.Creating);
  });

  it('release not fetched (or not found) → Reconciling, nothing else changes', () => {
    const kept = kustomizationOf('alpha.cni');
    for (const over of [{ tree: undefined }, { release: undefined }] as Partial<ClusterAddonInput>[]) {
      const r = must(reconcileClusterAddon(baseInput({}, { ...over, kustomizations: [kept] })));
      assert.equal(cond(r, 'Ready')?.status, 'Unknown');
      assert.equal(cond(r, 'Reconciling')?.status, 'True');
      assert.equal(r.branch, undefined);
      assert.equal(r.kustomizations, undefined);
      assert.equal(r.gitRepository, undefined);
      assert.deepEqual(r.deleteKustomizations, []);
    }
  });
});

function kustomizationOf(name: string, release = V1): Kustomization {
  const [cluster = '', addon = ''] = name.split('.');
  return {
    apiVersion: 'kustomize.toolkit.fluxcd.io/v1',
    kind: 'Kustomization',
    metadata: {
      name,
      namespace: NS,
      labels: {
        'stackflux.io/cluster': cluster,
        'stackflux.io/addon': addon,
        'stackflux.io/release': release,
      },
    },
    spec: { interval: '5m', prune: true, sourceRef: { kind: 'GitRepository', name: 'alpha-addons' } },
  };
}

describe("reconcileClusterAddon: rendering into the Cluster's fleet branch", () => {
  it('renders every addon with the Cluster values into <addon>/ on branch stackflux/<ns>/<cluster>', () => {
    const r = must(
      reconcileClusterAddon(
        baseInput(
          { values: { cni: { mtu: 1400, backend: 'host-gw' } } },
          {
            clusterStack: clusterStack({ values: { cni: { backend: 'wireguard' } } }),
          },
        ),
      ),
    );
    assert.equal(r.branch?.branch, BRANCH);
    assert.deepEqual([...(folders(r)?.keys() ?? [])], ['cni', 'csi', 'metrics-server']);
    const cni = folders(r)?.get('cni');
    assert.ok(cni);
    assert.deepEqual([...cni.keys()], ['config.yaml', 'serviceaccount.yaml']);
    const config = cni.get('config.yaml') ?? '';
    assert.match(config, /clusterName: "alpha"/);
    assert.match(config, /podCIDR: "192\.168\.0\.0\/16"/);
    assert.match(config, /apiHost: "alpha\.example\.com"/);
    assert.match(config, /apiPort: "6443"/);
    assert.match(config, /mtu: "1400"/, 'per-cluster value wins over the default');
    assert.match(config, /backend: "wireguard"/, 'central value wins over the per-cluster value');
    assert.deepEqual(r.branch?.change, {
      namespace: NS,
      cluster: 'alpha',
      release: V1,
      reason: 'first render',
      rendered: ['cni', 'csi', 'metrics-server'],
      removed: [],
    });
    assert.equal(
      r.branch?.message,
      `stackflux: team/alpha: release ${V1} (first render)\n\nrendered: cni, csi, metrics-server\n`,
    );
    assert.equal(cond(r, 'Reconciling')?.reason, Reason.FleetSyncPending);
    // No Kustomization points at a folder that is not on the branch yet, no GitRepository at a
    // branch that does not exist yet.
    assert.deepEqual(r.kustomizations, []);
    assert.equal(r.gitRepository, undefined);
  });

  it('a failed fleet write shows in Ready=False with its reason, and the change is still to be written', () => {
    const failure = {
      reason: 'PushRefused',
      message: 'pushing to the fleet repository http://git.example/fleet.git: HTTP 403',
    };
    const r = must(reconcileClusterAddon(baseInput({}, { fleetFailure: failure })));
    assert.ok(r.branch !== undefined, 'the branch change is still returned (retried)');
    const ready = cond(r, 'Ready');
    assert.equal(ready?.status, 'False');
    assert.equal(ready?.reason, 'PushRefused');
    assert.match(ready?.message ?? '', /fleet\.git: HTTP 403/);
    assert.match(ready?.message ?? '', /retrying with back-off/);
    // Nothing to write (the branch already holds it): the old failure no longer matters.
    const written = must(reconcileClusterAddon(baseInput({}, {})));
    const done = must(
      reconcileClusterAddon(
        baseInput(
          {},
          {
            branch: stateOf(written.branch?.files as ReadonlyMap<string, string>, 'c'.repeat(40)),
            fleetFailure: failure,
          },
        ),
      ),
    );
    assert.equal(done.branch, undefined);
    assert.notEqual(cond(done, 'Ready')?.reason, 'PushRefused');
  });

  it('emits the Kustomizations once the folders are in the fleet, wired as Flux needs them', () => {
    const first = must(reconcileClusterAddon(baseInput()));
    assert.ok(first.branch?.files);
    const branch = stateOf(first.branch.files, 'd'.repeat(40));
    const r = must(reconcileClusterAddon(baseInput({}, { branch })));
    assert.equal(r.branch, undefined, 'same tree ids: nothing to write');
    const ks = r.kustomizations ?? [];
    assert.deepEqual(
      ks.map((k) => k.metadata.name),
      ['alpha.cni', 'alpha.csi', 'alpha.metrics-server'],
    );
    const [cni, csi, metrics] = ks;
    assert.ok(cni && csi && metrics);
    assert.deepEqual(cni.spec.kubeConfig, { secretRef: { name: 'alpha-kubeconfig', key: 'value' } });
    assert.equal(cni.spec.path, './cni');
    assert.deepEqual(cni.spec.sourceRef, { kind: 'GitRepository', name: 'alpha-addons' });
    assert.equal(cni.spec.prune, true);
    assert.equal(cni.spec.wait, true);
    assert.equal(cni.spec.targetNamespace, 'kube-system');
    assert.equal(cni.spec.dependsOn, undefined);
    assert.deepEqual(csi.spec.dependsOn, [{ name: 'alpha.cni' }]);
    assert.deepEqual(metrics.spec.dependsOn, [{ name: 'alpha.csi' }]);
    assert.deepEqual(cni.metadata.labels, {
      'app.kubernetes.io/managed-by': 'stackflux',
      'stackflux.io/addon': 'cni',
      'stackflux.io/cluster': 'alpha',
    });
    assert.deepEqual(cni.metadata.ownerReferences, [
      {
        apiVersion: 'stackflux.io/v1alpha1',
        kind: 'ClusterAddon',
        name: 'alpha',
        uid: 'ca-alpha',
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
    assert.deepEqual(r.gitRepository?.spec, {
      interval: '5m',
      url: 'https://git.example.com/fleet.git',
      ref: { branch: BRANCH },
      secretRef: { name: 'fleet-auth' },
    });
    assert.equal(r.gitRepository?.metadata.name, 'alpha-addons');
    assert.equal(r.gitRepository?.metadata.labels?.['stackflux.io/cluster'], 'alpha');
    assert.deepEqual(r.gitRepository?.metadata.ownerReferences, cni.metadata.ownerReferences);
    assert.equal(r.status.gitRepository, 'alpha-addons');
    assert.equal(r.status.fleetBranch, BRANCH);
    assert.equal(r.status.fleetCommit, 'd'.repeat(40));
  });

  it('a pod CIDR change rewrites only the files that use it', () => {
    const w = newWorld(cluster());
    converge(w, 'alpha');
    const before = w.commits;
    const cniBefore = w.files?.get('cni/config.yaml');
    w.cluster = cluster({ podCidr: '10.1.0.0/16' });
    const r = must(reconcileClusterAddon(worldInput(w, 'alpha')));
    assert.deepEqual(r.branch?.change.rendered, ['cni'], 'only the cni folder changes');
    assert.deepEqual(r.branch?.change.removed, []);
    const after = r.branch?.files?.get('cni/config.yaml') ?? '';
    assert.notEqual(after, cniBefore);
    assert.match(after, /podCIDR: "10\.1\.0\.0\/16"/);
    assert.equal(r.branch?.files?.get('csi/csidriver.yaml'), w.files?.get('csi/csidriver.yaml'));
    assert.equal(r.branch?.change.reason, 'Cluster or values changed: cni');
    assert.match(
      r.branch?.message ?? '',
      /^stackflux: team\/alpha: release \S+ \(Cluster or values changed: cni\)/,
    );
    assert.equal(cond(r, 'Ready')?.status, 'Unknown');
    converge(w, 'alpha');
    assert.equal(w.commits, before + 1, 'one new fleet commit');
    assert.equal(w.clusterAddon?.status?.conditions?.find((c) => c.type === 'Ready')?.status, 'True');
  });

  it('a release move drops folders and Kustomizations of dropped addons and adds new ones', () => {
    const w = newWorld(cluster());
    converge(w, 'alpha');
    w.cluster = cluster({ release: V2 });
    const r = must(reconcileClusterAddon(worldInput(w, 'alpha')));
    assert.deepEqual(
      [...(folders(r) ?? [])]
        .map(([k, v]) => [k, [...v.keys()]])
        .sort((a, b) => (String(a[0]) < String(b[0]) ? -1 : 1)),
      [
        ['cni', ['config.yaml']], // the ServiceAccount is gone: Flux prunes it
        ['dns', ['configmap.yaml']],
        ['metrics-server', ['service.yaml']],
      ],
    );
    // alpha.csi goes once the addons of v2 are Ready at its commit (converge below), not before.
    assert.deepEqual(r.deleteKustomizations, []);
    assert.equal(r.branch?.change.reason, `release ${V1} → ${V2}`);
    assert.deepEqual(r.branch?.change.rendered, ['cni', 'dns']);
    assert.deepEqual(r.branch?.change.removed, ['csi']);
    assert.equal(r.clusterAddon?.spec.release, V2);
    assert.equal(r.status.release, V1, 'the branch still holds v1 until the commit');
    // Until the new commit is applied, status says the addons still run v1.
    assert.deepEqual(
      r.status.addons?.map((a) => [a.name, a.release]),
      [
        ['cni', V1],
        ['dns', V2],
        ['metrics-server', V1],
      ],
    );
    converge(w, 'alpha');
    assert.deepEqual([...w.kustomizations.keys()].sort(), ['alpha.cni', 'alpha.dns', 'alpha.metrics-server']);
    // metrics-server followed csi in v1; in v2 it follows cni, dns declares cni.
    assert.deepEqual(w.kustomizations.get('alpha.dns')?.spec.dependsOn, [{ name: 'alpha.cni' }]);
    assert.deepEqual(w.kustomizations.get('alpha.metrics-server')?.spec.dependsOn, [{ name: 'alpha.cni' }]);
    assert.deepEqual(
      w.clusterAddon?.status?.addons?.map((a) => [a.name, a.release, a.ready]),
      [
        ['cni', V2, true],
        ['dns', V2, true],
        ['metrics-server', V2, true],
      ],
    );
  });
});

describe('reconcileClusterAddon: Flux-side scale settings', () => {
  function converged(name: string, settings: FleetSettings): ClusterAddonResult {
    const first = must(
      reconcileClusterAddon(
        baseInput({ name }, { clusterAddon: existingAddon(name), fleetSettings: settings }),
      ),
    );
    assert.ok(first.branch?.files);
    const branch = stateOf(first.branch.files, 'a'.repeat(40));
    return must(
      reconcileClusterAddon(
        baseInput({ name }, { clusterAddon: existingAddon(name), fleetSettings: settings, branch }),
      ),
    );
  }

  it("--flux-shards puts a Cluster's GitRepository and Kustomizations on one shard, spread evenly", () => {
    const settings = { ...fleetSettings, fluxShards: 4 };
    const count = new Map<string, number>();
    for (let i = 0; i < 200; i++) {
      const r = converged(`c${i}`, settings);
      const shard = r.gitRepository?.metadata.labels?.['sharding.fluxcd.io/key'];
      assert.match(shard ?? '', /^shard[0-3]$/);
      for (const k of r.kustomizations ?? [])
        assert.equal(k.metadata.labels?.['sharding.fluxcd.io/key'], shard);
      count.set(shard ?? '', (count.get(shard ?? '') ?? 0) + 1);
    }
    assert.equal(count.size, 4);
    for (const n of count.values()) assert.ok(n > 25, `uneven shards: ${[...count.values()]}`);
    assert.deepEqual(
      converged('c7', settings).gitRepository?.metadata.labels,
      converged('c7', settings).gitRepository?.metadata.labels,
      'stable',
    );
    const none = converged('c7', fleetSettings);
    assert.equal(
      none.gitRepository?.metadata.labels?.['sharding.fluxcd.io/key'],
      undefined,
      'default: no label',
    );
  });

  it("a Namespace labelled stackflux.io/flux-shard puts its Clusters' Flux objects on that shard (with --flux-shards ≥ 1 only)", () => {
    const labelled = (settings: FleetSettings, shard: string) =>
      must(
        reconcileClusterAddon(
          baseInput(
            { name: 'c7' },
            { clusterAddon: existingAddon('c7'), fleetSettings: settings, namespaceFluxShard: shard },
          ),
        ),
      );
    const shardOf = (o: { metadata: { labels?: Record<string, string> } } | undefined) =>
      o?.metadata.labels?.['sharding.fluxcd.io/key'];
    for (const fluxShards of [1, 4]) {
      const first = labelled({ ...fleetSettings, fluxShards }, 'tenant-a');
      const branch = stateOf(first.branch?.files ?? new Map(), 'a'.repeat(40));
      const r = must(
        reconcileClusterAddon(
          baseInput(
            { name: 'c7' },
            {
              clusterAddon: existingAddon('c7'),
              fleetSettings: { ...fleetSettings, fluxShards },
              namespaceFluxShard: 'tenant-a',
              branch,
            },
          ),
        ),
      );
      assert.equal(shardOf(r.gitRepository), 'tenant-a', `--flux-shards ${fluxShards}: GitRepository`);
      assert.ok((r.kustomizations ?? []).length > 0);
      for (const k of r.kustomizations ?? []) assert.equal(shardOf(k), 'tenant-a', k.metadata.name);
    }
    // One shard: no hashed label for an unlabelled namespace; the namespace label is ignored without --flux-shards.
    assert.equal(shardOf(converged('c7', { ...fleetSettings, fluxShards: 1 }).gitRepository), undefined);
    const ignored = must(
      reconcileClusterAddon(
        baseInput(
          { name: 'c7' },
          { clusterAddon: existingAddon('c7'), fleetSettings, namespaceFluxShard: 'tenant-a' },
        ),
      ),
    );
    assert.ok(ignored.branch?.files);
    const ignoredBranch = stateOf(ignored.branch.files, 'a'.repeat(40));
    const converged0 = must(
      reconcileClusterAddon(
        baseInput(
          { name: 'c7' },
          {
            clusterAddon: existingAddon('c7'),
            fleetSettings,
            namespaceFluxShard: 'tenant-a',
            branch: ignoredBranch,
          },
        ),
      ),
    );
    assert.equal(shardOf(converged0.gitRepository), undefined, 'without --flux-shards: no label');
    // Not a label value: the hashed shard, as if unlabelled.
    const bad = labelled({ ...fleetSettings, fluxShards: 4 }, '-bad value');
    const badBranch = stateOf(bad.branch?.files ?? new Map(), 'a'.repeat(40));
    const hashed = must(
      reconcileClusterAddon(
        baseInput(
          { name: 'c7' },
          {
            clusterAddon: existingAddon('c7'),
            fleetSettings: { ...fleetSettings, fluxShards: 4 },
            namespaceFluxShard: '-bad value',
            branch: badBranch,
          },
        ),
      ),
    );
    assert.match(shardOf(hashed.gitRepository) ?? '', /^shard[0-3]$/);
  });

  it("--addon-interval sets the Kustomizations' interval, --fleet-interval the GitRepository's", () => {
    const r = converged('alpha', { ...fleetSettings, addonInterval: '30m', interval: '10m' });
    for (const k of r.kustomizations ?? []) assert.equal(k.spec.interval, '30m');
    assert.equal(r.gitRepository?.spec.interval, '10m');
  });

  it('a Cluster name too long for <cluster>-addons gets a hashed GitRepository name of 63 characters', () => {
    const long = `c${'x'.repeat(62)}`;
    const r = converged(long, fleetSettings);
    const name = r.gitRepository?.metadata.name ?? '';
    assert.equal(name.length, 63);
    assert.match(name, /^cx+-[0-9a-f]{8}-addons$/);
    assert.notEqual(name, converged(`${long.slice(0, 62)}y`, fleetSettings).gitRepository?.metadata.name);
    for (const k of r.kustomizations ?? []) assert.equal(k.spec.sourceRef.name, name);
  });
});

describe('reconcileClusterAddon: referenced objects', () => {
  it('waits for the control plane object before rendering, then passes it to the templates', () => {
    const c = cluster();
    (c.spec as Record<string, unknown>).controlPlaneRef = {
      apiGroup: 'controlplane.cluster.x-k8s.io',
      kind: 'KubeadmControlPlane',
      name: 'alpha-cp',
    };
    const waiting = must(reconcileClusterAddon(baseInput({}, { cluster: c })));
    assert.equal(waiting.branch, undefined);
    assert.equal(waiting.kustomizations, undefined);
    assert.equal(cond(waiting, 'Reconciling')?.reason, Reason.WaitingForRefs);
    assert.match(
      cond(waiting, 'Reconciling')?.message ?? '',
      /ControlPlane \(KubeadmControlPlane alpha-cp\)/,
    );
    const withCp = new Map(treeV1);
    withCp.set(
      'cluster-addon/csi/version.yaml.hbs',
      'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: v\ndata:\n  version: {{quote ControlPlane.spec.version}}\n',
    );
    const r = must(
      reconcileClusterAddon(
        baseInput({}, { cluster: c, tree: withCp, controlPlane: { spec: { version: 'v1.30.4' } } }),
      ),
    );
    assert.match(r.branch?.files?.get('csi/version.yaml') ?? '', /version: "v1\.30\.4"/);
  });

  it('a ref whose kind cannot be listed is RefsNotReadable with the reason and the fix, nothing rendered', () => {
    const c = cluster();
    (c.spec as Record<string, unknown>).infrastructureRef = {
      apiVersion: 'example.com/v1',
      kind: 'Widget',
      name: 'infra',
    };
    const problem =
      'infrastructureRef Widget infra: cannot list Widget (example.com/v1): 403 Forbidden (grant stackflux list/watch on the kind)';
    const r = must(reconcileClusterAddon(baseInput({}, { cluster: c, refProblems: [problem] })));
    assert.equal(r.branch, undefined);
    assert.equal(r.kustomizations, undefined);
    assert.equal(cond(r, 'Ready')?.status, 'Unknown');
    assert.equal(cond(r, 'Reconciling')?.reason, Reason.RefsNotReadable);
    assert.equal(cond(r, 'Reconciling')?.message, `waiting for InfraCluster (Widget infra): ${problem}`);
  });
});

describe('ref backoff of the ClusterAddon controller', () => {
  it('doubles from 2 s and stops at 5 min', () => {
    assert.deepEqual(
      [0, 1, 2, 3, 4, 7, 8, 40].map(refBackoffMs),
      [2_000, 4_000, 8_000, 16_000, 32_000, 256_000, 300_000, 300_000],
    );
  });
});

describe('reconcileClusterAddon: enable/disable', () => {
  it('an annotation on the Cluster disables addons for that cluster; dependents skip them', () => {
    const w = newWorld(cluster());
    converge(w, 'alpha');
    w.cluster = cluster({ disabled: ' csi , nope' });
    const r = must(reconcileClusterAddon(worldInput(w, 'alpha')));
    assert.deepEqual([...(folders(r)?.keys() ?? [])], ['cni', 'metrics-server']);
    assert.deepEqual(r.deleteKustomizations, [], 'alpha.csi goes once the rest is Ready at the new commit');
    const metrics = r.kustomizations?.find((k) => k.metadata.name === 'alpha.metrics-server');
    assert.deepEqual(metrics?.spec.dependsOn, [{ name: 'alpha.cni' }], 'csi depended on cni');
    assert.deepEqual(r.branch?.change.removed, ['csi']);
    assert.deepEqual(r.branch?.change.rendered, []);
    assert.equal(r.branch?.change.reason, 'disabled csi');
    converge(w, 'alpha');
    assert.deepEqual([...w.kustomizations.keys()].sort(), ['alpha.cni', 'alpha.metrics-server']);
    // Enable again → back.
    w.cluster = cluster();
    assert.equal(must(reconcileClusterAddon(worldInput(w, 'alpha'))).branch?.change.reason, 'enabled csi');
    converge(w, 'alpha');
    assert.deepEqual([...w.kustomizations.keys()].sort(), ['alpha.cni', 'alpha.csi', 'alpha.metrics-server']);
    assert.ok(w.files?.has('csi/csidriver.yaml'));
  });

  it('every addon disabled → the branch and the GitRepository go, the ClusterAddon is Ready', () => {
    const w = newWorld(cluster());
    converge(w, 'alpha');
    w.cluster = cluster({ disabled: 'cni,csi,metrics-server' });
    const r = must(reconcileClusterAddon(worldInput(w, 'alpha')));
    assert.equal(r.branch?.files, null, 'git keeps no empty branch: it is deleted');
    assert.equal(r.branch?.change.reason, 'disabled cni, csi, metrics-server');
    converge(w, 'alpha');
    assert.equal(w.branch, undefined);
    assert.equal(w.kustomizations.size, 0);
    const after = must(reconcileClusterAddon(worldInput(w, 'alpha')));
    assert.equal(after.branch, undefined, 'no branch wanted, none there: nothing to write');
    assert.equal(after.gitRepository, undefined);
    assert.equal(after.deleteGitRepository, 'alpha-addons');
    assert.equal(cond(after, 'Ready')?.status, 'True');
  });

  it('ClusterStack spec.addons disables for every cluster', () => {
    const csk = clusterStack({
      addons: [
        { name: 'metrics-server', enabled: false },
        { name: 'cni', enabled: true },
      ],
    });
    for (const name of ['alpha', 'beta']) {
      const r = must(reconcileClusterAddon(baseInput({ name }, { clusterStack: csk })));
      assert.equal(r.branch?.branch, `stackflux/team/${name}`);
      assert.deepEqual([...(folders(r)?.keys() ?? [])], ['cni', 'csi']);
    }
  });

  it('dependencies skip disabled addons transitively', () => {
    const stack = {
      apiVersion: 'stackflux.io/v1alpha1' as const,
      kind: 'Stack' as const,
      provider: 'docker',
      name: 'ferrol',
      kubernetesVersion: 'v1.30.4',
      version: 'v1',
      addons: [{ name: 'a' }, { name: 'b' }, { name: 'c' }, { name: 'd', dependsOn: ['a', 'c'] }],
    };
    assert.deepEqual(
      [...enabledDependencies(stack, new Set(['a', 'd']))],
      [
        ['a', []],
        ['d', ['a']],
      ],
    );
    assert.deepEqual(
      [...enabledDependencies(stack, new Set(['b', 'd']))],
      [
        ['b', []],
        ['d', ['b']],
      ],
    );
  });
});

describe('reconcileClusterAddon: failures keep what runs', () => {
  function running(): World {
    const w = newWorld(cluster());
    converge(w, 'alpha');
    return w;
  }

  function assertNoChanges(r: ClusterAddonResult): void {
    assert.equal(r.branch, undefined);
    assert.equal(r.kustomizations, undefined);
    assert.equal(r.gitRepository, undefined);
    assert.deepEqual(r.deleteKustomizations, []);
    assert.deepEqual(r.patches, []);
  }

  it('a template referencing a missing field → Ready=False RenderFailed naming file and field', () => {
    const w = running();
    const broken = new Map(treeV2);
    broken.delete('cluster-addon/dns/configmap.yaml');
    broken.set(
      'cluster-addon/dns/configmap.yaml.hbs',
      'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: {{Cluster.spec.nope.deeper}}\n',
    );
    w.cluster = cluster({ release: V2 });
    const r = must(reconcileClusterAddon(worldInput(w, 'alpha', { tree: broken })));
    assertNoChanges(r);
    const ready = cond(r, 'Ready');
    assert.equal(ready?.status, 'False');
    assert.equal(ready?.reason, Reason.RenderFailed);
    assert.match(
      ready?.message ?? '',
      /cluster-addon\/dns\/configmap\.yaml\.hbs:6:\d+: Cluster\.spec\.nope is not defined/,
    );
    assert.equal(cond(r, 'Stalled')?.status, 'True');
    // The status still says what runs.
    assert.equal(r.status.release, V1);
    assert.equal(r.status.addons?.find((a) => a.name === 'dns')?.reason, Reason.RenderFailed);
    assert.equal(r.status.addons?.find((a) => a.name === 'cni')?.ready, true);
  });

  it('values failing the addon schema → Ready=False ValuesInvalid naming the field', () => {
    running();
    const r = must(reconcileClusterAddon(baseInput({ values: { cni: { mtu: 100, typo: 1 } } })));
    assertNoChanges(r);
    const ready = cond(r, 'Ready');
    assert.equal(ready?.status, 'False');
    assert.equal(ready?.reason, Reason.ValuesInvalid);
    assert.match(ready?.message ?? '', /cluster-addon\/cni\/values\.schema\.json/);
    assert.match(ready?.message ?? '', /Values\.mtu/);
    const notMapping = must(reconcileClusterAddon(baseInput({ values: ['x'] })));
    assertNoChanges(notMapping);
    assert.equal(cond(notMapping, 'Ready')?.reason, Reason.ValuesInvalid);
    assert.match(cond(notMapping, 'Ready')?.message ?? '', /stackfluxAddonValues/);
  });

  it('output that is not YAML objects → RenderFailed', () => {
    const broken = new Map(treeV1);
    broken.set('cluster-addon/csi/csidriver.yaml', 'a: [unclosed\n');
    const r = must(reconcileClusterAddon(baseInput({}, { tree: broken })));
    assertNoChanges(r);
    assert.equal(cond(r, 'Ready')?.reason, Reason.RenderFailed);
    assert.match(cond(r, 'Ready')?.message ?? '', /cluster-addon\/csi\/csidriver\.yaml/);
  });

  it('an addon whose renders are cooling down → Ready=False RenderCoolingDown, no changes (issue 22)', () => {
    const w = running();
    w.cluster = cluster({ release: V2 });
    const message =
      'cluster-addon/dns/: not rendered until 2030-01-01T00:00:00.000Z: its renders hit a limit 3 times in a row, last: the time budget of 5s (--render-timeout)';
    const r = must(
      reconcileClusterAddon({
        ...worldInput(w, 'alpha'),
        render: (i) =>
          i.addon === 'dns' ? { ok: false, reason: 'CoolingDown', message } : renderAnyAddon(i),
      }),
    );
    assertNoChanges(r);
    const ready = cond(r, 'Ready');
    assert.equal(ready?.status, 'False');
    assert.equal(ready?.reason, Reason.RenderCoolingDown);
    assert.match(
      ready?.message ?? '',
      /addon dns: cluster-addon\/dns\/: not rendered until .*--render-timeout/,
    );
    assert.equal(r.status.release, V1, 'the status still says what runs');
    assert.equal(r.status.addons?.find((a) => a.name === 'dns')?.reason, Reason.RenderCoolingDown);
  });

  it('an invalid release → InvalidRelease, no changes', () => {
    const broken = new Map(treeV1);
    broken.set('stack.yaml', stackYaml('v7', '  - name: cni\n'));
    const r = must(reconcileClusterAddon(baseInput({}, { tree: broken })));
    assertNoChanges(r);
    assert.equal(cond(r, 'Ready')?.reason, Reason.InvalidRelease);
    assert.match(cond(r, 'Ready')?.message ?? '', /stack\.yaml: version "v7"/);
  });

  it('a release the release controller found invalid (no tree to fetch) → InvalidRelease with its message, not a wait', () => {
    const message =
      'release docker-ferrol-1-30-v1 is invalid, nothing was applied from it: stack.yaml: addons[0].repository "http://x/charts" must be https:// or oci://';
    const base = baseInput({});
    const release = base.release as ClusterStackRelease;
    const invalid: ClusterStackRelease = {
      ...release,
      status: {
        conditions: [
          {
            type: 'Ready',
            status: 'False',
            reason: 'InvalidRelease',
            message,
            lastTransitionTime: '2026-01-01T00:00:00Z',
          },
        ],
      },
    };
    const r = must(reconcileClusterAddon({ ...base, release: invalid, tree: undefined }));
    assertNoChanges(r);
    assert.equal(cond(r, 'Ready')?.status, 'False');
    assert.equal(cond(r, 'Ready')?.reason, Reason.InvalidRelease);
    assert.equal(cond(r, 'Ready')?.message, `ClusterStackRelease docker-ferrol-1-30-v1: ${message}`);
  });
});

describe('reconcileClusterAddon: readiness', () => {
  it('Ready only when every Kustomization is Ready at <branch>@sha1:<branch tip>', () => {
    const w = newWorld(cluster());
    converge(w, 'alpha');
    assert.equal(w.clusterAddon?.status?.conditions?.find((c) => c.type === 'Ready')?.status, 'True');
    assert.equal(w.clusterAddon?.status?.fleetCommit, w.branch?.commit);
    // An old revision on one Kustomization → Reconciling naming it.
    const cni = w.kustomizations.get('alpha.cni');
    assert.ok(cni?.status);
    cni.status.lastAppliedRevision = `${BRANCH}@sha1:${'9'.repeat(40)}`;
    const r = must(reconcileClusterAddon(worldInput(w, 'alpha')));
    assert.equal(cond(r, 'Ready')?.status, 'Unknown');
    assert.match(
      cond(r, 'Reconciling')?.message ?? '',
      /waiting for cni \(applied stackflux\/team\/alpha@sha1:9+\)/,
    );
    // A failing Kustomization → Ready=False with Flux's reason.
    cni.status.lastAppliedRevision = `${BRANCH}@sha1:${w.branch?.commit}`;
    cni.status.conditions = [
      {
        type: 'Ready',
        status: 'False',
        reason: 'HealthCheckFailed',
        message: 'timeout',
        lastTransitionTime: 'x',
      },
    ];
    const f = must(reconcileClusterAddon(worldInput(w, 'alpha')));
    assert.equal(cond(f, 'Ready')?.status, 'False');
    assert.equal(cond(f, 'Ready')?.reason, Reason.AddonNotReady);
    assert.match(cond(f, 'Ready')?.message ?? '', /cni \(HealthCheckFailed: timeout\)/);
  });
  it("a Kustomization failing before its first success shows Flux's reason (status.observedGeneration -1)", () => {
    const w = newWorld(cluster());
    converge(w, 'alpha');
    const cni = w.kustomizations.get('alpha.cni');
    assert.ok(cni);
    cni.metadata.generation = 1;
    cni.status = {
      observedGeneration: -1,
      conditions: [
        {
          type: 'Ready',
          status: 'False',
          reason: 'ReconciliationFailed',
          message: "unable to read KubeConfig secret 'team/alpha-kubeconfig'",
          observedGeneration: 1,
          lastTransitionTime: 'x',
        },
      ],
    };
    const r = must(reconcileClusterAddon(worldInput(w, 'alpha')));
    assert.equal(cond(r, 'Ready')?.reason, Reason.AddonNotReady);
    assert.match(
      cond(r, 'Ready')?.message ?? '',
      /cni \(ReconciliationFailed: unable to read KubeConfig secret/,
    );
    // A condition of an older generation is stale: waiting, not failed.
    cni.metadata.generation = 2;
    const stale = must(reconcileClusterAddon(worldInput(w, 'alpha')));
    assert.match(cond(stale, 'Reconciling')?.message ?? '', /cni \(reconciling\)/);
  });

  it('stays Ready while Flux re-verifies the same revision (Ready=Unknown), but not for a new one', () => {
    const w = newWorld(cluster());
    converge(w, 'alpha');
    const cni = w.kustomizations.get('alpha.cni');
    assert.ok(cni?.status);
    const progressing: Condition[] = [
      {
        type: 'Ready',
        status: 'Unknown',
        reason: 'Progressing',
        message: 'Reconciliation in progress',
        lastTransitionTime: 'x',
      },
    ];
    cni.status.conditions = progressing;
    const r = must(reconcileClusterAddon(worldInput(w, 'alpha')));
    assert.equal(cond(r, 'Ready')?.status, 'True', 're-verifying the applied revision is not a regression');
    // A Kustomization that never was Ready at this revision is not taken as Ready.
    const fresh = newWorld(cluster());
    converge(fresh, 'alpha');
    const c2 = fresh.kustomizations.get('alpha.cni');
    assert.ok(c2?.status && fresh.clusterAddon?.status?.addons);
    c2.status.conditions = progressing;
    fresh.clusterAddon.status.addons = fresh.clusterAddon.status.addons.map((a) => ({ ...a, ready: false }));
    const f = must(reconcileClusterAddon(worldInput(fresh, 'alpha')));
    assert.notEqual(cond(f, 'Ready')?.status, 'True');
  });
});

describe('reconcileClusterAddon: deletion', () => {
  it('orphans Kustomizations, deletes the branch, drops the finalizer only once the branch is gone', () => {
    const w = newWorld(cluster());
    converge(w, 'alpha');
    w.cluster = cluster({ deleting: true });
    const r = must(reconcileClusterAddon(worldInput(w, 'alpha')));
    assert.deepEqual(
      r.patches.map((p) => [p.name, p.patch]),
      ['alpha.cni', 'alpha.csi', 'alpha.metrics-server'].map((n) => [
        n,
        { spec: { deletionPolicy: 'Orphan' } },
      ]),
    );
    assert.equal(r.branch?.branch, BRANCH);
    assert.equal(r.branch?.files, null, 'the branch is deleted');
    assert.deepEqual(r.finalizers, [FINALIZER_FLEET_CLEANUP], 'kept until the branch is known to be gone');
    assert.equal(r.clusterAddon, undefined);
    assert.equal(r.kustomizations, undefined);
    assert.equal(r.gitRepository, undefined);
    assert.equal(r.branch?.change.reason, 'cluster deleted');
    assert.deepEqual(r.branch?.change.removed, ['cni', 'csi', 'metrics-server']);
    assert.match(r.branch?.message ?? '', /^stackflux: team\/alpha: release \S+ \(cluster deleted\)/);
    assert.equal(cond(r, 'Reconciling')?.reason, Reason.Deleting);
    applyResult(w, r, false);
    assert.equal(w.kustomizations.get('alpha.cni')?.spec.deletionPolicy, 'Orphan');
    const done = must(reconcileClusterAddon(worldInput(w, 'alpha')));
    assert.equal(done.branch, undefined);
    assert.deepEqual(done.patches, []);
    assert.deepEqual(done.finalizers, []);
    // The Cluster is gone and the ClusterAddon with it → nothing left to do.
    applyResult(w, done, false);
    w.cluster = undefined;
    w.clusterAddon = undefined; // garbage collection after the Cluster
    assert.equal(reconcileClusterAddon(worldInput(w, 'alpha')), undefined);
  });

  it('a Cluster gone while its ClusterAddon is being deleted cleans up the same way', () => {
    const w = newWorld(cluster());
    converge(w, 'alpha');
    w.cluster = undefined;
    assert.ok(w.clusterAddon);
    w.clusterAddon.metadata.deletionTimestamp = '2025-01-02T00:00:00Z';
    const r = must(reconcileClusterAddon(worldInput(w, 'alpha')));
    assert.equal(r.branch?.files, null);
    assert.equal(r.patches.length, 3);
    assert.deepEqual(r.finalizers, [FINALIZER_FLEET_CLEANUP]);
    converge(w, 'alpha');
    assert.equal(w.clusterAddon, undefined);
    assert.equal(w.branch, undefined);
    assert.equal(w.kustomizations.size, 0);
  });

  it('a leftover branch of a Cluster whose ClusterAddon is gone is deleted', () => {
    const branch = stateOf(new Map([['cni/a.yaml', 'x: 1\n']]), 'e'.repeat(40));
    const r = must(
      reconcileClusterAddon(baseInput({}, { cluster: undefined, clusterAddon: undefined, branch })),
    );
    assert.equal(r.branch?.files, null);
    assert.deepEqual(r.finalizers, []);
    assert.equal(
      reconcileClusterAddon(baseInput({}, { cluster: undefined, clusterAddon: undefined })),
      undefined,
      'no branch, no ClusterAddon: nothing to do',
    );
  });
});

describe('reconcileClusterAddon: scale and determinism', () => {
  it('50 clusters each get their own branch, deterministically', () => {
    const run = () =>
      Array.from({ length: 50 }, (_, i) => {
        const name = `c${String(i).padStart(2, '0')}`;
        return must(
          reconcileClusterAddon(
            baseInput({ name, podCidr: `10.${i}.0.0/16` }, { clusterAddon: existingAddon(name) }),
          ),
        );
      });
    const a = run();
    const b = run();
    assert.deepEqual(
      a.map((r) => [r.branch?.branch, [...(r.branch?.files ?? [])]]),
      b.map((r) => [r.branch?.branch, [...(r.branch?.files ?? [])]]),
    );
    const branches = a.map((r) => r.branch?.branch);
    assert.equal(new Set(branches).size, 50);
    const repos = a.map((r) => r.status.gitRepository);
    assert.equal(new Set(repos).size, 50, 'one GitRepository per Cluster');
    a.forEach((r, i) => {
      assert.equal(r.branch?.branch, `stackflux/team/c${String(i).padStart(2, '0')}`);
      assert.match(
        r.branch?.files?.get('cni/config.yaml') ?? '',
        new RegExp(`podCIDR: "10\\.${i}\\.0\\.0/16"`),
      );
    });
  });
});

describe('reconcileClusterAddon: fixed point', () => {
  it('feeding the outputs back converges and then changes nothing', () => {
    const w = newWorld(cluster({ values: { cni: { mtu: 1500 } } }));
    const rounds = converge(w, 'alpha');
    // create ClusterAddon → commit folders → Kustomizations → Ready status → no change
    assert.equal(rounds, 5);
    assert.equal(w.commits, 1);
    assert.ok(w.files?.has('cni/config.yaml'));
    const again = must(
      reconcileClusterAddon(worldInput(w, 'alpha', { now: new Date('2030-01-01T00:00:00Z') })),
    );
    assert.ok(noChanges(w, again), 'a later reconcile changes nothing (no clock in the output)');
    assert.equal(cond(again, 'Ready')?.status, 'True');
  });
});

describe('branchCommitMessage', () => {
  it('says which Cluster, which release, why, and which addons moved', () => {
    assert.equal(
      branchCommitMessage({
        namespace: 'a',
        cluster: 'y',
        release: V2,
        reason: `release ${V1} → ${V2}`,
        rendered: ['dns', 'cni'],
        removed: ['csi'],
      }),
      `stackflux: a/y: release ${V2} (release ${V1} → ${V2})\n\nrendered: cni, dns\nremoved: csi\n`,
    );
    assert.equal(
      branchCommitMessage({
        namespace: 'b',
        cluster: 'x',
        reason: 'cluster deleted',
        rendered: [],
        removed: [],
      }),
      'stackflux: b/x (cluster deleted)\n',
    );
  });
});

// ---- Helm-chart addons (issue 13).

const V3 = 'docker-ferrol-1-30-v3';
/** v3: cni (manifests), then `info`, an in-tree Helm chart with a values template, then `web` from a Helm repository. */
trees[V3] = tree({
  'stack.yaml': stackYaml(
    'v3',
    `  - name: cni
    targetNamespace: kube-system
  - name: info
    targetNamespace: monitoring
  - name: web
    chart: podinfo
    version: 6.7.1
    repository: https://stefanprodan.github.io/podinfo
`,
  ),
  'cluster-class/cluster-class.yaml': 'apiVersion: cluster.x-k8s.io/v1beta2\nkind: ClusterClass\n',
  'cluster-addon/cni/config.yaml.hbs': cniTemplate,
  'cluster-addon/cni/values.yaml': 'mtu: 1450\nbackend: vxlan\n',
  'cluster-addon/info/Chart.yaml': 'apiVersion: v2\nname: info\nversion: 1.2.3\n',
  'cluster-addon/info/templates/configmap.yaml':
    'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n',
  'cluster-addon/info/values.yaml': 'tier: standard\n',
  'cluster-addon/info/values.schema.json': JSON.stringify({
    type: 'object',
    properties: { tier: { enum: ['standard', 'premium'] }, podCIDR: { type: 'string' } },
  }),
  'cluster-addon/info/values.yaml.hbs':
    'podCIDR: {{quote Cluster.spec.clusterNetwork.pods.cidrBlocks.[0]}}\ntier: {{quote Values.tier}}\n',
  'cluster-addon/web/values.yaml': 'replicaCount: 1\n',
});

// biome-ignore lint/suspicious/noExplicitAny: free-form Flux objects read back from the branch in a test
type Doc = Record<string, any>;

/** A file of the branch change, parsed. */
function branchDoc(r: ClusterAddonResult, path: string): Doc {
  const text = r.branch?.files?.get(path);
  assert.ok(text !== undefined, `no ${path} on the branch`);
  return parseYaml(text) as Doc;
}

function helmRelease(r: ClusterAddonResult, addon: string): Doc {
  return branchDoc(r, `${addon}.helm/helmrelease.yaml`);
}

describe('reconcileClusterAddon: Helm-chart addons', () => {
  it("a Helm addon's HelmRelease and chart source carry the Cluster's Flux shard, so that shard's controllers take them", () => {
    const r = must(
      reconcileClusterAddon(
        baseInput(
          { release: V3 },
          { fleetSettings: { ...fleetSettings, fluxShards: 2 }, namespaceFluxShard: 'tenant-a' },
        ),
      ),
    );
    assert.equal(helmRelease(r, 'info').metadata.labels['sharding.fluxcd.io/key'], 'tenant-a');
    assert.equal(helmRelease(r, 'web').metadata.labels['sharding.fluxcd.io/key'], 'tenant-a');
    assert.equal(
      branchDoc(r, 'web.helm/helmrepository.yaml').metadata.labels['sharding.fluxcd.io/key'],
      'tenant-a',
    );
    const unsharded = must(reconcileClusterAddon(baseInput({ release: V3 })));
    assert.equal(helmRelease(unsharded, 'info').metadata.labels['sharding.fluxcd.io/key'], undefined);
  });

  it('an in-tree chart is a HelmRelease on the branch: the Cluster kubeconfig, its rendered values, the chart from the release GitRepository', () => {
    const r = must(reconcileClusterAddon(baseInput({ release: V3, values: { info: { tier: 'premium' } } })));
    assert.deepEqual([...(r.branch?.files?.keys() ?? [])].sort(), [
      'cni/config.yaml',
      'info.helm/helmrelease.yaml',
      'web.helm/helmrelease.yaml',
      'web.helm/helmrepository.yaml',
    ]);
    const hr = helmRelease(r, 'info');
    assert.equal(hr.apiVersion, 'helm.toolkit.fluxcd.io/v2');
    assert.deepEqual(hr.metadata, {
      name: 'alpha.info',
      namespace: NS,
      labels: {
        'app.kubernetes.io/managed-by': 'stackflux',
        'stackflux.io/addon': 'info',
        'stackflux.io/cluster': 'alpha',
        'stackflux.io/release': V3,
      },
    });
    assert.deepEqual(hr.spec.kubeConfig, { secretRef: { name: 'alpha-kubeconfig', key: 'value' } });
    assert.equal(hr.spec.releaseName, 'alpha-info');
    assert.equal(hr.spec.targetNamespace, 'monitoring');
    assert.equal(hr.spec.storageNamespace, 'monitoring', 'Helm keeps its history in the workload cluster');
    assert.deepEqual(hr.spec.chart.spec.sourceRef, { kind: 'GitRepository', name: V3 });
    assert.equal(hr.spec.chart.spec.chart, './cluster-addon/info');
    assert.deepEqual(hr.spec.values, { podCIDR: '192.168.0.0/16', tier: 'premium' });
    assert.equal(hr.spec.install.remediation.retries, 3);
    assert.equal(hr.spec.upgrade.remediation.retries, 3);
  });

  it('a chart from a Helm repository gets its HelmRepository; one from an OCI registry its OCIRepository and chartRef', () => {
    const r = must(reconcileClusterAddon(baseInput({ release: V3 })));
    const web = helmRelease(r, 'web');
    assert.deepEqual(web.spec.chart.spec, {
      chart: 'podinfo',
      version: '6.7.1',
      sourceRef: { kind: 'HelmRepository', name: 'alpha.web' },
      interval: '5m',
    });
    assert.equal(web.spec.targetNamespace, 'default', 'no targetNamespace in stack.yaml');
    assert.deepEqual(web.spec.values, { replicaCount: 1 });
    const repo = branchDoc(r, 'web.helm/helmrepository.yaml');
    assert.equal(repo.kind, 'HelmRepository');
    assert.equal(repo.spec.url, 'https://stefanprodan.github.io/podinfo');

    const oci = new Map(trees[V3]);
    oci.set(
      'stack.yaml',
      (trees[V3]?.get('stack.yaml') ?? '').replace(
        'https://stefanprodan.github.io/podinfo',
        'oci://ghcr.io/stefanprodan/charts',
      ),
    );
    const o = must(reconcileClusterAddon(baseInput({ release: V3 }, { tree: oci })));
    const ociWeb = helmRelease(o, 'web');
    assert.equal(ociWeb.spec.chart, undefined);
    assert.deepEqual(ociWeb.spec.chartRef, { kind: 'OCIRepository', name: 'alpha.web' });
    const source = branchDoc(o, 'web.helm/ocirepository.yaml');
    assert.equal(source.spec.url, 'oci://ghcr.io/stefanprodan/charts/podinfo');
    assert.deepEqual(source.spec.ref, { tag: '6.7.1' });
  });

  it("a Helm addon's Kustomization applies its folder to the management cluster and orders it with the other addons", () => {
    const w = newWorld(cluster({ release: V3 }));
    converge(w, 'alpha');
    const info = w.kustomizations.get('alpha.info.helm');
    assert.ok(info);
    assert.equal(info.spec.kubeConfig, undefined, 'the HelmRelease goes to the management cluster');
    assert.equal(info.spec.targetNamespace, undefined);
    assert.equal(info.spec.wait, true, 'Ready only once the HelmRelease is');
    assert.equal(info.spec.path, './info.helm');
    assert.deepEqual(info.spec.dependsOn, [{ name: 'alpha.cni' }]);
    assert.deepEqual(w.kustomizations.get('alpha.web.helm')?.spec.dependsOn, [{ name: 'alpha.info.helm' }]);
    assert.deepEqual(w.kustomizations.get('alpha.cni')?.spec.kubeConfig, {
      secretRef: { name: 'alpha-kubeconfig', key: 'value' },
    });
  });

  it('a per-cluster value change rewrites only that addon folder; values failing the schema change nothing (ValuesInvalid)', () => {
    const w = newWorld(cluster({ release: V3 }));
    converge(w, 'alpha');
    const before = new Map(w.files);
    w.cluster = cluster({ release: V3, values: { info: { tier: 'premium' } } });
    const r = must(reconcileClusterAddon(worldInput(w, 'alpha')));
    assert.deepEqual(r.branch?.change.rendered, ['info.helm']);
    assert.deepEqual(helmRelease(r, 'info').spec.values, { podCIDR: '192.168.0.0/16', tier: 'premium' });
    assert.equal(r.branch?.files?.get('web.helm/helmrelease.yaml'), before.get('web.helm/helmrelease.yaml'));
    applyResult(w, r);

    w.cluster = cluster({ release: V3, values: { info: { tier: 'gold' } } });
    const bad = must(reconcileClusterAddon(worldInput(w, 'alpha')));
    assert.equal(bad.branch, undefined, 'the previous Helm release keeps running');
    assert.equal(bad.kustomizations, undefined);
    assert.equal(cond(bad, 'Ready')?.reason, Reason.ValuesInvalid);
    assert.match(cond(bad, 'Ready')?.message ?? '', /addon info: .*values\.schema\.json.*tier/);
  });

  it("status shows the HelmRelease's revision, chart version and values digest, and Helm's failure reason", () => {
    const w = newWorld(cluster({ release: V3 }));
    converge(w, 'alpha');
    const hr = (conditions: Condition[]): HelmRelease => ({
      apiVersion: 'helm.toolkit.fluxcd.io/v2',
      kind: 'HelmRelease',
      metadata: {
        name: 'alpha.info',
        namespace: NS,
        generation: 2,
        labels: { 'stackflux.io/cluster': 'alpha', 'stackflux.io/addon': 'info' },
      },
      spec: {},
      status: {
        observedGeneration: 2,
        conditions,
        history: [{ version: 2, chartVersion: '1.2.3', configDigest: 'sha256:abc', status: 'deployed' }],
      },
    });
    const ok = must(
      reconcileClusterAddon(
        worldInput(w, 'alpha', {
          helmReleases: [
            hr([
              {
                type: 'Ready',
                status: 'True',
                reason: 'UpgradeSucceeded',
                message: 'ok',
                lastTransitionTime: '2025-01-01T00:00:00Z',
              },
            ]),
          ],
        }),
      ),
    );
    const info = ok.status.addons?.find((a) => a.name === 'info');
    assert.equal(info?.ready, true);
    assert.equal(info?.helmRelease, 'alpha.info');
    assert.equal(info?.helmRevision, 2);
    assert.equal(info?.chartVersion, '1.2.3');
    assert.equal(info?.valuesDigest, 'sha256:abc');
    assert.equal(cond(ok, 'Ready')?.status, 'True');

    // Helm failed: the Kustomization's health check fails; the status says why Helm failed.
    const k = w.kustomizations.get('alpha.info.helm');
    assert.ok(k?.status?.conditions?.[0]);
    k.status.conditions[0] = {
      ...k.status.conditions[0],
      status: 'False',
      reason: 'HealthCheckFailed',
      message: 'timeout waiting for: [HelmRelease/team/alpha.info status: InProgress]',
    };
    const failed = must(
      reconcileClusterAddon(
        worldInput(w, 'alpha', {
          helmReleases: [
            hr([
              {
                type: 'Ready',
                status: 'False',
                reason: 'InstallFailed',
                message: 'chart says no',
                lastTransitionTime: '2025-01-01T00:00:00Z',
              },
            ]),
          ],
        }),
      ),
    );
    assert.equal(failed.status.addons?.find((a) => a.name === 'info')?.reason, 'InstallFailed');
    assert.equal(cond(failed, 'Ready')?.reason, Reason.AddonNotReady);
    assert.match(
      cond(failed, 'Ready')?.message ?? '',
      /HelmRelease alpha\.info InstallFailed: chart says no/,
    );
  });

  it('Cluster deletion suspends the HelmReleases (no uninstall from a cluster going away) and orphans only workload Kustomizations', () => {
    const w = newWorld(cluster({ release: V3 }));
    converge(w, 'alpha');
    w.cluster = cluster({ release: V3, deleting: true });
    const helmReleases: HelmRelease[] = ['info', 'web'].map((addon) => ({
      apiVersion: 'helm.toolkit.fluxcd.io/v2',
      kind: 'HelmRelease',
      metadata: {
        name: `alpha.${addon}`,
        namespace: NS,
        labels: { 'stackflux.io/cluster': 'alpha', 'stackflux.io/addon': addon },
      },
      spec: addon === 'web' ? { suspend: true } : {},
    }));
    const r = must(reconcileClusterAddon(worldInput(w, 'alpha', { helmReleases })));
    assert.deepEqual(
      r.patches.map((p) => [p.kind, p.name, p.patch]),
      [
        ['Kustomization', 'alpha.cni', { spec: { deletionPolicy: 'Orphan' } }],
        ['HelmRelease', 'alpha.info', { spec: { suspend: true } }],
      ],
    );
    assert.equal(r.branch?.files, null);
  });

  it('a chart in the tree and a remote chart for the same addon → InvalidOutput naming both', () => {
    const both = new Map(trees[V3]);
    both.set('cluster-addon/web/Chart.yaml', 'apiVersion: v2\nname: web\nversion: 0.1.0\n');
    const r = must(reconcileClusterAddon(baseInput({ release: V3 }, { tree: both })));
    assert.equal(r.branch, undefined);
    assert.equal(cond(r, 'Ready')?.reason, Reason.RenderFailed);
    assert.match(
      cond(r, 'Ready')?.message ?? '',
      /remote chart in stack\.yaml and also ships cluster-addon\/web\/Chart\.yaml/,
    );
  });
});

describe('what of a release or ClusterStack requeues its Clusters', () => {
  const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
  const withStatus = (status: ClusterStackRelease['status']): ClusterStackRelease => ({
    ...releaseObject(V1),
    status,
  });
  const providerReady = (status: 'True' | 'False', message: string): Condition => ({
    type: 'ProviderReady',
    status,
    reason: status === 'True' ? 'ProviderReady' : 'ProviderNotReady',
    message,
    lastTransitionTime: '2025-01-01T00:00:00Z',
  });

  it('a release status change the addon reconcile does not read (Clusters using it, applied revision) does not', () => {
    const before = withStatus({ commit: 'a'.repeat(40), clusters: 10, lastAppliedRevision: 'x' });
    const after = withStatus({ commit: 'a'.repeat(40), clusters: 11, lastAppliedRevision: 'y' });
    assert.ok(same(releaseAddonInputs(before), releaseAddonInputs(after)));
  });

  it('the commit the tree is read at, the provider gate and the spec do', () => {
    const base = withStatus({ commit: 'a'.repeat(40), conditions: [providerReady('False', 'waiting')] });
    const inputs = releaseAddonInputs(base);
    for (const changed of [
      withStatus({ commit: 'b'.repeat(40), conditions: [providerReady('False', 'waiting')] }),
      withStatus({ commit: 'a'.repeat(40), conditions: [providerReady('True', 'ready')] }),
      { ...base, spec: { ...base.spec, interval: '1m' } },
    ])
      assert.ok(!same(inputs, releaseAddonInputs(changed)));
  });

  it('a new impact and an approval do: a held move may go on (reconcilers/approvedrender.ts)', () => {
    const base = withStatus({
      commit: 'a'.repeat(40),
      impact: { commit: 'a'.repeat(40), computedAt: 't', digest: 'd1' },
    });
    const inputs = releaseAddonInputs(base);
    const newImpact = withStatus({
      commit: 'a'.repeat(40),
      impact: { commit: 'a'.repeat(40), computedAt: 't', digest: 'd2' },
    });
    const approved = {
      ...base,
      metadata: {
        ...base.metadata,
        annotations: { 'rollout.stackflux.io/approved': V1, 'rollout.stackflux.io/approved-impact': 'd1' },
      },
    };
    for (const changed of [newImpact, approved]) assert.ok(!same(inputs, releaseAddonInputs(changed)));
  });

  it('a ClusterStack status change does not; a spec change (central values) or a new rollout target does', () => {
    const stack = { ...clusterStack({ values: { logLevel: 'info' } }), status: { latestRelease: V1 } };
    const withSummary = { ...stack, status: { latestRelease: V1, usableVersions: 'v1' } };
    assert.ok(same(clusterStackAddonInputs(stack), clusterStackAddonInputs(withSummary)));
    const newValues = { ...clusterStack({ values: { logLevel: 'debug' } }), status: { latestRelease: V1 } };
    assert.ok(!same(clusterStackAddonInputs(stack), clusterStackAddonInputs(newValues)));
    // The rollout target's moves are bound to its approved impact (reconcilers/approvedrender.ts).
    const newTarget = { ...stack, status: { latestRelease: V2 } };
    assert.ok(!same(clusterStackAddonInputs(stack), clusterStackAddonInputs(newTarget)));
  });
});

describe('what of a ClusterAddon requeues its Cluster', () => {
  const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
  const addon = (extra: Partial<ClusterAddon['metadata']> = {}): ClusterAddon => ({
    ...existingAddon('alpha', { resourceVersion: '1', ...extra }),
    status: { conditions: [] },
  });

  it("a write of its status alone (stackflux's own, with a new resourceVersion) does not", () => {
    const before = addon();
    const after: ClusterAddon = {
      ...addon({ resourceVersion: '2' }),
      status: {
        release: V2,
        conditions: [
          {
            type: 'Ready',
            status: 'True',
            reason: 'Ready',
            message: 'ok',
            lastTransitionTime: '2025-01-01T00:00:00Z',
          },
        ],
      },
    };
    assert.ok(same(clusterAddonReconcileInputs(before), clusterAddonReconcileInputs(after)));
  });

  it('its spec, its deletion, its finalizers and a reconcile request do', () => {
    const inputs = clusterAddonReconcileInputs(addon());
    for (const changed of [
      { ...addon(), spec: { ...addon().spec, release: V2 } },
      addon({ deletionTimestamp: '2025-01-01T00:00:00Z' }),
      addon({ finalizers: [] }),
      addon({ annotations: { 'reconcile.fluxcd.io/requestedAt': 'now' } }),
    ])
      assert.ok(!same(inputs, clusterAddonReconcileInputs(changed)));
  });
});

// Issue 22 rows 3 and 12: the tenancy policy (controller flags) is an input of the reconcile.
describe('reconcileClusterAddon: tenancy policy (issue 22)', () => {
  it('--default-service-account: only the Kustomizations applying to the management cluster (Helm addons) impersonate it', () => {
    const tenancy = { defaultServiceAccount: 'tenant-applier' };
    const w = newWorld(cluster({ release: V3 }));
    converge(w, 'alpha', { tenancy });
    // Helm addons: their folder (HelmRelease + chart source) is applied to the management cluster.
    assert.equal(w.kustomizations.get('alpha.info.helm')?.spec.serviceAccountName, 'tenant-applier');
    assert.equal(w.kustomizations.get('alpha.web.helm')?.spec.serviceAccountName, 'tenant-applier');
    // A manifest addon applies through the Cluster's kubeconfig: Flux would impersonate the
    // ServiceAccount inside the workload cluster, which has none; so it names none.
    const cni = w.kustomizations.get('alpha.cni');
    assert.ok(cni?.spec.kubeConfig);
    assert.equal(cni?.spec.serviceAccountName, undefined);
    // The HelmRelease installs through the kubeconfig too: no ServiceAccount either.
    for (const addon of ['info', 'web']) {
      const hr = parseYaml(w.files?.get(`${addon}.helm/helmrelease.yaml`) ?? '') as Doc;
      assert.ok(hr.spec.kubeConfig);
      assert.equal(hr.spec.serviceAccountName, undefined);
    }
    const unset = newWorld(cluster({ release: V3 }));
    converge(unset, 'alpha');
    assert.equal(unset.kustomizations.get('alpha.info.helm')?.spec.serviceAccountName, undefined);
  });

  it('--allowed-chart-hosts: a chart from another host is InvalidRelease naming the field; nothing changes', () => {
    const r = must(
      reconcileClusterAddon(
        baseInput({ release: V3 }, { tenancy: { allowedChartHosts: ['charts.example.com'] } }),
      ),
    );
    assert.equal(r.branch, undefined);
    assert.equal(r.kustomizations, undefined);
    assert.equal(cond(r, 'Ready')?.reason, Reason.InvalidRelease);
    assert.match(
      cond(r, 'Ready')?.message ?? '',
      /addons\[2\] \(web\)\.repository "https:\/\/stefanprodan\.github\.io\/podinfo": host stefanprodan\.github\.io is not in --allowed-chart-hosts \(charts\.example\.com\)/,
    );
    const allowed = must(
      reconcileClusterAddon(baseInput({ release: V3 }, { tenancy: { allowedChartHosts: ['*.github.io'] } })),
    );
    assert.ok(allowed.branch, 'an allowed host renders');
  });
});

// ---- Issue 22 row 2: an addon Kustomization's target never changes across its life.

const V4 = 'docker-ferrol-1-30-v4';
const V5 = 'docker-ferrol-1-30-v5';
const V6 = 'docker-ferrol-1-30-v6';
/** v4: cni, then `x` as plain manifests (a ConfigMap into kube-system). */
trees[V4] = tree({
  'stack.yaml': stackYaml(
    'v4',
    '  - name: cni\n  - name: x\n    dependsOn: [cni]\n    targetNamespace: kube-system\n',
  ),
  'cluster-class/cluster-class.yaml': 'apiVersion: cluster.x-k8s.io/v1beta2\nkind: ClusterClass\n',
  'cluster-addon/cni/config.yaml.hbs': cniTemplate,
  'cluster-addon/cni/values.yaml': 'mtu: 1450\nbackend: vxlan\n',
  'cluster-addon/x/configmap.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x-from-manifests\n',
});
/** v5: `x` is an in-tree Helm chart. */
trees[V5] = tree({
  'stack.yaml': stackYaml(
    'v5',
    '  - name: cni\n  - name: x\n    dependsOn: [cni]\n    targetNamespace: kube-system\n',
  ),
  'cluster-class/cluster-class.yaml': 'apiVersion: cluster.x-k8s.io/v1beta2\nkind: ClusterClass\n',
  'cluster-addon/cni/config.yaml.hbs': cniTemplate,
  'cluster-addon/cni/values.yaml': 'mtu: 1450\nbackend: vxlan\n',
  'cluster-addon/x/Chart.yaml': 'apiVersion: v2\nname: x\nversion: 1.0.0\n',
  'cluster-addon/x/templates/configmap.yaml':
    'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n',
});
/** v6: `x` as manifests again, into another namespace. */
trees[V6] = tree({
  'stack.yaml': stackYaml(
    'v6',
    '  - name: cni\n  - name: x\n    dependsOn: [cni]\n    targetNamespace: x-system\n',
  ),
  'cluster-class/cluster-class.yaml': 'apiVersion: cluster.x-k8s.io/v1beta2\nkind: ClusterClass\n',
  'cluster-addon/cni/config.yaml.hbs': cniTemplate,
  'cluster-addon/cni/values.yaml': 'mtu: 1450\nbackend: vxlan\n',
  'cluster-addon/x/configmap.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x-from-manifests\n',
});

/** The Flux kinds a Helm addon's folder holds; a management-cluster Kustomization may apply only these. */
const HELM_FOLDER_KINDS = new Set(['HelmRelease', 'HelmRepository', 'OCIRepository']);

function targetOf(k: Kustomization): string {
  return JSON.stringify([k.spec.kubeConfig ?? null, k.spec.targetNamespace ?? null]);
}

/**
 * The invariant, on the world as it really is: every Kustomization reads only a folder whose
 * content was rendered for its own target (HelmRelease objects for the management cluster, anything
 * else for the workload cluster) — at every moment, whatever was pushed in between.
 */
function assertFoldersMatchTargets(w: World, when: string): void {
  for (const k of w.kustomizations.values()) {
    const folder = (k.spec.path ?? '').replace(/^\.\//, '');
    const kinds = [...(w.files ?? new Map<string, string>())]
      .filter(([path]) => path.startsWith(`${folder}/`))
      .map(([, text]) => String((parseYaml(text) as { kind?: unknown }).kind));
    const toManagement = k.spec.kubeConfig === undefined;
    for (const kind of kinds) {
      assert.equal(
        HELM_FOLDER_KINDS.has(kind),
        toManagement,
        `${when}: Kustomization ${k.metadata.name} (${toManagement ? 'management' : 'workload'} cluster) reads a ${kind} in ./${folder}`,
      );
    }
  }
}

/**
 * One reconcile as the runtime may run it: the informer may not show some Kustomizations yet
 * (`hidden`), and the branch change may stay in the batch (`push: false`). Asserts that no emitted
 * Kustomization re-points an object that exists (seen or not), then applies the result.
 */
function step(w: World, when: string, o: { push: boolean; hidden?: string[] }): ClusterAddonResult {
  const seen = [...w.kustomizations.values()].filter((k) => !(o.hidden ?? []).includes(k.metadata.name));
  const r = must(reconcileClusterAddon(worldInput(w, 'alpha', { kustomizations: seen })));
  for (const k of r.kustomizations ?? []) {
    const real = w.kustomizations.get(k.metadata.name);
    if (real !== undefined) {
      assert.equal(targetOf(k), targetOf(real), `${when}: ${k.metadata.name} re-pointed`);
    }
    assert.equal(
      k.spec.path?.endsWith('.helm'),
      k.spec.kubeConfig === undefined,
      `${when}: ${k.metadata.name}: its folder and its target disagree`,
    );
  }
  applyResult(w, o.push ? r : { ...r, branch: undefined });
  assertFoldersMatchTargets(w, when);
  return r;
}

/** Moves the Cluster to `release`, pushing only after `held` reconciles, then converges checking every step. */
function move(w: World, release: string, held: number, hidden: string[] = []): void {
  w.cluster = cluster({ release });
  for (let i = 0; i < held; i++) step(w, `${release} held ${i}`, { push: false, hidden });
  for (let i = 0; i < 8; i++) {
    const r = step(w, `${release} round ${i}`, { push: true });
    if (noChanges(w, r)) return;
  }
  assert.fail(`no fixed point moving to ${release}`);
}

describe('reconcileClusterAddon: an addon Kustomization keeps its target (issue 22)', () => {
  it('manifests → Helm chart → manifests: no Kustomization is re-pointed, none reads content rendered for another target', () => {
    for (const held of [0, 1, 3]) {
      const w = newWorld(cluster({ release: V4 }));
      converge(w, 'alpha');
      assertFoldersMatchTargets(w, 'v4');
      assert.ok(w.kustomizations.get('alpha.x')?.spec.kubeConfig, 'x applies into the workload cluster');

      move(w, V5, held);
      assert.deepEqual([...w.kustomizations.keys()].sort(), ['alpha.cni', 'alpha.x.helm']);
      const helmK = w.kustomizations.get('alpha.x.helm');
      assert.equal(helmK?.spec.kubeConfig, undefined);
      assert.equal(helmK?.spec.path, './x.helm');
      assert.ok(w.files?.has('x.helm/helmrelease.yaml'));
      assert.ok(
        ![...(w.files?.keys() ?? [])].some((p) => p.startsWith('x/')),
        'the manifests folder is gone',
      );

      move(w, V4, held);
      assert.deepEqual([...w.kustomizations.keys()].sort(), ['alpha.cni', 'alpha.x']);
      assert.deepEqual(w.kustomizations.get('alpha.x')?.spec.kubeConfig, {
        secretRef: { name: 'alpha-kubeconfig', key: 'value' },
      });
    }
  });

  it('while the Helm branch change waits for its push, no Kustomization of x targets the management cluster', () => {
    const w = newWorld(cluster({ release: V4 }));
    converge(w, 'alpha');
    w.cluster = cluster({ release: V5 });
    const r = step(w, 'pending', { push: false });
    assert.ok(r.branch !== undefined, 'the change waits for its batch');
    assert.ok(r.deleteKustomizations.includes('alpha.x'), 'the workload Kustomization goes (Flux prunes x)');
    assert.ok(
      !(r.kustomizations ?? []).some((k) => k.metadata.name.startsWith('alpha.x')),
      'nothing for x while its Helm folder is not on the branch',
    );
  });

  it('a Kustomization the informer does not show yet is never re-pointed by a newer release', () => {
    // x was just created as a Helm addon; the informer has not seen it when the Cluster moves back.
    const w = newWorld(cluster({ release: V5 }));
    converge(w, 'alpha');
    move(w, V4, 2, ['alpha.x.helm']);
    assert.equal(w.kustomizations.get('alpha.x.helm'), undefined);
  });

  it('the new kind waits until the old kind is gone (it still prunes what it applied)', () => {
    const w = newWorld(cluster({ release: V5 }));
    converge(w, 'alpha');
    w.cluster = cluster({ release: V4 });
    const pushed = step(w, 'push', { push: true });
    assert.ok(pushed.deleteKustomizations.includes('alpha.x.helm'));
    // The delete is under way: Flux's finalizer keeps the object until helm-controller uninstalled.
    const cni = w.kustomizations.get('alpha.cni');
    assert.ok(cni);
    const deleting = structuredClone(cni);
    deleting.metadata = {
      ...deleting.metadata,
      name: 'alpha.x.helm',
      labels: { ...deleting.metadata.labels, 'stackflux.io/addon': 'x' },
    };
    deleting.spec = { ...deleting.spec, path: './x.helm' };
    delete deleting.spec.kubeConfig;
    const r = must(
      reconcileClusterAddon(
        worldInput(w, 'alpha', { kustomizations: [...w.kustomizations.values(), deleting] }),
      ),
    );
    assert.ok(!(r.kustomizations ?? []).some((k) => k.metadata.name === 'alpha.x'));
    const after = must(reconcileClusterAddon(worldInput(w, 'alpha')));
    assert.ok((after.kustomizations ?? []).some((k) => k.metadata.name === 'alpha.x'));
  });

  it('a targetNamespace that changes between releases gets a new object, not a re-pointed one', () => {
    for (const held of [0, 2]) {
      const w = newWorld(cluster({ release: V4 }));
      converge(w, 'alpha');
      w.cluster = cluster({ release: V6 });
      const first = step(w, 'v6', { push: held === 0 });
      assert.ok(first.deleteKustomizations.includes('alpha.x'));
      assert.ok(!(first.kustomizations ?? []).some((k) => k.metadata.name === 'alpha.x'));
      move(w, V6, held);
      assert.equal(w.kustomizations.get('alpha.x')?.spec.targetNamespace, 'x-system');
    }
  });

  it("a Helm addon's Kustomization of the old naming is deleted with deletionPolicy Orphan (its HelmRelease is adopted, not reinstalled)", () => {
    const w = newWorld(cluster({ release: V5 }));
    converge(w, 'alpha');
    const current = w.kustomizations.get('alpha.x.helm');
    assert.ok(current);
    // What the previous version emitted: `<cluster>.<addon>` applying ./x to the management cluster.
    const legacy = structuredClone(current);
    legacy.metadata = { ...legacy.metadata, name: 'alpha.x' };
    legacy.spec = { ...legacy.spec, path: './x' };
    w.kustomizations.delete('alpha.x.helm');
    w.kustomizations.set('alpha.x', legacy);
    const r = must(reconcileClusterAddon(worldInput(w, 'alpha')));
    assert.deepEqual(r.deleteKustomizations, ['alpha.x']);
    assert.deepEqual(
      r.patches.map((p) => [p.name, p.patch]),
      [['alpha.x', { spec: { deletionPolicy: 'Orphan' } }]],
    );
    assert.ok(!(r.kustomizations ?? []).some((k) => k.metadata.name.startsWith('alpha.x')));
  });
});

// ---- Issue 22 row 7: a ClusterStack serves Clusters of other namespaces only when it opts in.

const TENANT = 'tenant-b';
const SECRET_TOKEN = 'token-of-team-a-do-not-share';

/** A Cluster of namespace tenant-b naming team's ClusterClass (v1beta2 classRef.namespace). */
function foreignCluster(release = V1): Record<string, unknown> {
  const c = cluster({ release });
  const meta = c.metadata as Record<string, unknown>;
  meta.namespace = TENANT;
  const topology = (c.spec as { topology: { classRef: Record<string, unknown> } }).topology;
  topology.classRef.namespace = NS;
  return c;
}

/** team's ClusterStack, with central values holding a token and an optional namespace selector. */
function sharingStack(selector?: ClusterStack['spec']['clusterNamespaceSelector']): ClusterStack {
  return clusterStack({
    noProvider: true,
    values: { cni: { backend: SECRET_TOKEN } },
    ...(selector !== undefined ? { clusterNamespaceSelector: selector } : {}),
  });
}

function foreignInput(stack: ClusterStack, labels?: Record<string, string>): ClusterAddonInput {
  return baseInput(
    {},
    {
      cluster: foreignCluster(),
      namespace: TENANT,
      clusterAddon: { ...existingAddon(), metadata: { ...existingAddon().metadata, namespace: TENANT } },
      clusterStack: stack,
      ...(labels !== undefined ? { namespaceLabels: new Map([[TENANT, labels]]) } : {}),
    },
  );
}

function branchText(r: ClusterAddonResult): string {
  return [...(r.branch?.files?.values() ?? [])].join('\n');
}

describe("reconcileClusterAddon: another namespace's ClusterClass (issue 22)", () => {
  it('is refused without an opt-in (no branch, no Flux objects, a condition naming the ClusterStack and the selector), served with one', () => {
    const r = must(reconcileClusterAddon(foreignInput(sharingStack(), { 'team-a/shared': 'yes' })));
    assert.equal(r.branch, undefined);
    assert.equal(r.kustomizations, undefined);
    assert.equal(r.gitRepository, undefined);
    const ready = cond(r, 'Ready');
    assert.equal(ready?.status, 'False');
    assert.equal(ready?.reason, 'ClusterClassNotShared');
    assert.match(
      ready?.message ?? '',
      /ClusterStack team\/ferrol .*tenant-b.*spec\.clusterNamespaceSelector/,
    );
    assert.ok(!JSON.stringify(r).includes(SECRET_TOKEN), 'the central values are nowhere in the result');

    // Opted in: served, with the central values the ClusterStack agreed to share.
    const stack = sharingStack({ matchLabels: { 'stackflux.io/tenant': 'shared' } });
    const served = must(reconcileClusterAddon(foreignInput(stack, { 'stackflux.io/tenant': 'shared' })));
    assert.ok(served.branch !== undefined, 'rendered');
    assert.equal(served.branch.branch, 'stackflux/tenant-b/alpha');
    assert.ok(branchText(served).includes(SECRET_TOKEN));
    assert.notEqual(cond(served, 'Ready')?.reason, 'ClusterClassNotShared');
    // A Cluster of the ClusterStack's own namespace never needs the selector.
    assert.ok(
      must(reconcileClusterAddon(baseInput({}, { clusterStack: sharingStack() }))).branch !== undefined,
    );
  });

  it("is refused when the selector does not select the Namespace's labels (or the Namespace is gone)", () => {
    const stack = sharingStack({ matchLabels: { 'stackflux.io/tenant': 'shared' } });
    for (const labels of [{ 'stackflux.io/tenant': 'other' }, {}] as Record<string, string>[]) {
      const r = must(reconcileClusterAddon(foreignInput(stack, labels)));
      assert.equal(cond(r, 'Ready')?.reason, 'ClusterClassNotShared');
      assert.match(cond(r, 'Ready')?.message ?? '', /does not select/);
      assert.equal(r.branch, undefined);
    }
    const gone = must(reconcileClusterAddon({ ...foreignInput(stack), namespaceLabels: new Map() }));
    assert.equal(cond(gone, 'Ready')?.reason, 'ClusterClassNotShared');
  });

  it('is refused by name also once the release is gone (collected because it does not serve the Cluster)', () => {
    const r = must(
      reconcileClusterAddon({ ...foreignInput(sharingStack(), {}), release: undefined, tree: undefined }),
    );
    assert.equal(cond(r, 'Ready')?.reason, 'ClusterClassNotShared');
  });

  it('waits (renders nothing) while the Namespace labels are not known', () => {
    const r = must(reconcileClusterAddon(foreignInput(sharingStack({ matchLabels: { a: 'b' } }))));
    assert.equal(cond(r, 'Reconciling')?.reason, 'NamespaceNotKnown');
    assert.equal(r.branch, undefined);
  });
});

describe('garbage collection: a foreign Cluster keeps a release only where it is served (issue 22)', () => {
  const ready = (tag: string): ClusterStackRelease => ({
    ...releaseObject(tag),
    status: {
      conditions: [
        {
          type: 'Ready',
          status: 'True',
          reason: 'Succeeded',
          message: 'ok',
          lastTransitionTime: '2025-01-01T00:00:00Z',
        },
      ],
    },
  });
  const gc = (stack: ClusterStack, labels?: Record<string, string>) =>
    reconcileClusterStack({
      clusterStack: stack,
      listing: { ok: true, tags: [V1, V2], listedAt: '2025-01-01T00:00:00Z' },
      releases: [ready(V1), ready(V2)],
      clusters: [{ name: `${TENANT}/alpha`, className: V1, classNamespace: NS, clusterNamespace: TENANT }],
      ...(labels !== undefined ? { namespaceLabels: new Map([[TENANT, labels]]) } : {}),
      now,
    });

  it('a Cluster of a namespace the ClusterStack does not serve does not pin its release; a served one does', () => {
    assert.deepEqual(gc(sharingStack(), {}).delete, [V1]);
    const selective = sharingStack({ matchLabels: { 'stackflux.io/tenant': 'shared' } });
    assert.deepEqual(gc(selective, { 'stackflux.io/tenant': 'other' }).delete, [V1]);
    const served = gc(selective, { 'stackflux.io/tenant': 'shared' });
    assert.deepEqual(served.delete, []);
    assert.equal(served.status.summary?.find((s) => s.name === V1)?.inUse, true);
    // Namespace labels not known yet: kept (nothing deleted on a guess).
    assert.deepEqual(gc(selective).delete, []);
  });

  it("the release's in-use finalizer counts the same Clusters", () => {
    const users = ['own', `${TENANT}/alpha`, 'tenant-c/beta'];
    const labels = new Map<string, Record<string, string>>([
      [TENANT, { 'stackflux.io/tenant': 'shared' }],
      ['tenant-c', {}],
    ]);
    assert.deepEqual(servedClusterNames(users, sharingStack(), labels), ['own']);
    const selective = sharingStack({ matchLabels: { 'stackflux.io/tenant': 'shared' } });
    assert.deepEqual(servedClusterNames(users, selective, labels), ['own', `${TENANT}/alpha`]);
    assert.deepEqual(servedClusterNames(users, selective, undefined), users, 'unknown labels: kept');
  });
});

describe('reconcileClusterAddon: a csctl (cluster-stack-operator) release', () => {
  const CSCTL = 'docker-csoferrol-1-30-v1';
  const csctlTree = readStackDir(
    join(import.meta.dirname, '..', '..', '..', 'stacks', 'docker-csoferrol-1-30'),
  );
  /** The renderer the reconcile calls, recording what it was asked (the csctl renderer itself is tested against helm). */
  const recorded: AddonRenderInput[] = [];
  const render = (i: AddonRenderInput) => {
    recorded.push(i);
    const text = `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${i.addon}\n`;
    return { ok: true as const, files: new Map([['cm.yaml', text]]), objects: [], values: {} };
  };

  it('plans one addon per chart: first-entry order, BeforeClusterUpgrade stage, action: delete dropped', () => {
    const tag = parseReleaseTag(CSCTL);
    assert.ok(tag.ok);
    const read = readReleaseDescription(csctlTree, tag.value);
    assert.ok(read.ok);
    assert.deepEqual(csctlAddonPlan(read.value), [
      { name: 'cni', dependsOn: [], targetNamespace: 'kube-system', stage: 'BeforeClusterUpgrade' },
      { name: 'metrics', dependsOn: ['cni'], targetNamespace: 'kube-system', stage: 'BeforeClusterUpgrade' },
    ]);
    const deleting = {
      ...read.value,
      addons: [
        ...read.value.addons.filter((a) => a.stage === 'AfterControlPlaneInitialized'),
        {
          ...read.value.addons[0],
          stage: 'BeforeClusterUpgrade' as const,
          action: 'delete' as const,
          dependsOn: [],
        },
      ],
    } as typeof read.value;
    assert.deepEqual(csctlAddonPlan(deleting), [
      {
        name: 'metrics',
        dependsOn: [],
        targetNamespace: 'kube-system',
        stage: 'AfterControlPlaneInitialized',
      },
    ]);
  });

  it('renders each addon with its chart, values template and Kubernetes version; Kustomizations into kube-system in order; stage in status', () => {
    recorded.length = 0;
    const w = newWorld(cluster({ release: CSCTL }));
    const over = {
      release: { ...releaseObject(CSCTL), spec: { ...releaseObject(CSCTL).spec, clusterStack: 'ferrol' } },
      tree: csctlTree,
      render,
    };
    converge(w, 'alpha', over);
    const asked = recorded.filter(isCsctlAddonInput);
    assert.deepEqual(
      [...new Set(asked.map((i) => `${i.addon} ${i.chartPath} ${i.valuesTemplate} ${i.kubernetesVersion}`))],
      [
        'cni cluster-addon/cni/ cluster-addon/cni/overwrite.yaml v1.30.4',
        'metrics cluster-addon/metrics/ cluster-addon/metrics/overwrite.yaml v1.30.4',
      ],
    );
    assert.ok(asked.every((i) => (i.cluster.metadata as { name: string }).name === 'alpha'));
    assert.deepEqual([...(w.files?.keys() ?? [])].sort(), ['cni/cm.yaml', 'metrics/cm.yaml']);
    const ks = [...w.kustomizations.values()];
    assert.deepEqual(
      ks.map((k) => [k.metadata.name, k.spec.targetNamespace, (k.spec.dependsOn ?? []).map((d) => d.name)]),
      [
        ['alpha.cni', 'kube-system', []],
        ['alpha.metrics', 'kube-system', ['alpha.cni']],
      ],
    );
    const r = must(reconcileClusterAddon(worldInput(w, 'alpha', over)));
    assert.equal(cond(r, 'Ready')?.status, 'True', cond(r, 'Ready')?.message);
    assert.deepEqual(
      r.status.addons?.map((a) => [a.name, a.stage]),
      [
        ['cni', 'BeforeClusterUpgrade'],
        ['metrics', 'BeforeClusterUpgrade'],
      ],
    );
  });

  it('while a rollout prepares the Cluster: the target release, over the Cluster with the topology it moves to', () => {
    recorded.length = 0;
    const V2CSCTL = 'docker-csoferrol-1-30-v2';
    const c = cluster({ release: CSCTL });
    (c.metadata as Record<string, unknown>).annotations = {
      [ROLLOUT_ANNOTATIONS.phase]: PREPARING_PHASE,
      [ROLLOUT_ANNOTATIONS.to]: V2CSCTL,
    };
    (c.spec as { topology: { version: string } }).topology.version = 'v1.30.2';
    const w = newWorld(c);
    const v2 = releaseObject(V2CSCTL);
    converge(w, 'alpha', {
      release: { ...v2, spec: { ...v2.spec, clusterStack: 'ferrol' } },
      tree: csctlTree,
      render,
    });
    assert.equal(w.clusterAddon?.spec.release, V2CSCTL, 'the ClusterAddon renders the target release');
    const asked = recorded.filter(isCsctlAddonInput);
    assert.ok(asked.length > 0);
    for (const i of asked)
      assert.deepEqual((i.cluster.spec as { topology: unknown }).topology, {
        classRef: { name: V2CSCTL },
        version: 'v1.30.4',
      });
    assert.equal(
      (c.spec as { topology: { classRef: { name: string } } }).topology.classRef.name,
      CSCTL,
      'the Cluster itself is not changed',
    );
    assert.equal((c.spec as { topology: { version: string } }).topology.version, 'v1.30.2');
  });

  it('holds the cni waitForPostCondition as a health check of alpha.cni; says which condition it cannot hold', () => {
    const renderObjects = (name: string) => (i: AddonRenderInput) => {
      const text = `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${name}\n`;
      const objects = [{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name } }];
      return { ok: true as const, files: new Map([[`${i.addon}.yaml`, text]]), objects, values: {} };
    };
    const over = (name: string) => ({
      release: { ...releaseObject(CSCTL), spec: { ...releaseObject(CSCTL).spec, clusterStack: 'ferrol' } },
      tree: csctlTree,
      render: renderObjects(name),
    });
    const w = newWorld(cluster({ release: CSCTL }));
    converge(w, 'alpha', over('cni-config'));
    const exprs = new Map(
      [...w.kustomizations.values()].map((k) => [k.metadata.name, k.spec.healthCheckExprs]),
    );
    assert.deepEqual(exprs.get('alpha.cni'), [
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        current:
          '(metadata.name == "cni-config" && metadata.namespace == "kube-system" ? (data.clusterName != "") : true)',
      },
    ]);
    assert.equal(exprs.get('alpha.metrics'), undefined, 'metrics has no post-condition');
    const r = must(reconcileClusterAddon(worldInput(w, 'alpha', over('cni-config'))));
    assert.equal(cond(r, 'PostConditionsChecked')?.status, 'True');
    assert.equal(cond(r, 'PostConditionsChecked')?.reason, 'PostConditionsMapped');

    // The chart no longer applies the ConfigMap the condition reads: no health check, and it says so.
    const other = newWorld(cluster({ release: CSCTL }));
    converge(other, 'alpha', over('renamed'));
    assert.equal(other.kustomizations.get('alpha.cni')?.spec.healthCheckExprs, undefined);
    const r2 = must(reconcileClusterAddon(worldInput(other, 'alpha', over('renamed'))));
    assert.equal(cond(r2, 'PostConditionsChecked')?.status, 'False');
    assert.equal(cond(r2, 'PostConditionsChecked')?.reason, 'PostConditionNotMapped');
    assert.match(
      cond(r2, 'PostConditionsChecked')?.message ?? '',
      /addon cni: "cniconfig.data.clusterName != """: ConfigMap kube-system\/cni-config is not an object this addon applies/,
    );
  });
  /** The example stack with `pre` as metrics' waitForPreCondition in AfterControlPlaneInitialized. */
  const withPreCondition = (pre: string): ReleaseTree => {
    const text = csctlTree.get('clusteraddon.yaml') ?? '';
    const entry = '    - name: metrics\n      action: apply\n';
    assert.ok(text.includes(entry));
    return releaseTree(
      new Map([...csctlTree, ['clusteraddon.yaml', text.replace(entry, `${entry}${pre}`)]]),
      binaryFilesOf(csctlTree),
    );
  };
  const GATE_CONDITION = [
    '      waitForPreCondition:',
    '        objects:',
    '          - {key: gate, apiVersion: v1, kind: ConfigMap, name: metrics-gate, namespace: kube-system}',
    '        conditions: gate.data.ready == "yes"',
    '',
  ].join('\n');
  const overTree = (tree: ReleaseTree) => ({
    release: { ...releaseObject(CSCTL), spec: { ...releaseObject(CSCTL).spec, clusterStack: 'ferrol' } },
    tree,
    render,
  });

  it('gates metrics on its waitForPreCondition: alpha.metrics.pre checks the existing object, alpha.metrics depends on it', () => {
    const w = newWorld(cluster({ release: CSCTL }));
    const over = overTree(withPreCondition(GATE_CONDITION));
    converge(w, 'alpha', over);
    assert.equal(
      w.files?.get('metrics.pre/kustomization.yaml'),
      EMPTY_KUSTOMIZATION,
      'an empty folder for Flux',
    );
    const metrics = w.kustomizations.get('alpha.metrics');
    const gate = w.kustomizations.get('alpha.metrics.pre');
    assert.ok(metrics && gate);
    assert.deepEqual(metrics.spec.dependsOn, [{ name: 'alpha.metrics.pre' }, { name: 'alpha.cni' }]);
    assert.equal(gate.spec.path, './metrics.pre');
    assert.equal(gate.spec.wait, false, 'the objects are not its own: spec.healthChecks are checked');
    assert.deepEqual(gate.spec.healthChecks, [
      { apiVersion: 'v1', kind: 'ConfigMap', name: 'metrics-gate', namespace: 'kube-system' },
    ]);
    assert.deepEqual(gate.spec.healthCheckExprs, [
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        current:
          '(metadata.name == "metrics-gate" && metadata.namespace == "kube-system" ? (data.ready == "yes") : true)',
      },
    ]);
    // Same source, same workload cluster, same owner and labels as the addon it gates.
    assert.deepEqual(gate.spec.sourceRef, metrics.spec.sourceRef);
    assert.deepEqual(gate.spec.kubeConfig, metrics.spec.kubeConfig);
    assert.deepEqual(gate.metadata.ownerReferences, metrics.metadata.ownerReferences);
    assert.deepEqual(gate.metadata.labels, metrics.metadata.labels);
    assert.equal(w.kustomizations.get('alpha.cni')?.spec.dependsOn, undefined, 'cni has no pre-condition');
    const r = must(reconcileClusterAddon(worldInput(w, 'alpha', over)));
    assert.equal(cond(r, 'PreConditionsChecked')?.status, 'True');
    assert.equal(cond(r, 'PreConditionsChecked')?.reason, 'PreConditionsMapped');
    assert.equal(cond(r, 'Ready')?.status, 'True', cond(r, 'Ready')?.message);
    assert.deepEqual(
      r.status.addons?.map((a) => a.name),
      ['cni', 'metrics'],
      'the gate is no addon of the status',
    );

    // Flux holds metrics on the gate: the addon's status says so with the gate's own message.
    const notReady = (reason: string, message: string) => ({
      conditions: [
        {
          type: 'Ready',
          status: 'False' as const,
          reason,
          message,
          lastTransitionTime: '2025-01-01T00:00:00Z',
        },
      ],
    });
    const missing = "timeout waiting for: [ConfigMap/kube-system/metrics-gate status: 'NotFound']";
    gate.status = notReady('HealthCheckFailed', `health check failed after 30s: ${missing}`);
    metrics.status = notReady('DependencyNotReady', "dependency 'team/alpha.metrics.pre' is not ready");
    const held = must(reconcileClusterAddon(worldInput(w, 'alpha', over)));
    const status = held.status.addons?.find((a) => a.name === 'metrics');
    assert.equal(status?.ready, false);
    assert.equal(status?.reason, Reason.WaitingForPreCondition);
    assert.equal(
      status?.message,
      `waiting for its waitForPreCondition (Kustomization alpha.metrics.pre): health check failed after 30s: ${missing}`,
    );
    assert.notEqual(cond(held, 'Ready')?.status, 'True');
    assert.match(cond(held, 'Reconciling')?.message ?? '', /waiting for metrics \(its waitForPreCondition\)/);

    // The next release drops the condition: the gate goes, metrics depends on cni only.
    const plain = overTree(csctlTree);
    converge(w, 'alpha', plain);
    assert.equal(w.kustomizations.has('alpha.metrics.pre'), false);
    assert.equal(w.files?.has('metrics.pre/kustomization.yaml'), false);
    assert.deepEqual(w.kustomizations.get('alpha.metrics')?.spec.dependsOn, [{ name: 'alpha.cni' }]);
    const r2 = must(reconcileClusterAddon(worldInput(w, 'alpha', plain)));
    assert.equal(cond(r2, 'PreConditionsChecked'), undefined, 'absent when the release has none');
  });

  it('says which waitForPreCondition it cannot hold, and applies the addon without a gate', () => {
    const twoObjects = [
      '      waitForPreCondition:',
      '        objects:',
      '          - {key: a, apiVersion: v1, kind: ConfigMap, name: a, namespace: kube-system}',
      '          - {key: b, apiVersion: v1, kind: ConfigMap, name: b, namespace: kube-system}',
      '        conditions: a.data.x == b.data.x',
      '',
    ].join('\n');
    const w = newWorld(cluster({ release: CSCTL }));
    const over = overTree(withPreCondition(twoObjects));
    converge(w, 'alpha', over);
    assert.equal(w.kustomizations.has('alpha.metrics.pre'), false);
    assert.equal(w.files?.has('metrics.pre/kustomization.yaml'), false);
    assert.deepEqual(w.kustomizations.get('alpha.metrics')?.spec.dependsOn, [{ name: 'alpha.cni' }]);
    const r = must(reconcileClusterAddon(worldInput(w, 'alpha', over)));
    assert.equal(cond(r, 'PreConditionsChecked')?.status, 'False');
    assert.equal(cond(r, 'PreConditionsChecked')?.reason, 'PreConditionNotMapped');
    assert.match(
      cond(r, 'PreConditionsChecked')?.message ?? '',
      /^not checked \(the addon is applied without waiting for it\): addon metrics: "a.data.x == b.data.x": it reads 2 objects; Flux checks one object at a time$/,
    );
  });
});
