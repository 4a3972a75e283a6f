import { parseReleaseTag, type ReleaseTag } from '../../controller/releases/tags.ts';

/** A release tag a test knows to be valid, parsed (throws if it is not). */
export function releaseTag(tag: string): ReleaseTag {
  const r = parseReleaseTag(tag);
  if (!r.ok) throw new Error(r.reason);
  return r.value;
}
