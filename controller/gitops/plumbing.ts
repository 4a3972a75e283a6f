// Git plumbing for the fleet writer, over a bare repository: a runner for one git command, a
// long-lived `git cat-file --batch` reader, and the `git fast-import` stream that writes every
// blob, tree and commit of a batch in one process. The stream builders and parsers are pure.
import { spawn } from 'node:child_process';

export interface GitRun {
  code: number;
  stdout: string;
  /** stdout as bytes (with `binary`). */
  stdoutBuffer?: Buffer;
  stderr: string;
}

export interface RunOptions {
  /** The git child's whole environment (from gitEnv: isolated, never the credentials in argv). */
  env: Record<string, string>;
  input?: Buffer | string;
  timeoutMs?: number;
  /** Keep stdout as bytes too (a pack). */
  binary?: boolean;
}

/** Runs one git command to completion; resolves with its exit code and output (never rejects on a non-zero exit). */
export function runGit(args: readonly string[], opts: RunOptions): Promise<GitRun> {
  return new Promise((resolve, reject) => {
    const child = spawn('git', args, { env: opts.env, stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    const timer =
      opts.timeoutMs === undefined
        ? undefined
        : setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs).unref();
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const stderr = Buffer.concat(err).toString('utf8');
      const stdout = Buffer.concat(out);
      resolve({
        code: code ?? 128,
        stdout: opts.binary ? '' : stdout.toString('utf8'),
        stdoutBuffer: opts.binary ? stdout : undefined,
        stderr: signal === null ? stderr : `${stderr}\ngit ${args[0] ?? ''} killed by ${signal} (timeout)`,
      });
    });
    child.stdin.on('error', () => undefined); // a child that exits early: its exit code tells
    child.stdin.end(opts.input ?? '');
  });
}

/** An object read through `git cat-file --batch`. */
export interface GitObject {
  oid: string;
  type: string;
  content: Buffer;
}

/**
 * One long-lived `git cat-file --batch` process: reads by object name (`refs/heads/x`, an id,
 * `<id>^{tree}`) at the cost of a pipe round trip, not a process. Requests are answered in order.
 */
export class CatFile {
  #child;
  #pending: Array<{ resolve: (o: GitObject | undefined) => void; reject: (e: Error) => void }> = [];
  #buf: Buffer = Buffer.alloc(0);
  #failed: Error | undefined;

  constructor(gitDir: string, env: Record<string, string>) {
    this.#child = spawn('git', ['--git-dir', gitDir, 'cat-file', '--batch'], {
      env,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stderr = '';
    this.#child.stderr.on('data', (b: Buffer) => {
      stderr = (stderr + b.toString('utf8')).slice(-2000);
    });
    this.#child.stdout.on('data', (b: Buffer) => {
      this.#buf = this.#buf.length === 0 ? b : Buffer.concat([this.#buf, b]);
      this.#drain();
    });
    this.#child.stdin.on('error', () => undefined);
    const fail = (e: Error) => {
      this.#failed ??= e;
      for (const p of this.#pending.splice(0)) p.reject(this.#failed);
    };
    this.#child.on('error', fail);
    this.#child.on('close', (code) => fail(new Error(`git cat-file exited (${code}): ${stderr.trim()}`)));
  }

  /** The object named `spec`; undefined when it does not exist. */
  get(spec: string): Promise<GitObject | undefined> {
    if (/[\n\0]/.test(spec)) return Promise.reject(new Error(`invalid object name ${JSON.stringify(spec)}`));
    if (this.#failed) return Promise.reject(this.#failed);
    return new Promise((resolve, reject) => {
      this.#pending.push({ resolve, reject });
      this.#child.stdin.write(`${spec}\n`);
    });
  }

  #drain(): void {
    for (;;) {
      const nl = this.#buf.indexOf(10);
      if (nl < 0) return;
      const header = this.#buf.subarray(0, nl).toString('utf8');
      const parsed = parseBatchHeader(header);
      if (parsed === undefined) {
        this.#buf = this.#buf.subarray(nl + 1);
        this.#pending.shift()?.resolve(undefined);
        continue;
      }
      const end = nl + 1 + parsed.size;
      if (this.#buf.length < end + 1) return; // content and its trailing LF not all here yet
      const content = Buffer.from(this.#buf.subarray(nl + 1, end));
      this.#buf = this.#buf.subarray(end + 1);
      this.#pending.shift()?.resolve({ oid: parsed.oid, type: parsed.type, content });
    }
  }

  /** Ends the process (pending reads are answered first). */
  close(): void {
    this.#child.stdin.end();
  }
}

/** `<oid> <type> <size>` of a `cat-file --batch` answer; undefined for `<name> missing|ambiguous`. */
export function parseBatchHeader(line: string): { oid: string; type: string; size: number } | undefined {
  const m = /^([0-9a-f]{40,64}) (\w+) (\d+)$/.exec(line);
  if (m === null) return undefined;
  return { oid: m[1] as string, type: m[2] as string, size: Number(m[3]) };
}

/** The root tree id of a commit object's content. */
export function commitTree(content: Buffer): string {
  const m = /^tree ([0-9a-f]{40,64})\n/.exec(content.subarray(0, 80).toString('latin1'));
  if (m === null) throw new Error('commit object without a tree line');
  return m[1] as string;
}

/** The sub-trees (folders) of a tree object's content: name → tree id. */
export function treeFolders(content: Buffer): Map<string, string> {
  const folders = new Map<string, string>();
  let i = 0;
  while (i < content.length) {
    const space = content.indexOf(0x20, i);
    const nul = content.indexOf(0, space);
    if (space < 0 || nul < 0 || nul + 21 > content.length) throw new Error('malformed tree object');
    const mode = content.subarray(i, space).toString('latin1');
    const name = content.subarray(space + 1, nul).toString('utf8');
    if (mode === '40000') folders.set(name, content.subarray(nul + 1, nul + 21).toString('hex'));
    i = nul + 21;
  }
  return folders;
}

function escapeChar(ch: string): string | undefined {
  if (ch === '"' || ch === '\\') return `\\${ch}`;
  if (ch === '\n') return '\\n';
  const code = ch.charCodeAt(0);
  return code < 0x20 || code === 0x7f ? `\\${code.toString(8).padStart(3, '0')}` : undefined;
}

/** A path as fast-import reads it: bare when unambiguous, else C-style quoted. */
export function quotePath(path: string): string {
  const chars = [...path];
  if (!path.startsWith('"') && chars.every((ch) => escapeChar(ch) === undefined)) return path;
  return `"${chars.map((ch) => escapeChar(ch) ?? ch).join('')}"`;
}

export interface Person {
  name: string;
  email: string;
}

/** A commit for fast-import: the whole tree of the branch (files), on top of `parent`. */
export interface CommitSpec {
  parent?: string;
  files: ReadonlyMap<string, string>;
  message: string;
}

function data(text: string): Buffer[] {
  const body = Buffer.from(text, 'utf8');
  return [Buffer.from(`data ${body.length}\n`), body, Buffer.from('\n')];
}

/**
 * The fast-import stream that writes `commits` (each the complete tree of its branch: deleteall,
 * then every file) on one scratch ref and prints each commit id (`get-mark`) in order. `when`
 * is the author/committer time in seconds since the epoch.
 */
export function fastImportStream(
  commits: readonly CommitSpec[],
  author: Person,
  when: number,
  scratchRef: string,
): Buffer {
  const who = `${author.name} <${author.email}> ${when} +0000`;
  const parts: Buffer[] = [Buffer.from('feature done\n')];
  commits.forEach((c, i) => {
    const mark = `:${i + 1}`;
    parts.push(
      Buffer.from(
        `reset ${scratchRef}\ncommit ${scratchRef}\nmark ${mark}\nauthor ${who}\ncommitter ${who}\n`,
      ),
      ...data(c.message.endsWith('\n') ? c.message : `${c.message}\n`),
    );
    if (c.parent !== undefined) parts.push(Buffer.from(`from ${c.parent}\n`));
    parts.push(Buffer.from('deleteall\n'));
    for (const [path, content] of [...c.files].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      parts.push(Buffer.from(`M 100644 inline ${quotePath(path)}\n`), ...data(content));
    parts.push(Buffer.from(`get-mark ${mark}\n`));
  });
  parts.push(Buffer.from('done\n'));
  return Buffer.concat(parts);
}

/** Runs `git fast-import` over a bare repository; returns the id of each commit, in order. */
export async function fastImport(
  gitDir: string,
  env: Record<string, string>,
  commits: readonly CommitSpec[],
  author: Person,
  when: number,
  scratchRef: string,
): Promise<string[]> {
  if (commits.length === 0) return [];
  // --depth=0: no delta search (4x faster on a 1,000-branch batch; the cache's gc packs later).
  const run = await runGit(['--git-dir', gitDir, 'fast-import', '--quiet', '--force', '--depth=0'], {
    env,
    input: fastImportStream(commits, author, when, scratchRef),
    timeoutMs: 600_000,
  });
  if (run.code !== 0)
    throw new Error(`git fast-import failed: ${run.stderr.trim().split('\n').slice(-3).join(' ')}`);
  const ids = run.stdout.split('\n').filter((l) => l !== '');
  if (ids.length !== commits.length || ids.some((id) => !/^[0-9a-f]{40,64}$/.test(id)))
    throw new Error(`git fast-import printed ${ids.length} commit ids for ${commits.length} commits`);
  return ids;
}
