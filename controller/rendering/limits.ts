// Resource limits of addon rendering (issue 11, defect 3). Templates come from release authors, so
// a render must not be able to exhaust the controller: the pure renderer caps the size of what it
// returns (per addon: files and values, ./budget.ts) and the size of what one helper call may
// produce; the bounded runner (./bounded.ts) adds a time budget and a memory cap by rendering in a
// child process that is killed when it overruns. A breach is a RenderFailure with reason LimitExceeded whose message
// names the file, the limit and the flag that sets it.

export interface RenderLimits {
  /**
   * Total bytes (UTF-8) one addon's render may return: its files, its merged values and a Helm
   * addon's rendered values together; the objects parsed from its files on their own. Flag:
   * --render-max-output.
   */
  maxOutputBytes: number;
  /** Wall-clock budget of one addon's render in the worker. Flag: --render-timeout. */
  timeoutMs: number;
  /** Heap of one render process (MiB); a render that needs more is stopped. Flag: --render-max-memory. */
  maxMemoryMb: number;
}

export const DEFAULT_RENDER_LIMITS: Readonly<RenderLimits> = {
  maxOutputBytes: 8 * 1024 * 1024,
  timeoutMs: 5_000,
  maxMemoryMb: 256,
};

/** Widest `indent`/`nindent` a template may ask for (Helm charts use single or double digits). */
export const MAX_INDENT_WIDTH = 256;
/** Largest string one helper call may return (indent of a large text, b64enc, toYaml, ...). */
export const MAX_HELPER_OUTPUT = 4 * 1024 * 1024;

/** "8 MiB", "512 KiB", "100 B": limits in messages. */
export function formatBytes(n: number): string {
  if (n >= 1024 * 1024 && n % (1024 * 1024) === 0) return `${n / (1024 * 1024)} MiB`;
  if (n >= 1024 && n % 1024 === 0) return `${n / 1024} KiB`;
  return `${n} B`;
}

/** "5s", "250ms". */
export function formatMs(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;
}
