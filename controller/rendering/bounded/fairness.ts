// Fairness (issue 22): queued renders wait per namespace (the ClusterAddon's) and are taken
// round-robin across namespaces, so one tenant's slow renders do not hold up another's. (Round-robin
// alone still lets a tenant's slow renders hold every process: the pool reserves one more for
// namespaces with no render running, taking from here only the namespaces it allows.)

/** Namespaces whose last turn is remembered (one forgotten counts as never served). */
const SERVED_REMEMBERED = 4096;

/** Renders waiting per namespace, taken round-robin across namespaces. */
export class FairQueues<J extends { namespace: string }> {
  /** Queued renders per namespace, in order of arrival of the namespace. */
  private readonly queues = new Map<string, J[]>();
  /** The turn each namespace was last served at (the most recent last). */
  private readonly served = new Map<string, number>();
  private turn = 0;

  /** Whether any render waits. */
  get queued(): boolean {
    return this.queues.size > 0;
  }

  /** Queues a render behind the others of its namespace. */
  push(job: J): void {
    const queue = this.queues.get(job.namespace);
    if (queue !== undefined) queue.push(job);
    else this.queues.set(job.namespace, [job]);
  }

  /**
   * The next queued render: from the namespace served longest ago (one never served first, then
   * in order of arrival), so each namespace with renders waiting gets a turn in round-robin.
   */
  take(eligible: (namespace: string) => boolean = () => true): J | undefined {
    let pick: string | undefined;
    let pickServed = Number.POSITIVE_INFINITY;
    for (const namespace of this.queues.keys()) {
      if (!eligible(namespace)) continue;
      const served = this.served.get(namespace) ?? -1;
      if (served < pickServed) {
        pick = namespace;
        pickServed = served;
      }
    }
    if (pick === undefined) return undefined;
    const queue = this.queues.get(pick) as J[];
    const job = queue.shift();
    if (queue.length === 0) this.queues.delete(pick);
    this.served.delete(pick);
    this.served.set(pick, this.turn++);
    if (this.served.size > SERVED_REMEMBERED) {
      const oldest = this.served.keys().next();
      if (!oldest.done) this.served.delete(oldest.value);
    }
    return job;
  }

  /** Every queued render, in order of namespace then arrival; the queues are left empty. */
  drain(): J[] {
    const jobs = [...this.queues.values()].flat();
    this.queues.clear();
    return jobs;
  }
}
