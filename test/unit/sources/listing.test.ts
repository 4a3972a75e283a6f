// Issue 31 F2: what a tag listing may make the controller hold. The pure parts (tag grammar, the
// sieve, byte-capped reading of a page, ls-remote lines, the slot semaphore) and the OCI client
// with an injected fetch that answers like a hostile registry.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LsRemoteSieve, SourceError } from '../../../controller/sources/git.ts';
import {
  ByteBudget,
  isOciTag,
  LineSplitter,
  notKeptOf,
  readWithinBudget,
  Semaphore,
  sieveTags,
  TagSieve,
  tagKind,
} from '../../../controller/sources/listing.ts';
import { parseTagPage } from '../../../controller/sources/oci.ts';

describe('listing: the tag grammar', () => {
  it('accepts OCI tags of at most 128 characters of [A-Za-z0-9_][A-Za-z0-9._-]*', () => {
    for (const t of ['a', 'v1.2.3', '_x', 'A-b_c.d', 'docker-ferrol-1-30-v1', 'x'.repeat(128)])
      assert.ok(isOciTag(t), t);
    for (const t of ['', '-a', '.a', 'a/b', 'a b', 'a:b', 'x'.repeat(129), 'ä', 'a\n', '../x'])
      assert.ok(!isOciTag(t), JSON.stringify(t));
  });

  it('tells release tags (of any stack), look-alikes and the rest apart', () => {
    assert.equal(tagKind('docker-ferrol-1-30-v3'), 'release');
    assert.equal(tagKind('openstack-scs-1-31-v0-sha-abc1234'), 'release');
    assert.equal(tagKind('docker-ferrol-1-30-v01'), 'lookAlike');
    assert.equal(tagKind(`docker-ferrol-${'1'.repeat(100)}`), 'lookAlike');
    assert.equal(tagKind('latest'), 'other');
    assert.equal(tagKind('Docker-Ferrol-1-30-v3'), 'other');
    assert.equal(tagKind(`docker-ferrol-${'1'.repeat(200)}`), 'other', 'longer than an OCI tag');
    assert.equal(tagKind('-docker-ferrol-1-30-v3'), 'other');
  });
});

describe('listing: TagSieve', () => {
  it('keeps every release tag, the first look-alikes, and only counts the rest', () => {
    const sieve = new TagSieve(2);
    const listed = [
      'docker-ferrol-1-30-v1',
      'a-b-bad1',
      'a-b-bad2',
      'a-b-bad1',
      'a-b-bad3',
      'latest',
      'x'.repeat(1_000_000),
      'docker-ferrol-1-30-v2',
    ];
    const kept = listed.filter((t) => sieve.keep(t));
    assert.deepEqual(kept, [
      'docker-ferrol-1-30-v1',
      'a-b-bad1',
      'a-b-bad2',
      'a-b-bad1',
      'docker-ferrol-1-30-v2',
    ]);
    assert.equal(sieve.notKept, 3);
  });

  it('sieveTags adds to the count a lister already made', () => {
    const tags = Object.assign([{ tag: 'docker-ferrol-1-30-v1' }, { tag: 'latest' }], { notKept: 5 });
    const kept = sieveTags(tags);
    assert.deepEqual([...kept], [{ tag: 'docker-ferrol-1-30-v1' }]);
    assert.equal(notKeptOf(kept), 6);
  });
});

describe('listing: byte-capped reading of a page', () => {
  const page = (body: string, headers: Record<string, string> = {}): Response =>
    new Response(body, { headers });

  it('reads a page within the budget and parses its tags (strings only)', async () => {
    const budget = new ByteBudget('listing tags of oci://r/a', 1000);
    const body = await readWithinBudget(page('{"name":"a","tags":["x",1,null,"y"]}'), budget);
    assert.deepEqual(parseTagPage(body, 'w'), ['x', 'y']);
    assert.equal(budget.used, body.length);
    assert.deepEqual(parseTagPage(Buffer.from('{"tags":null}'), 'w'), []);
    assert.throws(() => parseTagPage(Buffer.from('{"tags":"x"}'), 'w'), /"tags" is not a list/);
    assert.throws(() => parseTagPage(Buffer.from('<html>'), 'w'), /no JSON/);
  });

  it('one budget for all pages: the page that passes it is ListingTooLarge, naming source and limit', async () => {
    const budget = new ByteBudget('listing tags of oci://r/a', 100);
    await readWithinBudget(page('x'.repeat(60)), budget);
    const err = await readWithinBudget(page('y'.repeat(60)), budget).catch((e: unknown) => e);
    assert.ok(err instanceof SourceError);
    assert.equal(err.reason, 'ListingTooLarge');
    assert.match(err.message, /listing tags of oci:\/\/r\/a: the listing is more than 100 bytes/);
  });

  it('refuses a declared length over the budget before reading, and stops an endless body', async () => {
    let pulled = 0;
    const endless = new ReadableStream<Uint8Array>({
      pull(c) {
        pulled += 1;
        c.enqueue(new Uint8Array(1024));
      },
    });
    const budget = new ByteBudget('w', 10 * 1024);
    const err = await readWithinBudget(new Response(endless), budget).catch((e: unknown) => e);
    assert.equal((err as SourceError).reason, 'ListingTooLarge');
    assert.ok(pulled < 20, `stopped after ${pulled} chunks`);
    const declared = page('{}', { 'content-length': String(1 << 30) });
    const err2 = await readWithinBudget(declared, new ByteBudget('w', 1000)).catch((e: unknown) => e);
    assert.equal((err2 as SourceError).reason, 'ListingTooLarge');
  });
});

describe('listing: ls-remote lines', () => {
  it('splits lines across chunks and skips an overlong one without holding it', () => {
    const lines: Array<string | undefined> = [];
    const split = new LineSplitter(10, (l) => lines.push(l));
    split.push(Buffer.from('ab\ncd'));
    split.push(Buffer.from('ef\n'));
    split.push(Buffer.from('x'.repeat(50)));
    split.push(Buffer.from(`${'x'.repeat(50)}\nlast`));
    split.end();
    assert.deepEqual(lines, ['ab', 'cdef', undefined, 'last']);
  });

  it('keeps release tags (peeled ids win), counts other and overlong refs', () => {
    const sieve = new LsRemoteSieve();
    const a = 'a'.repeat(40);
    const b = 'b'.repeat(40);
    for (const line of [
      `${a}\trefs/tags/docker-ferrol-1-30-v1`,
      `${b}\trefs/tags/docker-ferrol-1-30-v1^{}`,
      `${a}\trefs/tags/build-123`,
      `${a}\trefs/tags/build-123^{}`,
      `${a}\trefs/heads/main`,
      undefined,
    ])
      sieve.line(line);
    const tags = sieve.tags();
    assert.deepEqual([...tags], [{ tag: 'docker-ferrol-1-30-v1', commit: b }]);
    assert.equal(notKeptOf(tags), 2);
  });
});

describe('listing: the slot semaphore', () => {
  it('lets at most `size` run at once, the others in order', async () => {
    const sem = new Semaphore(2);
    let running = 0;
    let most = 0;
    const order: number[] = [];
    const job = (i: number) =>
      sem.run(async () => {
        running += 1;
        most = Math.max(most, running);
        await new Promise((r) => setTimeout(r, 5));
        order.push(i);
        running -= 1;
      });
    await Promise.all([0, 1, 2, 3, 4].map(job));
    assert.equal(most, 2);
    assert.equal(sem.inUse, 0);
    assert.deepEqual(order.slice(2), [2, 3, 4]);
    await assert.rejects(
      sem.run(async () => {
        throw new Error('boom');
      }),
    );
    assert.equal(sem.inUse, 0, 'a failed holder gives its slot back');
  });
});
