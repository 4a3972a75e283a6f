// Where an outbound source request may go (one policy for Git, GitHub, OCI and chart repositories).
// A tenant chooses URLs (a repository, a registry whose Bearer realm and blob redirects name more
// URLs, chart repositories), so the controller must not become its proxy into the platform: a
// destination that resolves to loopback, link-local (cloud metadata), private, shared (CGNAT),
// unspecified, multicast or reserved addresses, or a cluster-internal name, is refused unless the
// platform's `--allow-source-networks` lists it.
//
// The check holds when the connection is made, not when the URL is read: fetch clients connect
// through an undici Agent whose `lookup` checks every address DNS answers (a name that resolves to
// a public address when checked and to 169.254.169.254 a moment later still cannot reach it); git
// gets the checked address pinned with http.curloptResolve (gitPin). An IP literal never reaches a
// lookup, so it is checked before the request.
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { isIP } from 'node:net';
import { Agent } from 'undici';
import { SourceError } from './contract.ts';

/** The flag, also read from STACKFLUX_ALLOW_SOURCE_NETWORKS (command.ts reads every flag so). */
export const ALLOW_FLAG = '--allow-source-networks';
export const ALLOW_ENV = 'STACKFLUX_ALLOW_SOURCE_NETWORKS';

interface Cidr {
  /** 16 bytes: IPv4 as IPv4-mapped IPv6, so one comparison serves both. */
  bytes: Uint8Array;
  /** Prefix length over the 128 bits. */
  bits: number;
  text: string;
}

export interface EgressPolicy {
  /** Networks the platform allows whatever their class. */
  readonly networks: readonly Cidr[];
  /** Host names (or *.domain) allowed whatever they resolve to: the platform vouches for their DNS. */
  readonly hosts: readonly string[];
}

export const NO_ALLOWANCES: EgressPolicy = { networks: [], hosts: [] };

/** A request the policy refuses; the message names the destination and the flag. */
export class EgressRefusedError extends SourceError {
  constructor(message: string) {
    super('EgressRefused', message);
  }
}

// --- addresses ----------------------------------------------------------------------------------

function ipv4Bytes(text: string): number[] | undefined {
  const parts = text.split('.');
  if (parts.length !== 4) return undefined;
  const out = parts.map((p) => (/^[0-9]{1,3}$/.test(p) ? Number(p) : 256));
  return out.every((n) => n <= 255) ? out : undefined;
}

/** 16 bytes of an IPv4 or IPv6 address (IPv4 as ::ffff:a.b.c.d); undefined when it is neither. */
export function addressBytes(address: string): Uint8Array | undefined {
  const text = address.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  const v4 = isIP(text) === 4 ? ipv4Bytes(text) : undefined;
  if (v4 !== undefined) return Uint8Array.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, ...v4]);
  if (isIP(text) !== 6) return undefined;
  let groups = text.split(':');
  const tail = groups.at(-1) ?? '';
  const tailV4 = tail.includes('.') ? ipv4Bytes(tail) : undefined;
  if (tailV4 !== undefined)
    groups = [
      ...groups.slice(0, -1),
      ((tailV4[0] ?? 0) * 256 + (tailV4[1] ?? 0)).toString(16),
      ((tailV4[2] ?? 0) * 256 + (tailV4[3] ?? 0)).toString(16),
    ];
  const gap = groups.indexOf('');
  if (gap >= 0) {
    const head = groups.slice(0, gap).filter((g) => g !== '');
    const rest = groups.slice(gap).filter((g) => g !== '');
    groups = [...head, ...Array<string>(8 - head.length - rest.length).fill('0'), ...rest];
  }
  const bytes = new Uint8Array(16);
  groups.forEach((g, i) => {
    const n = Number.parseInt(g, 16);
    bytes[i * 2] = n >> 8;
    bytes[i * 2 + 1] = n & 0xff;
  });
  return bytes;
}

function inPrefix(bytes: Uint8Array, prefix: Uint8Array, bits: number): boolean {
  for (let i = 0; i < bits; i++) {
    const mask = 0x80 >> (i % 8);
    if (((bytes[i >> 3] ?? 0) & mask) !== ((prefix[i >> 3] ?? 0) & mask)) return false;
  }
  return true;
}

const v4 = (a: number, b = 0): Uint8Array =>
  Uint8Array.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, 0, 0]);
const v6 = (...head: number[]): Uint8Array => {
  const out = new Uint8Array(16);
  out.set(head);
  return out;
};

/** Address ranges no source of a tenant needs, each with the word a message uses (first match wins). */
const CLASSES: ReadonlyArray<readonly [Uint8Array, number, string]> = [
  [v4(0), 96 + 8, 'unspecified'],
  [v4(127), 96 + 8, 'loopback'],
  [v4(10), 96 + 8, 'private'],
  [v4(172, 16), 96 + 12, 'private'],
  [v4(192, 168), 96 + 16, 'private'],
  [v4(100, 64), 96 + 10, 'shared (CGNAT)'],
  [v4(169, 254), 96 + 16, 'link-local'],
  [v4(192, 0), 96 + 24, 'reserved'],
  [v4(198, 18), 96 + 15, 'reserved'],
  [v4(224), 96 + 4, 'multicast'],
  [v4(240), 96 + 4, 'reserved'],
  [v6(), 128, 'unspecified'],
  [v6(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1), 128, 'loopback'],
  [v6(0xfe, 0x80), 10, 'link-local'],
  [v6(0xfe, 0xc0), 10, 'private'],
  [v6(0xfc), 7, 'private'],
  [v6(0xff), 8, 'multicast'],
];

/** IPv4 addresses that IPv6 forms carry inside them (NAT64, 6to4, IPv4-compatible): classified as IPv4. */
function embeddedIpv4(bytes: Uint8Array): Uint8Array | undefined {
  const at = (o: number): Uint8Array =>
    Uint8Array.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, ...bytes.subarray(o, o + 4)]);
  if (inPrefix(bytes, v6(0, 0x64, 0xff, 0x9b), 96)) return at(12);
  if (inPrefix(bytes, v6(0x20, 0x02), 16)) return at(2);
  if (inPrefix(bytes, v6(), 96) && !inPrefix(bytes, v6(), 127)) return at(12);
  return undefined;
}

/**
 * Why an address is not for tenant sources ("loopback", "link-local", "private", ...); undefined
 * for a public address or for text that is no address.
 */
export function addressClass(address: string): string | undefined {
  const direct = addressBytes(address);
  if (direct === undefined) return undefined;
  const bytes = embeddedIpv4(direct) ?? direct;
  return CLASSES.find(([prefix, bits]) => inPrefix(bytes, prefix, bits))?.[2];
}

// --- names --------------------------------------------------------------------------------------

/**
 * Names that reach inside the cluster or the node: a single label (the pod's DNS search path makes
 * it a Service), localhost, and the cluster-internal and internal-only domains (metadata.google.internal).
 */
export function internalName(host: string): string | undefined {
  const h = host.toLowerCase().replace(/\.$/, '');
  if (!h.includes('.')) return h === 'localhost' ? 'loopback' : 'cluster-internal (a single-label name)';
  if (h.endsWith('.localhost')) return 'loopback';
  for (const suffix of ['.svc', '.cluster.local', '.local', '.internal', '.svc.cluster.local'])
    if (h.endsWith(suffix)) return `cluster-internal (*${suffix})`;
  if (h === 'kubernetes.default') return 'cluster-internal';
  return undefined;
}

// --- the allow-list -----------------------------------------------------------------------------

const HOST_ENTRY = /^(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/;

function parseCidr(entry: string): Cidr {
  const [addr = '', bitsText] = entry.split('/');
  const bytes = addressBytes(addr);
  if (bytes === undefined) throw new Error(`"${entry}" is not an address, CIDR or host name`);
  const isV4 = isIP(addr) === 4;
  const max = isV4 ? 32 : 128;
  const bits = bitsText === undefined ? max : /^[0-9]{1,3}$/.test(bitsText) ? Number(bitsText) : -1;
  if (bits < 0 || bits > max) throw new Error(`"${entry}" has no prefix length 0-${max}`);
  return { bytes, bits: isV4 ? bits + 96 : bits, text: entry };
}

/**
 * `--allow-source-networks` text: comma-separated CIDRs (`127.0.0.1/32`, `10.0.0.0/8`, `fd00::/8`;
 * an address alone is /32 or /128) and host names (`git.platform.svc`, `*.corp.example`). Throws
 * naming a bad entry.
 */
export function parseEgressAllowList(text: string): EgressPolicy {
  const networks: Cidr[] = [];
  const hosts: string[] = [];
  for (const raw of text.split(',')) {
    const entry = raw.trim().toLowerCase();
    if (entry === '') continue;
    if (/^[0-9.]+(\/.*)?$/.test(entry) || entry.includes(':')) networks.push(parseCidr(entry));
    else if (HOST_ENTRY.test(entry)) hosts.push(entry);
    else throw new Error(`"${entry}" is not an address, CIDR or host name`);
  }
  return { networks, hosts };
}

function hostListed(policy: EgressPolicy, host: string): boolean {
  const h = host.toLowerCase().replace(/\.$/, '');
  return policy.hosts.some((e) => (e.startsWith('*.') ? h.endsWith(e.slice(1)) : h === e));
}

function networkListed(policy: EgressPolicy, address: string): boolean {
  const bytes = addressBytes(address);
  return bytes !== undefined && policy.networks.some((n) => inPrefix(bytes, n.bytes, n.bits));
}

const notListed = `not in ${ALLOW_FLAG}`;

/** Why the policy refuses `address` reached as `host`; undefined when it may be reached. */
export function addressRefusal(policy: EgressPolicy, host: string, address: string): string | undefined {
  if (hostListed(policy, host) || networkListed(policy, address)) return undefined;
  const cls = addressClass(address);
  if (cls === undefined) return undefined;
  const shown = host === address ? address : `${host} (${address})`;
  return `${shown} is a ${cls} address, ${notListed}`;
}

/**
 * Why the policy refuses a destination before any lookup: an IP literal of a refused class, or a
 * cluster-internal name. A public name passes here; its addresses are checked when it connects.
 */
export function hostRefusal(policy: EgressPolicy, host: string): string | undefined {
  const h = host.replace(/^\[|\]$/g, '');
  if (isIP(h) !== 0) return addressRefusal(policy, h, h);
  if (hostListed(policy, h)) return undefined;
  const cls = internalName(h);
  return cls === undefined ? undefined : `${h} is a ${cls} name, ${notListed}`;
}

// --- the process's policy -----------------------------------------------------------------------

let configured: EgressPolicy | undefined;

/** Sets the policy of this process (`stackflux run` and the offline commands, from the flag). */
export function configureEgress(policy: EgressPolicy): void {
  configured = policy;
}

/**
 * The policy of this process: the flag's, or when nothing configured it (a library use) the
 * variable the flag is read from, so an embedding process follows the same setting.
 */
export function currentEgressPolicy(): EgressPolicy {
  configured ??= parseEgressAllowList(process.env[ALLOW_ENV] ?? '');
  return configured;
}

// --- connect-time checks ------------------------------------------------------------------------

type LookupCallback = (
  err: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

/** Resolves a name to every address (dns.lookup with all: true); injectable for tests of rebinding. */
export type Resolver = (hostname: string, options: Record<string, unknown>) => Promise<LookupAddress[]>;

const systemResolver: Resolver = (hostname, options) =>
  new Promise((resolve, reject) =>
    dnsLookup(hostname, { ...options, all: true }, (err, addresses) =>
      err === null ? resolve(addresses) : reject(err),
    ),
  );

/**
 * A `lookup` for net/tls.connect that resolves as dns.lookup does and refuses unless every address
 * may be reached (one refused address refuses the name: which one a connection would use is not
 * ours to choose). Called for every connection, so what is checked is what is connected to.
 */
export function egressLookup(policy: () => EgressPolicy, resolver: Resolver = systemResolver) {
  return (hostname: string, options: unknown, callback: LookupCallback): void => {
    const opts = (typeof options === 'object' && options !== null ? options : {}) as Record<string, unknown>;
    const named = hostRefusal(policy(), hostname);
    if (named !== undefined) {
      callback(new EgressRefusedError(named), '');
      return;
    }
    resolver(hostname, opts).then(
      (addresses) => {
        const p = policy();
        for (const a of addresses) {
          const refusal = addressRefusal(p, hostname, a.address);
          if (refusal !== undefined) return callback(new EgressRefusedError(refusal), '');
        }
        const first = addresses[0];
        if (opts.all === true) return callback(null, addresses);
        if (first === undefined)
          return callback(Object.assign(new Error(`${hostname}: no address`), { code: 'ENOTFOUND' }), '');
        return callback(null, first.address, first.family);
      },
      (err: NodeJS.ErrnoException) => callback(err, ''),
    );
  };
}

let agent: Agent | undefined;

/** One connection pool for every source request, its lookup checked against the process's policy. */
function egressAgent(): Agent {
  agent ??= new Agent({ connect: { lookup: egressLookup(currentEgressPolicy) } });
  return agent;
}

/** The EgressRefusedError an error carries (fetch wraps a connect error as its cause). */
export function egressRefusal(err: unknown): EgressRefusedError | undefined {
  for (let e = err, depth = 0; e !== undefined && e !== null && depth < 5; depth++) {
    if (e instanceof EgressRefusedError) return e;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

function urlOf(input: string | URL | Request): URL {
  return new URL(input instanceof Request ? input.url : input.toString());
}

/**
 * fetch for source requests: redirects never followed (each client checks and follows its own),
 * an IP literal or internal name refused before the request, every resolved address checked when
 * the connection is made.
 */
export const egressFetch: typeof globalThis.fetch = async (input, init) => {
  const url = urlOf(input);
  const refusal = hostRefusal(currentEgressPolicy(), url.hostname);
  if (refusal !== undefined) throw new EgressRefusedError(refusal);
  const options = { ...init, redirect: 'manual', dispatcher: egressAgent() } as RequestInit;
  try {
    return await globalThis.fetch(input, options);
  } catch (err) {
    const refused = egressRefusal(err);
    if (refused !== undefined) throw refused;
    throw err;
  }
};

// --- git ----------------------------------------------------------------------------------------

/** host and port of a git URL (https, http, ssh:// or scp-like user@host:path); undefined otherwise. */
export function gitUrlHost(url: string): { scheme: string; host: string; port: number } | undefined {
  const scp = /^[^/@:]+@([^/:[\]]+|\[[^\]]+\]):(?!\/\/)/.exec(url);
  if (scp !== null && !/^[a-z][a-z0-9+.-]*:\/\//i.test(url))
    return { scheme: 'ssh', host: (scp[1] ?? '').replace(/^\[|\]$/g, ''), port: 22 };
  const u = URL.parse(url);
  if (u === null || !['http:', 'https:', 'ssh:'].includes(u.protocol)) return undefined;
  const scheme = u.protocol.slice(0, -1);
  const port = u.port !== '' ? Number(u.port) : scheme === 'https' ? 443 : scheme === 'http' ? 80 : 22;
  return { scheme, host: u.hostname.replace(/^\[|\]$/g, ''), port };
}

/**
 * Checks a git URL's host against the policy and, for http(s), the `http.curloptResolve` entry
 * that pins git to the checked address (git resolves again otherwise, and could get another
 * answer). ssh gets the check only: its connection is ssh's own. Throws EgressRefusedError.
 */
export async function gitPin(
  url: string,
  policy: EgressPolicy = currentEgressPolicy(),
): Promise<string | undefined> {
  const target = gitUrlHost(url);
  if (target === undefined) return undefined;
  const named = hostRefusal(policy, target.host);
  if (named !== undefined) throw new EgressRefusedError(named);
  if (isIP(target.host) !== 0) return undefined;
  const addresses = await new Promise<LookupAddress[]>((resolve, reject) =>
    dnsLookup(target.host, { all: true }, (err, a) => (err === null ? resolve(a) : reject(err))),
  ).catch((err: unknown) => {
    // Not left to git: it would resolve again, and might get an answer this check never saw.
    const code = (err as { code?: unknown }).code;
    throw new SourceError(
      'SourceUnreachable',
      `${target.host} does not resolve${typeof code === 'string' && /^[A-Z_]+$/.test(code) ? ` (${code})` : ''}`,
    );
  });
  for (const a of addresses) {
    const refusal = addressRefusal(policy, target.host, a.address);
    if (refusal !== undefined) throw new EgressRefusedError(refusal);
  }
  if (target.scheme === 'ssh') return undefined;
  const first = addresses[0] as LookupAddress;
  const address = first.family === 6 ? `[${first.address}]` : first.address;
  return `${target.host}:${target.port}:${address}`;
}
