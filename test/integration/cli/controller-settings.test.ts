// `stackflux preview` and `diff` against a live cluster take the installed controller's fleet
// settings (issue 34): its Deployment (as `stackflux install` labels it) in --controller-namespace.
// The Deployment is only read: no Pod runs here, and none is needed.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { CommandIO } from '../../../controller/cli/command.ts';
import { main } from '../../../controller/cli/main.ts';
import { KubeClient } from '../../../controller/runtime/client.ts';
import { kubeConfigFrom, testEnv, uniqueName } from '../../support/env.ts';

function capture(): { io: CommandIO; err: () => string } {
  let err = '';
  return { io: { stdout: () => undefined, stderr: (t) => (err += t), env: {} }, err: () => err };
}

describe('preview and diff read the installed controller’s fleet settings', { timeout: 120_000 }, () => {
  const env = testEnv();
  let client: KubeClient;
  const controllerNs = uniqueName('sf-ctl');
  const emptyNs = uniqueName('sf-none');
  const tenant = uniqueName('sf-tenant');
  // A fleet URL nothing listens on: the preview gets past its flags and fails on the fetch.
  const fleetUrl = 'http://127.0.0.1:9/fleet.git';

  before(async () => {
    client = new KubeClient(kubeConfigFrom(env.kubeconfig), { qps: 100, burst: 100 });
    for (const name of [controllerNs, emptyNs, tenant])
      await client.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
    await client.create({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: {
        name: 'stackflux',
        namespace: controllerNs,
        labels: { 'app.kubernetes.io/name': 'stackflux' },
      },
      spec: {
        replicas: 0,
        selector: { matchLabels: { app: 'stackflux' } },
        template: {
          metadata: { labels: { app: 'stackflux' } },
          spec: {
            containers: [
              {
                name: 'manager',
                image: 'stackflux:test',
                args: [
                  'run',
                  '--leader-elect',
                  `--fleet-url=${fleetUrl}`,
                  '--fleet-branch-prefix=sf/',
                  `--render-seed-secret=${controllerNs}/seed`,
                ],
              },
            ],
          },
        },
      },
    });
    for (const [name, key] of [
      ['seed', 'd4'.repeat(32)],
      ['malformed', 'hunter2'],
    ])
      await client.create({
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name, namespace: controllerNs },
        stringData: { key },
      });
  });
  after(async () => {
    for (const name of [controllerNs, emptyNs, tenant])
      await client.delete('v1', 'Namespace', name).catch(() => {});
    client.close();
  });

  const preview = async (...extra: string[]) => {
    const c = capture();
    const code = await main(
      ['preview', 'clusterstack', 'ferrol', '-n', tenant, `--kubeconfig=${env.kubeconfig}`, ...extra],
      c.io,
    );
    return { code, err: c.err() };
  };

  it('preview without --fleet-url takes the controller’s and says from where', async () => {
    const r = await preview(`--controller-namespace=${controllerNs}`);
    assert.match(
      r.err,
      new RegExp(
        `using the controller's --fleet-url=${fleetUrl.replace(/[.:/]/g, '\\$&')} --fleet-branch-prefix=sf/ \\(from Deployment ${controllerNs}/stackflux\\)`,
      ),
    );
    assert.doesNotMatch(r.err, /--fleet-url is required/);
  });

  it('a given --fleet-url wins; without a controller the preview says why it needs the flag', async () => {
    const given = await preview(
      `--controller-namespace=${controllerNs}`,
      '--fleet-url=http://127.0.0.1:9/mine.git',
    );
    assert.doesNotMatch(given.err, /using the controller's/);
    const none = await preview(`--controller-namespace=${emptyNs}`);
    assert.equal(none.code, 2, none.err);
    assert.match(
      none.err,
      new RegExp(
        `--fleet-url is required.*no Deployment labelled app.kubernetes.io/name=stackflux runs .stackflux run. in namespace ${emptyNs}`,
      ),
    );
  });

  it('diff takes them too', async () => {
    const c = capture();
    await main(
      ['diff', '-n', tenant, `--kubeconfig=${env.kubeconfig}`, `--controller-namespace=${controllerNs}`],
      c.io,
    );
    assert.match(c.err(), /using the controller's --fleet-url=/);
  });

  it('preview reads the render seed key from the Secret the controller names; absent or malformed says so', async () => {
    const named = await preview(`--controller-namespace=${controllerNs}`);
    assert.match(
      named.err,
      new RegExp(`using the installation's render seed key \\(Secret ${controllerNs}/seed\\)`),
    );
    const absent = await preview(`--controller-namespace=${emptyNs}`, `--fleet-url=${fleetUrl}`);
    assert.match(
      absent.err,
      new RegExp(
        `no render seed Secret ${emptyNs}/stackflux-controller-render-seed; this process's own key: generated values .* differ from the controller's`,
      ),
      'no controller: the default Secret of --controller-namespace',
    );
    const malformed = await preview(
      `--render-seed-secret=${controllerNs}/malformed`,
      `--fleet-url=${fleetUrl}`,
    );
    assert.equal(malformed.code, 1, malformed.err);
    assert.match(
      malformed.err,
      new RegExp(`render seed Secret ${controllerNs}/malformed holds no usable key`),
    );
    assert.doesNotMatch(malformed.err, /hunter2/);
  });
});
