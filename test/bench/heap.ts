// `npm run bench -- heap [--clusters N] [--addons A] [--helm H] [--refs] [--no-intern]`: the controller's heap
// per Cluster, without an API server. It builds, per Cluster, the objects stackflux caches as the
// API server returns them (JSON text parsed a LIST page at a time, like the client), feeds them
// through the REAL Informer (its transform, store and indexers; the LIST comes from a stub that
// serves those pages and a watch that stays silent), and reports the V8 heap each kind keeps
// (global.gc(), process.memoryUsage().heapUsed deltas), a table and a projection at 10,000.
//
// Shapes (converged fleet, Flux running), and where they come from:
// - Cluster: test/support/fanout.ts clusterObject + clusterStatus (what the fleet bench writes: a
//   Cluster API v1beta2 Cluster with topology, clusterNetwork, controlPlaneEndpoint, 10 v1beta2
//   conditions), plus what Cluster API itself adds on a real management cluster: controlPlaneRef /
//   infrastructureRef (topology controller), finalizer, v1beta1 deprecated conditions
//   (status.deprecated.v1beta1.conditions), failureDomains, managedFields of 3 managers.
// - ClusterAddon: test/golden/full-pipeline/expected/apply + applyStatus (…/clusteraddons/prod-1),
//   converged (every addon ready, Ready=True).
// - GitRepository / Kustomization: the same golden case (…/prod-1-addons, …/prod-1.cni), with the
//   defaults the API server adds and the status source-controller / kustomize-controller write
//   (Flux v2 APIs: artifact, conditions, lastAppliedRevision, inventory of 2 entries per addon).
// - HelmRelease (--helm H per Cluster): helm-controller v2 status with one history entry.
// - --refs: the objects a Cluster's refs point at (KubeadmControlPlane, DockerCluster), cached by
//   the clusteraddon controller for Clusters of a stackflux ClusterClass (real Cluster API only;
//   the fleet bench's Clusters have no refs).
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { slimCluster } from '../../controller/controllers/clusterview.ts';
import { clusterUse } from '../../controller/reconcilers/clusterstack.ts';
import type { KubeClient, KubeObject } from '../../controller/runtime/client.ts';
import { Informer, leanObject } from '../../controller/runtime/informer.ts';
import { internStrings, StringTable } from '../../controller/runtime/intern.ts';
import { clusterObject, clusterStatus } from '../support/fanout.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const NS = 'fleet';
const T0 = '2026-01-01T00:00:00Z';
const T1 = '2026-01-01T00:05:12Z';
const CAPI = 'cluster.x-k8s.io/v1beta2';
const MANAGED_BY = { 'app.kubernetes.io/managed-by': 'stackflux' };
const name = (i: number): string => `c-${String(i).padStart(5, '0')}`;
const hex = (i: number, salt: number, len = 40): string => {
  let s = '';
  let x = (i * 2654435761 + salt * 40503) >>> 0;
  while (s.length < len) {
    x = (x * 1103515245 + 12345) >>> 0;
    s += x.toString(16).padStart(8, '0');
  }
  return s.slice(0, len);
};
const uid = (i: number, salt: number): string => {
  const h = hex(i, salt, 32);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
};
let rv = 100_000;
const nextRv = (): string => String(rv++);

function managedField(manager: string, operation: string, subresource: string | undefined, fields: object) {
  return {
    manager,
    operation,
    apiVersion: 'v1',
    time: T1,
    fieldsType: 'FieldsV1',
    fieldsV1: fields,
    ...(subresource !== undefined ? { subresource } : {}),
  };
}

function condition(type: string, reason: string, message = '', status = 'True') {
  return { type, status, reason, message, lastTransitionTime: T0, observedGeneration: 1 };
}

/**
 * A provisioned Cluster API v1beta2 Cluster: the fleet bench's Cluster and status
 * (test/support/fanout.ts), with what Cluster API adds on a real management cluster (see the header).
 */
function cluster(i: number): KubeObject {
  const base = clusterObject(NS, i, 'docker-ferrol-1-30-v1') as KubeObject & {
    spec: Record<string, unknown>;
  };
  const n = base.metadata.name ?? '';
  const status = clusterStatus(NS, i).status as Record<string, unknown>;
  const v1beta1 = (type: string) => ({ type, status: 'True', lastTransitionTime: T0 });
  return {
    ...base,
    metadata: {
      ...base.metadata,
      uid: uid(i, 1),
      resourceVersion: nextRv(),
      generation: 2,
      creationTimestamp: T0,
      labels: { ...base.metadata.labels, 'topology.cluster.x-k8s.io/owned': '' },
      finalizers: ['cluster.cluster.x-k8s.io'],
      managedFields: [
        managedField('platform-gitops', 'Apply', undefined, {
          'f:metadata': { 'f:labels': { 'f:env': {}, 'f:example.com/team': {} } },
          'f:spec': {
            'f:clusterNetwork': { 'f:pods': { 'f:cidrBlocks': {} } },
            'f:topology': { 'f:classRef': {} },
          },
        }),
        managedField('manager', 'Update', undefined, {
          'f:metadata': { 'f:finalizers': { '.': {}, 'v:"cluster.cluster.x-k8s.io"': {} } },
          'f:spec': { 'f:controlPlaneRef': {}, 'f:infrastructureRef': {}, 'f:controlPlaneEndpoint': {} },
        }),
        managedField('manager', 'Update', 'status', {
          'f:status': { 'f:conditions': {}, 'f:deprecated': {}, 'f:controlPlane': {}, 'f:workers': {} },
        }),
      ],
    },
    spec: {
      ...base.spec,
      controlPlaneRef: {
        apiGroup: 'controlplane.cluster.x-k8s.io',
        kind: 'KubeadmControlPlane',
        name: `${n}-x7k2p`,
      },
      infrastructureRef: {
        apiGroup: 'infrastructure.cluster.x-k8s.io',
        kind: 'DockerCluster',
        name: `${n}-q9w4z`,
      },
    },
    status: {
      ...status,
      observedGeneration: 2,
      failureDomains: [
        { name: 'fd-a', controlPlane: true },
        { name: 'fd-b', controlPlane: true },
      ],
      deprecated: {
        v1beta1: {
          conditions: [
            'Ready',
            'ControlPlaneInitialized',
            'ControlPlaneReady',
            'InfrastructureReady',
            'TopologyReconciled',
          ].map(v1beta1),
        },
      },
    },
  };
}

function ownedBy(kind: string, apiVersion: string, n: string, u: string) {
  return [{ apiVersion, kind, name: n, uid: u, controller: true, blockOwnerDeletion: true }];
}

function branchRevision(i: number): string {
  return `stackflux/${NS}/${name(i)}@sha1:${hex(i, 7)}`;
}

/** test/golden/full-pipeline/expected/{apply,applyStatus}/…/clusteraddons/prod-1, converged. */
function clusterAddon(i: number, addons: string[]): KubeObject {
  const n = name(i);
  const ready = condition(
    'Ready',
    'Succeeded',
    `release docker-ferrol-1-30-v1: every addon applied ${branchRevision(i)}`,
  );
  return {
    apiVersion: 'stackflux.io/v1alpha1',
    kind: 'ClusterAddon',
    metadata: {
      name: n,
      namespace: NS,
      uid: uid(i, 2),
      resourceVersion: nextRv(),
      generation: 1,
      creationTimestamp: T0,
      labels: {
        ...MANAGED_BY,
        'stackflux.io/cluster': n,
        'stackflux.io/clusterstack': 'ferrol',
        'stackflux.io/release': 'docker-ferrol-1-30-v1',
      },
      finalizers: ['stackflux.io/fleet-cleanup'],
      ownerReferences: ownedBy('Cluster', CAPI, n, uid(i, 1)),
      managedFields: [
        managedField('stackflux', 'Apply', undefined, {
          'f:metadata': { 'f:finalizers': {}, 'f:labels': {}, 'f:ownerReferences': {} },
          'f:spec': { 'f:cluster': {}, 'f:clusterStack': {}, 'f:release': {} },
        }),
        managedField('stackflux', 'Apply', 'status', {
          'f:status': { 'f:addons': {}, 'f:conditions': {}, 'f:fleetCommit': {}, 'f:release': {} },
        }),
      ],
    },
    spec: { cluster: n, clusterStack: 'ferrol', release: 'docker-ferrol-1-30-v1' },
    status: {
      addons: addons.map((a) => ({
        name: a,
        ready: true,
        reason: 'ReconciliationSucceeded',
        message: `Applied revision: ${branchRevision(i)}`,
        release: 'docker-ferrol-1-30-v1',
        kustomization: `${n}.${a}`,
        lastAppliedRevision: branchRevision(i),
      })),
      conditions: [ready],
      fleetBranch: `stackflux/${NS}/${n}`,
      fleetCommit: hex(i, 7),
      gitRepository: `${n}-addons`,
      observedGeneration: 1,
      release: 'docker-ferrol-1-30-v1',
    },
  };
}

/** The golden GitRepository prod-1-addons with API defaults and source-controller's status. */
function gitRepository(i: number): KubeObject {
  const n = name(i);
  const digest = hex(i, 9, 64);
  const path = `gitrepository/${NS}/${n}-addons/${hex(i, 7)}.tar.gz`;
  const stored = `stored artifact for revision '${branchRevision(i)}'`;
  return {
    apiVersion: 'source.toolkit.fluxcd.io/v1',
    kind: 'GitRepository',
    metadata: {
      name: `${n}-addons`,
      namespace: NS,
      uid: uid(i, 3),
      resourceVersion: nextRv(),
      generation: 1,
      creationTimestamp: T0,
      labels: { ...MANAGED_BY, 'stackflux.io/cluster': n },
      annotations: { 'reconcile.fluxcd.io/requestedAt': T1 },
      finalizers: ['finalizers.fluxcd.io'],
      ownerReferences: ownedBy('ClusterAddon', 'stackflux.io/v1alpha1', n, uid(i, 2)),
      managedFields: [
        managedField('stackflux', 'Apply', undefined, {
          'f:metadata': { 'f:labels': {}, 'f:ownerReferences': {} },
          'f:spec': { 'f:interval': {}, 'f:ref': { 'f:branch': {} }, 'f:secretRef': {}, 'f:url': {} },
        }),
        managedField('source-controller', 'Update', 'status', {
          'f:status': { 'f:artifact': {}, 'f:conditions': {}, 'f:observedGeneration': {} },
        }),
      ],
    },
    spec: {
      interval: '5m',
      ref: { branch: `stackflux/${NS}/${n}` },
      secretRef: { name: 'fleet-auth' },
      timeout: '60s',
      url: 'https://git.example.com/platform/fleet.git',
    },
    status: {
      artifact: {
        digest: `sha256:${digest}`,
        lastUpdateTime: T1,
        path,
        revision: branchRevision(i),
        size: 2048 + (i % 100),
        url: `http://source-controller.flux-system.svc.cluster.local./${path}`,
      },
      conditions: [
        condition('Ready', 'Succeeded', stored),
        condition('ArtifactInStorage', 'Succeeded', stored),
      ],
      lastHandledReconcileAt: T1,
      observedGeneration: 1,
    },
  };
}

/** The golden Kustomization prod-1.cni with API defaults and kustomize-controller's status. */
function kustomization(i: number, addon: string, helm: boolean): KubeObject {
  const n = name(i);
  const kn = `${n}.${addon}`;
  return {
    apiVersion: 'kustomize.toolkit.fluxcd.io/v1',
    kind: 'Kustomization',
    metadata: {
      name: kn,
      namespace: NS,
      uid: uid(i, 4 + addon.length),
      resourceVersion: nextRv(),
      generation: 1,
      creationTimestamp: T0,
      labels: { ...MANAGED_BY, 'stackflux.io/addon': addon, 'stackflux.io/cluster': n },
      finalizers: ['finalizers.fluxcd.io'],
      ownerReferences: ownedBy('ClusterAddon', 'stackflux.io/v1alpha1', n, uid(i, 2)),
      managedFields: [
        managedField('stackflux', 'Apply', undefined, {
          'f:metadata': { 'f:labels': {}, 'f:ownerReferences': {} },
          'f:spec': { 'f:interval': {}, 'f:kubeConfig': {}, 'f:path': {}, 'f:prune': {}, 'f:sourceRef': {} },
        }),
        managedField('kustomize-controller', 'Update', 'status', {
          'f:status': { 'f:conditions': {}, 'f:inventory': {}, 'f:lastAppliedRevision': {} },
        }),
      ],
    },
    spec: {
      force: false,
      interval: '5m',
      ...(helm ? {} : { kubeConfig: { secretRef: { key: 'value', name: `${n}-kubeconfig` } } }),
      path: `./${addon}`,
      prune: true,
      sourceRef: { kind: 'GitRepository', name: `${n}-addons` },
      targetNamespace: 'kube-system',
      timeout: '5m',
      wait: true,
    },
    status: {
      conditions: [
        condition('Ready', 'ReconciliationSucceeded', `Applied revision: ${branchRevision(i)}`),
        condition('Healthy', 'Succeeded', 'Health check passed in 1.203s'),
      ],
      inventory: {
        entries: [
          { id: `kube-system_${addon}-config__ConfigMap`, v: 'v1' },
          { id: `kube-system_${addon}_apps_Deployment`, v: 'v1' },
        ],
      },
      lastAppliedRevision: branchRevision(i),
      lastAttemptedRevision: branchRevision(i),
      observedGeneration: 1,
    },
  };
}

/** helm-controller v2 status of a Helm addon's HelmRelease, one history entry (Flux keeps up to 5). */
function helmRelease(i: number, addon: string): KubeObject {
  const n = name(i);
  const hn = `${n}.${addon}`;
  return {
    apiVersion: 'helm.toolkit.fluxcd.io/v2',
    kind: 'HelmRelease',
    metadata: {
      name: hn,
      namespace: NS,
      uid: uid(i, 20 + addon.length),
      resourceVersion: nextRv(),
      generation: 1,
      creationTimestamp: T0,
      labels: {
        ...MANAGED_BY,
        'stackflux.io/addon': addon,
        'stackflux.io/cluster': n,
        'kustomize.toolkit.fluxcd.io/name': hn,
        'kustomize.toolkit.fluxcd.io/namespace': NS,
      },
      finalizers: ['finalizers.fluxcd.io'],
    },
    spec: {
      interval: '5m',
      releaseName: addon,
      targetNamespace: 'kube-system',
      kubeConfig: { secretRef: { key: 'value', name: `${n}-kubeconfig` } },
      chart: { spec: { chart: addon, version: '1.2.3', sourceRef: { kind: 'HelmRepository', name: addon } } },
      values: { replicas: 2 },
    },
    status: {
      conditions: [
        condition(
          'Ready',
          'UpgradeSucceeded',
          `Helm upgrade succeeded for release kube-system/${addon}.v2 with chart ${addon}@1.2.3`,
        ),
        condition(
          'Released',
          'UpgradeSucceeded',
          `Helm upgrade succeeded for release kube-system/${addon}.v2 with chart ${addon}@1.2.3`,
        ),
      ],
      history: [2, 1].map((version) => ({
        name: addon,
        namespace: 'kube-system',
        version,
        status: version === 2 ? 'deployed' : 'superseded',
        chartName: addon,
        chartVersion: '1.2.3',
        appVersion: '1.2.3',
        configDigest: `sha256:${hex(i, 30 + version, 64)}`,
        digest: `sha256:${hex(i, 40 + version, 64)}`,
        firstDeployed: T0,
        lastDeployed: T1,
      })),
      lastAttemptedGeneration: 1,
      lastAttemptedRevision: '1.2.3',
      lastAttemptedConfigDigest: `sha256:${hex(i, 32, 64)}`,
      observedGeneration: 1,
      storageNamespace: 'kube-system',
    },
  };
}

/** The objects a Cluster's refs point at (Cluster API's KubeadmControlPlane and DockerCluster). */
function refObjects(i: number): KubeObject[] {
  const n = name(i);
  const meta = (kind: string, suffix: string, salt: number) => ({
    name: `${n}-${suffix}`,
    namespace: NS,
    uid: uid(i, salt),
    resourceVersion: nextRv(),
    generation: 1,
    creationTimestamp: T0,
    labels: { 'cluster.x-k8s.io/cluster-name': n, 'topology.cluster.x-k8s.io/owned': '' },
    annotations: { 'cluster.x-k8s.io/cloned-from-name': `docker-ferrol-1-30-v1-${kind.toLowerCase()}` },
    ownerReferences: ownedBy('Cluster', CAPI, n, uid(i, 1)),
  });
  return [
    {
      apiVersion: 'controlplane.cluster.x-k8s.io/v1beta2',
      kind: 'KubeadmControlPlane',
      metadata: meta('KubeadmControlPlane', 'x7k2p', 50),
      spec: {
        replicas: 3,
        version: 'v1.30.4',
        machineTemplate: {
          spec: {
            infrastructureRef: {
              apiGroup: 'infrastructure.cluster.x-k8s.io',
              kind: 'DockerMachineTemplate',
              name: `${n}-cp-7d9xk`,
            },
          },
        },
        kubeadmConfigSpec: {
          clusterConfiguration: { apiServer: { certSANs: ['localhost', '127.0.0.1', '0.0.0.0'] } },
          initConfiguration: {
            nodeRegistration: { kubeletExtraArgs: [{ name: 'eviction-hard', value: 'nodefs.available<0%' }] },
          },
          joinConfiguration: {
            nodeRegistration: { kubeletExtraArgs: [{ name: 'eviction-hard', value: 'nodefs.available<0%' }] },
          },
        },
        rollout: { strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1 } } },
      },
      status: {
        replicas: 3,
        readyReplicas: 3,
        availableReplicas: 3,
        upToDateReplicas: 3,
        version: 'v1.30.4',
        selector: `cluster.x-k8s.io/cluster-name=${n},cluster.x-k8s.io/control-plane`,
        observedGeneration: 1,
        initialization: { controlPlaneInitialized: true },
        conditions: [
          'Available',
          'CertificatesAvailable',
          'EtcdClusterHealthy',
          'ControlPlaneComponentsHealthy',
          'MachinesReady',
          'MachinesUpToDate',
          'RollingOut',
          'ScalingUp',
          'ScalingDown',
          'Remediating',
          'Deleting',
          'Paused',
        ].map((t) => condition(t, t)),
      },
    },
    {
      apiVersion: 'infrastructure.cluster.x-k8s.io/v1beta2',
      kind: 'DockerCluster',
      metadata: meta('DockerCluster', 'q9w4z', 51),
      spec: {
        controlPlaneEndpoint: { host: '172.18.0.3', port: 6443 },
        loadBalancer: { imageRepository: 'kindest', imageTag: 'v20240813' },
      },
      status: {
        initialization: { provisioned: true },
        failureDomains: [
          { name: 'fd-a', controlPlane: true },
          { name: 'fd-b', controlPlane: true },
        ],
        conditions: [condition('Ready', 'Ready'), condition('LoadBalancerAvailable', 'Available')],
      },
    },
  ];
}

/**
 * A stub client: its one LIST answers what the API server would send, JSON text parsed a page at a
 * time like the client does (the informer's page size), built page by page so nothing but the
 * page being stored is alive; then a watch that stays silent until stopped.
 */
function stubClient(clusters: number, build: (i: number) => KubeObject[]): KubeClient {
  let listedOnce = false;
  return {
    listPages: async function* (_v: string, _k: string, o: { limit?: number }) {
      const size = o.limit ?? 500;
      for (let at = 0; !listedOnce && at < clusters; at += size) {
        const page: KubeObject[] = [];
        for (let i = at; i < Math.min(clusters, at + size); i++) page.push(...build(i));
        const text = JSON.stringify({ kind: 'List', metadata: {}, items: page });
        yield { ...(JSON.parse(text) as { items: KubeObject[] }), metadata: { resourceVersion: '1' } };
      }
      listedOnce = true;
    },
    watch: async function* (_v: string, _k: string, o: { signal?: AbortSignal }) {
      const signal = o.signal;
      if (signal === undefined || signal.aborted) return;
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
    },
  } as unknown as KubeClient;
}

interface Kind {
  label: string;
  perCluster: number;
  /** Builds the objects of Cluster i. */
  build: (i: number) => KubeObject[];
  transform?: (o: KubeObject) => KubeObject;
  indexers?: Record<string, (o: KubeObject) => string[]>;
}

const nsOf = (o: KubeObject): string => o.metadata.namespace ?? '';
const clusterKeyOf = (o: KubeObject): string[] => {
  const c = o.metadata.labels?.['stackflux.io/cluster'];
  return c !== undefined && o.metadata.labels?.['stackflux.io/addon'] !== undefined
    ? [`${nsOf(o)}/${c}`]
    : [];
};

function kinds(addons: string[], helm: number, refs: boolean): Kind[] {
  const classIndex = (c: KubeObject): string[] => {
    const use = clusterUse(c);
    return use === undefined ? [] : [`${use.classNamespace ?? nsOf(c)}/${use.className}`];
  };
  const out: Kind[] = [
    {
      // clusteraddon.ts + rollout.ts share this informer (same selectors), with their indexers.
      label: 'Cluster (full, clusteraddon/rollout)',
      perCluster: 1,
      build: (i) => [cluster(i)],
      indexers: {
        'clusteraddon/namespace': (c) => [nsOf(c)],
        'clusteraddon/class': classIndex,
        'clusteraddon/ref': (c) => {
          const spec = (c as { spec?: Record<string, { kind?: string; name?: string }> }).spec ?? {};
          return ['controlPlaneRef', 'infrastructureRef'].flatMap((f) => {
            const r = spec[f];
            return r?.kind !== undefined ? [`${nsOf(c)}/${r.kind}/${r.name}`] : [];
          });
        },
        'rollout/namespace': (c) => [nsOf(c)],
      },
    },
    {
      label: 'Cluster (slim, clusterview)',
      perCluster: 1,
      build: (i) => [cluster(i)],
      transform: slimCluster,
      indexers: {
        clusterclass: classIndex,
        'clusterclass-namespace': (c) => [clusterUse(c)?.classNamespace ?? nsOf(c)],
      },
    },
    {
      label: 'ClusterAddon',
      perCluster: 1,
      build: (i) => [clusterAddon(i, addons)],
      indexers: { 'rollout/namespace': (c) => [nsOf(c)] },
    },
    { label: 'GitRepository', perCluster: 1, build: (i) => [gitRepository(i)] },
    {
      label: 'Kustomization',
      perCluster: addons.length,
      build: (i) => addons.map((a, k) => kustomization(i, a, k < helm)),
      indexers: { 'clusteraddon/cluster': clusterKeyOf },
    },
  ];
  if (helm > 0) {
    out.push({
      label: 'HelmRelease',
      perCluster: helm,
      build: (i) => addons.slice(0, helm).map((a) => helmRelease(i, a)),
      indexers: { 'clusteraddon/cluster': clusterKeyOf },
    });
  }
  if (refs) {
    out.push({ label: 'ref objects (KCP + DockerCluster)', perCluster: 2, build: refObjects });
  }
  return out;
}

/**
 * CPU per object of what the informer does to each object it stores: the kind's transform alone,
 * and followed by the string sharing (on fresh parsed copies; the parse is not timed). Best of 3.
 */
function transformCost(kind: Kind, clusters: number): { us: number; usIntern: number } {
  const transform = kind.transform ?? ((o: KubeObject) => leanObject(o));
  const table = new StringTable();
  const time = (fn: (o: KubeObject) => unknown): number => {
    let best = Number.POSITIVE_INFINITY;
    for (let run = 0; run < 3; run++) {
      const objects: KubeObject[] = [];
      for (let i = 0; i < clusters; i++) objects.push(...kind.build(i));
      const parsed = JSON.parse(JSON.stringify(objects)) as KubeObject[];
      const t0 = process.hrtime.bigint();
      for (const o of parsed) fn(o);
      best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e3 / parsed.length);
    }
    return best;
  };
  return { us: time(transform), usIntern: time((o) => internStrings(transform(o), table)) };
}

function heap(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

function flag(args: string[], name: string, fallback: number): number {
  const at = args.indexOf(name);
  if (at < 0) return fallback;
  const v = Number(args[at + 1]);
  if (!Number.isInteger(v) || v < 0) throw new Error(`${name} needs a whole number`);
  return v;
}

export async function runHeapBench(args: string[]): Promise<number> {
  if (args.includes('--help')) {
    process.stdout.write(
      'npm run bench -- heap [--clusters N (10000)] [--addons A (3)] [--helm H (0)] [--refs] [--no-intern]\n',
    );
    return 0;
  }
  const clusters = flag(args, '--clusters', 10_000);
  const addons = ['cni', 'metrics', 'csi', 'ingress', 'dns', 'policy'].slice(0, flag(args, '--addons', 3));
  const helm = Math.min(flag(args, '--helm', 0), addons.length);
  const refs = args.includes('--refs');
  // --no-intern: the caches as before string sharing (runtime/intern.ts), for a before/after.
  const intern = !args.includes('--no-intern');
  const informers: Informer[] = [];
  const rows: Array<{ label: string; objects: number; bytes: number; us: number; usIntern: number }> = [];
  const start = heap();
  for (const kind of kinds(addons, helm, refs)) {
    const before = heap();
    const first = kind.build(0)[0] as KubeObject;
    const inf = new Informer({
      client: stubClient(clusters, kind.build),
      apiVersion: first.apiVersion,
      kind: first.kind,
      watchdogMs: 3_600_000,
      internStrings: intern,
      ...(kind.transform !== undefined ? { transform: kind.transform } : {}),
    });
    for (const [n, fn] of Object.entries(kind.indexers ?? {})) inf.addIndexer(n, fn);
    inf.start();
    await inf.waitForSync();
    informers.push(inf);
    // The LIST answer is garbage once stored; what remains is the informer's store and indexes.
    rows.push({
      label: kind.label,
      objects: inf.size(),
      bytes: heap() - before,
      ...transformCost(kind, Math.min(clusters, 2_000)),
    });
  }
  const total = heap() - start;
  const kb = (b: number) => (b / 1024).toFixed(2);
  const mb = (b: number) => (b / 1024 / 1024).toFixed(1);
  const line = (cols: string[]) =>
    `${cols[0]?.padEnd(38)}${cols
      .slice(1)
      .map((c) => c.padStart(14))
      .join('')}`;
  console.log(
    `stackflux heap per Cluster (${clusters} Clusters, ${addons.length} addons, ${helm} Helm, refs ${refs ? 'on' : 'off'}, strings ${intern ? 'shared' : 'not shared'}; node ${process.version})`,
  );
  console.log(
    line(['informer', 'objects', 'B/object', 'KiB/Cluster', 'MiB@10,000', 'µs transform', '+ intern']),
  );
  for (const r of rows) {
    const perCluster = r.bytes / clusters;
    console.log(
      line([
        r.label,
        String(r.objects),
        (r.bytes / Math.max(1, r.objects)).toFixed(0),
        kb(perCluster),
        mb(perCluster * 10_000),
        r.us.toFixed(2),
        r.usIntern.toFixed(2),
      ]),
    );
  }
  console.log(line(['total (caches)', '', '', kb(total / clusters), mb((total / clusters) * 10_000)]));
  await Promise.all(informers.map((i) => i.stop()));
  return 0;
}
