// The offline render driver: runs the SAME pure reconcilers the live controller runs over a
// snapshot, assembling their inputs from the snapshot's objects exactly as the live controllers
// assemble them from their informer caches, and turns their results into mutations with the same
// no-op checks (needsApply / sameJson). Mutations are applied to an in-memory World (world.ts),
// and the controllers run again, round after round, until nothing changes: the output is every
// mutation the controllers would make on the way to their fixed point. A controller that never
// stops writing is reported (a hot loop).
import type { ClusterAddon } from '../api/clusteraddon.ts';
import { type ClusterRefField, clusterRef } from '../api/clusterrefs.ts';
import type { ClusterStack } from '../api/clusterstack.ts';
import type { ClusterStackRelease } from '../api/clusterstackrelease.ts';
import {
  FLUX_KUSTOMIZE_API_VERSION,
  FLUX_SOURCE_API_VERSION,
  type GitRepository,
  type HelmRelease,
  type Kustomization,
} from '../api/flux.ts';
import type { Condition } from '../api/meta.ts';
import { API_VERSION, GROUP, LABEL_CLUSTER } from '../api/meta.ts';
import type { ReleaseTree } from '../api/release.ts';
import {
  groupOf,
  isDeclaredOutput,
  isProviderObjectKind,
  kindInfo,
  requiredPermission,
} from '../api/resources.ts';
import { ROLLOUT_CONDITION, ROLLOUT_FIELD_MANAGER, withoutRolloutStatus } from '../api/rollout.ts';
import { needsApply, sameJson } from '../controllers/common.ts';
import { treeId } from '../gitops/objects.ts';
import { addonReleaseTag } from '../reconcilers/addonrelease.ts';
import {
  type BranchUpdate,
  type ClusterAddonResult,
  FINALIZER_FLEET_CLEANUP,
  type FleetSettings,
  fleetBranchName,
  reconcileClusterAddon,
} from '../reconcilers/clusteraddon.ts';
import {
  type ClusterUse,
  clusterUse,
  reconcileClusterStack,
  type SourceListing,
  sourceUrl,
} from '../reconcilers/clusterstack.ts';
import {
  type RenderedClass,
  reconcileClusterStackRelease,
  releaseClassBranch,
  rendersClusterClass,
} from '../reconcilers/clusterstackrelease.ts';
import { providerConfig } from '../reconcilers/provider.ts';
import { clusterApplyBody, type RolloutCluster, reconcileRollout } from '../reconcilers/rollout.ts';
import { clusterStackOfTag, type NamespaceLabels, servedClusterNames } from '../reconcilers/sharing.ts';
import { FLUX_SHARD_NAMESPACE_LABEL, type FluxTemplates } from '../releases/flux.ts';
import { readReleaseDescription, releasedTree, type StackDescription } from '../releases/format.ts';
import type { ValidationResult } from '../releases/stack.ts';
import { parseReleaseTag } from '../releases/tags.ts';
import type { TenancyPolicy } from '../releases/tenancy.ts';
import { binaryFilesOf, mapTreePaths, releaseTree } from '../releases/tree.ts';
import { renderCsctlClusterClass, type SyncGoEngine } from '../rendering/clusterclass.ts';
import { DEFAULT_MAX_OUTPUT_BYTES, runGoEngineCall } from '../rendering/goengine/index.ts';
import type { KubeObject } from '../runtime/client.ts';
import { notKeptOf } from '../sources/listing.ts';
import { snapshotReleaseProvider, snapshotTemplate } from './provider.ts';
import { objectKey, type Snapshot, type SnapshotObject, type SourceData } from './snapshot.ts';
import { World } from './world.ts';
import { compareStrings, isRecord } from './yaml.ts';

export const FIELD_MANAGER = 'stackflux';
export const CONTROLLERS = ['clusterstack', 'clusterstackrelease', 'clusteraddon', 'rollout'] as const;
export type ControllerName = (typeof CONTROLLERS)[number];
export const DEFAULT_NOW = '1970-01-01T00:00:00Z';
const CAPI_GROUP = 'cluster.x-k8s.io';

export type Verb = 'apply' | 'applyStatus' | 'patch' | 'delete';

export interface Mutation {
  verb: Verb;
  /** Which controller made it. */
  reconciler: ControllerName;
  apiVersion: string;
  kind: string;
  namespace?: string;
  name: string;
  /** apply: the applied object; applyStatus: {apiVersion, kind, metadata, status}; patch: the merge patch; delete: DeleteOptions. */
  body: unknown;
  /** Server-side apply field manager when not "stackflux" (the rollout's "stackflux-rollout"): its status apply is partial. */
  fieldManager?: string;
}

export interface ReconcileOutcome {
  reconciler: ControllerName;
  namespace: string;
  name: string;
  ready?: string;
  reason?: string;
  message?: string;
  /** Mutations this key caused over the whole render. */
  mutations: number;
}

/** One fleet branch the render changed. */
export interface BranchOutput {
  /** The commit messages written to it, in order (one per wave that changed it). */
  commits: string[];
  /** Its final files (path on the branch → content); null: the branch was deleted. */
  files: Map<string, string> | null;
}

export interface FleetOutput {
  /** Waves that changed any branch: each is one atomic push (of every branch it changed). */
  pushes: number;
  /** Every branch whose final content differs from the snapshot's, by name (sorted). */
  branches: Map<string, BranchOutput>;
}

export interface RenderOutput {
  mutations: Mutation[];
  fleet: FleetOutput;
  results: ReconcileOutcome[];
  controllers: Record<ControllerName, { enabled: boolean; skipped?: string }>;
  rounds: number;
  /** The state after every mutation (for the fixed-point check and diff). */
  world: World;
}

export interface Reconcilers {
  clusterStack: typeof reconcileClusterStack;
  clusterStackRelease: typeof reconcileClusterStackRelease;
  clusterAddon: typeof reconcileClusterAddon;
}

export interface RenderOptions {
  now: Date;
  templates: FluxTemplates;
  /** --default-service-account and --allowed-chart-hosts, as `stackflux run` takes them. */
  tenancy?: TenancyPolicy;
  /** Enabled controllers (default: all). */
  controllers?: ReadonlySet<ControllerName>;
  /** Injected for tests (e.g. a deliberately nondeterministic reconciler); default: the real ones. */
  reconcilers?: Partial<Reconcilers>;
  maxRounds?: number;
  /**
   * Answers the Go engine calls of a Helm-chart cluster-class (csctl); default: the engine in this
   * process (renderSnapshotBounded passes the render processes, as the controller renders).
   */
  goEngine?: SyncGoEngine;
  /** --github-api-url of the controller: the GitHub a spec.source.github names (default api.github.com). */
  githubApiUrl?: string;
  /**
   * The installation's render seed key, which seeds the random values Go templates generate
   * (rendering/determinism.ts); default: this process's own, so another process's differ.
   */
  renderSeedKey?: string;
}

export class RenderError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RenderError';
  }
}

/** "--controllers" syntax: "*" (default) all; "a,b" only those; "*,-b" or "-b" all but b. */
export function parseControllers(spec: string | undefined): Set<ControllerName> {
  const items = (spec ?? '*')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  const known = (n: string): ControllerName => {
    if (!(CONTROLLERS as readonly string[]).includes(n))
      throw new RenderError(`unknown controller "${n}" (known: ${CONTROLLERS.join(', ')})`);
    return n as ControllerName;
  };
  const positive = items.filter((i) => !i.startsWith('-'));
  const out = new Set<ControllerName>(
    positive.length === 0 || positive.includes('*') ? CONTROLLERS : positive.map(known),
  );
  for (const i of items) if (i.startsWith('-')) out.delete(known(i.slice(1)));
  return out;
}

export function describeMutation(m: Mutation): string {
  return `${m.verb} ${mutationPath(m)} (by ${m.reconciler})`;
}

/** `<scope>/<group>/<resource>/<name>`, scope = cluster | namespaces/<ns>. */
export function mutationPath(m: Pick<Mutation, 'apiVersion' | 'kind' | 'namespace' | 'name'>): string {
  return objectKey({
    apiVersion: m.apiVersion,
    kind: m.kind,
    metadata: { name: m.name, ...(m.namespace ? { namespace: m.namespace } : {}) },
  });
}

function readyOf(
  conditions: readonly Condition[] | undefined,
): Pick<ReconcileOutcome, 'ready' | 'reason' | 'message'> {
  const c = conditions?.find((x) => x.type === 'Ready');
  return c === undefined ? {} : { ready: c.status, reason: c.reason, message: c.message };
}

/** The files of a source's tree at tag under path (relative to path), or undefined. */
export function treeAt(source: SourceData | undefined, tag: string, path: string): ReleaseTree | undefined {
  const files = source?.trees.get(tag);
  if (files === undefined) return undefined;
  const base = path.replace(/^\/+|\/+$/g, '');
  const prefix = base === '' ? '' : `${base}/`;
  const sorted = releaseTree(
    new Map([...files].sort(([a], [b]) => compareStrings(a, b))),
    new Map([...binaryFilesOf(files)].sort(([a], [b]) => compareStrings(a, b))),
  );
  const stack = mapTreePaths(sorted, (p) => (p.startsWith(prefix) ? p.slice(prefix.length) : undefined));
  // As the live release source reads a Git tag: as its tool released it (csctl's placeholders).
  return releasedTree(stack, tag);
}

/** The ClusterAddon controller's fleet settings of a snapshot (settings.yaml). */
export function fleetSettingsOf(snapshot: Pick<Snapshot, 'settings'>): FleetSettings {
  const f = snapshot.settings.fleet;
  return {
    url: f.url,
    branchPrefix: f.branchPrefix,
    ...(f.secretRef !== undefined ? { secretRef: f.secretRef } : {}),
    ...(f.interval !== undefined ? { interval: f.interval } : {}),
    ...(f.addonInterval !== undefined ? { addonInterval: f.addonInterval } : {}),
    ...(f.fluxShards !== undefined ? { fluxShards: f.fluxShards } : {}),
  };
}

/** The objects a Cluster's controlPlaneRef and infrastructureRef point at, as the snapshot holds them. */
export function clusterRefsIn(
  w: World,
  cluster: SnapshotObject,
): {
  controlPlane: SnapshotObject | undefined;
  infraCluster: SnapshotObject | undefined;
  /** Refs the rule refuses, as the live controller reports them (RefsNotReadable). */
  refProblems: string[];
} {
  // The live controller's rule (api/clusterrefs.ts): a refused ref resolves to nothing here too.
  const refProblems: string[] = [];
  const resolve = (field: ClusterRefField): SnapshotObject | undefined => {
    const followed = clusterRef(cluster, field);
    if (followed !== undefined && !followed.ok) refProblems.push(followed.problem);
    if (!followed?.ok) return undefined;
    const ref = followed.ref;
    return [...w.objects.values()].find(
      (o) =>
        o.kind === ref.kind &&
        o.metadata.name === ref.name &&
        o.metadata.namespace === ref.namespace &&
        groupOf(o.apiVersion) === ref.group,
    );
  };
  const controlPlane = resolve('controlPlaneRef');
  const infraCluster = resolve('infrastructureRef');
  return { controlPlane, infraCluster, refProblems };
}

class Renderer {
  readonly world: World;
  readonly mutations = new Map<string, Mutation>();
  readonly results = new Map<string, ReconcileOutcome>();
  /** Commit messages per branch written during the render. */
  readonly branchCommits = new Map<string, string[]>();
  private pushes = 0;
  private readonly original: ReadonlySet<string>;
  private readonly reconcilers: Reconcilers;
  private round: Mutation[] = [];
  /** The key being reconciled (mutations are counted against it). */
  private current: ReconcileOutcome | undefined;
  private fleetChanged = false;

  private readonly snapshot: Snapshot;
  private readonly options: RenderOptions;

  constructor(snapshot: Snapshot, options: RenderOptions) {
    this.snapshot = snapshot;
    this.options = options;
    this.world = new World(snapshot, options.now);
    this.original = new Set(snapshot.objects.keys());
    this.reconcilers = {
      clusterStack: options.reconcilers?.clusterStack ?? reconcileClusterStack,
      clusterStackRelease: options.reconcilers?.clusterStackRelease ?? reconcileClusterStackRelease,
      clusterAddon: options.reconcilers?.clusterAddon ?? reconcileClusterAddon,
    };
  }

  private sourceFor(url: string): SourceData | undefined {
    return this.snapshot.sources.find((s) => s.url === url);
  }

  private outcome(reconciler: ControllerName, namespace: string, name: string): ReconcileOutcome {
    const id = `${reconciler}\n${namespace}\n${name}`;
    let o = this.results.get(id);
    if (o === undefined) {
      o = { reconciler, namespace, name, mutations: 0 };
      this.results.set(id, o);
    }
    return o;
  }

  /** Checks the mutation is a declared output, applies it to the world and records it. */
  private mutate(m: Mutation): void {
    const group = groupOf(m.apiVersion);
    const { plural } = kindInfo(m.apiVersion, m.kind);
    const perm = requiredPermission(m.verb, plural);
    if (!isDeclaredOutput(group, perm.resource, perm.verb) && !isProviderObjectKind(m.apiVersion, m.kind)) {
      throw new RenderError(
        `${describeMutation(m)}: ${perm.verb} on ${group || 'core'}/${perm.resource} is not a declared output resource (controller/api/resources.ts)`,
      );
    }
    const w = this.world;
    const obj = m.body as SnapshotObject;
    let applied: boolean;
    switch (m.verb) {
      case 'apply':
        w.apply(obj);
        applied = true;
        break;
      case 'applyStatus':
        applied = m.fieldManager === undefined ? w.applyStatus(obj) : w.applyStatusFields(obj);
        break;
      case 'patch':
        applied = w.patch(m.apiVersion, m.kind, m.name, m.namespace, m.body);
        break;
      case 'delete':
        applied = w.delete(m.apiVersion, m.kind, m.name, m.namespace);
        break;
    }
    if (!applied) return; // NotFound: the live controller's write would fail the same way
    this.round.push(m);
    if (this.current !== undefined) this.current.mutations++;
    const key = mutationPath(m);
    const id = `${m.verb}\n${key}`;
    if (m.verb === 'delete' && !this.original.has(key)) {
      // Created and deleted within this render: nothing to show.
      for (const v of ['apply', 'applyStatus', 'patch'] as const) this.mutations.delete(`${v}\n${key}`);
      return;
    }
    const previous = this.mutations.get(id);
    if (m.verb === 'patch' && previous !== undefined) {
      this.mutations.set(id, { ...m, body: composePatches(previous.body, m.body) });
    } else {
      this.mutations.set(id, m);
    }
  }

  // ---- ClusterStack (mirrors controller/controllers/clusterstack.ts).

  private clusterStacks(): void {
    const w = this.world;
    for (const obj of w.list(GROUP, 'ClusterStack')) {
      const cs = obj as unknown as ClusterStack;
      const namespace = cs.metadata.namespace ?? 'default';
      const active = cs.metadata.deletionTimestamp === undefined && cs.spec.suspend !== true;
      const source = active ? this.sourceFor(sourceUrl(cs, this.options.githubApiUrl)) : undefined;
      let listing: SourceListing | undefined;
      if (source !== undefined) {
        listing = source.listing.ok
          ? {
              ok: true,
              tags: source.listing.tags.map((t) => t.tag),
              ...(source.listing.tags.some((t) => t.time !== undefined)
                ? {
                    times: Object.fromEntries(
                      source.listing.tags.flatMap((t) => (t.time !== undefined ? [[t.tag, t.time]] : [])),
                    ),
                  }
                : {}),
              // Tags a lister counted but did not keep (sources/listing.ts), as the controller reports them.
              ...(notKeptOf(source.listing.tags) > 0 ? { notKept: notKeptOf(source.listing.tags) } : {}),
              listedAt: source.listing.listedAt ?? formatTime(this.options.now),
            }
          : {
              ok: false,
              reason: source.listing.reason,
              message: source.listing.message,
              ...(source.listing.lastListedAt !== undefined
                ? { lastListedAt: source.listing.lastListedAt }
                : {}),
            };
      }
      const releases = w.list(GROUP, 'ClusterStackRelease', namespace) as unknown as ClusterStackRelease[];
      // As the live view: the Clusters of every namespace whose ClusterClass is in this one.
      const clusters: ClusterUse[] = w.list(CAPI_GROUP, 'Cluster').flatMap((c) => {
        const use = clusterUse(c);
        const own = c.metadata.namespace ?? '';
        if (use === undefined || (use.classNamespace ?? own) !== namespace) return [];
        return own === namespace
          ? [use]
          : [{ ...use, name: `${own}/${use.name}`, classNamespace: namespace, clusterNamespace: own }];
      });
      const foreign = clusters.flatMap((c) => (c.clusterNamespace !== undefined ? [c.clusterNamespace] : []));
      this.current = this.outcome('clusterstack', namespace, cs.metadata.name);
      const provider = providerConfig(cs);
      const result = this.reconcilers.clusterStack({
        clusterStack: cs,
        listing,
        releases,
        clusters,
        ...(foreign.length > 0 ? { namespaceLabels: namespaceLabelsIn(w, foreign) } : {}),
        ...(provider.mode === 'ref'
          ? { providerTemplate: snapshotTemplate(w, provider.ref, namespace) }
          : {}),
        ...(this.options.githubApiUrl !== undefined ? { githubApiUrl: this.options.githubApiUrl } : {}),
        now: this.options.now,
      });
      const r = 'clusterstack';
      for (const desired of result.apply) {
        const existing = w.get(API_VERSION, 'ClusterStackRelease', desired.metadata.name, namespace);
        if (!needsApply(existing as KubeObject | undefined, desired as unknown as KubeObject)) continue;
        this.mutate({ verb: 'apply', reconciler: r, ...ids(desired), body: desired });
      }
      for (const name of result.delete) {
        const existing = w.get(API_VERSION, 'ClusterStackRelease', name, namespace);
        if (existing === undefined || existing.metadata.deletionTimestamp !== undefined) continue;
        this.mutate({
          verb: 'delete',
          reconciler: r,
          apiVersion: API_VERSION,
          kind: 'ClusterStackRelease',
          namespace,
          name,
          body: deleteOptions(existing),
        });
      }
      if (!sameJson(result.status, withoutRolloutStatus(cs.status ?? {})))
        this.mutate(clusterStackStatus(r, cs.metadata.name, namespace, result.status));
      Object.assign(this.current, readyOf(result.status.conditions));
    }
  }

  // ---- Progressive rollout (mirrors controller/controllers/rollout.ts).

  private rollouts(): void {
    const w = this.world;
    for (const obj of w.list(GROUP, 'ClusterStack')) {
      const cs = obj as unknown as ClusterStack;
      if (cs.metadata.deletionTimestamp !== undefined) continue;
      const progressive = cs.spec.rollout?.strategy === 'Progressive';
      const rolloutCondition = cs.status?.conditions?.find((c) => c.type === ROLLOUT_CONDITION);
      if (!progressive && cs.status?.rollout === undefined && rolloutCondition === undefined) continue;
      const namespace = cs.metadata.namespace ?? 'default';
      this.current = this.outcome('rollout', namespace, cs.metadata.name);
      const clusters = w.list(CAPI_GROUP, 'Cluster', namespace) as unknown as RolloutCluster[];
      const result = reconcileRollout({
        clusterStack: cs,
        releases: w.list(GROUP, 'ClusterStackRelease', namespace) as unknown as ClusterStackRelease[],
        clusters,
        clusterAddons: w.list(GROUP, 'ClusterAddon', namespace) as unknown as ClusterAddon[],
        now: this.options.now,
      });
      for (const ch of result.changes) {
        const cluster = clusters.find((c) => c.metadata.name === ch.name);
        if (cluster === undefined) continue;
        const body = clusterApplyBody(cluster, ch) as SnapshotObject;
        this.mutate({
          verb: 'apply',
          reconciler: 'rollout',
          ...ids(body),
          body,
          fieldManager: ROLLOUT_FIELD_MANAGER,
        });
      }
      const condition = result.condition;
      const wantCondition =
        condition === undefined
          ? undefined
          : {
              type: ROLLOUT_CONDITION,
              ...condition,
              ...(cs.metadata.generation !== undefined ? { observedGeneration: cs.metadata.generation } : {}),
              lastTransitionTime:
                rolloutCondition?.status === condition.status
                  ? rolloutCondition.lastTransitionTime
                  : formatTime(this.options.now),
            };
      const want = {
        ...(result.status !== undefined ? { rollout: result.status } : {}),
        ...(wantCondition !== undefined ? { conditions: [wantCondition] } : {}),
      };
      const have = {
        ...(cs.status?.rollout !== undefined ? { rollout: cs.status.rollout } : {}),
        ...(rolloutCondition !== undefined ? { conditions: [rolloutCondition] } : {}),
      };
      if (!sameJson(want, have))
        this.mutate(clusterStackStatus('rollout', cs.metadata.name, namespace, want, ROLLOUT_FIELD_MANAGER));
      if (condition !== undefined)
        Object.assign(this.current, {
          status: condition.status,
          reason: condition.reason,
          message: condition.message,
        });
    }
  }

  // ---- ClusterStackRelease (mirrors controller/controllers/clusterstackrelease.ts).

  private releases(): void {
    const w = this.world;
    for (const obj of w.list(GROUP, 'ClusterStackRelease')) {
      if (!w.objects.has(objectKey(obj))) continue;
      const release = obj as unknown as ClusterStackRelease;
      const namespace = release.metadata.namespace ?? 'default';
      const name = release.metadata.name;
      const { tag } = release.spec;
      const deleting = release.metadata.deletionTimestamp !== undefined;
      const gitRepository = w.get(FLUX_SOURCE_API_VERSION, 'GitRepository', name, namespace) as unknown as
        | GitRepository
        | undefined;
      const kustomization = w.get(FLUX_KUSTOMIZE_API_VERSION, 'Kustomization', name, namespace) as unknown as
        | Kustomization
        | undefined;
      const users = w
        .list(CAPI_GROUP, 'Cluster')
        .filter((c) => {
          const use = clusterUse(c);
          return (
            use !== undefined &&
            (use.classNamespace ?? c.metadata.namespace) === namespace &&
            use.className === release.spec.clusterClass
          );
        })
        .map((c) =>
          c.metadata.namespace === namespace ? c.metadata.name : `${c.metadata.namespace}/${c.metadata.name}`,
        );
      const usersNs = users.flatMap((n) => (n.includes('/') ? [n.slice(0, n.indexOf('/'))] : []));
      const clusters = servedClusterNames(
        users,
        w.get(API_VERSION, 'ClusterStack', release.spec.clusterStack, namespace) as unknown as
          | ClusterStack
          | undefined,
        namespaceLabelsIn(w, usersNs),
      );
      const source = this.sourceFor(release.spec.source.url);
      const listed =
        source?.listing.ok === true ? source.listing.tags.find((t) => t.tag === tag)?.commit : undefined;
      // As the live controller: validate at the pinned commit (status.commit), else the listed one.
      // A snapshot holds the tree of each tag at its listed commit only, so a release pinned to
      // another commit (a moved tag) is validated only when the pin is the listed commit.
      const commit = release.status?.commit ?? listed;
      let stack: ValidationResult<StackDescription> | undefined;
      let renderedClass: RenderedClass | undefined;
      const parsed = parseReleaseTag(tag);
      if (!parsed.ok) {
        stack = { ok: false, errors: [`tag ${tag}: ${parsed.reason}`] };
      } else if (!deleting) {
        const tree =
          commit !== undefined && commit === listed
            ? treeAt(source, tag, release.spec.source.path ?? '')
            : undefined;
        if (tree !== undefined) stack = readReleaseDescription(tree, parsed.value);
        if (tree !== undefined && stack?.ok === true && rendersClusterClass(stack.value))
          renderedClass = this.renderClass(tree, stack.value, tag, namespace, name);
      }
      this.current = this.outcome('clusterstackrelease', namespace, name);
      const provider = snapshotReleaseProvider(w, release);
      const result = this.reconcilers.clusterStackRelease({
        release,
        ...(provider !== undefined ? { provider } : {}),
        ...(gitRepository !== undefined ? { gitRepository } : {}),
        ...(kustomization !== undefined ? { kustomization } : {}),
        ...(stack !== undefined ? { stack } : {}),
        ...(renderedClass !== undefined ? { renderedClass } : {}),
        ...(commit !== undefined ? { commit } : {}),
        ...(listed !== undefined ? { listedCommit: listed } : {}),
        clusters,
        ...(this.options.tenancy !== undefined ? { tenancy: this.options.tenancy } : {}),
        templates: this.options.templates,
        now: this.options.now,
      });
      const r = 'clusterstackrelease';
      const have = release.metadata.finalizers ?? [];
      const want = result.finalizers;
      const sameFinalizers = have.length === want.length && want.every((f) => have.includes(f));
      const adding = want.some((f) => !have.includes(f));
      const patchFinalizers = () =>
        this.mutate({
          verb: 'patch',
          reconciler: r,
          apiVersion: API_VERSION,
          kind: 'ClusterStackRelease',
          namespace,
          name,
          body: { metadata: { finalizers: want } },
        });
      if (adding) patchFinalizers();
      if (result.gitRepository !== undefined && (!deleting || gitRepository !== undefined)) {
        if (
          needsApply(
            gitRepository as unknown as KubeObject | undefined,
            result.gitRepository as unknown as KubeObject,
          )
        )
          this.mutate({
            verb: 'apply',
            reconciler: r,
            ...ids(result.gitRepository),
            body: result.gitRepository,
          });
      }
      if (result.providerObject !== undefined) {
        const existing = provider?.object.state === 'found' ? provider.object.object : undefined;
        if (needsApply(existing as KubeObject | undefined, result.providerObject as KubeObject))
          this.mutate({
            verb: 'apply',
            reconciler: r,
            ...ids(result.providerObject),
            body: result.providerObject,
          });
      }
      if (result.kustomization !== undefined && (!deleting || kustomization !== undefined)) {
        if (
          needsApply(
            kustomization as unknown as KubeObject | undefined,
            result.kustomization as unknown as KubeObject,
          )
        )
          this.mutate({
            verb: 'apply',
            reconciler: r,
            ...ids(result.kustomization),
            body: result.kustomization,
          });
      }
      if (!sameJson(result.status, release.status ?? {})) {
        this.mutate({
          verb: 'applyStatus',
          reconciler: r,
          apiVersion: API_VERSION,
          kind: 'ClusterStackRelease',
          namespace,
          name,
          body: {
            apiVersion: API_VERSION,
            kind: 'ClusterStackRelease',
            metadata: { name, namespace },
            status: result.status,
          },
        });
      }
      if (!adding && !sameFinalizers) patchFinalizers();
      Object.assign(this.current, readyOf(result.status.conditions));
    }
  }

  /**
   * A Helm-chart cluster-class (csctl), as controllers/releaseclass.ts does live: rendered by the
   * same pure code, written to the release's fleet branch when its tree differs (one push).
   */
  private renderClass(
    tree: ReleaseTree,
    description: StackDescription,
    tag: string,
    namespace: string,
    name: string,
  ): RenderedClass {
    const fleet = this.snapshot.settings.fleet;
    if (fleet.url === '')
      return {
        ok: false,
        reason: 'FleetNotConfigured',
        message:
          'its cluster-class is a Helm chart, which stackflux renders into the fleet repository for Flux; set fleet.url (settings.yaml or --fleet-url)',
      };
    const engine = this.options.goEngine ?? ((call) => runGoEngineCall(call, DEFAULT_MAX_OUTPUT_BYTES));
    const rendering = renderCsctlClusterClass(engine, { tree, description, tag, namespace });
    if (!rendering.ok) return rendering;
    const w = this.world;
    const branch = releaseClassBranch(fleet.branchPrefix, namespace, name);
    if (w.branchState(branch)?.tree !== treeId(rendering.value.files)) {
      w.writeBranch(branch, rendering.value.files);
      const commits = this.branchCommits.get(branch) ?? [];
      commits.push(`Render the cluster-class of release ${tag}`);
      this.branchCommits.set(branch, commits);
      this.pushes++;
      this.fleetChanged = true;
    }
    const state = w.branchState(branch);
    if (state === undefined)
      return {
        ok: false,
        reason: 'InvalidRelease',
        message: `${description.clusterClass.path}: renders no objects`,
      };
    return {
      ok: true,
      url: fleet.url,
      branch,
      commit: state.commit,
      ...(fleet.secretRef !== undefined ? { secretName: fleet.secretRef } : {}),
    };
  }

  // ---- ClusterAddon (the live addon controller follows the same contract: one push per wave).

  private fleetSettings(): FleetSettings {
    return fleetSettingsOf(this.snapshot);
  }

  private addons(): void {
    const w = this.world;
    const settings = this.fleetSettings();
    const keys = new Set<string>();
    for (const c of w.list(CAPI_GROUP, 'Cluster'))
      keys.add(`${c.metadata.namespace ?? ''}/${c.metadata.name}`);
    for (const a of w.list(GROUP, 'ClusterAddon'))
      keys.add(`${a.metadata.namespace ?? ''}/${a.metadata.name}`);
    const wave: BranchUpdate[] = [];
    for (const key of [...keys].sort(compareStrings)) {
      const [namespace = '', name = ''] = key.split('/');
      const cluster = w.list(CAPI_GROUP, 'Cluster', namespace).find((c) => c.metadata.name === name);
      const clusterAddon = w.get(API_VERSION, 'ClusterAddon', name, namespace) as unknown as
        | ClusterAddon
        | undefined;
      const use = cluster !== undefined ? clusterUse(cluster) : undefined;
      const tag = cluster !== undefined ? addonReleaseTag(cluster) : undefined;
      // As the live controller: the release lives in the ClusterClass's namespace.
      const releaseNs = use?.classNamespace ?? namespace;
      const release =
        tag !== undefined
          ? (w.get(API_VERSION, 'ClusterStackRelease', tag.tag, releaseNs) as unknown as
              | ClusterStackRelease
              | undefined)
          : undefined;
      const tree =
        release !== undefined
          ? treeAt(this.sourceFor(release.spec.source.url), release.spec.tag, release.spec.source.path ?? '')
          : undefined;
      const clusterStack =
        release !== undefined
          ? (w.get(API_VERSION, 'ClusterStack', release.spec.clusterStack, releaseNs) as unknown as
              | ClusterStack
              | undefined)
          : releaseNs !== namespace && tag !== undefined
            ? clusterStackOfTag(w.list(GROUP, 'ClusterStack', releaseNs) as unknown as ClusterStack[], tag)
            : undefined;
      const { controlPlane, infraCluster, refProblems } =
        cluster !== undefined
          ? clusterRefsIn(w, cluster)
          : { controlPlane: undefined, infraCluster: undefined, refProblems: [] };
      const kustomizations = w
        .list('kustomize.toolkit.fluxcd.io', 'Kustomization', namespace)
        .filter((k) => k.metadata.labels?.[LABEL_CLUSTER] === name) as unknown as Kustomization[];
      const helmReleases = w
        .list('helm.toolkit.fluxcd.io', 'HelmRelease', namespace)
        .filter((h) => h.metadata.labels?.[LABEL_CLUSTER] === name) as unknown as HelmRelease[];
      const branch = w.branchState(fleetBranchName(settings.branchPrefix, namespace, name));
      const result = this.reconcilers.clusterAddon({
        cluster,
        namespace,
        name,
        ...(controlPlane !== undefined ? { controlPlane } : {}),
        ...(infraCluster !== undefined ? { infraCluster } : {}),
        ...(refProblems.length > 0 ? { refProblems } : {}),
        ...(clusterAddon !== undefined ? { clusterAddon } : {}),
        ...(release !== undefined ? { release } : {}),
        ...(tree !== undefined ? { tree } : {}),
        ...(release?.status?.commit !== undefined ? { treeCommit: release.status.commit } : {}),
        ...(clusterStack !== undefined ? { clusterStack } : {}),
        ...(releaseNs !== namespace ? { namespaceLabels: namespaceLabelsIn(w, [namespace]) } : {}),
        ...namespaceFluxShardIn(w, namespace, settings),
        kustomizations,
        helmReleases,
        branch,
        fleetSettings: settings,
        ...(this.options.tenancy !== undefined ? { tenancy: this.options.tenancy } : {}),
        templates: this.options.templates,
        now: this.options.now,
        ...(this.options.renderSeedKey !== undefined ? { renderSeedKey: this.options.renderSeedKey } : {}),
      });
      if (result === undefined) continue;
      this.current = this.outcome('clusteraddon', namespace, name);
      this.applyAddonResult(namespace, name, clusterAddon, result);
      if (result.branch !== undefined) wave.push(result.branch);
      Object.assign(this.current, readyOf(result.status.conditions));
    }
    // The wave's branch changes: one push, a commit per branch.
    if (wave.length > 0) {
      for (const u of wave) {
        w.writeBranch(u.branch, u.files);
        const commits = this.branchCommits.get(u.branch) ?? [];
        commits.push(u.message);
        this.branchCommits.set(u.branch, commits);
      }
      this.pushes++;
      this.fleetChanged = true;
    }
  }

  private applyAddonResult(
    namespace: string,
    name: string,
    existing: ClusterAddon | undefined,
    result: ClusterAddonResult,
  ): void {
    const w = this.world;
    const r = 'clusteraddon';
    // As the live controller: our finalizer goes in the same apply as the ClusterAddon.
    const ours = result.finalizers.filter((f) => f === FINALIZER_FLEET_CLEANUP);
    const missing = ours.some((f) => !(existing?.metadata.finalizers ?? []).includes(f));
    if (
      result.clusterAddon !== undefined &&
      (missing ||
        needsApply(
          existing as unknown as KubeObject | undefined,
          result.clusterAddon as unknown as KubeObject,
        ))
    ) {
      const body = {
        ...result.clusterAddon,
        metadata: { ...result.clusterAddon.metadata, ...(ours.length > 0 ? { finalizers: ours } : {}) },
      };
      this.mutate({ verb: 'apply', reconciler: r, ...ids(result.clusterAddon), body });
    }
    const current = w.get(API_VERSION, 'ClusterAddon', name, namespace);
    if (current !== undefined) {
      const have = current.metadata.finalizers ?? [];
      const want = result.finalizers;
      if (!(have.length === want.length && want.every((f) => have.includes(f)))) {
        this.mutate({
          verb: 'patch',
          reconciler: r,
          apiVersion: API_VERSION,
          kind: 'ClusterAddon',
          namespace,
          name,
          body: { metadata: { finalizers: want } },
        });
      }
    }
    if (result.gitRepository !== undefined) {
      const g = result.gitRepository;
      const have = w.get(g.apiVersion, g.kind, g.metadata.name, g.metadata.namespace);
      if (needsApply(have as KubeObject | undefined, g as unknown as KubeObject))
        this.mutate({ verb: 'apply', reconciler: r, ...ids(g), body: g });
    }
    for (const k of result.kustomizations ?? []) {
      const have = w.get(k.apiVersion, k.kind, k.metadata.name, k.metadata.namespace);
      if (needsApply(have as KubeObject | undefined, k as unknown as KubeObject))
        this.mutate({ verb: 'apply', reconciler: r, ...ids(k), body: k });
    }
    if (result.deleteGitRepository !== undefined) {
      const name = result.deleteGitRepository;
      const have = w.get(FLUX_SOURCE_API_VERSION, 'GitRepository', name, namespace);
      if (
        have !== undefined &&
        have.metadata.deletionTimestamp === undefined &&
        have.metadata.labels?.[LABEL_CLUSTER] !== undefined
      )
        this.mutate({
          verb: 'delete',
          reconciler: r,
          apiVersion: FLUX_SOURCE_API_VERSION,
          kind: 'GitRepository',
          namespace,
          name,
          body: deleteOptions(have),
        });
    }
    for (const kname of result.deleteKustomizations) {
      const have = w.get(FLUX_KUSTOMIZE_API_VERSION, 'Kustomization', kname, namespace);
      if (have === undefined || have.metadata.deletionTimestamp !== undefined) continue;
      this.mutate({
        verb: 'delete',
        reconciler: r,
        apiVersion: FLUX_KUSTOMIZE_API_VERSION,
        kind: 'Kustomization',
        namespace,
        name: kname,
        body: deleteOptions(have),
      });
    }
    for (const p of result.patches) {
      const have = w.get(p.apiVersion, p.kind, p.name, p.namespace);
      if (have === undefined || isSubsetPatch(p.patch, have)) continue;
      this.mutate({
        verb: 'patch',
        reconciler: r,
        apiVersion: p.apiVersion,
        kind: p.kind,
        namespace: p.namespace,
        name: p.name,
        body: p.patch,
      });
    }
    const after = w.get(API_VERSION, 'ClusterAddon', name, namespace);
    if (after !== undefined && !sameJson(result.status, after.status ?? {})) {
      this.mutate({
        verb: 'applyStatus',
        reconciler: r,
        apiVersion: API_VERSION,
        kind: 'ClusterAddon',
        namespace,
        name,
        body: {
          apiVersion: API_VERSION,
          kind: 'ClusterAddon',
          metadata: { name, namespace },
          status: result.status,
        },
      });
    }
  }

  run(): RenderOutput {
    const enabled = this.options.controllers ?? new Set(CONTROLLERS);
    const controllers = Object.fromEntries(
      CONTROLLERS.map((c) => [c, { enabled: enabled.has(c) }]),
    ) as RenderOutput['controllers'];
    if (enabled.has('clusteraddon') && this.snapshot.settings.fleet.url === '') {
      controllers.clusteraddon = {
        enabled: false,
        skipped: 'no fleet repository URL (settings.yaml fleet.url or --fleet-url)',
      };
    }
    const maxRounds = this.options.maxRounds ?? 10;
    let rounds = 0;
    for (;;) {
      this.round = [];
      this.fleetChanged = false;
      rounds++;
      if (controllers.clusterstack.enabled) this.clusterStacks();
      if (controllers.clusterstackrelease.enabled) this.releases();
      if (controllers.clusteraddon.enabled) this.addons();
      if (controllers.rollout.enabled) this.rollouts();
      if (this.round.length === 0 && !this.fleetChanged) break;
      if (rounds >= maxRounds) {
        const still = [...new Set(this.round.map(describeMutation))].sort(compareStrings);
        throw new RenderError(
          `no fixed point after ${maxRounds} rounds (a controller keeps writing — hot loop): ${still.join('; ') || 'fleet repository'}`,
        );
      }
    }
    return {
      mutations: [...this.mutations.values()].sort((a, b) =>
        compareStrings(`${a.verb}\n${mutationPath(a)}`, `${b.verb}\n${mutationPath(b)}`),
      ),
      fleet: this.fleetOutput(),
      results: [...this.results.values()].sort(
        (a, b) =>
          compareStrings(a.reconciler, b.reconciler) ||
          compareStrings(a.namespace, b.namespace) ||
          compareStrings(a.name, b.name),
      ),
      controllers,
      rounds,
      world: this.world,
    };
  }

  private fleetOutput(): FleetOutput {
    const branches = new Map<string, BranchOutput>();
    const before = new World({ objects: new Map(), fleet: this.snapshot.fleet }, this.options.now);
    for (const [branch, commits] of [...this.branchCommits].sort(([a], [b]) => compareStrings(a, b))) {
      const files = this.world.branchFiles(branch);
      if (sameJson([...files], [...before.branchFiles(branch)])) continue;
      branches.set(branch, { commits, files: files.size > 0 ? files : null });
    }
    return { pushes: this.pushes, branches };
  }
}

/** The status apply of a ClusterStack (by the rollout's own field manager when given). */
function clusterStackStatus(
  reconciler: ControllerName,
  name: string,
  namespace: string,
  status: unknown,
  fieldManager?: string,
): Mutation {
  return {
    verb: 'applyStatus',
    reconciler,
    apiVersion: API_VERSION,
    kind: 'ClusterStack',
    namespace,
    name,
    body: { apiVersion: API_VERSION, kind: 'ClusterStack', metadata: { name, namespace }, status },
    ...(fieldManager !== undefined ? { fieldManager } : {}),
  };
}

function ids(obj: { apiVersion: string; kind: string; metadata: { name: string; namespace?: string } }) {
  return {
    apiVersion: obj.apiVersion,
    kind: obj.kind,
    name: obj.metadata.name,
    ...(obj.metadata.namespace !== undefined ? { namespace: obj.metadata.namespace } : {}),
  };
}

function deleteOptions(existing: SnapshotObject): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'DeleteOptions',
    propagationPolicy: 'Background',
    ...(existing.metadata.uid !== undefined ? { preconditions: { uid: existing.metadata.uid } } : {}),
  };
}

/** Whether applying merge patch `patch` would change nothing on `obj`. */
function isSubsetPatch(patch: unknown, obj: unknown): boolean {
  if (!isRecord(patch)) return JSON.stringify(patch) === JSON.stringify(obj);
  if (!isRecord(obj)) return false;
  return Object.entries(patch).every(([k, v]) => (v === null ? !(k in obj) : isSubsetPatch(v, obj[k])));
}

/** Two JSON merge patches as one. */
export function composePatches(a: unknown, b: unknown): unknown {
  if (!isRecord(a) || !isRecord(b)) return structuredClone(b);
  const out: Record<string, unknown> = { ...a };
  for (const [k, v] of Object.entries(b)) out[k] = v === null ? null : composePatches(a[k], v);
  return out;
}

function formatTime(now: Date): string {
  return now.toISOString().replace(/\.\d+Z$/, 'Z');
}

export function renderSnapshot(snapshot: Snapshot, options: RenderOptions): RenderOutput {
  return new Renderer(snapshot, options).run();
}

/** The Namespace's stackflux.io/flux-shard label, read as the live controller reads it (--flux-shards ≥ 1). */
export function namespaceFluxShardIn(
  w: World,
  namespace: string,
  settings: FleetSettings,
): { namespaceFluxShard?: string } {
  if (settings.fluxShards === undefined || settings.fluxShards < 1) return {};
  const shard = w.get('v1', 'Namespace', namespace)?.metadata.labels?.[FLUX_SHARD_NAMESPACE_LABEL];
  return shard !== undefined ? { namespaceFluxShard: shard } : {};
}

/** The labels of these Namespaces in the snapshot (cluster/core/namespaces/); a missing one does not exist. */
export function namespaceLabelsIn(w: World, names: Iterable<string>): NamespaceLabels {
  const out = new Map<string, Record<string, string>>();
  for (const name of names) {
    const ns = w.get('v1', 'Namespace', name);
    if (ns !== undefined) out.set(name, ns.metadata.labels ?? {});
  }
  return out;
}
