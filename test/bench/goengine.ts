// Measures the Go engine: module size, cold start (compile + instantiate), and per-call time of
// goTemplate and of helmTemplate on the docker-scs cluster-class and its cni (cilium) addon.
// Run: node test/bench/goengine.ts [docker-scs folder]
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { goTemplate, helmTemplate, locateGoEngine } from '../../controller/rendering/goengine/index.ts';

const scs = process.argv[2] ?? '/work/shared/fixtures/scs/docker-scs';
const located = locateGoEngine();
if ('error' in located) throw new Error(located.error);
console.log(`goengine.wasm: ${(statSync(located.path).size / 2 ** 20).toFixed(1)} MiB (${located.path})`);

function files(dir: string): Map<string, Uint8Array> {
  const out = new Map<string, Uint8Array>();
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(d, e.name));
      else out.set(relative(dir, join(d, e.name)), readFileSync(join(d, e.name)));
    }
  };
  walk(dir);
  return out;
}

function time(label: string, runs: number, fn: () => { ok: boolean }): void {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    const res = fn();
    times.push(performance.now() - t);
    if (!res.ok) throw new Error(`${label}: ${JSON.stringify(res).slice(0, 300)}`);
  }
  const sorted = [...times].sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)] ?? 0;
  console.log(`${label}: first ${times[0]?.toFixed(1)} ms, median ${median.toFixed(1)} ms over ${runs}`);
}

const values = readFileSync(join(scs, 'cluster-addon-values.yaml'), 'utf8');
const data = { Cluster: { spec: { controlPlaneEndpoint: { host: '10.0.0.1', port: 6443 } } } };
time('cold start + first goTemplate', 1, () => goTemplate('{{ 1 }}', {}));
time('goTemplate (cluster-addon-values.yaml)', 50, () => goTemplate(values, data));
const cc = files(join(scs, 'cluster-class'));
time('helmTemplate cluster-class', 10, () =>
  helmTemplate({ files: cc, releaseName: 'docker-scs-1-30', namespace: 'ns', chartVersion: 'v1' }),
);
const cni = files(join(scs, 'cluster-addon', 'cni'));
time('helmTemplate cni (cilium 1.16.6)', 5, () =>
  helmTemplate({
    files: cni,
    releaseName: 'cluster-addon',
    namespace: 'kube-system',
    includeCrds: true,
    kubeVersion: 'v1.30.10',
  }),
);
console.log(`process RSS: ${(process.memoryUsage().rss / 2 ** 20).toFixed(0)} MiB`);
