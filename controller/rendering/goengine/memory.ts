// A hard memory cap for the engine: Go's module declares its linear memory without a maximum,
// so this rewrites the memory section to declare one. Past it, memory.grow fails inside Go's
// allocator, the Go runtime stops with "out of memory", and the binding reports the limit; the
// process is not harmed (a WebAssembly memory lives outside V8's heap, so --max-old-space-size
// alone would not hold it).

const MEMORY_SECTION = 5;
const PAGE = 65_536;

function readLeb(bytes: Uint8Array, at: number): { value: number; next: number } {
  let value = 0;
  let shift = 0;
  let i = at;
  for (;;) {
    const b = bytes[i++];
    if (b === undefined) throw new Error('truncated WebAssembly module');
    value += (b & 0x7f) * 2 ** shift;
    shift += 7;
    if ((b & 0x80) === 0) return { value, next: i };
  }
}

function leb(value: number): number[] {
  const out: number[] = [];
  let v = value;
  do {
    let b = v % 128;
    v = Math.floor(v / 128);
    if (v > 0) b |= 0x80;
    out.push(b);
  } while (v > 0);
  return out;
}

/** The module with its one memory limited to maxBytes (rounded down to whole pages). */
export function withMemoryMaximum(module: Uint8Array, maxBytes: number): Uint8Array {
  const maxPages = Math.max(1, Math.floor(maxBytes / PAGE));
  let at = 8;
  while (at < module.length) {
    const id = module[at] ?? 0;
    const size = readLeb(module, at + 1);
    const bodyStart = size.next;
    const bodyEnd = bodyStart + size.value;
    if (id === MEMORY_SECTION) {
      const count = readLeb(module, bodyStart);
      if (count.value !== 1) throw new Error('the engine module must declare exactly one memory');
      const flags = module[count.next] ?? 0;
      const min = readLeb(module, count.next + 1);
      if (min.value > maxPages)
        throw new Error(`the engine needs ${Math.ceil((min.value * PAGE) / 2 ** 20)} MiB of memory at least`);
      const body = [...leb(1), (flags & ~1) | 1, ...leb(min.value), ...leb(maxPages)];
      const section = [MEMORY_SECTION, ...leb(body.length), ...body];
      const out = new Uint8Array(at + section.length + (module.length - bodyEnd));
      out.set(module.subarray(0, at), 0);
      out.set(section, at);
      out.set(module.subarray(bodyEnd), at + section.length);
      return out;
    }
    at = bodyEnd;
  }
  throw new Error('the engine module declares no memory');
}
