// CIDR arithmetic for the template helpers (cidrHost, cidrPrefix, cidrNetmask, cidrNetwork).
// IPv4 and IPv6, BigInt based, no dependencies. Semantics follow Terraform's cidrhost():
// host number 0 is the network address, negative numbers count back from the last address.

interface ParsedCidr {
  family: 4 | 6;
  /** Network address (host bits cleared). */
  network: bigint;
  prefix: number;
  bits: 32 | 128;
}

function parseIPv4(text: string): bigint | undefined {
  const parts = text.split('.');
  if (parts.length !== 4) return undefined;
  let value = 0n;
  for (const part of parts) {
    if (!/^\d{1,3}$/.test(part)) return undefined;
    const octet = Number(part);
    if (octet > 255) return undefined;
    value = (value << 8n) | BigInt(octet);
  }
  return value;
}

function parseIPv6(text: string): bigint | undefined {
  let head = text;
  let tailV4: bigint | undefined;
  // An embedded IPv4 tail, e.g. ::ffff:10.0.0.1
  const lastColon = head.lastIndexOf(':');
  if (head.includes('.') && lastColon >= 0) {
    tailV4 = parseIPv4(head.slice(lastColon + 1));
    if (tailV4 === undefined) return undefined;
    head = `${head.slice(0, lastColon + 1)}0:0`;
  }
  const halves = head.split('::');
  if (halves.length > 2) return undefined;
  const parseGroups = (s: string): string[] => (s === '' ? [] : s.split(':'));
  const left = parseGroups(halves[0] ?? '');
  const right = halves.length === 2 ? parseGroups(halves[1] ?? '') : [];
  const missing = 8 - left.length - right.length;
  if (halves.length === 2 ? missing < 1 : missing !== 0) return undefined;
  const groups = [...left, ...Array<string>(halves.length === 2 ? missing : 0).fill('0'), ...right];
  let value = 0n;
  for (const group of groups) {
    if (!/^[0-9a-fA-F]{1,4}$/.test(group)) return undefined;
    value = (value << 16n) | BigInt(Number.parseInt(group, 16));
  }
  if (tailV4 !== undefined) value = (value & ~0xffffffffn) | tailV4;
  return value;
}

export function parseCidr(cidr: string): ParsedCidr {
  if (typeof cidr !== 'string') throw new Error(`expected a CIDR string, got ${typeof cidr}`);
  const slash = cidr.indexOf('/');
  if (slash < 0) throw new Error(`"${cidr}" is not a CIDR (address/prefix)`);
  const addressText = cidr.slice(0, slash);
  const prefixText = cidr.slice(slash + 1);
  const family = addressText.includes(':') ? 6 : 4;
  const bits = family === 4 ? 32 : 128;
  const address = family === 4 ? parseIPv4(addressText) : parseIPv6(addressText);
  if (address === undefined) throw new Error(`"${cidr}" has an invalid IPv${family} address`);
  if (!/^\d{1,3}$/.test(prefixText) || Number(prefixText) > bits) {
    throw new Error(`"${cidr}" has an invalid prefix length`);
  }
  const prefix = Number(prefixText);
  const hostBits = BigInt(bits - prefix);
  const network = (address >> hostBits) << hostBits;
  return { family, network, prefix, bits };
}

function formatIPv4(value: bigint): string {
  return [24n, 16n, 8n, 0n].map((shift) => String((value >> shift) & 0xffn)).join('.');
}

/** RFC 5952 text form: lower case, leading zeros dropped, the longest run of zero groups as "::". */
function formatIPv6(value: bigint): string {
  const groups: number[] = [];
  for (let i = 7; i >= 0; i--) groups.push(Number((value >> BigInt(i * 16)) & 0xffffn));
  let bestStart = -1;
  let bestLength = 0;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLength && j - i > 1) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart < 0) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLength).join(':')}`;
}

function formatAddress(family: 4 | 6, value: bigint): string {
  return family === 4 ? formatIPv4(value) : formatIPv6(value);
}

function toBigInt(hostNumber: unknown): bigint {
  if (typeof hostNumber === 'bigint') return hostNumber;
  if (typeof hostNumber === 'number' && Number.isInteger(hostNumber)) return BigInt(hostNumber);
  if (typeof hostNumber === 'string' && /^-?\d+$/.test(hostNumber)) return BigInt(hostNumber);
  throw new Error(`host number must be an integer, got ${JSON.stringify(hostNumber)}`);
}

/** The address with host number `hostNumber` in `cidr` (0 = network address, -1 = last address). */
export function cidrHost(cidr: string, hostNumber: unknown): string {
  const parsed = parseCidr(cidr);
  const size = 1n << BigInt(parsed.bits - parsed.prefix);
  const n = toBigInt(hostNumber);
  const offset = n < 0n ? size + n : n;
  if (offset < 0n || offset >= size) {
    throw new Error(`host number ${n} does not fit in ${cidr} (${size} addresses)`);
  }
  return formatAddress(parsed.family, parsed.network + offset);
}

export function cidrPrefix(cidr: string): number {
  return parseCidr(cidr).prefix;
}

/** Dotted netmask of an IPv4 CIDR, e.g. 255.255.0.0 for /16. */
export function cidrNetmask(cidr: string): string {
  const parsed = parseCidr(cidr);
  if (parsed.family !== 4) throw new Error(`cidrNetmask only supports IPv4, got ${cidr}`);
  const mask = ((1n << 32n) - 1n) ^ ((1n << BigInt(32 - parsed.prefix)) - 1n);
  return formatIPv4(mask);
}

/** The canonical network of a CIDR, e.g. 10.1.2.3/16 → 10.1.0.0/16. */
export function cidrNetwork(cidr: string): string {
  const parsed = parseCidr(cidr);
  return `${formatAddress(parsed.family, parsed.network)}/${parsed.prefix}`;
}
