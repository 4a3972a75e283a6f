import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { KubeClient } from '../../../controller/runtime/client.ts';
import type { Lease } from '../../../controller/runtime/leaderelection.ts';
import { eventually, testEnv } from '../../support/env.ts';
import { deleteNamespace, freshNamespace, runtimeClient } from './helpers.ts';

type Line = Record<string, unknown>;

function startProcess(ns: string): { child: ChildProcess; lines: Line[]; exited: Promise<number | null> } {
  const node = join(process.cwd(), 'node_modules', '.bin', 'node');
  const child = spawn(node, [join(import.meta.dirname, 'fixtures', 'manager-process.ts')], {
    env: { ...process.env, KUBECONFIG: testEnv().kubeconfig, RT_NAMESPACE: ns },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines: Line[] = [];
  let buf = '';
  child.stdout?.setEncoding('utf8');
  child.stdout?.on('data', (chunk: string) => {
    buf += chunk;
    let nl = buf.indexOf('\n');
    while (nl >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      try {
        lines.push(JSON.parse(line) as Line);
      } catch {
        lines.push({ raw: line });
      }
      nl = buf.indexOf('\n');
    }
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, lines, exited };
}

async function get(url: string): Promise<{ status: number; body: string }> {
  const res = await fetch(url);
  return { status: res.status, body: await res.text() };
}

describe('Manager process against the real API server', () => {
  let client: KubeClient;
  let ns: string;

  before(async () => {
    client = runtimeClient();
    ns = await freshNamespace(client, 'manager');
  });

  after(async () => {
    await deleteNamespace(client, ns);
    client.close();
  });

  it('serves metrics/health, survives throwing and floating-rejection reconciles, and on SIGTERM finishes in-flight work and releases the lease', async () => {
    const proc = startProcess(ns);
    try {
      const started = await eventually('manager started', async () =>
        proc.lines.find((l) => l.marker === 'started'),
      );
      const [url] = started.urls as string[];
      assert.ok(url);
      assert.equal((await get(`${url}/healthz`)).status, 200);
      await eventually('ready', async () => ((await get(`${url}/readyz`)).status === 200 ? true : undefined));

      // A reconcile that throws, leaves a floating rejection and throws from a timer.
      await client.create({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'boom', namespace: ns, labels: { 'rt-test': 'y' } },
      });
      await eventually('errors counted and retried', async () => {
        const m = await get(`${url}/metrics`);
        const errors = /controller_runtime_reconcile_errors_total\{controller="slow"\} (\d+)/.exec(m.body);
        const retries = /workqueue_retries_total\{name="slow"\} (\d+)/.exec(m.body);
        return Number(errors?.[1]) >= 3 && Number(retries?.[1]) >= 3 ? true : undefined;
      });
      assert.ok(
        proc.lines.some(
          (l) => l.msg === 'unhandled promise rejection (ignored; the controller keeps running)',
        ),
      );
      assert.ok(
        proc.lines.some((l) => l.msg === 'uncaught exception (ignored; the controller keeps running)'),
      );
      const metrics = (await get(`${url}/metrics`)).body;
      for (const name of [
        'controller_runtime_reconcile_total{controller="slow",result="error"}',
        'controller_runtime_reconcile_time_seconds_bucket',
        'workqueue_depth{name="slow"}',
        'workqueue_adds_total{name="slow"}',
        'workqueue_queue_duration_seconds_bucket',
        'workqueue_work_duration_seconds_bucket',
        'leader_election_master_status{name="process-lease"} 1',
      ]) {
        assert.ok(metrics.includes(name), `metrics lack ${name}`);
      }
      const failing = proc.lines.filter((l) => l.msg === 'reconcile failed; retrying');
      assert.ok(
        failing.every(
          (l) =>
            l.kind === 'ConfigMap' &&
            l.namespace === ns &&
            l.name === 'boom' &&
            typeof l.reconcileID === 'string',
        ),
      );

      // A slow reconcile in flight, then SIGTERM.
      await client.create({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'slow', namespace: ns, labels: { 'rt-test': 'y' } },
      });
      await eventually('slow reconcile running', async () =>
        proc.lines.find((l) => l.marker === 'reconcile-start' && l.name === 'slow'),
      );
      proc.child.kill('SIGTERM');
      const code = await proc.exited;
      assert.equal(code, 0);
      const signalAt = proc.lines.findIndex((l) => l.msg === 'signal received');
      const endAt = proc.lines.findIndex((l) => l.marker === 'reconcile-end' && l.name === 'slow');
      assert.ok(
        signalAt >= 0 && endAt > signalAt,
        'the in-flight reconcile finished after SIGTERM, before exit',
      );
      assert.ok(
        !proc.lines.slice(signalAt).some((l) => l.marker === 'reconcile-start'),
        'no new reconcile started after SIGTERM',
      );
      const lease = await client.get<Lease>('coordination.k8s.io/v1', 'Lease', 'process-lease', ns);
      assert.equal(lease?.spec?.holderIdentity, '', 'lease released on shutdown');
    } finally {
      if (proc.child.exitCode === null) proc.child.kill('SIGKILL');
    }
  });
});
