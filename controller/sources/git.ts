// Reading release repositories with git (through simple-git): list tags with ls-remote (spawned
// and read as a stream within the listing bounds of listing.ts) and fetch the tree at a tag. Credentials reach git only through a credential helper that reads
// environment variables of the git child process: never in a URL, an argument, a log line or
// an error message.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, posix } from 'node:path';
import { simpleGit } from 'simple-git';
import { REPO_URL_PATTERN } from '../api/clusterstack.ts';
import type { ReleaseTree } from '../api/release.ts';
import { pathProblem, resolveUnder } from '../releases/paths.ts';
import { releaseTreeFromBytes, treeFileBytes } from '../releases/tree.ts';
import { RELEASE_TREE_LIMITS, type ReleaseTreeLimits, SourceError } from './contract.ts';
import { gitPin } from './egress.ts';
import { GIT_READ_MARKER, killMarked, newGitReadMarker } from './gitkill.ts';
import {
  ByteBudget,
  LineSplitter,
  listingSlot,
  notKeptOf,
  type SievedTags,
  TagSieve,
  withNotKept,
} from './listing.ts';

export { RELEASE_TREE_LIMITS, type ReleaseTreeLimits, SourceError } from './contract.ts';

export interface GitCredentials {
  username?: string;
  password?: string;
  /** The Secret's `token` (also handed to git as the password); an OCI registry sends it as the bearer. */
  token?: string;
  /** The Secret's .dockerconfigjson (a kubernetes.io/dockerconfigjson Secret): OCI sources only. */
  dockerConfigJson?: string;
  /** namespace/name of the tenant's Secret these came from (messages only). */
  secret?: string;
  /** The Secret is labelled stackflux.io/allow-plain-http: "true" (may go over plain http). */
  allowPlainHttp?: boolean;
}

export interface RemoteTag {
  tag: string;
  /** The commit the tag points at (annotated tags are peeled). */
  commit: string;
  /**
   * Committer time of that commit (epoch seconds), where the source reports it: custom channel
   * releases have no release number and are ordered by it (releases/tags.ts releaseOrder).
   */
  time?: number;
}

const allowedUrl = new RegExp(REPO_URL_PATTERN);
/** scp-like user@host:path; neither user nor host may start with "-" (git would read an option). */
const scpUrl = /^[A-Za-z0-9._][A-Za-z0-9._-]*@[A-Za-z0-9][A-Za-z0-9.-]*:[^\s-][^\s]*$/;

/**
 * Only http(s) and ssh URLs (including scp-like user@host:path), as the CRD pattern allows; never
 * file://, git://, ext:: or anything git could read as an option. Every git call also puts "--"
 * before the URL.
 */
export function validateRepoUrl(url: string): void {
  if (/^https?:\/\/[^/]*@/.test(url)) {
    throw new SourceError(
      'InvalidURL',
      'repository URL must not embed credentials; reference a Secret with spec.source.git.secretRef',
    );
  }
  if (!allowedUrl.test(url) && !scpUrl.test(url)) {
    throw new SourceError(
      'InvalidURL',
      `repository URL ${JSON.stringify(url)} must use https://, http:// or ssh://, and its user and host must not start with "-"`,
    );
  }
}

/**
 * How long a git network operation may go without transferring anything (`stackflux run
 * --git-timeout`): a stalled server must end a listing, fetch or push with a clear reason, not
 * hold a worker forever. git's own HTTP transport aborts after this long below 1 byte/s
 * (GIT_HTTP_LOW_SPEED_*, "Operation too slow"); every git process is also killed once it has been
 * silent for a little longer (ssh, or a stall before the transfer starts).
 */
export const gitNetwork = { stallTimeoutMs: 60_000 };

/** Sets the stall timeout of every git network operation of this process (the CLI flag). */
export function configureGitNetwork(o: { stallTimeoutMs: number }): void {
  if (!Number.isFinite(o.stallTimeoutMs) || o.stallTimeoutMs < 1000)
    throw new Error('the git network timeout must be at least 1s');
  gitNetwork.stallTimeoutMs = o.stallTimeoutMs;
}

/** The kill timeout of a git process doing network I/O: the stall timeout plus a margin for git to say why. */
export function gitProcessTimeoutMs(): number {
  return gitNetwork.stallTimeoutMs + 15_000;
}

/**
 * The empty folder every git child of this process sees as HOME and XDG_CONFIG_HOME: private
 * (mkdtemp makes it 0700), created once per process, never the release cache. Nothing a release
 * can write is there, so no `.gitconfig`, `.netrc` or `git/config` of anyone else's reaches git.
 */
let isolatedHome: string | undefined;
export function gitHome(): string {
  if (isolatedHome === undefined || !existsSync(isolatedHome)) {
    const home = mkdtempSync(join(tmpdir(), 'stackflux-git-home-'));
    process.once('exit', () => rmSync(home, { recursive: true, force: true }));
    isolatedHome = home;
  }
  return isolatedHome;
}

/** Git configuration every git child gets through GIT_CONFIG_COUNT/KEY/VALUE (config of this process, never of a file). */
const ISOLATION_CONFIG: ReadonlyArray<readonly [string, string]> = [
  // Only the transports a repository URL may use (validateRepoUrl): never ext::, file:// or git://.
  ['protocol.allow', 'never'],
  ['protocol.https.allow', 'always'],
  ['protocol.http.allow', 'always'],
  ['protocol.ssh.allow', 'always'],
  // A redirect could take the credential to another host ("initial" still follows one on the
  // first request, to any host); a repository that moved is configured with its new URL.
  ['http.followRedirects', 'false'],
];

/** The scheme://host[:port] a credential is for, from an http(s) URL; undefined for ssh and anything else. */
export function credentialScope(url: string): string | undefined {
  const m = /^(https?):\/\/([^/?#@\s]+)/.exec(url);
  return m === null ? undefined : `${m[1]}://${m[2]}`;
}

/**
 * A credential helper that answers only when git asks for `scheme` and `host` (the lines git
 * writes to its stdin): with credential.<scope>.helper git asks no other host anyway, and the
 * helper refuses on its own should git ever ask it for another. The secret comes from this
 * process's environment, never argv.
 */
const CREDENTIAL_HELPER =
  '!f() { test "$1" = get || exit 0; ok=; while IFS= read -r l; do case "$l" in protocol=*|host=*) case "$l" in "protocol=$STACKFLUX_GIT_PROTOCOL"|"host=$STACKFLUX_GIT_HOST") ok="$ok+";; *) exit 0;; esac;; "") break;; esac; done; test "$ok" = "++" || exit 0; printf "username=%s\\npassword=%s\\n" "$STACKFLUX_GIT_USERNAME" "$STACKFLUX_GIT_PASSWORD"; }; f';

/**
 * The whole environment of every git child process of the controller (simple-git and spawned
 * git alike): no terminal prompt, no system or global config (GIT_CONFIG_GLOBAL=/dev/null, HOME
 * an empty private folder), only the https/http/ssh transports, no redirects, git's stall
 * timeout, and with credentials a helper scoped to the scheme and host of `url`. Credentials for
 * an ssh or unparsable URL are not handed to git at all. `pin` (egress.ts gitPin): host:port:address
 * git connects to instead of resolving the host again after the outbound policy checked it.
 */
export function gitEnv(creds?: GitCredentials, url?: string, pin?: string): Record<string, string> {
  const home = gitHome();
  const env: Record<string, string> = {
    GIT_TERMINAL_PROMPT: '0',
    GIT_ASKPASS: '/bin/false',
    SSH_ASKPASS: '/bin/false',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_HTTP_LOW_SPEED_LIMIT: '1',
    GIT_HTTP_LOW_SPEED_TIME: String(Math.max(1, Math.round(gitNetwork.stallTimeoutMs / 1000))),
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: home,
    XDG_CONFIG_HOME: home,
  };
  const config: Array<readonly [string, string]> = [...ISOLATION_CONFIG];
  if (pin !== undefined) config.push(['http.curloptResolve', pin]);
  const scope = url === undefined ? undefined : credentialScope(url);
  if ((creds?.username !== undefined || creds?.password !== undefined) && scope !== undefined) {
    const [protocol, host] = scope.split('://') as [string, string];
    env.STACKFLUX_GIT_USERNAME = creds.username ?? 'git';
    env.STACKFLUX_GIT_PASSWORD = creds.password ?? '';
    env.STACKFLUX_GIT_PROTOCOL = protocol;
    env.STACKFLUX_GIT_HOST = host;
    config.push([`credential.${scope}.helper`, CREDENTIAL_HELPER]);
  }
  env.GIT_CONFIG_COUNT = String(config.length);
  config.forEach(([key, value], i) => {
    env[`GIT_CONFIG_KEY_${i}`] = key;
    env[`GIT_CONFIG_VALUE_${i}`] = value;
  });
  return env;
}

/** Removes anything that could be a credential from git's error output before it is shown. */
export function scrub(text: string, creds?: GitCredentials): string {
  let out = text.replace(/(https?:\/\/)[^/@\s]+@/g, '$1***@');
  for (const secret of [creds?.password, creds?.username]) {
    if (secret && secret.length >= 3) out = out.split(secret).join('***');
  }
  return out.trim().split('\n').slice(-3).join(' ');
}

/**
 * Git's message, plus what to do when the server answered with a redirect: git follows none
 * (http.followRedirects=false in gitEnv), so the repository must be configured at its real URL.
 */
export function withRedirectHint(message: string): string {
  return /returned error: 30[1278]\b/.test(message)
    ? `${message} (stackflux follows no HTTP redirect, so credentials never go to another host: configure the URL the server redirects to)`
    : message;
}

/**
 * Git's words without the places it names: quoted paths, URLs, host:port and "port N". A reason
 * read from what is left cannot come from a closed port such as 44013 (not HTTP 401) or from a
 * repository named "timeout".
 */
export function withoutLocations(message: string): string {
  return message
    .replace(/'[^']*'/g, "''")
    .replace(/\b[a-z][a-z0-9+.-]*:\/\/\S+/gi, '')
    .replace(/[\w.-]+:\d+\b/g, '')
    .replace(/\bport \d+/gi, 'port');
}

/**
 * The reason of a failed git network operation, from git's own words (withoutLocations). HTTP
 * statuses count only as git reports them ("returned error: 403").
 */
export function classifyGitFailure(message: string): string {
  const words = withoutLocations(message);
  if (/Operation too slow|timed out|timeout/i.test(words)) return 'SourceTimeout';
  if (/Authentication failed|returned error: 40[13]\b|could not read Username/i.test(words))
    return 'AuthenticationFailed';
  if (/not found|does not appear to be a git repository|returned error: 404\b/i.test(words))
    return 'RepositoryNotFound';
  return 'SourceUnreachable';
}

/** The GIT_CONFIG_KEY_n/VALUE_n names gitEnv may set (isolation settings plus the credential helper). */
const CONFIG_ENV_NAMES = Array.from({ length: ISOLATION_CONFIG.length + 1 }, (_, i) => [
  `GIT_CONFIG_KEY_${i}`,
  `GIT_CONFIG_VALUE_${i}`,
]).flat();

/**
 * simple-git (v4) refuses GIT_ASKPASS, GIT_CONFIG_GLOBAL, env-configured credential helpers and
 * protocol settings, and unlisted GIT_* variables unless allowed. gitEnv sets exactly these
 * itself (never from user input).
 */
export const SIMPLE_GIT_GUARDS = {
  unsafe: {
    allowUnsafeAskPass: true,
    allowUnsafeCredentialHelper: true,
    allowUnsafeConfigEnvCount: true,
    allowUnsafeConfigPaths: true,
    allowUnsafeProtocolOverride: true,
  },
  allowEnvironment: [
    'GIT_TERMINAL_PROMPT',
    'GIT_ASKPASS',
    'SSH_ASKPASS',
    'GIT_CONFIG_NOSYSTEM',
    'GIT_CONFIG_GLOBAL',
    'GIT_HTTP_LOW_SPEED_LIMIT',
    'GIT_HTTP_LOW_SPEED_TIME',
    'GIT_CONFIG_COUNT',
    ...CONFIG_ENV_NAMES,
    'GIT_AUTHOR_NAME',
    'GIT_AUTHOR_EMAIL',
    'GIT_COMMITTER_NAME',
    'GIT_COMMITTER_EMAIL',
  ],
} as unknown as Partial<NonNullable<Parameters<typeof simpleGit>[0]>>;

/**
 * simple-git for a request to `url`, after the outbound policy allowed its host (throws
 * EgressRefused). `block`: simple-git kills git once it has been silent this long (a stalled
 * server); `abort`: kills it when the read's total deadline passes (a server dripping a byte a
 * second is never silent, and GIT_HTTP_LOW_SPEED_LIMIT=1 keeps it alive).
 */
async function git(creds: GitCredentials | undefined, url: string, cwd?: string, signal?: AbortSignal) {
  const pin = await gitPin(url);
  const timeout = { block: gitProcessTimeoutMs() };
  const abort = signal !== undefined ? { abort: signal } : {};
  const g =
    cwd === undefined
      ? simpleGit({ ...SIMPLE_GIT_GUARDS, timeout, ...abort })
      : simpleGit({ ...SIMPLE_GIT_GUARDS, baseDir: cwd, timeout, ...abort });
  if (signal === undefined) return g.env(gitEnv(creds, url, pin));
  // simple-git stops git itself; its transport helpers are found by this marker (./gitkill.ts).
  const marker = newGitReadMarker();
  const onAbort = (): void => killMarked(marker);
  if (signal.aborted) onAbort();
  else signal.addEventListener('abort', onAbort, { once: true });
  return g.env({ ...gitEnv(creds, url, pin), [GIT_READ_MARKER]: marker });
}

/** Parses `git ls-remote --tags` output: peeled `^{}` lines win over the tag object's own id. */
export function parseLsRemoteTags(output: string): RemoteTag[] {
  const byTag = new Map<string, { direct?: string; peeled?: string }>();
  for (const line of output.split('\n')) {
    const [sha, ref] = line.trim().split(/\s+/);
    if (!sha || !ref?.startsWith('refs/tags/')) continue;
    const peeled = ref.endsWith('^{}');
    const tag = ref.slice('refs/tags/'.length, peeled ? -3 : undefined);
    const entry = byTag.get(tag) ?? {};
    if (peeled) entry.peeled = sha;
    else entry.direct = sha;
    byTag.set(tag, entry);
  }
  return [...byTag.entries()]
    .map(([tag, e]) => ({ tag, commit: e.peeled ?? e.direct ?? '' }))
    .filter((t) => t.commit !== '')
    .sort((a, b) => (a.tag < b.tag ? -1 : a.tag > b.tag ? 1 : 0));
}

export async function listTags(
  url: string,
  creds?: GitCredentials,
  o: { signal?: AbortSignal } = {},
): Promise<RemoteTag[]> {
  validateRepoUrl(url);
  let tags: SievedTags<RemoteTag>;
  try {
    // The outbound policy first (egress.ts): git connects only to the address it checked.
    const pin = await gitPin(url);
    tags = await listingSlot(() => lsRemoteTags(url, creds, pin, o.signal));
  } catch (err) {
    if (err instanceof SourceError)
      throw err.message.startsWith('listing tags of ')
        ? err
        : new SourceError(err.reason, `listing tags of ${url}: ${scrub(err.message, creds)}`);
    const message = withRedirectHint(scrub(err instanceof Error ? err.message : String(err), creds));
    throw new SourceError(classifyGitFailure(message), `listing tags of ${url}: ${message}`);
  }
  return withNotKept(await withCommitTimes(url, tags, creds, o.signal), notKeptOf(tags));
}

/** One ls-remote line: an object id (at most 64 hex), a tab, refs/tags/, an OCI-length tag, ^{}. */
const MAX_LS_REMOTE_LINE = 256;

/**
 * Keeps the ls-remote lines of the tags a TagSieve keeps (the peeled ^{} line of a kept tag too),
 * line by line as they arrive; an overlong line (undefined) and every other tag are only counted.
 */
export class LsRemoteSieve {
  private readonly sieve = new TagSieve();
  private readonly keptTags = new Set<string>();
  private readonly lines: string[] = [];

  line(line: string | undefined): void {
    if (line === undefined) {
      this.sieve.notKept += 1;
      return;
    }
    const ref = line.trim().split(/\s+/)[1];
    if (ref === undefined || !ref.startsWith('refs/tags/')) return;
    const peeled = ref.endsWith('^{}');
    const tag = ref.slice('refs/tags/'.length, peeled ? -3 : undefined);
    // ls-remote sorts by ref, so a tag's own line comes before its peeled line.
    if (peeled ? this.keptTags.has(tag) : this.sieve.keep(tag)) {
      this.keptTags.add(tag);
      this.lines.push(line);
    }
  }

  tags(): SievedTags<RemoteTag> {
    return withNotKept(parseLsRemoteTags(this.lines.join('\n')), this.sieve.notKept);
  }
}

/**
 * `git ls-remote --tags`, its output read as a stream within the listing byte budget (more is
 * ListingTooLarge and git is killed), through an LsRemoteSieve; killed after gitProcessTimeoutMs
 * of silence, as simple-git's block timeout did. A failing git rejects with its stderr.
 */
function lsRemoteTags(
  url: string,
  creds: GitCredentials | undefined,
  pin: string | undefined,
  signal: AbortSignal | undefined,
): Promise<SievedTags<RemoteTag>> {
  return new Promise((resolve, reject) => {
    const budget = new ByteBudget(`listing tags of ${url}`);
    const sieve = new LsRemoteSieve();
    const lines = new LineSplitter(MAX_LS_REMOTE_LINE, (line) => sieve.line(line));
    // Killing git leaves its transport helpers running (a dripping server keeps them alive):
    // they carry this marker and are killed with it (./gitkill.ts).
    const marker = newGitReadMarker();
    const child = spawn('git', ['ls-remote', '--tags', '--', url], {
      env: { ...gitEnv(creds, url, pin), [GIT_READ_MARKER]: marker },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    let failure: Error | undefined;
    const stop = (err: Error): void => {
      failure ??= err;
      child.kill('SIGKILL');
      killMarked(marker);
    };
    const onAbort = (): void => stop(signal?.reason instanceof Error ? signal.reason : new Error('aborted'));
    if (signal?.aborted === true) onAbort();
    else signal?.addEventListener('abort', onAbort, { once: true });
    const silence = gitProcessTimeoutMs();
    const timer = setTimeout(
      () => stop(new Error(`git ls-remote timed out (silent for ${silence / 1000} s)`)),
      silence,
    );
    const heard = (): void => {
      timer.refresh();
    };
    child.stdout.on('data', (chunk: Buffer) => {
      if (failure !== undefined) return;
      heard();
      try {
        budget.take(chunk.length);
        lines.push(chunk);
      } catch (err) {
        stop(err as Error);
      }
    });
    child.stderr.on('data', (chunk: Buffer) => {
      heard();
      if (stderr.length < 4096) stderr += chunk.toString('utf8');
    });
    child.on('error', (err) => stop(err));
    child.on('close', (code) => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      if (failure !== undefined) return reject(failure);
      if (code !== 0) return reject(new Error(stderr.trim() || `git ls-remote exited with ${code}`));
      lines.end();
      resolve(sieve.tags());
    });
  });
}

/** A custom channel release tag (…-v0-<channel>-<suffix>): the only tags ordered by commit time. */
const CUSTOM_TAG = /-v0-[a-z0-9]+-[a-z0-9]+$/;
/** Commit → committer time (epoch seconds); commits never change, so entries never go stale. */
const commitTimes = new Map<string, number>();
const MAX_COMMIT_TIMES = 100_000;

/**
 * Adds commit times to custom channel tags. ls-remote reports no times, so the commits not seen
 * before are fetched once — one shallow fetch of just those tags' commit objects (a tree:0
 * filter where the server supports it) into a temporary repository — and remembered by commit
 * id: a steady listing costs nothing, a new custom tag one small fetch. A failed fetch leaves the
 * times unknown (those tags then order by name) and never fails the listing.
 */
async function withCommitTimes(
  url: string,
  tags: RemoteTag[],
  creds: GitCredentials | undefined,
  signal: AbortSignal | undefined,
): Promise<RemoteTag[]> {
  const missing = tags.filter((t) => CUSTOM_TAG.test(t.tag) && !commitTimes.has(t.commit));
  if (missing.length > 0) {
    const tmp = mkdtempSync(join(tmpdir(), 'stackflux-times-'));
    try {
      await runLocalGit(tmp, ['init', '-q', '--bare', tmp]);
      await (await git(creds, url, tmp, signal)).fetch([
        '--depth=1',
        '--filter=tree:0',
        '--no-tags',
        '--',
        url,
        ...missing.map((t) => `+refs/tags/${t.tag}:refs/tags/${t.tag}`),
      ]);
      const out = await runLocalGit(tmp, [
        'for-each-ref',
        '--format=%(objectname) %(committerdate:unix) %(*objectname) %(*committerdate:unix)',
        'refs/tags',
      ]);
      for (const line of out.stdout.toString('utf8').split('\n')) {
        const [direct, directTime, peeled, peeledTime] = line.trim().split(' ');
        const [commit, time] = peeled ? [peeled, peeledTime] : [direct, directTime];
        if (commit && time && /^[0-9]+$/.test(time)) {
          if (commitTimes.size >= MAX_COMMIT_TIMES) commitTimes.clear();
          commitTimes.set(commit, Number(time));
        }
      }
    } catch {
      // Unknown times only change the order of custom channel releases, to by-name.
    } finally {
      await removeTree(tmp);
    }
  }
  return tags.map((t) => {
    const time = CUSTOM_TAG.test(t.tag) ? commitTimes.get(t.commit) : undefined;
    return time === undefined ? t : { ...t, time };
  });
}

const MODE_FILE = '100644';
const MODE_EXECUTABLE = '100755';
const MODE_TREE = '040000';
const MODE_SYMLINK = '120000';
const MODE_GITLINK = '160000';

/** What a Git tree entry that is not a regular file or folder is, in words for a condition message. */
function entryKind(mode: string): string {
  if (mode === MODE_SYMLINK) return 'a symbolic link';
  if (mode === MODE_GITLINK) return 'a submodule (gitlink)';
  if (mode === MODE_TREE) return 'a folder';
  return `a special file (mode ${mode})`;
}

interface TreeEntry {
  mode: string;
  type: string;
  oid: string;
  /** Blob size in bytes; undefined for trees and gitlinks. */
  size: number | undefined;
  path: string;
}

interface GitRun {
  stdout: Buffer;
  /** True when the run was stopped because stdout exceeded maxStdout. */
  truncated: boolean;
}

/**
 * Runs a local git command (no network, no credentials) and returns stdout. With `maxEntries`,
 * stops the process once stdout holds more NUL-terminated records than that (a huge tree is not
 * listed to the end).
 */
function runLocalGit(
  gitDir: string,
  args: string[],
  o: { input?: string; maxEntries?: number } = {},
): Promise<GitRun> {
  return new Promise((resolve, reject) => {
    const child = spawn('git', [`--git-dir=${gitDir}`, ...args], {
      env: gitEnv(),
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const chunks: Buffer[] = [];
    let stderr = '';
    let entries = 0;
    let truncated = false;
    child.stdout.on('data', (chunk: Buffer) => {
      if (truncated) return;
      chunks.push(chunk);
      if (o.maxEntries !== undefined) {
        for (const byte of chunk) if (byte === 0) entries += 1;
        if (entries > o.maxEntries) {
          truncated = true;
          child.kill('SIGKILL');
        }
      }
    });
    child.stderr.on('data', (chunk: Buffer) => {
      if (stderr.length < 4096) stderr += chunk.toString('utf8');
    });
    child.on('error', reject);
    child.on('close', (code) => {
      if (truncated || code === 0) resolve({ stdout: Buffer.concat(chunks), truncated });
      else reject(new Error(`git ${args[0]} failed (${code}): ${stderr.trim()}`));
    });
    child.stdin.on('error', () => undefined);
    child.stdin.end(o.input ?? '');
  });
}

/** Parses `git ls-tree -z -l` records: "<mode> <type> <oid> <size>\t<path>\0". */
export function parseLsTree(out: Buffer): TreeEntry[] {
  const entries: TreeEntry[] = [];
  for (const record of out.toString('utf8').split('\0')) {
    if (record === '') continue;
    const tab = record.indexOf('\t');
    if (tab < 0) continue;
    const [mode = '', type = '', oid = '', size = '-'] = record.slice(0, tab).trim().split(/\s+/);
    entries.push({
      mode,
      type,
      oid,
      size: size === '-' ? undefined : Number(size),
      path: record.slice(tab + 1),
    });
  }
  return entries;
}

/** Parses `git cat-file --batch` output for the given object ids, in order. */
export function parseCatFileBatch(out: Buffer, count: number): Buffer[] {
  const blobs: Buffer[] = [];
  let at = 0;
  for (let i = 0; i < count; i++) {
    const eol = out.indexOf(0x0a, at);
    if (eol < 0) throw new Error('git cat-file output ended early');
    const header = out.subarray(at, eol).toString('utf8').split(' ');
    if (header[1] === 'missing' || header.length < 3) throw new Error(`object ${header[0]} is missing`);
    const size = Number(header[2]);
    blobs.push(out.subarray(eol + 1, eol + 1 + size));
    at = eol + 1 + size + 1;
  }
  return blobs;
}

/**
 * The folder `segments` of `commit` as a tree id, walking one level at a time so that a symbolic
 * link or submodule on the way is named instead of silently yielding nothing. undefined: missing.
 */
async function subtreeOf(gitDir: string, commit: string, segments: string[]): Promise<string | undefined> {
  let tree = `${commit}^{tree}`;
  for (let i = 0; i < segments.length; i++) {
    const name = segments[i];
    const entry = parseLsTree((await runLocalGit(gitDir, ['ls-tree', '-z', '-l', tree])).stdout).find(
      (e) => e.path === name,
    );
    if (entry === undefined) return undefined;
    if (entry.mode !== MODE_TREE) {
      throw new SourceError(
        'InvalidRelease',
        `${segments.slice(0, i + 1).join('/')} is ${entryKind(entry.mode)}, not a folder: the stack path must be a plain folder`,
      );
    }
    tree = entry.oid;
  }
  return tree;
}

/**
 * Reads the files of `commit` below `segments` from the Git object database (never from a
 * checkout, so nothing outside the release can be reached): every entry must be a regular or
 * executable file; symbolic links, submodules and anything else make the release invalid, naming
 * the paths. Counts and sizes are checked from the listing before any content is read.
 */
export async function readTreeFromGit(
  gitDir: string,
  commit: string,
  segments: string[],
  limits: ReleaseTreeLimits = RELEASE_TREE_LIMITS,
): Promise<ReleaseTree> {
  const tree = await subtreeOf(gitDir, commit, segments);
  if (tree === undefined) return new Map();
  const listing = await runLocalGit(gitDir, ['ls-tree', '-r', '-z', '-l', tree], {
    maxEntries: limits.maxFiles,
  });
  const entries = parseLsTree(listing.stdout);
  const where = (p: string): string => [...segments, p].join('/');
  // Git's fsck only warns about names such as `..` or `.git`, and a fetch does not fsck: a
  // crafted tree may hold them, and written to the cache they would land outside it.
  const unsafe = entries.flatMap((e) => pathProblem(where(e.path)) ?? []);
  if (unsafe.length > 0) {
    const more = unsafe.length > 5 ? ` and ${unsafe.length - 5} more` : '';
    throw new SourceError(
      'InvalidRelease',
      `${unsafe.slice(0, 5).join('; ')}${more}: every path of a release must be relative, without empty, ".", ".." or ".git" components, backslashes or NUL`,
    );
  }
  if (listing.truncated || entries.length > limits.maxFiles) {
    throw new SourceError(
      'InvalidRelease',
      `the release has more than ${limits.maxFiles} files below ${segments.join('/') || 'the repository root'} (limit ${limits.maxFiles})`,
    );
  }
  const rejected = entries.filter((e) => e.mode !== MODE_FILE && e.mode !== MODE_EXECUTABLE);
  if (rejected.length > 0) {
    const named = rejected.slice(0, 5).map((e) => `${where(e.path)} is ${entryKind(e.mode)}`);
    const more = rejected.length > 5 ? ` and ${rejected.length - 5} more` : '';
    throw new SourceError(
      'InvalidRelease',
      `${named.join('; ')}${more}: a release may hold only regular files (no symbolic links, submodules or special files)`,
    );
  }
  const total = entries.reduce((sum, e) => sum + (e.size ?? 0), 0);
  if (total > limits.maxBytes) {
    throw new SourceError(
      'InvalidRelease',
      `the release's files add up to ${total} bytes, more than the limit of ${limits.maxBytes} bytes`,
    );
  }
  if (entries.length === 0) return new Map();
  const batch = await runLocalGit(gitDir, ['cat-file', '--batch'], {
    input: `${entries.map((e) => e.oid).join('\n')}\n`,
  });
  const blobs = parseCatFileBatch(batch.stdout, entries.length);
  return releaseTreeFromBytes(entries.map((e, i) => [e.path, blobs[i] ?? Buffer.alloc(0)] as const));
}

/** Reads a tree this module wrote to its cache; anything but folders and regular files is refused. */
function readCachedTree(root: string): ReleaseTree {
  const files = new Map<string, Buffer>();
  const walk = (dir: string, prefix: string) => {
    for (const entry of readdirSync(dir).sort()) {
      const rel = prefix === '' ? entry : `${prefix}/${entry}`;
      // A cache written before paths were checked may hold a release that is invalid now.
      const problem = pathProblem(rel);
      if (problem !== undefined) throw new SourceError('InvalidRelease', problem);
      const full = resolveUnder(root, rel);
      const st = lstatSync(full);
      if (st.isDirectory()) walk(full, rel);
      else if (st.isFile()) files.set(rel, readFileSync(full));
      else throw new Error(`the release cache holds ${rel}, which is not a regular file; remove ${root}`);
    }
  };
  if (existsSync(root)) walk(root, '');
  return releaseTreeFromBytes(files);
}

const COMPLETE = '.stackflux-complete';
const CACHE_LAYOUT = 'binary-files';
const INVALID = '.stackflux-invalid';
const TREE_DIR = 'tree';

/** Writes a cache entry's files below tmp/tree (folders created as needed). */
function writeCachedTree(root: string, files: ReleaseTree): void {
  mkdirSync(root, { recursive: true });
  for (const [rel, content] of treeFileBytes(files)) {
    const full = resolveUnder(root, rel);
    mkdirSync(dirname(full), { recursive: true });
    writeFileSync(full, content);
  }
}

/** A cache entry (complete or invalid) as it is on disk; undefined when there is none. */
function readCacheEntry(dir: string): ReleaseTree | undefined {
  if (existsSync(join(dir, INVALID))) {
    throw new SourceError('InvalidRelease', readFileSync(join(dir, INVALID), 'utf8'));
  }
  if (existsSync(join(dir, COMPLETE))) return readCachedTree(join(dir, TREE_DIR));
  return undefined;
}

/** Moves a finished temporary entry into place; a concurrent writer that got there first wins. */
function publish(tmp: string, dir: string): void {
  try {
    renameSync(tmp, dir);
  } catch {
    if (existsSync(join(dir, COMPLETE)) || existsSync(join(dir, INVALID))) {
      rmSync(tmp, { recursive: true, force: true });
      return;
    }
    // A leftover without a marker (an older cache layout, or a crash): replace it.
    rmSync(dir, { recursive: true, force: true });
    renameSync(tmp, dir);
  }
}

/**
 * Removes a scratch folder (a bare repository of a fetch) off the event loop: rmSync of one held
 * the controller for up to half a second under load (profiled in the hostile bench).
 */
function removeTree(dir: string): Promise<void> {
  return rm(dir, { recursive: true, force: true }).catch(() => undefined);
}

/** In-process de-duplication: one fetch per cache entry at a time. */
const inflight = new Map<string, Promise<ReleaseTree>>();

/**
 * The release tree cached at `<cacheDir>/trees/<key>`, made by `produce` when there is none: the
 * key must name content that never changes (a commit, a digest), so a cached tree (or the finding
 * that it is invalid: `produce` threw InvalidRelease) holds forever. Concurrent calls for the same
 * key share one `produce`; separate processes each produce into a unique temporary folder
 * (`scratch` is a folder below it `produce` may use) and publish it with an atomic rename.
 */
export function cacheReleaseTree(
  cacheDir: string,
  key: string,
  produce: (scratch: string) => Promise<ReleaseTree>,
): Promise<ReleaseTree> {
  const running = inflight.get(key);
  if (running !== undefined) return running;
  const promise = cacheOnce(join(cacheDir, 'trees', key), produce).finally(() => inflight.delete(key));
  inflight.set(key, promise);
  return promise;
}

async function cacheOnce(
  dir: string,
  produce: (scratch: string) => Promise<ReleaseTree>,
): Promise<ReleaseTree> {
  const cached = readCacheEntry(dir);
  if (cached !== undefined) return cached;
  mkdirSync(dirname(dir), { recursive: true });
  const tmp = mkdtempSync(`${dir}.tmp-`);
  try {
    const scratch = join(tmp, 'scratch');
    let files: ReleaseTree | undefined;
    try {
      files = await produce(scratch);
    } catch (err) {
      if (!(err instanceof SourceError && err.reason === 'InvalidRelease')) throw err;
      writeFileSync(join(tmp, INVALID), err.message);
    }
    await removeTree(scratch);
    if (files !== undefined) {
      writeCachedTree(join(tmp, TREE_DIR), files);
      // The marker is written before the rename: a crash leaves only a temporary folder.
      writeFileSync(join(tmp, COMPLETE), '');
    }
    publish(tmp, dir);
  } catch (err) {
    await removeTree(tmp);
    throw err;
  }
  const published = readCacheEntry(dir);
  if (published === undefined)
    throw new SourceError('SourceUnavailable', `the release cache ${dir} vanished`);
  return published;
}

/**
 * The tree of a release at a tag, below `path`, read from Git objects and cached on disk by
 * (url, commit, path) (cacheReleaseTree): a commit's content never changes, and a moved tag simply
 * resolves to another commit.
 */
export function fetchReleaseTree(
  url: string,
  tag: string,
  commit: string,
  path: string,
  cacheDir: string,
  creds?: GitCredentials,
  limits: ReleaseTreeLimits = RELEASE_TREE_LIMITS,
  signal?: AbortSignal,
): Promise<ReleaseTree> {
  try {
    validateRepoUrl(url);
  } catch (err) {
    return Promise.reject(err);
  }
  // The stack path: "" or "." is the root; anything else must be a plain relative path.
  const stackPath = posix.normalize(path || '.').replace(/\/+$/, '');
  const problem = stackPath === '.' ? undefined : pathProblem(stackPath);
  if (problem !== undefined) return Promise.reject(new SourceError('InvalidPath', `stack ${problem}`));
  const segments = stackPath === '.' ? [] : stackPath.split('/');
  // CACHE_LAYOUT: entries written before binary files were kept byte for byte hold them mangled
  // into UTF-8; a new key makes those entries unused instead of wrong.
  const key = createHash('sha256')
    .update(
      `${CACHE_LAYOUT}\n${url}\n${commit}\n${segments.join('/')}\n${limits.maxFiles}\n${limits.maxBytes}`,
    )
    .digest('hex')
    .slice(0, 32);
  return cacheReleaseTree(cacheDir, key, (gitDir) =>
    fetchTreeInto(gitDir, url, tag, commit, segments, creds, limits, signal),
  );
}

/** Shallow-fetches one ref or commit id into the bare repository gitDir; returns the fetched commit. */
async function fetchCommit(
  gitDir: string,
  url: string,
  what: string,
  creds: GitCredentials | undefined,
  signal: AbortSignal | undefined,
): Promise<string> {
  await (await git(creds, url, gitDir, signal)).fetch(['--depth=1', '--no-tags', '--', url, what]);
  return (await runLocalGit(gitDir, ['rev-parse', '--verify', 'FETCH_HEAD^{commit}'])).stdout
    .toString('utf8')
    .trim();
}

async function fetchTreeInto(
  gitDir: string,
  url: string,
  tag: string,
  commit: string,
  segments: string[],
  creds: GitCredentials | undefined,
  limits: ReleaseTreeLimits,
  signal: AbortSignal | undefined,
): Promise<ReleaseTree> {
  try {
    await runLocalGit(gitDir, ['init', '-q', '--bare', gitDir]);
    const fetched = await fetchCommit(gitDir, url, `refs/tags/${tag}`, creds, signal);
    if (fetched !== commit) {
      // The tag moved since `commit` was listed or validated: fetch that commit by its id (servers
      // serve reachable commits so), never the tag's new commit in its place.
      const byId = await fetchCommit(gitDir, url, commit, creds, signal).catch(() => undefined);
      if (byId !== commit) {
        throw new SourceError(
          'TagMoved',
          `tag ${tag} of ${url} now points at ${fetched}, not ${commit}, and ${commit} cannot be fetched by its id`,
        );
      }
    }
    return await readTreeFromGit(gitDir, commit, segments, limits);
  } catch (err) {
    if (err instanceof SourceError) throw err;
    const message = withRedirectHint(scrub(err instanceof Error ? err.message : String(err), creds));
    throw new SourceError(classifyGitFailure(message), `fetching ${tag} of ${url}: ${message}`);
  }
}
