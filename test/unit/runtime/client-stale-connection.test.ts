// A pooled keep-alive connection that the server closes as a request goes out: the request fails
// before any answer (ECONNRESET). The runtime client sends it again on another connection, as Go's
// transport does for client-go, except a create (POST), which the server may have received. A
// local HTTP server plays the API server and drops the second request of each connection.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { KubeClient } from '../../../controller/runtime/client.ts';
import { loadKubeConfig } from '../../../controller/runtime/kubeconfig.ts';

describe('runtime client: a keep-alive connection the server closed', () => {
  let server: Server;
  let client: KubeClient;
  const dir = mkdtempSync(join(tmpdir(), 'stale-conn-'));
  const served = new WeakMap<object, number>();
  let requests: { method: string; dropped: boolean }[] = [];

  before(async () => {
    server = createServer((req, res) => {
      const n = served.get(req.socket) ?? 0;
      served.set(req.socket, n + 1);
      const dropped = n >= 1;
      requests.push({ method: req.method ?? '', dropped });
      // Closed as the request arrives, as a server ending an idle connection at that moment.
      if (dropped) return req.socket.destroy();
      req.resume();
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}'));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(
      kubeconfig,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [{ name: 'c', cluster: { server: `http://127.0.0.1:${port}` } }],
        users: [{ name: 'u', user: {} }],
        contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
        'current-context': 'x',
      }),
    );
    client = new KubeClient(loadKubeConfig({ kubeconfig }), { qps: 1000, burst: 1000 });
  });

  after(async () => {
    client.close();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    rmSync(dir, { recursive: true, force: true });
  });

  it('sends a GET or PATCH again on a new connection; the answer is the server’s', async () => {
    requests = [];
    assert.deepEqual(await client.request('GET', '/api/v1/namespaces/a/configmaps/x'), { ok: true });
    // The pooled connection is dropped at the second request: sent again on a new one.
    assert.deepEqual(await client.request('GET', '/api/v1/namespaces/a/configmaps/x'), { ok: true });
    assert.deepEqual(
      await client.request('PATCH', '/api/v1/namespaces/a/configmaps/x', { body: { data: { v: '1' } } }),
      { ok: true },
    );
    assert.deepEqual(
      requests.map((r) => `${r.method}${r.dropped ? ' dropped' : ''}`),
      ['GET', 'GET dropped', 'GET', 'PATCH dropped', 'PATCH'],
    );
  });

  it('does not send a POST again: it fails with the connection’s error', async () => {
    requests = [];
    assert.deepEqual(await client.request('GET', '/api/v1/namespaces/a/configmaps/x'), { ok: true });
    await assert.rejects(
      client.request('POST', '/api/v1/namespaces/a/configmaps', { body: { metadata: { name: 'x' } } }),
      { code: 'ECONNRESET' },
    );
    // Once: the pooled connection the GET left was dropped under it.
    assert.deepEqual(
      requests.filter((r) => r.method === 'POST').map((r) => r.dropped),
      [true],
    );
  });
});
