// An in-memory stand-in for the API server and the fleet repository, for the offline renderer.
// It simulates only what is NOT made by stackflux, and deterministically:
// - server-side apply merges the applied fields onto the object (maps merge, lists are replaced);
//   status in an apply body is ignored (status subresource);
// - a new object gets a uid derived from its identity, generation 1 and creationTimestamp = now;
//   a change outside metadata/status bumps generation;
// - delete sets deletionTimestamp while finalizers remain, else removes the object, and garbage
//   collection removes (cascading) objects whose owners were all removed here;
// - a fleet branch's "commit" is a content hash of its files (a stand-in for the Git commit id);
//   its tree ids are git's own (branchTreeIds).
// Flux is NOT simulated: GitRepository artifacts and Kustomization readiness stay as they are.
import { createHash } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { groupOf } from '../api/resources.ts';
import type { BranchState } from '../gitops/branches.ts';
import { branchTreeIds } from '../gitops/objects.ts';
import { objectKey, type Snapshot, type SnapshotObject } from './snapshot.ts';
import { compareStrings, isRecord } from './yaml.ts';

function formatTime(now: Date): string {
  return now.toISOString().replace(/\.\d+Z$/, 'Z');
}

/** A deterministic uid (UUID-shaped) for an object created by the simulation. */
export function simulatedUid(key: string): string {
  const h = createHash('sha1').update(key).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/** Deep merge: records merge key by key, everything else (lists, scalars) is replaced. */
export function mergeApplied(existing: unknown, applied: unknown): unknown {
  if (isRecord(existing) && isRecord(applied)) {
    const out: Record<string, unknown> = { ...existing };
    for (const [k, v] of Object.entries(applied)) out[k] = mergeApplied(existing[k], v);
    return out;
  }
  return structuredClone(applied);
}

/** RFC 7386 JSON merge patch. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isRecord(patch)) return structuredClone(patch);
  const out: Record<string, unknown> = isRecord(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

function withoutMetaAndStatus(obj: SnapshotObject): Record<string, unknown> {
  const { metadata: _m, status: _s, ...rest } = obj;
  return rest;
}

export class World {
  readonly objects: Map<string, SnapshotObject>;
  readonly fleet: Map<string, string>;
  /** Real tip commits of branches as read (dropped for a branch once it is written here). */
  readonly fleetTips: Map<string, string>;
  readonly now: Date;
  /** uids of objects removed here (garbage collection of their dependents). */
  private readonly removedUids = new Set<string>();
  /**
   * The fleet's paths, sorted, built on first use and kept by writeBranch (the only writer of
   * `fleet`): a branch's files are one range of it, not a scan and sort of every branch's files
   * per branch read (a preview of 1,000 Clusters reads 1,000 branches).
   */
  private sortedFleetPaths: string[] | undefined;

  constructor(
    snapshot: Pick<Snapshot, 'objects' | 'fleet'> & Partial<Pick<Snapshot, 'fleetTips'>>,
    now: Date,
  ) {
    this.objects = new Map([...snapshot.objects].map(([k, v]) => [k, structuredClone(v)]));
    this.fleet = new Map(snapshot.fleet);
    this.fleetTips = new Map(snapshot.fleetTips ?? []);
    this.now = now;
  }

  get(apiVersion: string, kind: string, name: string, namespace?: string): SnapshotObject | undefined {
    return this.objects.get(
      objectKey({ apiVersion, kind, metadata: { name, ...(namespace ? { namespace } : {}) } }),
    );
  }

  /** Objects of group+kind (any version), optionally in one namespace, sorted by key. */
  list(group: string, kind: string, namespace?: string): SnapshotObject[] {
    return [...this.objects]
      .filter(
        ([, o]) =>
          o.kind === kind &&
          groupOf(o.apiVersion) === group &&
          (namespace === undefined || o.metadata.namespace === namespace),
      )
      .sort(([a], [b]) => compareStrings(a, b))
      .map(([, o]) => o);
  }

  /** Server-side apply of `desired` (its status is ignored). */
  apply(desired: SnapshotObject): void {
    const key = objectKey(desired);
    const { status: _s, ...body } = desired;
    const existing = this.objects.get(key);
    if (existing === undefined) {
      const created = structuredClone(body) as SnapshotObject;
      created.metadata = {
        ...created.metadata,
        uid: simulatedUid(key),
        generation: 1,
        creationTimestamp: formatTime(this.now),
      };
      this.objects.set(key, created);
      return;
    }
    const merged = mergeApplied(existing, body) as SnapshotObject;
    merged.metadata.uid = existing.metadata.uid;
    this.bumpGeneration(existing, merged);
    this.objects.set(key, merged);
  }

  applyStatus(obj: SnapshotObject): boolean {
    const existing = this.objects.get(objectKey(obj));
    if (existing === undefined) return false;
    existing.status = structuredClone(obj.status);
    return true;
  }

  /**
   * Server-side apply of some status fields by another field manager (the rollout's): the fields
   * given replace theirs, conditions merge by type (a list map), everything else stays.
   */
  applyStatusFields(obj: SnapshotObject): boolean {
    const existing = this.objects.get(objectKey(obj));
    if (existing === undefined) return false;
    const before = (existing.status ?? {}) as { conditions?: Array<{ type: string }> };
    const given = structuredClone(obj.status ?? {}) as { conditions?: Array<{ type: string }> };
    const conditions = [...(before.conditions ?? [])];
    for (const c of given.conditions ?? []) {
      const i = conditions.findIndex((x) => x.type === c.type);
      if (i >= 0) conditions[i] = c;
      else conditions.push(c);
    }
    existing.status = { ...before, ...given, ...(conditions.length > 0 ? { conditions } : {}) };
    return true;
  }

  patch(
    apiVersion: string,
    kind: string,
    name: string,
    namespace: string | undefined,
    patch: unknown,
  ): boolean {
    const key = objectKey({ apiVersion, kind, metadata: { name, ...(namespace ? { namespace } : {}) } });
    const existing = this.objects.get(key);
    if (existing === undefined) return false;
    const patched = mergePatch(existing, patch) as SnapshotObject;
    patched.metadata.uid = existing.metadata.uid;
    patched.metadata.name = existing.metadata.name;
    this.bumpGeneration(existing, patched);
    this.objects.set(key, patched);
    this.finishDeletion(key);
    return true;
  }

  delete(apiVersion: string, kind: string, name: string, namespace?: string): boolean {
    const key = objectKey({ apiVersion, kind, metadata: { name, ...(namespace ? { namespace } : {}) } });
    if (!this.objects.has(key)) return false;
    this.deleteKey(key);
    return true;
  }

  private bumpGeneration(before: SnapshotObject, after: SnapshotObject): void {
    if (isDeepStrictEqual(withoutMetaAndStatus(before), withoutMetaAndStatus(after))) return;
    const g = before.metadata.generation;
    after.metadata.generation = (typeof g === 'number' ? g : 0) + 1;
  }

  private deleteKey(key: string): void {
    const obj = this.objects.get(key);
    if (obj === undefined) return;
    if ((obj.metadata.finalizers ?? []).length > 0) {
      obj.metadata.deletionTimestamp ??= formatTime(this.now);
      return;
    }
    this.remove(key);
  }

  /** An object being deleted whose last finalizer is gone disappears. */
  private finishDeletion(key: string): void {
    const obj = this.objects.get(key);
    if (obj?.metadata.deletionTimestamp !== undefined && (obj.metadata.finalizers ?? []).length === 0)
      this.remove(key);
  }

  private remove(key: string): void {
    const obj = this.objects.get(key);
    if (obj === undefined) return;
    this.objects.delete(key);
    if (obj.metadata.uid !== undefined) this.removedUids.add(obj.metadata.uid);
    this.collectGarbage();
  }

  /** Background garbage collection: dependents whose owners were all removed here. */
  private collectGarbage(): void {
    const liveUids = new Set(
      [...this.objects.values()].flatMap((o) => (o.metadata.uid ? [o.metadata.uid] : [])),
    );
    for (const [key, obj] of [...this.objects].sort(([a], [b]) => compareStrings(a, b))) {
      const owners = obj.metadata.ownerReferences ?? [];
      if (owners.length === 0 || obj.metadata.deletionTimestamp !== undefined) continue;
      const orphaned =
        owners.some((o) => this.removedUids.has(o.uid)) && owners.every((o) => !liveUids.has(o.uid));
      if (orphaned && this.objects.has(key)) this.deleteKey(key);
    }
  }

  // ---- Fleet repository (files keyed `<branch>/<path on the branch>`).

  /** The files of one branch (path on the branch → content), sorted; empty when it does not exist. */
  branchFiles(branch: string): Map<string, string> {
    const base = `${branch}/`;
    const paths = this.fleetPaths();
    const [lo, hi] = this.branchRange(base);
    const files = new Map<string, string>();
    for (const path of paths.slice(lo, hi)) files.set(path.slice(base.length), this.fleet.get(path) ?? '');
    return files;
  }

  private fleetPaths(): string[] {
    this.sortedFleetPaths ??= [...this.fleet.keys()].sort(compareStrings);
    return this.sortedFleetPaths;
  }

  /** Where the paths under `base` are in fleetPaths(): a binary search for the first, then the run. */
  private branchRange(base: string): [number, number] {
    const paths = this.fleetPaths();
    let [lo, hi] = [0, paths.length];
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((paths[mid] as string) < base) lo = mid + 1;
      else hi = mid;
    }
    let end = lo;
    while (end < paths.length && (paths[end] as string).startsWith(base)) end++;
    return [lo, end];
  }

  /**
   * The branch as the fleet writer reports it; undefined when it has no files (does not exist).
   * Its commit is the real tip when read from the repository and not written since, else a
   * content id standing in for the commit.
   */
  branchState(branch: string): BranchState | undefined {
    const files = this.branchFiles(branch);
    if (files.size === 0) return undefined;
    const ids = branchTreeIds(files);
    let commit = this.fleetTips.get(branch);
    if (commit === undefined) {
      const h = createHash('sha1');
      for (const [path, text] of files) h.update(path).update('\0').update(text).update('\0');
      commit = h.digest('hex');
    }
    return { commit, tree: ids.tree, addons: ids.addons };
  }

  /** Replaces a branch's files (null deletes the branch). */
  writeBranch(branch: string, files: ReadonlyMap<string, string> | null): void {
    const base = `${branch}/`;
    this.fleetTips.delete(branch);
    const [lo, hi] = this.branchRange(base);
    const paths = this.fleetPaths();
    for (const path of paths.slice(lo, hi)) this.fleet.delete(path);
    const written = files === null ? [] : [...files.keys()].map((f) => `${base}${f}`).sort(compareStrings);
    if (files !== null) for (const [f, text] of files) this.fleet.set(`${base}${f}`, text);
    // Every path under base sorts between the neighbours of the old run: the index stays sorted.
    paths.splice(lo, hi - lo, ...written);
  }
}
