// Run by test/integration/sources/listing-bounds.test.ts with --expose-gc: polls the OCI sources
// named on the command line (oci:// URLs, plain HTTP) once each, as the controller's pollers do,
// and prints the heap the stored listings hold (heapUsed after a full GC, minus before) with each
// listing's outcome, as one JSON line. In its own process so that nothing else of the test runner
// is on the heap that is measured.
import { OciClient } from '../../controller/sources/oci.ts';
import { SourcePollers } from '../../controller/sources/poller.ts';

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('run with --expose-gc');
const urls = process.argv.slice(2);
gc();
const before = process.memoryUsage().heapUsed;
const client = new OciClient();
const pollers = new SourcePollers({
  lister: (url, _creds, o) => client.listTags(url, undefined, o ?? {}),
  onChange: () => undefined,
});
urls.forEach((url, i) => {
  pollers.subscribe(`ns/s${i}`, { url, namespace: 'ns', insecure: true, intervalMs: 3_600_000 });
});
await pollers.idle();
gc();
const growth = process.memoryUsage().heapUsed - before;
const listings = urls.map((_, i) => {
  const l = pollers.listing(`ns/s${i}`);
  return l?.ok === true
    ? { ok: true, tags: l.tags.length, notKept: l.notKept ?? 0 }
    : { ok: false, reason: l?.reason, message: l?.message };
});
pollers.stop();
process.stdout.write(`${JSON.stringify({ growth, listings })}\n`);
