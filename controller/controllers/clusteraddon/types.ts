// Types shared by the ClusterAddon controller's collaborators (this folder) and its composition
// (../clusteraddon.ts). The lowest layer of the controller: it imports no collaborator.
import type { ClusterStack } from '../../api/clusterstack.ts';
import type { BranchUpdate } from '../../reconcilers/clusteraddon.ts';
import type { KubeObject } from '../../runtime/client.ts';

export type Obj = KubeObject;

/** Why the last fetch or write of a Cluster's branch failed (shown in its ClusterAddon's Ready). */
export interface FleetFailure {
  reason: string;
  message: string;
}

/** A branch change waiting for its batch, and the ClusterStack its push is reported on. */
export interface PendingChange {
  update: BranchUpdate;
  regarding?: ClusterStack & Obj;
}

/** The namespace of an object ("" for cluster-scoped ones). */
export const nsOf = (o: Obj): string => o.metadata.namespace ?? '';

/** The controller key ("namespace/name") of an object. */
export const keyOf = (o: Obj): string => `${nsOf(o)}/${o.metadata.name ?? ''}`;
