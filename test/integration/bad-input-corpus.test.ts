// Issue 11: the bad-input corpus. Each case is hostile or broken input a user or a release author
// can produce, driven through the code the controllers run — the pure reconcilers (ClusterStack,
// ClusterStackRelease, ClusterAddon, with readRelease and the renderer they call) and, for release
// trees, readTreeFromGit on a Git repository the case builds — and each must end in a specific
// condition reason with a message naming what to fix, never a throw. Fixtures are generated here.
// (Needs no test environment: the Git cases use a local repository and the git binary.)
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, posix } from 'node:path';
import { after, describe, it } from 'node:test';
import type { ClusterAddon } from '../../controller/api/clusteraddon.ts';
import type { ClusterStack } from '../../controller/api/clusterstack.ts';
import type { ClusterStackRelease } from '../../controller/api/clusterstackrelease.ts';
import type { Condition } from '../../controller/api/meta.ts';
import { FINALIZER_FLEET_CLEANUP, reconcileClusterAddon } from '../../controller/reconcilers/clusteraddon.ts';
import { reconcileClusterStack, type SourceListing } from '../../controller/reconcilers/clusterstack.ts';
import { reconcileClusterStackRelease } from '../../controller/reconcilers/clusterstackrelease.ts';
import { loadFluxTemplates } from '../../controller/releases/flux-templates.ts';
import { readRelease } from '../../controller/releases/stack.ts';
import { parseReleaseTag } from '../../controller/releases/tags.ts';
import { readTreeFromGit, SourceError } from '../../controller/sources/git.ts';

const templates = loadFluxTemplates();
const now = new Date('2026-01-02T03:04:05Z');
const NS = 'team';
const TAG = 'docker-ferrol-1-30-v1';
const URL = 'https://git.example.com/stacks.git';
const work = mkdtempSync(join(tmpdir(), 'stackflux-corpus-'));
after(() => rmSync(work, { recursive: true, force: true }));

// ---- fixtures ---------------------------------------------------------------------------------
const STACK = `apiVersion: stackflux.io/v1alpha1
kind: Stack
provider: docker
name: ferrol
kubernetesVersion: v1.30.4
version: v1
addons:
  - name: cni
    targetNamespace: kube-system
`;
const CNI = `apiVersion: v1
kind: ConfigMap
metadata:
  name: cni
data:
  cluster: {{quote Cluster.metadata.name}}
  pods: {{quote Cluster.spec.clusterNetwork.pods.cidrBlocks.[0]}}
  mtu: {{quote Values.mtu}}
`;
const SCHEMA = JSON.stringify({
  type: 'object',
  additionalProperties: false,
  properties: { mtu: { type: 'integer', minimum: 1280 }, name: { type: 'string', maxLength: 64 } },
});
const BASE_TREE: Record<string, string> = {
  'stack.yaml': STACK,
  'cluster-class/cluster-class.yaml': `apiVersion: cluster.x-k8s.io/v1beta2\nkind: ClusterClass\nmetadata:\n  name: ${TAG}\n`,
  'cluster-addon/cni/config.yaml.hbs': CNI,
  'cluster-addon/cni/values.yaml': 'mtu: 1450\n',
  'cluster-addon/cni/values.schema.json': SCHEMA,
};
/** The base release with files replaced (undefined removes one). */
function treeWith(changes: Record<string, string | undefined> = {}): Map<string, string> {
  const files = { ...BASE_TREE, ...changes };
  return new Map(Object.entries(files).filter((e): e is [string, string] => e[1] !== undefined));
}
/** A YAML "billion laughs": 9 levels of 9 aliases each. */
function yamlBomb(key: string): string {
  const lines = [`a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]`];
  for (let i = 1; i < 9; i++)
    lines.push(
      `a${i}: &a${i} [${Array(9)
        .fill(`*a${i - 1}`)
        .join(',')}]`,
    );
  lines.push(`${key}: *a8`);
  return `${lines.join('\n')}\n`;
}

function cluster(spec: Record<string, unknown> = {}, className = TAG): Record<string, unknown> {
  return {
    apiVersion: 'cluster.x-k8s.io/v1beta2',
    kind: 'Cluster',
    metadata: { name: 'alpha', namespace: NS, uid: 'uid-alpha' },
    spec: {
      clusterNetwork: { pods: { cidrBlocks: ['192.168.0.0/16'] } },
      controlPlaneEndpoint: { host: 'alpha.example.com', port: 6443 },
      topology: { classRef: { name: className }, version: 'v1.30.4' },
      ...spec,
    },
  };
}
const withValues = (values: unknown) =>
  cluster({
    topology: {
      classRef: { name: TAG },
      version: 'v1.30.4',
      variables: [{ name: 'stackfluxAddonValues', value: values }],
    },
  });

function release(tag = TAG): ClusterStackRelease {
  return {
    apiVersion: 'stackflux.io/v1alpha1',
    kind: 'ClusterStackRelease',
    metadata: { name: tag, namespace: NS, uid: `uid-${tag}`, generation: 1 },
    spec: {
      clusterStack: 'ferrol',
      tag,
      version: tag.slice(tag.lastIndexOf('-') + 1),
      clusterClass: tag,
      kubernetesVersion: '1.30',
      source: { url: URL },
    },
  };
}

function clusterStack(spec: Partial<ClusterStack['spec']> = {}): ClusterStack {
  return {
    apiVersion: 'stackflux.io/v1alpha1',
    kind: 'ClusterStack',
    metadata: { name: 'ferrol', namespace: NS, uid: 'uid-csk', generation: 1 },
    spec: {
      noProvider: true,
      provider: 'docker',
      name: 'ferrol',
      kubernetesVersion: '1.30',
      channel: 'stable',
      autoSubscribe: true,
      source: { git: { url: URL } },
      ...spec,
    },
  };
}

const clusterAddon: ClusterAddon = {
  apiVersion: 'stackflux.io/v1alpha1',
  kind: 'ClusterAddon',
  metadata: {
    name: 'alpha',
    namespace: NS,
    uid: 'uid-ca',
    generation: 1,
    finalizers: [FINALIZER_FLEET_CLEANUP],
  },
  spec: { cluster: 'alpha', release: TAG, clusterStack: 'ferrol' },
};

// ---- drivers: each returns the condition that carries the outcome --------------------------------
const find = (conditions: readonly Condition[] | undefined, type: string) =>
  conditions?.find((c) => c.type === type);

/** The ClusterStackRelease reconcile of `tag` over release files `tree`: its Ready condition. */
function releaseOutcome(tree: ReadonlyMap<string, string>, tag = TAG): Condition | undefined {
  const parsed = parseReleaseTag(tag);
  assert.ok(parsed.ok, `fixture tag ${tag} parses`);
  const r = reconcileClusterStackRelease({
    release: release(tag),
    stack: readRelease(tree, parsed.value),
    commit: 'c'.repeat(40),
    clusters: [],
    templates,
    now,
  });
  return find(r.status.conditions, 'Ready');
}

/** The ClusterAddon reconcile of Cluster alpha: Ready when it says why, else Reconciling. */
function addonOutcome(
  o: {
    tree?: ReadonlyMap<string, string>;
    cluster?: Record<string, unknown>;
    stack?: Partial<ClusterStack['spec']>;
  } & {
    infraCluster?: Record<string, unknown>;
  } = {},
): Condition | undefined {
  const r = reconcileClusterAddon({
    cluster: o.cluster ?? cluster(),
    namespace: NS,
    name: 'alpha',
    clusterAddon,
    release: release(),
    tree: o.tree ?? treeWith(),
    treeCommit: 'c'.repeat(40),
    clusterStack: clusterStack(o.stack),
    ...(o.infraCluster !== undefined ? { infraCluster: o.infraCluster } : {}),
    kustomizations: [],
    branch: undefined,
    fleetSettings: { url: 'https://git.example.com/fleet.git', branchPrefix: 'stackflux/' },
    templates,
    now,
  });
  const conditions = r?.status.conditions;
  const ready = find(conditions, 'Ready');
  return ready?.status === 'Unknown' ? (find(conditions, 'Reconciling') ?? ready) : ready;
}

/** The ClusterStack reconcile: its Ready condition. */
function stackOutcome(spec: Partial<ClusterStack['spec']>, listing: SourceListing): Condition | undefined {
  const r = reconcileClusterStack({
    clusterStack: clusterStack(spec),
    listing,
    releases: [],
    clusters: [],
    now,
  });
  return find(r.status.conditions, 'Ready');
}
const listed = (tags: string[]): SourceListing => ({ ok: true, tags, listedAt: '2026-01-02T03:04:05Z' });

/** A Git repository with `build` applied to its work tree and committed: readTreeFromGit's verdict. */
let repos = 0;
async function gitTreeOutcome(
  build: (dir: string) => void,
  path = '',
  limits?: { maxFiles: number; maxBytes: number },
): Promise<{ reason: string; message: string }> {
  const dir = join(work, `repo-${repos++}`);
  mkdirSync(dir, { recursive: true });
  const git = (...args: string[]) =>
    execFileSync('git', args, {
      cwd: dir,
      encoding: 'utf8',
      env: {
        ...process.env,
        GIT_AUTHOR_NAME: 't',
        GIT_AUTHOR_EMAIL: 't@e.st',
        GIT_COMMITTER_NAME: 't',
        GIT_COMMITTER_EMAIL: 't@e.st',
      },
    }).trim();
  git('init', '-q', '-b', 'main');
  for (const [p, text] of Object.entries(BASE_TREE)) {
    mkdirSync(dirname(join(dir, p)), { recursive: true });
    writeFileSync(join(dir, p), text);
  }
  build(dir);
  git('add', '-A');
  git('commit', '-q', '-m', 'release');
  const commit = git('rev-parse', 'HEAD');
  // As fetchReleaseTree does with spec.source.path.
  const segments = posix
    .normalize(path || '.')
    .split('/')
    .filter((p) => p !== '' && p !== '.' && p !== '..');
  try {
    const tree = await readTreeFromGit(join(dir, '.git'), commit, segments, limits);
    const ready = releaseOutcome(tree);
    return { reason: ready?.reason ?? '(none)', message: ready?.message ?? '' };
  } catch (err) {
    if (err instanceof SourceError) return { reason: err.reason, message: err.message };
    throw err;
  }
}

// ---- the corpus ----------------------------------------------------------------------------------
interface Case {
  name: string;
  run: () => Condition | undefined | Promise<{ reason: string; message: string }>;
  reason: string;
  message: RegExp;
}

const corpus: Case[] = [
  // ClusterStack specs and tags
  {
    name: 'spec: neither providerRef nor noProvider',
    run: () => stackOutcome({ noProvider: false }, listed([TAG])),
    reason: 'ProviderNotConfigured',
    message: /providerRef|noProvider/,
  },
  {
    name: 'spec: providerRef without a kind',
    run: () =>
      stackOutcome(
        { noProvider: false, providerRef: { apiVersion: 'x.io/v1', kind: '', name: 'p' } },
        listed([TAG]),
      ),
    reason: 'InvalidProviderRef',
    message: /kind/,
  },
  {
    name: 'spec: providerRef kind not ending in Template',
    run: () =>
      stackOutcome(
        { noProvider: false, providerRef: { apiVersion: 'x.io/v1', kind: 'Thing', name: 'p' } },
        listed([TAG]),
      ),
    reason: 'InvalidProviderRef',
    message: /Template/,
  },
  {
    name: 'spec: pinned version that no tag has',
    run: () => stackOutcome({ autoSubscribe: false, versions: ['v7'] }, listed([TAG])),
    reason: 'VersionNotFound',
    message: /v7/,
  },
  {
    name: 'tags: only malformed look-alikes',
    run: () =>
      stackOutcome(
        {},
        listed(['docker-ferrol-1-30-vX', 'docker-ferrol-1-30-v02', 'docker-ferrol-1-30-v1-broken', 'v1.0.0']),
      ),
    reason: 'NoReleaseFound',
    message: /no stable release of docker-ferrol for Kubernetes 1\.30/,
  },
  {
    name: 'tags: another Kubernetes minor only',
    run: () => stackOutcome({}, listed(['docker-ferrol-1-31-v1'])),
    reason: 'NoReleaseFound',
    message: /1-30|1\.30/,
  },
  {
    name: 'tags: a huge tag name',
    run: () => stackOutcome({}, listed([`docker-ferrol-1-30-v${'9'.repeat(5000)}`])),
    reason: 'NoReleaseFound',
    message: /no stable release of docker-ferrol for Kubernetes 1\.30/,
  },
  {
    name: 'source: repository unreachable',
    run: () =>
      stackOutcome(
        {},
        {
          ok: false,
          reason: 'ListFailed',
          message: 'could not read from https://git.example.com/stacks.git',
        },
      ),
    reason: 'SourceUnavailable',
    message: /could not read/,
  },

  // stack.yaml
  {
    name: 'stack.yaml: missing',
    run: () => releaseOutcome(treeWith({ 'stack.yaml': undefined })),
    reason: 'InvalidRelease',
    message: /no stack\.yaml/,
  },
  {
    name: 'stack.yaml: not YAML',
    run: () => releaseOutcome(treeWith({ 'stack.yaml': 'apiVersion: [unclosed\n' })),
    reason: 'InvalidRelease',
    message: /stack\.yaml: invalid YAML/,
  },
  {
    name: 'stack.yaml: a list, not a mapping',
    run: () => releaseOutcome(treeWith({ 'stack.yaml': '- a\n- b\n' })),
    reason: 'InvalidRelease',
    message: /stack\.yaml: must be a YAML mapping/,
  },
  {
    name: 'stack.yaml: unknown field (typo)',
    run: () => releaseOutcome(treeWith({ 'stack.yaml': `${STACK}adons: []\n` })),
    reason: 'InvalidRelease',
    message: /unknown field "adons"/,
  },
  {
    name: 'stack.yaml: duplicate key',
    run: () => releaseOutcome(treeWith({ 'stack.yaml': `${STACK}version: v2\n` })),
    reason: 'InvalidRelease',
    message: /stack\.yaml: invalid YAML/,
  },
  {
    name: 'stack.yaml: version does not match the tag',
    run: () => releaseOutcome(treeWith({ 'stack.yaml': STACK.replace('version: v1', 'version: v2') })),
    reason: 'InvalidRelease',
    message: /version/,
  },
  {
    name: 'stack.yaml: Kubernetes minor does not match the tag',
    run: () => releaseOutcome(treeWith({ 'stack.yaml': STACK.replace('v1.30.4', 'v1.31.2') })),
    reason: 'InvalidRelease',
    message: /kubernetesVersion/,
  },
  {
    name: 'stack.yaml: provider does not match the tag',
    run: () => releaseOutcome(treeWith({ 'stack.yaml': STACK.replace('provider: docker', 'provider: aws') })),
    reason: 'InvalidRelease',
    message: /provider/,
  },
  {
    name: 'stack.yaml: addon name not a DNS label',
    run: () => releaseOutcome(treeWith({ 'stack.yaml': STACK.replace('- name: cni', '- name: ../cni') })),
    reason: 'InvalidRelease',
    message: /DNS-1123/,
  },
  {
    name: 'stack.yaml: addon listed twice',
    run: () => releaseOutcome(treeWith({ 'stack.yaml': `${STACK}  - name: cni\n` })),
    reason: 'InvalidRelease',
    message: /cni/,
  },
  {
    name: 'stack.yaml: dependsOn an unknown addon',
    run: () => releaseOutcome(treeWith({ 'stack.yaml': `${STACK}    dependsOn: [nope]\n` })),
    reason: 'InvalidRelease',
    message: /nope/,
  },
  {
    name: 'stack.yaml: YAML alias bomb',
    run: () => releaseOutcome(treeWith({ 'stack.yaml': `${STACK}${yamlBomb('x-bomb')}` })),
    reason: 'InvalidRelease',
    message: /stack\.yaml: invalid YAML: .*alias/i,
  },
  {
    name: 'release: no cluster-class/ files',
    run: () => releaseOutcome(treeWith({ 'cluster-class/cluster-class.yaml': undefined })),
    reason: 'InvalidRelease',
    message: /cluster-class/,
  },

  // templates
  {
    name: 'template: parse error',
    run: () =>
      addonOutcome({ tree: treeWith({ 'cluster-addon/cni/config.yaml.hbs': `${CNI}  x: {{#if}}\n` }) }),
    reason: 'RenderFailed',
    message: /cluster-addon\/cni\/config\.yaml\.hbs:\d+/,
  },
  {
    name: 'template: field the Cluster does not have',
    run: () =>
      addonOutcome({
        tree: treeWith({
          'cluster-addon/cni/config.yaml.hbs': `${CNI}  x: {{quote Cluster.spec.nothing.here}}\n`,
        }),
      }),
    reason: 'RenderFailed',
    message: /Cluster\.spec\.nothing is not defined/,
  },
  {
    name: 'template: unknown helper',
    run: () =>
      addonOutcome({
        tree: treeWith({ 'cluster-addon/cni/config.yaml.hbs': `${CNI}  x: {{exec "rm -rf /"}}\n` }),
      }),
    reason: 'RenderFailed',
    message: /unknown helper "exec"/,
  },
  {
    name: 'template: helper with the wrong number of arguments',
    run: () =>
      addonOutcome({ tree: treeWith({ 'cluster-addon/cni/config.yaml.hbs': `${CNI}  x: {{indent 2}}\n` }) }),
    reason: 'RenderFailed',
    message: /indent takes 2 argument/,
  },
  {
    name: 'template: an object written without toYaml',
    run: () =>
      addonOutcome({
        tree: treeWith({ 'cluster-addon/cni/config.yaml.hbs': `${CNI}  x: {{Cluster.spec}}\n` }),
      }),
    reason: 'RenderFailed',
    message: /write it with toYaml or toJson/,
  },
  {
    name: 'template: prototype access',
    run: () =>
      addonOutcome({
        tree: treeWith({ 'cluster-addon/cni/config.yaml.hbs': `${CNI}  x: {{Cluster.constructor.name}}\n` }),
      }),
    reason: 'RenderFailed',
    message: /access to "constructor" is not allowed/,
  },
  {
    name: 'template: a partial (recursion)',
    run: () =>
      addonOutcome({ tree: treeWith({ 'cluster-addon/cni/config.yaml.hbs': `${CNI}  x: {{> self}}\n` }) }),
    reason: 'RenderFailed',
    message: /partials are not supported/,
  },
  {
    name: 'template: indent 500000000',
    run: () =>
      addonOutcome({
        tree: treeWith({ 'cluster-addon/cni/config.yaml.hbs': `${CNI}  x: {{indent 500000000 "x"}}\n` }),
      }),
    reason: 'RenderFailed',
    message: /indent width 500000000 exceeds the limit of 256/,
  },
  {
    name: 'template: required value missing',
    run: () =>
      addonOutcome({
        tree: treeWith({
          'cluster-addon/cni/config.yaml.hbs': `${CNI}  x: {{required "set Values.region" Values.region}}\n`,
        }),
      }),
    reason: 'RenderFailed',
    message: /set Values\.region/,
  },
  {
    name: 'template: renders something that is not YAML objects',
    run: () =>
      addonOutcome({ tree: treeWith({ 'cluster-addon/cni/config.yaml.hbs': '- just\n- a list\n' }) }),
    reason: 'RenderFailed',
    message: /expected a Kubernetes object/,
  },
  {
    name: 'template: renders an object without metadata.name',
    run: () =>
      addonOutcome({
        tree: treeWith({
          'cluster-addon/cni/config.yaml.hbs': 'apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n',
        }),
      }),
    reason: 'RenderFailed',
    message: /metadata\.name/,
  },
  {
    name: 'template: ships a kustomization.yaml',
    run: () =>
      addonOutcome({
        tree: treeWith({ 'cluster-addon/cni/kustomization.yaml': 'resources: [config.yaml]\n' }),
      }),
    reason: 'RenderFailed',
    message: /must not ship a kustomization file/,
  },
  {
    name: 'template: the same object twice',
    run: () => addonOutcome({ tree: treeWith({ 'cluster-addon/cni/copy.yaml.hbs': CNI }) }),
    reason: 'RenderFailed',
    message: /also defined in/,
  },
  {
    name: 'copied file: YAML alias bomb',
    run: () =>
      addonOutcome({
        tree: treeWith({
          'cluster-addon/cni/bomb.yaml': `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bomb\ndata:\n${yamlBomb('  x').replace(/^a/gm, '  a')}`,
        }),
      }),
    reason: 'RenderFailed',
    message: /invalid YAML|alias/i,
  },
  {
    name: 'oversized output: a value copied into 8 MiB+',
    run: () =>
      addonOutcome({
        cluster: withValues({ cni: { mtu: 1450 } }),
        tree: treeWith({
          'cluster-addon/cni/big.yaml': `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n  x: "${'x'.repeat(9 * 1024 * 1024)}"\n`,
        }),
      }),
    reason: 'RenderFailed',
    message: /exceeds the limit of 8 MiB \(--render-max-output\)/,
  },

  // values
  {
    name: 'values: values.yaml not YAML',
    run: () => addonOutcome({ tree: treeWith({ 'cluster-addon/cni/values.yaml': 'mtu: [1450\n' }) }),
    reason: 'ValuesInvalid',
    message: /values\.yaml: invalid YAML/,
  },
  {
    name: 'values: values.yaml YAML alias bomb',
    run: () =>
      addonOutcome({
        tree: treeWith({ 'cluster-addon/cni/values.yaml': `mtu: 1450\n${yamlBomb('extra')}` }),
      }),
    reason: 'ValuesInvalid',
    message: /values\.yaml: invalid YAML: .*alias/i,
  },
  {
    name: 'values: a list, not a mapping',
    run: () => addonOutcome({ tree: treeWith({ 'cluster-addon/cni/values.yaml': '- 1450\n' }) }),
    reason: 'ValuesInvalid',
    message: /must be a mapping, got a list/,
  },
  {
    name: 'values: wrong type for the schema',
    run: () => addonOutcome({ cluster: withValues({ cni: { mtu: 'big' } }) }),
    reason: 'ValuesInvalid',
    message: /values\.schema\.json/,
  },
  {
    name: 'values: below the schema minimum',
    run: () => addonOutcome({ cluster: withValues({ cni: { mtu: 9 } }) }),
    reason: 'ValuesInvalid',
    message: /mtu/,
  },
  {
    name: 'values: a field the schema does not allow',
    run: () => addonOutcome({ cluster: withValues({ cni: { mtu: 1450, evil: true } }) }),
    reason: 'ValuesInvalid',
    message: /evil|additional/,
  },
  {
    name: 'values: a huge string over the schema maxLength',
    run: () => addonOutcome({ cluster: withValues({ cni: { mtu: 1450, name: 'n'.repeat(1_000_000) } }) }),
    reason: 'ValuesInvalid',
    message: /name/,
  },
  {
    name: 'values: per-cluster values not a mapping',
    run: () => addonOutcome({ cluster: withValues('cni') }),
    reason: 'ValuesInvalid',
    message: /must be a mapping keyed by addon name/,
  },
  {
    name: 'values: per-addon values not a mapping',
    run: () => addonOutcome({ cluster: withValues({ cni: [1, 2] }) }),
    reason: 'ValuesInvalid',
    message: /value\.cni must be a mapping/,
  },
  {
    name: 'values: central values of the wrong type',
    run: () => addonOutcome({ stack: { values: { cni: { mtu: false } } } }),
    reason: 'ValuesInvalid',
    message: /values\.schema\.json/,
  },
  {
    name: 'values: values.schema.json not JSON',
    run: () => addonOutcome({ tree: treeWith({ 'cluster-addon/cni/values.schema.json': '{"type":' }) }),
    reason: 'ValuesInvalid',
    message: /not a usable JSON schema/,
  },

  // Clusters
  {
    name: 'Cluster: no pod CIDR the template reads',
    run: () => addonOutcome({ cluster: cluster({ clusterNetwork: {} }) }),
    reason: 'RenderFailed',
    message: /Cluster\.spec\.clusterNetwork\.pods is not defined/,
  },
  {
    name: 'Cluster: an invalid CIDR given to cidrHost',
    run: () =>
      addonOutcome({
        cluster: cluster({ clusterNetwork: { pods: { cidrBlocks: ['300.1.2.3/99'] } } }),
        tree: treeWith({
          'cluster-addon/cni/config.yaml.hbs': `${CNI}  gw: {{cidrHost Cluster.spec.clusterNetwork.pods.cidrBlocks.[0] 1}}\n`,
        }),
      }),
    reason: 'RenderFailed',
    message: /cidrHost/,
  },
  {
    name: 'Cluster: infrastructureRef object missing',
    run: () =>
      addonOutcome({
        cluster: cluster({
          infrastructureRef: {
            apiGroup: 'infrastructure.cluster.x-k8s.io',
            kind: 'DockerCluster',
            name: 'gone',
          },
        }),
      }),
    reason: 'WaitingForRefs',
    message: /InfraCluster \(DockerCluster gone\)/,
  },
  {
    name: 'Cluster: moved to a ClusterClass that is no release',
    run: () => addonOutcome({ cluster: cluster({}, 'handmade-class') }),
    reason: 'NotAStackfluxClass',
    message: /handmade-class/,
  },

  // release trees read from Git: symbolic links, submodules, `..` paths, size and count caps
  {
    name: 'tree: a symbolic link to a file outside',
    run: () => gitTreeOutcome((d) => symlinkSync('/etc/passwd', join(d, 'cluster-addon/cni/leak.yaml'))),
    reason: 'InvalidRelease',
    message: /cluster-addon\/cni\/leak\.yaml is a symbolic link/,
  },
  {
    name: 'tree: a symbolic link to a folder (loop)',
    run: () => gitTreeOutcome((d) => symlinkSync('..', join(d, 'cluster-addon/cni/up'))),
    reason: 'InvalidRelease',
    message: /cluster-addon\/cni\/up is a symbolic link/,
  },
  {
    name: 'tree: spec.source.path with ".." stays inside the repository',
    run: () => gitTreeOutcome(() => {}, '../../../etc'),
    reason: 'InvalidRelease',
    message: /no stack\.yaml/,
  },
  {
    name: 'tree: more files than the limit',
    run: () =>
      gitTreeOutcome(
        (d) => {
          for (let i = 0; i < 20; i++) writeFileSync(join(d, `cluster-addon/cni/f${i}.yaml`), `# ${i}\n`);
        },
        '',
        { maxFiles: 10, maxBytes: 1 << 20 },
      ),
    reason: 'InvalidRelease',
    message: /more than 10 files/,
  },
  {
    name: 'tree: an oversized file',
    run: () =>
      gitTreeOutcome((d) => writeFileSync(join(d, 'cluster-addon/cni/huge.yaml'), 'x'.repeat(200_000)), '', {
        maxFiles: 100,
        maxBytes: 100_000,
      }),
    reason: 'InvalidRelease',
    message: /more than the limit of 100000 bytes/,
  },

  // ---- task "target" (issue 22 row 7): a Cluster naming another namespace's ClusterClass
  {
    name: "Cluster: names another namespace's ClusterClass (classRef.namespace), not shared with it",
    run: () => foreignClassOutcome(undefined),
    reason: 'ClusterClassNotShared',
    message: /ClusterStack team\/ferrol serves Clusters of its own namespace only: namespace tenant-b/,
  },
  {
    name: "Cluster: names another namespace's ClusterClass whose selector does not select its Namespace",
    run: () => foreignClassOutcome({ matchLabels: { 'stackflux.io/tenant': 'shared' } }),
    reason: 'ClusterClassNotShared',
    message: /spec\.clusterNamespaceSelector .* does not select/,
  },
];

/** A Cluster of namespace tenant-b naming team's ClusterClass, team's ClusterStack with `selector`. */
function foreignClassOutcome(
  selector: ClusterStack['spec']['clusterNamespaceSelector'],
): Condition | undefined {
  const foreign = cluster({ topology: { classRef: { name: TAG, namespace: NS }, version: 'v1.30.4' } });
  foreign.metadata = { name: 'alpha', namespace: 'tenant-b', uid: 'uid-alpha' };
  const r = reconcileClusterAddon({
    cluster: foreign,
    namespace: 'tenant-b',
    name: 'alpha',
    clusterAddon: { ...clusterAddon, metadata: { ...clusterAddon.metadata, namespace: 'tenant-b' } },
    release: release(),
    tree: treeWith(),
    clusterStack: clusterStack({
      values: { cni: { mtu: 1500 } },
      ...(selector ? { clusterNamespaceSelector: selector } : {}),
    }),
    namespaceLabels: new Map([['tenant-b', { 'kubernetes.io/metadata.name': 'tenant-b' }]]),
    kustomizations: [],
    branch: undefined,
    fleetSettings: { url: 'https://git.example.com/fleet.git', branchPrefix: 'stackflux/' },
    templates,
    now,
  });
  assert.equal(r?.branch, undefined, 'nothing rendered onto the branch');
  return find(r?.status.conditions, 'Ready');
}

describe('bad-input corpus: every case ends in its condition reason, none throws', () => {
  it('has at least 40 cases with distinct names', () => {
    assert.ok(corpus.length >= 40, `${corpus.length} cases`);
    assert.equal(new Set(corpus.map((c) => c.name)).size, corpus.length);
  });
  for (const c of corpus) {
    it(`${c.name} → ${c.reason}`, async () => {
      const outcome = await c.run();
      assert.ok(outcome, 'a condition says what happened');
      assert.equal(outcome.reason, c.reason, outcome.message);
      assert.match(outcome.message ?? '', c.message);
    });
  }
});
