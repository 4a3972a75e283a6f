// Issue 31 F5 and F11: every read of a release source has a total deadline. A Git server that
// drips ten bytes a second (faster than git's GIT_HTTP_LOW_SPEED_LIMIT=1, so git never gives up on
// its own) and a registry that accepts requests and never answers (test/support/oci-fault-proxy.ts
// `hang`) are read through the controller's own readers: the listing and the tree read fail at
// their deadline with SourceTimeout naming the flag, and nothing of the read is left running: no
// git process (nor its transport helper) and no connection to the server.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ReleaseTree } from '../../../controller/api/release.ts';
import {
  SOURCE_READ_DEFAULTS,
  sourceReads,
  withListingDeadline,
} from '../../../controller/controllers/sourcereads.ts';
import type { FetchState } from '../../../controller/controllers/treefetcher.ts';
import { realClock } from '../../../controller/runtime/clock.ts';
import { DeadlineError } from '../../../controller/sources/deadline.ts';
import { OciClient } from '../../../controller/sources/oci.ts';
import { releaseTreeFetcher, sourceTagLister } from '../../../controller/sources/releasetree.ts';
import { DrippingServer } from '../../support/drip-server.ts';
import { waitFor } from '../../support/e2e.ts';
import { OciFaultProxy } from '../../support/oci-fault-proxy.ts';

const work = mkdtempSync(join(tmpdir(), 'stackflux-read-deadline-'));
const DEADLINE_MS = 3000;
const COMMIT = 'a'.repeat(40);
const DIGEST = `sha256:${'b'.repeat(64)}`;
const TAG = 'docker-ferrol-1-30-v1';

/** Processes whose command line names `needle` (git and its transport helpers name the URL). */
function processesNaming(needle: string): string[] {
  const found: string[] = [];
  for (const e of readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(e) || Number(e) === process.pid) continue;
    try {
      const cmd = readFileSync(`/proc/${e}/cmdline`, 'utf8').split('\0').join(' ');
      if (cmd.includes(needle)) found.push(`${e}: ${cmd}`);
    } catch {}
  }
  return found;
}

/** Asks the background reads for a tree until the read settles (it wakes the asker). */
async function settled(ask: (wake: () => void) => FetchState<ReleaseTree>): Promise<FetchState<ReleaseTree>> {
  let woken: () => void = () => undefined;
  const wakeUp = new Promise<void>((resolve) => {
    woken = resolve;
  });
  const first = ask(() => woken());
  if (first.state === 'ready' || first.state === 'failed') return first;
  await wakeUp;
  return ask(() => undefined);
}

let drip: DrippingServer;
let registry: OciFaultProxy;

describe('a total deadline on every read of a source', { timeout: 120_000 }, () => {
  before(async () => {
    drip = new DrippingServer();
    await drip.start();
    // Never answers: no registry behind it is ever asked.
    registry = await OciFaultProxy.start('http://127.0.0.1:9');
    registry.set('hang');
  });

  after(async () => {
    await drip.stop();
    await registry.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it('has sane defaults: 5 minutes per release tree, 2 per listing', () => {
    assert.equal(SOURCE_READ_DEFAULTS.treeTimeoutMs, 5 * 60_000);
    assert.equal(SOURCE_READ_DEFAULTS.listTimeoutMs, 2 * 60_000);
  });

  it('F11: a Git listing that drips fails at --source-list-timeout, and no git process is left dripping', async () => {
    const list = withListingDeadline(sourceTagLister(), { listTimeoutMs: DEADLINE_MS }, realClock);
    await assert.rejects(list(drip.url, undefined), (err: unknown) => {
      assert.ok(err instanceof DeadlineError, String(err));
      assert.equal(err.reason, 'SourceTimeout');
      assert.match(
        err.message,
        /listing the tags of .* did not finish within the 3s deadline of --source-list-timeout/,
      );
      return true;
    });
    assert.ok(drip.requests > 0, 'git reached the server');
    await waitFor('every git process of the listing gone', async () =>
      processesNaming(`127.0.0.1:${drip.port}`).length === 0 ? true : undefined,
    );
    await waitFor('no connection to the server left', async () =>
      drip.sockets.size === 0 ? true : undefined,
    );
  });

  it('F5/F11: a Git release tree that drips fails in the background at --source-read-timeout, and git is gone', async () => {
    const reads = sourceReads({ treeTimeoutMs: DEADLINE_MS }, realClock, () => undefined);
    const fetchTree = releaseTreeFetcher();
    const job = {
      key: 'git-tree',
      namespace: 'tenant-a',
      what: `reading tag ${TAG} of ${drip.url}`,
      read: (signal: AbortSignal) =>
        fetchTree(
          { url: drip.url, path: 'ferrol-1-30' },
          TAG,
          COMMIT,
          join(work, 'cache'),
          undefined,
          signal,
        ),
    };
    const got = await settled((wake) => reads.trees.request(job, { id: 'r', wake }));
    assert.equal(got.state, 'failed');
    if (got.state !== 'failed') return;
    assert.ok(got.error instanceof DeadlineError, String(got.error));
    assert.equal((got.error as DeadlineError).reason, 'SourceTimeout');
    assert.match(
      (got.error as Error).message,
      /reading tag docker-ferrol-1-30-v1 of .* did not finish within the 3s deadline of --source-read-timeout/,
    );
    await waitFor('every git process of the fetch gone', async () =>
      processesNaming(`127.0.0.1:${drip.port}`).length === 0 ? true : undefined,
    );
    await waitFor('no connection to the server left', async () =>
      drip.sockets.size === 0 ? true : undefined,
    );
    assert.deepEqual(reads.trees.stats().running, 0, 'the read slot is free again');
  });

  it('F5: an OCI release whose registry never answers fails at --source-read-timeout; the request is cancelled', async () => {
    const reads = sourceReads({ treeTimeoutMs: DEADLINE_MS }, realClock, () => undefined);
    const fetchTree = releaseTreeFetcher({ oci: new OciClient() });
    const url = `oci://${registry.host}/tenant/slow`;
    const job = {
      key: 'oci-tree',
      namespace: 'tenant-a',
      what: `reading tag ${TAG} of ${url}`,
      read: (signal: AbortSignal) =>
        fetchTree({ url, insecure: true }, TAG, DIGEST, join(work, 'cache'), undefined, signal),
    };
    const got = await settled((wake) => reads.trees.request(job, { id: 'r', wake }));
    assert.equal(got.state, 'failed');
    if (got.state !== 'failed') return;
    assert.ok(got.error instanceof DeadlineError, String(got.error));
    assert.match(
      (got.error as Error).message,
      /did not finish within the 3s deadline of --source-read-timeout/,
    );
    // The held request ends from the client's side (the proxy logs a request once it closes).
    await waitFor('the hanging manifest request closed by the controller', async () =>
      registry.requests((r) => r.fault === 'hang' && r.path.includes('/manifests/')).length > 0
        ? true
        : undefined,
    );
  });

  it('F5: an OCI listing that never answers fails at --source-list-timeout', async () => {
    const list = withListingDeadline(
      sourceTagLister({ oci: new OciClient() }),
      { listTimeoutMs: DEADLINE_MS },
      realClock,
    );
    const before = registry.requests((r) => r.path.includes('/tags/list')).length;
    await assert.rejects(
      list(`oci://${registry.host}/tenant/slow`, undefined, { insecure: true }),
      (err: unknown) => {
        assert.ok(err instanceof DeadlineError, String(err));
        assert.match(err.message, /did not finish within the 3s deadline of --source-list-timeout/);
        return true;
      },
    );
    await waitFor('the hanging listing closed by the controller', async () =>
      registry.requests((r) => r.path.includes('/tags/list')).length > before ? true : undefined,
    );
  });
});
