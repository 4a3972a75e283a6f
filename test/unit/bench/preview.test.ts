// The preview bench's figures (test/bench/preview.ts): issue 25's target, per Cluster.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { comparePreview, parseTimeOutput } from '../../bench/preview.ts';

describe('preview bench: the preview against the fan-out render', () => {
  it('puts both per Cluster and meets the target when the preview costs no more CPU', () => {
    assert.deepEqual(
      comparePreview(1000, { seconds: 120, renderCpuSeconds: 40 }, { seconds: 30, cpuSeconds: 36 }),
      {
        clusters: 1000,
        fanoutRenderCpuMsPerCluster: 40,
        fanoutWallMsPerCluster: 120,
        previewCpuMsPerCluster: 36,
        previewWallMsPerCluster: 30,
        cpuRatio: 0.9,
        wallRatio: 0.25,
        met: true,
      },
    );
  });

  it('misses the target when the preview needs more CPU per Cluster than the render', () => {
    const c = comparePreview(200, { seconds: 30, renderCpuSeconds: 10 }, { seconds: 5, cpuSeconds: 10.5 });
    assert.equal(c.met, false);
    assert.equal(c.cpuRatio, 1.05);
    assert.equal(c.previewCpuMsPerCluster, 52.5);
  });

  it('reads wall and CPU (user + system) from /usr/bin/time', () => {
    assert.deepEqual(
      parseTimeOutput('Command exited with non-zero status 1\nSTACKFLUX_BENCH_TIME 12.5 9.25 1.5\n'),
      {
        seconds: 12.5,
        cpuSeconds: 10.75,
      },
    );
    assert.throws(() => parseTimeOutput('nothing'), /no \/usr\/bin\/time figures/);
  });
});
