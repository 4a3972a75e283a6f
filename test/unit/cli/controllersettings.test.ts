import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  argFlags,
  renderSeedSecretsOf,
  settingsOf,
  withControllerSettings,
} from '../../../controller/cli/controllersettings.ts';

const deployment = (ns: string, name: string, ...containers: { name: string; args?: string[] }[]) => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { namespace: ns, name },
  spec: { template: { spec: { containers } } },
});

describe('the installed controller’s settings for preview and diff', () => {
  it('reads --name=value and --name value; a bare flag is true; the last one wins', () => {
    const f = argFlags(['--a=1', '--b', '2', '--leader-elect', '--a=3', 'positional', '--c=']);
    assert.deepEqual(Object.fromEntries(f), { a: '3', b: '2', 'leader-elect': 'true', c: '' });
  });

  it('takes the fleet flags of the `stackflux run` container only', () => {
    const s = settingsOf([
      deployment(
        'flux-system',
        'stackflux',
        { name: 'sidecar', args: ['--fleet-url=https://wrong.example/x.git'] },
        {
          name: 'manager',
          args: [
            'run',
            '--fleet-url=https://git.example/fleet.git',
            '--fleet-branch-prefix',
            'sf/',
            '--log-level=info',
          ],
        },
      ),
    ]);
    assert.deepEqual(s, {
      found: true,
      where: 'Deployment flux-system/stackflux',
      flags: { 'fleet-url': 'https://git.example/fleet.git', 'fleet-branch-prefix': 'sf/' },
    });
  });

  it('shards of one install agree and are one answer; controllers that differ are none', () => {
    const run = (url: string) => ({ name: 'manager', args: ['run', `--fleet-url=${url}`] });
    const same = settingsOf([deployment('f', 'a', run('u')), deployment('f', 'b', run('u'))]);
    assert.equal(same.found && same.where, 'Deployment f/a, Deployment f/b');
    const differ = settingsOf([deployment('f', 'a', run('u')), deployment('f', 'b', run('v'))]);
    assert.equal(differ.found, false);
    assert.match(
      differ.found ? '' : differ.why,
      /Deployment f\/a, Deployment f\/b have different fleet settings/,
    );
    assert.equal(settingsOf([deployment('f', 'x', { name: 'nginx' })]).found, false);
  });

  it('fills what was not given and says so; a given --fleet-url wins whole', () => {
    const settings = {
      found: true as const,
      where: 'Deployment flux-system/stackflux',
      flags: { 'fleet-url': 'U', 'fleet-secret': 'flux-system/fleet' },
    };
    const taken = withControllerSettings({ namespace: 'team-a' }, settings);
    assert.deepEqual(taken.flags, {
      namespace: 'team-a',
      'fleet-url': 'U',
      'fleet-secret': 'flux-system/fleet',
    });
    assert.equal(
      taken.note,
      "using the controller's --fleet-url=U --fleet-secret=flux-system/fleet (from Deployment flux-system/stackflux)",
    );
    const given = withControllerSettings({ 'fleet-url': 'mine' }, settings);
    assert.deepEqual(given, { flags: { 'fleet-url': 'mine' } });
    assert.deepEqual(withControllerSettings({}, { found: false, why: 'none' }), { flags: {} });
  });

  it('the render seed Secret of the controllers: --render-seed-secret, else the default in their leader-election namespace', () => {
    const run = (...args: string[]) => ({ name: 'manager', args: ['run', ...args] });
    assert.deepEqual(renderSeedSecretsOf([deployment('ops', 'a', run('--render-seed-secret=ops/seed'))]), [
      { namespace: 'ops', name: 'seed' },
    ]);
    assert.deepEqual(
      renderSeedSecretsOf([
        deployment('ops', 'a', run('--leader-elect', '--leader-election-namespace', 'ops')),
        deployment('ops', 'b', run('--leader-election-namespace=ops', '--shard=b')),
      ]),
      [{ namespace: 'ops', name: 'stackflux-controller-render-seed' }],
      'shards of one install: one Secret',
    );
    assert.deepEqual(renderSeedSecretsOf([deployment('ops', 'a', run())]), [
      { namespace: 'flux-system', name: 'stackflux-controller-render-seed' },
    ]);
    assert.equal(
      renderSeedSecretsOf([
        deployment('ops', 'a', run('--render-seed-secret=x')),
        deployment('ops', 'n', { name: 'nginx' }),
      ]).length,
      0,
      'a malformed flag (the controller would not start) and other containers name none',
    );
  });
});
