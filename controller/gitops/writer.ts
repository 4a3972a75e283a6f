// The incremental per-Cluster fleet writer (see branches.ts for the contract). A bare local
// repository mirrors the fleet's `<prefix>*` branches; nothing is checked out and no file is read
// that this writer does not write. A write compares each branch's desired root tree id
// (computed in-process) with its tip's tree, builds the commits of the branches that differ in
// one `git fast-import`, and pushes them in one atomic push, every ref leased on the tip the
// commit was built on: over HTTP(S) one smart-HTTP POST (smart-http.ts says why not `git push`),
// otherwise `git push --atomic --force-with-lease=<ref>:<old>`. Local refs move only after the
// remote accepted the push, so a crash anywhere leaves at most dangling objects: the next write
// plans again from the tips and a tree that already matches gets no commit.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import {
  type GitCredentials,
  gitEnv,
  gitNetwork,
  gitProcessTimeoutMs,
  SourceError,
  scrub,
  validateRepoUrl,
  withoutLocations,
  withRedirectHint,
} from '../sources/git.ts';
import type { BranchChange, BranchFiles, BranchState, FleetWriter, WriteResult } from './branches.ts';
import { type GroupOutcome, narrowingBudget, pushNarrowing } from './narrow.ts';
import { branchTreeIds } from './objects.ts';
import {
  CatFile,
  type CommitSpec,
  commitTree,
  fastImport,
  type Person,
  runGit,
  treeFolders,
} from './plumbing.ts';
import { receivePackCapabilities, SmartHttpError, smartHttpPush } from './smart-http.ts';

export interface GitFleetWriterHooks {
  /** Fault point: runs after the batch's commits are built, before the push. */
  afterCommit?: () => void | Promise<void>;
  /** Fault point: runs after the remote accepted a push, before the local refs move. */
  afterPush?: () => void | Promise<void>;
}

export interface GitFleetWriterConfig {
  url: string;
  /** Every branch this writer manages starts with it, e.g. `stackflux/`. */
  branchPrefix: string;
  cacheDir: string;
  credentials?: GitCredentials;
  author: Person;
  hooks?: GitFleetWriterHooks;
  /** Build-and-push rounds before a write gives up with PushRejected (default 5). */
  maxAttempts?: number;
  /**
   * How to push: `smart-http` (default for http(s) URLs) sends the ref commands and a pack in one
   * POST; `git` runs `git push --atomic` with a lease per ref (the only way for ssh URLs).
   */
  pushTransport?: 'smart-http' | 'git';
  /** `git` transport: upper bound of one push's arguments; a larger batch is split (argv limit). */
  maxPushArgBytes?: number;
  /** Pushes one write may spend narrowing a refused push (default narrowingBudget(n)). */
  maxNarrowingPushes?: number;
}

/** Extra figures of a write (an addition to WriteResult; the contract's members are unchanged). */
export interface GitWriteResult extends WriteResult {
  refused: ReadonlyMap<string, string>;
  deferred: readonly string[];
  deferredReason?: string;
  /** Commits built (including ones a rejected push made obsolete). */
  commits: number;
  /** Pushes sent to the remote. */
  pushes: number;
  /**
   * Wall time of the phases, ms: reading tips, building commits, pushing (packing, the remote's
   * answer, moving local refs); `remote` is the part of `push` spent waiting on the remote.
   */
  ms: { plan: number; build: number; push: number; remote: number };
}

/** What a write did so far (across its attempts). */
interface Tally {
  changed: Set<string>;
  commits: number;
  pushes: number;
  attempts: number;
  ms: { plan: number; build: number; push: number; remote: number };
}

async function timed<T>(into: Tally['ms'], phase: keyof Tally['ms'], fn: () => Promise<T>): Promise<T> {
  const start = performance.now();
  try {
    return await fn();
  } finally {
    into[phase] += performance.now() - start;
  }
}

const round = (ms: number) => Math.round(ms * 10) / 10;

/**
 * A fleet push over smart HTTP sends its body and waits for the report: it must end within this
 * many stall timeouts (`--git-timeout`, default 1m: 5m), or it fails as FleetTimeout. git
 * processes (fetch, `git push`) end after gitProcessTimeoutMs of silence.
 */
const HTTP_PUSH_STALLS = 5;
const LOCAL_TIMEOUT_MS = 600_000;
const SCRATCH_REF = 'refs/stackflux/scratch';
const DEFAULT_MAX_PUSH_ARG_BYTES = 1_000_000;
/**
 * Writes between two `git gc --auto` (keeps loose objects and packs from piling up, and packs
 * the refs when it runs). Refs are otherwise left as files: packing 10,000 of them took 6 s here,
 * more than any fetch or write they slow down (a no-op fetch: 1.3 s loose, 0.5 s packed).
 */
const GC_EVERY = 100;
/** Branches remembered as refused by the host (pushed on their own next time; oldest forgotten). */
const SUSPECTS_REMEMBERED = 1024;
/** At most this many suspects get a push of their own per write; more go together, narrowed. */
const SUSPECTS_ALONE = 8;

/**
 * Why a branch name is not one this writer may manage (undefined: it may). The rules of
 * `git check-ref-format` for a branch, plus: it starts with the prefix and has a name after it.
 */
export function branchNameProblem(name: string, prefix: string): string | undefined {
  if (!name.startsWith(prefix) || name.length === prefix.length)
    return `branch ${JSON.stringify(name)} is not under the fleet prefix ${JSON.stringify(prefix)}`;
  const bad =
    /[\0-\x20\x7f~^:?*[\\]/.test(name) ||
    name.includes('..') ||
    name.includes('@{') ||
    name.includes('//') ||
    name === '@' ||
    name.startsWith('/') ||
    name.endsWith('/') ||
    name.endsWith('.') ||
    name.split('/').some((c) => c.startsWith('.') || c.endsWith('.lock'));
  return bad ? `branch ${JSON.stringify(name)} is not a valid git branch name` : undefined;
}

type FleetFailure = 'FleetUnreachable' | 'PushRejected' | 'PushRefused';

/**
 * The reason of a failed fleet fetch or push, from what went wrong: nothing transferred within
 * the stall timeout (FleetTimeout), credentials refused (FleetAuthenticationFailed), else `base`.
 */
export function fleetReason(base: FleetFailure, output: string): string {
  const words = withoutLocations(output);
  if (/Operation too slow|timed out|timeout|killed by SIGKILL/i.test(words)) return 'FleetTimeout';
  if (/\b401\b|Authentication failed|could not read Username/.test(words)) return 'FleetAuthenticationFailed';
  return base;
}

/** Whether git's push output says a ref was refused because the remote moved (lease, fast-forward). */
export function isPushRejection(output: string): boolean {
  return /\[rejected\]|\[remote rejected\]|stale info|non-fast-forward|fetch first|cannot lock ref|atomic push failed/i.test(
    output,
  );
}

/**
 * Per ref of a `git push --porcelain` (`<flag>\t<from>:<to>\t<summary>`): undefined when
 * pushed, else the reason in its parentheses (`[remote rejected] (pre-receive hook declined)`).
 */
export function parsePorcelain(stdout: string): Map<string, string | undefined> {
  const refs = new Map<string, string | undefined>();
  for (const line of stdout.split('\n')) {
    const m = /^([ +\-*=!])\t[^\t]*:([^\t:]+)\t(.*)$/.exec(line);
    if (m === null) continue;
    const [, flag, ref = '', summary = ''] = m;
    refs.set(ref, flag === '!' ? (/\(([^)]*)\)\s*$/.exec(summary)?.[1] ?? summary).trim() : undefined);
  }
  return refs;
}

/** The remote's own messages in git's output (`remote: ...` lines: a hook's words). */
export function remoteMessages(stderr: string): string {
  return stderr
    .split('\n')
    .filter((l) => l.startsWith('remote: '))
    .map((l) => l.slice('remote: '.length).trim())
    .filter((l) => l !== '')
    .join('; ');
}

/** One ref of a push: `commit` undefined deletes it; `old` undefined means it must not exist yet. */
export interface RefUpdate {
  branch: string;
  old?: string;
  commit?: string;
}

/** The arguments pushing one ref with a lease on its expected old value. */
export function pushRefArgs(u: RefUpdate): [string, string] {
  const ref = `refs/heads/${u.branch}`;
  return [`--force-with-lease=${ref}:${u.old ?? ''}`, `${u.commit ?? ''}:${ref}`];
}

/** Splits updates into pushes whose arguments stay under `maxBytes` (argv has a limit); in order. */
export function chunkPushes(updates: readonly RefUpdate[], maxBytes: number): RefUpdate[][] {
  const chunks: RefUpdate[][] = [];
  let current: RefUpdate[] = [];
  let size = 0;
  for (const u of updates) {
    const bytes = pushRefArgs(u).reduce((n, a) => n + Buffer.byteLength(a) + 1, 0);
    if (current.length > 0 && size + bytes > maxBytes) {
      chunks.push(current);
      current = [];
      size = 0;
    }
    current.push(u);
    size += bytes;
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}

/** A change with its desired tree ids computed (null: delete the branch). */
interface Desired {
  change: BranchChange;
  ids: { tree: string; addons: Map<string, string> } | null;
}

/** What the remote did with a push: refs it took, the reason per branch, the host's words. */
interface PushOutcome {
  accepted: RefUpdate[];
  results: Map<string, string | undefined>;
  message: string;
}

interface Plan {
  /** Branches to commit to (tree differs) with the tip the commit is built on. */
  commits: Array<{ desired: Desired; parent?: string }>;
  deletes: RefUpdate[];
  /** Tip of every branch in the batch as read (undefined: absent). */
  tips: Map<string, string | undefined>;
}

function checkPerson(p: Person): void {
  if (/[<>\n\0]/.test(`${p.name}${p.email}`) || p.name.trim() === '' || p.email.trim() === '')
    throw new SourceError(
      'InvalidConfig',
      'fleet commit author name and email must be non-empty, without <, > or newlines',
    );
}

function validate(changes: readonly BranchChange[], prefix: string): Desired[] {
  const seen = new Set<string>();
  return changes.map((change) => {
    const problem = branchNameProblem(change.branch, prefix);
    if (problem !== undefined) throw new SourceError('InvalidFleetChange', problem);
    if (seen.has(change.branch))
      throw new SourceError('InvalidFleetChange', `branch ${change.branch} appears twice in one write`);
    seen.add(change.branch);
    if (change.files === null) return { change, ids: null };
    try {
      // branchTreeIds checks every path (releases/paths.ts): no NUL, "..", ".git", ...
      return { change, ids: branchTreeIds(change.files) };
    } catch (err) {
      throw new SourceError('InvalidFleetChange', `branch ${change.branch}: ${(err as Error).message}`);
    }
  });
}

export class GitFleetWriter implements FleetWriter {
  readonly gitDir: string;
  readonly #config: GitFleetWriterConfig;
  readonly #env: Record<string, string>;
  #busy: Promise<unknown> = Promise.resolve();
  #catFile: CatFile | undefined;
  #initialized = false;
  /** The local refs may differ from the remote (never fetched, or a push failed halfway). */
  #stale = true;
  #writes = 0;
  #pushCaps: string[] | undefined;
  /**
   * Branches the host refused and that have not landed since. A write pushes them on their own,
   * after the others: the host keeps refusing the same content, and narrowing the whole batch again
   * on every retry would cost every other Cluster bisection pushes (time) for one tenant's content.
   */
  readonly #suspects = new Set<string>();

  constructor(config: GitFleetWriterConfig) {
    validateRepoUrl(config.url);
    checkPerson(config.author);
    if (/[\0-\x20\x7f~^:?*[\\]|\.\./.test(config.branchPrefix))
      throw new SourceError(
        'InvalidConfig',
        `fleet branch prefix ${JSON.stringify(config.branchPrefix)} is not valid in a git ref`,
      );
    this.#config = config;
    this.#env = gitEnv(config.credentials, config.url);
    const key = createHash('sha256').update(config.url).digest('hex').slice(0, 16);
    this.gitDir = join(config.cacheDir, 'fleet-branches', `${key}.git`);
  }

  branch(name: string): Promise<BranchState | undefined> {
    return this.#exclusive(async () => {
      const problem = branchNameProblem(name, this.#config.branchPrefix);
      if (problem !== undefined) throw new SourceError('InvalidFleetChange', problem);
      await this.#init();
      return this.#readState(name);
    });
  }

  refresh(): Promise<void> {
    return this.#exclusive(async () => {
      await this.#init();
      await this.#fetch();
    });
  }

  write(changes: readonly BranchChange[]): Promise<GitWriteResult> {
    return this.#exclusive(async () => {
      const desired = validate(changes, this.#config.branchPrefix);
      await this.#init();
      if (this.#stale) await this.#fetch();
      try {
        return await this.#write(desired);
      } catch (err) {
        // Whatever happened (a push that may or may not have landed, a crash point), the next
        // write starts from the remote's tips.
        this.#stale = true;
        throw err;
      }
    });
  }

  /** Stops the long-lived git process (a later call starts it again). */
  close(): Promise<void> {
    return this.#exclusive(async () => this.#resetReader());
  }

  /** Runs fn after every earlier operation of this instance: one user of the bare repository at a time. */
  #exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#busy.then(fn, fn);
    this.#busy = run.catch(() => undefined);
    return run;
  }

  #git(args: readonly string[], input?: Buffer | string, timeoutMs = LOCAL_TIMEOUT_MS) {
    return runGit(['--git-dir', this.gitDir, ...args], { env: this.#env, input, timeoutMs });
  }

  async #gitOk(args: readonly string[], input?: Buffer | string): Promise<string> {
    const run = await this.#git(args, input);
    if (run.code !== 0)
      throw new Error(
        `git ${args[0]} failed in the fleet cache ${this.gitDir}: ${run.stderr.trim().split('\n').slice(-3).join(' ')}`,
      );
    return run.stdout;
  }

  async #init(): Promise<void> {
    if (this.#initialized) return;
    if (!existsSync(join(this.gitDir, 'objects'))) {
      mkdirSync(this.gitDir, { recursive: true });
      const run = await runGit(['init', '--bare', '--quiet', this.gitDir], { env: this.#env });
      if (run.code !== 0) throw new Error(`git init ${this.gitDir}: ${run.stderr.trim()}`);
    }
    // Maintenance runs in the foreground: no process outlives the command that started it.
    await this.#gitOk(['config', 'gc.autoDetach', 'false']);
    this.#initialized = true;
  }

  #reader(): CatFile {
    this.#catFile ??= new CatFile(this.gitDir, this.#env);
    return this.#catFile;
  }

  /**
   * The reader is restarted after a fetch or a gc (packs replaced under it). Not after our own
   * writes: git reads refs from disk on every lookup and looks for new packs on a miss.
   */
  #resetReader(): void {
    this.#catFile?.close();
    this.#catFile = undefined;
  }

  #fail(reason: FleetFailure, what: string, output: string): SourceError {
    return new SourceError(
      fleetReason(reason, output),
      `${what} ${this.#config.url}: ${withRedirectHint(scrub(output, this.#config.credentials))}`,
    );
  }

  /** One fetch of every `<prefix>*` branch into the same local names, pruning the gone ones. */
  async #fetch(): Promise<void> {
    const spec = `+refs/heads/${this.#config.branchPrefix}*:refs/heads/${this.#config.branchPrefix}*`;
    const run = await this.#git(
      [
        'fetch',
        '--quiet',
        '--prune',
        '--no-tags',
        '--no-write-fetch-head',
        '--update-head-ok',
        this.#config.url,
        spec,
      ],
      undefined,
      gitProcessTimeoutMs(),
    );
    this.#resetReader();
    if (run.code !== 0) {
      this.#stale = true;
      throw this.#fail('FleetUnreachable', 'fetching the fleet repository', run.stderr);
    }
    this.#stale = false;
  }

  async #readTip(branch: string): Promise<{ commit: string; tree: string } | undefined> {
    const obj = await this.#reader().get(`refs/heads/${branch}`);
    if (obj === undefined) return undefined;
    if (obj.type !== 'commit')
      throw new Error(`fleet branch ${branch} points at a ${obj.type}, not a commit`);
    return { commit: obj.oid, tree: commitTree(obj.content) };
  }

  async #readState(branch: string): Promise<BranchState | undefined> {
    const tip = await this.#readTip(branch);
    if (tip === undefined) return undefined;
    const tree = await this.#reader().get(tip.tree);
    if (tree === undefined) throw new Error(`fleet branch ${branch}: tree ${tip.tree} is missing`);
    return { commit: tip.commit, tree: tip.tree, addons: treeFolders(tree.content) };
  }

  /** What each branch needs, from the local tips: a commit (tree differs), a delete, or nothing. */
  async #plan(desired: readonly Desired[]): Promise<Plan> {
    const tips = await Promise.all(desired.map((d) => this.#readTip(d.change.branch)));
    const plan: Plan = { commits: [], deletes: [], tips: new Map() };
    desired.forEach((d, i) => {
      const tip = tips[i];
      plan.tips.set(d.change.branch, tip?.commit);
      if (d.ids === null) {
        if (tip !== undefined) plan.deletes.push({ branch: d.change.branch, old: tip.commit });
      } else if (tip?.tree !== d.ids.tree) {
        plan.commits.push({ desired: d, parent: tip?.commit });
      }
    });
    return plan;
  }

  /** Writes the commits of the plan (one fast-import); each tree equals its desired tree id. */
  async #build(plan: Plan): Promise<RefUpdate[]> {
    const specs: CommitSpec[] = plan.commits.map((c) => ({
      parent: c.parent,
      files: c.desired.change.files as BranchFiles,
      message: c.desired.change.message,
    }));
    const when = Math.floor(Date.now() / 1000);
    const ids = await fastImport(this.gitDir, this.#env, specs, this.#config.author, when, SCRATCH_REF);
    return plan.commits.map((c, i) => ({ branch: c.desired.change.branch, old: c.parent, commit: ids[i] }));
  }

  /** `git push --atomic` with a lease per ref; all refs accepted, or none (rejected: true). */
  async #gitPush(updates: readonly RefUpdate[], ms: Tally['ms']): Promise<PushOutcome> {
    const run = await timed(ms, 'remote', () =>
      this.#git(
        ['push', '--atomic', '--porcelain', '--no-verify', this.#config.url, ...updates.flatMap(pushRefArgs)],
        undefined,
        gitProcessTimeoutMs(),
      ),
    );
    const all = (reason: string | undefined) => new Map(updates.map((u) => [u.branch, reason]));
    if (run.code === 0) return { accepted: [...updates], results: all(undefined), message: '' };
    const refs = parsePorcelain(run.stdout);
    const output = `${run.stdout}\n${run.stderr}`;
    if (refs.size === 0 && !isPushRejection(output))
      throw this.#fail('FleetUnreachable', 'pushing to the fleet repository', run.stderr || run.stdout);
    // An atomic push lands all or nothing, whatever a ref line says.
    const results = new Map(
      updates.map((u) => [u.branch, refs.get(`refs/heads/${u.branch}`) ?? 'atomic push failed']),
    );
    // Refused without a line per ref: treated as before, the remote moved (fetch, plan again).
    if (refs.size === 0) return { accepted: [], results: all('not reported'), message: '' };
    return {
      accepted: [],
      results,
      message: scrub(remoteMessages(run.stderr), this.#config.credentials),
    };
  }

  /** Capabilities of the remote's receive-pack, asked once per instance. */
  async #capabilities(): Promise<string[]> {
    if (this.#pushCaps === undefined) {
      const advertised = await receivePackCapabilities(
        this.#config.url,
        this.#config.credentials,
        gitProcessTimeoutMs(),
      );
      if (!advertised.has('report-status'))
        throw new SmartHttpError('the server does not report push status (no report-status capability)');
      // Without `atomic` the server applies what it can; the per-ref report still tells which.
      // side-band-64k carries a hook's output (why the host refused), `quiet` keeps progress out.
      this.#pushCaps = [
        'report-status',
        ...(advertised.has('atomic') ? ['atomic'] : []),
        ...(advertised.has('side-band-64k') ? ['side-band-64k'] : []),
        ...(advertised.has('quiet') ? ['quiet'] : []),
        'agent=git/stackflux',
      ];
    }
    return this.#pushCaps;
  }

  /** The pack of what the updates add: each new tip minus its old tip (which the remote has). */
  async #pack(updates: readonly RefUpdate[]): Promise<Buffer | undefined> {
    const revs = updates.flatMap((u) =>
      u.commit === undefined ? [] : [u.commit, ...(u.old === undefined ? [] : [`^${u.old}`])],
    );
    if (revs.length === 0) return undefined; // only deletions: no pack
    const run = await runGit(['--git-dir', this.gitDir, 'pack-objects', '--stdout', '--revs', '-q'], {
      env: this.#env,
      input: `${revs.join('\n')}\n`,
      timeoutMs: LOCAL_TIMEOUT_MS,
      binary: true,
    });
    if (run.code !== 0) throw new Error(`git pack-objects failed: ${run.stderr.trim()}`);
    return run.stdoutBuffer;
  }

  /** One POST of every command (leased on its old value) and the pack; per-ref outcome. */
  async #httpPush(updates: readonly RefUpdate[], ms: Tally['ms']): Promise<PushOutcome> {
    try {
      const capabilities = await this.#capabilities();
      const pack = await this.#pack(updates);
      const report = await timed(ms, 'remote', () =>
        smartHttpPush(
          this.#config.url,
          updates.map((u) => ({ ref: `refs/heads/${u.branch}`, old: u.old, new: u.commit })),
          pack,
          {
            credentials: this.#config.credentials,
            capabilities,
            timeoutMs: gitNetwork.stallTimeoutMs * HTTP_PUSH_STALLS,
          },
        ),
      );
      // An unpack failure (fsck, a size limit) refuses every ref as `unpacker error`: content.
      const unpack = report.unpack === 'ok' ? '' : `unpack ${report.unpack}`;
      const outcome: PushOutcome = {
        accepted: [],
        results: new Map(),
        message: scrub(
          [unpack, report.messages ?? ''].filter((m) => m !== '').join('; '),
          this.#config.credentials,
        ),
      };
      for (const u of updates) {
        const ref = `refs/heads/${u.branch}`;
        const reason = report.refs.has(ref)
          ? report.refs.get(ref)
          : report.unpack === 'ok'
            ? 'not reported'
            : 'unpacker error';
        outcome.results.set(u.branch, reason);
        if (reason === undefined) outcome.accepted.push(u);
      }
      return outcome;
    } catch (err) {
      // A body over the host's size limit is the content's fault too: narrowed like a hook's no.
      if (err instanceof SmartHttpError && err.status === 413)
        return {
          accepted: [],
          results: new Map(updates.map((u) => [u.branch, 'request too large (HTTP 413)'])),
          message: scrub(err.message, this.#config.credentials),
        };
      if (err instanceof Error && err.name === 'TimeoutError')
        throw this.#fail(
          'FleetUnreachable',
          'pushing to the fleet repository',
          `no complete answer within ${Math.round((gitNetwork.stallTimeoutMs * HTTP_PUSH_STALLS) / 1000)}s (timed out)`,
        );
      // node:http's own words: ECONNREFUSED, a reset, a TLS failure, ...
      const message = err instanceof Error ? err.message : String(err);
      // The server answered the push with an HTTP error (a policy, a full disk, a broken hook).
      const refused = err instanceof SmartHttpError && err.status !== undefined && err.status !== 401;
      throw this.#fail(
        refused ? 'PushRefused' : 'FleetUnreachable',
        'pushing to the fleet repository',
        message,
      );
    }
  }

  #useHttp(): boolean {
    return (
      (this.#config.pushTransport ?? 'smart-http') === 'smart-http' && /^https?:\/\//.test(this.#config.url)
    );
  }

  /**
   * Pushes updates: one POST over smart HTTP; with `git push`, one atomic push unless too many
   * refs for one argv. Local refs follow what the remote accepted. A push the host refuses is
   * narrowed (narrow.ts): the refused branches are returned, the others land.
   */
  async #pushAll(
    updates: readonly RefUpdate[],
    tally: Tally,
  ): Promise<{ moved: boolean; refused: Map<string, string>; deferred: string[]; deferredReason?: string }> {
    const byBranch = new Map(updates.map((u) => [u.branch, u]));
    const suspects = updates.filter((u) => this.#suspects.has(u.branch));
    const trusted = suspects.length === 0 ? updates : updates.filter((u) => !this.#suspects.has(u.branch));
    const groups = [
      ...(trusted.length === 0
        ? []
        : this.#useHttp()
          ? [trusted]
          : chunkPushes(trusted, this.#config.maxPushArgBytes ?? DEFAULT_MAX_PUSH_ARG_BYTES)),
      ...(suspects.length <= SUSPECTS_ALONE ? suspects.map((u) => [u]) : [suspects]),
    ];
    const pushGroup = async (branches: readonly string[]): Promise<GroupOutcome> => {
      const chunk = branches.map((b) => byBranch.get(b) as RefUpdate);
      tally.pushes++;
      const outcome = this.#useHttp()
        ? await this.#httpPush(chunk, tally.ms)
        : await this.#gitPush(chunk, tally.ms);
      if (outcome.accepted.length > 0) {
        await this.#config.hooks?.afterPush?.();
        await this.#advance(outcome.accepted);
        for (const u of outcome.accepted) tally.changed.add(u.branch);
      }
      return { results: outcome.results, message: outcome.message };
    };
    const narrowed = await pushNarrowing(
      groups.map((g) => g.map((u) => u.branch)),
      pushGroup,
      this.#config.maxNarrowingPushes ?? narrowingBudget(updates.length),
    );
    for (const b of tally.changed) this.#suspects.delete(b);
    for (const b of narrowed.refused.keys()) {
      this.#suspects.delete(b); // re-inserted: the set stays in order of the last refusal
      this.#suspects.add(b);
    }
    while (this.#suspects.size > SUSPECTS_REMEMBERED) {
      const oldest = this.#suspects.values().next();
      if (oldest.done) break;
      this.#suspects.delete(oldest.value);
    }
    if (++this.#writes % GC_EVERY === 0) {
      await this.#git(['gc', '--auto', '--quiet']);
      this.#resetReader();
    }
    return narrowed;
  }

  /** Moves the local refs to what the remote accepted, in one transaction. */
  async #advance(updates: readonly RefUpdate[]): Promise<void> {
    const zero = '0'.repeat(40);
    const lines = updates.map((u) =>
      u.commit === undefined
        ? `delete refs/heads/${u.branch} ${u.old ?? ''}\n`
        : `update refs/heads/${u.branch} ${u.commit} ${u.old ?? zero}\n`,
    );
    await this.#gitOk(['update-ref', '--stdin'], lines.join(''));
  }

  async #write(desired: readonly Desired[]): Promise<GitWriteResult> {
    const maxAttempts = this.#config.maxAttempts ?? 5;
    const tally: Tally = {
      changed: new Set(),
      commits: 0,
      pushes: 0,
      attempts: 0,
      ms: { plan: 0, build: 0, push: 0, remote: 0 },
    };
    // Branches the host refused (kept at their old tip) and ones left unpushed by the budget.
    const refused = new Map<string, string>();
    const deferred = new Set<string>();
    let deferredReason: string | undefined;
    let moved: string[] = [];
    for (;;) {
      const active = desired.filter((d) => !refused.has(d.change.branch) && !deferred.has(d.change.branch));
      const plan = await timed(tally.ms, 'plan', () => this.#plan(active));
      if (plan.commits.length === 0 && plan.deletes.length === 0)
        return {
          ...this.#result(active, plan, tally),
          refused,
          deferred: [...deferred],
          ...(deferredReason !== undefined ? { deferredReason } : {}),
        };
      if (tally.attempts >= maxAttempts)
        throw new SourceError(
          'PushRejected',
          `pushing to the fleet repository ${this.#config.url}: refused ${tally.attempts} times in a row, last: ${moved.slice(0, 5).join(', ')}${moved.length > 5 ? ', ...' : ''}`,
        );
      tally.attempts++;
      const built = await timed(tally.ms, 'build', () => this.#build(plan));
      tally.commits += built.length;
      await this.#config.hooks?.afterCommit?.();
      const updates = [...built, ...plan.deletes];
      const out = await timed(tally.ms, 'push', () => this.#pushAll(updates, tally));
      for (const [branch, reason] of out.refused) refused.set(branch, reason);
      for (const branch of out.deferred) deferred.add(branch);
      if (out.deferred.length > 0) deferredReason = out.deferredReason ?? 'refused by the fleet host';
      if (out.moved) {
        moved = updates.map((u) => u.branch).filter((b) => !tally.changed.has(b) && !refused.has(b));
        await this.#fetch(); // the remote moved: plan again from its tips
      }
    }
  }

  #result(
    desired: readonly Desired[],
    plan: Plan,
    tally: Tally,
  ): Omit<GitWriteResult, 'refused' | 'deferred' | 'deferredReason'> {
    const branches = new Map<string, BranchState | null>();
    for (const d of desired) {
      const commit = plan.tips.get(d.change.branch);
      branches.set(
        d.change.branch,
        d.ids === null || commit === undefined ? null : { commit, tree: d.ids.tree, addons: d.ids.addons },
      );
    }
    return {
      pushed: tally.changed.size > 0,
      attempts: tally.attempts,
      branches,
      changed: desired.map((d) => d.change.branch).filter((b) => tally.changed.has(b)),
      commits: tally.commits,
      pushes: tally.pushes,
      ms: {
        plan: round(tally.ms.plan),
        build: round(tally.ms.build),
        push: round(tally.ms.push),
        remote: round(tally.ms.remote),
      },
    };
  }
}
