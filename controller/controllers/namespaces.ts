// Namespace labels for the sharing decision (reconcilers/sharing.ts): one metadata-only informer of
// Namespaces shared by the controllers (names and labels only), read for the few namespaces a
// decision asks about; only a change of a Namespace's labels requeues anything.
import type { NamespaceLabels } from '../reconcilers/sharing.ts';
import type { KubeObject } from '../runtime/client.ts';
import type { Informer } from '../runtime/informer.ts';
import type { Manager } from '../runtime/manager.ts';
import { sameJson } from './common.ts';

export function namespaceInformer(manager: Pick<Manager, 'informer'>): Informer<KubeObject> {
  return manager.informer<KubeObject>('v1', 'Namespace', { metadataOnly: true });
}

/** The labels of these namespaces (a missing one has no entry); undefined until the first list. */
export function namespaceLabelsOf(
  namespaces: Informer<KubeObject>,
  names: Iterable<string>,
): NamespaceLabels | undefined {
  if (!namespaces.hasSynced()) return undefined;
  const out = new Map<string, Record<string, string>>();
  for (const name of names) {
    const ns = namespaces.get(name);
    if (ns !== undefined) out.set(name, ns.metadata.labels ?? {});
  }
  return out;
}

/** Whether an update changed what the sharing decision reads. */
export function namespaceLabelsChanged(o: KubeObject, n: KubeObject): boolean {
  return !sameJson(o.metadata.labels ?? {}, n.metadata.labels ?? {});
}
