// Ending every process of one git command. Killing git (simple-git's abort sends SIGINT to the
// git process it spawned) leaves git's transport helper (`git remote-http`, and its own child)
// running as an orphan: a server dripping a byte at a time keeps it, and its connection, alive for
// ever. Each git command that reads the network carries a marker in its environment, which its
// helpers inherit; when its read is aborted, every process carrying that marker is killed.
// (Linux: found through /proc; elsewhere only git itself is stopped.)
import { randomUUID } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';

export const GIT_READ_MARKER = 'STACKFLUX_GIT_READ';

/** A fresh marker value for one git command. */
export function newGitReadMarker(): string {
  return randomUUID();
}

/**
 * Pids of the processes whose environment has GIT_READ_MARKER=marker. Read asynchronously: a
 * machine with many processes made the synchronous walk of /proc hold the event loop (profiled).
 */
export async function processesMarked(marker: string): Promise<number[]> {
  const needle = Buffer.from(`\0${GIT_READ_MARKER}=${marker}\0`);
  let entries: string[];
  try {
    entries = await readdir('/proc');
  } catch {
    return [];
  }
  const pids: number[] = [];
  for (const e of entries) {
    if (!/^[0-9]+$/.test(e)) continue;
    try {
      const env = Buffer.concat([Buffer.from([0]), await readFile(`/proc/${e}/environ`), Buffer.from([0])]);
      if (env.includes(needle)) pids.push(Number(e));
    } catch {
      // gone, or not ours to read
    }
  }
  return pids;
}

/** SIGKILLs every process carrying the marker; again a moment later (a helper starting meanwhile). */
export function killMarked(marker: string): void {
  const kill = async (): Promise<void> => {
    for (const pid of await processesMarked(marker)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {}
    }
  };
  void kill();
  setTimeout(() => void kill(), 1000).unref();
}
