// `npm run bench [-- SCENARIO [FLAGS]]`: benchmarks, not tests. Figures are ratios to baselines
// measured in the same run, so they compare across machines.
//   runtime (default)  the runtime's hot parts: work queue, informer memory and sync (runtime.ts)
//   fleet              stackflux at fleet scale against hack/testenv (fleet.ts; --help for flags)
//   soak               stackflux under churn for --minutes (default 30), RSS slope (soak.ts; --help)
//   heap               the informer caches' heap per Cluster, no API server (heap.ts; --help)
//   render             render per Cluster, native stack against csctl stack, no API server (render.ts)
//   oci                the OCI release source against Git: one poll of 200 tags, push → Ready by notification (oci.ts; --help)
//   preview            `stackflux preview` of a fleet against the fan-out's render, per Cluster (preview.ts; --help)
//   hostile            issue 22's hostile inputs at once while a benign tenant changes values (hostile.ts; --help)
import { TESTENV_SOURCE_NETWORKS } from '../../hack/lib/testenv.ts';

const [scenario = 'runtime', ...args] = process.argv.slice(2);
// Sources the bench reads in this process are on the test environment's 127.0.0.1 too.
process.env.STACKFLUX_ALLOW_SOURCE_NETWORKS ??= TESTENV_SOURCE_NETWORKS;
if (scenario === 'runtime') {
  await import('./runtime.ts');
} else if (scenario === 'fleet') {
  const { runFleetBench } = await import('./fleet.ts');
  process.exitCode = await runFleetBench(args);
} else if (scenario === 'soak') {
  const { runSoakBench } = await import('./soak.ts');
  process.exitCode = await runSoakBench(args);
} else if (scenario === 'heap') {
  const { runHeapBench } = await import('./heap.ts');
  process.exitCode = await runHeapBench(args);
} else if (scenario === 'render') {
  const { runRenderBench } = await import('./render.ts');
  process.exitCode = await runRenderBench(args);
} else if (scenario === 'preview') {
  const { runPreviewBench } = await import('./preview.ts');
  process.exitCode = await runPreviewBench(args);
} else if (scenario === 'hostile') {
  const { runHostileBench } = await import('./hostile.ts');
  process.exitCode = await runHostileBench(args);
} else if (scenario === 'oci') {
  const { runOciBench } = await import('./oci.ts');
  process.exitCode = await runOciBench(args);
} else {
  process.stderr.write(
    `unknown bench scenario "${scenario}" (runtime, fleet, soak, heap, render, preview, hostile, oci)\n`,
  );
  process.exitCode = 2;
}
