// Leader election on a coordination.k8s.io/v1 Lease with client-go semantics
// (k8s.io/client-go/tools/leaderelection):
//  - lease duration 15 s, renew deadline 10 s, retry period 2 s (all injectable);
//  - a candidate judges expiry by when *it* last saw the lease record change, on its own clock,
//    never by comparing the remote renewTime with its clock;
//  - every write is an optimistic update (PUT carrying the resourceVersion it read);
//  - the leader renews every retry period; if it cannot renew within the renew deadline, or sees
//    another holder, it stops leading at once (onStoppedLeading, and the leading signal aborts).
//    renewDeadline < leaseDuration means it stops before anyone else may take over;
//  - on stop() the leader releases the lease (holder cleared, duration 1 s) so a successor need
//    not wait out the lease.

import { isConflict, isNotFound, type KubeClient, type KubeObject } from './client.ts';
import { type Clock, realClock, sleep } from './clock.ts';
import { errorFields, type Logger, silentLogger } from './logging.ts';

export interface LeaseSpec {
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: string;
  renewTime?: string;
  leaseTransitions?: number;
}

export type Lease = KubeObject & { spec?: LeaseSpec };

export interface LeaderElectorOptions {
  client: KubeClient;
  namespace: string;
  name: string;
  /** Unique per replica (e.g. pod name + random suffix). */
  identity: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  clock?: Clock;
  logger?: Logger;
  /** Called when this replica becomes leader; the signal aborts when leadership ends. */
  onStartedLeading?: (signal: AbortSignal) => void;
  /** Called at once when leadership ends (lost or released). */
  onStoppedLeading?: () => void;
  /** Called when the observed holder changes (including to ourselves). */
  onNewLeader?: (identity: string) => void;
  /** Metrics hook (leader_election_master_status). */
  setLeading?: (leading: boolean) => void;
  /** Release the lease on stop() (default true). */
  releaseOnCancel?: boolean;
}

/** metav1.MicroTime: RFC 3339 with microseconds. */
export function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

export class LeaderElector {
  private readonly o: Required<
    Pick<LeaderElectorOptions, 'leaseDurationMs' | 'renewDeadlineMs' | 'retryPeriodMs'>
  > &
    LeaderElectorOptions;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly stopController = new AbortController();
  private observedSpec = '';
  private observedTime = 0;
  private observedHolder = '';
  private leading = false;
  private leaderAbort: AbortController | undefined;
  private renewalsPaused = false;
  private running: Promise<void> | undefined;

  constructor(opts: LeaderElectorOptions) {
    const leaseDurationMs = opts.leaseDurationMs ?? 15_000;
    const renewDeadlineMs = opts.renewDeadlineMs ?? 10_000;
    const retryPeriodMs = opts.retryPeriodMs ?? 2_000;
    if (!(leaseDurationMs > renewDeadlineMs))
      throw new Error('leaseDuration must be greater than renewDeadline');
    if (!(renewDeadlineMs > retryPeriodMs * 1.2))
      throw new Error('renewDeadline must be greater than retryPeriod*1.2');
    this.o = { ...opts, leaseDurationMs, renewDeadlineMs, retryPeriodMs };
    this.clock = opts.clock ?? realClock;
    this.log = (opts.logger ?? silentLogger()).child({
      lease: `${opts.namespace}/${opts.name}`,
      identity: opts.identity,
    });
  }

  isLeader(): boolean {
    return this.leading;
  }

  /** Identity of the holder as last observed (may be stale). */
  observedLeader(): string {
    return this.observedHolder;
  }

  /** Campaigns, leads until leadership ends or stop(); resolves when no longer leading/campaigning. */
  run(): Promise<void> {
    this.running ??= this.loop();
    return this.running;
  }

  /** Stops campaigning/leading; releases the lease if held. */
  async stop(): Promise<void> {
    this.stopController.abort();
    await this.running;
  }

  /** Fault injection for tests: renew attempts fail without reaching the server. */
  pauseRenewals(): void {
    this.renewalsPaused = true;
  }

  private async loop(): Promise<void> {
    const stop = this.stopController.signal;
    this.o.setLeading?.(false);
    // Acquire.
    while (!stop.aborted) {
      if (await this.attempt(this.o.renewDeadlineMs)) break;
      await sleep(this.clock, this.jitter(this.o.retryPeriodMs), stop);
    }
    if (stop.aborted) return;
    this.leading = true;
    this.leaderAbort = new AbortController();
    this.o.setLeading?.(true);
    this.log.info('became leader');
    const signal = this.leaderAbort.signal;
    this.safe(() => this.o.onStartedLeading?.(signal));

    // Renew.
    let lastRenew = this.clock.now();
    let lost = false;
    while (!stop.aborted) {
      await sleep(this.clock, this.o.retryPeriodMs, stop);
      if (stop.aborted) break;
      const remaining = lastRenew + this.o.renewDeadlineMs - this.clock.now();
      const ok = remaining > 0 && (await this.attempt(remaining));
      if (ok) {
        lastRenew = this.clock.now();
        continue;
      }
      const someoneElse = this.observedHolder !== '' && this.observedHolder !== this.o.identity;
      if (someoneElse || this.clock.now() - lastRenew >= this.o.renewDeadlineMs) {
        lost = true;
        this.log.warn({ holder: this.observedHolder }, 'leadership lost: could not renew the lease in time');
        break;
      }
    }
    this.endLeading();
    if (!lost && this.o.releaseOnCancel !== false) await this.release();
  }

  private endLeading(): void {
    if (!this.leading) return;
    this.leading = false;
    this.o.setLeading?.(false);
    this.leaderAbort?.abort(new Error('leadership ended'));
    this.safe(() => this.o.onStoppedLeading?.());
  }

  private jitter(ms: number): number {
    return ms * (1 + Math.random() * 0.2);
  }

  private safe(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.log.error(errorFields(err), 'leader election callback failed');
    }
  }

  private leasePath(name?: string): string {
    const base = `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(this.o.namespace)}/leases`;
    return name ? `${base}/${encodeURIComponent(name)}` : base;
  }

  /** One tryAcquireOrRenew bounded by timeoutMs; errors count as failure. */
  private async attempt(timeoutMs: number): Promise<boolean> {
    const abort = new AbortController();
    const timer = this.clock.setTimeout(() => abort.abort(new Error('lease request timed out')), timeoutMs);
    try {
      return await this.tryAcquireOrRenew(abort.signal);
    } catch (err) {
      this.log.debug(errorFields(err), 'lease acquire/renew failed');
      return false;
    } finally {
      this.clock.clearTimeout(timer);
    }
  }

  private observe(spec: LeaseSpec | undefined): void {
    const s = JSON.stringify(spec ?? {});
    if (s !== this.observedSpec) {
      this.observedSpec = s;
      this.observedTime = this.clock.now();
      const holder = spec?.holderIdentity ?? '';
      if (holder !== this.observedHolder) {
        this.observedHolder = holder;
        if (holder) this.safe(() => this.o.onNewLeader?.(holder));
      }
    }
  }

  private async tryAcquireOrRenew(signal: AbortSignal): Promise<boolean> {
    if (this.leading && this.renewalsPaused) throw new Error('renewals paused (fault injection)');
    const now = this.clock.now();
    const mine: LeaseSpec = {
      holderIdentity: this.o.identity,
      leaseDurationSeconds: Math.max(1, Math.round(this.o.leaseDurationMs / 1000)),
      acquireTime: microTime(now),
      renewTime: microTime(now),
      leaseTransitions: 0,
    };
    let current: Lease;
    try {
      current = await this.o.client.request<Lease>('GET', this.leasePath(this.o.name), {
        signal,
        unlimited: true,
      });
    } catch (err) {
      if (!isNotFound(err)) throw err;
      const created = await this.o.client.request<Lease>('POST', this.leasePath(), {
        body: {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: { name: this.o.name, namespace: this.o.namespace },
          spec: mine,
        },
        signal,
        unlimited: true,
      });
      this.observe(created.spec);
      return true;
    }
    const spec = current.spec ?? {};
    this.observe(spec);
    const holder = spec.holderIdentity ?? '';
    const durationMs = (spec.leaseDurationSeconds ?? 0) * 1000;
    if (holder !== '' && holder !== this.o.identity && this.observedTime + durationMs > this.clock.now()) {
      return false;
    }
    const next: LeaseSpec =
      holder === this.o.identity
        ? {
            ...mine,
            acquireTime: spec.acquireTime ?? mine.acquireTime,
            leaseTransitions: spec.leaseTransitions ?? 0,
          }
        : { ...mine, leaseTransitions: (spec.leaseTransitions ?? 0) + (holder !== '' ? 1 : 0) };
    try {
      const updated = await this.o.client.request<Lease>('PUT', this.leasePath(this.o.name), {
        body: { ...current, spec: next },
        signal,
        unlimited: true,
      });
      this.observe(updated.spec);
      return true;
    } catch (err) {
      if (isConflict(err)) return false;
      throw err;
    }
  }

  /** Gives the lease up: holder cleared, duration 1 s (client-go's release). */
  private async release(): Promise<void> {
    const abort = new AbortController();
    const timer = this.clock.setTimeout(() => abort.abort(), this.o.renewDeadlineMs);
    try {
      const current = await this.o.client.request<Lease>('GET', this.leasePath(this.o.name), {
        signal: abort.signal,
        unlimited: true,
      });
      if (current.spec?.holderIdentity !== this.o.identity) return;
      const now = microTime(this.clock.now());
      await this.o.client.request<Lease>('PUT', this.leasePath(this.o.name), {
        body: {
          ...current,
          spec: {
            ...current.spec,
            holderIdentity: '',
            leaseDurationSeconds: 1,
            acquireTime: now,
            renewTime: now,
          },
        },
        signal: abort.signal,
        unlimited: true,
      });
      this.log.info('lease released');
    } catch (err) {
      this.log.warn(errorFields(err), 'could not release the lease');
    } finally {
      this.clock.clearTimeout(timer);
    }
  }
}
