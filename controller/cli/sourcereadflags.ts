// Flags of the total deadlines of source reads and of the background reads' slots (`stackflux
// run`): see controllers/sourcereads.ts.
import { parseDuration } from '../controllers/duration.ts';
import {
  LIST_DEADLINE_FLAG,
  SOURCE_READ_DEFAULTS,
  type SourceReadLimits,
  TREE_DEADLINE_FLAG,
} from '../controllers/sourcereads.ts';
import { formatDeadline } from '../sources/deadline.ts';
import { type Command, type FlagValues, UsageError } from './command.ts';

export const sourceReadFlags: Command['flags'] = {
  [TREE_DEADLINE_FLAG]: {
    type: 'string',
    description:
      'total time reading one release tree may take (every request, layer and git process of it); then it fails (SourceTimeout naming this flag) and is read again with back-off',
    default: formatDeadline(SOURCE_READ_DEFAULTS.treeTimeoutMs),
  },
  [LIST_DEADLINE_FLAG]: {
    type: 'string',
    description: 'total time one listing of a release source may take; then it fails (SourceTimeout)',
    default: formatDeadline(SOURCE_READ_DEFAULTS.listTimeoutMs),
  },
  'source-reads': {
    type: 'string',
    description:
      'release trees (and listings) read at once in the background, off the reconcile workers; one namespace gets at most half of them',
    default: String(SOURCE_READ_DEFAULTS.maxConcurrent),
  },
};

function str(v: string | boolean | undefined): string {
  return typeof v === 'string' ? v : '';
}

function durationOf(flags: FlagValues, flag: string, fallback: number): number {
  const text = str(flags[flag]);
  if (text === '') return fallback;
  const ms = parseDuration(text);
  if (ms === undefined || ms < 1000)
    throw new UsageError(`--${flag} "${text}" is not a duration of at least 1s, like 5m`);
  return ms;
}

/** The source read limits the flags set; usage errors name the flag. */
export function sourceReadLimits(flags: FlagValues): SourceReadLimits {
  const readsText = str(flags['source-reads']);
  const reads = readsText === '' ? SOURCE_READ_DEFAULTS.maxConcurrent : Number(readsText);
  if (!Number.isSafeInteger(reads) || reads < 1)
    throw new UsageError(`--source-reads "${readsText}" is not a positive integer`);
  return {
    treeTimeoutMs: durationOf(flags, TREE_DEADLINE_FLAG, SOURCE_READ_DEFAULTS.treeTimeoutMs),
    listTimeoutMs: durationOf(flags, LIST_DEADLINE_FLAG, SOURCE_READ_DEFAULTS.listTimeoutMs),
    maxConcurrent: reads,
  };
}
