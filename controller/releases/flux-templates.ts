// Loads the Flux object templates from flux-templates/ (read once at startup; the renderer in
// flux.ts is pure and takes the texts as data).
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { FLUX_TEMPLATE_FILES, type FluxTemplates } from './flux.ts';

const here = dirname(fileURLToPath(import.meta.url));
/** flux-templates/ at the package root: two levels up from source, three from the build output (dist/). */
export const DEFAULT_FLUX_TEMPLATES_DIR =
  [join(here, '..', '..', 'flux-templates'), join(here, '..', '..', '..', 'flux-templates')].find((d) =>
    existsSync(d),
  ) ?? join(here, '..', '..', 'flux-templates');

/**
 * The templates of `dir`. A file the folder lacks is the bundled one: a --flux-templates folder
 * written for an earlier stackflux keeps working when a release adds a template (e.g. the
 * pre-condition gate's), instead of the controller refusing to start.
 */
export function loadFluxTemplates(dir: string = DEFAULT_FLUX_TEMPLATES_DIR): FluxTemplates {
  const read = (key: keyof FluxTemplates): string => {
    const own = join(dir, FLUX_TEMPLATE_FILES[key]);
    return readFileSync(
      existsSync(own) ? own : join(DEFAULT_FLUX_TEMPLATES_DIR, FLUX_TEMPLATE_FILES[key]),
      'utf8',
    );
  };
  return {
    releaseGitRepository: read('releaseGitRepository'),
    releaseKustomization: read('releaseKustomization'),
    fleetGitRepository: read('fleetGitRepository'),
    addonKustomization: read('addonKustomization'),
    addonPreconditionKustomization: read('addonPreconditionKustomization'),
    addonHelmRelease: read('addonHelmRelease'),
    addonHelmRepository: read('addonHelmRepository'),
    addonOciRepository: read('addonOciRepository'),
  };
}
