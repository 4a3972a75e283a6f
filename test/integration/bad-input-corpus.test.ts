// Issue 11: the bad-input corpus. Each case is hostile or broken input a user or a release author
// can produce, driven through the code the controllers run — the pure reconcilers (ClusterStack,
// ClusterStackRelease, ClusterAddon, with readRelease and the renderer they call) and, for release
// trees, readTreeFromGit on a Git repository the case builds — and each must end in a specific
// condition reason with a message naming what to fix, never a throw. Fixtures are generated here.
// (Needs no test environment: the Git cases use a local repository and the git binary.)
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join, posix } from 'node:path';
import { after, describe, it } from 'node:test';
import type { ClusterAddon } from '../../controller/api/clusteraddon.ts';
import { clusterRef } from '../../controller/api/clusterrefs.ts';
import type { ClusterStack } from '../../controller/api/clusterstack.ts';
import type { ClusterStackRelease, ReleaseImpact } from '../../controller/api/clusterstackrelease.ts';
import type { Condition } from '../../controller/api/meta.ts';
import { APPROVED_ANNOTATION, APPROVED_IMPACT_ANNOTATION } from '../../controller/api/rollout.ts';
import { BEFORE_CLUSTER_UPGRADE_PATH, DISCOVERY_PATH } from '../../controller/api/runtimehooks.ts';
import { main } from '../../controller/cli/main.ts';
import { fleetBackoffMs, refusedBranchFailure } from '../../controller/controllers/clusteraddon.ts';
import { failureForCondition } from '../../controller/controllers/clusterstackrelease.ts';
import { sourceReads, withListingDeadline } from '../../controller/controllers/sourcereads.ts';
import { narrowingBudget, pushNarrowing } from '../../controller/gitops/narrow.ts';
import { impactDigest } from '../../controller/reconcilers/approvedrender.ts';
import { FINALIZER_FLEET_CLEANUP, reconcileClusterAddon } from '../../controller/reconcilers/clusteraddon.ts';
import { reconcileClusterStack, type SourceListing } from '../../controller/reconcilers/clusterstack.ts';
import { reconcileClusterStackRelease } from '../../controller/reconcilers/clusterstackrelease.ts';
import { healthCheckProblem } from '../../controller/reconcilers/healthcheck.ts';
import { loadFluxTemplates } from '../../controller/releases/flux-templates.ts';
import { readReleaseDescription } from '../../controller/releases/format.ts';
import { readRelease } from '../../controller/releases/stack.ts';
import { parseReleaseTag } from '../../controller/releases/tags.ts';
import { releaseTree } from '../../controller/releases/tree.ts';
import { renderCsctlClusterClass } from '../../controller/rendering/clusterclass.ts';
import {
  RenderPool,
  type RenderPoolOptions,
  withBoundedGoEngine,
  withBoundedRenders,
} from '../../controller/rendering/index.ts';
import { realClock } from '../../controller/runtime/clock.ts';
import { configureEgress, parseEgressAllowList } from '../../controller/sources/egress.ts';
import { type GitCredentials, readTreeFromGit, SourceError } from '../../controller/sources/git.ts';
import { OciClient, sha256Digest } from '../../controller/sources/oci.ts';
import { SourcePollers } from '../../controller/sources/poller.ts';
import { releaseTreeFetcher, sourceTagLister } from '../../controller/sources/releasetree.ts';
import { MAX_BODY } from '../../controller/sources/webhook.ts';
import { readStackDir } from '../../hack/lib/stack-dir.ts';
import { nestedAll } from '../support/cel.ts';
import { type CraftedEntry, CraftedRepo } from '../support/crafted-tree.ts';
import { DrippingServer } from '../support/drip-server.ts';
import { startMetadataServer, startServer } from '../support/egress.ts';
import { HostileGitServer, HostileRegistry, invalidTags, longTags } from '../support/hostile-listing.ts';
import { OciFaultProxy } from '../support/oci-fault-proxy.ts';
import { hookOutcome, servingCertificate } from '../support/runtimehook.ts';
import { untilInFlight, unverifiedHeaders, webhookOutcome } from '../support/webhook.ts';

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
    refProblems?: string[];
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
    ...(o.refProblems !== undefined ? { refProblems: o.refProblems } : {}),
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

/**
 * Issue 31 F2: a source listed as the controller lists it (SourcePollers over sourceTagLister, the
 * OCI client and git ls-remote) from a hostile server that `start` makes on 127.0.0.1, fed to the
 * ClusterStack reconcile: its SourceReady condition.
 */
async function listedOutcome(
  start: () => Promise<{ url: string; stop: () => Promise<void> }>,
): Promise<{ reason: string; message: string }> {
  const server = await start();
  const pollers = new SourcePollers({
    lister: sourceTagLister({ oci: new OciClient() }),
    onChange: () => {},
  });
  try {
    const insecure = server.url.startsWith('oci://') ? { insecure: true } : {};
    pollers.subscribe('team/s', { url: server.url, namespace: NS, ...insecure, intervalMs: 3_600_000 });
    await pollers.idle();
    const r = reconcileClusterStack({
      clusterStack: clusterStack(),
      listing: pollers.listing('team/s'),
      releases: [],
      clusters: [],
      now,
    });
    const c = find(r.status.conditions, 'SourceReady');
    return { reason: c?.reason ?? '(none)', message: c?.message ?? '' };
  } finally {
    pollers.stop();
    await server.stop();
  }
}

/** A HostileRegistry whose one repository lists `page(i)`, as listedOutcome wants it. */
async function hostileRegistry(page: (i: number) => string[] | undefined) {
  const r = await HostileRegistry.start({ page });
  return { url: r.url('stacks'), stop: () => r.stop() };
}

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
    name: 'source: an OCI registry listing pages of 1 MB tags (150 MB in all)',
    run: () =>
      listedOutcome(() => hostileRegistry((i) => (i < 50 ? longTags(3, 1_000_000, 3 * i) : undefined))),
    reason: 'ListingTooLarge',
    message: /oci:\/\/127\.0\.0\.1:\d+\/stacks: the listing is more than 4194304 bytes/,
  },
  {
    name: 'source: an OCI registry listing half a million strings that are not tags, and a release',
    run: () =>
      listedOutcome(() => hostileRegistry((i) => (i === 0 ? [...invalidTags(500_000), TAG] : undefined))),
    reason: 'Listed',
    message:
      /1 releases of this stack, 0 malformed \(500000 tags that are not release tags were counted, not kept\)/,
  },
  {
    name: 'source: a Git server advertising 30 MB of long refs that are no release tags',
    run: () =>
      listedOutcome(async () => {
        const g = await HostileGitServer.start(function* () {
          yield `refs/tags/${TAG}`;
          for (let i = 0; i < 500; i++) yield `refs/tags/build-${'x'.repeat(60_000)}-${i}`;
        });
        return { url: g.url, stop: () => g.stop() };
      }),
    reason: 'ListingTooLarge',
    message: /hostile\.git: the listing is more than 4194304 bytes/,
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
  // issue 31 F6/F10: a ref the tenant points at a Secret, a ConfigMap or another namespace is
  // refused by the shared rule (api/clusterrefs.ts) before anything is read, as the controller does
  ...[
    {
      what: 'a core Secret',
      ref: { apiVersion: 'v1', kind: 'Secret', name: 'db-creds' },
      why: /never to built-in kinds/,
    },
    {
      what: 'a ConfigMap (v1beta2 apiGroup "")',
      ref: { apiGroup: '', kind: 'ConfigMap', name: 'cm' },
      why: /never to built-in kinds/,
    },
    {
      what: 'another namespace',
      ref: {
        apiGroup: 'infrastructure.cluster.x-k8s.io',
        kind: 'DockerCluster',
        name: 'x',
        namespace: 'kube-system',
      },
      why: /names namespace "kube-system": refs are resolved in the Cluster's own namespace only/,
    },
  ].map(({ what, ref, why }) => ({
    name: `Cluster: infrastructureRef to ${what}`,
    run: () => {
      const c = cluster({ infrastructureRef: ref });
      const followed = clusterRef(c as Parameters<typeof clusterRef>[0], 'infrastructureRef');
      return addonOutcome({ cluster: c, refProblems: followed?.ok === false ? [followed.problem] : [] });
    },
    reason: 'RefsNotReadable',
    message: why,
  })),
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

  // ---- celhook (issue 22 rows 5 and 9): costly CEL health checks; the webhook before its body --
  {
    name: 'rollout: six nested .all over 20 items in the health check',
    run: async () => healthCheckProblem(nestedAll(6)) ?? { reason: '(none)', message: '' },
    reason: 'HealthCheckTooCostly',
    message: /healthCheck\.expression .*more than the limit of 1000000/,
  },
  {
    name: 'rollout: a backtracking regular expression in the health check',
    run: async () =>
      healthCheckProblem('cluster.metadata.name.matches("^(a+)+$")') ?? { reason: '(none)', message: '' },
    reason: 'InvalidHealthCheck',
    message: /matches\(\) is not allowed/,
  },
  {
    name: 'webhook: no signature and no token, body never sent',
    run: () =>
      webhookOutcome({}, (post) =>
        post({ 'content-type': 'application/json', 'content-length': String(MAX_BODY) }),
      ),
    reason: 'HTTP 401',
    message: /invalid signature or token/,
  },
  {
    name: 'webhook: a malformed signature header, body never sent',
    run: () =>
      webhookOutcome({}, (post) =>
        post({ ...unverifiedHeaders(MAX_BODY), 'x-hub-signature-256': 'sha1=abc' }),
      ),
    reason: 'HTTP 401',
    message: /invalid signature or token/,
  },
  {
    name: 'webhook: a body that is not JSON, never sent',
    run: () =>
      webhookOutcome({}, (post) => post({ ...unverifiedHeaders(MAX_BODY), 'content-type': 'text/plain' })),
    reason: 'HTTP 415',
    message: /application\/json/,
  },
  {
    name: 'webhook: Content-Length over 1 MiB, body never sent',
    run: () => webhookOutcome({}, (post) => post(unverifiedHeaders(64 * MAX_BODY))),
    reason: 'HTTP 413',
    message: /body too large/,
  },
  {
    name: 'webhook: a body that stalls (slowloris)',
    run: () => webhookOutcome({ bodyTimeoutMs: 500 }, (post) => post(unverifiedHeaders(1000), '{"url":')),
    reason: 'HTTP 408',
    message: /body not received within 500 ms/,
  },
  {
    name: 'webhook: unverified bodies past the in-flight cap',
    run: () =>
      webhookOutcome({ maxInFlight: 4 }, async (post, server) => {
        // Three stall (the unverified share of 4); their answers only come at the body deadline.
        for (let i = 0; i < 3; i++) void post(unverifiedHeaders(1000), '{');
        await untilInFlight(server, 3);
        return post(unverifiedHeaders(1000), '{');
      }),
    reason: 'HTTP 503',
    message: /too many webhook requests/,
  },
  // ---- issue 22 row 6 (task "fleet"): rendered content the fleet host refuses ----
  {
    name: 'fleet: the host refuses one Cluster branch of a batch (pre-receive hook)',
    run: () => fleetRefusedOutcome(),
    reason: 'FleetPushRejected',
    message:
      /fleet branch stackflux\/team\/alpha failed.*pre-receive hook declined: push rule: refs\/heads\/stackflux\/team\/alpha holds refused-by-host.*stays at its previous commit/,
  },
  // ---- issue 22, task "render": huge values and heap bombs (rows 4, 8, 10) ----
  ...(() => {
    const MiB = 1024 * 1024;
    /** cni as a Helm addon whose values.yaml.hbs writes `chunk` once per item (no schema). */
    const helmTree = treeWith({
      'cluster-addon/cni/config.yaml.hbs': undefined,
      'cluster-addon/cni/values.schema.json': undefined,
      'cluster-addon/cni/Chart.yaml': 'apiVersion: v2\nname: cni\nversion: 1.0.0\n',
      'cluster-addon/cni/values.yaml.hbs': 'big: "{{#each Values.items}}{{@root.Values.chunk}}{{/each}}"\n',
    });
    /** Central values of cni: `items` copies of a value just under the helper limit. */
    const copies = (items: number) => ({
      values: { cni: { items: Array.from({ length: items }, (_, i) => i), chunk: 'x'.repeat(4 * MiB - 16) } },
    });
    /** The ClusterAddon reconcile with its renders in `pool`, as the controller runs it. */
    const pooled = async (
      pool: RenderPool,
      tree: ReadonlyMap<string, string>,
      stack: Partial<ClusterStack['spec']> = {},
    ) => {
      const r = await withBoundedRenders(
        pool,
        (render) =>
          reconcileClusterAddon({
            cluster: cluster(),
            namespace: NS,
            name: 'alpha',
            clusterAddon,
            release: release(),
            tree,
            treeCommit: 'c'.repeat(40),
            clusterStack: clusterStack(stack),
            kustomizations: [],
            branch: undefined,
            fleetSettings: { url: 'https://git.example.com/fleet.git', branchPrefix: 'stackflux/' },
            templates,
            now,
            render,
          }),
        new Map(),
        { namespace: NS },
      );
      const ready = find(r?.status.conditions, 'Ready');
      return { reason: ready?.reason ?? '', message: ready?.message ?? '' };
    };
    const withPool = async <T>(opts: RenderPoolOptions, fn: (pool: RenderPool) => Promise<T>) => {
      const pool = new RenderPool(opts);
      try {
        return await fn(pool);
      } finally {
        await pool.close();
      }
    };
    const cases: Case[] = [
      {
        name: 'render: a Helm values.yaml.hbs rendering a 343 MB scalar',
        run: () => addonOutcome({ tree: helmTree, stack: copies(86) }),
        reason: 'RenderFailed',
        message:
          /cluster-addon\/cni\/values\.yaml\.hbs \(rendered\): the addon's output exceeds the limit of 8 MiB \(--render-max-output\)/,
      },
      {
        name: 'render: central values over the output cap',
        run: () =>
          addonOutcome({
            tree: treeWith({ 'cluster-addon/cni/values.schema.json': undefined }),
            stack: { values: { cni: { mtu: 1450, blob: 'b'.repeat(9 * MiB) } } },
          }),
        reason: 'RenderFailed',
        message: /merged values of addon "cni": the addon's output exceeds the limit of 8 MiB/,
      },
      {
        name: 'render: a heap bomb (a 480 MB rope flattened) in the render pool',
        run: () =>
          // A time budget far above what the bomb needs: the memory limit is what is tested, and on a
          // busy machine the default 5 s was reached first (CI, two test files at once).
          withPool({ workers: 1, maxMemoryMb: 128, maxOutputBytes: 1024 * MiB, timeoutMs: 120_000 }, (pool) =>
            pooled(pool, helmTree, copies(120)),
          ),
        reason: 'RenderFailed',
        message:
          /cluster-addon\/cni\/values\.yaml\.hbs: rendering needs more than the memory limit of 128 MiB \(--render-max-memory\)/,
      },
      {
        name: 'render: a template that keeps hitting the time budget cools down',
        run: () =>
          withPool({ workers: 1, timeoutMs: 200, coolDownAfter: 1 }, async (pool) => {
            const each = '{{#each Values.items}}';
            const tree = treeWith({
              'cluster-addon/cni/values.schema.json': undefined,
              'cluster-addon/cni/values.yaml': `mtu: 1450\nitems: [${Array.from({ length: 100 }, (_, i) => i).join(',')}]\n`,
              'cluster-addon/cni/loop.yaml.hbs': `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: loop\ndata:\n  x: "${each.repeat(4).replaceAll('Values.', '@root.Values.')}{{/each}}{{/each}}{{/each}}{{/each}}"\n`,
            });
            const first = await pooled(pool, tree);
            assert.match(first.message, /time budget of 200ms \(--render-timeout\)/);
            return pooled(pool, tree);
          }),
        reason: 'RenderCoolingDown',
        message: /not rendered until .*: its renders hit a limit 1 times in a row, last: .*--render-timeout/,
      },
    ];
    return cases;
  })(),
  // ---- issue 22 (rights): remote Helm charts a release author points anywhere ----
  ...chartCases(),
  // ---- issue 22, task "tree": hostile release tree paths (built with git mktree; git add refuses them)
  ...(
    [
      [
        'an entry named ".." (would write outside the cache)',
        (r) => [r.dir('..', [r.dir('..', [r.file('.gitconfig', '[x]\n')])])],
        /"\.\.\/\.\.\/\.gitconfig" has a "\.\." component/,
      ],
      [
        'a ".git" folder',
        (r) => [r.dir('cluster-addon', [r.dir('cni', [r.dir('.git', [r.file('config', 'x')])])])],
        /"cluster-addon\/cni\/\.git\/config" has a "\.git" component/,
      ],
      [
        'a ".GIT" folder (any case)',
        (r) => [r.dir('.GIT', [r.file('hooks.yaml', 'x')])],
        /"\.GIT\/hooks\.yaml" has a "\.GIT" component/,
      ],
      [
        'an entry named "."',
        (r) => [r.dir('.', [r.file('stack.yaml', 'x')])],
        /"\.\/stack\.yaml" has a "\." component/,
      ],
      ['a backslash in a name', (r) => [r.file('..\\..\\x.yaml', 'x')], /backslash/],
    ] as Array<[string, (r: CraftedRepo) => CraftedEntry[], RegExp]>
  ).map(
    ([name, build, message], i): Case => ({
      name: `tree: ${name}`,
      run: () => {
        const repo = new CraftedRepo(join(work, `crafted-${i}`));
        return repo.readOutcome([repo.file('stack.yaml', STACK), ...build(repo)]);
      },
      reason: 'InvalidRelease',
      message,
    }),
  ),
  {
    name: 'ClusterAddon: an addon file under .GIT (a fleet path a fsck-ing Git host refuses)',
    run: () =>
      addonOutcome({ tree: treeWith({ 'cluster-addon/cni/.GIT/config.yaml': 'kind: ConfigMap\n' }) }),
    reason: 'RenderFailed',
    message:
      /cluster-addon\/cni\/\.GIT\/config\.yaml: cannot be a fleet file: path "cni\/\.GIT\/config\.yaml" has a "\.GIT" component/,
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
  // ---- issue 23 (task "hook"): Cluster API's BeforeClusterUpgrade runtime extension ----
  ...(() => {
    const cert = servingCertificate(join(work, 'hook-cert'));
    /** A lookup that must not be reached by a request refused before it. */
    const never = {
      stageOf: async () => {
        throw new Error('the lookup was reached');
      },
    };
    const json = (body: string) => ({ 'content-length': String(Buffer.byteLength(body)) });
    const upgrade = (cluster: unknown, extra: Record<string, unknown> = {}) =>
      JSON.stringify({
        apiVersion: 'hooks.runtime.cluster.x-k8s.io/v1alpha1',
        kind: 'BeforeClusterUpgradeRequest',
        cluster,
        fromKubernetesVersion: 'v1.30.4',
        toKubernetesVersion: 'v1.31.2',
        ...extra,
      });
    const send = (path: string, body: string, headers: Record<string, string> = json(body)) =>
      hookOutcome(cert, never, {}, (post) => post(path, headers, body));
    return [
      {
        name: 'hook: a body that is not JSON',
        run: () => send(BEFORE_CLUSTER_UPGRADE_PATH, '{"cluster": {"metadata":'),
        reason: 'HTTP 200 Failure',
        message: /error unmarshalling request/,
      },
      {
        name: 'hook: a Cluster name that walks out of its namespace',
        run: () =>
          send(
            BEFORE_CLUSTER_UPGRADE_PATH,
            upgrade({ metadata: { name: '../kube-system/c1', namespace: 'team' } }),
          ),
        reason: 'HTTP 200 Failure',
        message: /cluster\.metadata\.name is not a Kubernetes object name/,
      },
      {
        name: 'hook: a version carrying a header line',
        run: () =>
          send(
            BEFORE_CLUSTER_UPGRADE_PATH,
            upgrade(
              { metadata: { name: 'c1', namespace: 'team' } },
              { toKubernetesVersion: 'v1.31\r\nX: y' },
            ),
          ),
        reason: 'HTTP 200 Failure',
        message: /toKubernetesVersion must be a Kubernetes version/,
      },
      {
        name: 'hook: Content-Length over 2 MiB, body never sent',
        run: () => send(BEFORE_CLUSTER_UPGRADE_PATH, '', { 'content-length': String(64 << 20) }),
        reason: 'HTTP 413',
        message: /body too large: at most 2097152 bytes/,
      },
      {
        name: 'hook: a hook stackflux does not serve',
        run: () => send('/hooks.runtime.cluster.x-k8s.io/v1alpha1/aftercontrolplaneinitialized/x', '{}'),
        reason: 'HTTP 404',
        message: /not found/,
      },
      {
        name: 'hook: a discovery body that stalls (slowloris)',
        run: () =>
          hookOutcome(cert, never, { bodyTimeoutMs: 500 }, (post) =>
            post(DISCOVERY_PATH, { 'content-length': '1000' }, '{'),
          ),
        reason: 'HTTP 408',
        message: /body not received within 500 ms/,
      },
      {
        name: 'hook: lookups that hang, past the in-flight cap',
        run: () =>
          hookOutcome(
            cert,
            { stageOf: () => new Promise<never>(() => undefined) },
            { maxInFlight: 2 },
            async (post, server) => {
              const body = upgrade({
                metadata: { name: 'c1', namespace: 'team' },
                spec: { topology: { classRef: { name: TAG } } },
              });
              // Two calls wait in the lookup and hold their slots; the third finds none.
              void post(BEFORE_CLUSTER_UPGRADE_PATH, json(body), body);
              void post(BEFORE_CLUSTER_UPGRADE_PATH, json(body), body);
              await untilInFlight(server, 2);
              return post(BEFORE_CLUSTER_UPGRADE_PATH, json(body), body);
            },
          ),
        reason: 'HTTP 503',
        message: /too many runtime extension requests in flight/,
      },
    ];
  })(),
  // ---- issue 23: a csctl cluster-class (a Helm chart) rendering what it must not ----
  ...csctlClassCases(),
  // ---- issue 31 F8: `stackflux convert` of a tenant's terminal escapes and a Secret's credentials
  {
    name: 'convert: terminal escapes in a ClusterStack, credentials in an OCI_REPOSITORY from a Secret',
    run: async () => {
      let err = '';
      const code = await main(
        ['convert', '-f', join(import.meta.dirname, '../unit/convert/corpus/hostile-values/input.yaml')],
        { stdout: () => undefined, stderr: (t) => (err += t), env: {} },
      );
      assert.ok(![...err].some((c) => c !== '\n' && (c < ' ' || (c >= '\u007f' && c <= '\u009f'))), err);
      assert.ok(!err.includes('SECRETPW'), 'a credential from a Secret on stderr');
      return { reason: `exit ${code}`, message: err };
    },
    reason: 'exit 2',
    message:
      /spec\.name "x\\u001b\[2J.*OCI_REPOSITORY \(the value of Secret cso-system\/registry-login key repository\)/s,
  },
  ...egressCases(),
  // ---- issue 31 F5/F11: slow sources end at their total deadline ----
  ...slowSourceCases(),
  // ---- issue 31 (F4): a divergent preview; an approval of another impact ----
  {
    name: 'divergent preview: a template branching on the resourceVersion the live Cluster shows',
    run: () =>
      moveOutcome({
        tree: treeWith({
          'cluster-addon/cni/escalation.yaml.hbs':
            '{{#if Cluster.metadata.resourceVersion}}apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: x\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\n{{/if}}',
        }),
        previewed: 'live-equals-preview',
      }),
    reason: 'FleetSyncPending',
    message: /waiting for the commit to fleet branch/,
  },
  {
    name: 'divergent preview: a live render other than the one the approved impact recorded',
    run: () => moveOutcome({ previewed: 'sha256:what-the-preview-showed' }),
    reason: 'RenderDiffersFromApproved',
    message:
      /live render \(sha256:[0-9a-f]{64}\) differs from the one its impact .* recorded \(sha256:what-the-preview-showed\)/,
  },
  {
    name: 'divergent preview: approving an older impact of the release',
    run: () => moveOutcome({ previewed: 'live-equals-preview', approvedImpact: 'sha256:an-older-impact' }),
    reason: 'WaitingForApproval',
    message: /rollout\.stackflux\.io\/approved-impact: sha256:[0-9a-f]{32}/,
  },
];

/**
 * Cluster alpha moving from v0 to TAG, the rollout target of a Progressive stack requiring approval,
 * in the live controller (holdUnapproved). The impact recorded `previewed` for alpha
 * ('live-equals-preview': the digest this very render has, as an impact that previewed it would);
 * approved: `approvedImpact` (default the impact's own digest).
 */
function moveOutcome(o: { tree?: ReadonlyMap<string, string>; previewed: string; approvedImpact?: string }) {
  const tree = o.tree ?? treeWith();
  const served = {
    ...cluster(),
    metadata: { name: 'alpha', namespace: NS, uid: 'uid-alpha', resourceVersion: '4711', generation: 2 },
  };
  const input = (r: ClusterStackRelease) => ({
    cluster: served,
    namespace: NS,
    name: 'alpha',
    clusterAddon: { ...clusterAddon, status: { release: 'docker-ferrol-1-30-v0' } },
    release: r,
    tree,
    treeCommit: 'c'.repeat(40),
    clusterStack: {
      ...clusterStack({ rollout: { strategy: 'Progressive' as const, requireApproval: {} } }),
      status: { latestRelease: TAG },
    },
    kustomizations: [],
    branch: undefined,
    fleetSettings: { url: 'https://git.example.com/fleet.git', branchPrefix: 'stackflux/' },
    templates,
    now,
    holdUnapproved: true,
  });
  // The preview's side: the same reconcile, not bound to an impact, gives the digest it records.
  const digest = reconcileClusterAddon({ ...input(release()), holdUnapproved: false })?.renderDigest ?? '';
  const recorded = o.previewed === 'live-equals-preview' ? digest : o.previewed;
  const i: ReleaseImpact = {
    commit: 'c'.repeat(40),
    computedAt: 't',
    clusters: 1,
    renders: { [`${NS}/alpha`]: recorded },
  };
  const impact = { ...i, digest: impactDigest(i) };
  const r: ClusterStackRelease = {
    ...release(),
    metadata: {
      ...release().metadata,
      annotations: {
        [APPROVED_ANNOTATION]: TAG,
        [APPROVED_IMPACT_ANNOTATION]: o.approvedImpact ?? impact.digest,
      },
    },
    status: { commit: 'c'.repeat(40), impact },
  };
  const result = reconcileClusterAddon(input(r));
  if (result?.branch !== undefined) {
    const text = [...(result.branch.files ?? new Map()).values()].join('\n');
    assert.doesNotMatch(text, /ClusterRoleBinding/, 'the live render sees no resourceVersion');
  }
  const conditions = result?.status.conditions;
  const ready = find(conditions, 'Ready');
  return ready?.status === 'Unknown' ? (find(conditions, 'Reconciling') ?? ready) : ready;
}

/**
 * A batch of 12 branches whose push the host refuses as a whole while it holds alpha's branch
 * (the answer of receive-pack behind a pre-receive hook): the narrowing singles alpha out, and
 * alpha's ClusterAddon gets the refusal with the host's words. The others must all have landed.
 */
async function fleetRefusedOutcome(): Promise<{ reason: string; message: string }> {
  const bad = 'stackflux/team/alpha';
  const batch = [...Array.from({ length: 11 }, (_, i) => `stackflux/team/c${i}`), bad];
  const landed: string[] = [];
  const narrowed = await pushNarrowing(
    [batch],
    async (branches) => {
      if (!branches.includes(bad)) {
        landed.push(...branches);
        return { results: new Map(branches.map((b) => [b, undefined])), message: '' };
      }
      return {
        results: new Map(branches.map((b) => [b, 'pre-receive hook declined'])),
        message: `push rule: refs/heads/${bad} holds refused-by-host`,
      };
    },
    narrowingBudget(batch.length),
  );
  assert.deepEqual(landed.sort(), batch.filter((b) => b !== bad).sort(), 'the other branches landed');
  const hostReason = narrowed.refused.get(bad);
  assert.ok(hostReason !== undefined && narrowed.refused.size === 1 && narrowed.deferred.length === 0);
  const r = reconcileClusterAddon({
    cluster: cluster(),
    namespace: NS,
    name: 'alpha',
    clusterAddon,
    release: release(),
    tree: treeWith(),
    treeCommit: 'c'.repeat(40),
    clusterStack: clusterStack(),
    kustomizations: [],
    branch: undefined,
    fleetSettings: { url: 'https://git.example.com/fleet.git', branchPrefix: 'stackflux/' },
    fleetFailure: refusedBranchFailure(hostReason, fleetBackoffMs(2_000, 1)),
    templates,
    now,
  });
  const ready = find(r?.status.conditions, 'Ready');
  return { reason: ready?.reason ?? '(none)', message: ready?.message ?? '' };
}

/** Issue 22 (rights): a stack.yaml whose one addon is a remote chart `chart` from `repository`. */
function chartTree(chart: string, repository: string): Map<string, string> {
  return treeWith({
    'stack.yaml': `${STACK}  - name: web\n    chart: ${JSON.stringify(chart)}\n    version: 1.0.0\n    repository: ${JSON.stringify(repository)}\n`,
  });
}

function chartCases(): Case[] {
  const allowlisted = (tree: ReadonlyMap<string, string>): Condition | undefined => {
    const parsed = parseReleaseTag(TAG);
    assert.ok(parsed.ok);
    const r = reconcileClusterStackRelease({
      release: release(),
      stack: readRelease(tree, parsed.value),
      commit: 'c'.repeat(40),
      clusters: [],
      tenancy: { allowedChartHosts: ['charts.example.com'] },
      templates,
      now,
    });
    return find(r.status.conditions, 'Ready');
  };
  const repositoryError =
    /addons\[1\] \(web\)\.repository .* must be an https:\/\/ \(Helm repository\) or oci:\/\//;
  return [
    {
      name: 'chart: an OCI repository path walking to the registry catalog',
      run: () =>
        releaseOutcome(chartTree('web', 'oci://registry.kube-system.svc:5000/charts/../../v2/_catalog')),
      reason: 'InvalidRelease',
      message: repositoryError,
    },
    {
      name: 'chart: a chart name walking up the OCI path',
      run: () => releaseOutcome(chartTree('../../v2/_catalog', 'oci://registry.example.com/charts')),
      reason: 'InvalidRelease',
      message: /addons\[1\] \(web\)\.chart "\.\.\/\.\.\/v2\/_catalog" must be a DNS-1123 label/,
    },
    {
      name: 'chart: a plain http:// Helm repository',
      run: () => releaseOutcome(chartTree('web', 'http://charts.example.com')),
      reason: 'InvalidRelease',
      message: repositoryError,
    },
    {
      name: 'chart: credentials in the repository URL',
      run: () => releaseOutcome(chartTree('web', 'https://admin:pw@charts.example.com')),
      reason: 'InvalidRelease',
      message: repositoryError,
    },
    {
      name: 'chart: an internal host outside --allowed-chart-hosts (release)',
      run: () => allowlisted(chartTree('web', 'oci://registry.kube-system.svc:5000/charts')),
      reason: 'InvalidRelease',
      message: /host registry\.kube-system\.svc is not in --allowed-chart-hosts \(charts\.example\.com\)/,
    },
    {
      name: 'chart: an internal host outside --allowed-chart-hosts (ClusterAddon)',
      run: () => {
        const r = reconcileClusterAddon({
          cluster: cluster(),
          namespace: NS,
          name: 'alpha',
          clusterAddon,
          release: release(),
          tree: chartTree('web', 'https://10.0.0.1/charts'),
          treeCommit: 'c'.repeat(40),
          clusterStack: clusterStack(),
          kustomizations: [],
          branch: undefined,
          fleetSettings: { url: 'https://git.example.com/fleet.git', branchPrefix: 'stackflux/' },
          tenancy: { allowedChartHosts: ['charts.example.com'] },
          templates,
          now,
        });
        return find(r?.status.conditions, 'Ready');
      },
      reason: 'InvalidRelease',
      message:
        /addons\[1\] \(web\)\.repository "https:\/\/10\.0\.0\.1\/charts": host 10\.0\.0\.1 is not in --allowed-chart-hosts/,
    },
  ];
}

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

// ---- issue 23: a csctl cluster-class (a Helm chart) rendering what it must not ------------------
/**
 * stacks/docker-csoferrol-1-30 with cluster-class files added, rendered as the live controller
 * renders it (withBoundedGoEngine in a render pool under `limits`) and fed to the release reconcile
 * as the controller feeds it: the release's Ready condition.
 */
function csctlClassCases(): Case[] {
  const CSO_TAG = 'docker-csoferrol-1-30-v1';
  const base = readStackDir(join(import.meta.dirname, '..', '..', 'stacks', 'docker-csoferrol-1-30'));
  const outcome = async (
    files: Record<string, string>,
    limits: RenderPoolOptions = { workers: 1 },
  ): Promise<{ reason: string; message: string }> => {
    const tree = releaseTree(new Map([...base, ...Object.entries(files)]), base.binary);
    const parsed = parseReleaseTag(CSO_TAG);
    assert.ok(parsed.ok);
    const description = readReleaseDescription(tree, parsed.value);
    assert.ok(description.ok, JSON.stringify(description));
    const pool = new RenderPool(limits);
    try {
      const rendering = await withBoundedGoEngine(
        pool,
        (engine) =>
          renderCsctlClusterClass(engine, {
            tree,
            description: description.value,
            tag: CSO_TAG,
            namespace: NS,
          }),
        { namespace: NS },
      );
      assert.ok(!rendering.ok, 'the hostile chart is refused');
      const r = reconcileClusterStackRelease({
        release: release(CSO_TAG),
        stack: description,
        renderedClass: rendering,
        commit: 'c'.repeat(40),
        clusters: [],
        templates,
        now,
      });
      assert.equal(r.kustomization, undefined, 'nothing applied');
      const ready = find(r.status.conditions, 'Ready');
      return { reason: ready?.reason ?? '', message: ready?.message ?? '' };
    } finally {
      await pool.close();
    }
  };
  return [
    {
      name: 'csctl cluster-class: a chart rendering a ClusterRoleBinding',
      run: () =>
        outcome({
          'cluster-class/templates/rbac.yaml':
            'apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: {{ .Release.Name }}-admin\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: cluster-admin\nsubjects:\n  - kind: ServiceAccount\n    name: default\n    namespace: {{ .Release.Namespace }}\n',
        }),
      reason: 'InvalidRelease',
      message:
        /cluster-class\/templates\/rbac\.yaml: ClusterRoleBinding docker-csoferrol-1-30-admin is cluster-scoped; a cluster-class may only hold objects of the ClusterStack's namespace team/,
    },
    {
      name: 'csctl cluster-class: a chart rendering an object into another namespace',
      run: () =>
        outcome({
          'cluster-class/templates/elsewhere.yaml':
            'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: planted\n  namespace: kube-system\ndata:\n  x: "1"\n',
        }),
      reason: 'InvalidRelease',
      message: /cluster-class\/templates\/elsewhere\.yaml: ConfigMap planted is in namespace kube-system/,
    },
    {
      name: 'csctl cluster-class: a template that never ends hits the time budget',
      run: () =>
        outcome(
          {
            'cluster-class/templates/forever.yaml':
              '{{- range until 100000 }}{{- range until 100000 }}{{- range until 100000 }}{{- end }}{{- end }}{{- end }}\n',
          },
          { workers: 1, timeoutMs: 2000 },
        ),
      reason: 'LimitExceeded',
      message: /cluster-class\/ \(helm template docker-csoferrol-1-30\): .*2s \(--render-timeout\)/,
    },
  ];
}

// ---- issue 31 F1, F12: where a tenant's source makes the controller send requests ---------------
/**
 * The real source clients against small servers of a tenant's on 127.0.0.1 (allowed, as the test
 * environment allows it) naming a fake metadata endpoint on 127.0.0.2 (not allowed): the error the
 * ClusterStack's SourceReady carries (test/e2e/egress.test.ts shows it there).
 */
function egressCases(): Case[] {
  const outcome = async (
    attempt: (registryHost: string) => Promise<unknown>,
    answer: Handler,
  ): Promise<{ reason: string; message: string }> => {
    configureEgress(parseEgressAllowList('127.0.0.1/32'));
    const metadata = await startMetadataServer();
    const registry = await startServer((req, res) => answer(req, res, metadata.url));
    try {
      const err = await attempt(new globalThis.URL(registry.url).host).then(
        () => assert.fail('the request went through'),
        (e: unknown) => e,
      );
      assert.ok(err instanceof SourceError, String(err));
      assert.deepEqual(metadata.requests, [], 'the metadata endpoint got a request');
      return { reason: err.reason, message: err.message };
    } finally {
      await registry.close();
      await metadata.close();
    }
  };
  type Handler = (req: IncomingMessage, res: ServerResponse, metadataUrl: string) => void;
  const realm =
    (at: (metadataUrl: string) => string): Handler =>
    (_req, res, metadataUrl) =>
      res.writeHead(401, { 'www-authenticate': `Bearer realm="${at(metadataUrl)}",service="r"` }).end();
  const listOci = (host: string, creds?: GitCredentials) =>
    sourceTagLister({ oci: new OciClient() })(`oci://${host}/scs/stacks`, creds, { insecure: true });
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      artifactType: 'application/vnd.scs.cluster-stacks.v1',
      layers: [
        {
          digest: `sha256:${'e'.repeat(64)}`,
          size: 1,
          annotations: { 'org.opencontainers.image.title': 'metadata.yaml' },
        },
      ],
    }),
  );
  const manifestDigest = sha256Digest(manifest);
  return [
    {
      name: 'OCI source: a Bearer realm on a loopback address the platform does not allow',
      run: () =>
        outcome(
          listOci,
          realm((m) => `${m}/latest/meta-data/iam/security-credentials/`),
        ),
      reason: 'EgressRefused',
      message:
        /the token realm http:\/\/127\.0\.0\.2:\d+: 127\.0\.0\.2 is a loopback address, not in --allow-source-networks/,
    },
    {
      name: 'OCI source: a Bearer realm on the cloud metadata address',
      run: () =>
        outcome(
          listOci,
          realm(() => 'http://169.254.169.254/latest/meta-data/'),
        ),
      reason: 'EgressRefused',
      message: /169\.254\.169\.254 is a link-local address, not in --allow-source-networks/,
    },
    {
      name: 'OCI source: a Bearer realm named by a cluster-internal name',
      run: () =>
        outcome(
          listOci,
          realm(() => 'http://kubelet.kube-system.svc:10250/pods'),
        ),
      reason: 'EgressRefused',
      message: /kubelet\.kube-system\.svc is a cluster-internal \(\*\.svc\) name/,
    },
    {
      name: 'OCI source: a blob redirected (over plain http) to the metadata endpoint',
      run: () =>
        outcome(
          (host) =>
            new OciClient().fetchAssets(`oci://${host}/scs/stacks`, manifestDigest, undefined, {
              insecure: true,
            }),
          (req, res, metadataUrl) => {
            if (req.url?.includes('/manifests/')) return res.writeHead(200).end(manifest);
            res.writeHead(307, { location: `${metadataUrl}/latest/meta-data/` }).end();
          },
        ),
      reason: 'InsecureSource',
      message: /blob sha256:e{64} redirects over plain http; not following it/,
    },
    {
      name: 'Git source: a repository URL on the cloud metadata address',
      run: () =>
        outcome(
          () => sourceTagLister({})('https://169.254.169.254/tenant/stacks.git', undefined),
          (_req, res) => res.writeHead(404).end(),
        ),
      reason: 'EgressRefused',
      message: /169\.254\.169\.254 is a link-local address, not in --allow-source-networks/,
    },
    {
      name: 'OCI source: insecure, with a tenant Secret that does not allow plain http',
      run: () =>
        outcome(
          (host) => listOci(host, { username: 'u', password: 'p', secret: `${NS}/registry` }),
          (_req, res) => res.writeHead(404).end(),
        ),
      reason: 'PlainHttpNotAllowed',
      message: /Secret team\/registry is not labelled stackflux\.io\/allow-plain-http: "true"/,
    },
  ];
}

// ---- issue 31 F5/F11: slow sources end at their total deadline ------------------------------------
/** Short deadlines so the corpus stays quick; the flags' defaults are minutes. */
const SLOW_DEADLINE_MS = 1500;

/**
 * A release tree read in the background as the release controller reads it, from a source that
 * never finishes: the release's Ready condition once the read has failed at its deadline.
 */
async function slowTreeOutcome(
  source: {
    url: string;
    insecure?: boolean;
  },
  commit: string,
): Promise<{ reason: string; message: string }> {
  const reads = sourceReads({ treeTimeoutMs: SLOW_DEADLINE_MS }, realClock, () => undefined);
  const fetchTree = releaseTreeFetcher({ oci: new OciClient() });
  const job = {
    key: `${source.url}\n${commit}`,
    namespace: NS,
    what: `reading tag ${TAG} of ${source.url}`,
    read: (signal: AbortSignal) =>
      fetchTree(source, TAG, commit, join(work, 'slow-cache'), undefined, signal),
  };
  const woken = new Promise<void>((resolve) => reads.trees.request(job, { id: 'r', wake: resolve }));
  await woken;
  const got = reads.trees.request(job);
  assert.equal(got.state, 'failed');
  const r = reconcileClusterStackRelease({
    release: release(),
    ...(got.state === 'failed' ? { fetchFailure: failureForCondition(got.error) } : {}),
    commit,
    clusters: [],
    templates,
    now,
  });
  const ready = find(r.status.conditions, 'Ready');
  return { reason: ready?.reason ?? '(none)', message: ready?.message ?? '' };
}

function slowSourceCases(): Case[] {
  const drip = new DrippingServer();
  let registry: OciFaultProxy | undefined;
  const hangingRegistry = async (): Promise<OciFaultProxy> => {
    // Never answers: nothing behind it is asked.
    registry ??= await OciFaultProxy.start('http://127.0.0.1:9');
    registry.set('hang');
    return registry;
  };
  let started: Promise<void> | undefined;
  const dripping = async (): Promise<DrippingServer> => {
    started ??= drip.start();
    await started;
    return drip;
  };
  after(async () => {
    if (started !== undefined) await drip.stop();
    await registry?.stop();
  });
  return [
    {
      name: 'source: a Git server dripping a release tree (10 bytes/s, above git low-speed limit)',
      run: async () => slowTreeOutcome({ url: (await dripping()).url }, 'a'.repeat(40)),
      reason: 'SourceTimeout',
      message: /failed \(SourceTimeout: not finished within the 1500ms deadline of --source-read-timeout\)/,
    },
    {
      name: 'source: a registry that never answers for a release artifact',
      run: async () =>
        slowTreeOutcome(
          { url: `oci://${(await hangingRegistry()).host}/team/slow`, insecure: true },
          `sha256:${'b'.repeat(64)}`,
        ),
      reason: 'SourceTimeout',
      message: /not finished within the 1500ms deadline of --source-read-timeout/,
    },
    {
      name: 'source: a Git listing that drips',
      run: async () => {
        const list = withListingDeadline(sourceTagLister(), { listTimeoutMs: SLOW_DEADLINE_MS }, realClock);
        try {
          await list((await dripping()).url, undefined);
          return { reason: '(listed)', message: '' };
        } catch (err) {
          if (err instanceof SourceError) return { reason: err.reason, message: err.message };
          throw err;
        }
      },
      reason: 'SourceTimeout',
      message: /did not finish within the 1500ms deadline of --source-list-timeout/,
    },
  ];
}
