// Addon rendering: pure functions from a release tree, a stack and a Cluster to the files and
// objects Flux applies into the workload cluster. See stacks/README.md for the author's view.

export { renderAnyAddon } from './addon.ts';
export {
  answerGoEngineCalls,
  DEFAULT_COOL_DOWN_AFTER,
  DEFAULT_COOL_DOWN_MS,
  goEngineMemo,
  RENDER_CACHE_BYTES,
  RENDER_NICENESS,
  RenderCache,
  RenderPool,
  type RenderPoolOptions,
  type RenderRequestOptions,
  renderKey,
  slimInput,
  withBoundedGoEngine,
  withBoundedRenders,
  withPooledRendering,
} from './bounded.ts';
export { cidrHost, cidrNetmask, cidrNetwork, cidrPrefix } from './cidr.ts';
export { CSO_ADDON_NAMESPACE, CSO_ADDON_RELEASE_NAME, csctlAddonValues, renderCsctlAddon } from './csctl.ts';
export { HELPERS } from './helpers.ts';
export {
  DEFAULT_RENDER_LIMITS,
  formatBytes,
  formatMs,
  MAX_HELPER_OUTPUT,
  MAX_INDENT_WIDTH,
  type RenderLimits,
} from './limits.ts';
export { objectId, parseObjects } from './output.ts';
export {
  ADDON_ROOT,
  type AddonOrderEntry,
  addonFiles,
  addonOrder,
  CHART_FILE,
  checkAddonGraph,
  dependsOnOf,
  renderAddon,
  SCHEMA_FILE,
  VALUES_FILE,
  VALUES_TEMPLATE_FILE,
} from './render.ts';
export { renderTemplate, TemplateError } from './template.ts';
export type {
  AddonRenderer,
  HelmAddon,
  KubernetesObject,
  PlainObject,
  RenderAddonInput,
  RenderFailure,
  RenderFailureReason,
  RenderOptions,
  RenderResult,
  RenderSuccess,
  ValuesByAddon,
} from './types.ts';
export { type AddonRenderInput, type CsctlAddonInput, isCsctlAddonInput } from './types.ts';
export { mergeAll, mergeValues } from './values.ts';
