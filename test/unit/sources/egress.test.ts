// The outbound policy's pure parts: which addresses and names are internal, the allow-list, and
// the git URL host a pin is for. (The connect-time checks: test/integration/sources/egress.test.ts.)
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  addressClass,
  addressRefusal,
  EgressRefusedError,
  gitPin,
  gitUrlHost,
  hostRefusal,
  internalName,
  NO_ALLOWANCES,
  parseEgressAllowList,
} from '../../../controller/sources/egress.ts';

describe('addressClass', () => {
  const cases: Array<[string, string | undefined]> = [
    ['127.0.0.1', 'loopback'],
    ['127.0.0.2', 'loopback'],
    ['169.254.169.254', 'link-local'],
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['172.32.0.1', undefined],
    ['192.168.1.1', 'private'],
    ['100.64.0.1', 'shared (CGNAT)'],
    ['100.128.0.1', undefined],
    ['0.0.0.0', 'unspecified'],
    ['224.0.0.1', 'multicast'],
    ['255.255.255.255', 'reserved'],
    ['8.8.8.8', undefined],
    ['140.82.112.3', undefined],
    ['::', 'unspecified'],
    ['::1', 'loopback'],
    ['fe80::1', 'link-local'],
    ['fd00:ec2::254', 'private'],
    ['fc00::1', 'private'],
    ['ff02::1', 'multicast'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:a9fe:a9fe', 'link-local'],
    ['[::ffff:169.254.169.254]', 'link-local'],
    ['64:ff9b::a9fe:a9fe', 'link-local'],
    ['2002:a9fe:a9fe::1', 'link-local'],
    ['::10.0.0.1', 'private'],
    ['2606:4700::1111', undefined],
    ['::ffff:8.8.8.8', undefined],
    ['not-an-address', undefined],
  ];
  for (const [address, want] of cases)
    it(`${address} → ${want ?? 'public'}`, () => assert.equal(addressClass(address), want));
});

describe('internalName', () => {
  for (const name of [
    'localhost',
    'api.localhost',
    'registry',
    'kubernetes.default',
    'kubernetes.default.svc',
    'zot.registry.svc.cluster.local',
    'zot.registry.svc.cluster.local.',
    'metadata.google.internal',
    'printer.local',
  ])
    it(`${name} is internal`, () => assert.ok(internalName(name) !== undefined));
  for (const name of ['ghcr.io', 'registry.example.com', 'github.com'])
    it(`${name} is not`, () => assert.equal(internalName(name), undefined));
});

describe('the allow-list (--allow-source-networks)', () => {
  it('parses CIDRs, bare addresses and host names; refuses anything else naming the entry', () => {
    const p = parseEgressAllowList(
      ' 127.0.0.1/32, 10.0.0.0/8,fd00::/8, ::1 ,git.platform.svc,*.corp.example ',
    );
    assert.deepEqual(
      p.networks.map((n) => n.text),
      ['127.0.0.1/32', '10.0.0.0/8', 'fd00::/8', '::1'],
    );
    assert.deepEqual(p.hosts, ['git.platform.svc', '*.corp.example']);
    assert.deepEqual(parseEgressAllowList(''), NO_ALLOWANCES);
    for (const bad of ['127.0.0.1/33', '10.0.0/8', 'http://x', 'fd00::/129', 'a b'])
      assert.throws(
        () => parseEgressAllowList(bad),
        new RegExp(bad.replace(/[./*:]/g, '\\$&').split(' ')[0] ?? ''),
      );
  });

  it('a listed network allows its addresses only; a listed name allows whatever it resolves to', () => {
    const p = parseEgressAllowList('127.0.0.1/32,10.0.0.0/8,registry.platform.svc');
    assert.equal(addressRefusal(p, '127.0.0.1', '127.0.0.1'), undefined);
    assert.equal(addressRefusal(p, '::ffff:127.0.0.1', '::ffff:127.0.0.1'), undefined);
    assert.equal(addressRefusal(p, 'a.example', '10.9.8.7'), undefined);
    assert.equal(addressRefusal(p, 'registry.platform.svc', '192.168.0.5'), undefined);
    assert.match(
      addressRefusal(p, '127.0.0.2', '127.0.0.2') ?? '',
      /^127\.0\.0\.2 is a loopback address, not in --allow-source-networks$/,
    );
    assert.match(
      addressRefusal(p, 'metadata.example', '169.254.169.254') ?? '',
      /^metadata\.example \(169\.254\.169\.254\) is a link-local address/,
    );
    assert.equal(addressRefusal(NO_ALLOWANCES, 'ghcr.io', '140.82.112.3'), undefined);
  });

  it('hostRefusal: IP literals and internal names before any lookup; public names pass to the connect-time check', () => {
    assert.match(hostRefusal(NO_ALLOWANCES, '[::1]') ?? '', /::1 is a loopback address/);
    assert.match(hostRefusal(NO_ALLOWANCES, '169.254.169.254') ?? '', /link-local/);
    assert.match(hostRefusal(NO_ALLOWANCES, 'kubernetes.default.svc') ?? '', /cluster-internal/);
    assert.equal(hostRefusal(NO_ALLOWANCES, 'registry.example.com'), undefined);
    assert.equal(hostRefusal(parseEgressAllowList('*.svc'), 'zot.registry.svc'), undefined);
  });
});

describe('git URLs', () => {
  it('gitUrlHost reads https, http, ssh:// and scp-like URLs', () => {
    assert.deepEqual(gitUrlHost('https://github.com/a/b.git'), {
      scheme: 'https',
      host: 'github.com',
      port: 443,
    });
    assert.deepEqual(gitUrlHost('http://127.0.0.2:8080/r'), {
      scheme: 'http',
      host: '127.0.0.2',
      port: 8080,
    });
    assert.deepEqual(gitUrlHost('ssh://git@[::1]:2222/r'), { scheme: 'ssh', host: '::1', port: 2222 });
    assert.deepEqual(gitUrlHost('git@169.254.169.254:org/repo'), {
      scheme: 'ssh',
      host: '169.254.169.254',
      port: 22,
    });
  });

  it('gitPin refuses an internal literal or name, and pins a name to the address it checked', async () => {
    await assert.rejects(gitPin('https://169.254.169.254/r', NO_ALLOWANCES), EgressRefusedError);
    await assert.rejects(gitPin('git@10.0.0.1:r', NO_ALLOWANCES), EgressRefusedError);
    await assert.rejects(gitPin('https://git.tenant.svc.cluster.local/r', NO_ALLOWANCES), EgressRefusedError);
    // localhost resolves to loopback: refused by name; allowed by the list, pinned to what was resolved.
    await assert.rejects(gitPin('https://localhost/r', NO_ALLOWANCES), EgressRefusedError);
    assert.equal(await gitPin('http://127.0.0.1:9/r', parseEgressAllowList('127.0.0.1/32')), undefined);
    assert.match(
      (await gitPin('http://localhost:9/r', parseEgressAllowList('localhost'))) ?? '',
      /^localhost:9:(127\.0\.0\.1|\[::1\])$/,
    );
  });
});
