// A controller's own status writes that its informer may not show yet. controller-runtime's
// caches lag the writes a reconcile makes; a reconcile that reads the object again before the
// write's event arrives decides on the state the write replaced (and may do its work twice).
// Each write is recorded with the value it replaced and the one it wrote, per key.

export class OwnWrites {
  private readonly writes = new Map<string, { replaced: string | undefined; wrote: string }>();

  /** `key` was written: `replaced` (what the cache showed) became `wrote`. */
  record(key: string, replaced: string | undefined, wrote: string): void {
    if (replaced === wrote) this.writes.delete(key);
    else this.writes.set(key, { replaced, wrote });
  }

  /**
   * Whether the cache's `seen` value of `key` is older than the last write here. A cache that
   * shows the write (or anything else: another writer) ends the record.
   */
  stale(key: string, seen: string | undefined): boolean {
    const w = this.writes.get(key);
    if (w === undefined) return false;
    if (seen === w.replaced) return true;
    this.writes.delete(key);
    return false;
  }

  forget(key: string): void {
    this.writes.delete(key);
  }
}
