// Kubernetes label selectors (matchLabels AND matchExpressions), evaluated in memory: rollout waves
// select Clusters, a ClusterStack's clusterNamespaceSelector selects Namespaces.
import type { LabelSelector } from '../api/rollout.ts';

/** Whether a label selector selects these labels (an empty selector selects everything). */
export function selects(selector: LabelSelector | undefined, labels: Record<string, string>): boolean {
  if (selector === undefined) return true;
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of selector.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, e.key);
    const inValues = has && (e.values ?? []).includes(labels[e.key] ?? '');
    if (e.operator === 'In' && !inValues) return false;
    if (e.operator === 'NotIn' && inValues) return false;
    if (e.operator === 'Exists' && !has) return false;
    if (e.operator === 'DoesNotExist' && has) return false;
  }
  return true;
}
