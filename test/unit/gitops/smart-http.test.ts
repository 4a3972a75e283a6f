// The smart-HTTP push encoding and report parsing (pure; the exchange with a real server is in
// test/integration/gitops/writer.test.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  commandSection,
  parseAdvertisedCapabilities,
  parseReport,
  pktLine,
  readPktLines,
  SmartHttpError,
} from '../../../controller/gitops/smart-http.ts';

const a = 'a'.repeat(40);
const b = 'b'.repeat(40);
const zero = '0'.repeat(40);

describe('pkt-lines', () => {
  it('prefix the length in hex, including the 4 length bytes', () => {
    assert.equal(pktLine('unpack ok\n').toString(), '000eunpack ok\n');
    assert.equal(pktLine('').toString(), '0004');
    assert.throws(() => pktLine('x'.repeat(70_000)), /too long/);
  });

  it('read back, skipping flush packets, and refuse truncated input', () => {
    const data = Buffer.concat([pktLine('one\n'), Buffer.from('0000'), pktLine('two')]);
    assert.deepEqual(readPktLines(data), ['one', 'two']);
    assert.throws(() => readPktLines(Buffer.from('0010abc')), SmartHttpError);
    assert.throws(() => readPktLines(Buffer.from('zzzz')), SmartHttpError);
  });
});

describe('commandSection', () => {
  it('sends old new ref per command, capabilities after a NUL on the first, then a flush', () => {
    const body = commandSection(
      [
        { ref: 'refs/heads/p/x', old: a, new: b },
        { ref: 'refs/heads/p/new', new: b },
        { ref: 'refs/heads/p/gone', old: a },
      ],
      ['report-status', 'atomic'],
    );
    assert.deepEqual(readPktLines(body), [
      `${a} ${b} refs/heads/p/x\0report-status atomic`,
      `${zero} ${b} refs/heads/p/new`,
      `${a} ${zero} refs/heads/p/gone`,
    ]);
    assert.ok(body.subarray(-4).equals(Buffer.from('0000')));
    assert.throws(() => commandSection([], []), /no ref commands/);
  });
});

describe('parseReport', () => {
  it('maps ok and ng refs, keeps the reason', () => {
    const report = parseReport([
      'unpack ok',
      'ok refs/heads/p/x',
      'ng refs/heads/p/y atomic transaction failed',
      'ng refs/heads/p/z',
    ]);
    assert.equal(report.unpack, 'ok');
    assert.deepEqual(
      [...report.refs],
      [
        ['refs/heads/p/x', undefined],
        ['refs/heads/p/y', 'atomic transaction failed'],
        ['refs/heads/p/z', 'rejected'],
      ],
    );
  });

  it('refuses an answer without a report, and reports ERR packets', () => {
    assert.throws(() => parseReport([]), /no push report/);
    assert.throws(() => parseReport(['ERR access denied']), /access denied/);
  });
});

describe('parseAdvertisedCapabilities', () => {
  it('reads the capabilities after the NUL of the first ref line, after the service header', () => {
    const caps = parseAdvertisedCapabilities([
      '# service=git-receive-pack',
      `${zero} capabilities^{}\0report-status delete-refs atomic ofs-delta agent=git/2.39`,
    ]);
    assert.ok(caps.has('report-status') && caps.has('atomic') && caps.has('agent=git/2.39'));
    assert.equal(parseAdvertisedCapabilities(['# service=git-receive-pack']).size, 0);
  });
});
