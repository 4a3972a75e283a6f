// What every source hands the layers above it: the error it throws (a reason for the condition and
// a message naming what to fix) and the limits of one release tree. A leaf module, so that the
// release readers (controller/releases/) can throw a source's error without importing a source.

export class SourceError extends Error {
  readonly reason: string;
  constructor(reason: string, message: string) {
    super(message);
    this.name = 'SourceError';
    this.reason = reason;
  }
}

/**
 * Limits of one release tree (the files below the stack path): a release is a few dozen YAML
 * files, so these are generous, and they bound what one release can make the controller hold in
 * memory, write to its cache and render. A tree over a limit is an invalid release (InvalidRelease).
 */
export const RELEASE_TREE_LIMITS: Readonly<ReleaseTreeLimits> = {
  maxFiles: 2000,
  maxBytes: 20 * 1024 * 1024,
};

export interface ReleaseTreeLimits {
  /** Files below the stack path. */
  maxFiles: number;
  /** Sum of their sizes in bytes. */
  maxBytes: number;
}
