// `npm run conformance -- <stack dir> [--tag TAG] [--version vN]`: reads a stack folder as it
// would be released (a real cluster-stack-operator stack copied unchanged, or a stackflux one)
// through the release-format interface and prints what stackflux makes of it: the stack
// description as YAML and, for a csctl release, every addon rendered for a sample Cluster with
// the cluster-stack-operator's values (the same renderer the controller runs), and its
// cluster-class chart rendered as CSO renders it (the ClusterClass and its templates, by kind and
// name). Addon chart dependencies not vendored in charts/ are fetched first, as the release
// controller fetches them (`--allowed-chart-hosts` / `--insecure-chart-hosts` as the controller's
// flags); one that cannot be is reported as the controller reports it.
// Exit status 1 and the errors on stderr when the release is invalid.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { canonicalYaml } from '../controller/offline/yaml.ts';
import { csctlAddonPlan } from '../controller/reconcilers/clusteraddon.ts';
import { readReleaseDescription, releasedTree } from '../controller/releases/format.ts';
import { parseReleaseTag } from '../controller/releases/tags.ts';
import { parseAllowedChartHosts, type TenancyPolicy } from '../controller/releases/tenancy.ts';
import { binaryFilesOf } from '../controller/releases/tree.ts';
import { renderCsctlClusterClass } from '../controller/rendering/clusterclass.ts';
import { renderCsctlAddon } from '../controller/rendering/csctl.ts';
import { runGoEngineCall } from '../controller/rendering/goengine/index.ts';
import {
  ChartDependencyError,
  dependencyChartDirs,
  withChartDependencies,
} from '../controller/sources/chartrepo.ts';
import { readStackDir, tagOfStackDir } from './lib/stack-dir.ts';

/** The Cluster the addons are rendered for (as Cluster API serves one). */
const SAMPLE_CLUSTER = {
  apiVersion: 'cluster.x-k8s.io/v1beta1',
  kind: 'Cluster',
  metadata: { name: 'sample', namespace: 'default' },
  spec: {
    clusterNetwork: { pods: { cidrBlocks: ['192.168.0.0/16'] }, services: { cidrBlocks: ['10.96.0.0/12'] } },
    controlPlaneEndpoint: { host: '172.18.0.3', port: 6443 },
  },
};

/** The report of one stack folder: the description (without the native stack.yaml copy), or errors. */
export async function conformanceReport(
  dir: string,
  opts: { tag?: string; version?: string; tenancy?: TenancyPolicy } = {},
) {
  let tree = readStackDir(dir);
  const tag = opts.tag ?? tagOfStackDir(tree, opts.version);
  if (tag === undefined)
    return { ok: false as const, errors: ['cannot tell the tag from csctl.yaml or stack.yaml: pass --tag'] };
  const parsed = parseReleaseTag(tag);
  if (!parsed.ok) return { ok: false as const, errors: [`tag ${tag}: ${parsed.reason}`] };
  // As the controller reads the folder at a Git tag: as csctl create would release it.
  tree = releasedTree(tree, tag);
  const read = readReleaseDescription(tree, parsed.value);
  if (!read.ok) return { ok: false as const, tag, errors: read.errors };
  const { manifest: _manifest, ...description } = read.value;
  const addons: Record<string, unknown> = {};
  let dependencies: string | undefined;
  const charts = dependencyChartDirs(read.value);
  if (charts.length > 0) {
    try {
      const resolved = await withChartDependencies(tree, charts, {
        cacheDir: mkdtempSync(join(tmpdir(), 'conformance-')),
        treeKey: dir,
        ...(opts.tenancy !== undefined ? { tenancy: opts.tenancy } : {}),
      });
      if (resolved !== tree) dependencies = 'fetched';
      tree = resolved;
    } catch (err) {
      if (!(err instanceof ChartDependencyError)) throw err;
      dependencies = `${err.transient ? 'repository unreachable (the controller retries)' : 'InvalidRelease'}: ${err.message}`;
    }
  }
  let clusterClass: unknown;
  if (description.format === 'csctl' && description.clusterClass.kind === 'helm-chart') {
    const rendered = renderCsctlClusterClass((call) => runGoEngineCall(call, 64 * 2 ** 20), {
      tree,
      description: read.value,
      tag,
      namespace: 'default',
    });
    clusterClass = rendered.ok
      ? {
          apiVersion: rendered.value.classApiVersion,
          objects: rendered.value.objects.map((o) => {
            const m = o.metadata as { name?: string } | undefined;
            return `${String(o.kind)}/${m?.name ?? ''}`;
          }),
        }
      : { error: `${rendered.reason}: ${rendered.message}` };
  }
  if (description.format === 'csctl') {
    for (const planned of csctlAddonPlan(read.value)) {
      const addon = description.addons.find((a) => a.name === planned.name);
      if (addon === undefined) continue;
      const result = renderCsctlAddon({
        format: 'csctl',
        tree,
        binary: binaryFilesOf(tree),
        addon: addon.name,
        chartPath: addon.path,
        ...(addon.valuesTemplate !== undefined ? { valuesTemplate: addon.valuesTemplate } : {}),
        kubernetesVersion: description.kubernetesVersion,
        cluster: SAMPLE_CLUSTER,
      });
      addons[addon.name] = result.ok ? Object.fromEntries(result.files) : { error: result.message };
    }
  }
  return {
    ok: true as const,
    tag,
    description,
    ...(dependencies !== undefined ? { chartDependencies: dependencies } : {}),
    ...(clusterClass !== undefined ? { renderedClusterClass: clusterClass } : {}),
    ...(description.format === 'csctl' ? { renderedAddons: { cluster: SAMPLE_CLUSTER, addons } } : {}),
    files: { text: tree.size, binary: [...binaryFilesOf(tree).keys()] },
  };
}

if (import.meta.main) {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      tag: { type: 'string' },
      version: { type: 'string' },
      'allowed-chart-hosts': { type: 'string' },
      'insecure-chart-hosts': { type: 'string' },
    },
  });
  const dir = positionals[0];
  if (dir === undefined || positionals.length > 1) {
    process.stderr.write(
      'usage: npm run conformance -- <stack dir> [--tag TAG] [--version vN] [--allowed-chart-hosts H,..] [--insecure-chart-hosts H,..]\n',
    );
    process.exit(2);
  }
  const allowed = parseAllowedChartHosts(values['allowed-chart-hosts'] ?? '');
  const insecure = parseAllowedChartHosts(values['insecure-chart-hosts'] ?? '');
  const report = await conformanceReport(resolve(dir), {
    tenancy: {
      ...(allowed !== undefined ? { allowedChartHosts: allowed } : {}),
      ...(insecure !== undefined ? { insecureChartHosts: insecure } : {}),
    },
    ...(values.tag !== undefined ? { tag: values.tag } : {}),
    ...(values.version !== undefined ? { version: values.version } : {}),
  });
  if (!report.ok) {
    process.stderr.write(
      `${report.tag ?? dir}: invalid release\n${report.errors.map((e) => `  ${e}\n`).join('')}`,
    );
    process.exit(1);
  }
  process.stdout.write(
    canonicalYaml({
      tag: report.tag,
      ...report.description,
      files: report.files,
      ...(report.chartDependencies !== undefined ? { chartDependencies: report.chartDependencies } : {}),
      ...(report.renderedClusterClass !== undefined
        ? { renderedClusterClass: report.renderedClusterClass }
        : {}),
      ...(report.renderedAddons !== undefined ? { renderedAddons: report.renderedAddons } : {}),
    }),
  );
}
