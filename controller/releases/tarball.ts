// Reading a gzipped tar archive (a Helm package, csctl's cluster-addon archive) that came from
// someone we do not trust, without I/O. Bounded while it is read: the gzip stream is inflated
// with a cap on the decompressed bytes (zlib stops at the cap, so a gzip bomb costs at most the
// cap), and the entries are counted. Only plain files and folders: a link, a device or a FIFO is
// refused, as is any path pathProblem refuses, a path given twice and a file that is also a folder. Headers in the forms Go's
// archive/tar (Helm, csctl) and GNU tar write: ustar with prefix, PAX `path`/`size` records and
// GNU long names.
import { gunzipSync } from 'node:zlib';
import { pathProblem } from './paths.ts';

export interface TarLimits {
  /** Headers of any kind (files, folders, extended headers). */
  maxEntries: number;
  /** Bytes the archive may inflate to (the whole tar stream, headers included). */
  maxUnpackedBytes: number;
}

/** One file of an archive: its path ('/'-separated, checked) and content. */
export interface TarFile {
  path: string;
  data: Uint8Array;
}

/** An archive that cannot be read, or that breaks a rule; the message says which. */
export class TarError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TarError';
  }
}

const BLOCK = 512;

/** Inflates gzip data; over `maxBytes` decompressed, a TarError (zlib stops at the cap). */
export function gunzipBounded(bytes: Uint8Array, maxBytes: number): Buffer {
  try {
    return gunzipSync(bytes, { maxOutputLength: maxBytes });
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (err instanceof RangeError || code === 'ERR_BUFFER_TOO_LARGE')
      throw new TarError(`it unpacks to more than ${maxBytes} bytes`);
    throw new TarError(`it is not a gzip stream (${(err as Error).message})`);
  }
}

function field(header: Buffer, from: number, length: number): string {
  const raw = header.subarray(from, from + length);
  const end = raw.indexOf(0);
  return raw.subarray(0, end < 0 ? raw.length : end).toString('utf8');
}

function octal(header: Buffer, from: number, length: number, what: string): number {
  const text = field(header, from, length).trim();
  if (text === '') return 0;
  if (!/^[0-7]+$/.test(text)) throw new TarError(`a header has a malformed ${what} ${JSON.stringify(text)}`);
  const value = Number.parseInt(text, 8);
  if (!Number.isSafeInteger(value)) throw new TarError(`a header's ${what} is out of range`);
  return value;
}

function checksumOk(header: Buffer): boolean {
  const stored = octal(header, 148, 8, 'checksum');
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : (header[i] ?? 0);
  return sum === stored;
}

/** PAX records `<len> <key>=<value>\n`: the keys that change how an entry is read. */
function paxRecords(data: Buffer): Map<string, string> {
  const records = new Map<string, string>();
  let at = 0;
  while (at < data.length) {
    const space = data.indexOf(0x20, at);
    const length = space < 0 ? Number.NaN : Number(data.subarray(at, space).toString('ascii'));
    if (!Number.isSafeInteger(length) || length <= 0 || at + length > data.length)
      throw new TarError('a PAX extended header is malformed');
    const record = data.subarray(space + 1, at + length - 1).toString('utf8');
    const eq = record.indexOf('=');
    if (eq > 0) records.set(record.slice(0, eq), record.slice(eq + 1));
    at += length;
  }
  return records;
}

const REFUSED_TYPES: Record<string, string> = {
  '1': 'a hard link',
  '2': 'a symbolic link',
  '3': 'a character device',
  '4': 'a block device',
  '6': 'a FIFO',
};

/**
 * The files of a tar stream (already inflated), in archive order; folders are checked but not
 * returned. Throws TarError naming the entry and what is wrong with it.
 */
export function readTar(tar: Buffer, limits: Pick<TarLimits, 'maxEntries'>): TarFile[] {
  const files: TarFile[] = [];
  const seen = new Set<string>();
  /** Folders the files are in: a file of the same path would make the tree ambiguous. */
  const folders = new Set<string>();
  let entries = 0;
  let longName: string | undefined;
  let pax = new Map<string, string>();
  for (let at = 0; at < tar.length; ) {
    const header = tar.subarray(at, at + BLOCK);
    if (header.every((b) => b === 0)) break;
    if (header.length < BLOCK)
      throw new TarError(`the header at byte ${at} is cut off (the archive is truncated)`);
    entries += 1;
    if (entries > limits.maxEntries) throw new TarError(`it has more than ${limits.maxEntries} entries`);
    if (!checksumOk(header))
      throw new TarError(`the header at byte ${at} has a wrong checksum (not a tar archive?)`);
    const type = String.fromCharCode(header[156] ?? 0);
    const prefix = field(header, 345, 155);
    const headerName = prefix !== '' ? `${prefix}/${field(header, 0, 100)}` : field(header, 0, 100);
    const paxSize = pax.get('size');
    const size = paxSize !== undefined ? Number(paxSize) : octal(header, 124, 12, 'size');
    if (!Number.isSafeInteger(size) || size < 0)
      throw new TarError(`entry ${JSON.stringify(headerName)} has a bad size`);
    const body = at + BLOCK;
    if (body + size > tar.length)
      throw new TarError(`entry ${JSON.stringify(headerName)} is cut off (the archive is truncated)`);
    const data = tar.subarray(body, body + size);
    at = body + Math.ceil(size / BLOCK) * BLOCK;

    // Headers that describe the next entry.
    if (type === 'x') {
      pax = paxRecords(data);
      continue;
    }
    if (type === 'g') continue; // global PAX defaults: nothing stackflux reads
    if (type === 'L') {
      longName = data.toString('utf8').replace(/\0+$/, '');
      continue;
    }
    if (type === 'K') continue; // the long link target of a link, refused below anyway

    const name = pax.get('path') ?? longName ?? headerName;
    longName = undefined;
    pax = new Map();
    const quoted = JSON.stringify(name);
    const refused = REFUSED_TYPES[type];
    if (refused !== undefined)
      throw new TarError(`entry ${quoted} is ${refused}; only files and folders are allowed`);
    const isDir = type === '5';
    if (!isDir && type !== '0' && type !== '\0' && type !== '7')
      throw new TarError(`entry ${quoted} has the unsupported type ${JSON.stringify(type)}`);
    const path = isDir ? name.replace(/\/+$/, '') : name;
    const problem = pathProblem(path);
    if (problem !== undefined) throw new TarError(`entry ${problem}`);
    if (isDir) continue;
    if (seen.has(path)) throw new TarError(`entry ${quoted} appears twice`);
    if (folders.has(path)) throw new TarError(`entry ${quoted} is a file and a folder of other entries`);
    const parts = path.split('/');
    for (let i = 1; i < parts.length; i++) {
      const folder = parts.slice(0, i).join('/');
      if (seen.has(folder))
        throw new TarError(`entry ${quoted} is below ${JSON.stringify(folder)}, which is a file`);
      folders.add(folder);
    }
    seen.add(path);
    files.push({ path, data });
  }
  return files;
}

/** The files of a .tgz: gunzipBounded + readTar. */
export function readTarGz(bytes: Uint8Array, limits: TarLimits): TarFile[] {
  return readTar(gunzipBounded(bytes, limits.maxUnpackedBytes), limits);
}
