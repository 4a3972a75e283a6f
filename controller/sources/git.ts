// Reading release repositories with git (through simple-git): list tags with ls-remote and
// fetch the tree at a tag. Credentials reach git only through a credential helper that reads
// environment variables of the git child process: never in a URL, an argument, a log line or
// an error message.
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join, posix, relative, sep } from 'node:path';
import { simpleGit } from 'simple-git';
import type { ReleaseTree } from '../api/release.ts';

export interface GitCredentials {
  username?: string;
  password?: string;
}

export interface RemoteTag {
  tag: string;
  /** The commit the tag points at (annotated tags are peeled). */
  commit: string;
}

export class SourceError extends Error {
  readonly reason: string;
  constructor(reason: string, message: string) {
    super(message);
    this.name = 'SourceError';
    this.reason = reason;
  }
}

const allowedUrl = /^(https?:\/\/|ssh:\/\/)[^\s]+$|^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^\s]+$/;

/** Only http(s) and ssh URLs (including scp-like user@host:path); never file://, git:// or ext::. */
export function validateRepoUrl(url: string): void {
  if (!allowedUrl.test(url)) {
    throw new SourceError(
      'InvalidURL',
      `repository URL ${JSON.stringify(url)} must use https://, http:// or ssh://`,
    );
  }
  if (/^https?:\/\/[^/]*@/.test(url)) {
    throw new SourceError(
      'InvalidURL',
      'repository URL must not embed credentials; reference a Secret with spec.source.git.secretRef',
    );
  }
}

export function credentialEnv(creds: GitCredentials | undefined): Record<string, string> {
  const env: Record<string, string> = {
    GIT_TERMINAL_PROMPT: '0',
    GIT_ASKPASS: '/bin/false',
    SSH_ASKPASS: '/bin/false',
    GIT_CONFIG_NOSYSTEM: '1',
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: process.env.HOME ?? '/tmp',
  };
  if (creds?.username !== undefined || creds?.password !== undefined) {
    // A helper that answers from this process's environment, so the secret never appears in argv.
    env.STACKFLUX_GIT_USERNAME = creds.username ?? 'git';
    env.STACKFLUX_GIT_PASSWORD = creds.password ?? '';
    env.GIT_CONFIG_COUNT = '1';
    env.GIT_CONFIG_KEY_0 = 'credential.helper';
    env.GIT_CONFIG_VALUE_0 =
      '!f() { test "$1" = get && printf "username=%s\\npassword=%s\\n" "$STACKFLUX_GIT_USERNAME" "$STACKFLUX_GIT_PASSWORD"; }; f';
  }
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

function classify(message: string): string {
  if (/Authentication failed|401|403|could not read Username/i.test(message)) return 'AuthenticationFailed';
  if (/not found|does not appear to be a git repository|404/i.test(message)) return 'RepositoryNotFound';
  return 'SourceUnreachable';
}

/**
 * simple-git (v4) refuses GIT_ASKPASS, an env-configured credential helper and unlisted GIT_*
 * variables unless allowed. credentialEnv sets exactly these itself (never from user input).
 */
export const SIMPLE_GIT_GUARDS = {
  unsafe: { allowUnsafeAskPass: true, allowUnsafeCredentialHelper: true, allowUnsafeConfigEnvCount: true },
  allowEnvironment: [
    'GIT_TERMINAL_PROMPT',
    'GIT_ASKPASS',
    'SSH_ASKPASS',
    'GIT_CONFIG_NOSYSTEM',
    'GIT_CONFIG_COUNT',
    'GIT_CONFIG_KEY_0',
    'GIT_CONFIG_VALUE_0',
    'GIT_AUTHOR_NAME',
    'GIT_AUTHOR_EMAIL',
    'GIT_COMMITTER_NAME',
    'GIT_COMMITTER_EMAIL',
  ],
} as unknown as Partial<NonNullable<Parameters<typeof simpleGit>[0]>>;

function git(creds?: GitCredentials, cwd?: string) {
  const g =
    cwd === undefined
      ? simpleGit({ ...SIMPLE_GIT_GUARDS, timeout: { block: 60_000 } })
      : simpleGit({ ...SIMPLE_GIT_GUARDS, baseDir: cwd, timeout: { block: 120_000 } });
  return g.env(credentialEnv(creds));
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

export async function listTags(url: string, creds?: GitCredentials): Promise<RemoteTag[]> {
  validateRepoUrl(url);
  try {
    const out = await git(creds).listRemote(['--tags', url]);
    return parseLsRemoteTags(out);
  } catch (err) {
    const message = scrub(err instanceof Error ? err.message : String(err), creds);
    throw new SourceError(classify(message), `listing tags of ${url}: ${message}`);
  }
}

function readTree(root: string): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir).sort()) {
      if (entry === '.git') continue;
      const full = join(dir, entry);
      const st = statSync(full);
      if (st.isDirectory()) walk(full);
      else if (st.isFile())
        files.set(relative(root, full).split(sep).join(posix.sep), readFileSync(full, 'utf8'));
    }
  };
  if (existsSync(root)) walk(root);
  return files;
}

/**
 * The tree of a release at a tag, below `path`, from a shallow fetch cached by commit: a
 * commit's content never changes, so a cached tree is valid forever and a moved tag simply
 * resolves to another commit.
 */
export async function fetchReleaseTree(
  url: string,
  tag: string,
  commit: string,
  path: string,
  cacheDir: string,
  creds?: GitCredentials,
): Promise<ReleaseTree> {
  validateRepoUrl(url);
  const key = createHash('sha256').update(`${url}\n${commit}`).digest('hex').slice(0, 24);
  const dir = join(cacheDir, 'trees', key);
  const stackRoot = join(
    dir,
    ...posix
      .normalize(path || '.')
      .split('/')
      .filter((p) => p !== '.' && p !== '..'),
  );
  if (existsSync(join(dir, '.stackflux-complete'))) return readTree(stackRoot);
  const tmp = `${dir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  try {
    const g = git(creds, tmp);
    await g.init();
    await g.fetch(['--depth=1', '--no-tags', url, `refs/tags/${tag}`]);
    const fetched = (await g.revparse(['FETCH_HEAD^{commit}'])).trim();
    if (fetched !== commit) {
      throw new SourceError(
        'TagMoved',
        `tag ${tag} of ${url} now points at ${fetched}, not ${commit}; it will be listed again`,
      );
    }
    await g.raw(['checkout', '-q', '--detach', 'FETCH_HEAD']);
    rmSync(join(tmp, '.git'), { recursive: true, force: true });
    rmSync(dir, { recursive: true, force: true });
    renameSync(tmp, dir);
    // The marker is written last: a crash mid-fetch leaves no half tree that looks complete.
    writeFileSync(join(dir, '.stackflux-complete'), commit);
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true });
    if (err instanceof SourceError) throw err;
    const message = scrub(err instanceof Error ? err.message : String(err), creds);
    throw new SourceError(classify(message), `fetching ${tag} of ${url}: ${message}`);
  }
  return readTree(stackRoot);
}
