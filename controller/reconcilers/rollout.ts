// The Progressive rollout of a ClusterStack, as a pure function of the ClusterStack, its releases,
// the Clusters and ClusterAddons of its namespace and `now` (no clock, no I/O): which Clusters to
// move to the target release (or back to where they came from), the annotations that record each
// Cluster's progress, the status.rollout to show, the Events of the transitions and when to look
// again. The live controller (controllers/rollout.ts) applies the Cluster changes by server-side
// apply with its own field manager; `stackflux render` shows what the next step would move.
//
// Per Cluster (annotations ROLLOUT_ANNOTATIONS, so a restart resumes):
//   pending ──move──► in flight ──gate passes minSuccessTime──► Done
//                         └──progressDeadline──► Failed (rollbackOnFailure: RolledBack, moved back)
//   A target release with a BeforeClusterUpgrade stage (csctl) starts with Preparing: the annotations
//   make the ClusterAddon render the target release (addonrelease.ts) while the topology stays; once
//   that stage is Ready in the workload cluster the Cluster moves (the deadline counts from the start).
//   a Cluster whose class an operator changed away from what stackflux set: HandMoved, left alone.
// Waves run one after the other: wave k starts once every Cluster of the waves before it is done
// or failed; at most maxConcurrent of a wave are in flight.
import { Cron } from 'croner';
import type { ClusterAddon } from '../api/clusteraddon.ts';
import type { ClusterStack } from '../api/clusterstack.ts';
import type { ClusterStackRelease } from '../api/clusterstackrelease.ts';
import { parseDurationOrZero } from '../api/duration.ts';
import type { Condition } from '../api/meta.ts';
import {
  APPROVED_ANNOTATION,
  APPROVED_IMPACT_ANNOTATION,
  type MaintenanceWindow,
  PREPARING_PHASE,
  ROLLOUT_ANNOTATIONS,
  type RolloutSpec,
  type RolloutStatus,
} from '../api/rollout.ts';
import { findCondition } from '../runtime/conditions.ts';
import { clusterUse, ownedBy, releaseReady } from './clusterstack.ts';
import { evaluateHealthCheck, type HealthCheckProblem, healthCheckProblem } from './healthcheck.ts';
import { selects } from './labelselector.ts';
import { BEFORE_CLUSTER_UPGRADE_STAGE, stageFromClusterAddon, type UpgradeStage } from './upgradehook.ts';

/** Name of the implicit last wave (Clusters no wave selects). */
export const REST_WAVE = 'rest';
/** How long to look again while Clusters are in flight (Cluster and addon changes also trigger). */
const IN_FLIGHT_RECHECK_MS = 30_000;
const MAX_LISTED = 50;

/** A Cluster API Cluster as the rollout reads it (any served version). */
export interface RolloutCluster {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    generation?: number;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    deletionTimestamp?: string;
  };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
}

export interface RolloutInput {
  clusterStack: ClusterStack;
  /** ClusterStackReleases of the namespace (others' are ignored). */
  releases: readonly ClusterStackRelease[];
  /** Clusters of the ClusterStack's namespace. */
  clusters: readonly RolloutCluster[];
  /** ClusterAddons of the namespace (named after their Cluster). */
  clusterAddons: readonly ClusterAddon[];
  now: Date;
}

/** What to server-side apply to one Cluster with the rollout field manager. */
export interface ClusterChange {
  name: string;
  /** The full set of rollout annotations the Cluster must carry (SSA: omitted ones are removed). */
  annotations: Record<string, string>;
  /** The topology stackflux sets (always given: SSA would remove an owned field left out). */
  topology?: { className: string; version: string };
  /** Why, for logs and Events. */
  action: 'Move' | 'Rollback' | 'Record';
}

export interface RolloutEvent {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

export interface RolloutResult {
  /** undefined: no rollout (Manual): status.rollout and the Rollout condition are removed. */
  status?: RolloutStatus;
  condition?: { status: Condition['status']; reason: string; message: string };
  changes: ClusterChange[];
  events: RolloutEvent[];
  /** When the decision may change without any object changing (soak, deadline, window). */
  requeueAfterMs?: number;
}

type ClusterState =
  | { kind: 'pending' }
  | { kind: 'inFlight'; to: string; reason: 'Preparing' | 'Soak' | 'HealthGate'; message: string }
  | { kind: 'done' }
  | { kind: 'failed' }
  | { kind: 'skipped' };

interface Entry {
  cluster: RolloutCluster;
  wave: string;
  state: ClusterState;
}

// ---- small pure helpers -------------------------------------------------------------------------

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A count or percentage of total; percentages round up, at least 1 when total > 0. */
export function resolveCount(v: number | string | undefined, total: number, fallback: number): number {
  if (v === undefined) return fallback;
  if (typeof v === 'number') return v;
  const m = /^(\d+)(%?)$/.exec(v.trim());
  if (m === null) return fallback;
  const n = Number(m[1]);
  if (m[2] !== '%') return n;
  if (n === 0 || total === 0) return 0;
  return Math.max(1, Math.ceil((n * total) / 100));
}

/** A window is open at `now`, or when the next one opens (searching a year ahead). */
export function windowState(
  windows: readonly MaintenanceWindow[],
  now: Date,
): { open: true; closesAt: Date } | { open: false; nextOpen?: Date } {
  let next: Date | undefined;
  for (const w of windows) {
    const duration = parseDurationOrZero(w.duration) ?? 0;
    const cron = new Cron(w.schedule, { timezone: w.timeZone ?? 'UTC', paused: true });
    // The latest start at or before now (croner's previousRuns is exclusive of `now`).
    const atNow = cron.nextRun(new Date(now.getTime() - 1000));
    const lastStart =
      atNow !== null && atNow.getTime() <= now.getTime()
        ? atNow
        : cron.previousRuns(1, new Date(now.getTime()))[0];
    if (lastStart !== undefined && lastStart.getTime() + duration > now.getTime()) {
      return { open: true, closesAt: new Date(lastStart.getTime() + duration) };
    }
    const upcoming = cron.nextRun(now);
    if (upcoming !== null && (next === undefined || upcoming < next)) next = upcoming;
  }
  return next === undefined ? { open: false } : { open: false, nextOpen: next };
}

/** Why a spec cannot be acted on (a message naming the field), or undefined. */
export function validateRollout(spec: RolloutSpec): string | undefined {
  for (const [i, w] of (spec.maintenanceWindows ?? []).entries()) {
    try {
      new Cron(w.schedule, { timezone: w.timeZone ?? 'UTC', paused: true });
    } catch (err) {
      return `spec.rollout.maintenanceWindows[${i}]: schedule "${w.schedule}" / timeZone "${w.timeZone ?? 'UTC'}": ${err instanceof Error ? err.message : String(err)}`;
    }
    if (parseDurationOrZero(w.duration) === undefined)
      return `spec.rollout.maintenanceWindows[${i}].duration "${w.duration}" is not a duration like 4h`;
  }
  for (const f of ['minSuccessTime', 'progressDeadline'] as const) {
    const v = spec[f];
    if (v !== undefined && parseDurationOrZero(v) === undefined)
      return `spec.rollout.${f} "${v}" is not a duration like 5m`;
  }
  return undefined;
}

function conditionsAt(status: unknown, path: readonly string[]): Condition[] {
  let v: unknown = status;
  for (const p of path) v = isRecord(v) ? v[p] : undefined;
  return Array.isArray(v) ? (v as Condition[]) : [];
}

/**
 * Whether Cluster API reports the Cluster ready after its topology change: v1beta2 conditions
 * Available and TopologyReconciled True for the current generation; for a v1beta1 object the
 * v1beta2 conditions it carries in status.v1beta2, else its Ready and TopologyReconciled with
 * status.observedGeneration.
 */
export function clusterApiReady(cluster: RolloutCluster): { ok: boolean; message: string } {
  const generation = cluster.metadata.generation ?? 0;
  const status = cluster.status;
  const v1beta1 = cluster.apiVersion.endsWith('/v1beta1');
  const v2 = v1beta1 ? conditionsAt(status, ['v1beta2', 'conditions']) : conditionsAt(status, ['conditions']);
  const check = (conds: Condition[], types: string[], observed: (c: Condition) => number | undefined) => {
    for (const t of types) {
      const c = findCondition(conds, t);
      if (c?.status !== 'True')
        return `Cluster API condition ${t} is ${c?.status ?? 'not set'}${c?.reason ? ` (${c.reason})` : ''}`;
      const og = observed(c);
      if (og !== undefined && og < generation)
        return `Cluster API condition ${t} is for generation ${og}, not ${generation} (topology rollout not observed yet)`;
    }
    return undefined;
  };
  if (!v1beta1 || v2.length > 0) {
    const problem = check(v2, ['Available', 'TopologyReconciled'], (c) => c.observedGeneration ?? -1);
    return problem === undefined ? { ok: true, message: '' } : { ok: false, message: problem };
  }
  const og =
    isRecord(status) && typeof status.observedGeneration === 'number' ? status.observedGeneration : -1;
  const problem = check(conditionsAt(status, ['conditions']), ['Ready', 'TopologyReconciled'], () => og);
  return problem === undefined ? { ok: true, message: '' } : { ok: false, message: problem };
}

function addonReady(addon: ClusterAddon | undefined, release: string): { ok: boolean; message: string } {
  if (addon === undefined) return { ok: false, message: 'no ClusterAddon yet' };
  if (addon.status?.release !== release)
    return {
      ok: false,
      message: `ClusterAddon is at ${addon.status?.release ?? 'no release'}, not ${release}`,
    };
  const ready = findCondition(addon.status?.conditions, 'Ready');
  if (ready?.status !== 'True')
    return {
      ok: false,
      message: `ClusterAddon not Ready: ${ready?.reason ?? 'Unknown'}: ${ready?.message ?? ''}`,
    };
  return { ok: true, message: '' };
}

function celCheck(
  ctx: Ctx,
  cluster: RolloutCluster,
  addon: ClusterAddon | undefined,
): { ok: boolean; message: string } {
  const expression = ctx.spec.healthCheck?.expression;
  if (expression === undefined || expression.trim() === '') return { ok: true, message: '' };
  const r = evaluateHealthCheck(expression, { cluster, clusterAddon: addon ?? {} });
  if (r.outcome === 'refused') {
    ctx.healthCheckRefused ??= {
      ...r.problem,
      message: `Cluster ${cluster.metadata.name}: ${r.problem.message}`,
    };
    return { ok: false, message: r.problem.message };
  }
  if (r.outcome === 'error') return { ok: false, message: `healthCheck.expression: ${r.message}` };
  return r.value === true
    ? { ok: true, message: '' }
    : { ok: false, message: `healthCheck.expression is ${String(r.value)}` };
}

function versionNumber(r: ClusterStackRelease): number | undefined {
  const m = /^v(\d+)$/.exec(r.spec.version);
  return m === null ? undefined : Number(m[1]);
}

/** r is older than target: a smaller stable version; any other release of a custom channel. */
function olderThan(r: ClusterStackRelease, target: ClusterStackRelease): boolean {
  if (r.metadata.name === target.metadata.name) return false;
  const a = versionNumber(r);
  const b = versionNumber(target);
  return a === undefined || b === undefined ? true : a < b;
}

function releaseVersion(r: ClusterStackRelease): string {
  const v = r.status?.kubernetesVersion ?? r.spec.kubernetesVersion;
  return v.startsWith('v') ? v : `v${v}`;
}

const ms = (iso: string | undefined): number | undefined => {
  if (iso === undefined) return undefined;
  const t = Date.parse(iso);
  return Number.isNaN(t) ? undefined : t;
};

const rolloutAnnotations = (c: RolloutCluster): Record<string, string> =>
  Object.fromEntries(
    Object.entries(c.metadata.annotations ?? {}).filter(([k]) =>
      (Object.values(ROLLOUT_ANNOTATIONS) as string[]).includes(k),
    ),
  );

// ---- the phases of one decision -----------------------------------------------------------------

interface Ctx {
  spec: RolloutSpec;
  namespace: string;
  now: number;
  releases: Map<string, ClusterStackRelease>;
  byClass: Map<string, ClusterStackRelease>;
  addons: Map<string, ClusterAddon>;
  minSuccessMs: number;
  deadlineMs: number;
  changes: ClusterChange[];
  events: RolloutEvent[];
  wakeAt: number[];
  /** Set when a health check was not evaluated (over the cost limit): the rollout holds. */
  healthCheckRefused?: HealthCheckProblem;
}

/** Records a change of a Cluster when it would alter it (no change, no write: the fixed point). */
function change(
  ctx: Ctx,
  c: RolloutCluster,
  annotations: Record<string, string>,
  topology: ClusterChange['topology'],
  action: ClusterChange['action'],
): void {
  const ch = { name: c.metadata.name, annotations, ...(topology !== undefined ? { topology } : {}), action };
  if (changeNeeded(c, ch)) ctx.changes.push(ch);
}

/** The topology the Cluster has now (what a hand move left). */
function currentTopology(c: RolloutCluster, className: string): { className: string; version: string } {
  const t = isRecord(c.spec) && isRecord(c.spec.topology) ? c.spec.topology : {};
  return { className, version: typeof t.version === 'string' ? t.version : '' };
}

function topologyOf(r: ClusterStackRelease): { className: string; version: string } {
  return { className: r.spec.clusterClass, version: releaseVersion(r) };
}

/** Advances a Cluster that stackflux moved (annotation `to`): gate, soak, deadline, rollback, hand move. */
function advanceMoved(ctx: Ctx, c: RolloutCluster, className: string): ClusterState {
  const a = rolloutAnnotations(c);
  const to = a[ROLLOUT_ANNOTATIONS.to] ?? '';
  const result = a[ROLLOUT_ANNOTATIONS.result];
  const toRelease = ctx.releases.get(to);
  const fromRelease = ctx.releases.get(a[ROLLOUT_ANNOTATIONS.from] ?? '');
  const name = c.metadata.name;
  if (result === 'HandMoved') return { kind: 'skipped' };
  const preparing = a[ROLLOUT_ANNOTATIONS.phase] === PREPARING_PHASE;
  if (preparing && result === undefined) return advancePreparing(ctx, c, className);
  // Ended while preparing (the phase annotation stays): the topology never moved.
  if (preparing && (result === 'RolledBack' || result === 'Failed')) {
    if (fromRelease === undefined || className !== fromRelease.spec.clusterClass)
      return handMoved(ctx, c, a, className);
    change(ctx, c, a, currentTopology(c, className), 'Record');
    return { kind: 'failed' };
  }
  if (result === 'RolledBack') {
    if (fromRelease !== undefined && className === fromRelease.spec.clusterClass) {
      change(ctx, c, a, topologyOf(fromRelease), 'Record'); // keep owning the rolled-back topology
      return { kind: 'failed' };
    }
    return handMoved(ctx, c, a, className);
  }
  if (toRelease === undefined || className !== toRelease.spec.clusterClass)
    return handMoved(ctx, c, a, className);
  const keep = topologyOf(toRelease);
  if (result === 'Done') {
    change(ctx, c, a, keep, 'Record');
    return { kind: 'done' };
  }
  if (result === 'Failed') {
    change(ctx, c, a, keep, 'Record');
    return { kind: 'failed' };
  }
  const started = ms(a[ROLLOUT_ANNOTATIONS.started]) ?? ctx.now;
  const gate = [
    addonReady(ctx.addons.get(name), to),
    clusterApiReady(c),
    celCheck(ctx, c, ctx.addons.get(name)),
  ].find((g) => !g.ok);
  if (gate === undefined) {
    const since = ms(a[ROLLOUT_ANNOTATIONS.healthySince]);
    if (since === undefined && ctx.minSuccessMs > 0) {
      change(
        ctx,
        c,
        { ...a, [ROLLOUT_ANNOTATIONS.healthySince]: new Date(ctx.now).toISOString() },
        keep,
        'Record',
      );
      ctx.wakeAt.push(ctx.now + ctx.minSuccessMs);
      return {
        kind: 'inFlight',
        to,
        reason: 'Soak',
        message: `${name} healthy, soaking ${ctx.spec.minSuccessTime}`,
      };
    }
    if (since !== undefined && ctx.now < since + ctx.minSuccessMs) {
      ctx.wakeAt.push(since + ctx.minSuccessMs);
      return {
        kind: 'inFlight',
        to,
        reason: 'Soak',
        message: `${name} healthy, soaking ${ctx.spec.minSuccessTime}`,
      };
    }
    change(ctx, c, { ...a, [ROLLOUT_ANNOTATIONS.result]: 'Done' }, keep, 'Record');
    ctx.events.push({
      type: 'Normal',
      reason: 'ClusterRolledOut',
      message: `Cluster ${name} is healthy at ${to}`,
    });
    return { kind: 'done' };
  }
  const { [ROLLOUT_ANNOTATIONS.healthySince]: _since, ...unsoaked } = a;
  if (ctx.now >= started + ctx.deadlineMs) {
    const why = `Cluster ${name} did not become healthy at ${to} within ${ctx.spec.progressDeadline ?? '30m'}: ${gate.message}`;
    if (ctx.spec.rollbackOnFailure === true && fromRelease !== undefined) {
      change(
        ctx,
        c,
        { ...unsoaked, [ROLLOUT_ANNOTATIONS.result]: 'RolledBack' },
        topologyOf(fromRelease),
        'Rollback',
      );
      ctx.events.push({
        type: 'Warning',
        reason: 'ClusterRolledBack',
        message: `${why}; moved back to ${fromRelease.metadata.name}`,
      });
    } else {
      change(ctx, c, { ...unsoaked, [ROLLOUT_ANNOTATIONS.result]: 'Failed' }, keep, 'Record');
      ctx.events.push({ type: 'Warning', reason: 'ClusterRolloutFailed', message: why });
    }
    return { kind: 'failed' };
  }
  if (a[ROLLOUT_ANNOTATIONS.healthySince] !== undefined) change(ctx, c, unsoaked, keep, 'Record');
  ctx.wakeAt.push(started + ctx.deadlineMs);
  return { kind: 'inFlight', to, reason: 'HealthGate', message: `${name}: ${gate.message}` };
}

/** What a not-yet-Ready BeforeClusterUpgrade stage waits for, for status and Events. */
function stageWait(stage: UpgradeStage): string {
  switch (stage.kind) {
    case 'Applied':
      return `not Ready: ${stage.notReady.join(', ')}`;
    case 'Failed':
      return `${stage.reason}: ${stage.message}`;
    case 'Ready':
      return 'Ready';
    default:
      return stage.why;
  }
}

/**
 * A Preparing Cluster: its ClusterAddon renders the target release (addonReleaseTag); once the
 * target's BeforeClusterUpgrade stage is Ready in the workload cluster the topology moves (the
 * phase annotation goes, `started` stays so progressDeadline covers both). Until then the rollout
 * keeps applying the topology the Cluster has, so server-side apply drops no field it owned.
 */
function advancePreparing(ctx: Ctx, c: RolloutCluster, className: string): ClusterState {
  const a = rolloutAnnotations(c);
  const to = a[ROLLOUT_ANNOTATIONS.to] ?? '';
  const toRelease = ctx.releases.get(to);
  const fromRelease = ctx.releases.get(a[ROLLOUT_ANNOTATIONS.from] ?? '');
  const name = c.metadata.name;
  if (toRelease === undefined || fromRelease === undefined || className !== fromRelease.spec.clusterClass)
    return handMoved(ctx, c, a, className);
  const started = ms(a[ROLLOUT_ANNOTATIONS.started]) ?? ctx.now;
  const stage = stageFromClusterAddon(ctx.addons.get(name), to);
  if (stage.kind === 'Ready' || stage.kind === 'NotApplicable') {
    const { [ROLLOUT_ANNOTATIONS.phase]: _phase, ...moved } = a;
    change(ctx, c, moved, topologyOf(toRelease), 'Move');
    ctx.events.push({
      type: 'Normal',
      reason: 'ClusterMoved',
      message: `moved Cluster ${name} from ${fromRelease.metadata.name} to ${to}: the ${BEFORE_CLUSTER_UPGRADE_STAGE} stage is Ready`,
    });
    ctx.wakeAt.push(started + ctx.deadlineMs);
    return { kind: 'inFlight', to, reason: 'HealthGate', message: `${name} just moved` };
  }
  const keep = currentTopology(c, className);
  const wait = `the ${BEFORE_CLUSTER_UPGRADE_STAGE} stage of ${to}: ${stageWait(stage)}`;
  if (ctx.now >= started + ctx.deadlineMs) {
    const why = `Cluster ${name} was not prepared for ${to} within ${ctx.spec.progressDeadline ?? '30m'}: ${wait}`;
    const rollback = ctx.spec.rollbackOnFailure === true;
    // RolledBack puts its addons back on the class's release; Failed leaves them where they are.
    change(
      ctx,
      c,
      { ...a, [ROLLOUT_ANNOTATIONS.result]: rollback ? 'RolledBack' : 'Failed' },
      keep,
      'Record',
    );
    ctx.events.push(
      rollback
        ? {
            type: 'Warning',
            reason: 'ClusterRolledBack',
            message: `${why}; its addons go back to ${fromRelease.metadata.name}`,
          }
        : { type: 'Warning', reason: 'ClusterRolloutFailed', message: why },
    );
    return { kind: 'failed' };
  }
  change(ctx, c, a, keep, 'Record');
  ctx.wakeAt.push(started + ctx.deadlineMs);
  return { kind: 'inFlight', to, reason: 'Preparing', message: `${name} preparing: ${wait}` };
}

function handMoved(ctx: Ctx, c: RolloutCluster, a: Record<string, string>, className: string): ClusterState {
  // An operator changed the class stackflux set: stackflux never moves this Cluster again (remove
  // its rollout.stackflux.io/* annotations to hand it back). The apply repeats the values the
  // operator set, so no field stackflux owned is dropped (SSA removes fields a manager omits).
  change(
    ctx,
    c,
    { ...a, [ROLLOUT_ANNOTATIONS.result]: 'HandMoved' },
    currentTopology(c, className),
    'Record',
  );
  ctx.events.push({
    type: 'Normal',
    reason: 'ClusterHandMoved',
    message: `Cluster ${c.metadata.name} was moved to ${className} by someone else; the rollout leaves it alone`,
  });
  return { kind: 'skipped' };
}

/** The wave a Cluster with these labels moves in: the first whose selector matches, else "rest". */
export function waveOf(spec: RolloutSpec | undefined, labels: Record<string, string>): string {
  return (spec?.waves ?? []).find((w) => selects(w.selector, labels))?.name ?? REST_WAVE;
}

/** The state of every Cluster of the stack relative to the target release. */
function classify(ctx: Ctx, clusters: readonly RolloutCluster[], target: ClusterStackRelease): Entry[] {
  const out: Entry[] = [];
  for (const c of [...clusters].sort((x, y) => (x.metadata.name < y.metadata.name ? -1 : 1))) {
    if (c.metadata.deletionTimestamp !== undefined) continue;
    const use = clusterUse(c);
    if (use === undefined || (use.classNamespace !== undefined && use.classNamespace !== ctx.namespace))
      continue;
    const current = ctx.byClass.get(use.className);
    const a = rolloutAnnotations(c);
    if (current === undefined && a[ROLLOUT_ANNOTATIONS.to] === undefined) continue; // not this stack
    const wave = waveOf(ctx.spec, c.metadata.labels ?? {});
    let state: ClusterState;
    if (a[ROLLOUT_ANNOTATIONS.to] !== undefined) {
      state = advanceMoved(ctx, c, use.className);
      const to = a[ROLLOUT_ANNOTATIONS.to];
      // Finished for an older target: the Cluster is judged afresh for this one.
      if (to !== target.metadata.name && state.kind !== 'inFlight' && state.kind !== 'skipped')
        state = current === undefined ? { kind: 'skipped' } : stateAt(current, target);
    } else {
      state = current === undefined ? { kind: 'skipped' } : stateAt(current, target);
    }
    out.push({ cluster: c, wave, state });
  }
  return out;
}

function stateAt(current: ClusterStackRelease, target: ClusterStackRelease): ClusterState {
  if (current.metadata.name === target.metadata.name) return { kind: 'done' };
  return olderThan(current, target) ? { kind: 'pending' } : { kind: 'skipped' };
}

interface WaveCount {
  name: string;
  total: number;
  done: number;
  inFlight: number;
  pending: number;
  failed: number;
}

function countWaves(spec: RolloutSpec, entries: readonly Entry[]): WaveCount[] {
  const names = [...(spec.waves ?? []).map((w) => w.name), REST_WAVE];
  return names.flatMap((name) => {
    const of = entries.filter((e) => e.wave === name && e.state.kind !== 'skipped');
    if (name === REST_WAVE && of.length === 0) return [];
    const n = (k: ClusterState['kind']) => of.filter((e) => e.state.kind === k).length;
    return [
      {
        name,
        total: of.length,
        done: n('done'),
        inFlight: n('inFlight'),
        pending: n('pending'),
        failed: n('failed'),
      },
    ];
  });
}

/** Starts pending Clusters of the first unfinished wave, up to its maxConcurrent. */
function startNext(ctx: Ctx, entries: Entry[], waves: WaveCount[], target: ClusterStackRelease): string[] {
  const started: string[] = [];
  for (const w of waves) {
    if (w.pending === 0 && w.inFlight === 0) continue;
    const spec = (ctx.spec.waves ?? []).find((x) => x.name === w.name);
    const limit = resolveCount(spec !== undefined ? spec.maxConcurrent : ctx.spec.maxConcurrent, w.total, 1);
    let slots = limit - w.inFlight;
    for (const e of entries) {
      if (slots <= 0) break;
      if (e.wave !== w.name || e.state.kind !== 'pending') continue;
      const use = clusterUse(e.cluster);
      const from = use === undefined ? undefined : ctx.byClass.get(use.className);
      if (from === undefined) continue;
      const name = e.cluster.metadata.name;
      const moving = {
        [ROLLOUT_ANNOTATIONS.from]: from.metadata.name,
        [ROLLOUT_ANNOTATIONS.to]: target.metadata.name,
        [ROLLOUT_ANNOTATIONS.started]: new Date(ctx.now).toISOString(),
      };
      if (needsPreparing(target)) {
        const stage = `the ${BEFORE_CLUSTER_UPGRADE_STAGE} stage of ${target.metadata.name}`;
        change(
          ctx,
          e.cluster,
          { ...moving, [ROLLOUT_ANNOTATIONS.phase]: PREPARING_PHASE },
          currentTopology(e.cluster, from.spec.clusterClass),
          'Record',
        );
        ctx.events.push({
          type: 'Normal',
          reason: 'ClusterPreparing',
          message: `wave ${w.name}: applying ${stage} to Cluster ${name} before it moves from ${from.metadata.name}`,
        });
        e.state = {
          kind: 'inFlight',
          to: target.metadata.name,
          reason: 'Preparing',
          message: `${name} preparing: ${stage}: just started`,
        };
      } else {
        change(ctx, e.cluster, moving, topologyOf(target), 'Move');
        ctx.events.push({
          type: 'Normal',
          reason: 'ClusterMoved',
          message: `wave ${w.name}: moved Cluster ${name} from ${from.metadata.name} to ${target.metadata.name}`,
        });
        e.state = {
          kind: 'inFlight',
          to: target.metadata.name,
          reason: 'HealthGate',
          message: `${name} just moved`,
        };
      }
      w.pending -= 1;
      w.inFlight += 1;
      slots -= 1;
      started.push(name);
    }
    ctx.wakeAt.push(ctx.now + ctx.deadlineMs);
    break; // later waves wait for this one
  }
  return started;
}

/** Whether moving to r first applies its BeforeClusterUpgrade stage (the release controller records it). */
function needsPreparing(r: ClusterStackRelease): boolean {
  return (r.status?.beforeClusterUpgradeAddons ?? []).length > 0;
}

/** The newest Ready release (the ClusterStack's status.latestRelease), once its release is Ready. */
function targetOf(
  cs: ClusterStack,
  releases: Map<string, ClusterStackRelease>,
): ClusterStackRelease | undefined {
  const latest = cs.status?.latestRelease;
  const r = latest === undefined ? undefined : releases.get(latest);
  return r !== undefined && releaseReady(r) ? r : undefined;
}

/**
 * Whether a person approved the release's current impact: the approval names the release and the
 * impact's digest, so it does not carry over to another release nor to a newer impact of this one.
 */
export function approvedImpact(target: ClusterStackRelease): boolean {
  const digest = target.status?.impact?.digest;
  const a = target.metadata.annotations;
  return (
    digest !== undefined &&
    a?.[APPROVED_ANNOTATION] === target.metadata.name &&
    a[APPROVED_IMPACT_ANNOTATION] === digest
  );
}

/** Why the rollout to `target` must wait for a person (spec.rollout.requireApproval), or undefined. */
export function approvalGate(
  spec: RolloutSpec,
  target: ClusterStackRelease,
  clusterStack: string,
): { reason: 'WaitingForApproval' | 'ImpactPending'; message: string } | undefined {
  const limits = spec.requireApproval;
  const name = target.metadata.name;
  if (limits === undefined) return undefined;
  const impact = target.status?.impact;
  // An impact of another commit, or one computed before impacts had a digest, is computed again.
  if (impact === undefined || impact.commit !== target.status?.commit || impact.digest === undefined)
    return { reason: 'ImpactPending', message: `computing the impact of ${name} before the rollout starts` };
  if (approvedImpact(target)) return undefined;
  const ask = `approve with \`stackflux rollout approve ${clusterStack} -n ${target.metadata.namespace ?? 'default'}\` (annotations ${APPROVED_ANNOTATION}: ${name} and ${APPROVED_IMPACT_ANNOTATION}: ${impact.digest} on the ClusterStackRelease)`;
  if (impact.error !== undefined)
    return {
      reason: 'WaitingForApproval',
      message: `waiting for approval of ${name}: its impact could not be computed (${impact.error}); ${ask}`,
    };
  const objects = (impact.objectsAdded ?? 0) + (impact.objectsChanged ?? 0) + (impact.objectsRemoved ?? 0);
  const crossed = [
    { field: 'maxClustersFailing', limit: limits.maxClustersFailing, value: impact.clustersFailing ?? 0 },
    { field: 'maxClustersAffected', limit: limits.maxClustersAffected, value: impact.clustersAffected ?? 0 },
    { field: 'maxObjectsChanged', limit: limits.maxObjectsChanged, value: objects },
  ].filter((t) => t.limit !== undefined && t.value > t.limit);
  const none = [limits.maxClustersFailing, limits.maxClustersAffected, limits.maxObjectsChanged].every(
    (l) => l === undefined,
  );
  if (!none && crossed.length === 0) return undefined;
  const why = none
    ? 'spec.rollout.requireApproval sets no threshold: every release waits for approval'
    : crossed.map((t) => `${t.value} > ${t.field} ${t.limit}`).join(', ');
  const failing = (impact.failing ?? []).length > 0 ? `; failing: ${(impact.failing ?? []).join(', ')}` : '';
  return {
    reason: 'WaitingForApproval',
    message: `waiting for approval of ${name} (${why}): ${impact.clustersAffected ?? 0} of ${impact.clusters ?? 0} Cluster(s) affected, ${impact.clustersFailing ?? 0} failing to render, objects +${impact.objectsAdded ?? 0} ~${impact.objectsChanged ?? 0} -${impact.objectsRemoved ?? 0}${failing}; ${ask}`,
  };
}

// ---- the decision -------------------------------------------------------------------------------

export function reconcileRollout(input: RolloutInput): RolloutResult {
  const cs = input.clusterStack;
  const spec: RolloutSpec = cs.spec.rollout ?? {};
  if ((spec.strategy ?? 'Manual') !== 'Progressive') return { changes: [], events: [] };
  const invalid = validateRollout(spec);
  if (invalid !== undefined) {
    return {
      status: { phase: 'Stalled', reason: 'InvalidSpec', message: invalid },
      condition: { status: 'False', reason: 'InvalidSpec', message: invalid },
      changes: [],
      events: [],
    };
  }
  const unusable = healthCheckProblem(spec.healthCheck?.expression);
  if (unusable !== undefined) return holdRollout(cs, unusable);
  const namespace = cs.metadata.namespace ?? 'default';
  const own = input.releases.filter((r) => ownedBy(r, cs) && r.metadata.deletionTimestamp === undefined);
  const releases = new Map(own.map((r) => [r.metadata.name, r]));
  const ctx: Ctx = {
    spec,
    namespace,
    now: input.now.getTime(),
    releases,
    byClass: new Map(own.map((r) => [r.spec.clusterClass, r])),
    addons: new Map(input.clusterAddons.map((a) => [a.spec.cluster, a])),
    minSuccessMs: parseDurationOrZero(spec.minSuccessTime) ?? 0,
    deadlineMs: parseDurationOrZero(spec.progressDeadline) ?? 30 * 60_000,
    changes: [],
    events: [],
    wakeAt: [],
  };
  const target = targetOf(cs, releases);
  if (target === undefined) {
    const message = 'no Ready release of this stack yet';
    return finish(
      ctx,
      cs,
      { phase: 'Idle', reason: 'NoReadyRelease', message },
      { status: 'True', reason: 'Idle', message },
    );
  }
  const entries = classify(ctx, input.clusters, target);
  if (ctx.healthCheckRefused !== undefined) return holdRollout(cs, ctx.healthCheckRefused);
  const waves = countWaves(spec, entries);
  const failed = entries.filter((e) => e.state.kind === 'failed').map((e) => e.cluster.metadata.name);
  const total = waves.reduce((n, w) => n + w.total, 0);
  const budget = resolveCount(spec.maxFailures, total, 0);
  const pending = waves.reduce((n, w) => n + w.pending, 0);
  const base = { targetRelease: target.metadata.name };
  const listed = (k: ClusterState['kind']) =>
    entries
      .filter((e) => e.state.kind === k)
      .map((e) => e.cluster.metadata.name)
      .slice(0, MAX_LISTED);

  const approval = approvalGate(spec, target, cs.metadata.name);
  let gate:
    | { phase: RolloutStatus['phase']; reason: string; message: string; nextWindow?: string }
    | undefined;
  if (failed.length > budget) {
    const message = `${failed.length} Cluster(s) failed at ${target.metadata.name} (maxFailures ${budget}): ${failed.slice(0, 10).join(', ')}${spec.rollbackOnFailure === true ? '; moved back to their previous release' : ''}`;
    gate = { phase: 'Stalled', reason: 'Stalled', message };
  } else if (pending > 0 && approval !== undefined) {
    gate = { phase: 'Waiting', ...approval };
  } else if (pending > 0 && spec.paused === true) {
    gate = {
      phase: 'Paused',
      reason: 'Paused',
      message: 'spec.rollout.paused: no new Cluster starts; Clusters in flight finish',
    };
  } else if (pending > 0 && (spec.maintenanceWindows ?? []).length > 0) {
    const w = windowState(spec.maintenanceWindows ?? [], input.now);
    if (w.open) ctx.wakeAt.push(w.closesAt.getTime());
    else {
      if (w.nextOpen !== undefined) ctx.wakeAt.push(w.nextOpen.getTime());
      gate = {
        phase: 'Waiting',
        reason: 'MaintenanceWindow',
        message: `outside every maintenance window${w.nextOpen !== undefined ? `; the next opens at ${w.nextOpen.toISOString()}` : ''}`,
        ...(w.nextOpen !== undefined ? { nextWindow: w.nextOpen.toISOString() } : {}),
      };
    }
  }
  if (gate === undefined) startNext(ctx, entries, waves, target);

  const inFlight = entries.filter((e) => e.state.kind === 'inFlight');
  const status: RolloutStatus = {
    ...base,
    waves,
    ...(inFlight.length > 0 ? { inFlight: listed('inFlight') } : {}),
    ...(failed.length > 0 ? { failed: failed.slice(0, MAX_LISTED) } : {}),
  };
  if (gate !== undefined) {
    const { phase, reason, message, nextWindow } = gate;
    Object.assign(status, { phase, reason, message, ...(nextWindow !== undefined ? { nextWindow } : {}) });
    const stalled = phase === 'Stalled';
    return finish(ctx, cs, status, {
      status: stalled ? 'False' : 'True',
      reason: stalled ? 'Stalled' : reason,
      message,
    });
  }
  if (inFlight.length === 0 && waves.every((w) => w.pending === 0)) {
    const done = waves.reduce((n, w) => n + w.done, 0);
    const message = `${done} Cluster(s) at ${target.metadata.name}`;
    return finish(
      ctx,
      cs,
      { ...status, phase: 'Complete', reason: 'Complete', message },
      { status: 'True', reason: 'Complete', message },
    );
  }
  const first = inFlight[0]?.state;
  const reason = first?.kind === 'inFlight' ? first.reason : 'HealthGate';
  const message =
    first?.kind === 'inFlight'
      ? `waiting for ${inFlight.length} Cluster(s) in flight; ${first.message}`
      : 'moving';
  ctx.wakeAt.push(ctx.now + IN_FLIGHT_RECHECK_MS);
  return finish(
    ctx,
    cs,
    { ...status, phase: 'Progressing', reason, message },
    { status: 'True', reason: 'Progressing', message },
  );
}

/**
 * The rollout stopped before deciding anything, because its health check cannot be evaluated: no
 * Cluster is changed, and status.rollout keeps what it showed (minus the next window) under the
 * reason, so the last good state stays visible.
 */
function holdRollout(cs: ClusterStack, problem: HealthCheckProblem): RolloutResult {
  const { nextWindow: _next, ...last } = cs.status?.rollout ?? {};
  return {
    status: { ...last, phase: 'Stalled', reason: problem.reason, message: problem.message },
    condition: { status: 'False', ...problem },
    changes: [],
    events:
      cs.status?.rollout?.reason === problem.reason
        ? []
        : [{ type: 'Warning', reason: problem.reason, message: problem.message }],
  };
}

function finish(
  ctx: Ctx,
  cs: ClusterStack,
  status: RolloutStatus,
  condition: NonNullable<RolloutResult['condition']>,
): RolloutResult {
  const before = cs.status?.rollout;
  if (before?.phase !== status.phase || before?.targetRelease !== status.targetRelease) {
    const warn = status.phase === 'Stalled';
    ctx.events.push({
      type: warn ? 'Warning' : 'Normal',
      reason: `Rollout${status.phase ?? ''}`,
      message: `rollout${status.targetRelease !== undefined ? ` to ${status.targetRelease}` : ''}: ${status.phase}: ${status.message ?? ''}`,
    });
  }
  const future = ctx.wakeAt.filter((t) => t > ctx.now);
  const requeue = future.length > 0 ? Math.min(...future) - ctx.now : undefined;
  return {
    status,
    condition,
    changes: ctx.changes,
    events: ctx.events,
    ...(requeue !== undefined ? { requeueAfterMs: requeue } : {}),
  };
}

/** Whether applying `change` would alter the Cluster (the fixed point: no change, no write). */
export function changeNeeded(c: RolloutCluster, ch: ClusterChange): boolean {
  const have = rolloutAnnotations(c);
  const want = ch.annotations;
  const keys = new Set([...Object.keys(have), ...Object.keys(want)]);
  for (const k of keys) if (have[k] !== want[k]) return true;
  if (ch.topology === undefined) return false;
  const use = clusterUse(c);
  const version = isRecord(c.spec) && isRecord(c.spec.topology) ? c.spec.topology.version : undefined;
  return use?.className !== ch.topology.className || version !== ch.topology.version;
}

/** The server-side apply body of a change (v1beta2 classRef.name, v1beta1 class). */
export function clusterApplyBody(c: RolloutCluster, ch: ClusterChange): Record<string, unknown> {
  const v1beta1 = c.apiVersion.endsWith('/v1beta1');
  return {
    apiVersion: c.apiVersion,
    kind: 'Cluster',
    metadata: { name: c.metadata.name, namespace: c.metadata.namespace, annotations: ch.annotations },
    ...(ch.topology !== undefined
      ? {
          spec: {
            topology: v1beta1
              ? { class: ch.topology.className, version: ch.topology.version }
              : { classRef: { name: ch.topology.className }, version: ch.topology.version },
          },
        }
      : {}),
  };
}
