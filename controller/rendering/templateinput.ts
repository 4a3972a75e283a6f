// The template input of a Cluster's addons (issue 31, F4): the Cluster, ControlPlane and
// InfraCluster objects as every template sees them, built by ONE function for the live fan-out and
// for the preview / impact alike (both render through reconcilers/clusteraddon/render.ts
// renderAddons, which calls templateInputOf). The live controller reads lean informer objects (no
// managedFields, no kubectl last-applied annotation, a resourceVersion) and the preview reads listed
// objects (a last-applied annotation, no resourceVersion): a template branching on such a field
// would show "no change" in the preview and roll out something else. So what the API server or a
// tool keeps about an object, not what the object says, is taken out here, the same for both:
// - metadata.managedFields, resourceVersion, generation (bumped by the rollout's own move, which the
//   preview makes in memory), selfLink;
// - kubectl's last-applied-configuration annotation (present or not depending on who listed it);
// - the rollout's bookkeeping annotations (rollout.stackflux.io/*: written by the live move, not by
//   the preview's in-memory move).
import type { PlainObject } from './types.ts';

/** Metadata fields that record the object's history on the server, not its content. */
const SERVER_METADATA = new Set(['managedFields', 'resourceVersion', 'generation', 'selfLink']);
/** Annotations that templates never see (see the header). */
const HIDDEN_ANNOTATION =
  /^(kubectl\.kubernetes\.io\/last-applied-configuration|rollout\.stackflux\.io\/.*)$/;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** One object as templates see it (see the header); the object itself is not changed. */
export function templateObject(obj: PlainObject): PlainObject {
  if (!isRecord(obj.metadata)) return obj;
  const metadata: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(obj.metadata)) {
    if (SERVER_METADATA.has(k)) continue;
    if (k === 'annotations' && isRecord(v)) {
      const kept = Object.entries(v).filter(([a]) => !HIDDEN_ANNOTATION.test(a));
      if (kept.length > 0) metadata.annotations = Object.fromEntries(kept);
      continue;
    }
    metadata[k] = v;
  }
  return { ...obj, metadata };
}

/** What a Cluster's addon templates read besides values: `Cluster`, `ControlPlane`, `InfraCluster`. */
export interface TemplateInput {
  cluster: PlainObject;
  controlPlane?: PlainObject;
  infraCluster?: PlainObject;
}

/** The template input of one Cluster, the same whoever read the objects (live or preview). */
export function templateInputOf(objects: TemplateInput): TemplateInput {
  return {
    cluster: templateObject(objects.cluster),
    ...(objects.controlPlane !== undefined ? { controlPlane: templateObject(objects.controlPlane) } : {}),
    ...(objects.infraCluster !== undefined ? { infraCluster: templateObject(objects.infraCluster) } : {}),
  };
}
