// Git trees `git add` refuses to build (entries named `..`, `.git`, `.GIT`, ...), written with
// `git hash-object -w` and `git mktree` as a release author can, for the hostile-path tests.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { readTreeFromGit, SourceError } from '../../controller/sources/git.ts';

export interface CraftedEntry {
  /** 100644 a file, 040000 a folder (ls-tree's other modes are kept as read). */
  mode: string;
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
    if (!existsSync(join(root, '.git'))) this.#git(['init', '-q', '-b', 'main']);
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
    const type = (mode: string) => (mode === '040000' ? 'tree' : mode === '160000' ? 'commit' : 'blob');
    const lines = entries.map((e) => `${e.mode} ${type(e.mode)} ${e.oid}\t${e.name}`);
    return this.#git(['mktree'], `${lines.join('\n')}\n`);
  }

  /** A commit of a root tree of `entries`, tagged `tag` when given; returns its id. */
  commit(entries: CraftedEntry[], message: string, tag?: string): string {
    const commit = this.#git(['commit-tree', this.tree(entries), '-m', message]);
    if (tag !== undefined) this.#git(['tag', tag, commit]);
    return commit;
  }

  /** The entries of a tree (`<commit>^{tree}`, `<commit>:<folder>`, a tree id). */
  entries(treeish: string): CraftedEntry[] {
    return this.#git(['ls-tree', '-z', treeish])
      .split('\0')
      .filter((r) => r !== '')
      .map((r) => {
        const [meta = '', name = ''] = r.split('\t');
        const [mode = '', , oid = ''] = meta.split(' ');
        return { mode, oid, name };
      });
  }

  /**
   * A child commit of `base` whose top-level folder `folder` also holds `extra` (a crafted
   * version of a release cut normally); tagged `tag` (moved if it exists). Returns its id.
   */
  withExtra(base: string, folder: string, extra: CraftedEntry[], tag: string): string {
    const sub = this.dir(folder, [...this.entries(`${base}:${folder}`), ...extra]);
    const root = this.entries(`${base}^{tree}`).map((e) => (e.name === folder ? sub : e));
    const commit = this.#git(['commit-tree', this.tree(root), '-p', base, '-m', `${tag} (crafted)`]);
    this.#git(['tag', '-f', tag, commit]);
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

/** Asserts that a release fetch fails as an invalid release whose message matches `names`. */
export async function assertInvalid(p: Promise<unknown>, names: RegExp): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof SourceError, `expected a SourceError, got ${String(err)}`);
    assert.equal(err.reason, 'InvalidRelease', err.message);
    assert.match(err.message, names);
    return true;
  });
}
