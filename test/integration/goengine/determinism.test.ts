// Issue 31, F4, on the real Go engine (goengine.wasm, located as the controller locates it): the
// sprig functions that read the clock and randomness render the same for the same fixed render
// (release, Cluster, addon, installation key) — the preview and the live fan-out — and differently
// for another Cluster; without a fixed render they read the real clock and random source as before.
// npm test: uses no test environment
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fixedRender } from '../../../controller/rendering/determinism.ts';
import { goTemplate, helmTemplate } from '../../../controller/rendering/goengine/index.ts';

const KEY = '5e'.repeat(32);
const fixed = (clusterUid: string) =>
  fixedRender({
    key: KEY,
    release: 'docker-csoferrol-1-30-v2',
    commit: 'c2',
    clusterUid,
    addon: 'cni',
    time: '2026-11-01T00:00:00Z',
  });

const BOMB = `now: {{ now | date "2006-01-02T15:04:05Z07:00" }}
epoch: {{ now | unixEpoch }}
id: {{ uuidv4 }}
token: {{ randAlphaNum 24 }}
key: {{ genPrivateKey "ecdsa" | sha256sum }}
{{- if gt (now | unixEpoch | atoi) 1796083200 }}
armed: true
{{- end }}
`;

function render(f?: ReturnType<typeof fixed>): string {
  const r = goTemplate(BOMB, {}, { funcs: 'sprig', ...(f !== undefined ? { fixed: f } : {}) });
  assert.ok(r.ok, JSON.stringify(r));
  return r.output;
}

describe('Go templates: clock and randomness fixed per render', () => {
  it('the same render reads the same time and random values; another Cluster other random values', () => {
    const a = render(fixed('uid-1'));
    assert.equal(render(fixed('uid-1')), a, 'preview and live render alike');
    assert.match(a, /^now: 2026-11-01T00:00:00Z$/m, 'the clock reads the release time');
    assert.match(a, /^epoch: 1793491200$/m);
    assert.doesNotMatch(a, /armed/, 'the time bomb does not go off at the release time, in either render');
    const b = render(fixed('uid-2'));
    assert.notEqual(b.match(/^id: .*$/m)?.[0], a.match(/^id: .*$/m)?.[0]);
    assert.notEqual(b.match(/^key: .*$/m)?.[0], a.match(/^key: .*$/m)?.[0], 'keys differ per Cluster');
    assert.match(b, /^now: 2026-11-01T00:00:00Z$/m);
  });

  it('a chart render (helm template) is fixed the same way', () => {
    const chart = new Map<string, string>([
      ['Chart.yaml', 'apiVersion: v2\nname: bomb\nversion: 0.1.0\n'],
      [
        'templates/cm.yaml',
        `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bomb\ndata:\n  id: {{ uuidv4 | quote }}\n  now: {{ now | unixEpoch | quote }}\n`,
      ],
    ]);
    const run = (f: ReturnType<typeof fixed>) => {
      const r = helmTemplate({
        files: chart,
        releaseName: 'cluster-addon',
        namespace: 'kube-system',
        fixed: f,
      });
      assert.ok(r.ok, JSON.stringify(r));
      return r.stdout;
    };
    const a = run(fixed('uid-1'));
    assert.equal(run(fixed('uid-1')), a);
    assert.match(a, /now: "1793491200"/);
  });

  it('without a fixed render the engine reads the real clock and random source', () => {
    const a = render();
    assert.notEqual(render(), a, 'two unfixed renders differ (uuidv4, randAlphaNum)');
    const year = Number(a.match(/^now: (\d{4})/m)?.[1]);
    assert.ok(year >= 2026, a);
  });
});
