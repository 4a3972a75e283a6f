// The hostile inputs of issue 22 for `npm run bench -- hostile` (hostile.ts), one small named
// function each: what it puts into the release repository (before the tags are pushed), what it
// creates (ClusterStacks, Clusters, Secrets, local servers), what it repeats during the run (tick),
// and how to read what stackflux reported about it (the condition on the targeted object). To add
// an input, write one more function and list it in HOSTILE_INPUTS.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { API_VERSION, LABEL_SOURCE_CREDENTIALS } from '../../controller/api/meta.ts';
import type { KubeClient, KubeObject } from '../../controller/runtime/client.ts';
import type { Endpoints } from '../../hack/lib/testenv.ts';
import { CAPI, cutRelease, ferrolClusterStack, git } from '../support/e2e.ts';
import { clusterName, createClusters, KUSTOMIZE_API } from '../support/fanout.ts';
import { FaultProxy } from '../support/git-fault-proxy.ts';
import { HostileRegistry, invalidTags, longTags } from '../support/hostile-listing.ts';
import type { Obj } from './fleet.ts';

/** What the bench hands every input. */
export interface Harness {
  client: KubeClient;
  e: Endpoints;
  pid: number;
  /** Namespaces: the benign tenant (A), the hostile tenant, and another tenant (B). */
  ns: { benign: string; hostile: string; other: string };
  /** sharding.fluxcd.io/key of everything this run creates (stackflux runs --shard with it). */
  shardLabels: Record<string, string>;
  releaseUrl: string;
  /** Work tree of the release repository (inputs commit and tag into it before the push). */
  releaseDir: string;
  workloadKubeconfig: string;
  /** Folder of this run's files (the stackflux cache is in it). */
  work: string;
  /** Port of stackflux's push webhook on 127.0.0.1. */
  webhookPort: number;
  /** Bytes the huge Helm values scalar renders to when nothing caps it. */
  hugeBytes: number;
  /** Webhook flood: connections per wave, wave length, pause between waves. */
  flood: { connections: number; seconds: number; everySeconds: number };
  /** Items of the list the slow template iterates over 6 levels deep (14: 7.5 million iterations). */
  slowList: number;
  /** Clusters of the slow tenant (the Clusters left over after every other input took its own). */
  slowClusters: number;
  /** When stackflux exited during the run (Date.now()), if it did. */
  exitedAt?: number;
  /** Tags to push once every input has written its releases. */
  tags: string[];
  /** Next free Cluster index per namespace (Cluster names c-00000… must not repeat). */
  nextIndex: Record<string, number>;
  log: (m: string) => void;
}

/** What stackflux reported about one input: the targeted object and its condition. */
export interface Reported {
  object: string;
  reason: string;
  message?: string;
  [k: string]: unknown;
}

export interface HostileInput {
  name: string;
  /** One line: what is sent. */
  input: string;
  /** Starts what the release refers to (a server whose port goes into stack.yaml). */
  prepare?(h: Harness): Promise<void>;
  /** Writes releases into h.releaseDir (tags into h.tags), before the tags are pushed. */
  release?(h: Harness): void;
  /** Creates the objects and servers of the input (after the tags are pushed). */
  setup(h: Harness): Promise<void>;
  /** Called every few seconds during the run (seconds since stackflux started). */
  tick?(h: Harness, seconds: number): Promise<void>;
  report(h: Harness): Promise<Reported>;
  /** Stops what the input started (servers, sockets) and removes what lives outside its namespaces. */
  stop?(h: Harness): Promise<void>;
}

// --- helpers ----------------------------------------------------------------------------------
const tagOf = (name: string, v: string): string => `docker-${name}-1-30-${v}`;
const short = (s: unknown, n = 240): string | undefined =>
  typeof s === 'string' ? (s.length > n ? `${s.slice(0, n)}…` : s) : undefined;

interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
}
const conditions = (o: Obj | undefined): Condition[] =>
  (o?.status?.conditions as Condition[] | undefined) ?? [];

/** The condition that says most: a False/Unknown one other than Ready first, else Ready. */
function telling(o: Obj | undefined): Condition | undefined {
  const cs = conditions(o);
  return (
    cs.find((c) => c.type === 'Ready' && c.status !== 'True') ??
    cs.find((c) => c.status === 'False' && c.type !== 'Ready') ??
    cs.find((c) => c.type === 'Ready')
  );
}

/** The object's telling condition as a report ("no condition" / "object absent" otherwise). */
export async function conditionReport(
  client: KubeClient,
  apiVersion: string,
  kind: string,
  name: string,
  ns: string,
): Promise<Reported> {
  const o = await client.get<Obj>(apiVersion, kind, name, ns).catch(() => undefined);
  const object = `${kind} ${ns}/${name}`;
  if (o === undefined) return { object, reason: '(object absent)' };
  const c = telling(o);
  if (c === undefined) return { object, reason: '(no condition)' };
  return { object, reason: `${c.type}=${c.status}/${c.reason ?? ''}`, message: short(c.message) };
}

/** The hostile tenant's ClusterStackRelease `tag`. */
const releaseReport = (h: Harness, tag: string): Promise<Reported> =>
  conditionReport(h.client, API_VERSION, 'ClusterStackRelease', tag, h.ns.hostile);

/** The ClusterAddon of a Cluster: its telling condition and the reasons of its addons. */
async function addonReport(h: Harness, ns: string, cluster: string): Promise<Reported> {
  const list = await h.client
    .list<Obj>(API_VERSION, 'ClusterAddon', { namespace: ns })
    .catch(() => undefined);
  const addon = list?.items.find((a) => (a.spec as { cluster?: string } | undefined)?.cluster === cluster);
  if (addon === undefined) return { object: `Cluster ${ns}/${cluster}`, reason: '(no ClusterAddon)' };
  const c = telling(addon);
  const addons = ((addon.status?.addons as Array<Record<string, unknown>> | undefined) ?? [])
    .filter((a) => a.ready !== true)
    .map((a) => `${String(a.name)}:${String(a.reason ?? '')}`);
  return {
    object: `ClusterAddon ${ns}/${addon.metadata.name}`,
    reason: c === undefined ? '(no condition)' : `${c.type}=${c.status}/${c.reason ?? ''}`,
    message: short(c?.message),
    release: addon.status?.release,
    ...(addons.length > 0 ? { addonsNotReady: addons } : {}),
  };
}

/** A ClusterStack of this run (label: the run's shard key). */
function stack(h: Harness, ns: string, name: string, spec: Record<string, unknown>): KubeObject {
  const s = ferrolClusterStack(ns, name, {
    autoSubscribe: false,
    interval: '1m',
    ...spec,
    name,
    source: (spec.source as never) ?? { git: { url: h.releaseUrl }, path: name },
  });
  s.metadata.labels = { ...h.shardLabels };
  return s;
}

/** n Clusters of class `classTag` in ns; returns their names. */
async function clusters(h: Harness, ns: string, n: number, classTag: string): Promise<string[]> {
  const first = h.nextIndex[ns] ?? 0;
  h.nextIndex[ns] = first + n;
  await createClusters(h.client, ns, n, classTag, h.workloadKubeconfig, { first, labels: h.shardLabels });
  return Array.from({ length: n }, (_, i) => clusterName(first + i));
}

/** Cuts release v of stacks/docker-ferrol-1-30 as stack `name` in folder `name`, edited. */
function cut(h: Harness, name: string, v: string, edit?: (dir: string) => void): void {
  h.tags.push(
    cutRelease(h.releaseDir, name, {
      example: 'docker-ferrol-1-30',
      name,
      k8s: '1-30',
      version: v,
      ...(edit ? { edit } : {}),
    }),
  );
}

/** Adds an addon to the release's stack.yaml (after the last one). */
function addAddon(dir: string, lines: string): void {
  const f = join(dir, 'stack.yaml');
  writeFileSync(f, `${readFileSync(f, 'utf8').trimEnd()}\n${lines}\n`);
}

/** Handlebars that repeats `inner` list^depth times (nested #each over Values[list]). */
function nestedEach(list: string, depth: number, inner: string): string {
  let s = inner;
  for (let i = 0; i < depth; i++) s = `{{#each @root.Values.${list}}}${s}{{/each}}`;
  return s;
}

/**
 * Adds `values` to the cloud-config addon's values (the addon without a values schema, so extra
 * values are allowed) and a template <name>.yaml.hbs: a ConfigMap whose data.x is `body`.
 */
function cloudConfigTemplate(dir: string, values: string, name: string, body: string): void {
  const addon = join(dir, 'cluster-addon', 'cloud-config');
  const file = join(addon, 'values.yaml');
  writeFileSync(file, `${readFileSync(file, 'utf8').trimEnd()}\n${values}\n`);
  writeFileSync(
    join(addon, `${name}.yaml.hbs`),
    `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${name}\ndata:\n  x: "${body}"\n`,
  );
}

/** Whether Cluster `name`'s class release exists with a resolved commit (stackflux listed its tag). */
async function resolved(h: Harness, ns: string, tag: string): Promise<boolean> {
  const r = await h.client.get<Obj>(API_VERSION, 'ClusterStackRelease', tag, ns).catch(() => undefined);
  return typeof r?.status?.commit === 'string';
}

/** A local HTTP server that records each request and answers with `answer`. */
export class Recorder {
  readonly requests: Array<{ method: string; url: string; authorization?: string }> = [];
  private server: Server | undefined;
  port = 0;
  private readonly host: string;
  private readonly answer: (req: IncomingMessage, res: ServerResponse) => void;

  constructor(host: string, answer: (req: IncomingMessage, res: ServerResponse) => void) {
    this.host = host;
    this.answer = answer;
  }

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      const authorization = req.headers.authorization;
      this.requests.push({
        method: req.method ?? '',
        url: req.url ?? '',
        ...(authorization !== undefined ? { authorization } : {}),
      });
      req.resume();
      this.answer(req, res);
    });
    await new Promise<void>((resolve, reject) => {
      this.server?.once('error', reject);
      this.server?.listen(0, this.host, () => resolve());
    });
    const addr = this.server.address();
    this.port = typeof addr === 'object' && addr !== null ? addr.port : 0;
  }

  /** Basic credentials it received, decoded (user:password). */
  credentials(): string[] {
    return [
      ...new Set(
        this.requests.flatMap((r) =>
          r.authorization?.startsWith('Basic ')
            ? [Buffer.from(r.authorization.slice(6), 'base64').toString('utf8')]
            : r.authorization !== undefined
              ? [r.authorization]
              : [],
        ),
      ),
    ];
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((r) => this.server?.close(r) ?? r(undefined));
  }
}

/** Answers 401 with a Basic challenge until credentials come, then 404. */
const askForCredentials = (req: IncomingMessage, res: ServerResponse): void => {
  if (req.headers.authorization === undefined) {
    res.writeHead(401, { 'WWW-Authenticate': 'Basic realm="tenant"' }).end('credentials please');
  } else res.writeHead(404).end('not found');
};

// --- 1. a release tree with path components `..` and `.git` --------------------------------------
const ESCAPE_MARKER = 'hostile-bench-escaped-marker.yaml';

/** Rewrites tree `treeish` with `edit` applied to the entries at `path` (git ls-tree lines). */
function rewriteTree(
  dir: string,
  treeish: string,
  path: string[],
  edit: (lines: string[]) => string[],
): string {
  const lines = git(dir, 'ls-tree', treeish)
    .split('\n')
    .filter((l) => l !== '');
  const [head, ...rest] = path;
  const next =
    head === undefined
      ? edit(lines)
      : lines.map((l) => {
          const [meta, name] = l.split('\t') as [string, string];
          if (name !== head) return l;
          const sub = rewriteTree(dir, meta.split(' ')[2] as string, rest, edit);
          return `040000 tree ${sub}\t${name}`;
        });
  return execFileSync('git', ['mktree'], {
    cwd: dir,
    input: `${next.join('\n')}\n`,
    encoding: 'utf8',
  }).trim();
}

export function dotdotTree(): HostileInput {
  const name = 'dotdot';
  return {
    name,
    input: 'release tree whose cni addon holds the path components `..` and `.git` (git mktree)',
    release(h) {
      cut(h, name, 'v1');
      const dir = h.releaseDir;
      const blob = execFileSync('git', ['hash-object', '-w', '--stdin'], {
        cwd: dir,
        input: 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: escaped\n',
        encoding: 'utf8',
      }).trim();
      const hookBlob = execFileSync('git', ['hash-object', '-w', '--stdin'], {
        cwd: dir,
        input: `[core]\n\tfsmonitor = "touch ${fsmonitorMarker(h)}"\n`,
        encoding: 'utf8',
      }).trim();
      const mk = (entries: string): string =>
        execFileSync('git', ['mktree'], { cwd: dir, input: entries, encoding: 'utf8' }).trim();
      const escaped = mk(`100644 blob ${blob}\t${ESCAPE_MARKER}\n`);
      const dotGit = mk(`100644 blob ${hookBlob}\tconfig\n`);
      const root = rewriteTree(dir, 'HEAD^{tree}', [name, 'cluster-addon', 'cni'], (lines) => [
        ...lines,
        `040000 tree ${escaped}\t..`,
        `040000 tree ${dotGit}\t.git`,
      ]);
      const commit = git(dir, 'commit-tree', root, '-p', 'HEAD', '-m', 'a tree with .. and .git');
      git(dir, 'tag', '-f', tagOf(name, 'v1'), commit);
    },
    async setup(h) {
      await h.client.create(stack(h, h.ns.hostile, name, { versions: ['v1'] }));
      await clusters(h, h.ns.hostile, 1, tagOf(name, 'v1'));
    },
    async report(h) {
      const r = await releaseReport(h, tagOf(name, 'v1'));
      const escapedTo = findFiles(h.work, ESCAPE_MARKER);
      return { ...r, markerFilesWritten: escapedTo, dotGitConfigRan: existsSync(fsmonitorMarker(h)) };
    },
    async stop(h) {
      rmSync(fsmonitorMarker(h), { force: true });
    },
  };
}

/** The file the crafted .git/config's fsmonitor command would create if git ever read it. */
const fsmonitorMarker = (h: Harness): string => join(tmpdir(), `hostile-bench-${h.pid}-fsmonitor-ran`);

/** Paths of files named `file` under dir (the release cache: did a `..` entry land anywhere?). */
function findFiles(dir: string, file: string): string[] {
  try {
    return (
      readdirSync(dir, { recursive: true, withFileTypes: true }) as Array<{
        name: string;
        parentPath: string;
      }>
    )
      .filter((d) => d.name === file)
      .map((d) => join(d.parentPath, d.name));
  } catch {
    return [];
  }
}

// --- 2. an addon that turns from manifests into a Helm chart between releases --------------------
export function manifestsToHelm(): HostileInput {
  const name = 'tohelm';
  let cluster = '';
  let moved = false;
  return {
    name,
    input: 'addon cni is manifests in v1 and an in-tree Helm chart in v2; the Cluster moves v1 → v2',
    release(h) {
      cut(h, name, 'v1');
      cut(h, name, 'v2', (dir) => {
        const cni = join(dir, 'cluster-addon', 'cni');
        execFileSync('mkdir', ['-p', join(cni, 'templates')]);
        for (const f of ['rbac.yaml', 'serviceaccount.yaml'])
          execFileSync('mv', [join(cni, f), join(cni, 'templates', f)]);
        // The chart takes only what values.yaml.hbs writes: no schema of the manifests' values.
        execFileSync('rm', ['-f', join(cni, 'config.yaml.hbs'), join(cni, 'values.schema.json')]);
        writeFileSync(join(cni, 'Chart.yaml'), 'apiVersion: v2\nname: cni\nversion: 0.2.0\n');
        writeFileSync(
          join(cni, 'values.yaml.hbs'),
          'podCIDR: {{quote Cluster.spec.clusterNetwork.pods.cidrBlocks.[0]}}\n',
        );
      });
    },
    async setup(h) {
      await h.client.create(stack(h, h.ns.hostile, name, { versions: ['v1', 'v2'] }));
      [cluster] = (await clusters(h, h.ns.hostile, 1, tagOf(name, 'v1'))) as [string];
    },
    async tick(h) {
      if (moved || !(await resolved(h, h.ns.hostile, tagOf(name, 'v2')))) return;
      // Moved once stackflux listed v2: the switch from manifests to a chart is what is hostile.
      moved = true;
      await h.client.mergePatch(CAPI, 'Cluster', cluster, h.ns.hostile, {
        spec: { topology: { classRef: { name: tagOf(name, 'v2') } } },
      });
    },
    async report(h) {
      return { ...(await addonReport(h, h.ns.hostile, cluster)), movedToV2: moved };
    },
  };
}

// --- 3. a tenant release whose cluster-class/ holds a ClusterRoleBinding -------------------------
export function clusterRoleBinding(): HostileInput {
  const name = 'crb';
  let binding = '';
  return {
    name,
    input: "release whose cluster-class/ binds cluster-admin to a ServiceAccount of the tenant's namespace",
    release(h) {
      binding = `hostile-bench-${h.pid}-escalate`;
      cut(h, name, 'v1', (dir) => {
        writeFileSync(
          join(dir, 'cluster-class', 'escalate.yaml'),
          [
            'apiVersion: rbac.authorization.k8s.io/v1',
            'kind: ClusterRoleBinding',
            `metadata:\n  name: ${binding}`,
            'roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: cluster-admin',
            `subjects:\n  - kind: ServiceAccount\n    name: hostile-bench-nobody\n    namespace: ${h.ns.hostile}`,
            '',
          ].join('\n'),
        );
      });
    },
    async setup(h) {
      await h.client.create(stack(h, h.ns.hostile, name, { versions: ['v1'] }));
    },
    async report(h) {
      const r = await releaseReport(h, tagOf(name, 'v1'));
      const crb = await h.client
        .get('rbac.authorization.k8s.io/v1', 'ClusterRoleBinding', binding)
        .catch(() => undefined);
      return { ...r, clusterRoleBindingCreated: crb !== undefined };
    },
    async stop(h) {
      // Flux would apply the binding again while the release's Kustomization lives on in the
      // terminating namespace: suspended first, then gone (or a minute passed), then the binding.
      const release = tagOf(name, 'v1');
      const kustomization = () =>
        h.client.get(KUSTOMIZE_API, 'Kustomization', release, h.ns.hostile).catch(() => undefined);
      await h.client
        .mergePatch(KUSTOMIZE_API, 'Kustomization', release, h.ns.hostile, { spec: { suspend: true } })
        .catch(() => undefined);
      for (let i = 0; i < 60 && (await kustomization()) !== undefined; i++)
        await new Promise((r) => setTimeout(r, 1_000));
      await h.client
        .delete('rbac.authorization.k8s.io/v1', 'ClusterRoleBinding', binding)
        .catch(() => undefined);
    },
  };
}

// --- 4. a Helm addon whose values.yaml.hbs renders one huge scalar -------------------------------
export function hugeHelmValues(): HostileInput {
  const name = 'huge';
  let cluster = '';
  return {
    name,
    input:
      'in-tree Helm addon whose values.yaml.hbs renders one scalar of --huge-mb (nested #each, 10^5 × a pad)',
    release(h) {
      const repeats = 10 ** 5;
      const pad = 'x'.repeat(Math.max(1, Math.ceil(h.hugeBytes / repeats)));
      cut(h, name, 'v1', (dir) => {
        addAddon(dir, '  - name: big\n    targetNamespace: kube-system\n    dependsOn: []');
        const big = join(dir, 'cluster-addon', 'big');
        execFileSync('mkdir', ['-p', join(big, 'templates')]);
        writeFileSync(join(big, 'Chart.yaml'), 'apiVersion: v2\nname: big\nversion: 0.1.0\n');
        writeFileSync(
          join(big, 'templates', 'cm.yaml'),
          'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n  size: "{{ len .Values.big }}"\n',
        );
        writeFileSync(join(big, 'values.yaml'), `l: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\npad: ${pad}\n`);
        writeFileSync(join(big, 'values.yaml.hbs'), `big: "${nestedEach('l', 5, '{{@root.Values.pad}}')}"\n`);
      });
    },
    async setup(h) {
      await h.client.create(stack(h, h.ns.hostile, name, { versions: ['v1'] }));
      [cluster] = (await clusters(h, h.ns.hostile, 1, tagOf(name, 'v1'))) as [string];
    },
    report: (h) => addonReport(h, h.ns.hostile, cluster),
  };
}

// --- 5. a Progressive ClusterStack with a costly health check ------------------------------------
export function costlyHealthCheck(): HostileInput {
  const name = 'rollout';
  const list = `[${Array.from({ length: 20 }, (_, i) => i).join(', ')}]`;
  const vars = ['a', 'b', 'c', 'd', 'e', 'f'];
  let expression = `${vars.join(' + ')} >= 0`;
  for (const v of [...vars].reverse()) expression = `${list}.all(${v}, ${expression})`;
  return {
    name,
    input: 'Progressive ClusterStack whose healthCheck.expression nests six .all over a 20-item list (20^6)',
    release(h) {
      cut(h, name, 'v1');
      cut(h, name, 'v2');
    },
    async setup(h) {
      await h.client.create(
        stack(h, h.ns.hostile, name, {
          versions: ['v1', 'v2'],
          rollout: { strategy: 'Progressive', maxConcurrent: 2, healthCheck: { expression } },
        }),
      );
      await clusters(h, h.ns.hostile, 2, tagOf(name, 'v1'));
    },
    async report(h) {
      const r = await conditionReport(h.client, API_VERSION, 'ClusterStack', name, h.ns.hostile);
      const cs = await h.client
        .get<Obj>(API_VERSION, 'ClusterStack', name, h.ns.hostile)
        .catch(() => undefined);
      const rollout = cs?.status?.rollout as Record<string, unknown> | undefined;
      return {
        ...r,
        rollout: rollout && {
          phase: rollout.phase,
          reason: rollout.reason,
          message: short(rollout.message),
        },
      };
    },
  };
}

// --- 6. one Cluster's rendered content that the fleet Git host refuses ---------------------------
export const REFUSED_MARKER = 'refuse-me-marker';

/** The fleet repository's pre-receive hook: refuses a push whose new tips hold the marker file. */
export function refusingHook(): string {
  return [
    '#!/bin/sh',
    '# hostile bench: the fleet Git host refuses content holding a marker file name',
    'zero=0000000000000000000000000000000000000000',
    'while read old new ref; do',
    '  [ "$new" = "$zero" ] && continue',
    `  if git ls-tree -r --name-only "$new" | grep -q '${REFUSED_MARKER}'; then`,
    `    echo "refused by policy: $ref holds ${REFUSED_MARKER}" >&2`,
    '    exit 1',
    '  fi',
    'done',
    'exit 0',
    '',
  ].join('\n');
}

export function fleetRefuses(): HostileInput {
  const name = 'refused';
  let cluster = '';
  return {
    name,
    input: `one Cluster renders ${REFUSED_MARKER}.yaml, which the fleet repo's pre-receive hook refuses`,
    release(h) {
      cut(h, name, 'v1', (dir) => {
        writeFileSync(
          join(dir, 'cluster-addon', 'cni', `${REFUSED_MARKER}.yaml`),
          'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: refuse-me\n',
        );
      });
    },
    async setup(h) {
      await h.client.create(stack(h, h.ns.hostile, name, { versions: ['v1'] }));
      [cluster] = (await clusters(h, h.ns.hostile, 1, tagOf(name, 'v1'))) as [string];
    },
    report: (h) => addonReport(h, h.ns.hostile, cluster),
  };
}

// --- 7. a Cluster in namespace B naming namespace A's ClusterClass -------------------------------
export function crossNamespaceClass(benignTag: string): HostileInput {
  let cluster = '';
  return {
    name: 'crossns',
    input: "Cluster in namespace B whose topology.classRef names the benign tenant's ClusterClass in A",
    async setup(h) {
      [cluster] = (await clusters(h, h.ns.other, 1, benignTag)) as [string];
      await h.client.mergePatch(CAPI, 'Cluster', cluster, h.ns.other, {
        spec: { topology: { classRef: { name: benignTag, namespace: h.ns.benign } } },
      });
    },
    report: (h) => addonReport(h, h.ns.other, cluster),
  };
}

// --- 8. a template that exhausts the render worker's heap ----------------------------------------
export function heapExhaustion(): HostileInput {
  const name = 'heap';
  let cluster = '';
  return {
    name,
    input:
      'cloud-config template nesting #each 8 deep over 10 items around a 1 KiB value (10^8 × 1 KiB if unbounded)',
    release(h) {
      cut(h, name, 'v1', (dir) =>
        cloudConfigTemplate(
          dir,
          `hl: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\nhp: ${'y'.repeat(1024)}`,
          name,
          nestedEach('hl', 8, '{{@root.Values.hp}}'),
        ),
      );
    },
    async setup(h) {
      await h.client.create(stack(h, h.ns.hostile, name, { versions: ['v1'] }));
      [cluster] = (await clusters(h, h.ns.hostile, 1, tagOf(name, 'v1'))) as [string];
    },
    report: (h) => addonReport(h, h.ns.hostile, cluster),
  };
}

// --- 9. an unauthenticated webhook flood ---------------------------------------------------------
interface Wave {
  startedAt: number;
  connected: number;
  /** Connections the server ended before the wave did, and when (s after the wave started). */
  closedByServer: number[];
  responses: Record<string, number>;
  errors: number;
}

/**
 * One wave: `connections` stalled POST /hooks/push to 127.0.0.1:port announcing 1 MiB bodies and
 * trickling 16 bytes every 2 s; every socket is destroyed after `seconds` (the flood stops itself).
 */
export async function floodWave(
  port: number,
  connections: number,
  seconds: number,
  signal: AbortSignal,
  wave: Wave,
): Promise<void> {
  const sockets: Socket[] = [];
  const head =
    'POST /hooks/push HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' +
    'X-GitHub-Event: push\r\nContent-Length: 1048576\r\n\r\n{"ref":"refs/tags/x","pad":"';
  let over = false;
  for (let i = 0; i < connections; i++) {
    const s = connect({ host: '127.0.0.1', port });
    sockets.push(s);
    let connected = false;
    s.on('connect', () => {
      connected = true;
      wave.connected++;
      s.write(head);
    });
    s.on('data', (d: Buffer) => {
      const status = /^HTTP\/1\.1 (\d{3})/.exec(d.toString('latin1'))?.[1];
      if (status !== undefined) wave.responses[status] = (wave.responses[status] ?? 0) + 1;
    });
    s.on('error', () => {
      wave.errors++;
    });
    s.on('close', () => {
      if (!over && connected) wave.closedByServer.push(Math.round((Date.now() - wave.startedAt) / 100) / 10);
    });
  }
  const trickle = setInterval(() => {
    for (const s of sockets) if (!s.destroyed && s.writable) s.write('x'.repeat(16));
  }, 2_000);
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, seconds * 1000);
    signal.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve();
    });
  });
  over = true;
  clearInterval(trickle);
  for (const s of sockets) s.destroy();
}

export function webhookFlood(): HostileInput {
  const waves: Wave[] = [];
  let running: Promise<void> | undefined;
  let lastStart = Number.NEGATIVE_INFINITY;
  const stopped = new AbortController();
  return {
    name: 'flood',
    input:
      'unauthenticated webhook flood: waves of stalled POSTs announcing 1 MiB, trickled (127.0.0.1 only)',
    async setup() {},
    async tick(h, seconds) {
      if (stopped.signal.aborted || running !== undefined || seconds - lastStart < h.flood.everySeconds)
        return;
      lastStart = seconds;
      // Recorded at its start: a run that ends early still reports the wave under way.
      const wave: Wave = {
        startedAt: Date.now(),
        connected: 0,
        closedByServer: [],
        responses: {},
        errors: 0,
      };
      waves.push(wave);
      running = floodWave(h.webhookPort, h.flood.connections, h.flood.seconds, stopped.signal, wave).then(
        () => {
          running = undefined;
        },
      );
    },
    async report(h) {
      // A connection that closed as stackflux died (within a second of its exit) was not ended by the server.
      const byServer = (w: Wave, t: number): boolean =>
        h.exitedAt === undefined || w.startedAt + t * 1000 < h.exitedAt - 1000;
      const closed = waves
        .flatMap((w) => w.closedByServer.filter((t) => byServer(w, t)))
        .sort((a, b) => a - b);
      const closedByExit = waves.reduce(
        (n, w) => n + w.closedByServer.filter((t) => !byServer(w, t)).length,
        0,
      );
      const sent = waves.reduce((s, w) => s + w.connected, 0);
      const failed = waves.reduce((s, w) => s + w.errors, 0);
      const responses: Record<string, number> = {};
      for (const w of waves)
        for (const [k, v] of Object.entries(w.responses)) responses[k] = (responses[k] ?? 0) + v;
      return {
        object: `webhook 127.0.0.1:${h.webhookPort}`,
        reason:
          waves.length === 0
            ? '(no wave ran)'
            : sent === 0
              ? `(no connection accepted; ${failed} failed)`
              : `server ended ${closed.length} of ${sent} stalled requests` +
                (closed.length > 0 ? ` (median after ${closed[Math.floor(closed.length / 2)]} s)` : '') +
                (closedByExit > 0 ? `; ${closedByExit} closed as stackflux exited` : ''),
        waves: waves.length,
        responses,
      };
    },
    async stop() {
      stopped.abort();
      await running;
    },
  };
}

// --- 10. one tenant's slow renders flooding the render queue -------------------------------------
export function slowRenders(): HostileInput {
  const name = 'slow';
  let names: string[] = [];
  let round = 0;
  let lastChange = 0;
  return {
    name,
    input:
      'one tenant, many Clusters whose cloud-config template iterates --slow-list^6 times; their values change every 20 s',
    release(h) {
      const list = Array.from({ length: h.slowList }, (_, i) => i).join(', ');
      cut(h, name, 'v1', (dir) => cloudConfigTemplate(dir, `sl: [${list}]`, name, nestedEach('sl', 6, '')));
    },
    async setup(h) {
      await h.client.create(stack(h, h.ns.hostile, name, { versions: ['v1'] }));
      names = await clusters(h, h.ns.hostile, h.slowClusters, tagOf(name, 'v1'));
    },
    async tick(h, seconds) {
      if (seconds - lastChange < 20) return;
      lastChange = seconds;
      round++;
      await Promise.all(
        names.map((c, i) =>
          h.client
            .mergePatch(CAPI, 'Cluster', c, h.ns.hostile, {
              spec: {
                clusterNetwork: { pods: { cidrBlocks: [`10.${100 + (round % 100)}.${i % 256}.0/24`] } },
              },
            })
            .catch(() => undefined),
        ),
      );
    },
    async report(h) {
      const first = await addonReport(h, h.ns.hostile, names[0] ?? '');
      const list = await h.client
        .list<Obj>(API_VERSION, 'ClusterAddon', { namespace: h.ns.hostile })
        .catch(() => undefined);
      const own = new Set(names);
      const reasons: Record<string, number> = {};
      for (const a of list?.items ?? []) {
        if (!own.has((a.spec as { cluster?: string } | undefined)?.cluster ?? '')) continue;
        const c = telling(a);
        const k = c === undefined ? '(no condition)' : `${c.type}=${c.status}/${c.reason ?? ''}`;
        reasons[k] = (reasons[k] ?? 0) + 1;
      }
      return { ...first, clusters: names.length, reasonsOfAll: reasons, valueChangeRounds: round };
    },
  };
}

/** A Secret of the hostile tenant and a ClusterStack whose git source on 127.0.0.1:port uses it. */
async function stackWithCredentials(
  h: Harness,
  name: string,
  port: number,
  secret: {
    metadata: { name: string; namespace: string; labels?: Record<string, string> };
    stringData: Record<string, string>;
  },
): Promise<void> {
  await h.client.create({ apiVersion: 'v1', kind: 'Secret', ...secret });
  await h.client.create(
    stack(h, h.ns.hostile, name, {
      versions: ['v1'],
      source: {
        git: { url: `http://127.0.0.1:${port}/tenant/stack.git`, secretRef: { name: secret.metadata.name } },
      },
    }),
  );
}

// --- 11. a git source URL that redirects to another host asking for credentials ------------------
export function redirectForCredentials(): HostileInput {
  const name = 'redirect';
  const password = `hostile-bench-redirect-${Math.random().toString(36).slice(2)}`;
  const other = new Recorder('127.0.0.2', askForCredentials);
  const first = new Recorder('127.0.0.1', (req, res) => {
    res.writeHead(302, { Location: `http://127.0.0.2:${other.port}${req.url ?? '/'}` }).end();
  });
  return {
    name,
    input:
      'ClusterStack git URL (with the tenant’s credentials) that redirects to 127.0.0.2, which asks for credentials',
    async setup(h) {
      await other.start();
      await first.start();
      // The tenant's own credentials for its own repository: opted in as source credentials.
      await stackWithCredentials(h, name, first.port, {
        metadata: {
          name: 'redirect-creds',
          namespace: h.ns.hostile,
          labels: { [LABEL_SOURCE_CREDENTIALS]: 'true' },
        },
        stringData: { username: 'tenant', password },
      });
    },
    async report(h) {
      const r = await conditionReport(h.client, API_VERSION, 'ClusterStack', name, h.ns.hostile);
      const sent = other.credentials();
      return {
        ...r,
        requestsToRedirectHost: other.requests.length,
        credentialsSentToRedirectHost: sent.some((c) => c.includes(password)),
      };
    },
    async stop() {
      await first.stop();
      await other.stop();
    },
  };
}

// --- 12. chart repository URLs: an oci:// path with `..` and an http:// one ----------------------
export function chartRepositoryUrls(): HostileInput {
  const name = 'charturl';
  const registry = new Recorder('127.0.0.1', (_req, res) => {
    res.writeHead(404).end();
  });
  let cluster = '';
  return {
    name,
    input: 'addons whose chart repository is oci://<host>/charts/../../v2/_catalog and http://<host>/charts',
    prepare: () => registry.start(),
    release(h) {
      cut(h, name, 'v1', (dir) => {
        const host = `127.0.0.1:${registry.port}`;
        addAddon(
          dir,
          [
            '  - name: ocichart',
            '    targetNamespace: kube-system',
            '    dependsOn: []',
            '    chart: evil',
            '    version: 1.0.0',
            `    repository: oci://${host}/charts/../../v2/_catalog`,
            '  - name: httpchart',
            '    targetNamespace: kube-system',
            '    dependsOn: []',
            '    chart: evil',
            '    version: 1.0.0',
            `    repository: http://${host}/charts`,
          ].join('\n'),
        );
        for (const a of ['ocichart', 'httpchart']) {
          execFileSync('mkdir', ['-p', join(dir, 'cluster-addon', a)]);
          writeFileSync(join(dir, 'cluster-addon', a, 'values.yaml'), 'replicas: 1\n');
        }
      });
    },
    async setup(h) {
      await h.client.create(stack(h, h.ns.hostile, name, { versions: ['v1'] }));
      [cluster] = (await clusters(h, h.ns.hostile, 1, tagOf(name, 'v1'))) as [string];
    },
    async report(h) {
      const release = await releaseReport(h, tagOf(name, 'v1'));
      const addon = await addonReport(h, h.ns.hostile, cluster);
      return {
        ...addon,
        release: `${release.reason}${release.message ? `: ${release.message}` : ''}`,
        registryRequests: registry.requests.slice(0, 10).map((r) => `${r.method} ${r.url}`),
      };
    },
    async stop() {
      await registry.stop();
    },
  };
}

// --- 13. a source secretRef naming an unrelated Secret, and a URL the tenant controls ------------
export function unrelatedSecret(): HostileInput {
  const name = 'secretref';
  const password = `hostile-bench-db-${Math.random().toString(36).slice(2)}`;
  const recorder = new Recorder('127.0.0.1', askForCredentials);
  return {
    name,
    input:
      "ClusterStack whose source secretRef names the namespace's database Secret, URL a server the tenant runs",
    async setup(h) {
      await recorder.start();
      await stackWithCredentials(h, name, recorder.port, {
        metadata: { name: 'database-credentials', namespace: h.ns.hostile, labels: { app: 'database' } },
        stringData: { username: 'postgres', password },
      });
    },
    async report(h) {
      const r = await conditionReport(h.client, API_VERSION, 'ClusterStack', name, h.ns.hostile);
      return {
        ...r,
        requestsToTenantServer: recorder.requests.length,
        unrelatedSecretSent: recorder.credentials().some((c) => c.includes(password)),
      };
    },
    async stop() {
      await recorder.stop();
    },
  };
}

// --- 14. an OCI registry whose Bearer realm is a cloud metadata endpoint (issue 31 F1) -----------
export function metadataRealm(): HostileInput {
  const name = 'realm';
  // 127.0.0.2: loopback, outside the test environment's --allow-source-networks (127.0.0.1/32).
  const metadata = new Recorder('127.0.0.2', (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"AccessKeyId":"ASIAHOSTILEBENCH"}');
  });
  const registry = new Recorder('127.0.0.1', (_req, res) => {
    const realm = `http://127.0.0.2:${metadata.port}/latest/meta-data/iam/security-credentials/node`;
    res.writeHead(401, { 'WWW-Authenticate': `Bearer realm="${realm}",service="tenant"` }).end();
  });
  return {
    name,
    input:
      'ClusterStack on an OCI registry (127.0.0.1) answering 401 with a Bearer realm on a fake metadata endpoint (127.0.0.2)',
    async setup(h) {
      await metadata.start();
      await registry.start();
      await h.client.create(
        stack(h, h.ns.hostile, name, {
          versions: ['v1'],
          source: { oci: { url: `oci://127.0.0.1:${registry.port}/tenant/stack`, insecure: true } },
        }),
      );
    },
    // SourceReady=False/EgressRefused naming the realm; the metadata endpoint gets nothing.
    async report(h) {
      const r = await conditionReport(h.client, API_VERSION, 'ClusterStack', name, h.ns.hostile);
      return {
        ...r,
        requestsToRegistry: registry.requests.length,
        requestsToMetadata: metadata.requests.length,
      };
    },
    async stop() {
      await registry.stop();
      await metadata.stop();
    },
  };
}

// --- 15. issue 31 F2: an OCI registry whose tag listing is huge (1 MB tags) and invalid ----------
export function hugeTagListing(): HostileInput {
  const names = ['hugetags', 'badtags'];
  let registry: HostileRegistry | undefined;
  return {
    name: 'hugetags',
    input:
      'ClusterStacks on a registry listing 100 pages of three 1 MB tags (300 MB) and half a million strings that are not tags',
    async setup(h) {
      registry = await HostileRegistry.start({
        page: (i, repository) => {
          if (repository.endsWith('/badtags')) return i === 0 ? invalidTags(500_000) : undefined;
          return i < 100 ? longTags(3, 1_000_000, 3 * i) : undefined;
        },
      });
      for (const name of names)
        await h.client.create(
          stack(h, h.ns.hostile, name, {
            autoSubscribe: true,
            interval: '10s',
            source: { oci: { url: registry.url(`tenant/${name}`), insecure: true } },
          }),
        );
    },
    async report(h) {
      const r = await conditionReport(h.client, API_VERSION, 'ClusterStack', names[0] ?? '', h.ns.hostile);
      const bad = await conditionReport(h.client, API_VERSION, 'ClusterStack', names[1] ?? '', h.ns.hostile);
      return {
        ...r,
        invalidTags: `${bad.reason}${bad.message ? `: ${bad.message}` : ''}`,
        tagPagesSent: registry?.pagesSent ?? 0,
        tagBytesSent: registry?.bytesSent ?? 0,
      };
    },
    async stop() {
      await registry?.stop();
    },
  };
}

// --- 16. a release repository whose every tree fetch drips (issue 31 F5, F11) --------------------
export function slowSource(): HostileInput {
  const name = 'slowsrc';
  // More slow tags than the release controller has workers (--concurrency, 4 by default).
  const versions = ['v1', 'v2', 'v3', 'v4', 'v5', 'v6'];
  let proxy: FaultProxy | undefined;
  return {
    name,
    input:
      'ClusterStack on a Git server that lists at once but drips every tree fetch at 10 bytes/s (6 release tags)',
    release(h) {
      for (const v of versions) cut(h, name, v);
    },
    async setup(h) {
      proxy = await FaultProxy.start(h.e.gitServerUrl);
      await proxy.set('drip-fetch');
      await h.client.create(
        stack(h, h.ns.hostile, name, {
          versions,
          source: { git: { url: proxy.proxied(h.releaseUrl) }, path: name },
        }),
      );
    },
    async report(h) {
      const reports = await Promise.all(versions.map((v) => releaseReport(h, tagOf(name, v))));
      const first = reports.find((r) => r.reason.endsWith('/SourceTimeout')) ?? reports[0];
      return {
        ...(first ?? {
          object: `ClusterStackRelease ${h.ns.hostile}/${tagOf(name, 'v1')}`,
          reason: '(none)',
        }),
        releases: reports.map((r) => `${r.object.split('/').pop()}: ${r.reason}`),
        fetchesDrippingNow: proxy?.held ?? 0,
      };
    },
    async stop() {
      await proxy?.stop();
    },
  };
}
