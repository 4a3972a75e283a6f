// csctl's placeholders, substituted as `csctl create` substitutes them when it packages a stack
// folder (csctl pkg/template/template.go visitFile, through github.com/valyala/fasttemplate v1.2.2
// NewTemplate + Template.ExecuteString; csctl 66dc97a):
//   - a placeholder is the text between "<< " and the next " >>", the spaces part of the
//     delimiters and the tag taken as written: `<<.ClusterClassVersion>>` is plain text,
//     `<<  .ClusterClassVersion >>` the unknown tag " .ClusterClassVersion";
//   - `.ClusterClassVersion` becomes the release's versions.clusterStack, `.ClusterAddonVersion`
//     versions.components.clusterAddon, `.NodeImageVersion` versions.components.nodeImage (the
//     metadata.yaml csctl writes); any other tag becomes nothing;
//   - a "<< " with no " >>" after it fails the packaging (fasttemplate: "Cannot find end tag");
//   - every file of the folder goes through it, binary files byte for byte.
// Which files reach the release is the format's business (./index.ts): this module knows none.
// Pure.
import type { ReleaseTree } from '../../api/release.ts';
import { binaryFilesOf, releaseTree } from '../tree.ts';

export const PLACEHOLDER_START = '<< ';
export const PLACEHOLDER_END = ' >>';

/** The versions csctl writes into a release's metadata.yaml, which its placeholders stand for. */
export interface CsctlVersions {
  clusterStack: string;
  clusterAddon: string;
  nodeImage: string;
}

/** csctl's tags (as written between the delimiters) and the version each becomes. */
export const CSCTL_PLACEHOLDERS: Readonly<Record<string, keyof CsctlVersions>> = {
  '.ClusterClassVersion': 'clusterStack',
  '.ClusterAddonVersion': 'clusterAddon',
  '.NodeImageVersion': 'nodeImage',
};

const KNOWN = new Map(Object.entries(CSCTL_PLACEHOLDERS));

/** A tag as it appears in a file: `<< .ClusterClassVersion >>`. */
export function placeholder(tag: string): string {
  return `${PLACEHOLDER_START}${tag}${PLACEHOLDER_END}`;
}

export interface PlaceholderScan {
  /**
   * The text with csctl's own placeholders replaced by their versions. Unknown tags and an
   * unterminated "<< " are left as written (csctl would write nothing, or fail): a release holding
   * them is refused, so the file's text is only there to be named.
   */
  text: string;
  /** The tags csctl does not know, each once, in order of appearance. */
  unknown: string[];
  /** Offset of a "<< " with no " >>" after it, where csctl's packaging fails. */
  unterminatedAt?: number;
}

/**
 * Scans `text` as fasttemplate does (left to right; a placeholder ends at the first " >>" after its
 * "<< ", so they do not nest) and, given `versions`, substitutes csctl's placeholders.
 */
export function substituteCsctlPlaceholders(text: string, versions?: CsctlVersions): PlaceholderScan {
  if (!text.includes(PLACEHOLDER_START)) return { text, unknown: [] };
  const unknown = new Set<string>();
  const out: string[] = [];
  let pos = 0;
  let unterminatedAt: number | undefined;
  for (;;) {
    const start = text.indexOf(PLACEHOLDER_START, pos);
    if (start < 0) break;
    const end = text.indexOf(PLACEHOLDER_END, start + PLACEHOLDER_START.length);
    if (end < 0) {
      unterminatedAt = start;
      break;
    }
    const tag = text.slice(start + PLACEHOLDER_START.length, end);
    const field = KNOWN.get(tag);
    if (field === undefined) unknown.add(tag);
    out.push(
      text.slice(pos, start),
      field !== undefined && versions !== undefined
        ? versions[field]
        : text.slice(start, end + PLACEHOLDER_END.length),
    );
    pos = end + PLACEHOLDER_END.length;
  }
  out.push(text.slice(pos));
  return {
    text: out.join(''),
    unknown: [...unknown],
    ...(unterminatedAt !== undefined ? { unterminatedAt } : {}),
  };
}

function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** Bytes as a string of one character per byte (and back with 'latin1'): fasttemplate works on bytes. */
function bytesAsText(bytes: Uint8Array): string {
  return asBuffer(bytes).toString('latin1');
}

/** Whether a binary file holds a "<< " at all (most vendored archives do not: no copy then). */
function holdsPlaceholderStart(bytes: Uint8Array): boolean {
  return asBuffer(bytes).includes(PLACEHOLDER_START, 0, 'latin1');
}

/**
 * The tree with csctl's placeholders substituted in the files `packaged` selects (text and binary);
 * the same tree object when nothing changes, so what was read of it stays shared.
 */
export function substituteCsctlTree(
  tree: ReleaseTree,
  versions: CsctlVersions,
  packaged: (path: string) => boolean,
): ReleaseTree {
  let changed = false;
  const text = new Map<string, string>();
  for (const [path, content] of tree) {
    const next = packaged(path) ? substituteCsctlPlaceholders(content, versions).text : content;
    changed ||= next !== content;
    text.set(path, next);
  }
  const binary = new Map<string, Uint8Array>();
  for (const [path, bytes] of binaryFilesOf(tree)) {
    if (!packaged(path) || !holdsPlaceholderStart(bytes)) {
      binary.set(path, bytes);
      continue;
    }
    const before = bytesAsText(bytes);
    const after = substituteCsctlPlaceholders(before, versions).text;
    changed ||= after !== before;
    binary.set(path, after === before ? bytes : Buffer.from(after, 'latin1'));
  }
  return changed ? releaseTree(text, binary) : tree;
}

/** A tag for a message: quoted, control and non-ASCII characters escaped, long ones cut. */
function shown(tag: string): string {
  const quoted = JSON.stringify(placeholder(tag)).replace(
    /[\u007f-\uffff]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
  return quoted.length > 80 ? `${quoted.slice(0, 77)}..."` : quoted;
}

/** Tags named in one message at most; the rest are counted. */
const MAX_NAMED_TAGS = 3;

/**
 * What csctl would do wrong with the files of a stack folder, one error per file naming it: a
 * "<< " without " >>" in any file (csctl create fails), and in the files `packaged` selects a tag
 * csctl does not know (csctl would write nothing there; a typo is likelier than an intent).
 */
export function csctlPlaceholderErrors(tree: ReleaseTree, packaged: (path: string) => boolean): string[] {
  const errors: string[] = [];
  const check = (path: string, text: string): void => {
    const scan = substituteCsctlPlaceholders(text);
    if (scan.unterminatedAt !== undefined)
      errors.push(
        `${path}: "${PLACEHOLDER_START}" with no "${PLACEHOLDER_END}" after it (offset ${scan.unterminatedAt}): csctl's placeholder templating fails on it, so csctl cannot package this stack`,
      );
    if (!packaged(path) || scan.unknown.length === 0) return;
    const named = scan.unknown.slice(0, MAX_NAMED_TAGS).map(shown).join(', ');
    const more =
      scan.unknown.length > MAX_NAMED_TAGS ? ` and ${scan.unknown.length - MAX_NAMED_TAGS} more` : '';
    const one = scan.unknown.length === 1;
    errors.push(
      `${path}: ${one ? 'placeholder' : 'placeholders'} ${named}${more} ${one ? 'is not one' : 'are not ones'} csctl substitutes (${Object.keys(CSCTL_PLACEHOLDERS).map(placeholder).join(', ')}); csctl would write nothing in ${one ? 'its place' : 'their place'}`,
    );
  };
  for (const [path, text] of tree) check(path, text);
  for (const [path, bytes] of binaryFilesOf(tree))
    if (holdsPlaceholderStart(bytes)) check(path, bytesAsText(bytes));
  return errors;
}
