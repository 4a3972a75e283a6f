// Issue 32: the installation's render seed key in a Secret (controllers/renderseed.ts), the pure
// parts: what a Secret's content means, the read → create → read-the-winner's decision, and the
// old cache-file key seeding the Secret once. The API server's side is in
// test/integration/controllers/renderseed.test.ts.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import {
  controllerRenderSeedSecret,
  DEFAULT_RENDER_SEED_SECRET,
  loadRenderSeedKey,
  parseSecretRef,
  type RenderSeedSecret,
  RenderSeedSecretError,
  renderSeedKeyOfSecret,
  renderSeedSecret,
  renderSeedStep,
} from '../../../controller/controllers/renderseed.ts';
import { ApiError, type KubeClient } from '../../../controller/runtime/client.ts';

const REF = { namespace: 'flux-system', name: 'stackflux-controller-render-seed' };
const KEY_A = 'a1'.repeat(32);
const KEY_B = 'b2'.repeat(32);
const withData = (data: Record<string, string> | undefined): RenderSeedSecret => ({
  apiVersion: 'v1',
  kind: 'Secret',
  metadata: { name: REF.name, namespace: REF.namespace },
  ...(data !== undefined ? { data } : {}),
});
const b64 = (text: string) => Buffer.from(text).toString('base64');

/** A fake API of one Secret: `beforeCreate` runs when a create arrives (another replica's move). */
function fakeApi(o: { stored?: RenderSeedSecret; beforeCreate?: (api: FakeApi) => void } = {}) {
  const api: FakeApi = {
    stored: o.stored,
    calls: [],
    get: async () => {
      api.calls.push('get');
      return api.stored;
    },
    create: async (obj: RenderSeedSecret) => {
      api.calls.push('create');
      o.beforeCreate?.(api);
      if (api.stored !== undefined)
        throw new ApiError(
          'POST',
          '/api/v1/namespaces/flux-system/secrets',
          409,
          '{"reason":"AlreadyExists"}',
        );
      api.stored = obj;
      return obj;
    },
  };
  return api;
}
interface FakeApi {
  stored: RenderSeedSecret | undefined;
  calls: string[];
  get: () => Promise<RenderSeedSecret | undefined>;
  create: (obj: RenderSeedSecret) => Promise<RenderSeedSecret>;
}
const asClient = (api: FakeApi) => api as unknown as Pick<KubeClient, 'get' | 'create'>;

describe('the render seed Secret’s content', () => {
  it('data.key of 64 hex digits is the key (a trailing newline as kubectl --from-file writes it is fine)', () => {
    assert.deepEqual(renderSeedKeyOfSecret(withData({ key: b64(KEY_A) })), { key: KEY_A });
    assert.deepEqual(renderSeedKeyOfSecret(withData({ key: b64(`${KEY_A}\n`) })), { key: KEY_A });
    assert.deepEqual(renderSeedKeyOfSecret(renderSeedSecret(REF, KEY_B)), { key: KEY_B });
  });

  it('no data.key, or one that is not 64 hex digits, is a problem that never shows the value', () => {
    assert.deepEqual(renderSeedKeyOfSecret(withData(undefined)), { problem: 'it has no data.key' });
    assert.deepEqual(renderSeedKeyOfSecret(withData({ other: b64(KEY_A) })), {
      problem: 'it has no data.key',
    });
    const short = renderSeedKeyOfSecret(withData({ key: b64('hunter2') }));
    assert.deepEqual(short, { problem: 'its data.key is not 64 hex digits (32 bytes) but 7 character(s)' });
    const raw = renderSeedKeyOfSecret(withData({ key: b64(Buffer.alloc(32, 7).toString('latin1')) }));
    assert.ok('problem' in raw, 'raw bytes instead of hex are refused');
  });

  it('the Secret made is immutable (changing the key is deleting it) and holds the key as hex text', () => {
    const s = renderSeedSecret(REF, KEY_A);
    assert.equal(s.immutable, true);
    assert.deepEqual(s.metadata, {
      name: REF.name,
      namespace: REF.namespace,
      labels: { 'app.kubernetes.io/part-of': 'stackflux', 'app.kubernetes.io/component': 'render-seed' },
    });
    assert.equal(Buffer.from(s.data?.key ?? '', 'base64').toString(), KEY_A);
  });

  it('where the controller keeps it: --render-seed-secret, else the default in its leader-election namespace', () => {
    assert.deepEqual(controllerRenderSeedSecret('', ''), {
      namespace: 'flux-system',
      name: DEFAULT_RENDER_SEED_SECRET,
    });
    assert.deepEqual(controllerRenderSeedSecret('', 'team-ops'), {
      namespace: 'team-ops',
      name: 'stackflux-controller-render-seed',
    });
    assert.deepEqual(controllerRenderSeedSecret('ops/seed', 'team-ops'), { namespace: 'ops', name: 'seed' });
    for (const bad of ['seed', 'ops/', '/seed', 'a/b/c']) assert.equal(parseSecretRef(bad), undefined, bad);
  });
});

describe('loading the key: read, create when absent, read the winner’s when another replica was first', () => {
  it('what was read decides: absent → create with the candidate; a key → use it; no key → refuse naming the Secret', () => {
    const created = renderSeedStep(undefined, REF, () => KEY_A);
    assert.ok('create' in created);
    assert.equal(created.key, KEY_A);
    assert.deepEqual(created.create, renderSeedSecret(REF, KEY_A));
    assert.deepEqual(
      renderSeedStep(renderSeedSecret(REF, KEY_B), REF, () => KEY_A),
      { use: KEY_B },
      'an existing key wins over a new candidate',
    );
    const refused = renderSeedStep(withData({ key: b64('nope') }), REF, () => KEY_A);
    assert.ok('refuse' in refused);
    assert.match(
      refused.refuse,
      /^render seed Secret flux-system\/stackflux-controller-render-seed holds no usable key/,
    );
    assert.match(refused.refuse, /delete the Secret/);
  });

  it('an existing Secret is used as it is: nothing is created', async () => {
    const api = fakeApi({ stored: renderSeedSecret(REF, KEY_B) });
    assert.deepEqual(await loadRenderSeedKey(asClient(api), REF, { newKey: () => KEY_A }), {
      key: KEY_B,
      origin: 'read',
    });
    assert.deepEqual(api.calls, ['get']);
  });

  it('absent: the Secret is created with a new key', async () => {
    const api = fakeApi();
    assert.deepEqual(await loadRenderSeedKey(asClient(api), REF, { newKey: () => KEY_A }), {
      key: KEY_A,
      origin: 'created',
    });
    assert.deepEqual(api.calls, ['get', 'create']);
    assert.deepEqual(api.stored, renderSeedSecret(REF, KEY_A));
  });

  it('another replica creates it between our read and our create: AlreadyExists, and its key is used', async () => {
    const api = fakeApi({
      beforeCreate: (a) => {
        a.stored ??= renderSeedSecret(REF, KEY_B);
      },
    });
    assert.deepEqual(await loadRenderSeedKey(asClient(api), REF, { newKey: () => KEY_A }), {
      key: KEY_B,
      origin: 'created-by-another',
    });
    assert.deepEqual(api.calls, ['get', 'create', 'get']);
  });

  it('a malformed Secret is refused, not replaced', async () => {
    const api = fakeApi({ stored: withData({ key: b64('not-a-key') }) });
    await assert.rejects(
      loadRenderSeedKey(asClient(api), REF, { newKey: () => KEY_A }),
      (err: unknown) =>
        err instanceof RenderSeedSecretError &&
        /render seed Secret flux-system\/stackflux-controller-render-seed holds no usable key: its data.key is not 64 hex digits/.test(
          err.message,
        ),
    );
    assert.deepEqual(api.calls, ['get'], 'no create over it');
  });

  it('a refused read names the Secret and the permission the controller needs', async () => {
    const api = fakeApi();
    api.get = async () => {
      throw new ApiError(
        'GET',
        '/api/v1/namespaces/flux-system/secrets/x',
        403,
        '{"reason":"Forbidden","message":"no"}',
      );
    };
    await assert.rejects(
      loadRenderSeedKey(asClient(api), REF),
      /cannot read the render seed Secret flux-system\/stackflux-controller-render-seed: .*403.*needs get and create on Secrets in namespace flux-system/,
    );
  });

  it('the old cache-file key seeds an absent Secret once; the file is removed so a rotation sticks', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'seed-legacy-'));
    const file = join(dir, 'render-seed.key');
    try {
      writeFileSync(file, `${KEY_B}\n`);
      const api = fakeApi();
      assert.deepEqual(
        await loadRenderSeedKey(asClient(api), REF, { legacyKeyFile: file, newKey: () => KEY_A }),
        {
          key: KEY_B,
          origin: 'migrated',
        },
      );
      assert.deepEqual(api.stored, renderSeedSecret(REF, KEY_B));
      assert.equal(existsSync(file), false);
      // Deleted (rotated) later: the next start makes a new key, not the file's again.
      api.stored = undefined;
      assert.equal(
        (await loadRenderSeedKey(asClient(api), REF, { legacyKeyFile: file, newKey: () => KEY_A })).key,
        KEY_A,
      );

      writeFileSync(file, `${KEY_A}\n`);
      const existing = fakeApi({ stored: renderSeedSecret(REF, KEY_B) });
      const read = await loadRenderSeedKey(asClient(existing), REF, { legacyKeyFile: file });
      assert.equal(read.key, KEY_B, 'the Secret wins over the file');
      assert.equal(existsSync(file), false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
