import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TagSieve } from '../../../controller/sources/listing.ts';
import { INLINE_BYTES, sievePage, sieveTagPage } from '../../../controller/sources/tagpage.ts';

const page = (tags: unknown[]) => Buffer.from(JSON.stringify({ name: 'tenant/stack', tags }));
const release = (i: number) => `docker-ferrol-1-30-v${i}`;

describe('tagpage: a large page is sieved in the worker as in place', () => {
  it('keeps and counts the same tags, and the sieve goes on across pages', async () => {
    // Over INLINE_BYTES: release tags, look-alikes (over the limit of kept ones), non-tags, non-strings.
    const tags: unknown[] = [];
    for (let i = 0; i < 20_000; i++) tags.push(`-${i.toString(36)}`);
    for (let i = 1; i <= 50; i++) tags.push(release(i));
    for (let i = 0; i < 150; i++) tags.push(`aa-bb-${i}`);
    tags.push(7, null, { x: 1 });
    const big = page(tags);
    assert.ok(big.byteLength > INLINE_BYTES, 'the page is parsed by the worker');
    const second = page(['aa-bb-0', 'aa-bb-149', release(51), 'zz-yy-1']);

    const inPlace = new TagSieve(100);
    const expected = [...sievePage(big, 'w', inPlace), ...sievePage(second, 'w', inPlace)];
    const viaWorker = new TagSieve(100);
    const got = [
      ...(await sieveTagPage(big, 'w', viaWorker)),
      ...(await sieveTagPage(second, 'w', viaWorker)),
    ];

    assert.deepEqual(got, expected);
    assert.equal(viaWorker.notKept, inPlace.notKept);
    assert.equal(got.filter((t) => t.startsWith('docker-ferrol')).length, 51, 'every release tag');
    // The first 100 look-alikes of the big page are kept; on the second page aa-bb-0 (known) is
    // kept, aa-bb-149 and zz-yy-1 (new, the limit reached) are counted.
    assert.ok(got.includes('aa-bb-0') && !got.includes('aa-bb-149') && !got.includes('zz-yy-1'));
    assert.equal(viaWorker.notKept, 20_000 + 50 + 2);
  });

  it('names what the registry answered wrong, from the worker too', async () => {
    const padding = 'x'.repeat(INLINE_BYTES);
    await assert.rejects(sieveTagPage(Buffer.from(`<html>${padding}`), 'listing w', new TagSieve()), {
      name: 'SourceError',
      reason: 'SourceUnreachable',
      message: 'listing w: the registry answered no JSON',
    });
    await assert.rejects(
      sieveTagPage(Buffer.from(JSON.stringify({ tags: padding })), 'listing w', new TagSieve()),
      { reason: 'SourceUnreachable', message: 'listing w: "tags" is not a list' },
    );
  });
});
