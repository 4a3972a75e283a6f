// Chart dependencies resolved as `helm dependency update` resolves them, differentially: an
// umbrella chart whose dependencies are not vendored (one chart under many aliases, each with
// another Helm version constraint, plus a stale vendored archive Helm deletes and a local
// subchart it keeps) against a Helm HTTP repository served here (a static file server; the
// charts packaged by `helm package`, indexed by `helm repo index`). Reference: the real helm CLI
// (`helm dependency update`, then `helm template` as the cluster-stack-operator runs it);
// stackflux: withChartDependencies, then the csctl addon renderer the controller runs. Then the
// hostile repository: hosts outside the policy, plain http, a wrong digest, endless redirects, an
// oversized index, an unreachable repository, and the resolution kept once it was made.
// npm test: uses no test environment
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ReleaseTree } from '../../../controller/api/release.ts';
import { binaryFilesOf } from '../../../controller/releases/tree.ts';
import { renderCsctlAddon } from '../../../controller/rendering/index.ts';
import { pickFromIndex } from '../../../controller/sources/chartindex.ts';
import {
  CHART_FETCH_LIMITS,
  ChartDependencyError,
  type ChartDependencyOptions,
  withChartDependencies,
} from '../../../controller/sources/chartrepo.ts';
import { readStackDir } from '../../../hack/lib/stack-dir.ts';
import {
  type ChartRepository,
  helmPackage,
  serveChartRepository,
  writeChart,
} from '../../support/chartrepo.ts';
import { csoAddonReference, goEngineBuild, runHelm } from '../../support/goengine.ts';

const CHART = 'cluster-addon/umbrella/';
const CONSTRAINTS: Record<string, string> = {
  tilde: '~1.2.0',
  caret: '^1.0',
  'and-comma': '>=1.0.0, <1.2.0',
  'patch-x': '1.2.x',
  hyphen: '1.0.0 - 1.2.4',
  'greater-minor-x': '>1.1.x',
  'not-equal': '!=1.2.5, <2',
  star: '*',
  'exact-pre': '1.3.0-rc.1',
  'pre-range': '>=1.3.0-0',
  'or-groups': '<1.0.0 || ~2.0',
  'lte-x': '<=1.2.x',
};
const cluster = {
  apiVersion: 'cluster.x-k8s.io/v1beta1',
  kind: 'Cluster',
  metadata: { name: 'c1', namespace: 'ns' },
};

let repo: ChartRepository;
let stackDir: string;
let cacheDir: string;

/** A stack whose one addon is an umbrella chart with the dependencies above on `repoUrl`. */
function writeStack(repoUrl: string, extra: string[] = []): string {
  const dir = mkdtempSync(join(tmpdir(), 'deps-stack-'));
  const chart = join(dir, CHART);
  mkdirSync(join(chart, 'charts'), { recursive: true });
  // One chart per constraint: with two versions of one chart in charts/, which one an alias gets
  // depends on Go's map order in Helm's loader.
  const deps = Object.entries(CONSTRAINTS).map(
    ([key, version]) => `  - name: alpha-${key}\n    version: "${version}"\n    repository: ${repoUrl}\n`,
  );
  // Aliases: one archive, two charts.
  deps.push(`  - name: beta\n    alias: beta-one\n    version: "^0.2"\n    repository: ${repoUrl}/\n`);
  deps.push(`  - name: beta\n    alias: beta-two\n    version: "^0.2"\n    repository: ${repoUrl}\n`);
  deps.push('  - name: gamma\n    version: "0.1.0"\n');
  writeFileSync(
    join(chart, 'Chart.yaml'),
    `apiVersion: v2\nname: umbrella\nversion: v1\ndependencies:\n${[...deps, ...extra].join('')}`,
  );
  writeFileSync(join(chart, 'values.yaml'), 'beta-two:\n  greeting: from-the-umbrella\n');
  // Vendored: gamma as a folder (no repository: kept), beta 0.1.0 as a stale archive (deleted).
  writeChart(join(chart, 'charts', 'gamma'), 'gamma', '0.1.0');
  const stale = mkdtempSync(join(tmpdir(), 'deps-stale-'));
  writeChart(join(stale, 'beta'), 'beta', '0.1.0');
  helmPackage(join(stale, 'beta'), join(chart, 'charts'));
  return dir;
}

function options(over: Partial<ChartDependencyOptions> = {}): ChartDependencyOptions {
  return {
    cacheDir,
    treeKey: `test\n${Math.random()}`,
    tenancy: { insecureChartHosts: ['127.0.0.1'] },
    ...over,
  };
}

async function refusal(tree: ReleaseTree, opts: ChartDependencyOptions): Promise<ChartDependencyError> {
  try {
    await withChartDependencies(tree, [CHART], opts);
  } catch (err) {
    assert.ok(err instanceof ChartDependencyError, String(err));
    return err;
  }
  assert.fail('resolved although it must not');
}

describe('chart dependencies resolved as helm dependency update does', { timeout: 5 * 60_000 }, () => {
  const saved = process.env.STACKFLUX_GO_ENGINE;
  before(async () => {
    process.env.STACKFLUX_GO_ENGINE = join(goEngineBuild(), 'goengine.wasm');
    const alphaVersions = ['0.9.0', '1.0.0', '1.1.0', '1.2.0', '1.2.5', '1.3.0-rc.1', '2.0.1'];
    repo = await serveChartRepository({
      ...Object.fromEntries(Object.keys(CONSTRAINTS).map((key) => [`alpha-${key}`, alphaVersions])),
      beta: ['0.1.0', '0.2.0', '0.2.3', '1.0.0'],
    });
    stackDir = writeStack(repo.url);
    cacheDir = mkdtempSync(join(tmpdir(), 'deps-cache-'));
  });
  after(async () => {
    await repo.close();
    if (saved === undefined) delete process.env.STACKFLUX_GO_ENGINE;
    else process.env.STACKFLUX_GO_ENGINE = saved;
  });

  it('the same versions and the same rendered objects as helm dependency update + helm template', async () => {
    const tree = await withChartDependencies(readStackDir(stackDir), [CHART], options());
    // Reference: the real helm CLI on a copy of the same stack.
    const ref = mkdtempSync(join(tmpdir(), 'deps-ref-'));
    cpSync(stackDir, ref, { recursive: true });
    const update = runHelm(['dependency', 'update', CHART], ref);
    assert.equal(update.status, 0, update.stderr);

    const input = {
      format: 'csctl' as const,
      tree,
      binary: binaryFilesOf(tree),
      addon: 'umbrella',
      chartPath: CHART,
      kubernetesVersion: 'v1.30.0',
      cluster,
    };
    const ours = renderCsctlAddon(input);
    assert.ok(ours.ok, ours.ok ? '' : ours.message);
    const theirs = csoAddonReference(ref, input);
    assert.deepEqual(ours.objects, theirs);
    // Every dependency and alias rendered (a constraint nothing satisfies fails both sides above).
    assert.equal(theirs.length, Object.keys(CONSTRAINTS).length + 3);
    // The stale vendored beta-0.1.0.tgz is gone on both sides, gamma's folder kept.
    const ourCharts = [...binaryFilesOf(tree).keys()].filter((p) => p.startsWith(`${CHART}charts/`));
    assert.ok(!ourCharts.includes(`${CHART}charts/beta-0.1.0.tgz`), ourCharts.join(', '));
    assert.ok(tree.has(`${CHART}charts/gamma/Chart.yaml`));
  });

  it('is resolved once: a second read of the same release needs no repository', async () => {
    const opts = options();
    const first = await withChartDependencies(readStackDir(stackDir), [CHART], opts);
    const requests = repo.requests().length;
    const second = await withChartDependencies(readStackDir(stackDir), [CHART], opts);
    assert.equal(repo.requests().length, requests);
    assert.deepEqual([...binaryFilesOf(second)], [...binaryFilesOf(first)]);
  });

  it('a chart with every dependency vendored is left as it is (Helm updates nothing)', async () => {
    const tree: ReleaseTree = readStackDir(stackDir);
    const vendored = new Map(tree);
    vendored.set(
      `${CHART}Chart.yaml`,
      'apiVersion: v2\nname: umbrella\nversion: v1\ndependencies:\n  - name: gamma\n    version: "0.1.0"\n',
    );
    const out = await withChartDependencies(vendored, [CHART], options({ cacheDir: '/nonexistent' }));
    assert.equal(out, vendored);
  });

  it('a host outside --allowed-chart-hosts is refused, naming the dependency', async () => {
    const err = await refusal(
      readStackDir(stackDir),
      options({ tenancy: { allowedChartHosts: ['charts.example.com'], insecureChartHosts: ['127.0.0.1'] } }),
    );
    assert.equal(err.transient, false);
    assert.match(
      err.message,
      /Chart\.yaml: dependency alpha-tilde: repository http:\/\/127\.0\.0\.1:\d+\/charts host 127\.0\.0\.1 is not in --allowed-chart-hosts/,
    );
  });

  it('plain http is refused unless the host is an insecure chart host', async () => {
    const err = await refusal(readStackDir(stackDir), options({ tenancy: {} }));
    assert.match(err.message, /uses plain http and host 127\.0\.0\.1 is not in --insecure-chart-hosts/);
  });

  it('credentials in a repository URL are refused and never repeated', async () => {
    const dir = writeStack(repo.url.replace('http://', 'http://user:s3cret@'));
    const err = await refusal(readStackDir(dir), options());
    assert.match(err.message, /carries credentials in the URL/);
    assert.doesNotMatch(err.message, /s3cret/);
  });

  it('an archive that does not match the index digest is refused', async () => {
    const index = join(repo.dir, 'index.yaml');
    const saved = readFileSync(index, 'utf8');
    writeFileSync(index, saved.replace(/digest: [0-9a-f]{64}/g, `digest: ${'f'.repeat(64)}`));
    try {
      const err = await refusal(readStackDir(stackDir), options());
      assert.equal(err.transient, false);
      assert.match(err.message, /does not match the digest in index\.yaml/);
    } finally {
      writeFileSync(index, saved);
    }
  });

  it('a constraint no version satisfies names the dependency and the constraint', async () => {
    const dir = writeStack(repo.url, [
      `  - name: beta\n    alias: none\n    version: "^7"\n    repository: ${repo.url}\n`,
    ]);
    const err = await refusal(readStackDir(dir), options());
    assert.match(err.message, /dependency beta \(version "\^7"\).*no version of beta matches "\^7"/);
  });

  it('endless redirects, an oversized index and an unreachable repository end with a clear error', async () => {
    const base = repo.url.replace(/\/charts$/, '');
    const loop = await refusal(readStackDir(writeStack(`${base}/loop`)), options());
    // The repository is plain http: its redirect is not followed at all (issue 31 F1).
    assert.match(loop.message, /redirects over plain http; not following it/);
    const big = await refusal(
      readStackDir(writeStack(`${base}/big`)),
      options({ limits: { ...CHART_FETCH_LIMITS, maxIndexBytes: 1024 * 1024 } }),
    );
    assert.match(big.message, /is larger than 1048576 bytes/);
    const down = await refusal(readStackDir(writeStack('http://127.0.0.1:9/charts')), options());
    assert.equal(down.transient, true);
    assert.match(
      down.message,
      /dependency alpha-tilde .* http:\/\/127\.0\.0\.1:9\/charts\/index\.yaml: unreachable/,
    );
  });

  it('a repository that never answers costs the release at most its total time, then a retry', async () => {
    const base = repo.url.replace(/\/charts$/, '');
    const slow = ['slow1', 'slow2', 'slow3'].map(
      (r) => `  - name: beta\n    alias: ${r}\n    version: "^0.2"\n    repository: ${base}/${r}\n`,
    );
    const err = await refusal(
      readStackDir(writeStack(`${base}/slow`, slow)),
      options({ limits: { ...CHART_FETCH_LIMITS, timeoutMs: 1000, maxTotalMs: 2500 } }),
    );
    assert.equal(err.transient, true);
    // Each repository's index is asked once and times out on its own; the third finds the
    // release's time used up and is not asked at all.
    assert.match(err.message, /\/slow\/index\.yaml: no answer within 1 s/);
    assert.match(
      err.message,
      /\/slow3\/index\.yaml: not fetched: the release's chart dependencies took more than 2\.5 s in all/,
    );
    assert.equal(repo.requests().filter((r) => r === '/slow3/index.yaml').length, 0);
  });

  it('cacheOnly (the ClusterAddon controller) never asks the repository: it waits for the release controller', async () => {
    const opts = options();
    const before = repo.requests().length;
    const waiting = await refusal(readStackDir(stackDir), { ...opts, cacheOnly: true });
    assert.equal(waiting.transient, true);
    assert.match(waiting.message, /not fetched yet \(the release controller fetches them/);
    assert.equal(repo.requests().length, before);
    const fetched = await withChartDependencies(readStackDir(stackDir), [CHART], opts);
    const requests = repo.requests().length;
    const cached = await withChartDependencies(readStackDir(stackDir), [CHART], { ...opts, cacheOnly: true });
    assert.equal(repo.requests().length, requests);
    assert.deepEqual([...binaryFilesOf(cached)], [...binaryFilesOf(fetched)]);
  });

  it('a release fetches at most so many dependencies and so many bytes in all', async () => {
    const many = await refusal(
      readStackDir(stackDir),
      options({ limits: { ...CHART_FETCH_LIMITS, maxDependencies: 3 } }),
    );
    assert.match(many.message, /name 14 dependencies to fetch, more than 3: vendor some in charts\//);
    // Each archive here is under 1 KiB: 2 KiB in all runs out after a few.
    const bytes = await refusal(
      readStackDir(stackDir),
      options({ limits: { ...CHART_FETCH_LIMITS, maxTotalBytes: 2048 } }),
    );
    assert.equal(bytes.transient, false);
    assert.match(
      bytes.message,
      /archive http:\/\/127\.0\.0\.1:\d+\/charts\/alpha-[a-z-]+-[0-9.rc-]+\.tgz is larger than \d+ bytes/,
    );
  });

  it('an index is read in a child process under a deadline: a stuck or broken read is a clear reason', async () => {
    const index = readFileSync(join(repo.dir, 'index.yaml'));
    const wanted = [{ name: 'beta', version: '^0.2' }];
    assert.deepEqual(
      (await pickFromIndex(index, wanted, 30_000)).map((p) => (p.ok ? p.entry.version : p.reason)),
      ['0.2.3'],
    );
    assert.deepEqual(await pickFromIndex(index, wanted, 1), [
      { ok: false, reason: 'index.yaml not read within 0.001 s' },
    ]);
    assert.deepEqual(await pickFromIndex(Buffer.from('a: [b'), wanted, 30_000), [
      {
        ok: false,
        reason:
          'index.yaml is not YAML: Flow sequence in block collection must be sufficiently indented and end with a ]',
      },
    ]);
  });

  it('OCI dependencies: a clear refusal, not a crash', async () => {
    const dir = writeStack(repo.url, [
      '  - name: delta\n    version: "1.0.0"\n    repository: oci://registry.example.com/charts\n',
    ]);
    const err = await refusal(readStackDir(dir), options());
    assert.match(
      err.message,
      /OCI dependencies are not resolved yet; vendor the chart as charts\/delta-<version>\.tgz/,
    );
  });
});
