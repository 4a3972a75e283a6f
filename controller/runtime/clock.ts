// Time as a dependency: everything in the runtime that waits or reads the time takes a Clock, so
// unit tests drive time by hand (FakeClock) instead of sleeping.

export type TimerHandle = { readonly id: number } | ReturnType<typeof setTimeout>;

export interface Clock {
  /** Milliseconds, monotonic within a process for the real clock. */
  now(): number;
  setTimeout(fn: () => void, ms: number): TimerHandle;
  clearTimeout(handle: TimerHandle): void;
}

export const realClock: Clock = {
  now: () => performance.timeOrigin + performance.now(),
  setTimeout: (fn, ms) => {
    const t = setTimeout(fn, Math.max(0, ms));
    return t;
  },
  clearTimeout: (handle) => {
    clearTimeout(handle as ReturnType<typeof setTimeout>);
  },
};

/** Resolves after ms on the given clock. */
export function sleep(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) {
      resolve();
      return;
    }
    const handle = clock.setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clock.clearTimeout(handle);
      resolve();
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

interface FakeTimer {
  id: number;
  at: number;
  seq: number;
  fn: () => void;
}

/**
 * A clock that only moves when told to. Timers fire in (due time, creation order) order, so
 * tests assert ordering without wall-clock thresholds.
 */
export class FakeClock implements Clock {
  private current: number;
  private timers: FakeTimer[] = [];
  private nextId = 1;

  constructor(start = 1_000_000) {
    this.current = start;
  }

  now(): number {
    return this.current;
  }

  setTimeout(fn: () => void, ms: number): TimerHandle {
    const id = this.nextId++;
    this.timers.push({ id, at: this.current + Math.max(0, ms), seq: id, fn });
    return { id };
  }

  clearTimeout(handle: TimerHandle): void {
    if (typeof handle === 'object' && handle !== null && 'id' in handle) {
      const id = handle.id;
      this.timers = this.timers.filter((t) => t.id !== id);
    }
  }

  /** Number of pending timers. */
  pending(): number {
    return this.timers.length;
  }

  /** Due time of the earliest timer, if any. */
  nextDue(): number | undefined {
    let min: number | undefined;
    for (const t of this.timers) if (min === undefined || t.at < min) min = t.at;
    return min;
  }

  /** Moves time forward by ms, firing every timer that falls due, in order. */
  advance(ms: number): void {
    const target = this.current + ms;
    for (;;) {
      let next: FakeTimer | undefined;
      for (const t of this.timers) {
        if (
          t.at <= target &&
          (next === undefined || t.at < next.at || (t.at === next.at && t.seq < next.seq))
        ) {
          next = t;
        }
      }
      if (!next) break;
      const fire = next;
      this.timers = this.timers.filter((t) => t !== fire);
      this.current = Math.max(this.current, fire.at);
      fire.fn();
    }
    this.current = target;
  }
}
