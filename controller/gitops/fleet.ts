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
import {
  credentialEnv,
  type GitCredentials,
  SIMPLE_GIT_GUARDS,
  SourceError,
  scrub,
  validateRepoUrl,
} from '../sources/git.ts';

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
  /** The branch as it is after the sync (read from the working clone, no extra fetch). */
  snapshot: FleetSnapshot;
}

/** The fleet branch as of a read: its tip and every <namespace>/<cluster>/<addon> folder. */
export interface FleetSnapshot {
  /** Tip of the branch; undefined when the branch does not exist yet. */
  commit?: string;
  /** Folder (relative to the prefix) → file path (relative to the folder) → content. */
  folders: Map<string, Map<string, string>>;
}

export interface FleetHooks {
  /** Test fault point: runs after the local commit, before the push. */
  afterCommit?: () => void | Promise<void>;
}

/** Every file below dir, keyed by its POSIX path relative to dir (empty when dir is missing). */
function walkFiles(dir: string): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (d: string, rel: string) => {
    if (!existsSync(d)) return;
    for (const entry of readdirSync(d).sort()) {
      const full = join(d, entry);
      if (statSync(full).isDirectory()) walk(full, `${rel}${entry}/`);
      else files.set(`${rel}${entry}`, readFileSync(full, 'utf8'));
    }
  };
  walk(dir, '');
  return files;
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
    return simpleGit({ ...SIMPLE_GIT_GUARDS, baseDir: this.workdir, timeout: { block: 120_000 } }).env(
      credentialEnv(this.config.credentials),
    );
  }

  /** Runs fn after every earlier operation of this instance: one user of the working clone at a time. */
  #exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#busy.then(fn, fn);
    this.#busy = run.catch(() => undefined);
    return run;
  }

  /** Serializes syncs in this process: one writer per working clone. */
  sync(folders: FolderSet, message: string, maxAttempts = 5): Promise<SyncResult> {
    return this.#exclusive(() => this.#sync(folders, message, maxAttempts));
  }

  /** The files currently in the branch under a folder (after a fresh fetch). */
  read(folder: string): Promise<Map<string, string>> {
    return this.#exclusive(async () => {
      await this.#prepare();
      return walkFiles(join(this.workdir, this.config.pathPrefix, safeFolder(folder)));
    });
  }

  /** The branch tip and all its <namespace>/<cluster>/<addon> folders (after a fresh fetch). */
  snapshot(): Promise<FleetSnapshot> {
    return this.#exclusive(async () => {
      const hasRemote = await this.#prepare();
      return this.#snapshot(hasRemote);
    });
  }

  async #snapshot(hasRemote: boolean): Promise<FleetSnapshot> {
    const folders = new Map<string, Map<string, string>>();
    const root = join(this.workdir, this.config.pathPrefix);
    const dirs = (dir: string): string[] =>
      existsSync(dir)
        ? readdirSync(dir)
            .filter((e) => e !== '.git' && statSync(join(dir, e)).isDirectory())
            .sort()
        : [];
    for (const ns of dirs(root)) {
      for (const cluster of dirs(join(root, ns))) {
        for (const addon of dirs(join(root, ns, cluster))) {
          folders.set(`${ns}/${cluster}/${addon}`, walkFiles(join(root, ns, cluster, addon)));
        }
      }
    }
    if (!hasRemote) return { folders };
    const commit = (await this.#git().revparse(['HEAD'])).trim();
    return { commit, folders };
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
        // Empty repository or no such branch yet: start the branch from nothing. A local branch
        // left by an earlier attempt that never got pushed (a crash) is dropped: the desired
        // folders are applied again on an unborn branch.
        await g.raw(['symbolic-ref', 'HEAD', `refs/heads/${branch}`]);
        await g.raw(['update-ref', '-d', `refs/heads/${branch}`]).catch(() => undefined);
        await g.raw(['rm', '-rfq', '--cached', '--ignore-unmatch', '.']);
        await g.raw(['clean', '-fdxq']);
        for (const entry of readdirSync(this.workdir)) {
          if (entry !== '.git') rmSync(join(this.workdir, entry), { recursive: true, force: true });
        }
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
        const snapshot = await this.#snapshot(hasRemote);
        return { commit: snapshot.commit ?? '', committed: false, attempts: attempt, snapshot };
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
        const snapshot = await this.#snapshot(true);
        return { commit: snapshot.commit ?? '', committed: true, attempts: attempt, snapshot };
      } catch (err) {
        const raw = err instanceof Error ? err.message : String(err);
        const text = scrub(raw, credentials);
        // Classified on git's whole output: scrub keeps only its last lines (hints).
        const rejected = /rejected|non-fast-forward|fetch first|stale info|cannot lock ref/i.test(raw);
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
