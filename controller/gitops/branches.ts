// The contract of the per-Cluster fleet: one branch per Cluster (`<prefix><namespace>/<cluster>`)
// holding `<addon>/<file>` at its root (the rendered-branch pattern of Kargo and Argo CD's source
// hydrator). A Flux GitRepository per Cluster tracks its branch, so a commit to one Cluster's
// branch moves only that Cluster's revision.
//
// The writer keeps a bare local repository, builds trees and commits with git plumbing (no working
// tree, no read of files it does not write) and pushes a batch of changed branches atomically,
// each ref leased on its expected old tip. Desired trees are deterministic, so "unchanged" is a
// tree-id comparison and a crash anywhere converges without a duplicate commit.

/** Files of one Cluster's branch: `<addon>/<path>` → content. */
export type BranchFiles = ReadonlyMap<string, string>;

/** What one branch should become. `files: null` deletes the branch (a deleted Cluster). */
export interface BranchChange {
  /** Full branch name, e.g. `stackflux/default/c1` (no `refs/heads/`). */
  branch: string;
  files: BranchFiles | null;
  /** Commit message: why this Cluster changed (release, values change, disable, ...). */
  message: string;
}

/** A branch as it is in the fleet repository. */
export interface BranchState {
  /** Tip commit. */
  commit: string;
  /** Root tree id of the tip. */
  tree: string;
  /** Top-level folder (addon) → its tree id. */
  addons: ReadonlyMap<string, string>;
}

export interface WriteResult {
  /** Whether anything was pushed (false when every branch already matched). */
  pushed: boolean;
  /** Push attempts (a rejected lease refreshes and retries). */
  attempts: number;
  /** The state after the write of every branch in the batch (`null`: absent). */
  branches: ReadonlyMap<string, BranchState | null>;
  /** Branches whose tip moved in this write (created, updated or deleted). */
  changed: readonly string[];
  /**
   * Branches the fleet host refused (a hook, push rule, fsck or size limit) → its reason and
   * words; each stays at its previous tip and is absent from `branches`. The others landed.
   */
  refused?: ReadonlyMap<string, string>;
  /**
   * Branches not pushed because narrowing a refused push ran out of its budget (absent from
   * `branches`); `deferredReason` is the host's last refusal.
   */
  deferred?: readonly string[];
  deferredReason?: string;
}

/** The fleet writer the ClusterAddon controller uses (implemented over git plumbing). */
export interface FleetWriter {
  /**
   * The state of one branch as last fetched, read from the local bare repository; `undefined`
   * when the branch does not exist. Cheap: no network, no checkout.
   */
  branch(name: string): Promise<BranchState | undefined>;
  /** Fetches every branch under the prefix (one round trip; startup and after a rejected push). */
  refresh(): Promise<void>;
  /** Writes a batch as ONE atomic push of the branches whose tree differs; the rest is untouched. */
  write(changes: readonly BranchChange[]): Promise<WriteResult>;
}
