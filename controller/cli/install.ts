// `stackflux install --export`: everything needed to run the controller, as YAML to pipe into
// `kubectl apply -f -` or commit to a Flux repository. The CRDs come from the same definitions as
// crds/ (controller/api/crds.ts) and the RBAC is generated from controller/api/resources.ts.
import { allCrds } from '../api/crds.ts';
import { LABEL_AGGREGATE_TO_CONTROLLER } from '../api/meta.ts';
import {
  INPUT_RESOURCES,
  LEADER_ELECTION_RESOURCES,
  OUTPUT_RESOURCES,
  type ResourceDeclaration,
} from '../api/resources.ts';
import { canonicalYaml, compareStrings } from '../offline/yaml.ts';
import type { TenancyPolicy } from '../releases/tenancy.ts';
import { version } from '../version.ts';
import { type Command, UsageError } from './command.ts';
import { tenancyFlags, tenancyPolicy } from './tenancyflags.ts';

export const IMAGE_REPOSITORY = 'ghcr.io/stackflux/stackflux';
export const NAME = 'stackflux-controller';
export const CACHE_DIR = '/cache';

export interface InstallOptions {
  namespace: string;
  image: string;
  /** Secret holding the push webhook secret (key "secret"); empty: no webhook. */
  webhookSecretName: string;
  /** Include the Namespace object. */
  withNamespace: boolean;
  /** --default-service-account and --allowed-chart-hosts of the controller (default: neither). */
  tenancy?: TenancyPolicy;
}

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
export const RULES_ROLE = `${NAME}-rules`;

/**
 * The Cluster API pattern: the bound ClusterRole NAME is an aggregated role (its rules are filled
 * in by kube-controller-manager from every ClusterRole labelled LABEL_AGGREGATE_TO_CONTROLLER=true):
 * the generated least-privilege rules come in through RULES_ROLE, and a provider's install adds
 * access to its kinds with its own labelled ClusterRole.
 */
export function controllerClusterRoles(): Record<string, unknown>[] {
  return [
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: NAME, labels: LABELS },
      aggregationRule: {
        clusterRoleSelectors: [{ matchLabels: { [LABEL_AGGREGATE_TO_CONTROLLER]: 'true' } }],
      },
      // No rules: kube-controller-manager owns them; a re-apply of these manifests must not reset them.
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: RULES_ROLE, labels: { ...LABELS, [LABEL_AGGREGATE_TO_CONTROLLER]: 'true' } },
      rules: policyRules([...INPUT_RESOURCES, ...OUTPUT_RESOURCES]),
    },
  ];
}

export function installObjects(o: InstallOptions): Record<string, unknown>[] {
  const ns = o.namespace;
  const meta = (name: string, namespaced = true) => ({
    name,
    ...(namespaced ? { namespace: ns } : {}),
    labels: LABELS,
  });
  const objects: Record<string, unknown>[] = [];
  if (o.withNamespace)
    objects.push({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns, labels: LABELS } });
  objects.push(...allCrds().map((crd) => ({ ...crd })));
  objects.push({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: meta(NAME) });
  objects.push(...controllerClusterRoles());
  objects.push({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: meta(NAME, false),
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: NAME },
    subjects: [{ kind: 'ServiceAccount', name: NAME, namespace: ns }],
  });
  objects.push({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: meta(`${NAME}-leader-election`),
    rules: policyRules(LEADER_ELECTION_RESOURCES),
  });
  objects.push({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: meta(`${NAME}-leader-election`),
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: `${NAME}-leader-election` },
    subjects: [{ kind: 'ServiceAccount', name: NAME, namespace: ns }],
  });
  const webhook = o.webhookSecretName !== '';
  objects.push({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: meta(NAME),
    spec: {
      type: 'ClusterIP',
      selector: LABELS,
      ports: [
        ...(webhook ? [{ name: 'http-webhook', port: 80, targetPort: 'http-webhook', protocol: 'TCP' }] : []),
        { name: 'http-metrics', port: 8080, targetPort: 'http-metrics', protocol: 'TCP' },
      ],
    },
  });
  objects.push({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: meta(NAME),
    spec: {
      replicas: 1,
      selector: { matchLabels: LABELS },
      template: {
        metadata: { labels: LABELS },
        spec: {
          serviceAccountName: NAME,
          terminationGracePeriodSeconds: 30,
          securityContext: {
            runAsNonRoot: true,
            runAsUser: 65532,
            runAsGroup: 65532,
            fsGroup: 65532,
            seccompProfile: { type: 'RuntimeDefault' },
          },
          containers: [
            {
              name: 'manager',
              image: o.image,
              imagePullPolicy: 'IfNotPresent',
              args: [
                'run',
                '--leader-elect',
                `--leader-election-namespace=${ns}`,
                '--metrics-addr=:8080',
                '--health-addr=:8081',
                `--cache-dir=${CACHE_DIR}`,
                '--log-level=info',
                ...(webhook ? ['--webhook-addr=:9292'] : []),
                ...tenancyArgs(o.tenancy),
              ],
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
                { name: 'http-metrics', containerPort: 8080, protocol: 'TCP' },
                { name: 'healthz', containerPort: 8081, protocol: 'TCP' },
                ...(webhook ? [{ name: 'http-webhook', containerPort: 9292, protocol: 'TCP' }] : []),
              ],
              livenessProbe: { httpGet: { path: '/healthz', port: 'healthz' }, periodSeconds: 10 },
              readinessProbe: { httpGet: { path: '/readyz', port: 'healthz' }, periodSeconds: 5 },
              resources: { requests: { cpu: '100m', memory: '128Mi' }, limits: { memory: '1Gi' } },
              securityContext: {
                allowPrivilegeEscalation: false,
                readOnlyRootFilesystem: true,
                capabilities: { drop: ['ALL'] },
              },
              volumeMounts: [
                { name: 'cache', mountPath: CACHE_DIR },
                { name: 'tmp', mountPath: '/tmp' },
              ],
            },
          ],
          volumes: [
            { name: 'cache', emptyDir: {} },
            { name: 'tmp', emptyDir: {} },
          ],
        },
      },
    },
  });
  return objects;
}

/** The controller's tenancy flags, as `stackflux run` reads them back. */
function tenancyArgs(t: TenancyPolicy | undefined): string[] {
  return [
    ...(t?.defaultServiceAccount !== undefined
      ? [`--default-service-account=${t.defaultServiceAccount}`]
      : []),
    ...(t?.allowedChartHosts !== undefined ? [`--allowed-chart-hosts=${t.allowedChartHosts.join(',')}`] : []),
  ];
}

export function installYaml(o: InstallOptions): string {
  return installObjects(o)
    .map((obj) => `---\n${canonicalYaml(obj)}`)
    .join('');
}

export const installCommand: Command = {
  name: 'install',
  summary: 'Print the install manifests: CRDs, generated RBAC, Deployment, Service (with --export)',
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
    'skip-namespace': { type: 'boolean', description: 'leave out the Namespace object', default: false },
    ...tenancyFlags,
  },
  run: async (flags, _positionals, io) => {
    if (flags.export !== true)
      throw new UsageError('only --export is supported: pipe it to "kubectl apply -f -"');
    const namespace =
      typeof flags.namespace === 'string' && flags.namespace !== '' ? flags.namespace : 'flux-system';
    const image =
      typeof flags.image === 'string' && flags.image !== '' ? flags.image : `${IMAGE_REPOSITORY}:${version}`;
    io.stdout(
      installYaml({
        namespace,
        image,
        webhookSecretName:
          typeof flags['webhook-secret-name'] === 'string' ? flags['webhook-secret-name'] : '',
        withNamespace: flags['skip-namespace'] !== true,
        tenancy: tenancyPolicy(flags),
      }),
    );
    return 0;
  },
};
