// Cuts cluster stack releases from this repository's stacks/ folder into a Git repository,
// the way a platform team would: copy the stack, set its version, commit, tag, push. Stacks in
// stackflux's format (stack.yaml) and in the cluster-stack-operator's (csctl.yaml) alike.
// Used by the demo and by end-to-end tests.
import { execFileSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { readStackDir, tagOfStackDir } from './stack-dir.ts';

const identity = {
  GIT_AUTHOR_NAME: 'platform team',
  GIT_AUTHOR_EMAIL: 'platform@example.com',
  GIT_COMMITTER_NAME: 'platform team',
  GIT_COMMITTER_EMAIL: 'platform@example.com',
};

export interface CutRelease {
  /** Remote to push to (http URL on the test Git server). */
  repoUrl: string;
  /** Local working clone (created if missing). */
  workdir: string;
  /** Folder of the stack in stacks/, e.g. <repo>/stacks/docker-ferrol-1-30 or <repo>/stacks/docker-csoferrol-1-30. */
  stackDir: string;
  /** Folder inside the release repository (ClusterStack spec.source.path). */
  path: string;
  /** Stack version, e.g. v2. */
  version: string;
  /** Optional edits to the copied files before committing (path relative to the stack root → new text, null deletes). */
  edits?: Record<string, string | null>;
  /** Optional edit of the copied stack folder (after `edits`), before committing. */
  edit?: (dir: string) => void;
}

function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', args, { cwd, encoding: 'utf8', env: { ...process.env, ...identity } }).trim();
}

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((e) => {
    const full = join(dir, e);
    return statSync(full).isDirectory() ? walk(full) : [full];
  });
}

/**
 * Renames the copied native stack at `target` to release `version`: stack.yaml's version and the
 * ClusterClass name follow the tag. Returns the tag.
 */
function renameNativeStack(target: string, version: string): string {
  const stack = parse(readFileSync(join(target, 'stack.yaml'), 'utf8')) as {
    provider: string;
    name: string;
    kubernetesVersion: string;
    version: string;
  };
  const [major, minor] = stack.kubernetesVersion.replace(/^v/, '').split('.');
  const base = `${stack.provider}-${stack.name}-${major}-${minor}`;
  for (const file of walk(target)) {
    const text = readFileSync(file, 'utf8');
    const next = text
      .replace(/^version: .*$/m, (line) => (file.endsWith('stack.yaml') ? `version: ${version}` : line))
      .replaceAll(`${base}-${stack.version}`, `${base}-${version.replace(/^(v0)-([^-]+)-/, '$1-$2.')}`);
    if (next !== text) writeFileSync(file, next);
  }
  return `${base}-${version}`;
}

/**
 * The tag of a csctl stack (csctl.yaml, no stack.yaml) released as `version`, as csctl names it;
 * nothing in its files is renamed (Helm templates use the release name and chart version).
 * Undefined for a native stack.
 */
function csctlReleaseTag(stackDir: string, version: string): string | undefined {
  if (existsSync(join(stackDir, 'stack.yaml'))) return undefined;
  const tag = tagOfStackDir(readStackDir(stackDir), version);
  if (tag === undefined) throw new Error(`${stackDir} has neither stack.yaml nor a valid csctl.yaml`);
  return tag;
}

/** Copies the stack, renames version and ClusterClass to the release, commits, tags and pushes. Returns the tag and commit. */
export function cutRelease(r: CutRelease): { tag: string; commit: string } {
  if (!existsSync(join(r.workdir, '.git'))) {
    mkdirSync(r.workdir, { recursive: true });
    git(r.workdir, 'init', '-q', '-b', 'main');
  }
  const target = join(r.workdir, r.path);
  rmSync(target, { recursive: true, force: true });
  cpSync(r.stackDir, target, { recursive: true });
  const tag = csctlReleaseTag(r.stackDir, r.version) ?? renameNativeStack(target, r.version);
  for (const [rel, text] of Object.entries(r.edits ?? {})) {
    const file = join(target, rel);
    if (text === null) rmSync(file, { force: true });
    else {
      mkdirSync(join(file, '..'), { recursive: true });
      writeFileSync(file, text);
    }
  }
  r.edit?.(target);
  git(r.workdir, 'add', '-A');
  git(r.workdir, 'commit', '-q', '--allow-empty', '-m', `release ${tag}`);
  git(r.workdir, 'tag', '-f', tag);
  git(r.workdir, 'push', '-q', '-f', r.repoUrl, 'main', tag);
  return { tag, commit: git(r.workdir, 'rev-parse', 'HEAD') };
}
