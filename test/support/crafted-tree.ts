// Git trees `git add` refuses to build (entries named `..`, `.git`, `.GIT`, ...), written with
// `git hash-object -w` and `git mktree` as a release author can, for the hostile-path tests.
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { readTreeFromGit, SourceError } from '../../controller/sources/git.ts';

export interface CraftedEntry {
  mode: '100644' | '040000';
  oid: string;
  name: string;
}

const IDENTITY = {
  GIT_AUTHOR_NAME: 't',
  GIT_AUTHOR_EMAIL: 't@e.st',
  GIT_COMMITTER_NAME: 't',
  GIT_COMMITTER_EMAIL: 't@e.st',
};

/** A repository (created when missing) to write crafted objects into. */
export class CraftedRepo {
  /** The repository's work folder. */
  readonly root: string;
  constructor(root: string) {
    this.root = root;
    mkdirSync(root, { recursive: true });
    this.#git(['init', '-q', '-b', 'main']);
  }

  #git(args: string[], input = ''): string {
    return execFileSync('git', args, {
      cwd: this.root,
      input,
      encoding: 'utf8',
      env: { ...process.env, ...IDENTITY },
    }).trim();
  }

  /** A file entry holding `text`. */
  file(name: string, text: string): CraftedEntry {
    return { mode: '100644', oid: this.#git(['hash-object', '-w', '--stdin'], text), name };
  }

  /** A folder entry of exactly these entries, names git add would refuse included. */
  dir(name: string, entries: CraftedEntry[]): CraftedEntry {
    return { mode: '040000', oid: this.tree(entries), name };
  }

  tree(entries: CraftedEntry[]): string {
    const lines = entries.map(
      (e) => `${e.mode} ${e.mode === '040000' ? 'tree' : 'blob'} ${e.oid}\t${e.name}`,
    );
    return this.#git(['mktree'], `${lines.join('\n')}\n`);
  }

  /** A commit of a root tree of `entries`, tagged `tag` when given; returns its id. */
  commit(entries: CraftedEntry[], message: string, tag?: string): string {
    const commit = this.#git(['commit-tree', this.tree(entries), '-m', message]);
    if (tag !== undefined) this.#git(['tag', tag, commit]);
    return commit;
  }

  /** Pushes every tag to `url`. */
  pushTags(url: string): void {
    this.#git(['push', '-q', url, 'refs/tags/*:refs/tags/*']);
  }

  /** What readTreeFromGit makes of a commit of `entries` (the reason of its refusal, or "(none)"). */
  async readOutcome(entries: CraftedEntry[]): Promise<{ reason: string; message: string }> {
    const commit = this.commit(entries, 'crafted');
    try {
      await readTreeFromGit(join(this.root, '.git'), commit, []);
      return { reason: '(none)', message: '' };
    } catch (err) {
      if (err instanceof SourceError) return { reason: err.reason, message: err.message };
      throw err;
    }
  }
}
