// ClusterStack.spec.rollout and status.rollout: how the Clusters of a stack move to a new release.
// Manual (the default): Clusters keep the ClusterClass they name. Progressive: stackflux moves them
// wave by wave, gated on health (controller/reconcilers/rollout.ts decides, controllers/rollout.ts
// applies). The per-Cluster progress is kept in annotations on the Cluster (ROLLOUT_ANNOTATIONS),
// so a restarted controller resumes where the last one stopped.
import { durationSchema } from './meta.ts';
import { type FromSchema, schema } from './schema.ts';

/** A count ("2") or a percentage ("50%") of a set of Clusters. */
export const countOrPercentSchema = schema({
  'x-kubernetes-int-or-string': true,
  pattern: '^(0|[1-9][0-9]*)%?$',
});

export const labelSelectorSchema = schema({
  type: 'object',
  description: 'A Kubernetes label selector over the Cluster labels; empty selects every Cluster.',
  properties: {
    matchLabels: { type: 'object', additionalProperties: { type: 'string' } },
    matchExpressions: {
      type: 'array',
      items: {
        type: 'object',
        required: ['key', 'operator'],
        properties: {
          key: { type: 'string' },
          operator: { type: 'string', enum: ['In', 'NotIn', 'Exists', 'DoesNotExist'] },
          values: { type: 'array', items: { type: 'string' } },
        },
      },
    },
  },
});
export type LabelSelector = FromSchema<typeof labelSelectorSchema>;

export const rolloutWaveSchema = schema({
  type: 'object',
  required: ['name'],
  properties: {
    name: { type: 'string', pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$', maxLength: 63 },
    selector: labelSelectorSchema,
    maxConcurrent: {
      ...countOrPercentSchema,
      description:
        'Clusters of this wave in flight at once: a count or a percentage of the wave (default 1).',
    },
  },
});
export type RolloutWave = FromSchema<typeof rolloutWaveSchema>;

export const maintenanceWindowSchema = schema({
  type: 'object',
  required: ['schedule', 'duration'],
  properties: {
    schedule: {
      type: 'string',
      description: 'Start of the window: a 5-field cron expression (minute hour day month weekday).',
      minLength: 1,
    },
    duration: { ...durationSchema, description: 'How long each window stays open, e.g. 4h.' },
    timeZone: {
      type: 'string',
      description: 'IANA time zone the schedule is read in, e.g. Europe/Berlin (default UTC).',
    },
  },
});
export type MaintenanceWindow = FromSchema<typeof maintenanceWindowSchema>;

/** Longest spec.rollout.healthCheck.expression (the CRD refuses longer; the reconciler checks too). */
export const MAX_HEALTH_CHECK_LENGTH = 1024;

export const rolloutSpecSchema = schema({
  type: 'object',
  description: 'How Clusters move to new releases.',
  properties: {
    strategy: {
      type: 'string',
      description:
        'Manual: Clusters keep the ClusterClass they name; users move them. Progressive: when a newer ' +
        'release is Ready, stackflux moves the Clusters of older releases of this stack to it, wave by ' +
        'wave, gated on health.',
      enum: ['Manual', 'Progressive'],
      default: 'Manual',
    },
    waves: {
      type: 'array',
      description:
        'Ordered waves. A Cluster belongs to the first wave whose selector matches its labels; the ' +
        'Clusters no wave matches form a last implicit wave "rest" (maxConcurrent of the rollout).',
      items: rolloutWaveSchema,
      'x-kubernetes-list-type': 'map',
      'x-kubernetes-list-map-keys': ['name'],
      maxItems: 20,
    },
    maxConcurrent: {
      ...countOrPercentSchema,
      description: 'Clusters of the implicit last wave in flight at once (default 1).',
    },
    minSuccessTime: {
      ...durationSchema,
      description: 'How long a moved Cluster must pass the health gate before it counts as done (soak).',
      default: '0s',
    },
    progressDeadline: {
      ...durationSchema,
      description: 'A moved Cluster that has not passed its soak this long after its move counts as failed.',
      default: '30m',
    },
    maxFailures: {
      ...countOrPercentSchema,
      description:
        'Failed Clusters tolerated (count or percentage of the Clusters of the rollout) before the ' +
        'rollout stops (Stalled). Default 0: the first failure stops it.',
    },
    rollbackOnFailure: {
      type: 'boolean',
      description: 'Move a failed Cluster back to the release it came from.',
      default: false,
    },
    paused: {
      type: 'boolean',
      description: 'Start no new Cluster; Clusters in flight finish (`stackflux rollout pause|resume`).',
      default: false,
    },
    maintenanceWindows: {
      type: 'array',
      description: 'When set, a Cluster may only start moving inside one of these windows.',
      items: maintenanceWindowSchema,
      maxItems: 20,
    },
    requireApproval: {
      type: 'object',
      description:
        "Hold a new target release until a person approves it (annotations rollout.stackflux.io/approved: <release> and rollout.stackflux.io/approved-impact: <status.impact.digest> on the ClusterStackRelease, or `stackflux rollout approve`) when its impact (the release's status.impact) crosses any threshold set here. No threshold set: every new release waits for approval. A release whose impact is not computed yet waits. A Cluster whose live render differs from the one the impact recorded is held (ClusterAddon RenderApproved=False) and the impact is computed again.",
      properties: {
        maxClustersFailing: {
          type: 'integer',
          minimum: 0,
          description: 'More Clusters that would fail to render than this need approval (0: any).',
        },
        maxClustersAffected: {
          type: 'integer',
          minimum: 0,
          description: 'More Clusters whose fleet branch would change than this need approval.',
        },
        maxObjectsChanged: {
          type: 'integer',
          minimum: 0,
          description:
            'More objects added, changed and removed (summed over every Cluster) than this need approval.',
        },
      },
    },
    healthCheck: {
      type: 'object',
      description:
        'Extra health check of a moved Cluster, on top of its ClusterAddon and Cluster API conditions.',
      properties: {
        expression: {
          type: 'string',
          description:
            'A CEL expression over `cluster` (the Cluster object) and `clusterAddon` that must be true, ' +
            'e.g. cluster.status.phase == "Provisioned". Its estimated cost is limited (see README: ' +
            'CEL health check limits); matches(), split() and json() are not allowed.',
          maxLength: MAX_HEALTH_CHECK_LENGTH,
        },
      },
    },
  },
});
export type RolloutSpec = FromSchema<typeof rolloutSpecSchema>;

export const ROLLOUT_PHASES = ['Idle', 'Progressing', 'Waiting', 'Paused', 'Stalled', 'Complete'] as const;

export const rolloutStatusSchema = schema({
  type: 'object',
  description: 'Progress of the Progressive rollout.',
  properties: {
    phase: { type: 'string', enum: ROLLOUT_PHASES },
    targetRelease: { type: 'string', description: 'The release Clusters are being moved to.' },
    reason: { type: 'string', description: 'Why it waits: Paused, MaintenanceWindow, Soak, HealthGate, …' },
    message: { type: 'string' },
    nextWindow: {
      type: 'string',
      format: 'date-time',
      description: 'Start of the next maintenance window, while outside every window.',
    },
    waves: {
      type: 'array',
      items: {
        type: 'object',
        required: ['name', 'total', 'done', 'inFlight', 'pending', 'failed'],
        properties: {
          name: { type: 'string' },
          total: { type: 'integer', minimum: 0 },
          done: { type: 'integer', minimum: 0 },
          inFlight: { type: 'integer', minimum: 0 },
          pending: { type: 'integer', minimum: 0 },
          failed: { type: 'integer', minimum: 0 },
        },
      },
    },
    inFlight: {
      type: 'array',
      description: 'Clusters moved and not yet done (at most 50 listed).',
      items: { type: 'string' },
      maxItems: 50,
    },
    failed: {
      type: 'array',
      description: 'Clusters that failed for the target release (at most 50 listed).',
      items: { type: 'string' },
      maxItems: 50,
    },
  },
});
export type RolloutStatus = FromSchema<typeof rolloutStatusSchema>;

/** Annotations on a Cluster that record its rollout (written with the rollout field manager). */
export const ROLLOUT_ANNOTATIONS = {
  /** The release the Cluster was moved from. */
  from: 'rollout.stackflux.io/from',
  /** The release the Cluster was moved to. */
  to: 'rollout.stackflux.io/to',
  /** When it was moved (RFC 3339). */
  started: 'rollout.stackflux.io/started',
  /** Since when it passes the health gate (RFC 3339). */
  healthySince: 'rollout.stackflux.io/healthy-since',
  /** Done | Failed | RolledBack | HandMoved. */
  result: 'rollout.stackflux.io/result',
  /**
   * Preparing: the target release's BeforeClusterUpgrade stage is being applied to the Cluster's
   * workload cluster; the topology has not moved yet (removed when it moves).
   */
  phase: 'rollout.stackflux.io/phase',
} as const;

/** On a ClusterStackRelease: its name, when a person approved the rollout to it (spec.rollout.requireApproval). */
export const APPROVED_ANNOTATION = 'rollout.stackflux.io/approved';
/**
 * On a ClusterStackRelease, with APPROVED_ANNOTATION: the status.impact.digest a person approved.
 * An approval holds only for the impact it names: a newer impact (computed again because a live
 * render differed from the previewed one) waits for approval again.
 */
export const APPROVED_IMPACT_ANNOTATION = 'rollout.stackflux.io/approved-impact';

/** The value of ROLLOUT_ANNOTATIONS.phase before the move. */
export const PREPARING_PHASE = 'Preparing';

/** The condition type on the ClusterStack that summarises the rollout (written by the rollout controller). */
export const ROLLOUT_CONDITION = 'Rollout';

/** A ClusterStack status without what the rollout controller owns (status.rollout, the Rollout condition). */
export function withoutRolloutStatus<T extends { rollout?: unknown; conditions?: { type: string }[] }>(
  status: T,
): Omit<T, 'rollout'> {
  const { rollout: _r, ...rest } = status;
  return rest.conditions === undefined
    ? rest
    : { ...rest, conditions: rest.conditions.filter((c) => c.type !== ROLLOUT_CONDITION) };
}

/** The field manager of the Cluster topology fields stackflux moves (not the main "stackflux"). */
export const ROLLOUT_FIELD_MANAGER = 'stackflux-rollout';
