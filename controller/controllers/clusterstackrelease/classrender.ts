// A release whose cluster-class is a Helm chart (csctl): rendered and written to the fleet
// repository by ../releaseclass.ts; without a fleet it cannot be applied (FleetNotConfigured).
import type { RenderedClass } from '../../reconcilers/clusterstackrelease.ts';
import type { StackDescription } from '../../releases/format.ts';
import type { ReleaseSourceAccess } from './sourceaccess.ts';
import type { ClusterStackReleaseDeps } from './types.ts';

/** Look again at a release whose rendered cluster-class could not be written (the fleet may recover). */
export const CLASS_RETRY_MS = 30_000;

export type ClassRenderDeps = Pick<ClusterStackReleaseDeps, 'classes' | 'fetchTree' | 'cacheDir'>;

/** Renders the cluster-class of release `key` at commit `at`. */
export async function renderReleaseClass(
  deps: ClassRenderDeps,
  key: string,
  src: ReleaseSourceAccess,
  at: string,
  description: StackDescription,
): Promise<RenderedClass> {
  if (deps.classes === undefined)
    return {
      ok: false,
      reason: 'FleetNotConfigured',
      message: 'its cluster-class is a Helm chart, which this controller does not render',
    };
  const { source, tag, namespace } = src;
  const name = key.slice(key.indexOf('/') + 1);
  return deps.classes.render({
    treeKey: `${source.url}\n${at}\n${source.path ?? ''}\n${tag}`,
    namespace,
    release: name,
    tag,
    description,
    tree: async () => deps.fetchTree(source, tag, at, deps.cacheDir, await src.credentials()),
  });
}
