import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { describe, it } from 'node:test';
import {
  handleWebhook,
  MAX_BODY,
  type RegistryPush,
  ReplayGuard,
  screenWebhook,
  serveWebhook,
  signBody,
  verifySignature,
  WEBHOOK_PATH,
  type WebhookRequest,
} from '../../../controller/sources/webhook.ts';

const SECRET = "It's a Secret to Everybody";
// GitHub's documented example: secret "It's a Secret to Everybody", payload "Hello, World!".
const GITHUB_EXAMPLE = 'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17';

function request(body: string, headers: Record<string, string>): WebhookRequest {
  return { method: 'POST', path: WEBHOOK_PATH, headers, body: Buffer.from(body) };
}

function recorder() {
  const triggered: string[][] = [];
  return {
    triggered,
    trigger: (urls: string[]): number => {
      triggered.push(urls);
      return urls.length > 0 ? 1 : 0;
    },
  };
}

const payload = JSON.stringify({
  ref: 'refs/tags/docker-ferrol-1-30-v3',
  repository: {
    clone_url: 'https://github.com/org/stacks.git',
    html_url: 'https://github.com/org/stacks',
    ssh_url: 'git@github.com:org/stacks.git',
  },
});

describe('webhook signature', () => {
  it('matches GitHub’s documented example', () => {
    assert.equal(signBody(SECRET, 'Hello, World!'), GITHUB_EXAMPLE);
    assert.equal(verifySignature(SECRET, Buffer.from('Hello, World!'), GITHUB_EXAMPLE), true);
  });

  it('rejects a wrong secret, a changed body, a truncated or missing signature, an empty secret', () => {
    const body = Buffer.from('Hello, World!');
    assert.equal(verifySignature('other', body, GITHUB_EXAMPLE), false);
    assert.equal(verifySignature(SECRET, Buffer.from('Hello, World?'), GITHUB_EXAMPLE), false);
    assert.equal(verifySignature(SECRET, body, GITHUB_EXAMPLE.slice(0, -1)), false);
    assert.equal(verifySignature(SECRET, body, GITHUB_EXAMPLE.replace('sha256=', 'sha1=')), false);
    assert.equal(verifySignature(SECRET, body, undefined), false);
    assert.equal(verifySignature('', body, signBody('', body)), false);
  });
});

describe('handleWebhook', () => {
  it('a correctly signed push re-lists the repository (all its URLs)', () => {
    const r = recorder();
    const res = handleWebhook(
      request(payload, { 'x-hub-signature-256': signBody(SECRET, payload), 'x-github-event': 'push' }),
      { secret: SECRET, trigger: r.trigger },
    );
    assert.equal(res.status, 202);
    assert.deepEqual(r.triggered, [
      ['https://github.com/org/stacks.git', 'https://github.com/org/stacks', 'git@github.com:org/stacks.git'],
    ]);
  });

  it('a wrongly signed or unsigned request is 401 and triggers nothing', () => {
    const r = recorder();
    const opts = { secret: SECRET, trigger: r.trigger };
    const cases: Record<string, string>[] = [
      { 'x-hub-signature-256': signBody('wrong', payload) },
      { 'x-hub-signature-256': `sha256=${createHmac('sha256', SECRET).update(`${payload} `).digest('hex')}` },
      {},
      { authorization: 'Bearer wrong' },
      { authorization: `Basic ${SECRET}` },
    ];
    for (const headers of cases) {
      assert.equal(handleWebhook(request(payload, headers), opts).status, 401, JSON.stringify(headers));
    }
    assert.deepEqual(r.triggered, []);
  });

  it('generic mode: Bearer token and {"url"}', () => {
    const r = recorder();
    const res = handleWebhook(
      request(JSON.stringify({ url: 'https://git.example.com/x.git' }), {
        authorization: `Bearer ${SECRET}`,
      }),
      { secret: SECRET, trigger: r.trigger },
    );
    assert.equal(res.status, 202);
    assert.deepEqual(r.triggered, [['https://git.example.com/x.git']]);
  });

  it('ping is answered; bad JSON is 400; other paths 404; GET 405', () => {
    const r = recorder();
    const opts = { secret: SECRET, trigger: r.trigger };
    assert.equal(
      handleWebhook(
        request('{}', { 'x-hub-signature-256': signBody(SECRET, '{}'), 'x-github-event': 'ping' }),
        opts,
      ).status,
      200,
    );
    assert.equal(
      handleWebhook(request('nope', { 'x-hub-signature-256': signBody(SECRET, 'nope') }), opts).status,
      400,
    );
    assert.equal(handleWebhook({ ...request('', {}), path: '/other' }, opts).status, 404);
    assert.equal(handleWebhook({ ...request('', {}), method: 'GET' }, opts).status, 405);
    assert.deepEqual(r.triggered, []);
  });

  it('serves over HTTP and verifies the raw body bytes', async () => {
    const r = recorder();
    const server = await serveWebhook('127.0.0.1:0', { secret: SECRET, trigger: r.trigger });
    try {
      const ok = await fetch(`${server.url}${WEBHOOK_PATH}`, {
        method: 'POST',
        headers: {
          'x-hub-signature-256': signBody(SECRET, payload),
          'x-github-event': 'push',
          'content-type': 'application/json',
        },
        body: payload,
      });
      assert.equal(ok.status, 202);
      const bad = await fetch(`${server.url}${WEBHOOK_PATH}`, {
        method: 'POST',
        headers: { 'x-hub-signature-256': signBody('nope', payload), 'content-type': 'application/json' },
        body: payload,
      });
      assert.equal(bad.status, 401);
      assert.equal(r.triggered.length, 1);
    } finally {
      await server.close();
    }
  });
});

// Issue 11 defect 7: replay protection and a 413 for an oversized body.
describe('webhook hardening', () => {
  const signed = (body: string, delivery?: string) =>
    request(body, {
      'x-hub-signature-256': signBody(SECRET, body),
      'x-github-event': 'push',
      ...(delivery !== undefined ? { 'x-github-delivery': delivery } : {}),
    });

  it('a replayed signed delivery is 409 and triggers nothing, within the window', () => {
    const r = recorder();
    let now = 1_000_000;
    const opts = { secret: SECRET, trigger: r.trigger, replayGuard: new ReplayGuard({ now: () => now }) };
    assert.equal(handleWebhook(signed(payload, 'd-1'), opts).status, 202);
    assert.equal(handleWebhook(signed(payload, 'd-1'), opts).status, 409, 'the same request again');
    assert.equal(handleWebhook(signed(payload), opts).status, 409, 'the same signed body without an id');
    const other = JSON.stringify({ url: 'https://github.com/org/stacks.git', n: 2 });
    assert.equal(
      handleWebhook(signed(other, 'd-1'), opts).status,
      409,
      'a seen delivery id with another body',
    );
    assert.equal(handleWebhook(signed(other, 'd-2'), opts).status, 202, 'a new delivery');
    assert.equal(r.triggered.length, 2);
    now += 11 * 60_000;
    assert.equal(
      handleWebhook(signed(payload, 'd-1'), opts).status,
      202,
      'after the window it is accepted again',
    );
  });

  it('a failed authentication is not remembered, and bearer requests are not deduplicated', () => {
    const r = recorder();
    const opts = { secret: SECRET, trigger: r.trigger, replayGuard: new ReplayGuard() };
    const forged = request(payload, {
      'x-hub-signature-256': signBody('wrong', payload),
      'x-github-delivery': 'd-9',
    });
    assert.equal(handleWebhook(forged, opts).status, 401);
    assert.equal(handleWebhook(signed(payload, 'd-9'), opts).status, 202);
    const generic = request(JSON.stringify({ url: 'https://git.example.com/x.git' }), {
      authorization: `Bearer ${SECRET}`,
    });
    assert.equal(handleWebhook(generic, opts).status, 202);
    assert.equal(handleWebhook(generic, opts).status, 202);
  });

  it('over HTTP: a replay is 409 and an oversized body is answered 413, not a reset connection', async () => {
    const r = recorder();
    const server = await serveWebhook('127.0.0.1:0', { secret: SECRET, trigger: r.trigger });
    try {
      const post = (body: string | Buffer, headers: Record<string, string>) =>
        fetch(`${server.url}${WEBHOOK_PATH}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...headers },
          body,
        });
      const headers = { 'x-hub-signature-256': signBody(SECRET, payload), 'x-github-delivery': 'abc' };
      assert.equal((await post(payload, headers)).status, 202);
      assert.equal((await post(payload, headers)).status, 409);
      const big = Buffer.alloc(MAX_BODY + 1, 0x20);
      const res = await post(big, { 'x-hub-signature-256': signBody(SECRET, big) });
      assert.equal(res.status, 413);
      assert.match(await res.text(), /body too large/);
      assert.equal(r.triggered.length, 1);
    } finally {
      await server.close();
    }
  });
});

describe('registry push notifications', () => {
  const envelope = JSON.stringify({
    events: [
      {
        action: 'push',
        target: {
          mediaType: 'application/vnd.oci.image.manifest.v1+json',
          repository: 'kaas/cluster-stacks',
          digest: `sha256:${'a'.repeat(64)}`,
          tag: 'docker-ferrol-1-30-v3',
        },
        request: { host: 'registry.example:5000' },
      },
      {
        action: 'push',
        target: { mediaType: 'application/vnd.scs.metadata.layer.v1+yaml', repository: 'blobs/only' },
      },
      {
        action: 'pull',
        target: { mediaType: 'application/vnd.oci.image.manifest.v1+json', repository: 'pulled/x' },
      },
    ],
  });
  const headers = {
    authorization: `Bearer ${SECRET}`,
    'content-type': 'application/vnd.docker.distribution.events.v1+json',
  };

  it('a manifest push re-lists the OCI sources of its repository; blob pushes and pulls do not', () => {
    const repos: RegistryPush[][] = [];
    const r = recorder();
    const out = handleWebhook(request(envelope, headers), {
      secret: SECRET,
      trigger: r.trigger,
      triggerOciRepositories: (rs) => {
        repos.push(rs);
        return 2;
      },
    });
    assert.deepEqual(out, { status: 202, body: { ok: true, sources: 2 } });
    assert.deepEqual(repos, [[{ repository: 'kaas/cluster-stacks', tag: 'docker-ferrol-1-30-v3' }]]);
    assert.deepEqual(r.triggered, []);
  });

  it('is screened like any bearer request: the media type passes, a wrong token does not', () => {
    const ok = screenWebhook({ method: 'POST', path: WEBHOOK_PATH, headers }, SECRET);
    assert.equal(ok.admit, true);
    const wrong = screenWebhook(
      { method: 'POST', path: WEBHOOK_PATH, headers: { ...headers, authorization: 'Bearer nope' } },
      SECRET,
    );
    assert.equal(wrong.admit, false);
    const repos: RegistryPush[][] = [];
    const out = handleWebhook(request(envelope, { ...headers, authorization: 'Bearer nope' }), {
      secret: SECRET,
      trigger: () => 0,
      triggerOciRepositories: (rs) => repos.push(rs),
    });
    assert.equal(out.status, 401);
    assert.deepEqual(repos, []);
  });
});
