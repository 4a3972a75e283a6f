// One entry point for every addon render, whatever the release format: the reconcilers, the
// render processes and `stackflux render` call this, so limits and fairness hold on every path.
import { renderCsctlAddon } from './csctl.ts';
import { renderAddon } from './render.ts';
import { type AddonRenderInput, isCsctlAddonInput, type RenderOptions, type RenderResult } from './types.ts';

/** Renders a native addon with renderAddon, a csctl one with renderCsctlAddon. */
export function renderAnyAddon(input: AddonRenderInput, options: RenderOptions = {}): RenderResult {
  return isCsctlAddonInput(input) ? renderCsctlAddon(input, options) : renderAddon(input, options);
}
