import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { cidrHost, cidrNetmask, cidrNetwork, cidrPrefix } from '../../../controller/rendering/cidr.ts';

describe('cidrHost', () => {
  it('numbers hosts from the network address (Terraform cidrhost semantics)', () => {
    assert.equal(cidrHost('10.96.0.0/12', 0), '10.96.0.0');
    assert.equal(cidrHost('10.96.0.0/12', 1), '10.96.0.1');
    assert.equal(cidrHost('10.96.0.0/12', 10), '10.96.0.10');
    assert.equal(cidrHost('192.168.1.77/24', 1), '192.168.1.1', 'host bits of the input are ignored');
    assert.equal(cidrHost('10.0.0.0/8', 256), '10.0.1.0');
    assert.equal(cidrHost('10.0.0.0/8', '5'), '10.0.0.5');
  });
  it('counts back from the last address for negative numbers', () => {
    assert.equal(cidrHost('10.0.0.0/24', -1), '10.0.0.255');
    assert.equal(cidrHost('10.0.0.0/24', -2), '10.0.0.254');
  });
  it('rejects numbers outside the range and bad input', () => {
    assert.throws(() => cidrHost('10.0.0.0/30', 4), /does not fit/);
    assert.throws(() => cidrHost('10.0.0.0/30', -5), /does not fit/);
    assert.throws(() => cidrHost('10.0.0.0', 1), /not a CIDR/);
    assert.throws(() => cidrHost('10.0.0.300/8', 1), /invalid IPv4/);
    assert.throws(() => cidrHost('10.0.0.0/33', 1), /invalid prefix/);
    assert.throws(() => cidrHost('10.0.0.0/8', 1.5), /integer/);
  });
  it('handles IPv6 with RFC 5952 output', () => {
    assert.equal(cidrHost('fd00:10:244::/56', 1), 'fd00:10:244::1');
    assert.equal(cidrHost('2001:db8::/32', 0), '2001:db8::');
    assert.equal(cidrHost('2001:DB8:0:0:1::/64', 0x10), '2001:db8::10');
    assert.equal(cidrHost('2001:db8:0:1::/64', 1), '2001:db8:0:1::1');
    assert.equal(cidrHost('::/0', -1), 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff');
    assert.equal(cidrHost('::ffff:10.0.0.0/120', 5), '::ffff:a00:5');
  });
});

describe('cidrPrefix, cidrNetmask, cidrNetwork', () => {
  it('return the parts of a range', () => {
    assert.equal(cidrPrefix('10.244.0.0/16'), 16);
    assert.equal(cidrPrefix('fd00::/108'), 108);
    assert.equal(cidrNetmask('10.244.0.0/16'), '255.255.0.0');
    assert.equal(cidrNetmask('10.0.0.0/0'), '0.0.0.0');
    assert.equal(cidrNetmask('10.0.0.1/32'), '255.255.255.255');
    assert.throws(() => cidrNetmask('fd00::/64'), /IPv4/);
    assert.equal(cidrNetwork('10.1.2.3/16'), '10.1.0.0/16');
    assert.equal(cidrNetwork('fd00:1:2:3::9/48'), 'fd00:1:2::/48');
  });
});
