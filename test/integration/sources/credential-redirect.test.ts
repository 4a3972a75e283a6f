// Issue 22 row 11: a credential goes only to the scheme and host it is configured for. A Git
// server that redirects to another host (127.0.0.2 is another host than 127.0.0.1) must never
// see it: git follows no redirect, and the credential helper answers only for the configured
// host. Local HTTP servers only (no test environment needed): the second host answers every
// request without credentials with 401, which is what would make git ask for them.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { GitFleetWriter } from '../../../controller/gitops/writer.ts';
import { listTags } from '../../../controller/sources/git.ts';

const creds = { username: 'release-bot', password: 'redirect-secret-4b1d' };
const work = mkdtempSync(join(tmpdir(), 'stackflux-credential-redirect-'));

function listen(server: Server, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve((server.address() as AddressInfo).port));
  });
}

/** What the other host received: every Authorization header, decoded. */
const seenByOther: string[] = [];
const other = createServer((req: IncomingMessage, res) => {
  const auth = req.headers.authorization;
  if (auth !== undefined) seenByOther.push(Buffer.from(auth.replace(/^Basic /, ''), 'base64').toString());
  res.writeHead(401, { 'WWW-Authenticate': 'Basic realm="other"' }).end();
});
/** The configured host: redirects every request to the other host, same path. */
let otherBase = '';
const origin = createServer((req, res) => {
  res.writeHead(302, { Location: `${otherBase}${req.url ?? '/'}` }).end();
});
let url = '';

describe('credentials never follow a redirect to another host', () => {
  before(async () => {
    otherBase = `http://127.0.0.2:${await listen(other, '127.0.0.2')}`;
    url = `http://127.0.0.1:${await listen(origin, '127.0.0.1')}/org/stack.git`;
  });
  after(() => {
    origin.close();
    other.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('listing tags: the listing fails and the other host never sees the credential', async () => {
    await assert.rejects(listTags(url, creds), /returned error: 302 \(stackflux follows no HTTP redirect/);
    assert.deepEqual(seenByOther, []);
  });

  it('the fleet writer fetch: fails and the other host never sees the credential', async () => {
    const writer = new GitFleetWriter({
      url,
      branchPrefix: 'stackflux/',
      cacheDir: join(work, 'fleet'),
      credentials: creds,
      author: { name: 'stackflux', email: 'stackflux@example.invalid' },
    });
    try {
      await assert.rejects(writer.refresh(), /follows no HTTP redirect/);
    } finally {
      await writer.close();
    }
    assert.deepEqual(seenByOther, []);
  });
});
