// Release trees with their binary files. A release is mostly YAML text, read everywhere as
// strings; csctl stacks also vendor Helm charts (charts/*.tgz), which must reach the renderer
// byte for byte. A file is text when it is valid UTF-8, else binary: decided by content, as the
// name says nothing a release author could not fake.
import { isUtf8 } from 'node:buffer';
import type { ReleaseTree } from '../api/release.ts';

/** A tree of text files plus binary files (empty binary map: none). */
export function releaseTree(
  text: ReadonlyMap<string, string>,
  binary: ReadonlyMap<string, Uint8Array> = new Map(),
): ReleaseTree {
  return binary.size === 0 ? text : Object.assign(new Map(text), { binary });
}

/** A tree from raw file contents: UTF-8 files as text, the others as bytes. */
export function releaseTreeFromBytes(files: Iterable<readonly [string, Uint8Array]>): ReleaseTree {
  const text = new Map<string, string>();
  const binary = new Map<string, Uint8Array>();
  for (const [path, bytes] of files) {
    if (isUtf8(bytes))
      text.set(path, Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'));
    else binary.set(path, bytes);
  }
  return releaseTree(text, binary);
}

/** The binary files of a tree (none for a text-only tree). */
export function binaryFilesOf(tree: ReleaseTree): ReadonlyMap<string, Uint8Array> {
  return tree.binary ?? new Map();
}

/** Every file of a tree as bytes (text encoded as UTF-8), e.g. to write it out. */
export function* treeFileBytes(tree: ReleaseTree): Generator<[string, Uint8Array]> {
  for (const [path, text] of tree) yield [path, Buffer.from(text, 'utf8')];
  yield* binaryFilesOf(tree);
}

/**
 * The tree with each path mapped by `rename` (undefined: the file is left out), text and binary
 * alike: a stack below a path of its repository, or a repository's files below the stack path.
 */
export function mapTreePaths(tree: ReleaseTree, rename: (path: string) => string | undefined): ReleaseTree {
  const pick = <T>(files: ReadonlyMap<string, T>): Map<string, T> => {
    const out = new Map<string, T>();
    for (const [path, content] of files) {
      const to = rename(path);
      if (to !== undefined) out.set(to, content);
    }
    return out;
  };
  return releaseTree(pick(tree), pick(binaryFilesOf(tree)));
}
