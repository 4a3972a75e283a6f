// The one check of a relative path that came from outside (a release tree, a rendered fleet
// file, a Helm chart folder) before anything is written or named by it. A path is '/'-separated
// and relative; every component is a plain name. `.git` in any case is refused because git
// itself treats it specially (a fsck-ing Git host rejects a whole push that holds one; on a
// case-insensitive file system `.GIT` is the same folder).
import { isAbsolute, relative, resolve, sep } from 'node:path';

/** Why `path` is not a safe relative path (undefined: it is). The message quotes the path. */
export function pathProblem(path: string): string | undefined {
  const quoted = JSON.stringify(path);
  if (path === '') return 'the path is empty';
  if (path.includes('\0')) return `path ${quoted} contains a NUL character`;
  if (path.includes('\\')) return `path ${quoted} contains a backslash`;
  if (path.startsWith('/')) return `path ${quoted} is absolute`;
  for (const component of path.split('/')) {
    if (component === '') return `path ${quoted} has an empty component (a leading, trailing or double "/")`;
    if (component === '.' || component === '..') return `path ${quoted} has a "${component}" component`;
    if (component.toLowerCase() === '.git') return `path ${quoted} has a "${component}" component`;
  }
  return undefined;
}

/**
 * The absolute location of `rel` below `root`: the path must pass pathProblem and its resolved
 * location must lie inside root, else this throws. Every write of an outside path goes here.
 */
export function resolveUnder(root: string, rel: string): string {
  const problem = pathProblem(rel);
  if (problem !== undefined) throw new Error(`refusing to write below ${root}: ${problem}`);
  const base = resolve(root);
  const full = resolve(base, ...rel.split('/'));
  const back = relative(base, full);
  if (back === '' || back === '..' || back.startsWith(`..${sep}`) || isAbsolute(back))
    throw new Error(`refusing to write ${JSON.stringify(rel)}: it resolves outside ${root}`);
  return full;
}
