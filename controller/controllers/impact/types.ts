// Types shared by the impact controller's collaborators (this folder) and its composition
// (../impact.ts). The lowest layer of the controller: it imports no collaborator.
import type { FleetSettings } from '../../reconcilers/clusteraddon.ts';
import type { FluxTemplates } from '../../releases/flux.ts';
import type { TenancyPolicy } from '../../releases/tenancy.ts';
import type { RenderPoolOptions } from '../../rendering/index.ts';
import type { Clock } from '../../runtime/clock.ts';
import type { ImpactSources } from '../impactsources.ts';

export interface ImpactControllerOptions {
  namespace?: string;
  cacheDir: string;
  /** The ClusterAddon controller's fleet: the branches to compare with, rendered as it renders. */
  fleet: FleetSettings;
  /** Secret with the fleet repository's credentials (as the ClusterAddon controller reads it). */
  fleetSecret?: { namespace: string; name: string };
  templates: FluxTemplates;
  tenancy?: TenancyPolicy;
  render?: RenderPoolOptions;
  /** The ClusterAddon controller's render seed key: the impact renders what the live render will. */
  renderSeedKey?: string;
  clock?: Clock;
  /**
   * The pollers' listings and the release controller's background tree reads (absent: the
   * snapshot lists and fetches on its own, as `stackflux diff` does).
   */
  sources?: ImpactSources;
}
