// Narrowing a refused fleet push to the branches the host refuses (issue 22 row 6). One
// Cluster's content that the host will not take (a pre-receive hook or push rule, an fsck or size
// limit) must not fail the atomic push of every other Cluster in the batch again and again.
//
// receive-pack's report-status answers per ref. An atomic push fails every ref, but when an
// `update` hook declines one ref the others say `atomic push failure`: the culprit is named. A
// `pre-receive` hook, an unpack (fsck, size) failure or an HTTP 413 refuses the push as a whole
// with the same words for every ref: then the batch is split in halves and each half pushed on its
// own (bisection), so one bad branch among n costs about 2·log2(n) extra pushes. A lease that no
// longer holds (`atomic transaction failed`, `stale info`, ...) is not the content's fault: the
// caller fetches and plans again. The pure parts (verdict, budget) are separate from the loop so
// they can be tested without a server.

/** A ref of an atomic push that failed only because another ref of the same push did. */
const COLLATERAL = /^(atomic push fail(ed|ure)|transaction failed to start)$/i;
/** The remote moved under the lease (or did not say): fetch, plan again, push again. */
const MOVED =
  /stale info|fetch first|non-fast-forward|atomic transaction failed|cannot lock ref|failed to (update|lock|delete)|incorrect old value|not reported/i;

/** Per branch of one push: undefined when the remote took it, else its reason as the remote gave it. */
export type PushResults = ReadonlyMap<string, string | undefined>;

/** What to do after one push of a group of branches. */
export type Verdict =
  | { kind: 'landed' }
  /** A lease did not hold: fetch the remote's tips and plan again. */
  | { kind: 'moved' }
  /** The host named the branches it refuses; `retry` failed only with them and is pushed again. */
  | { kind: 'refused'; refused: Map<string, string>; retry: string[] }
  /** The host refused the group as a whole without naming a branch: push each half on its own. */
  | { kind: 'split'; reason: string; halves: [string[], string[]] };

export function isCollateral(reason: string): boolean {
  return COLLATERAL.test(reason.trim());
}

export function isMoved(reason: string): boolean {
  return MOVED.test(reason);
}

/** Whether a reason is the host refusing the ref's content (not a lease, not collateral). */
export function isContentRefusal(reason: string): boolean {
  return !isCollateral(reason) && !isMoved(reason);
}

/** The verdict on one push of `branches` (in push order) from its per-branch results. */
export function verdict(branches: readonly string[], results: PushResults): Verdict {
  const failed = branches.filter((b) => results.get(b) !== undefined || !results.has(b));
  if (failed.length === 0) return { kind: 'landed' };
  const reasonOf = (b: string) => results.get(b) ?? 'not reported';
  const content = failed.filter((b) => isContentRefusal(reasonOf(b)));
  if (content.length === 0) return { kind: 'moved' };
  const reasons = new Set(content.map(reasonOf));
  // Every ref refused with the same words: a refusal of the whole push (pre-receive, unpack).
  if (content.length === branches.length && branches.length > 1 && reasons.size === 1) {
    const half = Math.ceil(branches.length / 2);
    return {
      kind: 'split',
      reason: reasonOf(branches[0] as string),
      halves: [branches.slice(0, half), branches.slice(half)],
    };
  }
  const refused = new Map(content.map((b) => [b, reasonOf(b)]));
  // A moved lease beside a named culprit: the rest goes again after a fetch, not from here.
  if (failed.some((b) => isMoved(reasonOf(b)))) return { kind: 'moved' };
  return { kind: 'refused', refused, retry: failed.filter((b) => !refused.has(b)) };
}

/**
 * Pushes one write may spend on narrowing beyond its first push of each group: enough to isolate
 * two refused branches by bisection (2·⌈log2 n⌉ each). Beyond it the rest is deferred.
 */
export function narrowingBudget(branches: number): number {
  return 4 * Math.ceil(Math.log2(Math.max(2, branches)));
}

/** One push as the narrowing sees it: per-branch results and what the host said besides. */
export interface GroupOutcome {
  results: PushResults;
  /** The host's own words (hook output, unpack error), already scrubbed; may be empty. */
  message: string;
}

export interface NarrowResult {
  /** Branches the host refused → its reason and words. */
  refused: Map<string, string>;
  /** Branches not pushed because the budget ran out while the host kept refusing. */
  deferred: string[];
  /** Why the deferred ones were not narrowed (the last group refusal). */
  deferredReason?: string;
  /** A lease did not hold: fetch and plan the rest again. */
  moved: boolean;
  /** Pushes made. */
  pushes: number;
}

const MAX_MESSAGE = 600;

/** The reason of a refusal with the host's words, bounded. */
export function refusalText(reason: string, message: string): string {
  const words = message.trim();
  const text = words === '' || words === reason ? reason : `${reason}: ${words}`;
  return text.length > MAX_MESSAGE ? `${text.slice(0, MAX_MESSAGE - 3)}...` : text;
}

/**
 * Pushes `groups` (each one push), narrowing refused ones: named culprits are taken out and the
 * rest pushed again; a whole-group refusal is bisected. Stops at a moved lease (`moved`). At most
 * `budget` pushes beyond one per initial group; what is left then is `deferred`.
 */
export async function pushNarrowing(
  groups: readonly (readonly string[])[],
  push: (branches: readonly string[]) => Promise<GroupOutcome>,
  budget: number,
): Promise<NarrowResult> {
  const out: NarrowResult = { refused: new Map(), deferred: [], moved: false, pushes: 0 };
  const queue = groups.filter((g) => g.length > 0).map((g) => ({ branches: [...g], extra: false }));
  let spent = 0;
  let lastRefusal = '';
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    if (next.extra) {
      if (spent >= budget) {
        out.deferred.push(...next.branches, ...queue.flatMap((g) => g.branches));
        out.deferredReason = lastRefusal;
        break;
      }
      spent++;
    }
    out.pushes++;
    const { results, message } = await push(next.branches);
    const v = verdict(next.branches, results);
    if (v.kind === 'moved') {
      out.moved = true;
      break;
    }
    if (v.kind === 'refused') {
      for (const [b, reason] of v.refused) out.refused.set(b, refusalText(reason, message));
      if (v.retry.length > 0) queue.unshift({ branches: v.retry, extra: true });
    } else if (v.kind === 'split') {
      lastRefusal = refusalText(v.reason, message);
      queue.unshift(...v.halves.filter((h) => h.length > 0).map((branches) => ({ branches, extra: true })));
    }
  }
  return out;
}
