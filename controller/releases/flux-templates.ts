// Loads the Flux object templates from flux-templates/ (read once at startup; the renderer in
// flux.ts is pure and takes the texts as data).
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { FLUX_TEMPLATE_FILES, type FluxTemplates } from './flux.ts';

export const DEFAULT_FLUX_TEMPLATES_DIR = join(
  dirname(fileURLToPath(import.meta.url)),
  '..',
  '..',
  'flux-templates',
);

export function loadFluxTemplates(dir: string = DEFAULT_FLUX_TEMPLATES_DIR): FluxTemplates {
  const read = (key: keyof FluxTemplates): string =>
    readFileSync(join(dir, FLUX_TEMPLATE_FILES[key]), 'utf8');
  return {
    releaseGitRepository: read('releaseGitRepository'),
    releaseKustomization: read('releaseKustomization'),
    fleetGitRepository: read('fleetGitRepository'),
    addonKustomization: read('addonKustomization'),
  };
}
