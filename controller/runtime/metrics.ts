// Prometheus metrics with controller-runtime's names, on a registry of our own (never the global
// one, so tests and several managers in one process do not collide).
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { QueueMetrics } from './workqueue.ts';

export type ReconcileResult = 'success' | 'error' | 'requeue' | 'requeue_after';

export interface ControllerMetrics {
  reconciled(result: ReconcileResult, seconds: number): void;
  error(terminal: boolean): void;
  activeWorkers(delta: number): void;
}

// controller-runtime's buckets for controller_runtime_reconcile_time_seconds.
const reconcileBuckets = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25,
  1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
];
// client-go's workqueue buckets: 10ns … 1000s.
const queueBuckets = Array.from({ length: 12 }, (_, i) => 1e-8 * 10 ** i);

/** Sampling period of nodejs_eventloop_lag_* (prom-client's default is 10 ms). */
export const EVENT_LOOP_SAMPLE_MS = 100;

/** What observeClient needs of a client (KubeClient has it). */
export interface RequestCounter {
  requestCounts(): Array<{ method: string; code: number; count: number }>;
  requestCountsByResource(): Array<{ method: string; resource: string; count: number }>;
}

export class RuntimeMetrics {
  readonly registry: Registry;
  readonly reconcileTotal: Counter<'controller' | 'result'>;
  readonly reconcileErrors: Counter<'controller'>;
  readonly terminalErrors: Counter<'controller'>;
  readonly reconcileTime: Histogram<'controller'>;
  readonly maxConcurrent: Gauge<'controller'>;
  readonly activeWorkersGauge: Gauge<'controller'>;
  readonly queueDepth: Gauge<'name'>;
  readonly queueAdds: Counter<'name'>;
  readonly queueRetries: Counter<'name'>;
  readonly queueDuration: Histogram<'name'>;
  readonly workDuration: Histogram<'name'>;
  readonly leaderStatus: Gauge<'name'>;
  readonly restClientRequests: Counter<'method' | 'code'>;
  readonly apiRequestsByResource: Counter<'method' | 'resource'>;
  private readonly clients: RequestCounter[] = [];

  constructor(opts: { registry?: Registry; processMetrics?: boolean } = {}) {
    const clients = (): RequestCounter[] => this.clients;
    this.registry = opts.registry ?? new Registry();
    const registers = [this.registry];
    // The event loop delay monitor samples with a timer: at prom-client's default 10 ms that alone
    // is ~0.25 CPU s/min of an idle controller; every 100 ms still shows a stalled loop.
    if (opts.processMetrics)
      collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
    this.reconcileTotal = new Counter({
      name: 'controller_runtime_reconcile_total',
      help: 'Total number of reconciliations per controller',
      labelNames: ['controller', 'result'],
      registers,
    });
    this.reconcileErrors = new Counter({
      name: 'controller_runtime_reconcile_errors_total',
      help: 'Total number of reconciliation errors per controller',
      labelNames: ['controller'],
      registers,
    });
    this.terminalErrors = new Counter({
      name: 'controller_runtime_terminal_reconcile_errors_total',
      help: 'Total number of terminal reconciliation errors per controller',
      labelNames: ['controller'],
      registers,
    });
    this.reconcileTime = new Histogram({
      name: 'controller_runtime_reconcile_time_seconds',
      help: 'Length of time per reconciliation per controller',
      labelNames: ['controller'],
      buckets: reconcileBuckets,
      registers,
    });
    this.maxConcurrent = new Gauge({
      name: 'controller_runtime_max_concurrent_reconciles',
      help: 'Maximum number of concurrent reconciles per controller',
      labelNames: ['controller'],
      registers,
    });
    this.activeWorkersGauge = new Gauge({
      name: 'controller_runtime_active_workers',
      help: 'Number of currently used workers per controller',
      labelNames: ['controller'],
      registers,
    });
    this.queueDepth = new Gauge({
      name: 'workqueue_depth',
      help: 'Current depth of workqueue',
      labelNames: ['name'],
      registers,
    });
    this.queueAdds = new Counter({
      name: 'workqueue_adds_total',
      help: 'Total number of adds handled by workqueue',
      labelNames: ['name'],
      registers,
    });
    this.queueRetries = new Counter({
      name: 'workqueue_retries_total',
      help: 'Total number of retries handled by workqueue',
      labelNames: ['name'],
      registers,
    });
    this.queueDuration = new Histogram({
      name: 'workqueue_queue_duration_seconds',
      help: 'How long in seconds an item stays in workqueue before being requested',
      labelNames: ['name'],
      buckets: queueBuckets,
      registers,
    });
    this.workDuration = new Histogram({
      name: 'workqueue_work_duration_seconds',
      help: 'How long in seconds processing an item from workqueue takes',
      labelNames: ['name'],
      buckets: queueBuckets,
      registers,
    });
    this.leaderStatus = new Gauge({
      name: 'leader_election_master_status',
      help: 'Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master',
      labelNames: ['name'],
      registers,
    });
    this.restClientRequests = new Counter({
      name: 'rest_client_requests_total',
      help: 'Number of HTTP requests to the API server, partitioned by method and status code (0: no response)',
      labelNames: ['method', 'code'],
      registers,
      collect() {
        this.reset();
        for (const c of clients())
          for (const { method, code, count } of c.requestCounts())
            this.inc({ method, code: String(code) }, count);
      },
    });
    this.apiRequestsByResource = new Counter({
      name: 'stackflux_api_requests_total',
      help: 'API requests by method and resource (plural, /subresource): which kinds stackflux reads and writes',
      labelNames: ['method', 'resource'],
      registers,
      collect() {
        this.reset();
        for (const c of clients())
          for (const { method, resource, count } of c.requestCountsByResource())
            this.inc({ method, resource }, count);
      },
    });
  }

  /** Exports a client's request counts as rest_client_requests_total{method,code} (client-go's name). */
  observeClient(client: RequestCounter): void {
    this.clients.push(client);
  }

  queue(name: string): QueueMetrics {
    const labels = { name };
    this.queueDepth.set(labels, 0);
    this.queueAdds.inc(labels, 0);
    this.queueRetries.inc(labels, 0);
    return {
      add: () => this.queueAdds.inc(labels),
      depth: (n) => this.queueDepth.set(labels, n),
      retry: () => this.queueRetries.inc(labels),
      queueLatency: (s) => this.queueDuration.observe(labels, s),
      workDuration: (s) => this.workDuration.observe(labels, s),
    };
  }

  controller(name: string, maxConcurrentReconciles: number): ControllerMetrics {
    const labels = { controller: name };
    this.maxConcurrent.set(labels, maxConcurrentReconciles);
    this.activeWorkersGauge.set(labels, 0);
    this.reconcileErrors.inc(labels, 0);
    this.terminalErrors.inc(labels, 0);
    for (const result of ['success', 'error', 'requeue', 'requeue_after'] as const) {
      this.reconcileTotal.inc({ controller: name, result }, 0);
    }
    return {
      reconciled: (result, seconds) => {
        this.reconcileTotal.inc({ controller: name, result });
        this.reconcileTime.observe(labels, seconds);
      },
      error: (terminal) => {
        this.reconcileErrors.inc(labels);
        if (terminal) this.terminalErrors.inc(labels);
      },
      activeWorkers: (delta) => this.activeWorkersGauge.inc(labels, delta),
    };
  }

  leaderElection(name: string): (leading: boolean) => void {
    this.leaderStatus.set({ name }, 0);
    return (leading) => this.leaderStatus.set({ name }, leading ? 1 : 0);
  }

  /** Text exposition for /metrics. */
  async text(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  /** Current value of a counter/gauge sample, for tests and status output. */
  async value(name: string, labels: Record<string, string>): Promise<number | undefined> {
    const metric = this.registry.getSingleMetric(name);
    if (!metric) return undefined;
    const data = await metric.get();
    for (const v of data.values) {
      const sample = v as {
        labels: Record<string, string | number | undefined>;
        value: number;
        metricName?: string;
      };
      const l = sample.labels;
      if (Object.entries(labels).every(([k, want]) => String(l[k]) === want) && !('le' in l)) {
        const m = sample.metricName;
        if (!m || m === name || m === `${name}_count`) return sample.value;
      }
    }
    return undefined;
  }
}
