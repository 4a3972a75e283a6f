// Release tag grammar (pure).
//
//   stable:  <provider>-<name>-<major>-<minor>-v<N>                    docker-ferrol-1-30-v3
//   custom:  <provider>-<name>-<major>-<minor>-v0-<channel>-<suffix>   docker-ferrol-1-30-v0-sha-abc1234
//
// Mirrors the Sovereign Cloud Stack cluster-stack-operator, which splits tags on "-" and expects
// 5 (stable) or 7 (custom) segments: provider and name are single segments, so they cannot
// contain dashes. Stricter than it, because a tag is also an object name and a label value:
//   - every segment is lower-case alphanumeric ([a-z0-9]+): no "_" or upper case;
//   - numbers have no leading zeros (v01 would not map back to the same tag);
//   - Kubernetes major >= 1; stable N >= 1 (v0 is reserved for custom channels) and a custom
//     channel always uses v0, as the grammar says;
//   - the whole tag is at most 63 characters (label value limit: stackflux.io/release=<tag>).
//
// The ClusterClass a release ships (and stack.yaml `version`) write the custom suffix with a
// dot, like the cluster-stack-operator's StringWithDot: docker-ferrol-1-30-v0-sha.abc1234.
// Stable names are the same in both forms.

export type Channel = 'stable' | 'custom';

export interface ReleaseTag {
  /** The Git tag, dash form; also the ClusterStackRelease name. */
  tag: string;
  provider: string;
  name: string;
  kubernetesMajor: number;
  kubernetesMinor: number;
  /** "1.30" */
  kubernetesVersion: string;
  channel: Channel;
  /** N of vN (0 for custom channels). */
  major: number;
  /** Custom channel only: e.g. {channel: 'sha', suffix: 'abc1234'}. */
  custom?: { channel: string; suffix: string };
  /** Stack version, dot form: "v3", "v0-sha.abc1234". */
  version: string;
  /** ClusterClass name, dot form: "docker-ferrol-1-30-v0-sha.abc1234". */
  clusterClassName: string;
}

export type ParseResult<T> = { ok: true; value: T } | { ok: false; reason: string };

export const MAX_TAG_LENGTH = 63;
const SEGMENT = /^[a-z0-9]+$/;
const NUMBER = /^(0|[1-9][0-9]*)$/;
const VERSION = /^v(0|[1-9][0-9]*)$/;

const GRAMMAR =
  '<provider>-<name>-<major>-<minor>-v<N> or <provider>-<name>-<major>-<minor>-v0-<channel>-<suffix>';

function segmentError(what: string, value: string): string | undefined {
  if (value === '') return `${what} is empty`;
  if (!SEGMENT.test(value)) return `${what} "${value}" must be lower-case letters and digits`;
  return undefined;
}

function numberError(what: string, value: string): string | undefined {
  if (!NUMBER.test(value)) return `${what} "${value}" is not a number without leading zeros`;
  return undefined;
}

/** Parses one tag against the grammar, independent of any ClusterStack. */
export function parseReleaseTag(tag: string): ParseResult<ReleaseTag> {
  const parts = tag.split('-');
  if (parts.length !== 5 && parts.length !== 7) {
    return { ok: false, reason: `has ${parts.length} dash-separated parts, expected ${GRAMMAR}` };
  }
  const [provider = '', name = '', kMajor = '', kMinor = '', v = '', channel, suffix] = parts;
  const error =
    segmentError('provider', provider) ??
    segmentError('name', name) ??
    numberError('Kubernetes major version', kMajor) ??
    numberError('Kubernetes minor version', kMinor) ??
    (kMajor === '0' ? 'Kubernetes major version 0 is not valid' : undefined) ??
    (VERSION.test(v) ? undefined : `version "${v}" is not v<N> (a number without leading zeros)`);
  if (error !== undefined) return { ok: false, reason: error };
  const major = Number(v.slice(1));
  const kubernetesMajor = Number(kMajor);
  const kubernetesMinor = Number(kMinor);
  const kubernetesVersion = `${kubernetesMajor}.${kubernetesMinor}`;
  const stem = `${provider}-${name}-${kMajor}-${kMinor}`;
  let result: ReleaseTag;
  if (channel === undefined || suffix === undefined) {
    if (major === 0)
      return { ok: false, reason: 'v0 is only valid with a custom channel suffix (v0-<channel>-<suffix>)' };
    result = {
      tag,
      provider,
      name,
      kubernetesMajor,
      kubernetesMinor,
      kubernetesVersion,
      channel: 'stable',
      major,
      version: v,
      clusterClassName: tag,
    };
  } else {
    const customError =
      (major === 0 ? undefined : `a custom channel tag must use v0, not ${v}`) ??
      segmentError('channel', channel) ??
      segmentError('channel suffix', suffix);
    if (customError !== undefined) return { ok: false, reason: customError };
    const version = `v0-${channel}.${suffix}`;
    result = {
      tag,
      provider,
      name,
      kubernetesMajor,
      kubernetesMinor,
      kubernetesVersion,
      channel: 'custom',
      major: 0,
      custom: { channel, suffix },
      version,
      clusterClassName: `${stem}-${version}`,
    };
  }
  if (tag.length > MAX_TAG_LENGTH) {
    return { ok: false, reason: `is ${tag.length} characters long, at most ${MAX_TAG_LENGTH} are allowed` };
  }
  return { ok: true, value: result };
}

/**
 * Parses a stack version in either form ("v3", "v0-sha.abc1234", "v0-sha-abc1234") into the
 * tag's version segments.
 */
export function parseStackVersion(
  version: string,
): ParseResult<{ channel: Channel; major: number; custom?: { channel: string; suffix: string } }> {
  const m = /^v(0|[1-9][0-9]*)(?:-([a-z0-9]+)[.-]([a-z0-9]+))?$/.exec(version);
  if (m === null) return { ok: false, reason: `version "${version}" is not v<N> or v0-<channel>.<suffix>` };
  const major = Number(m[1]);
  const [, , channel, suffix] = m;
  if (channel === undefined || suffix === undefined) {
    if (major === 0) return { ok: false, reason: 'v0 is only valid with a custom channel suffix' };
    return { ok: true, value: { channel: 'stable', major } };
  }
  if (major !== 0) return { ok: false, reason: `a custom channel version must use v0, not v${major}` };
  return { ok: true, value: { channel: 'custom', major: 0, custom: { channel, suffix } } };
}

/** Tag of a stack version: ("docker","ferrol","1.30","v0-sha.abc1234") → docker-ferrol-1-30-v0-sha-abc1234. */
export function formatReleaseTag(
  provider: string,
  name: string,
  kubernetesVersion: string,
  version: string,
): string {
  return `${provider}-${name}-${kubernetesVersion.replace('.', '-')}-${toDashForm(version)}`;
}

/** v0-sha.abc1234 → v0-sha-abc1234 (the dot in a custom suffix becomes a dash); stable unchanged. */
export function toDashForm(version: string): string {
  return version.replace(/^(v0-[a-z0-9]+)\.([a-z0-9]+)$/, '$1-$2');
}

/** Tag → ClusterClass name (dot form). Undefined if the tag is not a release tag. */
export function clusterClassNameForTag(tag: string): string | undefined {
  const parsed = parseReleaseTag(tag);
  return parsed.ok ? parsed.value.clusterClassName : undefined;
}

/**
 * ClusterClass name (dot form) → the release tag. Undefined if the name is not a release's
 * ClusterClass (e.g. a ClusterClass not made by a cluster stack, or a dash-form custom name).
 */
export function tagForClusterClassName(className: string): ReleaseTag | undefined {
  const m = /^(.*-v0-[a-z0-9]+)\.([a-z0-9]+)$/.exec(className);
  const tag = m === null ? className : `${m[1]}-${m[2]}`;
  const parsed = parseReleaseTag(tag);
  if (!parsed.ok || parsed.value.clusterClassName !== className) return undefined;
  return parsed.value;
}

function compareStrings(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * Natural order of two suffixes: runs of digits compare as numbers, other runs as strings, a
 * number before letters, a prefix first (rc-9 < rc-10 < rc-10a); equal runs ("01" and "1") fall
 * back to the plain string, so this is a total order.
 */
export function compareNatural(a: string, b: string): number {
  const runs = (s: string): string[] => s.match(/[0-9]+|[^0-9]+/g) ?? [];
  const [ra, rb] = [runs(a), runs(b)];
  for (let i = 0; i < Math.min(ra.length, rb.length); i++) {
    const [x = '', y = ''] = [ra[i], rb[i]];
    const [nx, ny] = [/^[0-9]/.test(x), /^[0-9]/.test(y)];
    let c: number;
    if (nx && ny) {
      const [tx, ty] = [x.replace(/^0+(?=.)/, ''), y.replace(/^0+(?=.)/, '')];
      c = tx.length !== ty.length ? tx.length - ty.length : compareStrings(tx, ty);
    } else if (nx !== ny) c = nx ? -1 : 1;
    else c = compareStrings(x, y);
    if (c !== 0) return c;
  }
  return ra.length !== rb.length ? ra.length - rb.length : compareStrings(a, b);
}

/**
 * When each tag's commit was made (epoch seconds), as the source listing reports it; custom
 * channel releases are ordered by it (see releaseOrder).
 */
export type TagTimes = ReadonlyMap<string, number> | Readonly<Record<string, number>>;

function timeOf(times: TagTimes | undefined, tag: string): number | undefined {
  if (times === undefined) return undefined;
  const t = times instanceof Map ? times.get(tag) : (times as Readonly<Record<string, number>>)[tag];
  return typeof t === 'number' && Number.isFinite(t) ? t : undefined;
}

/**
 * The order of a stack's releases (oldest first; the last is the latest), a total order:
 *   - stable releases after custom ones, by N numerically (v10 > v9);
 *   - custom channel releases (v0-<channel>-<suffix>) have no release number, and their suffix is
 *     often a commit hash, so they are ordered by their commit time (`times`, from the source
 *     listing); ties, and tags whose time is unknown (sorted before all timed ones), by channel,
 *     then the suffix in natural order, then the tag.
 */
export function releaseOrder(times?: TagTimes): (a: ReleaseTag, b: ReleaseTag) => number {
  return (a, b) => {
    if (a.channel !== b.channel) return a.channel === 'custom' ? -1 : 1;
    if (a.major !== b.major) return a.major - b.major;
    if (a.custom !== undefined && b.custom !== undefined) {
      const [ta, tb] = [timeOf(times, a.tag), timeOf(times, b.tag)];
      if ((ta === undefined) !== (tb === undefined)) return ta === undefined ? -1 : 1;
      if (ta !== undefined && tb !== undefined && ta !== tb) return ta - tb;
      const byChannel = compareStrings(a.custom.channel, b.custom.channel);
      if (byChannel !== 0) return byChannel;
      const bySuffix = compareNatural(a.custom.suffix, b.custom.suffix);
      if (bySuffix !== 0) return bySuffix;
    }
    return compareStrings(a.tag, b.tag);
  };
}

/** releaseOrder without commit times (custom channels by channel and natural suffix order). */
export const compareReleaseTags: (a: ReleaseTag, b: ReleaseTag) => number = releaseOrder();

export interface ReleaseSelector {
  provider: string;
  name: string;
  /** "1.30" */
  kubernetesVersion: string;
  channel: Channel;
}

export interface MalformedTag {
  tag: string;
  reason: string;
}

export interface TagListResult {
  /** Releases of the selected stack, oldest first (the last one is the latest). */
  releases: ReleaseTag[];
  /** Tags of other stacks, Kubernetes versions or channels, and unrelated tags; sorted. */
  ignored: string[];
  /** Tags that start like this stack's (<provider>-<name>-) but do not parse; sorted by tag. */
  malformed: MalformedTag[];
}

/**
 * Sorts a tag list into the releases of one ClusterStack, ignored tags and malformed look-alikes.
 * A look-alike is a tag starting with "<provider>-<name>-" whose Kubernetes version (when it
 * can be read) is the selector's; a broken tag of another Kubernetes version is ignored (the
 * ClusterStack for that version reports it). Duplicate tags count once.
 */
export function classifyTags(
  tags: readonly string[],
  selector: ReleaseSelector,
  times?: TagTimes,
): TagListResult {
  const prefix = `${selector.provider}-${selector.name}-`;
  const k8sSegment = `${selector.kubernetesVersion.replace('.', '-')}-`;
  const releases: ReleaseTag[] = [];
  const ignored: string[] = [];
  const malformed: MalformedTag[] = [];
  for (const tag of [...new Set(tags)].sort(compareStrings)) {
    if (!tag.startsWith(prefix)) {
      ignored.push(tag);
      continue;
    }
    const parsed = parseReleaseTag(tag);
    if (!parsed.ok) {
      const rest = tag.slice(prefix.length);
      const otherVersion = /^(0|[1-9][0-9]*)-(0|[1-9][0-9]*)-/.test(rest) && !rest.startsWith(k8sSegment);
      if (otherVersion) ignored.push(tag);
      else malformed.push({ tag, reason: parsed.reason });
      continue;
    }
    const r = parsed.value;
    if (r.kubernetesVersion !== selector.kubernetesVersion || r.channel !== selector.channel) {
      ignored.push(tag);
      continue;
    }
    releases.push(r);
  }
  releases.sort(releaseOrder(times));
  return { releases, ignored, malformed };
}

/** The latest release of a classified list, if any. */
export function latestRelease(result: TagListResult): ReleaseTag | undefined {
  return result.releases.at(-1);
}
