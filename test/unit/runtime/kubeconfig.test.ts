import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { afterEach, describe, it } from 'node:test';
import { stringify } from 'yaml';
import { type LeanKubeConfig, loadKubeConfig } from '../../../controller/runtime/kubeconfig.ts';

const dir = mkdtempSync(join(tmpdir(), 'stackflux-kubeconfig-'));
const b64 = (s: string) => Buffer.from(s).toString('base64');

function kubeconfigFile(name: string, doc: Record<string, unknown>): string {
  const file = join(dir, name);
  writeFileSync(file, stringify({ apiVersion: 'v1', kind: 'Config', ...doc }));
  return file;
}

async function options(kc: LeanKubeConfig): Promise<Record<string, unknown>> {
  const o: Record<string, unknown> = {};
  await kc.applyToHTTPSOptions(o);
  return o;
}

const savedKubeconfig = process.env.KUBECONFIG;
afterEach(() => {
  if (savedKubeconfig === undefined) delete process.env.KUBECONFIG;
  else process.env.KUBECONFIG = savedKubeconfig;
});

describe('kubeconfig loading without the client package', () => {
  it('reads server, CA data, token and TLS settings of the current context', async () => {
    const file = kubeconfigFile('a.yaml', {
      clusters: [
        {
          name: 'mgmt',
          cluster: {
            server: 'https://10.0.0.1:6443/',
            'certificate-authority-data': b64('CA PEM'),
            'tls-server-name': 'api.internal',
          },
        },
      ],
      users: [{ name: 'admin', user: { token: 'tok-123' } }],
      contexts: [{ name: 'ctx', context: { cluster: 'mgmt', user: 'admin' } }],
      'current-context': 'ctx',
    });
    const kc = loadKubeConfig({ kubeconfig: file });
    assert.equal(kc.getCurrentCluster()?.server, 'https://10.0.0.1:6443');
    const o = await options(kc);
    assert.equal(String(o.ca), 'CA PEM');
    assert.equal(o.servername, 'api.internal');
    assert.deepEqual(o.headers, { Authorization: 'Bearer tok-123' });
    assert.equal(kc.hasDynamicAuth(), false);
  });

  it('client certificates from files relative to the kubeconfig, basic auth, insecure-skip-tls-verify', async () => {
    mkdirSync(join(dir, 'pki'), { recursive: true });
    writeFileSync(join(dir, 'pki', 'client.crt'), 'CERT');
    writeFileSync(join(dir, 'pki', 'client.key'), 'KEY');
    const file = kubeconfigFile('b.yaml', {
      clusters: [{ name: 'c', cluster: { server: 'https://h:1', 'insecure-skip-tls-verify': true } }],
      users: [
        {
          name: 'u',
          user: {
            'client-certificate': 'pki/client.crt',
            'client-key': 'pki/client.key',
            username: 'me',
            password: 'pw',
          },
        },
      ],
      contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
      'current-context': 'x',
    });
    const o = await options(loadKubeConfig({ kubeconfig: file }));
    assert.equal(String(o.cert), 'CERT');
    assert.equal(String(o.key), 'KEY');
    assert.equal(o.rejectUnauthorized, false);
    assert.equal(o.auth, 'me:pw');
  });

  it('$KUBECONFIG lists merge first-wins like kubectl; --context picks another context', async () => {
    const first = kubeconfigFile('first.yaml', {
      clusters: [{ name: 'shared', cluster: { server: 'https://first' } }],
      users: [{ name: 'u1', user: { token: 'one' } }],
      contexts: [{ name: 'one', context: { cluster: 'shared', user: 'u1' } }],
      'current-context': 'one',
    });
    const second = kubeconfigFile('second.yaml', {
      clusters: [
        { name: 'shared', cluster: { server: 'https://second-ignored' } },
        { name: 'other', cluster: { server: 'https://other' } },
      ],
      users: [{ name: 'u2', user: { token: 'two' } }],
      contexts: [{ name: 'two', context: { cluster: 'other', user: 'u2' } }],
      'current-context': 'two',
    });
    process.env.KUBECONFIG = [first, join(dir, 'missing.yaml'), second].join(delimiter);
    const kc = loadKubeConfig();
    assert.equal(kc.getCurrentCluster()?.server, 'https://first');
    const other = loadKubeConfig({ context: 'two' });
    assert.equal(other.getCurrentCluster()?.server, 'https://other');
    assert.deepEqual((await options(other)).headers, { Authorization: 'Bearer two' });
    assert.throws(() => loadKubeConfig({ context: 'nope' }), /no context nope/);
  });

  it('a token file is read again on every request (kubelet rotates service account tokens)', async () => {
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, 'first\n');
    const file = kubeconfigFile('c.yaml', {
      clusters: [{ name: 'c', cluster: { server: 'https://h:1' } }],
      users: [{ name: 'u', user: { tokenFile } }],
      contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
      'current-context': 'x',
    });
    const kc = loadKubeConfig({ kubeconfig: file });
    assert.equal(kc.hasDynamicAuth(), true);
    assert.deepEqual((await options(kc)).headers, { Authorization: 'Bearer first' });
    writeFileSync(tokenFile, 'rotated\n');
    assert.deepEqual((await options(kc)).headers, { Authorization: 'Bearer rotated' });
  });

  it('an exec plugin is run through @kubernetes/client-node, loaded only for it', async () => {
    const plugin = join(dir, 'plugin.sh');
    writeFileSync(
      plugin,
      '#!/bin/sh\necho \'{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"from-exec"}}\'\n',
    );
    chmodSync(plugin, 0o755);
    const file = kubeconfigFile('d.yaml', {
      clusters: [{ name: 'c', cluster: { server: 'https://h:1' } }],
      users: [
        {
          name: 'u',
          user: {
            exec: {
              apiVersion: 'client.authentication.k8s.io/v1',
              command: plugin,
              interactiveMode: 'Never',
            },
          },
        },
      ],
      contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
      'current-context': 'x',
    });
    const kc = loadKubeConfig({ kubeconfig: file });
    assert.equal(kc.needsDelegate(), true);
    const o = await options(kc);
    assert.equal((o.headers as Record<string, string>).Authorization, 'Bearer from-exec');
  });
});
