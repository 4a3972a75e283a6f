// The Helm chart of stackflux, generated from installObjects() (the one install definition):
// hack/gen-chart.ts writes it to charts/stackflux/; a unit test fails when it is out of date.
//
// How: installObjects() is called with a placeholder string where a value goes (namespace, name,
// image, …) and once per feature switch ("toggle": webhook, runtime extension, tenancy flags, …)
// off and on. The object trees of those calls are merged into one tree whose list items and
// mapping keys carry the toggles they need; that tree is printed as a template: placeholders
// become `{{ toJson <value> }}`, conditional parts `{{- if … }}`. Nothing in the templates is
// written by hand, so the chart cannot drift from `stackflux install`.
import { isDeepStrictEqual } from 'node:util';
import { stringify } from 'yaml';
import { renderCrdFiles } from '../api/crds.ts';
import { version } from '../version.ts';
import {
  DEFAULT_RESOURCES,
  IMAGE_REPOSITORY,
  type InstallOptions,
  installObjects,
  LOG_LEVELS,
  NAME,
  NETWORK_POLICY_DEFAULTS,
  namespacePeers,
  RUNTIME_EXTENSION_MODES,
} from './install.ts';

export const CHART_NAME = 'stackflux';

/** A placeholder inside installObjects' output; replaced by a Helm expression. */
const placeholder = (key: string) => `@@stackflux-chart:${key}@@`;
const PLACEHOLDER = /@@stackflux-chart:([A-Za-z.]+)@@/g;

/** Placeholder keys → the Helm expression of their value. */
const EXPRESSIONS: Readonly<Record<string, string>> = {
  namespace: '.Release.Namespace',
  name: '.Values.name',
  image: '(printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion))',
  imagePullPolicy: '.Values.image.pullPolicy',
  replicas: '.Values.replicas',
  resources: '.Values.resources',
  logLevel: '.Values.logLevel',
  metricsPort: '.Values.metrics.port',
  webhookSecretName: '.Values.webhook.secretName',
  certSecretName: '.Values.runtimeExtension.certSecretName',
  fleetUrl: '.Values.fleet.url',
  fleetSecret: '.Values.fleet.secret',
  fleetBranchPrefix: '.Values.fleet.branchPrefix',
  defaultServiceAccount: '.Values.tenancy.defaultServiceAccount',
  allowedChartHosts: '(join "," .Values.tenancy.allowedChartHosts)',
  insecureChartHosts: '(join "," .Values.tenancy.insecureChartHosts)',
  allowSourceNetworks: '(join "," .Values.tenancy.allowSourceNetworks)',
  nodeSelector: '.Values.nodeSelector',
  tolerations: '.Values.tolerations',
  affinity: '.Values.affinity',
  priorityClassName: '.Values.priorityClassName',
  imagePullSecrets: '.Values.image.pullSecrets',
  networkPolicyWebhookFrom: '.Values.networkPolicy.webhook.from',
  networkPolicyRuntimeExtensionFrom: '.Values.networkPolicy.runtimeExtension.from',
  networkPolicyMetricsFrom: '.Values.networkPolicy.metrics.from',
  networkPolicyEgressTo: '.Values.networkPolicy.egress.to',
};
/** A list item that stands for a whole list of values (spliced in with range). */
const SPLICE: Readonly<Record<string, string>> = { extraArgs: '.Values.extraArgs' };

export interface Toggle {
  name: string;
  /** Helm condition under which the toggle is on. */
  condition: string;
  /** A toggle that must be on for this one to matter. */
  requires?: string;
}

/** In installObjects' order of the parts they add (an added part goes after earlier toggles' ones). */
export const TOGGLES: readonly Toggle[] = [
  { name: 'imagePullSecrets', condition: '.Values.image.pullSecrets' },
  { name: 'priorityClassName', condition: '.Values.priorityClassName' },
  { name: 'nodeSelector', condition: '.Values.nodeSelector' },
  { name: 'tolerations', condition: '.Values.tolerations' },
  { name: 'affinity', condition: '.Values.affinity' },
  { name: 'leaderElection', condition: '.Values.leaderElection.enabled' },
  { name: 'fleetUrl', condition: '.Values.fleet.url' },
  { name: 'fleetSecret', condition: '.Values.fleet.secret' },
  { name: 'fleetBranchPrefix', condition: '.Values.fleet.branchPrefix' },
  { name: 'webhook', condition: '.Values.webhook.secretName' },
  { name: 'runtimeExtension', condition: '.Values.runtimeExtension.certificate' },
  {
    name: 'certManager',
    condition: 'eq .Values.runtimeExtension.certificate "cert-manager"',
    requires: 'runtimeExtension',
  },
  { name: 'defaultServiceAccount', condition: '.Values.tenancy.defaultServiceAccount' },
  { name: 'allowedChartHosts', condition: '.Values.tenancy.allowedChartHosts' },
  { name: 'insecureChartHosts', condition: '.Values.tenancy.insecureChartHosts' },
  { name: 'allowSourceNetworks', condition: '.Values.tenancy.allowSourceNetworks' },
  // The NetworkPolicy is there by default (its port rules follow the webhook and extension toggles).
  { name: 'networkPolicyDisabled', condition: 'not .Values.networkPolicy.enabled' },
  { name: 'networkPolicyEgress', condition: '.Values.networkPolicy.egress.to' },
];

/** installObjects' options with placeholders, the toggles in `on` switched on. */
export function placeholderOptions(on: ReadonlySet<string>): InstallOptions {
  const p = placeholder;
  // Placeholders stand in for numbers and objects too: they are whole values, printed by toJson.
  const whole = <T>(key: string) => p(key) as unknown as T;
  return {
    namespace: p('namespace'),
    name: p('name'),
    image: p('image'),
    imagePullPolicy: p('imagePullPolicy'),
    replicas: whole<number>('replicas'),
    resources: whole<InstallOptions['resources']>('resources'),
    leaderElection: on.has('leaderElection'),
    logLevel: p('logLevel'),
    metricsPort: whole<number>('metricsPort'),
    fleet: {
      ...(on.has('fleetUrl') ? { url: p('fleetUrl') } : {}),
      ...(on.has('fleetSecret') ? { secret: p('fleetSecret') } : {}),
      ...(on.has('fleetBranchPrefix') ? { branchPrefix: p('fleetBranchPrefix') } : {}),
    },
    extraArgs: [p('extraArgs')],
    pod: {
      ...(on.has('imagePullSecrets')
        ? { imagePullSecrets: whole<{ name: string }[]>('imagePullSecrets') }
        : {}),
      ...(on.has('priorityClassName') ? { priorityClassName: p('priorityClassName') } : {}),
      ...(on.has('nodeSelector') ? { nodeSelector: whole<Record<string, string>>('nodeSelector') } : {}),
      ...(on.has('tolerations') ? { tolerations: whole<Record<string, unknown>[]>('tolerations') } : {}),
      ...(on.has('affinity') ? { affinity: whole<Record<string, unknown>>('affinity') } : {}),
    },
    webhookSecretName: on.has('webhook') ? p('webhookSecretName') : '',
    withNamespace: false,
    tenancy: {
      ...(on.has('defaultServiceAccount') ? { defaultServiceAccount: p('defaultServiceAccount') } : {}),
      ...(on.has('allowedChartHosts') ? { allowedChartHosts: [p('allowedChartHosts')] } : {}),
      ...(on.has('insecureChartHosts') ? { insecureChartHosts: [p('insecureChartHosts')] } : {}),
      ...(on.has('allowSourceNetworks') ? { allowSourceNetworks: [p('allowSourceNetworks')] } : {}),
    },
    ...(on.has('runtimeExtension')
      ? {
          runtimeExtension: {
            certificate: on.has('certManager') ? 'cert-manager' : 'secret',
            certSecretName: p('certSecretName'),
          },
        }
      : {}),
    ...(on.has('networkPolicyDisabled')
      ? {}
      : {
          networkPolicy: {
            webhookFrom: whole<Record<string, unknown>[]>('networkPolicyWebhookFrom'),
            runtimeExtensionFrom: whole<Record<string, unknown>[]>('networkPolicyRuntimeExtensionFrom'),
            metricsFrom: whole<Record<string, unknown>[]>('networkPolicyMetricsFrom'),
            ...(on.has('networkPolicyEgress')
              ? { egressTo: whole<Record<string, unknown>[]>('networkPolicyEgressTo') }
              : {}),
          },
        }),
  };
}

// --- the merged tree ------------------------------------------------------------------------------

/** A toggle that must be on (or off) for a part to be there. */
export interface Literal {
  toggle: string;
  on: boolean;
}

export type Node =
  | { kind: 'scalar'; value: unknown }
  | { kind: 'map'; entries: { key: string; node: Node; when: Literal[] }[] }
  | { kind: 'list'; items: { node: Node; when: Literal[] }[] };

function nodeOf(v: unknown): Node {
  if (Array.isArray(v)) return { kind: 'list', items: v.map((x) => ({ node: nodeOf(x), when: [] })) };
  if (v !== null && typeof v === 'object')
    return {
      kind: 'map',
      entries: Object.entries(v).map(([key, x]) => ({ key, node: nodeOf(x), when: [] })),
    };
  return { kind: 'scalar', value: v };
}

const holds = (when: readonly Literal[], on: ReadonlySet<string>) =>
  when.every((l) => on.has(l.toggle) === l.on);

/** The value the tree has with the toggles `on`. */
export function valueWith(n: Node, on: ReadonlySet<string>): unknown {
  if (n.kind === 'scalar') return n.value;
  if (n.kind === 'list') return n.items.filter((i) => holds(i.when, on)).map((i) => valueWith(i.node, on));
  return Object.fromEntries(
    n.entries.filter((e) => holds(e.when, on)).map((e) => [e.key, valueWith(e.node, on)]),
  );
}

/** What makes two list items "the same item" when a toggle changes what is inside them. */
function identity(v: unknown): string {
  if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
    const o = v as Record<string, unknown>;
    const meta = o.metadata as { name?: unknown } | undefined;
    if (typeof o.kind === 'string' && meta !== undefined) return `object:${o.kind}/${String(meta.name)}`;
    if (typeof o.name === 'string') return `named:${o.name}`;
  }
  return `value:${JSON.stringify(v)}`;
}

type Step = { op: 'same'; a: number; b: number } | { op: 'gone'; a: number } | { op: 'new'; b: number };

/** Longest common subsequence of the items' identities: what stays, goes and comes. */
function align(a: readonly unknown[], b: readonly unknown[]): Step[] {
  const ka = a.map(identity);
  const kb = b.map(identity);
  const len = Array.from({ length: a.length + 1 }, () => new Array<number>(b.length + 1).fill(0));
  for (let i = a.length - 1; i >= 0; i--)
    for (let j = b.length - 1; j >= 0; j--)
      // biome-ignore lint/style/noNonNullAssertion: indices are in range
      len[i]![j] = ka[i] === kb[j] ? len[i + 1]![j + 1]! + 1 : Math.max(len[i + 1]![j]!, len[i]![j + 1]!);
  const steps: Step[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && ka[i] === kb[j]) steps.push({ op: 'same', a: i++, b: j++ });
    // biome-ignore lint/style/noNonNullAssertion: indices are in range
    else if (j < b.length && (i === a.length || len[i]![j + 1]! >= len[i + 1]![j]!))
      steps.push({ op: 'new', b: j++ });
    else steps.push({ op: 'gone', a: i++ });
  }
  return steps;
}

/**
 * Merges what switching `toggle` on changes (from `before` to `after`, both with the toggles
 * `context` on) into the tree `n`: new parts need the toggle, parts that go need it off.
 */
function merge(
  n: Node,
  before: unknown,
  after: unknown,
  context: ReadonlySet<string>,
  when: Literal[],
  path: string,
): void {
  if (isDeepStrictEqual(before, after)) return;
  const toggle = when.at(-1) as Literal;
  const off = { toggle: toggle.toggle, on: false };
  if (n.kind === 'list' && Array.isArray(before) && Array.isArray(after)) {
    const visible = n.items.filter((i) => holds(i.when, context));
    const added = new Map<number, { node: Node; when: Literal[] }[]>();
    const addBefore = (k: number, item: { node: Node; when: Literal[] }) =>
      added.set(k, [...(added.get(k) ?? []), item]);
    const steps = align(before, after);
    steps.forEach((s, idx) => {
      if (s.op === 'same')
        // biome-ignore lint/style/noNonNullAssertion: aligned indices are in range
        merge(visible[s.a]!.node, before[s.a], after[s.b], context, when, `${path}[${s.a}]`);
      // biome-ignore lint/style/noNonNullAssertion: aligned indices are in range
      else if (s.op === 'gone') visible[s.a]!.when.push(off);
      else {
        // Before the next item that was there already (after the parts of earlier toggles).
        const next = steps.slice(idx + 1).find((t) => t.op !== 'new') as { a: number } | undefined;
        const at =
          next === undefined ? n.items.length : n.items.indexOf(visible[next.a] as (typeof n.items)[number]);
        addBefore(at, { node: nodeOf(after[s.b]), when: [...when] });
      }
    });
    const items: typeof n.items = [];
    for (let k = 0; k <= n.items.length; k++) {
      items.push(...(added.get(k) ?? []));
      if (k < n.items.length) items.push(n.items[k] as (typeof n.items)[number]);
    }
    n.items = items;
    return;
  }
  const isMap = (v: unknown): v is Record<string, unknown> =>
    v !== null && typeof v === 'object' && !Array.isArray(v);
  if (n.kind === 'map' && isMap(before) && isMap(after)) {
    for (const e of n.entries.filter((x) => holds(x.when, context))) {
      if (!(e.key in after)) e.when.push(off);
      else merge(e.node, before[e.key], after[e.key], context, when, `${path}.${e.key}`);
    }
    // A new key goes before the next key of `after` that was there already (as in a list).
    const keys = Object.keys(after);
    keys.forEach((key, idx) => {
      if (key in before) return;
      const next = keys.slice(idx + 1).find((k) => k in before);
      const at =
        next === undefined ? -1 : n.entries.findIndex((e) => e.key === next && holds(e.when, context));
      const entry = { key, node: nodeOf(after[key]), when: [...when] };
      if (at < 0) n.entries.push(entry);
      else n.entries.splice(at, 0, entry);
    });
    return;
  }
  throw new Error(
    `chart: ${path} changes with ${toggle.toggle} in a way a template cannot say (make it a placeholder)`,
  );
}

/** Toggles that must be on for `t` to matter (its requires chain), and `t` itself last. */
function chain(t: Toggle): Literal[] {
  const parent = TOGGLES.find((x) => x.name === t.requires);
  return [...(parent ? chain(parent) : []), { toggle: t.name, on: true }];
}

/** The merged tree of installObjects() over every toggle; checked against each variant it merged. */
export function mergedInstallTree(): Node {
  const none = new Set<string>();
  const tree = nodeOf(installObjects(placeholderOptions(none)));
  const variants: Set<string>[] = [none];
  for (const t of TOGGLES) {
    const when = chain(t);
    const context = new Set(when.slice(0, -1).map((l) => l.toggle));
    const on = new Set([...context, t.name]);
    const before = installObjects(placeholderOptions(context));
    if (!isDeepStrictEqual(valueWith(tree, context), before))
      throw new Error(
        `chart: the merged tree does not give installObjects() with ${[...context].join(',') || 'no toggles'}`,
      );
    merge(tree, before, installObjects(placeholderOptions(on)), context, when, '');
    variants.push(on);
  }
  for (const on of variants)
    if (!isDeepStrictEqual(valueWith(tree, on), installObjects(placeholderOptions(on))))
      throw new Error(`chart: the merged tree does not give installObjects() with ${[...on].join(',')}`);
  return tree;
}

// --- printing the tree as a Helm template ---------------------------------------------------------

const conditionOf = (t: string) => (TOGGLES.find((x) => x.name === t) as Toggle).condition;

function ifLine(when: readonly Literal[], indent: string): string {
  const parts = when.map((l) => (l.on ? `(${conditionOf(l.toggle)})` : `(not (${conditionOf(l.toggle)}))`));
  return `${indent}{{- if ${parts.length === 1 ? parts[0] : `and ${parts.join(' ')}`} }}`;
}

/** A scalar as template text: a literal as JSON (valid YAML), placeholders through toJson. */
export function scalarText(v: unknown): string {
  if (typeof v === 'string' && PLAIN.test(v) && !YAML_WORDS.test(v)) return v;
  if (typeof v !== 'string' || !v.includes('@@stackflux-chart:'))
    // Helm would read "{{" in a literal as a template action: such a literal is a template string.
    return typeof v === 'string' && /\{\{|\}\}/.test(v)
      ? `{{ toJson ${JSON.stringify(v)} }}`
      : JSON.stringify(v);
  const parts: string[] = [];
  let last = 0;
  for (const m of v.matchAll(PLACEHOLDER)) {
    const key = m[1] as string;
    const expr = EXPRESSIONS[key];
    if (expr === undefined) throw new Error(`chart: no Helm value for placeholder ${key}`);
    if (m.index > last) parts.push(JSON.stringify(v.slice(last, m.index)));
    parts.push(expr);
    last = m.index + m[0].length;
  }
  if (last < v.length) parts.push(JSON.stringify(v.slice(last)));
  return parts.length === 1 ? `{{ toJson ${parts[0]} }}` : `{{ list ${parts.join(' ')} | join "" | toJson }}`;
}

/** Strings that YAML reads back as the same string when printed without quotes. */
const PLAIN = /^[A-Za-z][A-Za-z0-9._/-]*$/;
const YAML_WORDS = /^(y|n|yes|no|on|off|true|false|null)$/i;

const keyText = (k: string) => (/^[A-Za-z_][A-Za-z0-9_./-]*$/.test(k) ? k : JSON.stringify(k));

/** Lines of `n` as the value after "key:" or "- " at `indent`. */
function valueLines(n: Node, indent: string): { inline?: string; lines: string[] } {
  if (n.kind === 'scalar') return { inline: scalarText(n.value), lines: [] };
  if (n.kind === 'list' && n.items.length === 0) return { inline: '[]', lines: [] };
  if (n.kind === 'map' && n.entries.length === 0) return { inline: '{}', lines: [] };
  return { lines: blockLines(n, indent) };
}

/** Parts with their conditions; neighbours with the same condition share one if. */
class Parts {
  private readonly groups: { when: readonly Literal[]; lines: string[] }[] = [];
  private readonly indent: string;
  constructor(indent: string) {
    this.indent = indent;
  }
  add(when: readonly Literal[], lines: string[]): void {
    const last = this.groups.at(-1);
    if (last !== undefined && isDeepStrictEqual(last.when, when)) last.lines.push(...lines);
    else this.groups.push({ when, lines });
  }
  lines(): string[] {
    return this.groups.flatMap((g) =>
      g.when.length === 0 ? g.lines : [ifLine(g.when, this.indent), ...g.lines, `${this.indent}{{- end }}`],
    );
  }
}

function blockLines(n: Node, indent: string): string[] {
  const out = new Parts(indent);
  if (n.kind === 'list') {
    for (const item of n.items) {
      const splice = item.node.kind === 'scalar' ? spliceOf(item.node.value) : undefined;
      if (splice !== undefined) {
        out.add(item.when, [
          `${indent}{{- range ${splice} }}`,
          `${indent}- {{ toJson . }}`,
          `${indent}{{- end }}`,
        ]);
        continue;
      }
      const v = valueLines(item.node, `${indent}  `);
      const lines =
        v.inline !== undefined
          ? [`${indent}- ${v.inline}`]
          : [`${indent}- ${(v.lines[0] as string).trimStart()}`, ...v.lines.slice(1)];
      out.add(item.when, lines);
    }
  } else if (n.kind === 'map') {
    for (const e of n.entries) {
      const v = valueLines(e.node, `${indent}  `);
      const lines =
        v.inline !== undefined
          ? [`${indent}${keyText(e.key)}: ${v.inline}`]
          : [`${indent}${keyText(e.key)}:`, ...v.lines];
      out.add(e.when, lines);
    }
  }
  return out.lines();
}

function spliceOf(v: unknown): string | undefined {
  if (typeof v !== 'string') return undefined;
  const m = /^@@stackflux-chart:([A-Za-z.]+)@@$/.exec(v);
  return m ? SPLICE[m[1] as string] : undefined;
}

/** The objects' template: one YAML document each, a conditional one inside its if. */
function objectsTemplate(tree: Node): string {
  if (tree.kind !== 'list') throw new Error('chart: installObjects() is a list');
  const docs = tree.items
    .filter((i) => !isCrd(valueWith(i.node, new Set())))
    .map((i) => {
      const body = blockLines(i.node, '').join('\n');
      return i.when.length === 0 ? `---\n${body}\n` : `${ifLine(i.when, '')}\n---\n${body}\n{{- end }}\n`;
    });
  return `${GENERATED}\n${docs.join('')}`;
}

const isCrd = (v: unknown) => (v as { kind?: unknown }).kind === 'CustomResourceDefinition';

const GENERATED =
  '# Generated by hack/gen-chart.ts from stackflux install (controller/cli/install.ts): do not edit.';

// --- values.yaml and Chart.yaml ------------------------------------------------------------------

/** The chart's values with their defaults (`stackflux install`'s) and what each does. */
export const VALUES = {
  name: NAME,
  image: {
    repository: IMAGE_REPOSITORY,
    tag: '',
    pullPolicy: 'IfNotPresent',
    pullSecrets: [] as { name: string }[],
  },
  replicas: 1,
  resources: DEFAULT_RESOURCES,
  nodeSelector: {} as Record<string, string>,
  tolerations: [] as Record<string, unknown>[],
  affinity: {} as Record<string, unknown>,
  priorityClassName: '',
  leaderElection: { enabled: true },
  logLevel: 'info',
  metrics: { port: 8080 },
  fleet: { url: '', secret: '', branchPrefix: '' },
  webhook: { secretName: 'stackflux-webhook' },
  runtimeExtension: { certificate: '', certSecretName: `${NAME}-runtime-extension-cert` },
  tenancy: {
    defaultServiceAccount: '',
    allowedChartHosts: [] as string[],
    insecureChartHosts: [] as string[],
    allowSourceNetworks: [] as string[],
  },
  networkPolicy: {
    enabled: true,
    webhook: { from: namespacePeers(NETWORK_POLICY_DEFAULTS.webhookNamespaces) },
    runtimeExtension: { from: namespacePeers(NETWORK_POLICY_DEFAULTS.runtimeExtensionNamespaces) },
    metrics: { from: namespacePeers(NETWORK_POLICY_DEFAULTS.metricsNamespaces) },
    egress: { to: [] as Record<string, unknown>[] },
  },
  extraArgs: [] as string[],
};

const VALUE_COMMENTS: Readonly<Record<string, string>> = {
  name: " Name of the controller's objects, the cluster-scoped ones too (stackflux install --name).",
  image:
    ' The controller image; tag empty: the chart appVersion (--image, --image-pull-policy,\n --image-pull-secrets NAME,...).',
  nodeSelector:
    " Where the controller's pod runs: nodeSelector, tolerations, affinity, priorityClassName in\n Kubernetes' own fields; empty: left out (--node-selector KEY=VALUE,..., --tolerations JSON,\n --affinity JSON, --priority-class-name).",
  replicas: ' Replicas of the Deployment: one leads, the others wait on the Lease (--replicas).',
  resources:
    ' Resources of the controller container (--cpu-request, --memory-request, --cpu-limit,\n --memory-limit); Helm merges maps with these defaults: set a key to null to drop it.',
  leaderElection: ' run --leader-elect on a Lease in the release namespace (--disable-leader-election).',
  logLevel: ' run --log-level: debug, info, warn or error (--log-level).',
  metrics: ' Port of /metrics, container and Service (--metrics-port).',
  fleet:
    " The addon controller's fleet repository: run --fleet-url, --fleet-secret NAMESPACE/NAME,\n --fleet-branch-prefix; empty: not passed (stackflux install flags of the same names).",
  webhook: ' Secret (key "secret") of the push webhook; empty: no webhook (--webhook-secret-name).',
  runtimeExtension:
    " Cluster API's BeforeClusterUpgrade runtime extension: certificate cert-manager or secret;\n empty: off (--runtime-extension, --runtime-extension-cert-secret).",
  tenancy:
    ' run --default-service-account, --allowed-chart-hosts, --insecure-chart-hosts,\n --allow-source-networks; empty: not passed (install flags of the same names).',
  networkPolicy:
    " The controller pod's NetworkPolicy (--disable-network-policy): who may reach each port, as\n NetworkPolicy peers (--network-policy-webhook-namespaces, --network-policy-runtime-extension-namespaces,\n --network-policy-metrics-namespaces NS,...; * every namespace). egress.to empty: egress unrestricted;\n else only those peers, DNS and the API server on 6443 (--network-policy-egress-cidrs CIDR,...).",
  extraArgs: ' More stackflux run flags, appended (stackflux install --export -- FLAGS).',
};

function valuesYaml(): string {
  const text = stringify(VALUES, { lineWidth: 0 });
  const lines = text.split('\n').flatMap((line) => {
    const top = /^([A-Za-z]+):/.exec(line)?.[1];
    const comment = top !== undefined ? VALUE_COMMENTS[top] : undefined;
    return comment === undefined ? [line] : [...comment.split('\n').map((c) => `#${c}`), line];
  });
  return `${GENERATED}\n${lines.join('\n')}`;
}

/** Values whose allowed strings install checks too (values.schema.json enums). */
const ENUMS: Readonly<Record<string, readonly string[]>> = {
  'runtimeExtension.certificate': ['', ...RUNTIME_EXTENSION_MODES],
  logLevel: LOG_LEVELS,
  'image.pullPolicy': ['Always', 'IfNotPresent', 'Never'],
};

/** Values that are Kubernetes' own types: checked by the API server, not here. */
const KUBERNETES_TYPES: Readonly<Record<string, Record<string, unknown>>> = {
  resources: { type: 'object' },
  affinity: { type: 'object' },
  nodeSelector: { type: 'object', additionalProperties: { type: 'string' } },
  tolerations: { type: 'array', items: { type: 'object' } },
  'image.pullSecrets': {
    type: 'array',
    items: { type: 'object', required: ['name'], properties: { name: { type: 'string' } } },
  },
  // No peers would be "from anywhere" in NetworkPolicy's terms: at least one is required.
  'networkPolicy.webhook.from': { type: 'array', minItems: 1, items: { type: 'object' } },
  'networkPolicy.runtimeExtension.from': { type: 'array', minItems: 1, items: { type: 'object' } },
  'networkPolicy.metrics.from': { type: 'array', minItems: 1, items: { type: 'object' } },
  'networkPolicy.egress.to': { type: 'array', items: { type: 'object' } },
};

/**
 * values.schema.json from VALUES: Helm (and helm-controller) refuse a misspelt key, a value of the
 * wrong type or a mode install refuses before rendering anything.
 */
function schemaOf(v: unknown, path: string): Record<string, unknown> {
  const enumOf = ENUMS[path];
  if (enumOf !== undefined) return { type: 'string', enum: [...enumOf] };
  const kubernetes = KUBERNETES_TYPES[path];
  if (kubernetes !== undefined) return kubernetes;
  if (Array.isArray(v)) return { type: 'array', items: { type: 'string' } };
  if (typeof v === 'number') return { type: 'integer', minimum: 0 };
  if (v !== null && typeof v === 'object') {
    return {
      type: 'object',
      additionalProperties: false,
      properties: Object.fromEntries(
        Object.entries(v).map(([k, x]) => [k, schemaOf(x, path === '' ? k : `${path}.${k}`)]),
      ),
    };
  }
  return { type: typeof v };
}

/** Replicas above 1 without leader election would reconcile twice (install refuses it too). */
const ONE_REPLICA_WITHOUT_LEADER = {
  if: {
    required: ['leaderElection'],
    properties: { leaderElection: { required: ['enabled'], properties: { enabled: { const: false } } } },
  },
  // biome-ignore lint/suspicious/noThenProperty: JSON Schema's if/then
  then: { properties: { replicas: { maximum: 1 } } },
};

function valuesSchema(): string {
  const schema = {
    $schema: 'https://json-schema.org/draft-07/schema#',
    ...schemaOf(VALUES, ''),
    ...ONE_REPLICA_WITHOUT_LEADER,
  };
  return `${JSON.stringify(schema, null, 2)}\n`;
}

function chartYaml(): string {
  return `${GENERATED}\n${stringify(
    {
      apiVersion: 'v2',
      name: CHART_NAME,
      description:
        'stackflux: cluster stacks released as Git tags, OCI artifacts or GitHub releases, applied by Flux',
      type: 'application',
      version,
      appVersion: version,
    },
    { lineWidth: 0 },
  )}`;
}

/** Every file of the chart, by path inside charts/stackflux/. */
export function chartFiles(): Map<string, string> {
  const tree = mergedInstallTree();
  const files = new Map<string, string>();
  files.set('Chart.yaml', chartYaml());
  files.set('values.yaml', valuesYaml());
  files.set('values.schema.json', valuesSchema());
  files.set('templates/stackflux.yaml', objectsTemplate(tree));
  // Helm's crds/: installed with the chart, never upgraded nor deleted by it (README: install with Helm).
  // The same files as the repository's crds/ (installObjects() has the same CRDs: tested).
  for (const [name, text] of renderCrdFiles()) files.set(`crds/${name}`, text);
  return files;
}
