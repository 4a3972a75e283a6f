// The fleet repository: rendered addon files live in Git, one folder per
// <namespace>/<cluster>/<addon>. A sync replaces whole folders with their desired content in
// one commit (nothing changed → no commit), pushes, and on a rejected push (the remote moved)
// fetches, re-applies the same desired folders on top and retries. The working clone is
// reset to the remote before every sync, so a crash between commit and push simply redoes
// the work on restart: desired state is derived again, never remembered.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, posix } from 'node:path';
import { simpleGit } from 'simple-git';
import { credentialEnv, type GitCredentials, SourceError, scrub, validateRepoUrl } from '../sources/git.ts';

export interface FleetConfig {
  url: string;
  branch: string;
  /** Folder inside the repository under which <namespace>/<cluster>/<addon>/ live. */
  pathPrefix: string;
  cacheDir: string;
  credentials?: GitCredentials;
  author: { name: string; email: string };
}

/** Desired content per folder (relative to the prefix); `null` removes the folder. */
export type FolderSet = ReadonlyMap<string, ReadonlyMap<string, string> | null>;

export interface SyncResult {
  /** Commit at the tip of the branch after the sync. */
  commit: string;
  /** Whether this sync made a commit. */
  committed: boolean;
  attempts: number;
}

export interface FleetHooks {
  /** Test fault point: runs after the local commit, before the push. */
  afterCommit?: () => void | Promise<void>;
}

function safeFolder(folder: string): string {
  const norm = posix.normalize(folder);
  if (norm.startsWith('..') || norm.startsWith('/') || norm === '.')
    throw new Error(`invalid fleet folder ${folder}`);
  return norm;
}

export class FleetRepo {
  readonly config: FleetConfig;
  readonly workdir: string;
  #hooks: FleetHooks;
  #busy: Promise<unknown> = Promise.resolve();

  constructor(config: FleetConfig, hooks: FleetHooks = {}) {
    validateRepoUrl(config.url);
    this.config = config;
    this.#hooks = hooks;
    const key = createHash('sha256').update(`${config.url}\n${config.branch}`).digest('hex').slice(0, 16);
    this.workdir = join(config.cacheDir, 'fleet', key);
  }

  #git() {
    return simpleGit({ baseDir: this.workdir, timeout: { block: 120_000 } }).env(
      credentialEnv(this.config.credentials),
    );
  }

  /** Serializes syncs in this process: one writer per working clone. */
  sync(folders: FolderSet, message: string, maxAttempts = 5): Promise<SyncResult> {
    const run = this.#busy.then(
      () => this.#sync(folders, message, maxAttempts),
      () => this.#sync(folders, message, maxAttempts),
    );
    this.#busy = run.catch(() => undefined);
    return run;
  }

  /** The files currently in the branch under a folder (after a fresh fetch). */
  async read(folder: string): Promise<Map<string, string>> {
    await this.#prepare();
    const root = join(this.workdir, this.config.pathPrefix, safeFolder(folder));
    const files = new Map<string, string>();
    const walk = (dir: string, rel: string) => {
      if (!existsSync(dir)) return;
      for (const entry of readdirSync(dir).sort()) {
        const full = join(dir, entry);
        if (statSync(full).isDirectory()) walk(full, `${rel}${entry}/`);
        else files.set(`${rel}${entry}`, readFileSync(full, 'utf8'));
      }
    };
    walk(root, '');
    return files;
  }

  async #prepare(): Promise<boolean> {
    const { url, branch } = this.config;
    try {
      if (!existsSync(join(this.workdir, '.git'))) {
        mkdirSync(this.workdir, { recursive: true });
        const g = this.#git();
        await g.init(['--initial-branch', branch]);
        await g.addRemote('origin', url);
      }
      const g = this.#git();
      const remote = await g.listRemote(['--heads', 'origin', branch]);
      if (remote.trim() === '') {
        // Empty repository or no such branch yet: start the branch from nothing.
        await g.raw(['checkout', '-q', '--orphan', 'stackflux-orphan']).catch(() => undefined);
        await g.raw(['rm', '-rfq', '--ignore-unmatch', '.']);
        await g.raw(['clean', '-fdxq']);
        await g.raw(['checkout', '-q', '-B', branch]);
        return false;
      }
      await g.fetch(['origin', `+refs/heads/${branch}:refs/remotes/origin/${branch}`]);
      await g.raw(['checkout', '-q', '-B', branch, `origin/${branch}`]);
      await g.raw(['reset', '-q', '--hard', `origin/${branch}`]);
      await g.raw(['clean', '-fdxq']);
      return true;
    } catch (err) {
      const message = scrub(err instanceof Error ? err.message : String(err), this.config.credentials);
      throw new SourceError('FleetUnreachable', `fleet repository ${url} (${branch}): ${message}`);
    }
  }

  #apply(folders: FolderSet): void {
    for (const [folder, files] of [...folders.entries()].sort(([a], [b]) => (a < b ? -1 : 1))) {
      const root = join(this.workdir, this.config.pathPrefix, safeFolder(folder));
      rmSync(root, { recursive: true, force: true });
      if (files === null) continue;
      for (const [name, content] of [...files.entries()].sort(([a], [b]) => (a < b ? -1 : 1))) {
        const file = join(root, safeFolder(name));
        mkdirSync(dirname(file), { recursive: true });
        writeFileSync(file, content);
      }
    }
  }

  async #sync(folders: FolderSet, message: string, maxAttempts: number): Promise<SyncResult> {
    const { branch, author, credentials } = this.config;
    for (let attempt = 1; ; attempt++) {
      const hasRemote = await this.#prepare();
      this.#apply(folders);
      const g = this.#git();
      await g.raw(['add', '-A']);
      const status = await g.raw(['status', '--porcelain']);
      if (status.trim() === '') {
        const head = hasRemote ? (await g.revparse(['HEAD'])).trim() : '';
        return { commit: head, committed: false, attempts: attempt };
      }
      await g
        .env({
          ...credentialEnv(credentials),
          GIT_AUTHOR_NAME: author.name,
          GIT_AUTHOR_EMAIL: author.email,
          GIT_COMMITTER_NAME: author.name,
          GIT_COMMITTER_EMAIL: author.email,
        })
        .raw(['commit', '-q', '--no-gpg-sign', '-m', message]);
      await this.#hooks.afterCommit?.();
      try {
        await g.push('origin', `${branch}:refs/heads/${branch}`);
        return { commit: (await g.revparse(['HEAD'])).trim(), committed: true, attempts: attempt };
      } catch (err) {
        const text = scrub(err instanceof Error ? err.message : String(err), credentials);
        const rejected = /rejected|non-fast-forward|fetch first|stale info|cannot lock ref/i.test(text);
        if (!rejected || attempt >= maxAttempts) {
          throw new SourceError(
            rejected ? 'PushRejected' : 'FleetUnreachable',
            `pushing to fleet repository: ${text}`,
          );
        }
        // The remote moved: the next attempt resets to it and re-applies the same folders.
      }
    }
  }
}
