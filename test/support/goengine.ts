// The Go engine's builds for tests: hack/build-goengine.sh (a no-op when cached) gives the folder
// with goengine.wasm, goengine-native and the real helm CLI at the same pins.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import type { CsctlAddonInput } from '../../controller/rendering/index.ts';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

let built: string | undefined;

/** The build folder (builds it on a fresh machine; needs Go). */
export function goEngineBuild(): string {
  built ??= execFileSync(join(repoRoot, 'hack', 'build-goengine.sh'), {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  })
    .trim()
    .split('\n')
    .at(-1);
  if (!built) throw new Error('hack/build-goengine.sh printed no folder');
  return built;
}

/** One request through goengine-native: the parsed JSON response. */
export function runNative(request: object, maxOutputBytes = 0): Record<string, unknown> {
  const res = spawnSync(join(goEngineBuild(), 'goengine-native'), [String(maxOutputBytes)], {
    input: JSON.stringify(request),
    maxBuffer: 256 * 2 ** 20,
  });
  if (res.status !== 0) throw new Error(`goengine-native failed: ${res.stderr.toString()}`);
  return JSON.parse(res.stdout.toString()) as Record<string, unknown>;
}

const helmHome = mkdtempSync(join(tmpdir(), 'stackflux-helm-home-'));

/** The real helm CLI in cwd, with its configuration and caches in an empty temp folder. */
export function runHelm(args: string[], cwd: string): { status: number; stdout: string; stderr: string } {
  const res = spawnSync(join(goEngineBuild(), 'helm'), args, {
    cwd,
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: helmHome,
      HELM_CACHE_HOME: join(helmHome, 'cache'),
      HELM_CONFIG_HOME: join(helmHome, 'config'),
      HELM_DATA_HOME: join(helmHome, 'data'),
    },
    maxBuffer: 256 * 2 ** 20,
  });
  return { status: res.status ?? -1, stdout: res.stdout.toString(), stderr: res.stderr.toString() };
}

/**
 * What the cluster-stack-operator renders for a csctl addon of the stack in `dir`: the values
 * template through native Go text/template with CSO's functions over {Cluster}, CSO's unwrap of a
 * `values:` string, then the real helm CLI (`helm template --include-crds --kube-version <k8s>
 * cluster-addon <chart> --namespace kube-system -f values`). The objects in printed order.
 */
export function csoAddonReference(dir: string, input: CsctlAddonInput): Record<string, unknown>[] {
  let values = '';
  if (input.valuesTemplate !== undefined) {
    const clusterName = (input.cluster.metadata as { name?: string } | undefined)?.name ?? '';
    const native = runNative({
      op: 'goTemplate',
      name: `cluster-addon-values-${clusterName}`,
      text: input.tree.get(input.valuesTemplate),
      data: { Cluster: input.cluster },
      funcs: 'cso',
      options: [],
    });
    assert.equal(native.ok, true, String(native.error));
    const output = String(native.output);
    const doc = parseYaml(output) as Record<string, unknown>;
    values = typeof doc.values === 'string' ? doc.values : output;
  }
  const work = mkdtempSync(join(tmpdir(), 'csctl-addon-ref-'));
  cpSync(join(dir, input.chartPath), join(work, 'chart'), { recursive: true });
  writeFileSync(join(work, 'values.yaml'), values);
  const cli = runHelm(
    [
      'template',
      '--include-crds',
      '--kube-version',
      input.kubernetesVersion,
      'cluster-addon',
      'chart',
      '--namespace',
      'kube-system',
      '-f',
      'values.yaml',
    ],
    work,
  );
  assert.equal(cli.status, 0, cli.stderr);
  return parseAllDocuments(cli.stdout)
    .map((d) => d.toJS() as Record<string, unknown> | null)
    .filter((d): d is Record<string, unknown> => d !== null);
}
