// Issue 22 row 6: narrowing a push the fleet host refuses to the branch that causes it (pure: the
// verdict on one push's per-ref results, the budget, and the push loop with a scripted host).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type GroupOutcome,
  isContentRefusal,
  narrowingBudget,
  pushNarrowing,
  refusalText,
  verdict,
} from '../../../controller/gitops/narrow.ts';
import { demuxSideband, pktLine } from '../../../controller/gitops/smart-http.ts';
import { parsePorcelain, remoteMessages } from '../../../controller/gitops/writer.ts';

const results = (entries: Record<string, string | undefined>) => new Map(Object.entries(entries));

describe('verdict on one push', () => {
  it('all accepted: landed', () => {
    assert.deepEqual(verdict(['a', 'b'], results({ a: undefined, b: undefined })), { kind: 'landed' });
  });

  it('an update hook names the culprit, the others failed only with it: refuse it, push the rest again', () => {
    const v = verdict(
      ['a', 'b', 'c'],
      results({ a: 'atomic push failure', b: 'hook declined', c: 'atomic push failure' }),
    );
    assert.deepEqual(v, { kind: 'refused', refused: new Map([['b', 'hook declined']]), retry: ['a', 'c'] });
  });

  it('a non-atomic server took the good refs: refuse the culprit, nothing to push again', () => {
    const v = verdict(['a', 'b'], results({ a: undefined, b: 'hook declined' }));
    assert.deepEqual(v, { kind: 'refused', refused: new Map([['b', 'hook declined']]), retry: [] });
  });

  it('a pre-receive hook or an unpack failure refuses every ref alike: split in halves', () => {
    for (const reason of ['pre-receive hook declined', 'unpacker error', 'request too large (HTTP 413)']) {
      const v = verdict(['a', 'b', 'c'], results({ a: reason, b: reason, c: reason }));
      assert.deepEqual(v, { kind: 'split', reason, halves: [['a', 'b'], ['c']] });
    }
  });

  it('one branch refused on its own is the culprit, whatever the words', () => {
    const v = verdict(['a'], results({ a: 'pre-receive hook declined' }));
    assert.deepEqual(v, {
      kind: 'refused',
      refused: new Map([['a', 'pre-receive hook declined']]),
      retry: [],
    });
  });

  it('a lease that did not hold is not the content: fetch and plan again, no narrowing', () => {
    for (const r of [
      { a: 'atomic transaction failed', b: 'atomic transaction failed' },
      { a: 'stale info', b: 'atomic push failed' },
      { a: 'failed to update ref', b: undefined },
      { a: undefined },
    ]) {
      assert.deepEqual(verdict(['a', 'b'], results(r)), { kind: 'moved' }, JSON.stringify(r));
    }
  });

  it('reasons: content refusals vs leases and collateral failures', () => {
    for (const r of ['hook declined', 'pre-receive hook declined', 'unpacker error', 'funny refname'])
      assert.ok(isContentRefusal(r), r);
    for (const r of [
      'atomic push failure',
      'atomic push failed',
      'stale info',
      'fetch first',
      'not reported',
    ])
      assert.ok(!isContentRefusal(r), r);
  });
});

describe('narrowingBudget', () => {
  it('is enough to bisect two refused branches out of n, and grows with log2(n)', () => {
    assert.equal(narrowingBudget(1), 4);
    assert.equal(narrowingBudget(2), 4);
    assert.equal(narrowingBudget(8), 12);
    assert.equal(narrowingBudget(1000), 40);
  });
});

/** A host with a pre-receive hook refusing any push that holds a branch of `bad`. */
function preReceiveHost(bad: ReadonlySet<string>) {
  const pushes: string[][] = [];
  const push = async (branches: readonly string[]): Promise<GroupOutcome> => {
    pushes.push([...branches]);
    const hit = branches.filter((b) => bad.has(b));
    if (hit.length === 0) return { results: new Map(branches.map((b) => [b, undefined])), message: '' };
    return {
      results: new Map(branches.map((b) => [b, 'pre-receive hook declined'])),
      message: `policy: ${hit.join(', ')} holds refused-by-host`,
    };
  };
  return { push, pushes };
}

describe('pushNarrowing', () => {
  const branches = Array.from({ length: 16 }, (_, i) => `b${i}`);

  it('bisects one refused branch out of 16: the 15 others land, in 1 + 2·log2(16) pushes at most', async () => {
    const host = preReceiveHost(new Set(['b11']));
    const out = await pushNarrowing([branches], host.push, narrowingBudget(16));
    assert.deepEqual([...out.refused.keys()], ['b11']);
    assert.equal(out.refused.get('b11'), 'pre-receive hook declined: policy: b11 holds refused-by-host');
    assert.deepEqual(out.deferred, []);
    assert.equal(out.moved, false);
    const landed = host.pushes.filter((p) => !p.includes('b11')).flat();
    assert.deepEqual(landed.sort(), branches.filter((b) => b !== 'b11').sort());
    assert.ok(out.pushes <= 1 + 2 * 4, `${out.pushes} pushes`);
    assert.equal(out.pushes, host.pushes.length);
  });

  it('a named culprit costs one more push, not a bisection', async () => {
    const pushes: string[][] = [];
    const out = await pushNarrowing(
      [['a', 'b', 'c']],
      async (bs) => {
        pushes.push([...bs]);
        return bs.includes('b')
          ? {
              results: new Map(bs.map((x) => [x, x === 'b' ? 'hook declined' : 'atomic push failure'])),
              message: 'no',
            }
          : { results: new Map(bs.map((x) => [x, undefined])), message: '' };
      },
      4,
    );
    assert.deepEqual(pushes, [
      ['a', 'b', 'c'],
      ['a', 'c'],
    ]);
    assert.deepEqual([...out.refused], [['b', 'hook declined: no']]);
  });

  it('stops at its budget: the rest is deferred, not refused, and no push goes beyond it', async () => {
    const host = preReceiveHost(new Set(branches));
    const out = await pushNarrowing([branches], host.push, 6);
    assert.equal(out.pushes, 7, 'the first push and 6 narrowing pushes');
    assert.equal(out.refused.size + out.deferred.length, 16);
    assert.ok(out.deferred.length > 0);
    assert.match(out.deferredReason ?? '', /pre-receive hook declined/);
  });

  it('a lease that did not hold stops narrowing and says so', async () => {
    const out = await pushNarrowing(
      [['a', 'b']],
      async (bs) => ({ results: new Map(bs.map((x) => [x, 'atomic transaction failed'])), message: '' }),
      4,
    );
    assert.equal(out.moved, true);
    assert.equal(out.pushes, 1);
    assert.equal(out.refused.size, 0);
  });

  it("the host's words are bounded", () => {
    assert.equal(refusalText('hook declined', ''), 'hook declined');
    assert.equal(refusalText('hook declined', 'x'.repeat(5000)).length, 600);
  });
});

describe("the host's per-ref answers as the two transports read them", () => {
  it('git push --porcelain: per ref, the reason in parentheses', () => {
    const refs = parsePorcelain(
      [
        'To http://h/f.git',
        '!\tabc:refs/heads/p/a\t[remote rejected] (atomic push failure)',
        '!\tdef:refs/heads/p/b\t[remote rejected] (hook declined)',
        '!\t(delete):refs/heads/p/c\t[rejected] (atomic push failed)',
        '*\tghi:refs/heads/p/d\t[new branch]',
        'Done',
      ].join('\n'),
    );
    assert.deepEqual(
      [...refs],
      [
        ['refs/heads/p/a', 'atomic push failure'],
        ['refs/heads/p/b', 'hook declined'],
        ['refs/heads/p/c', 'atomic push failed'],
        ['refs/heads/p/d', undefined],
      ],
    );
    assert.equal(
      remoteMessages('remote: policy: no\nremote: \nerror: failed to push some refs\n'),
      'policy: no',
    );
  });

  it('side-band-64k: band 1 is the report, band 2 the hook output (control characters removed)', () => {
    const report = Buffer.concat([
      pktLine('unpack ok\n'),
      pktLine('ng refs/heads/p/a pre-receive hook declined\n'),
    ]);
    const body = Buffer.concat([
      pktLine(Buffer.concat([Buffer.from([2]), Buffer.from('\x1b[31mpolicy: p/a holds refused\x1b[0m\r\n')])),
      pktLine(Buffer.concat([Buffer.from([1]), report.subarray(0, 7)])),
      pktLine(Buffer.concat([Buffer.from([1]), report.subarray(7), Buffer.from('0000')])),
      Buffer.from('0000'),
    ]);
    const { report: inner, messages } = demuxSideband(body);
    assert.ok(inner.equals(Buffer.concat([report, Buffer.from('0000')])));
    assert.equal(messages, 'policy: p/a holds refused');
    assert.throws(
      () => demuxSideband(pktLine(Buffer.concat([Buffer.from([3]), Buffer.from('disk full')]))),
      /disk full/,
    );
  });
});
