// `stackflux install --export`: everything needed to run the controller, as YAML to pipe into
// `kubectl apply -f -` or commit to a Flux repository. The CRDs come from the same definitions as
// crds/ (controller/api/crds.ts) and the RBAC is generated from controller/api/resources.ts.
import { allCrds } from '../api/crds.ts';
import { LABEL_AGGREGATE_TO_CONTROLLER } from '../api/meta.ts';
import {
  INPUT_RESOURCES,
  LEADER_ELECTION_RESOURCES,
  OUTPUT_RESOURCES,
  RENDER_SEED_RESOURCES,
  type ResourceDeclaration,
} from '../api/resources.ts';
import { EXTENSION_CONFIG_API_VERSION, INJECT_CA_FROM_SECRET_ANNOTATION } from '../api/runtimehooks.ts';
import { renderSeedSecretName } from '../controllers/renderseed.ts';
import { canonicalYaml, compareStrings } from '../offline/yaml.ts';
import type { TenancyPolicy } from '../releases/tenancy.ts';
import { version } from '../version.ts';
import { type Command, type FlagValues, UsageError } from './command.ts';
import { tenancyFlags, tenancyPolicy } from './tenancyflags.ts';

export const IMAGE_REPOSITORY = 'ghcr.io/stackflux/stackflux';
export const NAME = 'stackflux-controller';
export const CACHE_DIR = '/cache';

export interface InstallOptions {
  namespace: string;
  /** Name of the controller's objects, cluster-scoped ones included (default NAME). */
  name?: string;
  image: string;
  /** Default IfNotPresent. */
  imagePullPolicy?: string;
  /** Default 1 (more replicas wait on the leader election Lease). */
  replicas?: number;
  /** The manager container's resources (default DEFAULT_RESOURCES). */
  resources?: Resources;
  /** `run --leader-elect` (default true). */
  leaderElection?: boolean;
  /** `run --log-level` (default info). */
  logLevel?: string;
  /** Port of /metrics (default 8080). */
  metricsPort?: number;
  /** `run --fleet-url`, `--fleet-secret`, `--fleet-branch-prefix`; unset: not passed. */
  fleet?: FleetFlags;
  /** Where and how the controller's pod is scheduled and pulled; unset: left out. */
  pod?: PodPlacement;
  /** More `stackflux run` arguments, appended. */
  extraArgs?: readonly string[];
  /** Secret holding the push webhook secret (key "secret"); empty: no webhook. */
  webhookSecretName: string;
  /** Include the Namespace object. */
  withNamespace: boolean;
  /** --default-service-account and --allowed-chart-hosts of the controller (default: neither). */
  tenancy?: TenancyPolicy;
  /** Cluster API's BeforeClusterUpgrade runtime extension (default: off). */
  runtimeExtension?: RuntimeExtensionInstall;
  /** The controller pod's NetworkPolicy; undefined: none (--disable-network-policy). */
  networkPolicy?: NetworkPolicyInstall;
}

/**
 * Who may reach each port of the controller pod, as NetworkPolicy peers (Kubernetes' own type),
 * and where it may connect to. Ingress is allowed per port: the push webhook from the ingress
 * controller, the runtime extension from Cluster API, /metrics from monitoring; nothing else (the
 * kubelet's probes are not pod traffic). Egress is unrestricted unless `egressTo` lists peers: then
 * only those, DNS, and the API server's endpoint port.
 */
export interface NetworkPolicyInstall {
  webhookFrom: Record<string, unknown>[];
  runtimeExtensionFrom: Record<string, unknown>[];
  metricsFrom: Record<string, unknown>[];
  /** Peers the controller may connect to besides DNS and the API server; undefined: anywhere. */
  egressTo?: Record<string, unknown>[];
}

/** The label every Namespace carries with its own name (Kubernetes ≥ 1.21). */
const NAMESPACE_NAME_LABEL = 'kubernetes.io/metadata.name';

/** NetworkPolicy peers for namespace names; `*`: every namespace of the cluster. */
export function namespacePeers(namespaces: readonly string[]): Record<string, unknown>[] {
  return namespaces.map((n) =>
    n === '*'
      ? { namespaceSelector: {} }
      : { namespaceSelector: { matchLabels: { [NAMESPACE_NAME_LABEL]: n } } },
  );
}

/** NetworkPolicy peers for CIDRs. */
export function cidrPeers(cidrs: readonly string[]): Record<string, unknown>[] {
  return cidrs.map((cidr) => ({ ipBlock: { cidr } }));
}

/** Defaults: where the platform's ingress controller, Cluster API and monitoring usually run. */
export const NETWORK_POLICY_DEFAULTS = {
  webhookNamespaces: ['ingress-nginx'],
  runtimeExtensionNamespaces: ['capi-system'],
  metricsNamespaces: ['monitoring'],
} as const;

/**
 * The API server's port as a pod's traffic to it is seen after the `kubernetes` Service's DNAT (the
 * endpoint's port): 6443 for kubeadm and most distributions. One on another port (443 on some
 * managed clusters) goes in the egress allow-list with its address.
 */
export const API_SERVER_ENDPOINT_PORT = 6443;

/**
 * The runtime extension's serving certificate lives in the Secret `certSecretName` (tls.crt,
 * tls.key, ca.crt). `cert-manager`: a self-signed Issuer and a Certificate write it (Cluster API
 * installs need cert-manager anyway); `secret`: the user provides it. Either way Cluster API copies
 * ca.crt into the ExtensionConfig's caBundle (annotation inject-ca-from-secret).
 */
export interface RuntimeExtensionInstall {
  certificate: 'cert-manager' | 'secret';
  certSecretName: string;
}

export interface Resources {
  requests?: Record<string, string>;
  limits?: Record<string, string>;
}

export const DEFAULT_RESOURCES: Resources = {
  requests: { cpu: '100m', memory: '128Mi' },
  limits: { memory: '1Gi' },
};

/** The Kubernetes fields of the controller's pod spec, as they are. */
export interface PodPlacement {
  nodeSelector?: Record<string, string>;
  tolerations?: Record<string, unknown>[];
  affinity?: Record<string, unknown>;
  priorityClassName?: string;
  imagePullSecrets?: { name: string }[];
}

export interface FleetFlags {
  url?: string;
  /** NAMESPACE/NAME of the fleet repository Secret. */
  secret?: string;
  branchPrefix?: string;
}

export const RUNTIME_EXTENSION_MODES = ['cert-manager', 'secret'] as const;
export const RUNTIME_EXTENSION_PORT = 9443;
export const RUNTIME_EXTENSION_CERT_DIR = '/etc/stackflux/runtime-extension';

const LABELS = { 'app.kubernetes.io/name': 'stackflux', 'app.kubernetes.io/part-of': 'stackflux' };

interface PolicyRule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
}

/**
 * Least-privilege rules: one rule per (group, verb set), resources sorted; verbs of a resource are
 * the union of what it is read and written with.
 */
export function policyRules(declarations: readonly ResourceDeclaration[]): PolicyRule[] {
  const verbs = new Map<string, Set<string>>();
  for (const d of declarations) {
    const key = `${d.group}\n${d.resource}`;
    const set = verbs.get(key) ?? new Set<string>();
    for (const v of d.verbs) set.add(v);
    verbs.set(key, set);
  }
  const rules = new Map<string, PolicyRule>();
  for (const [key, set] of verbs) {
    const [group = '', resource = ''] = key.split('\n');
    const vs = [...set].sort(compareStrings);
    const ruleKey = `${group}\n${vs.join(',')}`;
    const rule = rules.get(ruleKey) ?? { apiGroups: [group], resources: [], verbs: vs };
    rule.resources.push(resource);
    rules.set(ruleKey, rule);
  }
  return [...rules.entries()]
    .sort(([a], [b]) => compareStrings(a, b))
    .map(([, r]) => ({ ...r, resources: r.resources.sort(compareStrings) }));
}

/** Name of the ClusterRole holding the generated rules (aggregated into the bound role NAME). */
const rulesRole = (name: string) => `${name}-rules`;
export const RULES_ROLE = rulesRole(NAME);

/**
 * The Cluster API pattern: the bound ClusterRole NAME is an aggregated role (its rules are filled
 * in by kube-controller-manager from every ClusterRole labelled LABEL_AGGREGATE_TO_CONTROLLER=true):
 * the generated least-privilege rules come in through RULES_ROLE, and a provider's install adds
 * access to its kinds with its own labelled ClusterRole.
 */
export function controllerClusterRoles(name = NAME): Record<string, unknown>[] {
  return [
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name, labels: LABELS },
      aggregationRule: {
        clusterRoleSelectors: [{ matchLabels: { [LABEL_AGGREGATE_TO_CONTROLLER]: 'true' } }],
      },
      // No rules: kube-controller-manager owns them; a re-apply of these manifests must not reset them.
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: rulesRole(name), labels: { ...LABELS, [LABEL_AGGREGATE_TO_CONTROLLER]: 'true' } },
      rules: policyRules([...INPUT_RESOURCES, ...OUTPUT_RESOURCES]),
    },
  ];
}

export function installObjects(o: InstallOptions): Record<string, unknown>[] {
  const ns = o.namespace;
  const controller = o.name ?? NAME;
  const servers: ControllerServers = {
    metricsPort: o.metricsPort ?? 8080,
    webhook: o.webhookSecretName !== '',
    extension: o.runtimeExtension,
  };
  const objects: Record<string, unknown>[] = [];
  if (o.withNamespace)
    objects.push({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns, labels: LABELS } });
  objects.push(...allCrds().map((crd) => ({ ...crd })));
  objects.push(...rbacObjects(ns, controller));
  objects.push(serviceObject(ns, controller, servers));
  objects.push(deploymentObject(o, controller, servers));
  if (o.networkPolicy !== undefined)
    objects.push(
      networkPolicyObject(objectMeta(ns, controller), o.networkPolicy, {
        webhook: servers.webhook,
        extension: !!servers.extension,
      }),
    );
  if (servers.extension) objects.push(...runtimeExtensionObjects(ns, servers.extension, controller));
  return objects;
}

/** What the controller serves besides /healthz: /metrics, and the webhook and runtime extension when on. */
interface ControllerServers {
  metricsPort: number;
  webhook: boolean;
  extension: RuntimeExtensionInstall | undefined;
}

/** The metadata of one of the controller's objects (cluster-scoped ones: `namespaced` false). */
function objectMeta(ns: string, name: string, namespaced = true) {
  return {
    name,
    ...(namespaced ? { namespace: ns } : {}),
    labels: LABELS,
  };
}

/** The controller's ServiceAccount and what it may do: its ClusterRoles, the Roles of its namespace. */
function rbacObjects(ns: string, controller: string): Record<string, unknown>[] {
  return [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: objectMeta(ns, controller) },
    ...controllerClusterRoles(controller),
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: objectMeta(ns, controller, false),
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: controller },
      subjects: [{ kind: 'ServiceAccount', name: controller, namespace: ns }],
    },
    ...namespacedRole(ns, controller, 'leader-election', LEADER_ELECTION_RESOURCES),
    ...namespacedRole(ns, controller, 'render-seed', RENDER_SEED_RESOURCES),
  ];
}

/** A Role `<controller>-<purpose>` of the controller's namespace with these rules, bound to its ServiceAccount. */
function namespacedRole(
  ns: string,
  controller: string,
  purpose: string,
  declarations: readonly ResourceDeclaration[],
): Record<string, unknown>[] {
  const name = `${controller}-${purpose}`;
  return [
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: objectMeta(ns, name),
      rules: policyRules(declarations),
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: objectMeta(ns, name),
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
      subjects: [{ kind: 'ServiceAccount', name: controller, namespace: ns }],
    },
  ];
}

function serviceObject(ns: string, controller: string, servers: ControllerServers): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: objectMeta(ns, controller),
    spec: {
      type: 'ClusterIP',
      selector: LABELS,
      ports: [
        ...(servers.webhook
          ? [{ name: 'http-webhook', port: 80, targetPort: 'http-webhook', protocol: 'TCP' }]
          : []),
        ...(servers.extension
          ? [{ name: 'https-hooks', port: 443, targetPort: 'https-hooks', protocol: 'TCP' }]
          : []),
        {
          name: 'http-metrics',
          port: servers.metricsPort,
          targetPort: 'http-metrics',
          protocol: 'TCP',
        },
      ],
    },
  };
}

function deploymentObject(
  o: InstallOptions,
  controller: string,
  servers: ControllerServers,
): Record<string, unknown> {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: objectMeta(o.namespace, controller),
    spec: {
      replicas: o.replicas ?? 1,
      selector: { matchLabels: LABELS },
      template: {
        metadata: { labels: LABELS },
        spec: podSpec(o, controller, servers),
      },
    },
  };
}

function podSpec(o: InstallOptions, controller: string, servers: ControllerServers): Record<string, unknown> {
  const { extension } = servers;
  return {
    serviceAccountName: controller,
    ...(o.pod?.imagePullSecrets !== undefined ? { imagePullSecrets: o.pod.imagePullSecrets } : {}),
    ...(o.pod?.priorityClassName !== undefined ? { priorityClassName: o.pod.priorityClassName } : {}),
    ...(o.pod?.nodeSelector !== undefined ? { nodeSelector: o.pod.nodeSelector } : {}),
    ...(o.pod?.tolerations !== undefined ? { tolerations: o.pod.tolerations } : {}),
    ...(o.pod?.affinity !== undefined ? { affinity: o.pod.affinity } : {}),
    terminationGracePeriodSeconds: 30,
    securityContext: {
      runAsNonRoot: true,
      runAsUser: 65532,
      runAsGroup: 65532,
      fsGroup: 65532,
      seccompProfile: { type: 'RuntimeDefault' },
    },
    containers: [managerContainer(o, controller, servers)],
    volumes: [
      { name: 'cache', emptyDir: {} },
      { name: 'tmp', emptyDir: {} },
      ...(extension
        ? [{ name: 'runtime-extension-cert', secret: { secretName: extension.certSecretName } }]
        : []),
    ],
  };
}

/** The container running `stackflux run`. */
function managerContainer(
  o: InstallOptions,
  controller: string,
  servers: ControllerServers,
): Record<string, unknown> {
  const { webhook, extension, metricsPort } = servers;
  return {
    name: 'manager',
    image: o.image,
    imagePullPolicy: o.imagePullPolicy ?? 'IfNotPresent',
    args: managerArgs(o, controller, servers),
    env: [
      { name: 'HOME', value: '/tmp' },
      ...(webhook
        ? [
            {
              name: 'STACKFLUX_WEBHOOK_SECRET',
              valueFrom: { secretKeyRef: { name: o.webhookSecretName, key: 'secret' } },
            },
          ]
        : []),
    ],
    ports: [
      { name: 'http-metrics', containerPort: metricsPort, protocol: 'TCP' },
      { name: 'healthz', containerPort: 8081, protocol: 'TCP' },
      ...(webhook ? [{ name: 'http-webhook', containerPort: 9292, protocol: 'TCP' }] : []),
      ...(extension ? [{ name: 'https-hooks', containerPort: RUNTIME_EXTENSION_PORT, protocol: 'TCP' }] : []),
    ],
    livenessProbe: { httpGet: { path: '/healthz', port: 'healthz' }, periodSeconds: 10 },
    readinessProbe: { httpGet: { path: '/readyz', port: 'healthz' }, periodSeconds: 5 },
    resources: o.resources ?? DEFAULT_RESOURCES,
    securityContext: {
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    },
    volumeMounts: [
      { name: 'cache', mountPath: CACHE_DIR },
      { name: 'tmp', mountPath: '/tmp' },
      ...(extension
        ? [
            {
              name: 'runtime-extension-cert',
              mountPath: RUNTIME_EXTENSION_CERT_DIR,
              readOnly: true,
            },
          ]
        : []),
    ],
  };
}

/** The arguments of `stackflux run` in the manager container. */
function managerArgs(o: InstallOptions, controller: string, servers: ControllerServers): string[] {
  return [
    'run',
    ...(o.leaderElection !== false ? ['--leader-elect', `--leader-election-namespace=${o.namespace}`] : []),
    `--metrics-addr=:${servers.metricsPort}`,
    '--health-addr=:8081',
    `--cache-dir=${CACHE_DIR}`,
    `--render-seed-secret=${o.namespace}/${renderSeedSecretName(controller)}`,
    `--log-level=${o.logLevel ?? 'info'}`,
    ...fleetArgs(o.fleet),
    ...(servers.webhook ? ['--webhook-addr=:9292'] : []),
    ...(servers.extension
      ? [
          `--runtime-extension-addr=:${RUNTIME_EXTENSION_PORT}`,
          `--runtime-extension-tls-cert=${RUNTIME_EXTENSION_CERT_DIR}/tls.crt`,
          `--runtime-extension-tls-key=${RUNTIME_EXTENSION_CERT_DIR}/tls.key`,
        ]
      : []),
    ...tenancyArgs(o.tenancy),
    ...(o.extraArgs ?? []),
  ];
}

/** The controller pod's NetworkPolicy: ingress per named port from its peers, optional egress. */
export function networkPolicyObject(
  metadata: Record<string, unknown>,
  np: NetworkPolicyInstall,
  ports: { webhook: boolean; extension: boolean },
): Record<string, unknown> {
  const rule = (port: string, from: Record<string, unknown>[]) => ({
    from,
    ports: [{ protocol: 'TCP', port }],
  });
  const egress = np.egressTo;
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata,
    spec: {
      podSelector: { matchLabels: LABELS },
      policyTypes: ['Ingress', ...(egress !== undefined ? ['Egress'] : [])],
      ingress: [
        ...(ports.webhook ? [rule('http-webhook', np.webhookFrom)] : []),
        ...(ports.extension ? [rule('https-hooks', np.runtimeExtensionFrom)] : []),
        rule('http-metrics', np.metricsFrom),
      ],
      ...(egress !== undefined
        ? {
            egress: [
              // DNS, wherever the cluster's resolver runs (node-local or kube-system).
              {
                ports: [
                  { protocol: 'UDP', port: 53 },
                  { protocol: 'TCP', port: 53 },
                ],
              },
              { ports: [{ protocol: 'TCP', port: API_SERVER_ENDPOINT_PORT }] },
              { to: egress },
            ],
          }
        : {}),
    },
  };
}

/**
 * Cluster API's registration of the extension (cluster-scoped ExtensionConfig; Cluster API calls
 * https://<name>.<ns>.svc:443 and trusts the CA it injects from the Secret) and, with cert-manager,
 * the serving certificate. namespaceSelector {}: every namespace's Clusters (the hook answers
 * Success at once for a Cluster whose class is no cluster stack release).
 */
export function runtimeExtensionObjects(
  ns: string,
  e: RuntimeExtensionInstall,
  controller = NAME,
): Record<string, unknown>[] {
  const issuer = `${controller}-selfsigned`;
  return [
    ...(e.certificate === 'cert-manager'
      ? [
          {
            apiVersion: 'cert-manager.io/v1',
            kind: 'Issuer',
            metadata: { name: issuer, namespace: ns, labels: LABELS },
            spec: { selfSigned: {} },
          },
          {
            apiVersion: 'cert-manager.io/v1',
            kind: 'Certificate',
            metadata: { name: e.certSecretName, namespace: ns, labels: LABELS },
            spec: {
              secretName: e.certSecretName,
              dnsNames: [`${controller}.${ns}.svc`, `${controller}.${ns}.svc.cluster.local`],
              issuerRef: { kind: 'Issuer', name: issuer },
            },
          },
        ]
      : []),
    {
      apiVersion: EXTENSION_CONFIG_API_VERSION,
      kind: 'ExtensionConfig',
      metadata: {
        name: controller,
        labels: LABELS,
        annotations: { [INJECT_CA_FROM_SECRET_ANNOTATION]: `${ns}/${e.certSecretName}` },
      },
      spec: {
        clientConfig: { service: { name: controller, namespace: ns, port: 443 } },
        namespaceSelector: {},
      },
    },
  ];
}

/** The controller's fleet flags, each only when set. */
function fleetArgs(f: FleetFlags | undefined): string[] {
  return [
    ...(f?.url !== undefined ? [`--fleet-url=${f.url}`] : []),
    ...(f?.secret !== undefined ? [`--fleet-secret=${f.secret}`] : []),
    ...(f?.branchPrefix !== undefined ? [`--fleet-branch-prefix=${f.branchPrefix}`] : []),
  ];
}

/** The controller's tenancy flags, as `stackflux run` reads them back. */
function tenancyArgs(t: TenancyPolicy | undefined): string[] {
  return [
    ...(t?.defaultServiceAccount !== undefined
      ? [`--default-service-account=${t.defaultServiceAccount}`]
      : []),
    ...(t?.allowedChartHosts !== undefined ? [`--allowed-chart-hosts=${t.allowedChartHosts.join(',')}`] : []),
    ...(t?.insecureChartHosts !== undefined
      ? [`--insecure-chart-hosts=${t.insecureChartHosts.join(',')}`]
      : []),
    ...(t?.allowSourceNetworks !== undefined
      ? [`--allow-source-networks=${t.allowSourceNetworks.join(',')}`]
      : []),
  ];
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
export const LOG_LEVELS: readonly string[] = ['debug', 'info', 'warn', 'error'];

function str(v: string | boolean | undefined): string {
  return typeof v === 'string' ? v : '';
}

/** --node-selector, --tolerations, --affinity, --priority-class-name, --image-pull-secrets. */
function podPlacement(flags: FlagValues): PodPlacement {
  const list = (name: string) =>
    str(flags[name])
      .split(',')
      .map((x) => x.trim())
      .filter((x) => x !== '');
  const json = (name: string, kind: 'list' | 'object') => {
    let v: unknown;
    try {
      v = JSON.parse(str(flags[name]));
    } catch (err) {
      throw new UsageError(`--${name}: not JSON: ${err instanceof Error ? err.message : String(err)}`);
    }
    const ok = kind === 'list' ? Array.isArray(v) && v.every((x: unknown) => isObject(x)) : isObject(v);
    if (!ok)
      throw new UsageError(`--${name} must be a JSON ${kind === 'list' ? 'list of objects' : 'object'}`);
    return v;
  };
  const nodeSelector: Record<string, string> = {};
  for (const pair of list('node-selector')) {
    const at = pair.indexOf('=');
    if (at < 1) throw new UsageError(`--node-selector: "${pair}" is not KEY=VALUE`);
    nodeSelector[pair.slice(0, at)] = pair.slice(at + 1);
  }
  const secrets = list('image-pull-secrets');
  return {
    ...(Object.keys(nodeSelector).length > 0 ? { nodeSelector } : {}),
    ...(str(flags.tolerations) !== ''
      ? { tolerations: json('tolerations', 'list') as Record<string, unknown>[] }
      : {}),
    ...(str(flags.affinity) !== ''
      ? { affinity: json('affinity', 'object') as Record<string, unknown> }
      : {}),
    ...(str(flags['priority-class-name']) !== ''
      ? { priorityClassName: str(flags['priority-class-name']) }
      : {}),
    ...(secrets.length > 0 ? { imagePullSecrets: secrets.map((name) => ({ name })) } : {}),
  };
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v);

/** --cpu-request, --memory-request, --cpu-limit, --memory-limit; an empty one is left out. */
function resourcesOf(flags: FlagValues): Resources {
  const pick = (cpu: string, memory: string) => ({
    ...(str(flags[cpu]) !== '' ? { cpu: str(flags[cpu]) } : {}),
    ...(str(flags[memory]) !== '' ? { memory: str(flags[memory]) } : {}),
  });
  const requests = pick('cpu-request', 'memory-request');
  const limits = pick('cpu-limit', 'memory-limit');
  return {
    ...(Object.keys(requests).length > 0 ? { requests } : {}),
    ...(Object.keys(limits).length > 0 ? { limits } : {}),
  };
}

/** The --network-policy-* flags; an empty namespace list is refused (no peers = from anywhere). */
function networkPolicyOf(flags: FlagValues): NetworkPolicyInstall {
  const list = (name: string) =>
    str(flags[name])
      .split(',')
      .map((x) => x.trim())
      .filter((x) => x !== '');
  const namespaces = (name: string) => {
    const names = list(name);
    if (names.length === 0)
      throw new UsageError(`--${name} must name at least one namespace (* for every namespace)`);
    for (const n of names)
      if (n !== '*' && !DNS_LABEL.test(n)) throw new UsageError(`--${name}: "${n}" is not a namespace name`);
    return namespacePeers(names);
  };
  const cidrs = list('network-policy-egress-cidrs');
  for (const c of cidrs)
    if (!/^[0-9a-fA-F.:]+\/\d{1,3}$/.test(c))
      throw new UsageError(`--network-policy-egress-cidrs: "${c}" is not a CIDR`);
  return {
    webhookFrom: namespaces('network-policy-webhook-namespaces'),
    runtimeExtensionFrom: namespaces('network-policy-runtime-extension-namespaces'),
    metricsFrom: namespaces('network-policy-metrics-namespaces'),
    ...(cidrs.length > 0 ? { egressTo: cidrPeers(cidrs) } : {}),
  };
}

export function installYaml(o: InstallOptions): string {
  return installObjects(o)
    .map((obj) => `---\n${canonicalYaml(obj)}`)
    .join('');
}

export const installCommand: Command = {
  name: 'install',
  usage: 'install --export [flags] [-- more stackflux run flags]',
  summary:
    'Print the install manifests: CRDs, generated RBAC, Deployment, Service, the runtime extension (with --export)',
  flags: {
    export: { type: 'boolean', description: 'print the manifests as YAML (the only mode)', default: false },
    namespace: {
      type: 'string',
      short: 'n',
      description: 'namespace of the controller',
      default: 'flux-system',
    },
    image: { type: 'string', description: `controller image (default ${IMAGE_REPOSITORY}:<version>)` },
    'webhook-secret-name': {
      type: 'string',
      description: 'Secret (key "secret") of the push webhook; empty disables the webhook',
      default: 'stackflux-webhook',
    },
    'runtime-extension': {
      type: 'string',
      description:
        "serve Cluster API's BeforeClusterUpgrade hook (ExtensionConfig, Service port 443, TLS): cert-manager (a self-signed Issuer and Certificate write the Secret) or secret (you provide it: tls.crt, tls.key, ca.crt); empty: off",
      default: '',
    },
    'runtime-extension-cert-secret': {
      type: 'string',
      description: 'Secret of the runtime extension certificate (tls.crt, tls.key, ca.crt)',
      default: `${NAME}-runtime-extension-cert`,
    },
    'skip-namespace': { type: 'boolean', description: 'leave out the Namespace object', default: false },
    name: {
      type: 'string',
      description:
        "name of the controller's objects, the cluster-scoped ones too (a second install needs its own)",
      default: NAME,
    },
    'image-pull-policy': {
      type: 'string',
      description: 'imagePullPolicy of the controller',
      default: 'IfNotPresent',
    },
    replicas: {
      type: 'string',
      description: 'replicas of the Deployment (one leads, the others wait on the Lease)',
      default: '1',
    },
    'cpu-request': {
      type: 'string',
      description: 'CPU request of the controller; empty: none',
      default: '100m',
    },
    'memory-request': {
      type: 'string',
      description: 'memory request of the controller; empty: none',
      default: '128Mi',
    },
    'cpu-limit': { type: 'string', description: 'CPU limit of the controller; empty: none', default: '' },
    'memory-limit': {
      type: 'string',
      description: 'memory limit of the controller; empty: none',
      default: '1Gi',
    },
    'disable-leader-election': {
      type: 'boolean',
      description: 'run the controller without --leader-elect (one replica only)',
      default: false,
    },
    'log-level': { type: 'string', description: 'debug, info, warn or error', default: 'info' },
    'metrics-port': {
      type: 'string',
      description: 'port of /metrics (container and Service)',
      default: '8080',
    },
    'node-selector': {
      type: 'string',
      description: "comma-separated KEY=VALUE labels of the nodes the controller's pod may run on",
    },
    tolerations: {
      type: 'string',
      description: "the pod's tolerations, as a JSON list (Kubernetes' own fields)",
    },
    affinity: {
      type: 'string',
      description: "the pod's affinity, as a JSON object (Kubernetes' own fields)",
    },
    'priority-class-name': { type: 'string', description: "the pod's priorityClassName" },
    'image-pull-secrets': {
      type: 'string',
      description: 'comma-separated Secrets (in the namespace) the image is pulled with',
    },
    'fleet-url': { type: 'string', description: "the controller's --fleet-url (empty: not passed)" },
    'fleet-secret': {
      type: 'string',
      description: "the controller's --fleet-secret NAMESPACE/NAME (empty: not passed)",
    },
    'fleet-branch-prefix': {
      type: 'string',
      description: "the controller's --fleet-branch-prefix (empty: not passed)",
    },
    'disable-network-policy': {
      type: 'boolean',
      description: "leave out the controller pod's NetworkPolicy",
      default: false,
    },
    'network-policy-webhook-namespaces': {
      type: 'string',
      description:
        'namespaces (comma-separated; * for every namespace) whose pods may reach the push webhook',
      default: NETWORK_POLICY_DEFAULTS.webhookNamespaces.join(','),
    },
    'network-policy-runtime-extension-namespaces': {
      type: 'string',
      description: "namespaces whose pods may reach the runtime extension (Cluster API's controller)",
      default: NETWORK_POLICY_DEFAULTS.runtimeExtensionNamespaces.join(','),
    },
    'network-policy-metrics-namespaces': {
      type: 'string',
      description: 'namespaces whose pods may reach /metrics (the monitoring)',
      default: NETWORK_POLICY_DEFAULTS.metricsNamespaces.join(','),
    },
    'network-policy-egress-cidrs': {
      type: 'string',
      description: `CIDRs the controller may connect to (release sources, fleet, charts) besides DNS and the API server (port ${API_SERVER_ENDPOINT_PORT}); empty: egress unrestricted`,
      default: '',
    },
    ...tenancyFlags,
  },
  run: async (flags, positionals, io) => {
    if (flags.export !== true)
      throw new UsageError('only --export is supported: pipe it to "kubectl apply -f -"');
    const namespace =
      typeof flags.namespace === 'string' && flags.namespace !== '' ? flags.namespace : 'flux-system';
    const mode = typeof flags['runtime-extension'] === 'string' ? flags['runtime-extension'] : '';
    if (mode !== '' && !(RUNTIME_EXTENSION_MODES as readonly string[]).includes(mode))
      throw new UsageError(
        `--runtime-extension must be ${RUNTIME_EXTENSION_MODES.join(' or ')}, got "${mode}"`,
      );
    const certSecretName =
      typeof flags['runtime-extension-cert-secret'] === 'string' &&
      flags['runtime-extension-cert-secret'] !== ''
        ? flags['runtime-extension-cert-secret']
        : `${NAME}-runtime-extension-cert`;
    const image =
      typeof flags.image === 'string' && flags.image !== '' ? flags.image : `${IMAGE_REPOSITORY}:${version}`;
    const name = str(flags.name) || NAME;
    if (!DNS_LABEL.test(name)) throw new UsageError(`--name "${name}" is not a DNS label`);
    const replicas = Number(str(flags.replicas) || '1');
    if (!Number.isInteger(replicas) || replicas < 0)
      throw new UsageError(`--replicas must be an integer of at least 0, got "${str(flags.replicas)}"`);
    if (replicas > 1 && flags['disable-leader-election'] === true)
      throw new UsageError('--replicas above 1 needs leader election: drop --disable-leader-election');
    const metricsPort = Number(str(flags['metrics-port']) || '8080');
    if (!Number.isInteger(metricsPort) || metricsPort < 1 || metricsPort > 65535 || metricsPort === 8081)
      throw new UsageError(
        `--metrics-port must be a port other than 8081, got "${str(flags['metrics-port'])}"`,
      );
    const logLevel = str(flags['log-level']) || 'info';
    if (!LOG_LEVELS.includes(logLevel))
      throw new UsageError(`--log-level must be ${LOG_LEVELS.join(', ')}, got "${logLevel}"`);
    io.stdout(
      installYaml({
        namespace,
        name,
        image,
        imagePullPolicy: str(flags['image-pull-policy']) || 'IfNotPresent',
        replicas,
        resources: resourcesOf(flags),
        leaderElection: flags['disable-leader-election'] !== true,
        logLevel,
        metricsPort,
        fleet: {
          ...(str(flags['fleet-url']) !== '' ? { url: str(flags['fleet-url']) } : {}),
          ...(str(flags['fleet-secret']) !== '' ? { secret: str(flags['fleet-secret']) } : {}),
          ...(str(flags['fleet-branch-prefix']) !== ''
            ? { branchPrefix: str(flags['fleet-branch-prefix']) }
            : {}),
        },
        pod: podPlacement(flags),
        // Everything after "--" goes to `stackflux run` as it is.
        extraArgs: positionals,
        webhookSecretName:
          typeof flags['webhook-secret-name'] === 'string' ? flags['webhook-secret-name'] : '',
        withNamespace: flags['skip-namespace'] !== true,
        tenancy: tenancyPolicy(flags),
        ...(flags['disable-network-policy'] !== true ? { networkPolicy: networkPolicyOf(flags) } : {}),
        ...(mode !== ''
          ? {
              runtimeExtension: {
                certificate: mode as RuntimeExtensionInstall['certificate'],
                certSecretName,
              },
            }
          : {}),
      }),
    );
    return 0;
  },
};
