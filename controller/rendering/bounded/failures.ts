// How the bounded render pool's failures read: a LimitExceeded failure names where the render was
// (the file the process last named, else the addon's folder or the Go engine call).
import { ADDON_ROOT } from '../render.ts';
import { type AddonRenderInput, isCsctlAddonInput, type RenderFailure } from '../types.ts';
import type { Job } from './types.ts';

/** Where a job was when it hit a limit, for the message (the file the process last named wins). */
export function jobPlace(job: Job | undefined): string {
  if (job?.goEngine !== undefined) return `the Go engine (${job.goEngine.op})`;
  return job?.input !== undefined ? addonPlace(job.input) : `${ADDON_ROOT}/`;
}

/** The folder of an addon in its release, for messages. */
export function addonPlace(input: AddonRenderInput): string {
  return isCsctlAddonInput(input) ? input.chartPath : `${ADDON_ROOT}/${input.addon}/`;
}

export function limitFailure(message: string): RenderFailure {
  return { ok: false, reason: 'LimitExceeded', message };
}
