// Issue 22 (celhook): the push webhook under a flood of unauthenticated requests. A real HTTP
// server started from controller/sources/webhook.ts and raw sockets that send headers and most of
// a 1 MiB body, then stall: the server holds a bounded number of bytes, answers requests past its
// caps 503 at once, closes the stalled ones at the body deadline, and still accepts a request
// authenticated by its bearer token while the flood lasts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  DEFAULT_WEBHOOK_LIMITS,
  MAX_BODY,
  serveWebhook,
  WEBHOOK_PATH,
} from '../../../controller/sources/webhook.ts';
import { type RawAnswer, rawRequest, untilInFlight, unverifiedHeaders } from '../../support/webhook.ts';

const SECRET = 'flood-test-secret';
const FLOOD = 150;

describe('webhook under an unauthenticated flood (celhook)', () => {
  it('150 stalled unauthenticated 1 MiB bodies: bounded memory, 503 past the caps, closed at the deadline, a bearer request accepted', async () => {
    const triggered: string[][] = [];
    const server = await serveWebhook('127.0.0.1:0', {
      secret: SECRET,
      trigger: (urls) => {
        triggered.push(urls);
        return 1;
      },
      limits: { bodyTimeoutMs: 3000 },
    });
    let answers: RawAnswer[] = [];
    try {
      const rssBefore = process.memoryUsage().rss;
      // Every request declares 1 MiB and sends all of it but the last byte, then stalls.
      const almost = Buffer.alloc(MAX_BODY - 1, 0x20);
      const pending: Promise<RawAnswer>[] = [];
      let peakBuffered = 0;
      let peakReserved = 0;
      const sample = () => {
        const s = server.stats();
        peakBuffered = Math.max(peakBuffered, s.bufferedBytes);
        peakReserved = Math.max(peakReserved, s.reservedBytes);
      };
      const sampler = setInterval(sample, 5);
      for (let i = 0; i < FLOOD; i++)
        pending.push(rawRequest(server.url, WEBHOOK_PATH, unverifiedHeaders(MAX_BODY), almost));

      // While the flood stalls (it holds all the budget unverified requests may take): a request
      // authenticated by its headers is still served.
      await untilInFlight(server, 6);
      const accepted = await fetch(`${server.url}${WEBHOOK_PATH}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${SECRET}`, 'content-type': 'application/json' },
        body: JSON.stringify({ url: 'https://git.example.com/stacks.git' }),
      });
      assert.equal(accepted.status, 202, await accepted.text());
      assert.deepEqual(triggered, [['https://git.example.com/stacks.git']]);

      answers = await Promise.all(pending);
      sample();
      const rssDuring = process.memoryUsage().rss;
      clearInterval(sampler);

      const byStatus = new Map<number, number>();
      for (const a of answers) byStatus.set(a.status, (byStatus.get(a.status) ?? 0) + 1);
      const shown = JSON.stringify(Object.fromEntries(byStatus));
      // Past the caps the answer comes from the headers: 503; the admitted few stall until their
      // deadline and are answered 408. Nothing else (no request of the flood got through).
      assert.ok((byStatus.get(503) ?? 0) >= FLOOD - DEFAULT_WEBHOOK_LIMITS.maxInFlight, shown);
      assert.ok((byStatus.get(408) ?? 0) >= 1, shown);
      assert.equal((byStatus.get(503) ?? 0) + (byStatus.get(408) ?? 0), FLOOD, shown);
      for (const a of answers.filter((x) => x.status === 503))
        assert.match(a.body, /too many webhook requests/);

      assert.ok(peakReserved <= DEFAULT_WEBHOOK_LIMITS.bodyBudget, `reserved ${peakReserved}`);
      assert.ok(peakBuffered <= DEFAULT_WEBHOOK_LIMITS.bodyBudget, `buffered ${peakBuffered}`);
      // 150 bodies held would be 150 MiB; the budget is 8 MiB.
      const grownMiB = (rssDuring - rssBefore) / (1 << 20);
      assert.ok(grownMiB < 64, `RSS grew ${grownMiB.toFixed(0)} MiB`);

      // The stalled requests were closed by the server (the sockets never ended their side).
      await Promise.all(answers.map((a) => a.closed));
      assert.deepEqual(server.stats(), { inFlight: 0, bufferedBytes: 0, reservedBytes: 0 });
    } finally {
      for (const a of answers) a.socket.destroy();
      await server.close();
    }
  });
});
