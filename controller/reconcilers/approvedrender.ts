// What rolls out is what was previewed (issue 31, F4), pure. The impact of a rollout target
// records, per Cluster, the digest of the fleet branch files the preview rendered
// (status.impact.renders); a live render of a Cluster moving to that release must have the same
// digest. One that differs (the Cluster or its refs changed since, or a template that reads
// something the preview could not know) is held: no branch write, condition RenderApproved=False
// (reason RenderDiffersFromApproved) naming both digests, status.heldRender telling the impact
// controller to compute the impact again, which a person then approves (the approval names the
// impact's digest: reconcilers/rollout.ts approvedImpact).
import { createHash } from 'node:crypto';
import type { ClusterStack } from '../api/clusterstack.ts';
import {
  type ClusterStackRelease,
  MAX_IMPACT_RECOMPUTES,
  type ReleaseImpact,
} from '../api/clusterstackrelease.ts';
import { approvalGate } from './rollout.ts';

/** Condition type on a ClusterAddon: whether its render may roll out (absent: nothing held). */
export const RENDER_APPROVED_CONDITION = 'RenderApproved';
export const RENDER_DIFFERS_REASON = 'RenderDiffersFromApproved';

/** The digest of a Cluster's rendered fleet branch files (path and content, in path order). */
export function renderDigest(files: ReadonlyMap<string, string>): string {
  const hash = createHash('sha256');
  // Every part behind its length: no two sets of files hash as one stream.
  const part = (text: string) => {
    const bytes = Buffer.from(text);
    hash.update(`${bytes.byteLength}:`);
    hash.update(bytes);
  };
  for (const path of [...files.keys()].sort()) {
    part(path);
    part(files.get(path) ?? '');
  }
  return `sha256:${hash.digest('hex')}`;
}

/** The digest of an impact: its commit, counts, failures and per-Cluster renders (computedAt aside). */
export function impactDigest(impact: Omit<ReleaseImpact, 'digest'>): string {
  const { computedAt: _t, renders, ...rest } = impact;
  const sortedRenders = Object.entries(renders ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const text = JSON.stringify([Object.entries(rest).sort(([a], [b]) => (a < b ? -1 : 1)), sortedRenders]);
  return `sha256:${createHash('sha256').update(text).digest('hex').slice(0, 32)}`;
}

export interface RenderHold {
  reason: string;
  message: string;
  /** The impact digest the render was compared with (absent: no impact yet). */
  impact?: string;
}

export interface RenderHoldInput {
  clusterStack: ClusterStack;
  release: ClusterStackRelease;
  /** `<namespace>/<name>` of the Cluster. */
  cluster: string;
  /** The release the Cluster's branch holds now (ClusterAddon status.release); undefined: none. */
  from: string | undefined;
  /** renderDigest of the live render. */
  digest: string;
}

/**
 * Why the live render of a Cluster moving to the rollout target must wait, or undefined. Only a
 * move to the rollout target of a Progressive ClusterStack that requires approval is bound to its
 * impact: a first render, a change of a Cluster already on the release and a move back (rollback)
 * are not moves the impact describes.
 */
export function renderHold(input: RenderHoldInput): RenderHold | undefined {
  const { clusterStack: cs, release, cluster, from, digest } = input;
  const spec = cs.spec.rollout;
  const name = release.metadata.name;
  if (spec?.strategy !== 'Progressive' || spec.requireApproval === undefined) return undefined;
  if (cs.status?.latestRelease !== name || from === undefined || from === name) return undefined;
  const gate = approvalGate(spec, release, cs.metadata.name);
  const impact = release.status?.impact;
  if (gate !== undefined)
    return {
      reason: gate.reason,
      message: `release ${name}: ${gate.message}`,
      ...(impact?.digest !== undefined ? { impact: impact.digest } : {}),
    };
  // An impact that could not be computed has no renders: its approval took the release unseen.
  if (impact === undefined || impact.error !== undefined) return undefined;
  const recorded = impact.renders?.[cluster];
  if (recorded === digest) return undefined;
  const exhausted = (impact.recomputed ?? 0) >= MAX_IMPACT_RECOMPUTES;
  const next = exhausted
    ? `the impact was computed again ${impact.recomputed} times and the render still differs: the release's templates do not render reproducibly (sprig's randInt or shuffle, or a Cluster that keeps changing); fix the release, or move the Cluster back`
    : 'nothing is written until the impact, computed again, passes the approval gate';
  return {
    reason: RENDER_DIFFERS_REASON,
    message: `release ${name}: the live render (${digest}) differs from the one its impact ${impact.digest ?? ''} recorded (${recorded ?? 'none: the Cluster was not rendered in the impact'}); ${next}`,
    ...(impact.digest !== undefined ? { impact: impact.digest } : {}),
  };
}
