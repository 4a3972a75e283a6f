// Git object ids computed in-process (pure, no I/O): the id of the tree a set of files would
// make, exactly as `git hash-object` / `git mktree` compute it. Desired fleet content is
// deterministic, so "this Cluster's addon is unchanged" is a comparison of ids, with no read of
// the fleet's files.
import { createHash } from 'node:crypto';
import { pathProblem } from '../releases/paths.ts';

const FILE_MODE = '100644';
const TREE_MODE = '40000';

function objectId(type: 'blob' | 'tree', body: Buffer): Buffer {
  return createHash('sha1').update(`${type} ${body.length}\0`).update(body).digest();
}

/** Id of a blob holding `content` (UTF-8). */
export function blobId(content: string): string {
  return objectId('blob', Buffer.from(content, 'utf8')).toString('hex');
}

interface Dir {
  files: Map<string, Buffer>;
  dirs: Map<string, Dir>;
}

function checkedPath(path: string): string[] {
  const problem = pathProblem(path);
  if (problem !== undefined) throw new Error(`invalid fleet file path: ${problem}`);
  return path.split('/');
}

function buildDirs(files: ReadonlyMap<string, string>): Dir {
  const root: Dir = { files: new Map(), dirs: new Map() };
  for (const [path, content] of files) {
    const parts = checkedPath(path);
    let dir = root;
    for (const part of parts.slice(0, -1)) {
      let next = dir.dirs.get(part);
      if (next === undefined) {
        next = { files: new Map(), dirs: new Map() };
        dir.dirs.set(part, next);
      }
      dir = next;
    }
    const name = parts.at(-1) as string;
    if (dir.dirs.has(name)) throw new Error(`fleet path ${path} is both a file and a folder`);
    dir.files.set(name, objectId('blob', Buffer.from(content, 'utf8')));
  }
  return root;
}

// Git orders tree entries by name, comparing a folder as if its name ended in '/'.
function treeOf(dir: Dir): Buffer {
  const entries: Array<{ key: string; mode: string; name: string; id: Buffer }> = [];
  for (const [name, id] of dir.files) {
    if (dir.dirs.has(name)) throw new Error(`fleet name ${name} is both a file and a folder`);
    entries.push({ key: name, mode: FILE_MODE, name, id });
  }
  for (const [name, sub] of dir.dirs)
    entries.push({ key: `${name}/`, mode: TREE_MODE, name, id: treeOf(sub) });
  entries.sort((a, b) => Buffer.compare(Buffer.from(a.key), Buffer.from(b.key)));
  const body = Buffer.concat(entries.flatMap((e) => [Buffer.from(`${e.mode} ${e.name}\0`, 'utf8'), e.id]));
  return objectId('tree', body);
}

/** Id of the tree the files (path → content, POSIX paths) make; the empty tree for none. */
export function treeId(files: ReadonlyMap<string, string>): string {
  return treeOf(buildDirs(files)).toString('hex');
}

/**
 * The root tree id of a Cluster branch and the tree id of each top-level folder (addon), for
 * files keyed `<addon>/<path>`.
 */
export function branchTreeIds(files: ReadonlyMap<string, string>): {
  tree: string;
  addons: Map<string, string>;
} {
  const root = buildDirs(files);
  const addons = new Map<string, string>();
  for (const [name, sub] of [...root.dirs].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
    addons.set(name, treeOf(sub).toString('hex'));
  return { tree: treeOf(root).toString('hex'), addons };
}
